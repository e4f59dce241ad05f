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

A warp keeps running until it blocks, diverges, takes a backward branch while diverged, or has
run `QUANTUM` instructions; then the next warp of the CTA runs. Failures (out-of-bounds or
misaligned access, trap, step limit, deadlock...) stop the run with a status in ``err`` naming
the instruction, thread, CTA and address, which Python turns into a TuiprofError.
"""

from __future__ import annotations

import numpy as np

from tuiprof.collect.emu.kernel.alu import (add_sat_s32, sub_sat_s32, bfe, bfi, bfind, brev, clz, combine, compare, cvt, cvt_pack2,
                                            float_op, int_div, int_mul, int_op2, lop3, popc, prmt, rd, sext, shf,
                                            shift, tbits, testp, ult, wr, zext)
from tuiprof.collect.emu.kernel.bits import (bits_f32, bits_f64, f32_of, f64_of, fma32, fma64, load_bits, popc64,
                                             store_bits)
from tuiprof.collect.emu.kernel.codes import *  # noqa: F403 (the shared numbering)
from tuiprof.collect.emu.kernel.codes import (AT_ADD, AT_AND, AT_CAS, AT_DEC, AT_EXCH, AT_INC, AT_MAX, AT_MIN, AT_OR,
                                              AT_XOR)
from tuiprof.collect.emu.kernel.memory import K_CONST, K_HEAP, K_LOCAL, K_PARAM, K_SHARED, find_segment, resolve
from tuiprof.collect.emu.kernel.texture import descriptor, fetch, heap_load, heap_store, surface
from tuiprof.collect.emu.kernel.sync import (B_WMASK, N_BAR_FIELDS, barrier_arrive, barriers_after_exit, exec_sync,
                                             member_mask_slot, release_syncs, reset_barrier)
from tuiprof.collect.emu.kernel.sync import lowest_lane as _lowest
from tuiprof.jit import INLINE, KERNEL, atomic_add, atomic_get, njit

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

# per-CTA special registers (cta_spec[:, 1])
CS_CTAID_X, CS_CTAID_Y, CS_CTAID_Z, CS_SMID = 0, 1, 2, 3


@njit(**KERNEL)
def _fail(err, status, pc, t, cta, addr, nbytes, space, info):
    err[E_STATUS] = status
    err[E_PC] = pc
    err[E_THREAD] = t
    err[E_CTA] = cta
    err[E_ADDR] = addr
    err[E_BYTES] = nbytes
    err[E_SPACE] = space
    err[E_INFO] = info


@njit(**KERNEL)
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


@njit(**KERNEL)
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


@njit(**KERNEL)
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


@njit(**KERNEL)
def alu_step(P, act, code, regs, base, NL):
    """Execute register-only instruction `P` for the lanes `act` of the warp at thread `base`.
    Returns False when `P` is not such an instruction."""
    op = code[P, F_OP]
    ty = code[P, F_TY]
    d0 = code[P, F_D0]
    s0 = code[P, F_S0]
    s1 = code[P, F_S1]
    s2 = code[P, F_S2]
    if op == OP_NOP:
        pass
    elif op == OP_MOV:
        if ty == T_PRED:
            for l in range(NL):
                if (act >> l) & 1:
                    regs[d0, base + l] = 1 if regs[s0, base + l] != 0 else 0
        else:
            bits = tbits(ty)
            for l in range(NL):
                if (act >> l) & 1:
                    regs[d0, base + l] = zext(regs[s0, base + l], bits)
    elif op == OP_IADD:
        bits = tbits(ty)
        fl = code[P, F_FLAGS]
        if fl == 0:
            for l in range(NL):
                if (act >> l) & 1:
                    t = base + l
                    regs[d0, t] = zext(regs[s0, t] + regs[s1, t], bits)
        else:
            cc = code[P, F_AUX]
            for l in range(NL):
                if (act >> l) & 1:
                    t = base + l
                    x = zext(regs[s0, t], bits)
                    y = zext(regs[s1, t], bits)
                    cin = regs[cc, t] if (fl & FL_CC_IN) else 0
                    if fl & FL_SAT:
                        r = add_sat_s32(x, y)
                    else:
                        r = zext(x + y + cin, bits)
                    if fl & FL_CC_OUT:
                        if bits == 64:
                            carry = ult(r, x) or (cin != 0 and r == x)
                        else:
                            carry = ((x + y + cin) >> bits) != 0
                        regs[cc, t] = 1 if carry else 0
                    regs[d0, t] = r
    elif op == OP_ISUB:
        bits = tbits(ty)
        fl = code[P, F_FLAGS]
        if fl == 0:
            for l in range(NL):
                if (act >> l) & 1:
                    t = base + l
                    regs[d0, t] = zext(regs[s0, t] - regs[s1, t], bits)
        else:
            cc = code[P, F_AUX]
            for l in range(NL):
                if (act >> l) & 1:
                    t = base + l
                    x = zext(regs[s0, t], bits)
                    y = zext(regs[s1, t], bits)
                    bin_ = regs[cc, t] if (fl & FL_CC_IN) else 0
                    if fl & FL_SAT:
                        r = sub_sat_s32(x, y)
                    else:
                        r = zext(x - y - bin_, bits)
                    if fl & FL_CC_OUT:
                        if bits == 64:
                            borrow = ult(x, y) or (bin_ != 0 and x == y)
                        else:
                            borrow = (x - y - bin_) < 0
                        regs[cc, t] = 1 if borrow else 0
                    regs[d0, t] = r
    elif op == OP_IMUL or op == OP_IMAD:
        fl = code[P, F_FLAGS]
        hi = (fl & FL_HI) != 0
        wide = (fl & FL_WIDE) != 0
        bits = tbits(ty)
        rbits = 2 * bits if wide else bits
        if not hi and not wide:
            for l in range(NL):
                if (act >> l) & 1:
                    t = base + l
                    r = regs[s0, t] * regs[s1, t]
                    if op == OP_IMAD:
                        r += regs[s2, t]
                    regs[d0, t] = zext(r, bits)
        elif wide and bits == 32:
            sg = ty == T_S32
            for l in range(NL):
                if (act >> l) & 1:
                    t = base + l
                    if sg:
                        r = sext(regs[s0, t], 32) * sext(regs[s1, t], 32)
                    else:
                        r = zext(regs[s0, t], 32) * zext(regs[s1, t], 32)
                    if op == OP_IMAD:
                        r += regs[s2, t]
                    regs[d0, t] = r
        else:
            for l in range(NL):
                if (act >> l) & 1:
                    t = base + l
                    r = int_mul(regs[s0, t], regs[s1, t], ty, hi, wide)
                    if op == OP_IMAD:
                        if fl & FL_SAT:
                            r = add_sat_s32(r, regs[s2, t])
                        else:
                            r = zext(r + regs[s2, t], rbits)
                    regs[d0, t] = r
    elif op == OP_SHL or op == OP_SHR:
        left = op == OP_SHL
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                regs[d0, t] = shift(regs[s0, t], regs[s1, t], ty, left)
    elif op == OP_AND or op == OP_OR or op == OP_XOR:
        bits = tbits(ty)
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                x = regs[s0, t]
                y = regs[s1, t]
                if op == OP_AND:
                    r = x & y
                elif op == OP_OR:
                    r = x | y
                else:
                    r = x ^ y
                regs[d0, t] = zext(r, bits)
    elif op == OP_NOT:
        bits = tbits(ty)
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                if ty == T_PRED:
                    regs[d0, t] = 0 if regs[s0, t] != 0 else 1
                else:
                    regs[d0, t] = zext(~regs[s0, t], bits)
    elif op == OP_SETP:
        ty2 = code[P, F_TY2]
        sub = code[P, F_SUB]
        cmp = sub & 0xFF
        boolop = sub >> 8
        fl = code[P, F_FLAGS]
        ftz = (fl & FL_FTZ) != 0
        negc = (fl & FL_NEG_S2) != 0
        d1 = code[P, F_D1]
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                x = regs[s0, t]
                y = regs[s1, t]
                c = compare(x, y, ty2, cmp, ftz)
                if boolop != BOOL_NONE:
                    q = (regs[s2, t] != 0) != negc
                    p1 = combine(c, q, boolop)
                    p2 = combine(not c, q, boolop)
                else:
                    p1 = c
                    p2 = not c
                if d0 >= 0:
                    regs[d0, t] = 1 if p1 else 0
                if d1 >= 0:
                    regs[d1, t] = 1 if p2 else 0
    elif op == OP_SELP:
        bits = tbits(ty)
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                regs[d0, t] = zext(regs[s0, t] if regs[s2, t] != 0 else regs[s1, t], bits)
    elif op == OP_CVT:
        dbits = code[P, F_AUX2]   # a signed 8/16-bit result is sign-extended to its register's width
        ty2 = code[P, F_TY2]
        sub = code[P, F_SUB]
        fl = code[P, F_FLAGS]
        if sub == RND_NONE and fl == 0 and ty2 != T_F16 and ty2 != T_F32 and ty2 != T_F64 \
                and ty2 != T_BF16 and ty != T_F16 and ty != T_F32 and ty != T_F64 and ty != T_BF16:
            sb = tbits(ty2)
            db = tbits(ty)
            sg = ty2 == T_S8 or ty2 == T_S16 or ty2 == T_S32 or ty2 == T_S64
            dsg = ty == T_S8 or ty == T_S16
            for l in range(NL):
                if (act >> l) & 1:
                    t = base + l
                    x = sext(regs[s0, t], sb) if sg else zext(regs[s0, t], sb)
                    regs[d0, t] = zext(sext(x, db), dbits) if dsg else zext(x, db)
        elif s1 >= 0:
            for l in range(NL):
                if (act >> l) & 1:
                    t = base + l
                    regs[d0, t] = cvt_pack2(regs[s0, t], regs[s1, t], ty, sub, fl)
        else:
            dsg = ty == T_S8 or ty == T_S16
            db = tbits(ty)
            for l in range(NL):
                if (act >> l) & 1:
                    t = base + l
                    r = cvt(regs[s0, t], ty, ty2, sub, fl)
                    regs[d0, t] = zext(sext(r, db), dbits) if dsg else r
    # ------------------------------------ floats
    elif op == OP_FADD or op == OP_FMUL or op == OP_FFMA or op == OP_FSUB:
        sub = code[P, F_SUB]
        fl = code[P, F_FLAGS]
        if (sub == RND_RN or sub == RND_NONE) and fl == 0 and ty == T_F32:
            for l in range(NL):
                if (act >> l) & 1:
                    t = base + l
                    x = f32_of(regs[s0, t])
                    y = f32_of(regs[s1, t])
                    if op == OP_FADD:
                        r = x + y
                    elif op == OP_FMUL:
                        r = x * y
                    elif op == OP_FSUB:
                        r = x - y
                    else:
                        r = fma32(x, y, f32_of(regs[s2, t]))
                    regs[d0, t] = bits_f32(r) if r == r else 0x7FFFFFFF
        elif (sub == RND_RN or sub == RND_NONE) and fl == 0 and ty == T_F64:
            for l in range(NL):
                if (act >> l) & 1:
                    t = base + l
                    xd = f64_of(regs[s0, t])
                    yd = f64_of(regs[s1, t])
                    if op == OP_FADD:
                        rd_ = xd + yd
                    elif op == OP_FMUL:
                        rd_ = xd * yd
                    elif op == OP_FSUB:
                        rd_ = xd - yd
                    else:
                        rd_ = fma64(xd, yd, f64_of(regs[s2, t]))
                    regs[d0, t] = bits_f64(rd_) if rd_ == rd_ else 0x7FFFFFFFFFFFFFFF
        else:
            for l in range(NL):
                if (act >> l) & 1:
                    t = base + l
                    regs[d0, t] = float_op(op, ty, sub, fl, regs[s0, t], regs[s1, t],
                                           regs[s2, t] if s2 >= 0 else 0)
    elif op >= OP_FDIV and op <= OP_FTANH or op == OP_COPYSIGN:
        sub = code[P, F_SUB]
        fl = code[P, F_FLAGS]
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                regs[d0, t] = float_op(op, ty, sub, fl, regs[s0, t], regs[s1, t] if s1 >= 0 else 0, 0)
    elif op == OP_TESTP:
        sub = code[P, F_SUB]
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                regs[d0, t] = 1 if testp(regs[s0, t], ty, sub) else 0
    elif op == OP_IDIV or op == OP_IREM:
        rem = op == OP_IREM
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                regs[d0, t] = int_div(regs[s0, t], regs[s1, t], ty, rem)
    elif op == OP_IMIN or op == OP_IMAX:
        is_min = op == OP_IMIN
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                regs[d0, t] = int_op2(is_min, regs[s0, t], regs[s1, t], ty)
    elif op == OP_IABS or op == OP_INEG:
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                x = rd(regs[s0, t], ty)
                if op == OP_IABS:
                    x = -x if x < 0 else x
                else:
                    x = -x
                regs[d0, t] = wr(x, ty)
    elif op == OP_CNOT:
        bits = tbits(ty)
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                regs[d0, t] = 1 if zext(regs[s0, t], bits) == 0 else 0
    elif op == OP_BFE:
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                regs[d0, t] = bfe(regs[s0, t], regs[s1, t], regs[s2, t], ty)
    elif op == OP_BFI:
        s3 = code[P, F_S3]
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                regs[d0, t] = bfi(regs[s0, t], regs[s1, t], regs[s2, t], regs[s3, t], ty)
    elif op == OP_BREV or op == OP_CLZ or op == OP_POPC:
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                x = regs[s0, t]
                if op == OP_BREV:
                    regs[d0, t] = brev(x, ty)
                elif op == OP_CLZ:
                    regs[d0, t] = clz(x, ty)
                else:
                    regs[d0, t] = popc(x, ty)
    elif op == OP_BFIND:
        sa = code[P, F_SUB] != 0
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                regs[d0, t] = bfind(regs[s0, t], ty, sa)
    elif op == OP_PRMT:
        mode = code[P, F_SUB]
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                regs[d0, t] = prmt(regs[s0, t], regs[s1, t], regs[s2, t], mode)
    elif op == OP_LOP3:
        lut = code[P, F_SUB]
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                regs[d0, t] = lop3(regs[s0, t], regs[s1, t], regs[s2, t], lut)
    elif op == OP_SHF:
        right = code[P, F_SUB] != 0
        clamp = (code[P, F_FLAGS] & FL_CLAMP) != 0
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                regs[d0, t] = shf(regs[s0, t], regs[s1, t], regs[s2, t], right, clamp)
    elif op == OP_MUL24:
        hi = (code[P, F_FLAGS] & FL_HI) != 0
        sg = ty == T_S32
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                x = sext(regs[s0, t], 24) if sg else zext(regs[s0, t], 24)
                y = sext(regs[s1, t], 24) if sg else zext(regs[s1, t], 24)
                r = x * y
                r = (r >> 16) if hi else r
                if s2 >= 0:
                    r += regs[s2, t]
                regs[d0, t] = zext(r, 32)
    elif op == OP_DP4A or op == OP_DP2A:
        sub = code[P, F_SUB]
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                a = regs[s0, t]
                b = regs[s1, t]
                acc = sext(regs[s2, t], 32) if (sub & 3) != 0 else zext(regs[s2, t], 32)
                if op == OP_DP4A:
                    for k in range(4):
                        x = sext(a >> (8 * k), 8) if sub & 1 else (a >> (8 * k)) & 0xFF
                        y = sext(b >> (8 * k), 8) if sub & 2 else (b >> (8 * k)) & 0xFF
                        acc += x * y
                else:
                    hi = 2 if sub & 4 else 0
                    for k in range(2):
                        x = sext(a >> (16 * k), 16) if sub & 1 else (a >> (16 * k)) & 0xFFFF
                        y = sext(b >> (8 * (k + hi)), 8) if sub & 2 else (b >> (8 * (k + hi))) & 0xFF
                        acc += x * y
                regs[d0, t] = zext(acc, 32)
    elif op == OP_SAD:
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                x = rd(regs[s0, t], ty)
                y = rd(regs[s1, t], ty)
                dlt = (y - x) if (ult(x, y) if ty == T_U64 else x < y) else (x - y)
                regs[d0, t] = wr(dlt + regs[s2, t], ty)
    elif op == OP_SET:
        ty2 = code[P, F_TY2]
        sub = code[P, F_SUB]
        cmp = sub & 0xFF
        boolop = sub >> 8
        fl = code[P, F_FLAGS]
        ftz = (fl & FL_FTZ) != 0
        negc = (fl & FL_NEG_S2) != 0
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                c = compare(regs[s0, t], regs[s1, t], ty2, cmp, ftz)
                if boolop != BOOL_NONE:
                    c = combine(c, (regs[s2, t] != 0) != negc, boolop)
                if ty == T_F32:
                    regs[d0, t] = 0x3F800000 if c else 0
                else:
                    regs[d0, t] = zext(np.int64(-1), tbits(ty)) if c else 0
    elif op == OP_SLCT:
        ty2 = code[P, F_TY2]
        bits = tbits(ty)
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                if ty2 == T_F32:
                    c = f32_of(regs[s2, t])
                    ge = c >= 0.0
                else:
                    ge = sext(regs[s2, t], 32) >= 0
                regs[d0, t] = zext(regs[s0, t] if ge else regs[s1, t], bits)
    elif op == OP_PACK:
        ebits = code[P, F_AUX]
        cnt = code[P, F_AUX2]
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                r = np.int64(0)
                for k in range(cnt):
                    sk = code[P, F_S0 + k]
                    if sk >= 0:
                        r |= zext(regs[sk, t], ebits) << (k * ebits)
                regs[d0, t] = r
    elif op == OP_UNPACK:
        ebits = code[P, F_AUX]
        cnt = code[P, F_AUX2]
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                x = regs[s0, t]
                for k in range(cnt):
                    dk = code[P, F_D0 + k]
                    if dk >= 0:
                        if ebits == 64:
                            regs[dk, t] = x
                        else:
                            regs[dk, t] = zext(np.int64(np.uint64(x) >> np.uint64(k * ebits)), ebits)
    elif op == OP_CVTA_TO or op == OP_CVTA_FROM:
        space = code[P, F_SPACE]
        win = np.int64(0)
        if space == SP_SHARED:
            win = SHARED_WINDOW
        elif space == SP_LOCAL:
            win = LOCAL_WINDOW
        elif space == SP_CONST:
            win = CONST_WINDOW
        bits = tbits(ty)
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                x = regs[s0, t]
                if op == OP_CVTA_TO:
                    r = x - win if x != 0 else 0
                else:
                    r = x + win if x != 0 or space == SP_SHARED or space == SP_LOCAL else 0
                regs[d0, t] = zext(r, bits)
    elif op == OP_ISSPACEP:
        space = code[P, F_SPACE]
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                x = regs[s0, t]
                in_sh = x >= SHARED_WINDOW and x < SHARED_WINDOW + WINDOW_SIZE
                in_lo = x >= LOCAL_WINDOW and x < LOCAL_WINDOW + WINDOW_SIZE
                in_co = x >= CONST_WINDOW and x < CONST_WINDOW + WINDOW_SIZE
                if space == SP_SHARED:
                    r = in_sh
                elif space == SP_LOCAL:
                    r = in_lo
                elif space == SP_CONST:
                    r = in_co
                else:
                    r = not (in_sh or in_lo or in_co)
                regs[d0, t] = 1 if r else 0
    else:
        return False
    return True


@njit(**INLINE)
def _open_record(rec_key, rec_op, rec_mask, rec_addr, nrec, key, sop, act, NL):
    """Start record `nrec`: the warp's key, the op, the active lanes, no addresses yet."""
    rec_key[nrec] = key
    rec_op[nrec] = sop
    rec_mask[nrec] = np.uint32(act)
    for l in range(NL):
        rec_addr[nrec, l] = 0


@njit(**KERNEL)
def mem_step(P, act, code, regs, base, NL, w, W, cta, spos, recording, heap, shared, local, const_buf, param_buf,
             seg_lo, seg_hi, seg_off, shared_size, local_size, const_size, param_size, local_words,
             rec_key, rec_op, rec_mask, rec_addr, nrec, op_space, err):
    """Execute memory instruction `P` (ld, st, atom, cp.async) for the lanes `act`, recording
    its warp access when asked (the caller leaves room for two records). Returns (records
    used, accesses counted), or (-1, 0) after a fault described in `err`."""
    op = code[P, F_OP]
    ty = code[P, F_TY]
    d0 = code[P, F_D0]
    s0 = code[P, F_S0]
    s1 = code[P, F_S1]
    s2 = code[P, F_S2]
    accesses = 0
    if False:
        pass
    elif op == OP_LD or op == OP_ST or op == OP_ATOM:
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
        if sop >= 0 and act != 0:
            accesses += 1
        sgn = ty == T_S8 or ty == T_S16 or ty == T_S32
        dbits = code[P, F_AUX2]
        failed = False
        rsp = -1
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                a = aoff
                if abase >= 0:
                    a += regs[abase, t]
                kind, off, rsp = resolve(space, a, total, t, seg_lo, seg_hi, seg_off, shared_size,
                                         local_size, const_size, param_size)
                if kind < 0:
                    _fail(err, ST_OOB, P, t, cta, a, total, rsp, 0)
                    failed = True
                    break
                if (a & (total - 1)) != 0 and (total & (total - 1)) == 0:
                    _fail(err, ST_MISALIGNED, P, t, cta, a, total, rsp, 0)
                    failed = True
                    break
                if op == OP_LD:
                    for v in range(vec):
                        x = _load(kind, off + v * nb, nb, heap, shared, local, const_buf, param_buf)
                        if sgn:
                            x = zext(sext(x, nb * 8), dbits)
                        dv = code[P, F_D0 + v]
                        if dv >= 0:
                            regs[dv, t] = x
                elif op == OP_ST:
                    if kind == K_CONST or kind == K_PARAM:
                        _fail(err, ST_SPACE, P, t, cta, a, total, rsp, 0)
                        failed = True
                        break
                    for v in range(vec):
                        sv = code[P, F_S0 + v]
                        _store(kind, off + v * nb, nb, regs[sv, t], heap, shared, local)
                else:
                    if kind == K_CONST or kind == K_PARAM:
                        _fail(err, ST_SPACE, P, t, cta, a, total, rsp, 0)
                        failed = True
                        break
                    old = _load(kind, off, nb, heap, shared, local, const_buf, param_buf)
                    new = atom_apply(code[P, F_SUB], ty, old, regs[s0, t], regs[s1, t] if s1 >= 0 else 0,
                                     kind == K_HEAP)
                    _store(kind, off, nb, new, heap, shared, local)
                    if d0 >= 0:
                        regs[d0, t] = old
                if rec:
                    if rsp == SP_SHARED:
                        ra = off
                    elif rsp == SP_LOCAL:
                        # modeled hardware layout: each warp's frame with the lanes' elements side by side
                        la = off - t * local_size
                        ra = LOCAL_TRACE_BASE + (cta * W + w) * local_words * 128 + ((la // total) * 32 + l) * total + la % total
                    else:
                        ra = a
                    rec_addr[nrec, l] = np.uint64(ra)
        if failed:
            return -1, 0
        if sop >= 0 and act != 0 and rsp >= 0:
            if rsp == SP_GLOBAL:
                op_space[sop, 0] += 1
            elif rsp == SP_SHARED:
                op_space[sop, 1] += 1
            elif rsp == SP_LOCAL:
                op_space[sop, 2] += 1
        if rec:
            nrec += 1
    elif op == OP_TEX or op == OP_SULD or op == OP_SUST:
        dims = code[P, F_AUX]
        abase = code[P, F_ABASE]
        sop = code[P, F_SOP]
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
    elif op == OP_CPASYNC:
        abase = code[P, F_ABASE]
        aoff = code[P, F_AOFF]
        nb = code[P, F_NB]
        sop = code[P, F_SOP]
        sop2 = code[P, F_SOP2]
        dbase = s1
        doff = code[P, F_AUX]
        zfill = (code[P, F_FLAGS] & FL_ZFILL) != 0
        failed = False
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
                        failed = True
                        break
                    dkind, doff2, _d = resolve(SP_SHARED, dst, nb, t, seg_lo, seg_hi, seg_off,
                                               shared_size, local_size, const_size, param_size)
                    if dkind < 0:
                        _fail(err, ST_OOB, P, t, cta, dst, nb, SP_SHARED, 0)
                        failed = True
                        break
                    if part == 1:
                        nsrc = regs[s2, t] if zfill else nb
                        for k in range(nb):
                            byte = load_bits(heap, soff + k, 1) if k < nsrc else 0
                            store_bits(shared, doff2 + k, 1, byte)
                    if rec:
                        rec_addr[nrec, l] = np.uint64(src if part == 0 else doff2)
            if failed:
                return -1, 0
            if so >= 0 and act != 0:
                op_space[so, 0 if part == 0 else 1] += 1
            if rec:
                nrec += 1
    return nrec, accesses



@njit(**KERNEL)
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

    regs = np.zeros((n_slots, Tp), np.int64)
    shared = np.zeros(shared_size + 16, np.uint8)
    local = np.zeros(Tp * local_size + 16, np.uint8)
    pc = np.zeros(Tp, np.int64)
    st = np.zeros(Tp, np.int64)
    cbw = np.full(Tp, -1, np.int64)
    syncm = np.zeros(Tp, np.int64)
    barid = np.full(Tp, -1, np.int64)
    cstack = np.zeros((Tp, MAX_CALL_DEPTH), np.int64)
    csp = np.zeros(Tp, np.int64)
    conv = np.zeros(W, np.bool_)
    wpc = np.zeros(W, np.int64)
    live = np.zeros(W, np.int64)
    cb_rpc = np.zeros((W, MAX_CBARS), np.int64)
    cb_mask = np.zeros((W, MAX_CBARS), np.int64)
    cb_n = np.zeros(W, np.int64)
    wyield = np.full(W, -1, np.int64)
    bars = np.zeros((N_BARRIERS, N_BAR_FIELDS), np.int64)
    offs = np.zeros(32, np.int64)
    addrs = np.zeros(32, np.int64)
    nseg = seg_lo.shape[0]
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
            return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]
        spos = snap_pos[ci]
        recording = spos >= 0
        # ---------------------------------------------------------------- CTA set-up
        regs[:, :] = init_regs
        cx = cta % gx
        cy = (cta // gx) % gy
        cz = cta // (gx * gy)
        # %smid: the modeled CTA placement of the simulator (sim/schedule.py, step 1): snapshot CTA
        # k runs on SM k mod S; the rest of the grid continues that round robin from the first
        # snapshot CTA (CTA c on SM (c - first) mod S).
        smid = (spos if recording else cta - sm_base) % n_sms
        if smid < 0:
            smid += n_sms
        for k in range(cta_spec.shape[0]):
            slot = cta_spec[k, 0]
            which = cta_spec[k, 1]
            v = cx if which == CS_CTAID_X else (cy if which == CS_CTAID_Y else (cz if which == CS_CTAID_Z else smid))
            for t in range(Tp):
                regs[slot, t] = v
        shared[:] = 0
        local[:] = 0
        csp[:] = 0
        cbw[:] = -1
        barid[:] = -1
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
                while budget > 0 and live[w] != 0:
                    # ---------------------------------------- pick the group to run
                    if conv[w]:
                        lw = live[w]
                        if st[base + _lowest(lw)] != TS_RUN:
                            break
                        P = wpc[w]
                        g = lw
                        other_min = BIG
                        P_start = -1
                    else:
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
                            break
                        if nrun == popc64(lw) and minp == maxp:
                            conv[w] = True
                            wpc[w] = minp
                            wyield[w] = -1
                            continue
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
                        # lanes arriving at a convergence barrier wait there
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
                            progress = True
                            release_cbars(w, cb_rpc, cb_mask, cb_n, st, cbw, live)
                            if g == 0:
                                continue
                        P_start = P
                    # ---------------------------------------- run the group
                    writeback = True
                    while True:
                        if P >= other_min or budget <= 0:
                            break
                        if cb_n[w] > 0 and P != P_start:
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
                            else:
                                hit = False
                                for k in range(cb_n[w]):
                                    if cb_rpc[w, k] == P and (cb_mask[w, k] & g) != 0:
                                        hit = True
                                if hit:
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
                        ty = code[P, F_TY]
                        d0 = code[P, F_D0]
                        s0 = code[P, F_S0]
                        s1 = code[P, F_S1]
                        s2 = code[P, F_S2]
                        # ------------------------------------ hot paths, inline
                        done = True
                        if op == OP_FFMA or op == OP_FADD or op == OP_FMUL:
                            sub = code[P, F_SUB]
                            if ty == T_F32 and (sub == RND_RN or sub == RND_NONE) and code[P, F_FLAGS] == 0:
                                for l in range(NL):
                                    if (act >> l) & 1:
                                        t = base + l
                                        x = f32_of(regs[s0, t])
                                        y = f32_of(regs[s1, t])
                                        if op == OP_FFMA:
                                            r = fma32(x, y, f32_of(regs[s2, t]))
                                        elif op == OP_FADD:
                                            r = x + y
                                        else:
                                            r = x * y
                                        regs[d0, t] = bits_f32(r) if r == r else 0x7FFFFFFF
                            else:
                                done = False
                        elif op == OP_MOV and ty != T_PRED:
                            bits = tbits(ty)
                            msk = (np.int64(1) << bits) - 1 if bits < 64 else np.int64(-1)
                            for l in range(NL):
                                if (act >> l) & 1:
                                    regs[d0, base + l] = regs[s0, base + l] & msk
                        elif op == OP_IADD and code[P, F_FLAGS] == 0:
                            bits = tbits(ty)
                            msk = (np.int64(1) << bits) - 1 if bits < 64 else np.int64(-1)
                            for l in range(NL):
                                if (act >> l) & 1:
                                    t = base + l
                                    regs[d0, t] = (regs[s0, t] + regs[s1, t]) & msk
                        elif (op == OP_IMAD or op == OP_IMUL) and (code[P, F_FLAGS] & (FL_HI | FL_SAT)) == 0 \
                                and (ty == T_S32 or ty == T_U32 or (ty == T_S64 or ty == T_U64) and code[P, F_FLAGS] == 0):
                            wide = (code[P, F_FLAGS] & FL_WIDE) != 0
                            mad = op == OP_IMAD
                            sg = ty == T_S32
                            for l in range(NL):
                                if (act >> l) & 1:
                                    t = base + l
                                    if wide:
                                        if sg:
                                            r = sext(regs[s0, t], 32) * sext(regs[s1, t], 32)
                                        else:
                                            r = (regs[s0, t] & 0xFFFFFFFF) * (regs[s1, t] & 0xFFFFFFFF)
                                        if mad:
                                            r += regs[s2, t]
                                    else:
                                        r = regs[s0, t] * regs[s1, t]
                                        if mad:
                                            r += regs[s2, t]
                                        if ty == T_S32 or ty == T_U32:
                                            r &= 0xFFFFFFFF
                                    regs[d0, t] = r
                        elif op == OP_SHL and (ty == T_U32 or ty == T_U64):
                            bits = tbits(ty)
                            msk = (np.int64(1) << bits) - 1 if bits < 64 else np.int64(-1)
                            for l in range(NL):
                                if (act >> l) & 1:
                                    t = base + l
                                    n = regs[s1, t] & 0xFFFFFFFF
                                    regs[d0, t] = (regs[s0, t] << n) & msk if n < bits else 0
                        elif op == OP_SETP and (code[P, F_SUB] >> 8) == BOOL_NONE and (
                                code[P, F_TY2] == T_S32 or code[P, F_TY2] == T_U32 or code[P, F_TY2] == T_S64
                                or code[P, F_TY2] == T_U64):
                            ty2 = code[P, F_TY2]
                            cmp = code[P, F_SUB] & 0xFF
                            d1 = code[P, F_D1]
                            for l in range(NL):
                                if (act >> l) & 1:
                                    t = base + l
                                    x = regs[s0, t]
                                    y = regs[s1, t]
                                    if ty2 == T_S32:
                                        x = sext(x, 32)
                                        y = sext(y, 32)
                                    elif ty2 == T_U32:
                                        x &= 0xFFFFFFFF
                                        y &= 0xFFFFFFFF
                                    elif ty2 == T_U64:
                                        x ^= MIN64
                                        y ^= MIN64
                                    if cmp == CMP_LT:
                                        c = x < y
                                    elif cmp == CMP_GE:
                                        c = x >= y
                                    elif cmp == CMP_EQ:
                                        c = x == y
                                    elif cmp == CMP_NE:
                                        c = x != y
                                    elif cmp == CMP_LE:
                                        c = x <= y
                                    else:
                                        c = x > y
                                    if d0 >= 0:
                                        regs[d0, t] = 1 if c else 0
                                    if d1 >= 0:
                                        regs[d1, t] = 0 if c else 1
                        elif (op == OP_ST or (op == OP_LD and d0 >= 0)) and code[P, F_VEC] == 1 and (
                                code[P, F_SPACE] == SP_GLOBAL or code[P, F_SPACE] == SP_SHARED):
                            sh = code[P, F_SPACE] == SP_SHARED
                            nb = code[P, F_NB]
                            abase = code[P, F_ABASE]
                            aoff = code[P, F_AOFF]
                            ok = True
                            for l in range(NL):
                                if (act >> l) & 1:
                                    a = aoff
                                    if abase >= 0:
                                        a += regs[abase, base + l]
                                    if a & (nb - 1):
                                        ok = False
                                        break
                                    if sh:
                                        if a < 0 or a + nb > shared_size:
                                            ok = False
                                            break
                                        offs[l] = a
                                    else:
                                        if not (cs < nseg and a >= seg_lo[cs] and a + nb <= seg_hi[cs]):
                                            cs = find_segment(a, nb, seg_lo, seg_hi)
                                            if cs < 0:
                                                cs = 0
                                                ok = False
                                                break
                                        offs[l] = seg_off[cs] + (a - seg_lo[cs])
                                    addrs[l] = a
                            if ok:
                                sop = code[P, F_SOP]
                                if sop >= 0 and act != 0:
                                    accesses += 1
                                    op_space[sop, 1 if sh else 0] += 1
                                    if recording and atomic_add(ctl, CTL_RECORDS, 1) < rec_max:
                                        if nrec == cap:
                                            cap2 = min(cap * 2, rec_max + 2)
                                            k2 = np.empty(cap2, np.int64)
                                            k2[:nrec] = rec_key[:nrec]
                                            rec_key = k2
                                            o2 = np.empty(cap2, np.int32)
                                            o2[:nrec] = rec_op[:nrec]
                                            rec_op = o2
                                            m2 = np.empty(cap2, np.uint32)
                                            m2[:nrec] = rec_mask[:nrec]
                                            rec_mask = m2
                                            a2 = np.zeros((cap2, 32), np.uint64)
                                            a2[:nrec] = rec_addr[:nrec]
                                            rec_addr = a2
                                            cap = cap2
                                        rec_key[nrec] = spos * W + w
                                        rec_op[nrec] = sop
                                        rec_mask[nrec] = np.uint32(act)
                                        for l in range(NL):
                                            rec_addr[nrec, l] = np.uint64(addrs[l]) if (act >> l) & 1 else np.uint64(0)
                                        nrec += 1
                                if op == OP_LD:
                                    sgn = ty == T_S8 or ty == T_S16 or ty == T_S32
                                    dbits = code[P, F_AUX2]
                                    for l in range(NL):
                                        if (act >> l) & 1:
                                            if sh:
                                                x = load_bits(shared, offs[l], nb)
                                            else:
                                                x = load_bits(heap, offs[l], nb)
                                            if sgn:
                                                x = zext(sext(x, nb * 8), dbits)
                                            regs[d0, base + l] = x
                                else:
                                    for l in range(NL):
                                        if (act >> l) & 1:
                                            if sh:
                                                store_bits(shared, offs[l], nb, regs[s0, base + l])
                                            else:
                                                store_bits(heap, offs[l], nb, regs[s0, base + l])
                            else:
                                done = False
                        else:
                            done = False
                        if done:
                            P += 1
                        elif op < OP_LD:
                            if not alu_step(P, act, code, regs, base, NL):
                                _fail(err, ST_UNSUPPORTED, P, base + _lowest(g), cta, 0, 0, 0, op)
                                return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]
                            P += 1
                        elif op <= OP_MEM_LAST:
                            keep = recording
                            if recording and act != 0:
                                want = 1 if code[P, F_SOP] >= 0 else 0
                                if op == OP_CPASYNC and code[P, F_SOP2] >= 0:
                                    want += 1
                                if want > 0:
                                    keep = atomic_add(ctl, CTL_RECORDS, want) + want <= rec_max
                            if keep and nrec + 2 > cap:
                                cap2 = min(cap * 2, rec_max + 2)
                                k2 = np.empty(cap2, np.int64)
                                k2[:nrec] = rec_key[:nrec]
                                rec_key = k2
                                o2 = np.empty(cap2, np.int32)
                                o2[:nrec] = rec_op[:nrec]
                                rec_op = o2
                                m2 = np.empty(cap2, np.uint32)
                                m2[:nrec] = rec_mask[:nrec]
                                rec_mask = m2
                                a2 = np.zeros((cap2, 32), np.uint64)
                                a2[:nrec] = rec_addr[:nrec]
                                rec_addr = a2
                                cap = cap2
                            nrec, nacc = mem_step(P, act, code, regs, base, NL, w, W, cta, spos, keep, heap, shared,
                                                  local, const_buf, param_buf, seg_lo, seg_hi, seg_off, shared_size,
                                                  local_size, const_size, param_size, local_words, rec_key, rec_op,
                                                  rec_mask, rec_addr, nrec, op_space, err)
                            if nrec < 0:
                                return rec_key[:0], rec_op[:0], rec_mask[:0], rec_addr[:0]
                            accesses += nacc
                            P += 1
                        elif op == OP_BRA:
                            tgt = code[P, F_TGT]
                            if act == g:
                                nxt = tgt
                            elif act == 0:
                                nxt = P + 1
                            else:
                                if code[P, F_FLAGS] & FL_UNI:
                                    _fail(err, ST_NONUNIFORM, P, base + _lowest(g), cta, act, g, 0, 0)
                                    return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]
                                # divergence: per-lane PCs and a convergence barrier at the IPDOM
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
                                            return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]
                                        cb_rpc[w, cb_n[w]] = rpc
                                        cb_mask[w, cb_n[w]] = g
                                        cb_n[w] += 1
                                if tgt <= P:
                                    wyield[w] = tgt
                                conv[w] = False
                                writeback = False
                                break
                            if nxt <= P and not conv[w]:
                                wyield[w] = nxt
                                P = nxt
                                break
                            P = nxt
                        elif op == OP_CALL:
                            if act != 0:
                                for l in range(NL):
                                    if (act >> l) & 1:
                                        t = base + l
                                        if csp[t] >= MAX_CALL_DEPTH:
                                            _fail(err, ST_CALL_DEPTH, P, t, cta, 0, 0, 0, 0)
                                            return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]
                                        cstack[t, csp[t]] = P + 1
                                        csp[t] += 1
                            tgt = code[P, F_TGT]
                            if act == g:
                                P = tgt
                            elif act == 0:
                                P += 1
                            else:
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
                                writeback = False
                                break
                        elif op == OP_RET:
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
                                P = ret_to
                            elif act == 0:
                                P += 1
                            else:
                                for l in range(NL):
                                    if (g >> l) & 1 and not (act >> l) & 1:
                                        pc[base + l] = P + 1
                                conv[w] = False
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
                                reason, t = barriers_after_exit(code, regs, pc, st, barid, w, bars, conv, wpc, live, W)
                                if reason != 0:
                                    _refuse(err, reason, pc[t], t, cta, barid[t], 0, 0)
                                    return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]
                                if not conv[w]:
                                    release_cbars(w, cb_rpc, cb_mask, cb_n, st, cbw, live)
                                    reason, lane, other = release_syncs(code, regs, pc, st, syncm, w, live)
                                    if reason != 0:
                                        _refuse(err, reason, pc[base + lane], base + lane, cta, other,
                                                syncm[base + lane], syncm[base + other])
                                        return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]
                            P += 1
                            if g == 0:
                                writeback = False
                                break
                            if not conv[w] and act != 0:
                                break
                        elif op == OP_BAR:
                            if act == 0:
                                P += 1
                                continue
                            # each thread waits at its barrier; the warp arrives once all its non-exited threads do
                            bids = np.int64(0)
                            for l in range(NL):
                                if (act >> l) & 1:
                                    t = base + l
                                    bid = regs[s0, t] if s0 >= 0 else 0
                                    need = regs[s1, t] if s1 >= 0 else -1
                                    if bid < 0 or bid >= N_BARRIERS or (s1 >= 0 and (need <= 0 or need % 32 != 0)):
                                        _fail(err, ST_BAD_BARRIER, P, t, cta, bid, need, 0, 0)
                                        return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]
                                    if (bars[bid, B_WMASK] >> w) & 1:
                                        _refuse(err, UNS_BAR_TWICE, P, t, cta, bid, 0, 0)
                                        return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]
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
                                        return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]
                            writeback = False
                            break
                        elif op == OP_SHFL or op == OP_VOTE or op == OP_MATCH or op == OP_REDUX or op == OP_BARWARP:
                            if act == 0:
                                P += 1
                                continue
                            # each lane's own membermask (sync.py: a group is one mask less the exited lanes)
                            ms = member_mask_slot(code, P)
                            m0 = np.int64(-1)
                            uniform = True
                            for l in range(NL):
                                if (act >> l) & 1:
                                    t = base + l
                                    ml = zext(regs[ms, t], 32) if ms >= 0 else np.int64(0xFFFFFFFF)
                                    if not (ml >> l) & 1:
                                        _refuse(err, UNS_NOT_MEMBER, P, t, cta, l, ml, ml)
                                        return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]
                                    syncm[t] = ml
                                    pc[t] = P
                                    if m0 < 0:
                                        m0 = ml
                                    elif ml != m0:
                                        uniform = False
                            if uniform and (m0 & live[w]) == act:
                                # one group, all here: the fast path
                                reason, lane, other = exec_sync(code, regs, pc, st, act, base)
                                if reason != 0:
                                    _refuse(err, reason, P, base + lane, cta, other, m0, m0)
                                    return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]
                                P += 1
                                continue
                            if not uniform:
                                # lanes executing one collective together must give every lane they name the same mask
                                for l in range(NL):
                                    if (act >> l) & 1:
                                        ml = syncm[base + l]
                                        for q in range(NL):
                                            if (act >> q) & 1 and (ml >> q) & 1 and syncm[base + q] != ml:
                                                _refuse(err, UNS_MASK_CONFLICT, P, base + l, cta, q, ml, syncm[base + q])
                                                return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]
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
                                _refuse(err, reason, pc[base + lane], base + lane, cta, other, syncm[base + lane],
                                        syncm[base + other])
                                return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]
                            writeback = False
                            break
                        elif op == OP_ACTIVEMASK:
                            # the threads executing it (PTX ISA, activemask: inactive and predicated-off threads give 0)
                            for l in range(NL):
                                if (act >> l) & 1:
                                    regs[d0, base + l] = act
                            P += 1
                        elif op == OP_CLOCK:
                            sub = code[P, F_SUB]
                            now = clock_base + insts
                            for l in range(NL):
                                if (act >> l) & 1:
                                    t = base + l
                                    if sub == CLK_CLOCK or sub == CLK_GLOBALTIMER_LO:
                                        regs[d0, t] = zext(now, 32)
                                    elif sub == CLK_GLOBALTIMER_HI:
                                        regs[d0, t] = zext(now >> 32, 32)
                                    else:
                                        regs[d0, t] = now
                            P += 1
                        elif op == OP_NOP:
                            P += 1
                        elif op == OP_NANOSLEEP:
                            P += 1
                            if not conv[w]:
                                wyield[w] = P
                                break
                        elif op == OP_PRINTF:
                            off = code[P, F_AOFF]
                            if off >= 0:
                                for l in range(NL):
                                    if (act >> l) & 1:
                                        store_bits(local, (base + l) * local_size + off, 4, 0)
                            P += 1
                        elif op == OP_TRAP:
                            if act != 0:
                                _fail(err, ST_TRAP, P, base + _lowest(act), cta, 0, 0, 0, code[P, F_AUX])
                                return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]
                            P += 1
                        else:
                            _fail(err, ST_UNSUPPORTED, P, base + _lowest(g), cta, 0, 0, 0, op)
                            return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]
                    # ---------------------------------------- end of the group's run
                    if writeback:
                        if conv[w]:
                            wpc[w] = P
                        else:
                            for l in range(NL):
                                if (g >> l) & 1:
                                    pc[base + l] = P
                    if insts > step_limit:
                        _fail(err, ST_STEP_LIMIT, P, base + _lowest(live[w]) if live[w] != 0 else base, cta, 0, 0, 0,
                              insts)
                        return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]
                    if atomic_get(ctl, CTL_FAILED) < batch:
                        _fail(err, ST_ABORTED, P, base, cta, 0, 0, 0, 0)
                        return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]
            if not progress and n_exited < Tp:
                # nothing can run: report a waiting lane
                wt = -1
                for t in range(Tp):
                    if st[t] == TS_BAR or st[t] == TS_SYNC or st[t] == TS_CBAR:
                        wt = t
                        break
                wp = pc[wt] if wt >= 0 else -1
                _fail(err, ST_DEADLOCK, wp, wt, cta, st[wt] if wt >= 0 else 0, Tp - n_exited, 0, 0)
                return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]
        out_insts[ci] = insts
        out_acc[ci] = accesses
        out_thr[ci] = thr
    return rec_key[:nrec], rec_op[:nrec], rec_mask[:nrec], rec_addr[:nrec]
