"""The SIMT interpreter: runs decoded PTX for a list of CTAs, a warp instruction at a time.

Reconvergence follows Volta's independent thread scheduling (collectors.md sec. 3.1): every lane
has its own PC; a divergent guarded branch registers a *convergence barrier* at its immediate
post-dominator (IPDOM), where the lanes that took part wait for each other; the group of lanes
with the lowest PC runs first, except that a group that has just taken a backward branch yields
to another group of its warp (so that spin-waits make progress). Cross-lane semantics live in
`sync`: CTA barriers count warps, a warp arriving once its non-exited threads have; ``.sync``
collectives (shfl, vote, match, redux, bar.warp.sync) run per group of lanes sharing one member
mask, once every non-exited lane of the mask has arrived, wherever in the code each lane is; what
PTX leaves undefined stops the run as unsupported. A converged warp (all live lanes at one PC)
runs without any per-lane PC bookkeeping: that is the fast path.

Each instruction runs in the handler of its family (codes.FAM_*, the F_FAM column the decoder
fills): the register-only ones in `warp`, memory and control here. `run_ctas_for` assembles the
interpreter from the handlers of the families a kernel uses: the others are pruned before Numba
compiles it, so a first run compiles what the kernel needs (in a few variants: `VARIANTS`).
What runs per warp instruction is inlined (the common handlers, the scalar load/store path, the
choice of a diverged warp's next group); the rarer control paths (a branch that diverges, call
and ret, CTA barriers, warp collectives, the MISC instructions, every exit with the records) are
functions compiled once for all variants and called, so each variant's scheduler stays smaller.

A warp keeps running until it blocks, diverges, takes a backward branch while diverged, or has
run `QUANTUM` instructions; then the next warp of the CTA runs. Failures (out-of-bounds or
misaligned access, trap, step limit, deadlock...) stop the run with a status in ``err`` naming
the instruction, thread, CTA and address, which Python turns into a TuiprofError.
"""

from __future__ import annotations

import numpy as np

from tuiprof.collect.emu.kernel.alu import float_op, int_op2, sext, tbits, ult, zext
from tuiprof.collect.emu.kernel.bits import f32_of, load_bits, popc64, store_bits
from tuiprof.collect.emu.kernel.codes import *  # noqa: F403 (the shared numbering)
from tuiprof.collect.emu.kernel.codes import (
    AT_ADD,
    AT_AND,
    AT_CAS,
    AT_DEC,
    AT_EXCH,
    AT_INC,
    AT_MAX,
    AT_MIN,
    AT_OR,
    AT_XOR,
)
from tuiprof.collect.emu.kernel.memory import K_CONST, K_HEAP, K_LOCAL, K_PARAM, K_SHARED, find_segment, resolve
from tuiprof.collect.emu.kernel.sync import (
    B_WMASK,
    N_BAR_FIELDS,
    barrier_arrive,
    barriers_after_exit,
    exec_sync,
    member_mask_slot,
    release_syncs,
    reset_barrier,
)
from tuiprof.collect.emu.kernel.sync import lowest_lane as _lowest
from tuiprof.collect.emu.kernel.texture import descriptor, fetch, heap_load, heap_store, surface
from tuiprof.collect.emu.kernel.warp import (
    alu_cmp,
    alu_cvt,
    alu_float,
    alu_int,
    ex_cvt_int,
    ex_cvta,
    ex_float_plain,
    ex_iadd,
    ex_imul,
    ex_logic,
    ex_mov,
    ex_selp,
    ex_setp_int,
    ex_shift,
)
from tuiprof.jit import INLINE, atomic_add, atomic_get, borrowed, built_kernel, emu_kernel, njit
from tuiprof.jit import keep as keep_alive

QUANTUM = 4096
"""Warp instructions a warp runs before the next warp of its CTA gets a turn."""
BIG = np.int64(1) << 62
MIN64 = np.int64(-9223372036854775808)

# cfg fields (int64 array passed by the caller)
C_T, C_W, C_NSLOTS, C_SHARED, C_LOCAL, C_SMS, C_STEP_LIMIT, C_ENTRY, C_NSOPS = 0, 1, 2, 3, 4, 5, 6, 7, 8
C_GX, C_GY, C_GZ, C_REC_CAP, C_CONST, C_PARAM, C_LOCAL_WORDS = 9, 10, 11, 12, 13, 14, 15
C_LANES = 16
"""Always 32; read at run time so that LLVM does not unroll every lane loop 32 times."""
C_SM_BASE = 17
"""The first snapshot CTA: %smid follows the simulator's CTA placement (see `run_ctas`)."""
C_REC_MAX = 18
"""Warp accesses the snapshot may keep, all batches together: past it they are counted, not kept."""
C_BATCH = 19
"""This batch's index: it stops (ST_ABORTED) once an earlier batch has failed."""
N_CFG = 20

ALWAYS_COMPILED = frozenset({FAM_NOP, FAM_EXIT, FAM_MOV, FAM_IADD, FAM_IMUL, FAM_CVTA, FAM_SCALAR_LDST,
                             FAM_LD_BANK})
"""Families compiled into every variant of the interpreter: inlined, cheap to compile and in
nearly every kernel (integer index arithmetic, scalar loads and stores of global and shared memory,
loads of kernel parameters and constants)."""
STRAIGHT = ALWAYS_COMPILED | {FAM_SHIFT, FAM_CVT_INT, FAM_FLOAT_PLAIN, FAM_LDST}
"""Straight-line kernels' families: shifts, integer conversions, plain float arithmetic and the
other loads and stores (`mem_ldst`: vectors, local and generic addresses) too."""
VARIANTS = (ALWAYS_COMPILED,
            STRAIGHT,
            STRAIGHT | {FAM_LOGIC, FAM_SETP_INT, FAM_SELP, FAM_MISC, FAM_BRA},
            STRAIGHT | {FAM_LOGIC, FAM_SETP_INT, FAM_SELP, FAM_MISC, FAM_BRA, FAM_INT_MORE, FAM_BAR, FAM_SYNC,
                        FAM_CALL},
            frozenset(range(FAM_NONE)))
"""The sets of families the interpreter is compiled for (`families_of`): a kernel gets the first
that holds its families. Each variant compiles the whole scheduler again (5-15 s of CPU), so a
handful of them, not one per combination (the tests' 150 kernels have 24): the first two for
straight-line kernels (without a branch a warp never diverges, so the divergence machinery is
pruned too), the smallest for those that only compute integer addresses, load and store scalars
of global memory (vecadd: a first run compiles no more than it needs, not even `mem_ldst`), the
next with shifts, integer conversions, float arithmetic and the other loads and stores (saxpy,
vectors); the third adds predicates, branches and the bitwise instructions (stencils,
SpMV, bounds checks), the fourth CTA barriers, warp collectives, device-function calls and the
rarer integer instructions (tiled kernels, reductions), the last has everything (the float
rounding machinery, atomics, textures)."""

# per-CTA special registers (cta_spec[:, 1])
CS_CTAID_X, CS_CTAID_Y, CS_CTAID_Z, CS_SMID = 0, 1, 2, 3


@emu_kernel
def _fail(err, status, pc, t, cta, addr, nbytes, space, info):
    err[E_STATUS] = status
    err[E_PC] = pc
    err[E_THREAD] = t
    err[E_CTA] = cta
    err[E_ADDR] = addr
    err[E_BYTES] = nbytes
    err[E_SPACE] = space
    err[E_INFO] = info


@emu_kernel
def _refuse(err, reason, pc, t, cta, other, mask, mask2):
    """Stop with ST_UNSUPPORTED for a case PTX leaves undefined (`reason`: UNS_*; the other lane
    and the two membermasks the message names)."""
    _fail(err, ST_UNSUPPORTED, pc, t, cta, 0, 0, 0, 0)
    err[E_REASON] = reason
    err[E_OTHER] = other
    err[E_MASK] = mask
    err[E_MASK2] = mask2


@njit(**INLINE)
def _load(kind, off, nb, heap, shared, local, const_buf, param_buf):
    if kind == K_HEAP:
        return load_bits(heap, off, nb)
    if kind == K_SHARED:
        return load_bits(shared, off, nb)
    if kind == K_LOCAL:
        return load_bits(local, off, nb)
    if kind == K_CONST:
        return load_bits(const_buf, off, nb)
    return load_bits(param_buf, off, nb)


@njit(**INLINE)
def _store(kind, off, nb, val, heap, shared, local):
    if kind == K_HEAP:
        store_bits(heap, off, nb, val)
    elif kind == K_SHARED:
        store_bits(shared, off, nb, val)
    else:
        store_bits(local, off, nb, val)


@emu_kernel
def atom_apply(aop, ty, old, b, c, on_global):
    """The new memory value of an atomic operation on `old` (raw bits); `on_global`: the word is
    in global memory, where atom/red .add.f32 flush subnormal inputs and results to
    sign-preserving zero (PTX ISA, atom and red: on shared memory they keep them; .f16, .bf16 and
    their pairs require .noftz and keep them everywhere)."""
    bits = tbits(ty)
    if aop == AT_ADD:
        if ty == T_F32 or ty == T_F64 or ty == T_F16 or ty == T_BF16 or ty == T_F16X2 or ty == T_BF16X2:
            return float_op(OP_FADD, ty, RND_RN, FL_FTZ if (on_global and ty == T_F32) else 0, old, b, 0)
        return zext(old + b, bits)
    if aop == AT_MIN:
        return int_op2(True, old, b, ty)
    if aop == AT_MAX:
        return int_op2(False, old, b, ty)
    if aop == AT_INC:
        o = zext(old, bits)
        if not ult(o, zext(b, bits)):
            return np.int64(0)
        return zext(o + 1, bits)
    if aop == AT_DEC:
        o = zext(old, bits)
        if o == 0 or ult(zext(b, bits), o):
            return zext(b, bits)
        return zext(o - 1, bits)
    if aop == AT_AND:
        return zext(old & b, bits)
    if aop == AT_OR:
        return zext(old | b, bits)
    if aop == AT_XOR:
        return zext(old ^ b, bits)
    if aop == AT_EXCH:
        return zext(b, bits)
    if aop == AT_CAS:
        if zext(old, bits) == zext(b, bits):
            return zext(c, bits)
        return zext(old, bits)
    return old


@emu_kernel
def release_cbars(w, cb_rpc, cb_mask, cb_n, st, cbw, live):
    """Release the convergence barriers of warp `w` whose members have all arrived or exited.
    Returns True when some lanes were released."""
    released = False
    k = 0
    base = w * 32
    while k < cb_n[w]:
        rpc = cb_rpc[w, k]
        members = cb_mask[w, k] & live[w]
        ready = True
        for l in range(32):
            if (members >> l) & 1:
                t = base + l
                if not (st[t] == TS_CBAR and cbw[t] == rpc):
                    ready = False
                    break
        if ready:
            for l in range(32):
                if (members >> l) & 1:
                    st[base + l] = TS_RUN
                    cbw[base + l] = -1
            n = cb_n[w] - 1
            cb_rpc[w, k] = cb_rpc[w, n]
            cb_mask[w, k] = cb_mask[w, n]
            cb_n[w] = n
            released = True
        else:
            k += 1
    return released


@njit(**INLINE)
def _open_record(rec_key, rec_op, rec_mask, rec_addr, nrec, key, sop, act, NL):
    """Start record `nrec`: the warp's key, the op, the active lanes, no addresses yet."""
    rec_key[nrec] = key
    rec_op[nrec] = sop
    rec_mask[nrec] = np.uint32(act)
    for l in range(NL):
        rec_addr[nrec, l] = 0


@njit(**INLINE)
def _copy_records(k2, o2, m2, a2, rec_key, rec_op, rec_mask, rec_addr, nrec):
    """Copy the first `nrec` records into grown arrays (a loop: a slice copy would compile Numba's
    shape-mismatch error path, strings and all)."""
    for i in range(nrec):
        k2[i] = rec_key[i]
        o2[i] = rec_op[i]
        m2[i] = rec_mask[i]
        for l in range(32):
            a2[i, l] = rec_addr[i, l]


@njit(**INLINE)
def ld_extend(x, nb, signed, dbits):
    """ld's register value from the `nb` bytes `x` it read: a signed type's sign-extended to the
    destination register's `dbits` bits."""
    if signed:
        x = zext(sext(x, nb * 8), dbits)
    return x


@njit(**INLINE)
def _lane_access(P, code, regs, t, space, aoff, abase, total, seg_lo, seg_hi, seg_off, shared_size, local_size,
                 const_size, param_size):
    """(buffer kind, offset, resolved space, address, status) of lane thread `t`'s access of row
    `P`: status ST_OOB or ST_MISALIGNED when it faults, else ST_OK."""
    a = aoff
    if abase >= 0:
        a += regs[abase, t]
    kind, off, rsp = resolve(space, a, total, t, seg_lo, seg_hi, seg_off, shared_size, local_size, const_size,
                             param_size)
    if kind < 0:
        return kind, off, rsp, a, ST_OOB
    if (a & (total - 1)) != 0 and (total & (total - 1)) == 0:
        return kind, off, rsp, a, ST_MISALIGNED
    return kind, off, rsp, a, ST_OK


@njit(**INLINE)
def _trace_address(rsp, off, a, t, l, total, local_size, local_words, cta, W, w):
    """The address a warp access of lane `l` records: shared offsets, global addresses, and for
    local memory the modeled hardware layout (each warp's frame with the lanes' elements side by side)."""
    if rsp == SP_SHARED:
        return off
    if rsp == SP_LOCAL:
        la = off - t * local_size
        return LOCAL_TRACE_BASE + (cta * W + w) * local_words * 128 + ((la // total) * 32 + l) * total + la % total
    return a


@njit(**INLINE)
def _count_space(op_space, sop, rsp):
    """Count one warp access of op `sop` that resolved to space `rsp`."""
    if rsp == SP_GLOBAL:
        op_space[sop, 0] += 1
    elif rsp == SP_SHARED:
        op_space[sop, 1] += 1
    elif rsp == SP_LOCAL:
        op_space[sop, 2] += 1


@njit(**INLINE)
def _close_access(op_space, sop, act, rsp, rec, nrec):
    """After a warp's load, store or atomic of op `sop`: ``(records, warp accesses)`` — the
    access counted (by the space its lanes resolved to) when lanes were active, and the record
    opened for it closed."""
    accesses = 0
    if sop >= 0 and act != 0:
        accesses = 1
        if rsp >= 0:
            _count_space(op_space, sop, rsp)
    if rec:
        nrec += 1
    return nrec, accesses


@njit(**INLINE)
def scalar_ldst(P, act, code, regs, base, NL, keep, key, heap, shared, seg_lo, seg_hi, seg_off, shared_size, cs,
                offs, addrs, rec_key, rec_op, rec_mask, rec_addr, nrec, op_space):
    """A scalar ld or st of global or shared memory (FAM_SCALAR_LDST, `warp.is_scalar_ldst`) by
    the lanes `act`: the home of its semantics, run inline by the interpreter.

    Every lane's address (base register plus offset, kept in `addrs` for the record) is resolved
    first into `offs` (buffer offsets): inside shared memory or one allocation of the heap (`cs`:
    the allocation to try first, the one the last global access found), then aligned to the
    element size. The first lane in lane order whose access would fault stops it, nothing changed:
    its status (ST_OOB before ST_MISALIGNED, as `mem_ldst` names faults) and lane are returned for
    the caller to report. Else the loads (little-endian, `ld_extend`) or stores (the source's low
    bytes), the warp access counted by space and, when `keep`, recorded under `key`. Returns
    (status, faulting lane, cs, records used, accesses counted)."""
    sh = code[P, F_SPACE] == SP_SHARED
    nb = code[P, F_NB]
    abase = code[P, F_ABASE]
    aoff = code[P, F_AOFF]
    nseg = seg_lo.shape[0]
    bad = ST_OK
    bad_lane = 0
    for l in range(NL):
        if (act >> l) & 1:
            a = aoff
            if abase >= 0:
                a += regs[abase, base + l]
            addrs[l] = a
            if sh:
                if a < 0 or a + nb > shared_size:
                    bad, bad_lane = ST_OOB, l
                    break
                offs[l] = a
            else:
                if not (cs < nseg and a >= seg_lo[cs] and a + nb <= seg_hi[cs]):
                    cs = find_segment(a, nb, seg_lo, seg_hi)
                    if cs < 0:
                        cs = 0
                        bad, bad_lane = ST_OOB, l
                        break
                offs[l] = seg_off[cs] + (a - seg_lo[cs])
            if a & (nb - 1):
                bad, bad_lane = ST_MISALIGNED, l
                break
    if bad != ST_OK:
        return bad, bad_lane, cs, nrec, 0
    accesses = 0
    sop = code[P, F_SOP]
    if sop >= 0 and act != 0:
        accesses = 1
        op_space[sop, 1 if sh else 0] += 1
        if keep:
            rec_key[nrec] = key
            rec_op[nrec] = sop
            rec_mask[nrec] = np.uint32(act)
            for l in range(NL):
                rec_addr[nrec, l] = np.uint64(addrs[l]) if (act >> l) & 1 else np.uint64(0)
            nrec += 1
    buf = shared if sh else heap
    if code[P, F_OP] == OP_LD:
        ty = code[P, F_TY]
        sgn = ty == T_S8 or ty == T_S16 or ty == T_S32
        dbits = code[P, F_AUX2]
        d0 = code[P, F_D0]
        for l in range(NL):
            if (act >> l) & 1:
                regs[d0, base + l] = ld_extend(load_bits(buf, offs[l], nb), nb, sgn, dbits)
    else:
        s0 = code[P, F_S0]
        for l in range(NL):
            if (act >> l) & 1:
                store_bits(buf, offs[l], nb, regs[s0, base + l])
    return ST_OK, 0, cs, nrec, accesses


@emu_kernel
def ld_bank(P, act, code, regs, base, NL, keep, key, const_buf, param_buf, const_size, param_size, rec_key, rec_op,
            rec_mask, rec_addr, nrec, err, cta):
    """A scalar ld of a constant bank (FAM_LD_BANK, `warp.is_bank_ld`): the kernel's parameters
    (SASS reads them from bank c[0x0]) or the module's ``__constant__`` data, by the lanes `act`.
    Lane by lane, in lane order: the address (base register plus offset) inside the bank, else
    ST_OOB, and aligned, else ST_MISALIGNED (as `mem_ldst` names faults), then the load. A
    ``__constant__`` access with an op is counted and, when `keep`, recorded under `key` (the
    caller leaves room for a record); kernel parameters have none. Returns (records used,
    accesses counted), or (-1, 0) after a fault described in `err`."""
    space = code[P, F_SPACE]
    const = space == SP_CONST
    buf = const_buf if const else param_buf
    size = const_size if const else param_size
    nb = code[P, F_NB]
    abase = code[P, F_ABASE]
    aoff = code[P, F_AOFF]
    ty = code[P, F_TY]
    sgn = ty == T_S8 or ty == T_S16 or ty == T_S32
    dbits = code[P, F_AUX2]
    d0 = code[P, F_D0]
    sop = code[P, F_SOP]
    rec = keep and sop >= 0 and act != 0
    if rec:
        _open_record(rec_key, rec_op, rec_mask, rec_addr, nrec, key, sop, act, NL)
    for l in range(NL):
        if (act >> l) & 1:
            a = aoff
            if abase >= 0:
                a += regs[abase, base + l]
            status = ST_OOB if a < 0 or a + nb > size else (ST_MISALIGNED if a & (nb - 1) else ST_OK)
            if status != ST_OK:
                _fail(err, status, P, base + l, cta, a, nb, space, 0)
                return -1, 0
            regs[d0, base + l] = ld_extend(load_bits(buf, a, nb), nb, sgn, dbits)
            if rec:
                rec_addr[nrec, l] = np.uint64(a)
    if rec:
        nrec += 1
    return nrec, 1 if sop >= 0 and act != 0 else 0


@emu_kernel
def mem_ldst(P, act, code, regs, base, NL, w, W, cta, spos, recording, heap, shared, local, const_buf, param_buf,
             seg_lo, seg_hi, seg_off, shared_size, local_size, const_size, param_size, local_words,
             rec_key, rec_op, rec_mask, rec_addr, nrec, op_space, err):
    """ld and st of any space and vector width for the lanes `act` (FAM_LDST: the rows that are
    neither FAM_SCALAR_LDST's nor FAM_LD_BANK's, that is local and generic accesses, vectors, an ld
    without a destination and a store to a read-only space), recording the warp access when asked
    (the caller leaves room for two records). Returns (records used, accesses counted), or (-1, 0)
    after a fault described in `err` (found lane by lane, in lane order)."""
    op = code[P, F_OP]
    ty = code[P, F_TY]
    space = code[P, F_SPACE]
    nb = code[P, F_NB]
    vec = code[P, F_VEC]
    abase = code[P, F_ABASE]
    aoff = code[P, F_AOFF]
    sop = code[P, F_SOP]
    total = nb * vec
    rec = recording and sop >= 0 and act != 0
    if rec:
        _open_record(rec_key, rec_op, rec_mask, rec_addr, nrec, spos * W + w, sop, act, NL)
    sgn = ty == T_S8 or ty == T_S16 or ty == T_S32
    dbits = code[P, F_AUX2]
    rsp = -1
    for l in range(NL):
        if (act >> l) & 1:
            t = base + l
            kind, off, rsp, a, status = _lane_access(P, code, regs, t, space, aoff, abase, total, seg_lo, seg_hi,
                                                     seg_off, shared_size, local_size, const_size, param_size)
            if status != ST_OK:
                _fail(err, status, P, t, cta, a, total, rsp, 0)
                return -1, 0
            if op == OP_LD:
                for v in range(vec):
                    x = ld_extend(_load(kind, off + v * nb, nb, heap, shared, local, const_buf, param_buf), nb, sgn,
                                  dbits)
                    dv = code[P, F_D0 + v]
                    if dv >= 0:
                        regs[dv, t] = x
            else:
                if kind == K_CONST or kind == K_PARAM:
                    _fail(err, ST_SPACE, P, t, cta, a, total, rsp, 0)
                    return -1, 0
                for v in range(vec):
                    _store(kind, off + v * nb, nb, regs[code[P, F_S0 + v], t], heap, shared, local)
            if rec:
                rec_addr[nrec, l] = np.uint64(_trace_address(rsp, off, a, t, l, total, local_size, local_words, cta,
                                                             W, w))
    return _close_access(op_space, sop, act, rsp, rec, nrec)


@emu_kernel
def mem_atom(P, act, code, regs, base, NL, w, W, cta, spos, recording, heap, shared, local, const_buf, param_buf,
             seg_lo, seg_hi, seg_off, shared_size, local_size, const_size, param_size, local_words,
             rec_key, rec_op, rec_mask, rec_addr, nrec, op_space, err):
    """atom and red (FAM_ATOM), as `mem_ldst`."""
    ty = code[P, F_TY]
    d0 = code[P, F_D0]
    s0 = code[P, F_S0]
    s1 = code[P, F_S1]
    space = code[P, F_SPACE]
    nb = code[P, F_NB]
    abase = code[P, F_ABASE]
    aoff = code[P, F_AOFF]
    sop = code[P, F_SOP]
    aop = code[P, F_SUB]
    rec = recording and sop >= 0 and act != 0
    if rec:
        _open_record(rec_key, rec_op, rec_mask, rec_addr, nrec, spos * W + w, sop, act, NL)
    rsp = -1
    for l in range(NL):
        if (act >> l) & 1:
            t = base + l
            kind, off, rsp, a, status = _lane_access(P, code, regs, t, space, aoff, abase, nb, seg_lo, seg_hi,
                                                     seg_off, shared_size, local_size, const_size, param_size)
            if status != ST_OK:
                _fail(err, status, P, t, cta, a, nb, rsp, 0)
                return -1, 0
            if kind == K_CONST or kind == K_PARAM:
                _fail(err, ST_SPACE, P, t, cta, a, nb, rsp, 0)
                return -1, 0
            old = _load(kind, off, nb, heap, shared, local, const_buf, param_buf)
            new = atom_apply(aop, ty, old, regs[s0, t], regs[s1, t] if s1 >= 0 else 0, kind == K_HEAP)
            _store(kind, off, nb, new, heap, shared, local)
            if d0 >= 0:
                regs[d0, t] = old
            if rec:
                rec_addr[nrec, l] = np.uint64(_trace_address(rsp, off, a, t, l, nb, local_size, local_words, cta,
                                                             W, w))
    return _close_access(op_space, sop, act, rsp, rec, nrec)


@emu_kernel
def mem_tex(P, act, code, regs, base, NL, w, W, cta, spos, recording, heap, shared, local, const_buf, param_buf,
            seg_lo, seg_hi, seg_off, shared_size, local_size, const_size, param_size, local_words,
            rec_key, rec_op, rec_mask, rec_addr, nrec, op_space, err):
    """tex, tld4, suld and sust on texture and surface objects (FAM_TEX), as `mem_ldst`."""
    op = code[P, F_OP]
    ty = code[P, F_TY]
    dims = code[P, F_AUX]
    abase = code[P, F_ABASE]
    sop = code[P, F_SOP]
    accesses = 0
    rec = recording and sop >= 0 and act != 0
    if rec:
        _open_record(rec_key, rec_op, rec_mask, rec_addr, nrec, spos * W + w, sop, act, NL)
    if sop >= 0 and act != 0:
        accesses += 1
    desc = np.empty(TX_WORDS, np.int64)
    out4 = np.zeros(4, np.int64)
    int_coords = code[P, F_TY2] != T_F32
    for l in range(NL):
        if (act >> l) & 1:
            t = base + l
            handle = regs[abase, t]
            if not descriptor(heap, handle, seg_lo, seg_hi, seg_off, desc) or \
                    (desc[TX_SURFACE] != 0) != (op != OP_TEX):
                _fail(err, ST_TEXTURE, P, t, cta, handle, 0, SP_GLOBAL, 0)
                return -1, 0
            c = np.zeros(3, np.float64)
            ci = np.zeros(3, np.int64)
            for k in range(dims):
                sk = code[P, F_S0 + k]
                ci[k] = sext(regs[sk, t], 32)
                c[k] = float(f32_of(regs[sk, t])) if not int_coords else float(ci[k])
            if op == OP_TEX:
                a = fetch(heap, seg_lo, seg_hi, seg_off, desc, dims, c[0], c[1], c[2], int_coords, ty == T_F32,
                          code[P, F_SUB], out4)
                for v in range(4):
                    dv = code[P, F_D0 + v]
                    if dv >= 0:
                        regs[dv, t] = zext(out4[v], 32)
            else:
                nb = code[P, F_NB]
                vec = code[P, F_VEC]
                a = surface(heap, seg_lo, seg_hi, seg_off, desc, dims, ci[0], ci[1], ci[2], nb * vec, code[P, F_SUB])
                if a == -2:
                    _fail(err, ST_TEXTURE, P, t, cta, ci[0], nb * vec, SP_GLOBAL, 1)
                    return -1, 0
                for v in range(vec):
                    if op == OP_SULD:
                        x = np.int64(0)
                        if a >= 0:
                            x, _ok = heap_load(heap, seg_lo, seg_hi, seg_off, a + v * nb, nb)
                        dv = code[P, F_D0 + v]
                        if dv >= 0:
                            regs[dv, t] = x
                    elif a >= 0:
                        heap_store(heap, seg_lo, seg_hi, seg_off, a + v * nb, nb, regs[code[P, F_D0 + v], t])
                if a < 0:
                    a = desc[TX_DATA]
            if rec:
                rec_addr[nrec, l] = np.uint64(a)
    if rec:
        nrec += 1
    return nrec, accesses


@emu_kernel
def mem_cpasync(P, act, code, regs, base, NL, w, W, cta, spos, recording, heap, shared, local, const_buf, param_buf,
                seg_lo, seg_hi, seg_off, shared_size, local_size, const_size, param_size, local_words,
                rec_key, rec_op, rec_mask, rec_addr, nrec, op_space, err):
    """cp.async global -> shared (FAM_CPASYNC): two warp accesses, the load and the store, as `mem_ldst`."""
    s1 = code[P, F_S1]
    s2 = code[P, F_S2]
    abase = code[P, F_ABASE]
    aoff = code[P, F_AOFF]
    nb = code[P, F_NB]
    sop = code[P, F_SOP]
    sop2 = code[P, F_SOP2]
    dbase = s1
    doff = code[P, F_AUX]
    zfill = (code[P, F_FLAGS] & FL_ZFILL) != 0
    accesses = 0
    for part in range(2):
        so = sop if part == 0 else sop2
        rec = recording and so >= 0 and act != 0
        if rec:
            _open_record(rec_key, rec_op, rec_mask, rec_addr, nrec, spos * W + w, so, act, NL)
        if so >= 0 and act != 0:
            accesses += 1
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                src = aoff + (regs[abase, t] if abase >= 0 else 0)
                dst = doff + (regs[dbase, t] if dbase >= 0 else 0)
                kind, soff, _s = resolve(SP_GLOBAL, src, nb, t, seg_lo, seg_hi, seg_off,
                                         shared_size, local_size, const_size, param_size)
                if kind < 0:
                    _fail(err, ST_OOB, P, t, cta, src, nb, SP_GLOBAL, 0)
                    return -1, 0
                dkind, doff2, _d = resolve(SP_SHARED, dst, nb, t, seg_lo, seg_hi, seg_off,
                                           shared_size, local_size, const_size, param_size)
                if dkind < 0:
                    _fail(err, ST_OOB, P, t, cta, dst, nb, SP_SHARED, 0)
                    return -1, 0
                if part == 1:
                    nsrc = regs[s2, t] if zfill else nb
                    for k in range(nb):
                        byte = load_bits(heap, soff + k, 1) if k < nsrc else 0
                        store_bits(shared, doff2 + k, 1, byte)
                if rec:
                    rec_addr[nrec, l] = np.uint64(src if part == 0 else doff2)
        if so >= 0 and act != 0:
            op_space[so, 0 if part == 0 else 1] += 1
        if rec:
            nrec += 1
    return nrec, accesses


# ------------------------------------------------------------------ control: compiled apart, called
# The rarer control instructions run in functions of their own, compiled once for every variant
# of the interpreter and called (not inlined): the scheduler that Numba compiles per variant stays
# smaller. Their array arguments are `borrowed` views, so a call costs no atomic reference counts.


@emu_kernel
def ex_call(P, act, g, w, base, NL, code, pc, cstack, csp, cb_rpc, cb_mask, cb_n, conv, err, cta):
    """call and ret (FAM_CALL) for the lanes `act` of the group `g` at row `P`: ``(next row, 0)``
    when the group goes on together, ``(P, 1)`` when it diverged (the lanes' PCs are set and a
    convergence barrier waits at the return address), ``(P, -1)`` after a fault in `err`."""
    if code[P, F_OP] == OP_CALL:
        if act != 0:
            for l in range(NL):
                if (act >> l) & 1:
                    t = base + l
                    if csp[t] >= MAX_CALL_DEPTH:
                        _fail(err, ST_CALL_DEPTH, P, t, cta, 0, 0, 0, 0)
                        return P, -1
                    cstack[t, csp[t]] = P + 1
                    csp[t] += 1
        tgt = code[P, F_TGT]
        if act == g:
            return tgt, 0
        if act == 0:
            return P + 1, 0
        for l in range(NL):
            if (g >> l) & 1:
                pc[base + l] = tgt if (act >> l) & 1 else P + 1
        found = False
        for k in range(cb_n[w]):
            if cb_rpc[w, k] == P + 1:
                cb_mask[w, k] |= g
                found = True
        if not found and cb_n[w] < MAX_CBARS:
            cb_rpc[w, cb_n[w]] = P + 1
            cb_mask[w, cb_n[w]] = g
            cb_n[w] += 1
        conv[w] = False
        return P, 1
    same = True
    ret_to = -1
    for l in range(NL):
        if (act >> l) & 1:
            t = base + l
            if csp[t] > 0:
                csp[t] -= 1
                r = cstack[t, csp[t]]
            else:
                r = P + 1
            pc[t] = r
            if ret_to < 0:
                ret_to = r
            elif r != ret_to:
                same = False
    if act == g and same:
        return ret_to, 0
    if act == 0:
        return P + 1, 0
    for l in range(NL):
        if (g >> l) & 1 and not (act >> l) & 1:
            pc[base + l] = P + 1
    conv[w] = False
    return P, 1


@emu_kernel
def ex_bar(P, act, g, w, base, NL, W, code, regs, pc, st, barid, bars, conv, wpc, live, err, cta):
    """bar.sync / barrier (FAM_BAR) for the lanes `act` (not 0) of the group `g`: each thread waits
    at its barrier, the warp arrives once all its non-exited threads do. 0, or -1 after a fault
    in `err`; the group's run ends either way."""
    s0 = code[P, F_S0]
    s1 = code[P, F_S1]
    bids = np.int64(0)
    for l in range(NL):
        if (act >> l) & 1:
            t = base + l
            bid = regs[s0, t] if s0 >= 0 else 0
            need = regs[s1, t] if s1 >= 0 else -1
            if bid < 0 or bid >= N_BARRIERS or (s1 >= 0 and (need <= 0 or need % 32 != 0)):
                _fail(err, ST_BAD_BARRIER, P, t, cta, bid, need, 0, 0)
                return -1
            if (bars[bid, B_WMASK] >> w) & 1:
                _refuse(err, UNS_BAR_TWICE, P, t, cta, bid, 0, 0)
                return -1
            st[t] = TS_BAR
            barid[t] = bid
            pc[t] = P
            bids |= np.int64(1) << bid
    rest = g & ~act
    if rest != 0:
        for l in range(NL):
            if (rest >> l) & 1:
                pc[base + l] = P + 1
        conv[w] = False
    for bid in range(N_BARRIERS):
        if (bids >> bid) & 1:
            reason = barrier_arrive(code, regs, pc, st, barid, w, bid, bars, conv, wpc, live, W)
            if reason != 0:
                _refuse(err, reason, P, base + _lowest(act), cta, bid, 0, 0)
                return -1
    return 0


@emu_kernel
def ex_sync(P, act, g, w, base, NL, code, regs, pc, st, syncm, conv, live, err, cta):
    """A ``.sync`` collective (FAM_SYNC: shfl, vote, match, redux, bar.warp.sync) for the lanes
    `act` (not 0) of the group `g`, each with its own membermask (sync.py: a group is one mask less
    the exited lanes): 0 when it ran at once (one group, all here) and the group goes on, 1 when
    lanes wait for members elsewhere (the group's run ends), -1 after a fault in `err`."""
    ms = member_mask_slot(code, P)
    m0 = np.int64(-1)
    uniform = True
    for l in range(NL):
        if (act >> l) & 1:
            t = base + l
            ml = zext(regs[ms, t], 32) if ms >= 0 else np.int64(0xFFFFFFFF)
            if not (ml >> l) & 1:
                _refuse(err, UNS_NOT_MEMBER, P, t, cta, l, ml, ml)
                return -1
            syncm[t] = ml
            pc[t] = P
            if m0 < 0:
                m0 = ml
            elif ml != m0:
                uniform = False
    if uniform and (m0 & live[w]) == act:
        reason, lane, other = exec_sync(code, regs, pc, st, act, base)
        if reason != 0:
            _refuse(err, reason, P, base + lane, cta, other, m0, m0)
            return -1
        return 0
    if not uniform:
        # lanes executing one collective together must give every lane they name the same mask
        for l in range(NL):
            if (act >> l) & 1:
                ml = syncm[base + l]
                for q in range(NL):
                    if (act >> q) & 1 and (ml >> q) & 1 and syncm[base + q] != ml:
                        _refuse(err, UNS_MASK_CONFLICT, P, base + l, cta, q, ml, syncm[base + q])
                        return -1
    # groups with members elsewhere wait for them; complete ones run now
    for l in range(NL):
        if (act >> l) & 1:
            st[base + l] = TS_SYNC
    rest = g & ~act
    for l in range(NL):
        if (rest >> l) & 1:
            pc[base + l] = P + 1
    conv[w] = False
    reason, lane, other = release_syncs(code, regs, pc, st, syncm, w, live)
    if reason != 0:
        _refuse(err, reason, pc[base + lane], base + lane, cta, other, syncm[base + lane], syncm[base + other])
        return -1
    return 1


@emu_kernel
def ex_misc(P, act, code, regs, base, NL, local, local_size, now, err, cta):
    """activemask, clock reads (`now`: the CTA's instruction clock), nanosleep, printf and trap
    (FAM_MISC) for the lanes `act`: 0 to go on, 1 after nanosleep (a diverged group yields), -1
    after a trap described in `err`."""
    op = code[P, F_OP]
    d0 = code[P, F_D0]
    if op == OP_ACTIVEMASK:
        # the threads executing it (PTX ISA, activemask: inactive and predicated-off threads give 0)
        for l in range(NL):
            if (act >> l) & 1:
                regs[d0, base + l] = act
    elif op == OP_CLOCK:
        sub = code[P, F_SUB]
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                if sub == CLK_CLOCK or sub == CLK_GLOBALTIMER_LO:
                    regs[d0, t] = zext(now, 32)
                elif sub == CLK_GLOBALTIMER_HI:
                    regs[d0, t] = zext(now >> 32, 32)
                else:
                    regs[d0, t] = now
    elif op == OP_NANOSLEEP:
        return 1
    elif op == OP_PRINTF:
        off = code[P, F_AOFF]
        if off >= 0:
            for l in range(NL):
                if (act >> l) & 1:
                    store_bits(local, (base + l) * local_size + off, 4, 0)
    elif op == OP_TRAP:
        if act != 0:
            _fail(err, ST_TRAP, P, base + _lowest(act), cta, 0, 0, 0, code[P, F_AUX])
            return -1
    return 0


PICK_RUN, PICK_NONE, PICK_AGAIN = 0, 1, 2
"""What `pick_group` found: a group to run, no lane that can run, or look again (the warp has
converged, or every lane of the group waits at a convergence barrier)."""


@njit(**INLINE)
def pick_group(w, base, NL, live, st, pc, wyield, conv, wpc, cb_rpc, cb_mask, cb_n, cbw):
    """The next group of lanes of the diverged warp `w` to run: ``(kind, P, g, other_min,
    arrived)`` with kind PICK_*, the group's row `P` and lanes `g`, the lowest PC above `P` of the
    warp's other running lanes (where the group stops), and whether lanes arrived at a convergence
    barrier. The lowest PC runs first, except that a group that has just taken a backward branch
    (``wyield``) yields to another; lanes reaching a convergence barrier wait there, released with
    `release_cbars`."""
    lw = live[w]
    minp = BIG
    maxp = -1
    nrun = 0
    yp = wyield[w]
    minp2 = BIG
    for l in range(NL):
        if (lw >> l) & 1:
            t = base + l
            if st[t] == TS_RUN:
                p = pc[t]
                nrun += 1
                if p < minp:
                    minp = p
                if p > maxp:
                    maxp = p
                if p != yp and p < minp2:
                    minp2 = p
    if nrun == 0:
        return PICK_NONE, 0, 0, BIG, False
    if nrun == popc64(lw) and minp == maxp:
        conv[w] = True
        wpc[w] = minp
        wyield[w] = -1
        return PICK_AGAIN, 0, 0, BIG, False
    if yp >= 0 and minp2 != BIG:
        P = minp2
    else:
        P = minp
        wyield[w] = -1
    g = np.int64(0)
    other_min = BIG
    for l in range(NL):
        if (lw >> l) & 1:
            t = base + l
            if st[t] == TS_RUN:
                p = pc[t]
                if p == P:
                    g |= np.int64(1) << l
                elif p > P and p < other_min:
                    other_min = p
    arrived = False
    for k in range(cb_n[w]):
        if cb_rpc[w, k] == P:
            arr = g & cb_mask[w, k]
            if arr != 0:
                for l in range(NL):
                    if (arr >> l) & 1:
                        st[base + l] = TS_CBAR
                        cbw[base + l] = P
                g &= ~arr
                arrived = True
    if arrived:
        release_cbars(w, cb_rpc, cb_mask, cb_n, st, cbw, live)
        if g == 0:
            return PICK_AGAIN, P, g, other_min, True
    return PICK_RUN, P, g, other_min, arrived


@emu_kernel
def diverge(P, act, g, w, base, NL, code, pc, cb_rpc, cb_mask, cb_n, wyield, conv, err, cta):
    """A guarded branch at row `P` taken by some lanes `act` of the group `g`: per-lane PCs and a
    convergence barrier at the branch's IPDOM. 0, or -1 after a fault in `err` (a ``bra.uni`` that
    diverged, too many convergence barriers)."""
    tgt = code[P, F_TGT]
    if code[P, F_FLAGS] & FL_UNI:
        _fail(err, ST_NONUNIFORM, P, base + _lowest(g), cta, act, g, 0, 0)
        return -1
    for l in range(NL):
        if (g >> l) & 1:
            pc[base + l] = tgt if (act >> l) & 1 else P + 1
    rpc = code[P, F_IPDOM]
    if rpc >= 0:
        found = False
        for k in range(cb_n[w]):
            if cb_rpc[w, k] == rpc:
                cb_mask[w, k] |= g
                found = True
        if not found:
            if cb_n[w] >= MAX_CBARS:
                _fail(err, ST_CBAR_OVERFLOW, P, base + _lowest(g), cta, 0, 0, 0, 0)
                return -1
            cb_rpc[w, cb_n[w]] = rpc
            cb_mask[w, cb_n[w]] = g
            cb_n[w] += 1
    if tgt <= P:
        wyield[w] = tgt
    conv[w] = False
    return 0


@njit(**INLINE)
def at_cbar(P, g, w, conv, cb_rpc, cb_mask, cb_n):
    """Whether the group `g` of warp `w`, arriving at row `P`, stops at a convergence barrier
    there (a diverged warp's lanes that registered it); a converged warp drops the barriers of
    `P` instead (every lane is here)."""
    if conv[w]:
        k = 0
        while k < cb_n[w]:
            if cb_rpc[w, k] == P:
                n = cb_n[w] - 1
                cb_rpc[w, k] = cb_rpc[w, n]
                cb_mask[w, k] = cb_mask[w, n]
                cb_n[w] = n
            else:
                k += 1
        return False
    hit = False
    for k in range(cb_n[w]):
        if cb_rpc[w, k] == P and (cb_mask[w, k] & g) != 0:
            hit = True
    return hit


@emu_kernel
def _kept(rec_key, rec_op, rec_mask, rec_addr, nrec):
    """The first `nrec` records, as `run_ctas` returns them (one call at each of its exits, not
    four slices lowered at each)."""
    return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]


def _assemble(families: frozenset[int]):  # noqa: ANN202 (a Numba dispatcher)
    """`run_ctas` for kernels whose rows are of `families` (codes.FAM_*): the handlers of the other
    families are pruned before Numba types the function (a constant condition on a free variable),
    so they are neither inlined nor compiled. Each variant is compiled and cached under a name of
    its own (`interpreter_name`, see `tuiprof.jit.built_kernel`)."""
    HAS_MOV = FAM_MOV in families
    HAS_IADD = FAM_IADD in families
    HAS_IMUL = FAM_IMUL in families
    HAS_SHIFT = FAM_SHIFT in families
    HAS_LOGIC = FAM_LOGIC in families
    HAS_SETP_INT = FAM_SETP_INT in families
    HAS_SELP = FAM_SELP in families
    HAS_CVT_INT = FAM_CVT_INT in families
    HAS_FLOAT_PLAIN = FAM_FLOAT_PLAIN in families
    HAS_CVTA = FAM_CVTA in families
    HAS_INT_MORE = FAM_INT_MORE in families
    HAS_CMP = FAM_CMP in families
    HAS_FLOAT = FAM_FLOAT in families
    HAS_CVT = FAM_CVT in families
    HAS_LDST = FAM_LDST in families
    HAS_ATOM = FAM_ATOM in families
    HAS_TEX = FAM_TEX in families
    HAS_CPASYNC = FAM_CPASYNC in families
    HAS_BRA = FAM_BRA in families
    HAS_CALL = FAM_CALL in families
    HAS_BAR = FAM_BAR in families
    HAS_SYNC = FAM_SYNC in families
    HAS_MISC = FAM_MISC in families
    DIVERGES = HAS_BRA or HAS_CALL or HAS_BAR or HAS_SYNC
    """Whether a warp can diverge: without branches, calls, CTA barriers and collectives its lanes
    stay at one PC (an exit only removes lanes), so the per-lane PCs, the choice of a diverged
    warp's group and the convergence barriers are pruned too."""
    def run_ctas(code, cfg, init_regs, cta_spec, cta_list, snap_pos, heap, seg_lo, seg_hi, seg_off, const_buf,
                 param_buf, out_insts, out_acc, out_thr, op_space, err, ctl):
        """Run the CTAs `cta_list` (linear ids) of one launch to completion, recording the warp
        accesses of those with ``snap_pos >= 0``. Returns the records (key = snapshot position x
        warps + warp, op, mask, addresses) in execution order; ``err[0]`` is the status.

        `ctl` is shared by the batches of a launch running at once: they count the snapshot's warp
        accesses in ``ctl[CTL_RECORDS]`` and keep only the first ``cfg[C_REC_MAX]`` (so that a runaway
        loop's memory is bounded while it runs on to its step limit), and a batch stops between
        instruction runs once ``ctl[CTL_FAILED]`` names an earlier batch (the first failure ends the
        launch without running every other CTA to its own)."""
        T = cfg[C_T]
        W = cfg[C_W]
        n_slots = cfg[C_NSLOTS]
        shared_size = cfg[C_SHARED]
        local_size = cfg[C_LOCAL]
        n_sms = cfg[C_SMS]
        sm_base = cfg[C_SM_BASE]
        step_limit = cfg[C_STEP_LIMIT]
        entry = cfg[C_ENTRY]
        rec_max = cfg[C_REC_MAX]
        batch = cfg[C_BATCH]
        const_size = cfg[C_CONST]
        param_size = cfg[C_PARAM]
        local_words = cfg[C_LOCAL_WORDS]
        gx = cfg[C_GX]
        gy = cfg[C_GY]
        Tp = W * 32
        NL = cfg[C_LANES]

        regs_own = np.zeros((n_slots, Tp), np.int64)
        shared_own = np.zeros(shared_size + 16, np.uint8)
        local_own = np.zeros(Tp * local_size + 16, np.uint8)
        # the arrays the inlined handlers and helpers take, as views without a reference (jit.borrowed:
        # no atomic incref/decref per instruction); the owners live to the end (keep_alive)
        regs = borrowed(regs_own)
        shared = borrowed(shared_own)
        local = borrowed(local_own)
        code = borrowed(code)
        heap = borrowed(heap)
        seg_lo = borrowed(seg_lo)
        seg_hi = borrowed(seg_hi)
        seg_off = borrowed(seg_off)
        pc_own = np.zeros(Tp, np.int64)
        st_own = np.zeros(Tp, np.int64)
        cbw_own = np.full(Tp, -1, np.int64)
        syncm_own = np.zeros(Tp, np.int64)
        barid_own = np.full(Tp, -1, np.int64)
        cstack_own = np.zeros((Tp, MAX_CALL_DEPTH), np.int64)
        csp_own = np.zeros(Tp, np.int64)
        conv_own = np.zeros(W, np.bool_)
        wpc_own = np.zeros(W, np.int64)
        live_own = np.zeros(W, np.int64)
        cb_rpc_own = np.zeros((W, MAX_CBARS), np.int64)
        cb_mask_own = np.zeros((W, MAX_CBARS), np.int64)
        cb_n_own = np.zeros(W, np.int64)
        wyield_own = np.full(W, -1, np.int64)
        bars_own = np.zeros((N_BARRIERS, N_BAR_FIELDS), np.int64)
        # the scheduler's state, borrowed too: the control functions (`diverge`, `ex_bar`...) are called
        pc = borrowed(pc_own)
        st = borrowed(st_own)
        cbw = borrowed(cbw_own)
        syncm = borrowed(syncm_own)
        barid = borrowed(barid_own)
        cstack = borrowed(cstack_own)
        csp = borrowed(csp_own)
        conv = borrowed(conv_own)
        wpc = borrowed(wpc_own)
        live = borrowed(live_own)
        cb_rpc = borrowed(cb_rpc_own)
        cb_mask = borrowed(cb_mask_own)
        cb_n = borrowed(cb_n_own)
        wyield = borrowed(wyield_own)
        bars = borrowed(bars_own)
        offs_own = np.zeros(32, np.int64)
        addrs_own = np.zeros(32, np.int64)
        offs = borrowed(offs_own)
        addrs = borrowed(addrs_own)
        op_space = borrowed(op_space)
        cs = 0

        cap = max(cfg[C_REC_CAP], 16)
        rec_key = np.empty(cap, np.int64)
        rec_op = np.empty(cap, np.int32)
        rec_mask = np.empty(cap, np.uint32)
        rec_addr = np.zeros((cap, 32), np.uint64)
        nrec = 0
        err[E_STATUS] = ST_OK

        for ci in range(cta_list.shape[0]):
            cta = cta_list[ci]
            if atomic_get(ctl, CTL_FAILED) < batch:
                _fail(err, ST_ABORTED, -1, 0, cta, 0, 0, 0, 0)
                return _kept(rec_key, rec_op, rec_mask, rec_addr, nrec)
            spos = snap_pos[ci]
            recording = spos >= 0
            # ---------------------------------------------------------------- CTA set-up
            for k in range(n_slots):
                for t in range(Tp):
                    regs[k, t] = init_regs[k, t]
            cx = cta % gx
            cy = (cta // gx) % gy
            cz = cta // (gx * gy)
            # %smid: the modeled CTA placement of the simulator (sim/prepared.py, cta_layout): snapshot
            # CTA k runs on SM k mod S (S: the snapshot's spread, arch.occupancy.snapshot_spread); the
            # rest of the grid continues that round robin from the first snapshot CTA.
            smid = (spos if recording else cta - sm_base) % n_sms
            if smid < 0:
                smid += n_sms
            for k in range(cta_spec.shape[0]):
                slot = cta_spec[k, 0]
                which = cta_spec[k, 1]
                v = cx if which == CS_CTAID_X else (cy if which == CS_CTAID_Y else (cz if which == CS_CTAID_Z else smid))
                for t in range(Tp):
                    regs[slot, t] = v
            for k in range(shared.shape[0]):
                shared[k] = 0
            for k in range(local.shape[0]):
                local[k] = 0
            for t in range(Tp):
                csp[t] = 0
                cbw[t] = -1
                barid[t] = -1
            for w in range(W):
                n_in = T - w * 32
                if n_in >= 32:
                    live[w] = np.int64(0xFFFFFFFF)
                else:
                    live[w] = (np.int64(1) << n_in) - 1
                conv[w] = True
                wpc[w] = entry
                cb_n[w] = 0
                wyield[w] = -1
            for t in range(Tp):
                st[t] = TS_RUN if t < T else TS_EXIT
                pc[t] = entry
            for bid in range(N_BARRIERS):
                reset_barrier(bars, bid)
            n_exited = Tp - T
            insts = np.int64(0)
            accesses = np.int64(0)
            thr = np.int64(0)
            clock_base = cta << 24

            # ---------------------------------------------------------------- scheduler
            while n_exited < Tp:
                progress = False
                for w in range(W):
                    if live[w] == 0:
                        continue
                    base = w * 32
                    budget = QUANTUM
                    # room for the records of this turn (at most 2 per instruction, never more than
                    # rec_max kept): the record arrays are replaced here only, not in the instruction
                    # loop, where each merge of their versions would cost atomic reference counts
                    if recording and nrec + 2 * QUANTUM > cap and cap < rec_max + 2:
                        cap2 = min(max(cap * 2, nrec + 2 * QUANTUM), rec_max + 2)
                        k2 = np.empty(cap2, np.int64)
                        o2 = np.empty(cap2, np.int32)
                        m2 = np.empty(cap2, np.uint32)
                        a2 = np.zeros((cap2, 32), np.uint64)
                        _copy_records(k2, o2, m2, a2, rec_key, rec_op, rec_mask, rec_addr, nrec)
                        rec_key = k2
                        rec_op = o2
                        rec_mask = m2
                        rec_addr = a2
                        cap = cap2
                    while budget > 0 and live[w] != 0:
                        # ---------------------------------------- pick the group to run
                        if not DIVERGES or conv[w]:
                            lw = live[w]
                            if st[base + _lowest(lw)] != TS_RUN:
                                break
                            P = wpc[w]
                            g = lw
                            other_min = BIG
                            P_start = -1
                        else:
                            # a diverged warp: the group of lanes to run (`pick_group`)
                            kind, P, g, other_min, arrived = pick_group(w, base, NL, live, st, pc, wyield, conv, wpc, cb_rpc, cb_mask,
                                                                        cb_n, cbw)
                            if arrived:
                                progress = True
                            if kind == PICK_NONE:
                                break
                            if kind != PICK_RUN:
                                continue
                            P_start = P
                        # ---------------------------------------- run the group
                        writeback = True
                        while True:
                            if P >= other_min or budget <= 0:
                                break
                            if DIVERGES and cb_n[w] > 0 and P != P_start and at_cbar(P, g, w, conv, cb_rpc, cb_mask, cb_n):
                                break
                            P_start = -1
                            op = code[P, F_OP]
                            insts += 1
                            budget -= 1
                            progress = True
                            gs = code[P, F_GUARD]
                            act = g
                            if gs >= 0:
                                neg = code[P, F_GNEG] != 0
                                act = np.int64(0)
                                for l in range(NL):
                                    if (g >> l) & 1:
                                        if (regs[gs, base + l] != 0) != neg:
                                            act |= np.int64(1) << l
                            thr += popc64(act)
                            # ------------------------------------ the instruction, by family (codes.FAM_*)
                            fam = code[P, F_FAM]
                            if fam < FAM_SCALAR_LDST:
                                if fam == FAM_NOP:
                                    pass
                                elif HAS_MOV and fam == FAM_MOV:
                                    ex_mov(P, act, code, regs, base, NL)
                                elif HAS_IADD and fam == FAM_IADD:
                                    ex_iadd(P, act, code, regs, base, NL)
                                elif HAS_IMUL and fam == FAM_IMUL:
                                    ex_imul(P, act, code, regs, base, NL)
                                elif HAS_SHIFT and fam == FAM_SHIFT:
                                    ex_shift(P, act, code, regs, base, NL)
                                elif HAS_LOGIC and fam == FAM_LOGIC:
                                    ex_logic(P, act, code, regs, base, NL)
                                elif HAS_SETP_INT and fam == FAM_SETP_INT:
                                    ex_setp_int(P, act, code, regs, base, NL)
                                elif HAS_SELP and fam == FAM_SELP:
                                    ex_selp(P, act, code, regs, base, NL)
                                elif HAS_CVT_INT and fam == FAM_CVT_INT:
                                    ex_cvt_int(P, act, code, regs, base, NL)
                                elif HAS_FLOAT_PLAIN and fam == FAM_FLOAT_PLAIN:
                                    ex_float_plain(P, act, code, regs, base, NL)
                                elif HAS_CVTA and fam == FAM_CVTA:
                                    ex_cvta(P, act, code, regs, base, NL)
                                else:
                                    ok = False
                                    if HAS_INT_MORE and fam == FAM_INT_MORE:
                                        ok = alu_int(P, act, code, regs, base, NL)
                                    elif HAS_CMP and fam == FAM_CMP:
                                        ok = alu_cmp(P, act, code, regs, base, NL)
                                    elif HAS_FLOAT and fam == FAM_FLOAT:
                                        ok = alu_float(P, act, code, regs, base, NL)
                                    elif HAS_CVT and fam == FAM_CVT:
                                        ok = alu_cvt(P, act, code, regs, base, NL)
                                    if not ok:
                                        _fail(err, ST_UNSUPPORTED, P, base + _lowest(g), cta, 0, 0, 0, op)
                                        return _kept(rec_key, rec_op, rec_mask, rec_addr, nrec)
                                P += 1
                            elif fam <= FAM_CPASYNC:
                                keep = recording
                                if recording and act != 0:
                                    want = 1 if code[P, F_SOP] >= 0 else 0
                                    if op == OP_CPASYNC and code[P, F_SOP2] >= 0:
                                        want += 1
                                    if want > 0:
                                        keep = atomic_add(ctl, CTL_RECORDS, want) + want <= rec_max
                                done = False
                                if fam == FAM_SCALAR_LDST:
                                    # inline (the record arrays borrowed: they are replaced only between turns)
                                    fault, lane, cs, nrec, nacc = scalar_ldst(P, act, code, regs, base, NL, keep,
                                                                              spos * W + w, heap, shared, seg_lo, seg_hi,
                                                                              seg_off, shared_size, cs, offs, addrs,
                                                                              borrowed(rec_key), borrowed(rec_op),
                                                                              borrowed(rec_mask), borrowed(rec_addr),
                                                                              nrec, op_space)
                                    accesses += nacc
                                    done = fault == ST_OK
                                if not done:
                                    nacc = 0
                                    if fam == FAM_SCALAR_LDST:
                                        # its fault, named here: a call inside scalar_ldst, even untaken, slowed
                                        # the hot loop by 5-10% (as did leaving this chain by a way of its own)
                                        _fail(err, fault, P, base + lane, cta, addrs[lane], code[P, F_NB],
                                              code[P, F_SPACE], 0)
                                        nrec = -1
                                    elif fam == FAM_LD_BANK:
                                        nrec, nacc = ld_bank(P, act, code, regs, base, NL, keep, spos * W + w, const_buf,
                                                             param_buf, const_size, param_size, rec_key, rec_op, rec_mask,
                                                             rec_addr, nrec, err, cta)
                                    elif HAS_LDST and fam == FAM_LDST:
                                        nrec, nacc = mem_ldst(P, act, code, regs, base, NL, w, W, cta, spos, keep, heap,
                                                              shared, local, const_buf, param_buf, seg_lo, seg_hi, seg_off,
                                                              shared_size, local_size, const_size, param_size, local_words,
                                                              rec_key, rec_op, rec_mask, rec_addr, nrec, op_space, err)
                                    elif HAS_ATOM and fam == FAM_ATOM:
                                        nrec, nacc = mem_atom(P, act, code, regs, base, NL, w, W, cta, spos, keep, heap,
                                                              shared, local, const_buf, param_buf, seg_lo, seg_hi, seg_off,
                                                              shared_size, local_size, const_size, param_size, local_words,
                                                              rec_key, rec_op, rec_mask, rec_addr, nrec, op_space, err)
                                    elif HAS_TEX and fam == FAM_TEX:
                                        nrec, nacc = mem_tex(P, act, code, regs, base, NL, w, W, cta, spos, keep, heap,
                                                             shared, local, const_buf, param_buf, seg_lo, seg_hi, seg_off,
                                                             shared_size, local_size, const_size, param_size, local_words,
                                                             rec_key, rec_op, rec_mask, rec_addr, nrec, op_space, err)
                                    elif HAS_CPASYNC and fam == FAM_CPASYNC:
                                        nrec, nacc = mem_cpasync(P, act, code, regs, base, NL, w, W, cta, spos, keep, heap,
                                                                 shared, local, const_buf, param_buf, seg_lo, seg_hi,
                                                                 seg_off, shared_size, local_size, const_size, param_size,
                                                                 local_words, rec_key, rec_op, rec_mask, rec_addr, nrec,
                                                                 op_space, err)
                                    else:
                                        _fail(err, ST_UNSUPPORTED, P, base + _lowest(g), cta, 0, 0, 0, op)
                                        nrec = -1
                                    if nrec < 0:
                                        return _kept(rec_key, rec_op, rec_mask, rec_addr, 0)
                                    accesses += nacc
                                P += 1
                            elif HAS_BRA and op == OP_BRA:
                                tgt = code[P, F_TGT]
                                if act == g:
                                    nxt = tgt
                                elif act == 0:
                                    nxt = P + 1
                                else:
                                    # divergence: per-lane PCs and a convergence barrier at the IPDOM
                                    if diverge(P, act, g, w, base, NL, code, pc, cb_rpc, cb_mask, cb_n, wyield, conv, err, cta) < 0:
                                        return _kept(rec_key, rec_op, rec_mask, rec_addr, nrec)
                                    writeback = False
                                    break
                                if nxt <= P and not conv[w]:
                                    wyield[w] = nxt
                                    P = nxt
                                    break
                                P = nxt
                            elif HAS_CALL and (op == OP_CALL or op == OP_RET):
                                P, out = ex_call(P, act, g, w, base, NL, code, pc, cstack, csp, cb_rpc, cb_mask, cb_n, conv, err, cta)
                                if out < 0:
                                    return _kept(rec_key, rec_op, rec_mask, rec_addr, nrec)
                                if out == 1:
                                    writeback = False
                                    break
                            elif op == OP_EXIT:
                                if act != 0:
                                    for l in range(NL):
                                        if (act >> l) & 1:
                                            st[base + l] = TS_EXIT
                                    live[w] &= ~act
                                    n_exited += popc64(act)
                                    g &= ~act
                                    if HAS_BAR:
                                        reason, t = barriers_after_exit(code, regs, pc, st, barid, w, bars, conv, wpc, live,
                                                                        W)
                                        if reason != 0:
                                            _refuse(err, reason, pc[t], t, cta, barid[t], 0, 0)
                                            return _kept(rec_key, rec_op, rec_mask, rec_addr, nrec)
                                    if DIVERGES and not conv[w]:
                                        release_cbars(w, cb_rpc, cb_mask, cb_n, st, cbw, live)
                                    if HAS_SYNC and not conv[w]:
                                        reason, lane, other = release_syncs(code, regs, pc, st, syncm, w, live)
                                        if reason != 0:
                                            _refuse(err, reason, pc[base + lane], base + lane, cta, other,
                                                    syncm[base + lane], syncm[base + other])
                                            return _kept(rec_key, rec_op, rec_mask, rec_addr, nrec)
                                P += 1
                                if g == 0:
                                    writeback = False
                                    break
                                if DIVERGES and not conv[w] and act != 0:
                                    break
                            elif HAS_BAR and op == OP_BAR:
                                if act == 0:
                                    P += 1
                                    continue
                                if ex_bar(P, act, g, w, base, NL, W, code, regs, pc, st, barid, bars, conv, wpc, live, err, cta) < 0:
                                    return _kept(rec_key, rec_op, rec_mask, rec_addr, nrec)
                                writeback = False
                                break
                            elif HAS_SYNC and (op == OP_SHFL or op == OP_VOTE or op == OP_MATCH or op == OP_REDUX
                                              or op == OP_BARWARP):
                                if act == 0:
                                    P += 1
                                    continue
                                out = ex_sync(P, act, g, w, base, NL, code, regs, pc, st, syncm, conv, live, err, cta)
                                if out < 0:
                                    return _kept(rec_key, rec_op, rec_mask, rec_addr, nrec)
                                if out == 0:
                                    P += 1
                                    continue
                                writeback = False
                                break
                            elif HAS_MISC and (op == OP_ACTIVEMASK or op == OP_CLOCK or op == OP_NANOSLEEP or op == OP_PRINTF
                                              or op == OP_TRAP):
                                out = ex_misc(P, act, code, regs, base, NL, local, local_size, clock_base + insts, err, cta)
                                if out < 0:
                                    return _kept(rec_key, rec_op, rec_mask, rec_addr, nrec)
                                P += 1
                                if out == 1 and not conv[w]:
                                    wyield[w] = P
                                    break
                            else:
                                _fail(err, ST_UNSUPPORTED, P, base + _lowest(g), cta, 0, 0, 0, op)
                                return _kept(rec_key, rec_op, rec_mask, rec_addr, nrec)
                        # ---------------------------------------- end of the group's run
                        if writeback:
                            if not DIVERGES or conv[w]:
                                wpc[w] = P
                            else:
                                for l in range(NL):
                                    if (g >> l) & 1:
                                        pc[base + l] = P
                        if insts > step_limit:
                            _fail(err, ST_STEP_LIMIT, P, base + _lowest(live[w]) if live[w] != 0 else base, cta, 0, 0, 0,
                                  insts)
                            return _kept(rec_key, rec_op, rec_mask, rec_addr, nrec)
                        if atomic_get(ctl, CTL_FAILED) < batch:
                            _fail(err, ST_ABORTED, P, base, cta, 0, 0, 0, 0)
                            return _kept(rec_key, rec_op, rec_mask, rec_addr, nrec)
                if not progress and n_exited < Tp:
                    # nothing can run: report a waiting lane
                    wt = -1
                    for t in range(Tp):
                        if st[t] == TS_BAR or st[t] == TS_SYNC or st[t] == TS_CBAR:
                            wt = t
                            break
                    wp = pc[wt] if wt >= 0 else -1
                    _fail(err, ST_DEADLOCK, wp, wt, cta, st[wt] if wt >= 0 else 0, Tp - n_exited, 0, 0)
                    return _kept(rec_key, rec_op, rec_mask, rec_addr, nrec)
            out_insts[ci] = insts
            out_acc[ci] = accesses
            out_thr[ci] = thr
        keep_alive(regs_own)
        keep_alive(shared_own)
        keep_alive(local_own)
        keep_alive(pc_own)
        keep_alive(st_own)
        keep_alive(cbw_own)
        keep_alive(syncm_own)
        keep_alive(barid_own)
        keep_alive(cstack_own)
        keep_alive(csp_own)
        keep_alive(conv_own)
        keep_alive(wpc_own)
        keep_alive(live_own)
        keep_alive(cb_rpc_own)
        keep_alive(cb_mask_own)
        keep_alive(cb_n_own)
        keep_alive(wyield_own)
        keep_alive(bars_own)
        keep_alive(offs_own)
        keep_alive(addrs_own)
        if 2 * nrec < cap:   # mostly a turn's headroom: keep only the records (every batch's wait for the merge)
            rec_key = rec_key[:nrec].copy()
            rec_op = rec_op[:nrec].copy()
            rec_mask = rec_mask[:nrec].copy()
            rec_addr = rec_addr[:nrec].copy()
        return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]

    return built_kernel(run_ctas, interpreter_name(families))


_ASSEMBLED: dict[frozenset[int], object] = {}


def interpreter_name(families: frozenset[int]) -> str:
    """The name the interpreter for `families` is compiled and cached under: ``run_ctas_`` and the
    families as a bit mask in hex (``run_ctas_7f`` holds families 0-6), the same in every process."""
    return f"run_ctas_{sum(1 << f for f in families):x}"


def run_ctas_for(code: np.ndarray):  # noqa: ANN201 (a Numba dispatcher)
    """The interpreter (`run_ctas`) for the decoded kernel `code`: compiled for the instruction
    families its rows use (`families_of`), once per variant (and cached on disk)."""
    return interpreter(families_of(code))


def interpreter(families: frozenset[int]):  # noqa: ANN201 (a Numba dispatcher)
    """The interpreter compiled for `families` (one of `VARIANTS`), assembled once per process."""
    if families not in _ASSEMBLED:
        _ASSEMBLED[families] = _assemble(families)
    return _ASSEMBLED[families]


def families_of(code: np.ndarray) -> frozenset[int]:
    """The families the interpreter for the decoded kernel `code` is compiled with: the first of
    `VARIANTS` that holds the families (FAM_*) of its rows."""
    used = frozenset(int(f) for f in np.unique(code[:, F_FAM]))
    return next((v for v in VARIANTS if used <= v), VARIANTS[-1])
