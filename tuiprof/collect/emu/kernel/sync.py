"""Cross-lane semantics of the interpreter: warp collectives (shfl, vote, match, redux,
bar.warp.sync) and CTA barriers (bar/barrier .sync, .arrive, .red).

A warp collective runs per *group*: the lanes that name one another in their membermask. PTX
(PTX ISA, "Parallel Synchronization and Communication Instructions": vote.sync, match.sync,
redux.sync, bar.warp.sync; "Data Movement and Conversion Instructions": shfl.sync) has each
executing thread wait "until all non-exited threads corresponding to membermask have executed
[the instruction] with the same qualifiers and same membermask value", and computes over the
non-exited threads of the membermask; so a group is one membermask less the exited lanes, its
lanes may wait at different PCs, and lanes with other masks form other groups. What PTX leaves
undefined is refused (an UNS_* reason, which the caller turns into the unsupported-instruction
error) rather than answered with a value the hardware might not give: a lane outside its own
membermask, lanes executing one instruction together with masks that name each other but differ
(CUDA Programming Guide, warp functions: "all non-exited threads named in mask must execute the
same intrinsic with the same mask, or the result is undefined"), and a shfl that reads a lane
outside its group (shfl.sync's Semantics: the source value of an inactive or predicated-off
thread is unpredictable).

A CTA barrier counts warps (PTX ISA, barrier: it "causes executing thread to wait for all
non-exited threads from its warp and marks warps' arrival at barrier"; a thread count is a
multiple of the warp size): a warp arrives once all its non-exited threads wait at the barrier,
and completes a barrier with a thread count b when b / 32 warps have arrived, one without when
every warp with a non-exited thread has. bar.red combines the predicates of the threads of the
warps that arrived. Different warps may mix .sync and .arrive on one barrier, never .red with
another form ("Execution in this case is unpredictable"), and all use one thread count; both
are refused otherwise, as is a warp arriving twice before the barrier completes.
"""

from __future__ import annotations

import numpy as np

from tuiprof.collect.emu.kernel.alu import rd, tbits, zext
from tuiprof.collect.emu.kernel.codes import *  # noqa: F403 (the shared numbering)
from tuiprof.jit import INLINE, emu_kernel, njit


@emu_kernel
def lowest_lane(m):
    """The lowest set bit of nonzero mask `m`."""
    i = 0
    while not (m >> i) & 1:
        i += 1
    return i


# ------------------------------------------------------------------ CTA barrier state

B_WARPS, B_NEED, B_KIND, B_WMASK, B_POPC, B_AND, B_OR = range(7)
"""Columns of the per-barrier state (int64 [N_BARRIERS, N_BAR_FIELDS]): warps counted, thread
count (-1: all threads), form (-1: no warp counted yet; BAR_SYNC for .sync and .arrive, or a
BAR_RED_*), the warps counted as a mask, and bar.red's popc, and, or."""
N_BAR_FIELDS = 7


@njit(**INLINE)
def reset_barrier(bars, bid):
    """Barrier `bid` as it starts: no warp counted, the reductions at their identities."""
    bars[bid, B_WARPS] = 0
    bars[bid, B_NEED] = -1
    bars[bid, B_KIND] = -1
    bars[bid, B_WMASK] = 0
    bars[bid, B_POPC] = 0
    bars[bid, B_AND] = 1
    bars[bid, B_OR] = 0


# ------------------------------------------------------------------ warp collectives

@njit(**INLINE)
def member_mask_slot(code, row):
    """The register slot of the membermask operand of collective `row` (-1: none, all lanes)."""
    op = code[row, F_OP]
    if op == OP_SHFL:
        return code[row, F_S3]
    if op == OP_BARWARP:
        return code[row, F_S0]
    return code[row, F_S1]


@njit(**INLINE)
def same_collective(code, r1, r2):
    """Whether lanes at rows `r1` and `r2` can meet in one collective: the same instruction with
    the same qualifiers (mode, operation, type), wherever each sits in the code."""
    return (code[r1, F_OP] == code[r2, F_OP] and code[r1, F_SUB] == code[r2, F_SUB]
            and code[r1, F_TY] == code[r2, F_TY])


@njit(**INLINE)
def shfl_source(mode, lane, b, c):
    """(source lane j, in range) of shfl.sync for `lane` with operands `b` and `c` (PTX ISA,
    shfl.sync, Semantics: c[4:0] clamps, c[12:8] is the segment mask; out of range, a lane
    reads itself)."""
    bval = b & 31
    cval = c & 31
    seg = (c >> 8) & 31
    max_lane = (lane & seg) | (cval & ~seg)
    if mode == SHFL_UP:
        j = lane - bval
        ok = j >= max_lane
    elif mode == SHFL_DOWN:
        j = lane + bval
        ok = j <= max_lane
    elif mode == SHFL_BFLY:
        j = lane ^ bval
        ok = j <= max_lane
    else:
        j = (lane & seg) | (bval & ~seg)
        ok = j <= max_lane
    if not ok:
        j = lane
    return j, ok


@emu_kernel
def exec_sync(code, regs, pc, st, group, base):
    """Execute one group of a warp collective: the lanes `group` (bits, relative to thread
    `base`) wait at the same kind of collective (`same_collective`), possibly at different PCs,
    each with the membermask that, less the exited lanes, is `group`. Every source is read
    before any lane writes; then the lanes run on after their instruction. Returns (0, 0, 0), or
    (UNS_SHFL_SOURCE, lane, source lane) with nothing written when a shfl would read a lane
    outside the group."""
    a = np.zeros(32, np.int64)
    src = np.zeros(32, np.int64)
    inr = np.int64(0)     # shfl: lanes whose source is in range
    pred = np.int64(0)    # vote: lanes whose predicate (negated where asked) holds
    row0 = pc[base + lowest_lane(group)]
    op = code[row0, F_OP]
    sub = code[row0, F_SUB]
    ty = code[row0, F_TY]
    for l in range(32):
        if (group >> l) & 1:
            t = base + l
            row = pc[t]
            s0 = code[row, F_S0]
            a[l] = regs[s0, t] if s0 >= 0 else 0
            if op == OP_SHFL:
                j, ok = shfl_source(sub, l, regs[code[row, F_S1], t], regs[code[row, F_S2], t])
                if ok and not (group >> j) & 1:
                    return UNS_SHFL_SOURCE, l, j
                src[l] = j
                if ok:
                    inr |= np.int64(1) << l
            elif op == OP_VOTE:
                if (a[l] != 0) != ((code[row, F_FLAGS] & FL_NEG_S2) != 0):
                    pred |= np.int64(1) << l
    # results common to the group
    ballot = pred & group
    allv = ballot == group
    anyv = ballot != 0
    alleq = True
    acc = np.int64(0)
    bits = tbits(ty)
    key = zext(a[lowest_lane(group)], bits)
    first = True
    for k in range(32):
        if (group >> k) & 1:
            if op == OP_MATCH:
                if zext(a[k], bits) != key:
                    alleq = False
            elif op == OP_REDUX:
                v = rd(a[k], ty)
                if first:
                    acc = v
                elif sub == REDUX_ADD:
                    acc = acc + v
                elif sub == REDUX_MIN:
                    if v < acc:
                        acc = v
                elif sub == REDUX_MAX:
                    if v > acc:
                        acc = v
                elif sub == REDUX_AND:
                    acc = acc & v
                elif sub == REDUX_OR:
                    acc = acc | v
                else:
                    acc = acc ^ v
            first = False
    for l in range(32):
        if (group >> l) & 1:
            t = base + l
            row = pc[t]
            d0 = code[row, F_D0]
            d1 = code[row, F_D1]
            if op == OP_SHFL:
                if d0 >= 0:
                    regs[d0, t] = zext(a[src[l]], 32)
                if d1 >= 0:
                    regs[d1, t] = (inr >> l) & 1
            elif op == OP_VOTE:
                if d0 >= 0:
                    if sub == VOTE_ALL:
                        regs[d0, t] = 1 if allv else 0
                    elif sub == VOTE_ANY:
                        regs[d0, t] = 1 if anyv else 0
                    elif sub == VOTE_UNI:
                        regs[d0, t] = 1 if (allv or not anyv) else 0
                    else:
                        regs[d0, t] = ballot
            elif op == OP_MATCH:
                if sub == MATCH_ANY:
                    if d0 >= 0:
                        same = np.int64(0)
                        for k in range(32):
                            if (group >> k) & 1 and zext(a[k], bits) == zext(a[l], bits):
                                same |= np.int64(1) << k
                        regs[d0, t] = same
                else:
                    if d0 >= 0:
                        regs[d0, t] = group if alleq else 0
                    if d1 >= 0:
                        regs[d1, t] = 1 if alleq else 0
            elif op == OP_REDUX:
                if d0 >= 0:
                    regs[d0, t] = zext(acc, 32)
            pc[t] = row + 1
            st[t] = TS_RUN
    return 0, 0, 0


@emu_kernel
def release_syncs(code, regs, pc, st, syncm, w, live):
    """Run every group of warp `w`'s waiting collectives (lanes in TS_SYNC, membermask in
    `syncm`) whose non-exited members all wait at the same kind of collective with the same
    mask. Returns exec_sync's (reason, lane, other lane), (0, 0, 0) when nothing was refused."""
    base = w * 32
    again = True
    while again:
        again = False
        for l in range(32):
            t = base + l
            if st[t] == TS_SYNC:
                m = syncm[t]
                group = m & live[w]
                ready = True
                for k in range(32):
                    if (group >> k) & 1:
                        tk = base + k
                        if st[tk] != TS_SYNC or syncm[tk] != m or not same_collective(code, pc[t], pc[tk]):
                            ready = False
                            break
                if ready:
                    reason, lane, other = exec_sync(code, regs, pc, st, group, base)
                    if reason != 0:
                        return reason, lane, other
                    again = True
                    break
    return 0, 0, 0


# ------------------------------------------------------------------ CTA barriers

@emu_kernel
def release_barrier(code, regs, pc, st, barid, bid, bars, conv, wpc, live, W):
    """Release the threads of the warps counted at barrier `bid` (bar.red results written, PCs
    past the barrier)."""
    for w in range(W):
        if not (bars[bid, B_WMASK] >> w) & 1:
            continue
        touched = False
        for l in range(32):
            t = w * 32 + l
            if st[t] == TS_BAR and barid[t] == bid:
                row = pc[t]
                sub = code[row, F_SUB]
                d0 = code[row, F_D0]
                if d0 >= 0:
                    if sub == BAR_RED_POPC:
                        regs[d0, t] = bars[bid, B_POPC]
                    elif sub == BAR_RED_AND:
                        regs[d0, t] = bars[bid, B_AND]
                    elif sub == BAR_RED_OR:
                        regs[d0, t] = bars[bid, B_OR]
                pc[t] = row + 1
                st[t] = TS_RUN
                barid[t] = -1
                touched = True
        if touched and conv[w] and live[w] != 0:
            wpc[w] = pc[w * 32 + lowest_lane(live[w])]


@emu_kernel
def barrier_complete(code, regs, pc, st, barid, bid, bars, conv, wpc, live, W):
    """Complete barrier `bid` if enough warps have arrived: release them and reset the barrier."""
    if bars[bid, B_KIND] < 0:
        return
    if bars[bid, B_NEED] >= 0:
        done = bars[bid, B_WARPS] * 32 >= bars[bid, B_NEED]
    else:
        warps = 0
        for w in range(W):
            if live[w] != 0:
                warps += 1
        done = bars[bid, B_WARPS] >= warps
    if done:
        release_barrier(code, regs, pc, st, barid, bid, bars, conv, wpc, live, W)
        reset_barrier(bars, bid)


@emu_kernel
def barrier_arrive(code, regs, pc, st, barid, w, bid, bars, conv, wpc, live, W):
    """Count warp `w` at barrier `bid` if all its non-exited threads wait there: check that they
    and the barrier's other warps use one form (.sync/.arrive, or one .red) and one thread count,
    add their bar.red predicates, let its .arrive threads go on, and complete the barrier if it
    can. Returns 0, or the UNS_* reason for refusing."""
    base = w * 32
    lw = live[w]
    if lw == 0 or (bars[bid, B_WMASK] >> w) & 1:
        return 0
    kind = -2
    need = -2
    arrive = False
    for l in range(32):
        if (lw >> l) & 1:
            t = base + l
            if st[t] != TS_BAR or barid[t] != bid:
                return 0
            row = pc[t]
            sub = code[row, F_SUB]
            s1 = code[row, F_S1]
            k = sub if sub >= BAR_RED_POPC else BAR_SYNC
            n = regs[s1, t] if s1 >= 0 else -1
            if kind == -2:
                kind = k
                need = n
            elif k != kind or n != need:
                return UNS_BAR_MIX
            if sub == BAR_ARRIVE:
                arrive = True
    if bars[bid, B_KIND] < 0:
        bars[bid, B_KIND] = kind
        bars[bid, B_NEED] = need
    elif bars[bid, B_KIND] != kind or bars[bid, B_NEED] != need:
        return UNS_BAR_MIX
    bars[bid, B_WMASK] |= np.int64(1) << w
    bars[bid, B_WARPS] += 1
    if kind >= BAR_RED_POPC:
        for l in range(32):
            if (lw >> l) & 1:
                t = base + l
                row = pc[t]
                q = regs[code[row, F_S2], t] != 0
                if code[row, F_FLAGS] & FL_NEG_S2:
                    q = not q
                if q:
                    bars[bid, B_POPC] += 1
                    bars[bid, B_OR] = 1
                else:
                    bars[bid, B_AND] = 0
    released = False
    if arrive:
        for l in range(32):
            if (lw >> l) & 1:
                t = base + l
                row = pc[t]
                if code[row, F_SUB] == BAR_ARRIVE:
                    pc[t] = row + 1
                    st[t] = TS_RUN
                    barid[t] = -1
                    released = True
    if released and conv[w]:
        wpc[w] = pc[base + lowest_lane(lw)]
    barrier_complete(code, regs, pc, st, barid, bid, bars, conv, wpc, live, W)
    return 0


@emu_kernel
def barriers_after_exit(code, regs, pc, st, barid, w, bars, conv, wpc, live, W):
    """After threads of warp `w` exit: the warp may now have arrived at a barrier its other
    threads wait at, and a barrier without a thread count may now have all its warps. Returns
    (0, 0), or (an UNS_* reason, a thread waiting at the barrier refused)."""
    for bid in range(N_BARRIERS):
        reason = barrier_arrive(code, regs, pc, st, barid, w, bid, bars, conv, wpc, live, W)
        if reason != 0:
            t = w * 32
            while not (st[t] == TS_BAR and barid[t] == bid):
                t += 1
            return reason, t
        barrier_complete(code, regs, pc, st, barid, bid, bars, conv, wpc, live, W)
    return 0, 0
