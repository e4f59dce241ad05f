"""Each register-only instruction's semantics, once, at warp level: row `P` of the code table
executed for the lanes `act` of the warp whose first thread is `base`.

The handlers of the common instructions (`ex_*`) are inlined into the interpreter's loop; the
rarer families run through one compiled entry each (`alu_int`, `alu_cmp`, `alu_float`,
`alu_cvt`), which the interpreter calls only when the kernel has instructions of that family
(`kernel.families`), so a kernel compiles only the semantics it uses. The scalar semantics
(one lane) are `alu`'s.
"""

from __future__ import annotations

import numpy as np

from tuiprof.collect.emu.kernel.alu import (
    add_sat_s32,
    bfe,
    bfi,
    bfind,
    brev,
    clz,
    combine,
    compare,
    cvt,
    cvt_pack2,
    float_op,
    icmp,
    int_div,
    int_mul,
    int_op2,
    lop3,
    low_mask,
    popc,
    prmt,
    rd,
    sext,
    shf,
    shift,
    shl_bits,
    sub_sat_s32,
    tbits,
    testp,
    ult,
    wr,
    zext,
)
from tuiprof.collect.emu.kernel.bits import bits_f32, bits_f64, f32_of, f64_of, fma32, fma64
from tuiprof.collect.emu.kernel.codes import *  # noqa: F403 (the shared numbering)
from tuiprof.jit import INLINE, emu_kernel, njit

# ------------------------------------------------------------------ inlined: the common instructions


@njit(**INLINE)
def ex_mov(P, act, code, regs, base, NL):
    """mov: the source's low bits (.pred as 0/1)."""
    ty = code[P, F_TY]
    d0 = code[P, F_D0]
    s0 = code[P, F_S0]
    if ty == T_PRED:
        for l in range(NL):
            if (act >> l) & 1:
                regs[d0, base + l] = 1 if regs[s0, base + l] != 0 else 0
    else:
        msk = low_mask(tbits(ty))
        for l in range(NL):
            if (act >> l) & 1:
                regs[d0, base + l] = regs[s0, base + l] & msk


@njit(**INLINE)
def ex_iadd(P, act, code, regs, base, NL):
    """add / sub (with .cc carry out, addc / subc carry in, .sat)."""
    op = code[P, F_OP]
    ty = code[P, F_TY]
    d0 = code[P, F_D0]
    s0 = code[P, F_S0]
    s1 = code[P, F_S1]
    bits = tbits(ty)
    fl = code[P, F_FLAGS]
    sub = op == OP_ISUB
    if fl == 0:
        msk = low_mask(bits)
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                if sub:
                    regs[d0, t] = (regs[s0, t] - regs[s1, t]) & msk
                else:
                    regs[d0, t] = (regs[s0, t] + regs[s1, t]) & msk
        return
    cc = code[P, F_AUX]
    for l in range(NL):
        if (act >> l) & 1:
            t = base + l
            x = zext(regs[s0, t], bits)
            y = zext(regs[s1, t], bits)
            c = regs[cc, t] if (fl & FL_CC_IN) else 0
            if sub:
                r = sub_sat_s32(x, y) if fl & FL_SAT else zext(x - y - c, bits)
                if fl & FL_CC_OUT:
                    if bits == 64:
                        out = ult(x, y) or (c != 0 and x == y)
                    else:
                        out = (x - y - c) < 0
                    regs[cc, t] = 1 if out else 0
            else:
                r = add_sat_s32(x, y) if fl & FL_SAT else zext(x + y + c, bits)
                if fl & FL_CC_OUT:
                    if bits == 64:
                        out = ult(r, x) or (c != 0 and r == x)
                    else:
                        out = ((x + y + c) >> bits) != 0
                    regs[cc, t] = 1 if out else 0
            regs[d0, t] = r


@njit(**INLINE)
def ex_imul(P, act, code, regs, base, NL):
    """mul / mad: .lo, .wide, .hi (and mad.hi.sat)."""
    op = code[P, F_OP]
    ty = code[P, F_TY]
    d0 = code[P, F_D0]
    s0 = code[P, F_S0]
    s1 = code[P, F_S1]
    s2 = code[P, F_S2]
    fl = code[P, F_FLAGS]
    hi = (fl & FL_HI) != 0
    wide = (fl & FL_WIDE) != 0
    mad = op == OP_IMAD
    bits = tbits(ty)
    if not hi and not wide:
        msk = low_mask(bits)
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                r = regs[s0, t] * regs[s1, t]
                if mad:
                    r += regs[s2, t]
                regs[d0, t] = r & msk
    elif wide and bits == 32:
        sg = ty == T_S32
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                if sg:
                    r = sext(regs[s0, t], 32) * sext(regs[s1, t], 32)
                else:
                    r = (regs[s0, t] & 0xFFFFFFFF) * (regs[s1, t] & 0xFFFFFFFF)
                if mad:
                    r += regs[s2, t]
                regs[d0, t] = r
    else:
        rbits = 2 * bits if wide else bits
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                r = int_mul(regs[s0, t], regs[s1, t], ty, hi, wide)
                if mad:
                    if fl & FL_SAT:
                        r = add_sat_s32(r, regs[s2, t])
                    else:
                        r = zext(r + regs[s2, t], rbits)
                regs[d0, t] = r


@njit(**INLINE)
def ex_shift(P, act, code, regs, base, NL):
    """shl / shr."""
    ty = code[P, F_TY]
    d0 = code[P, F_D0]
    s0 = code[P, F_S0]
    s1 = code[P, F_S1]
    left = code[P, F_OP] == OP_SHL
    if left:
        bits = tbits(ty)
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                regs[d0, t] = shl_bits(regs[s0, t], regs[s1, t] & 0xFFFFFFFF, bits)
        return
    for l in range(NL):
        if (act >> l) & 1:
            t = base + l
            regs[d0, t] = shift(regs[s0, t], regs[s1, t], ty, False)


@njit(**INLINE)
def ex_logic(P, act, code, regs, base, NL):
    """and / or / xor / not (on .pred: the logical forms)."""
    op = code[P, F_OP]
    ty = code[P, F_TY]
    d0 = code[P, F_D0]
    s0 = code[P, F_S0]
    s1 = code[P, F_S1]
    msk = low_mask(tbits(ty))
    for l in range(NL):
        if (act >> l) & 1:
            t = base + l
            x = regs[s0, t]
            if op == OP_NOT:
                if ty == T_PRED:
                    r = np.int64(0) if x != 0 else np.int64(1)
                else:
                    r = ~x
            elif op == OP_AND:
                r = x & regs[s1, t]
            elif op == OP_OR:
                r = x | regs[s1, t]
            else:
                r = x ^ regs[s1, t]
            regs[d0, t] = r & msk


@njit(**INLINE)
def setp_is_int(code, P):
    """Whether setp row `P` compares integers without a boolean combination (`ex_setp_int`)."""
    ty2 = code[P, F_TY2]
    return (code[P, F_SUB] >> 8) == BOOL_NONE and (ty2 == T_S32 or ty2 == T_U32 or ty2 == T_S64 or ty2 == T_U64
                                                    or ty2 == T_S16 or ty2 == T_U16 or ty2 == T_S8 or ty2 == T_U8)


@njit(**INLINE)
def ex_setp_int(P, act, code, regs, base, NL):
    """setp on integers, no boolean combination (`setp_is_int`)."""
    ty2 = code[P, F_TY2]
    cmp = code[P, F_SUB] & 0xFF
    d0 = code[P, F_D0]
    d1 = code[P, F_D1]
    s0 = code[P, F_S0]
    s1 = code[P, F_S1]
    for l in range(NL):
        if (act >> l) & 1:
            t = base + l
            c = icmp(regs[s0, t], regs[s1, t], ty2, cmp)
            if d0 >= 0:
                regs[d0, t] = 1 if c else 0
            if d1 >= 0:
                regs[d1, t] = 0 if c else 1


@njit(**INLINE)
def ex_selp(P, act, code, regs, base, NL):
    """selp: s0 where the predicate s2 holds, else s1."""
    d0 = code[P, F_D0]
    s0 = code[P, F_S0]
    s1 = code[P, F_S1]
    s2 = code[P, F_S2]
    msk = low_mask(tbits(code[P, F_TY]))
    for l in range(NL):
        if (act >> l) & 1:
            t = base + l
            regs[d0, t] = (regs[s0, t] if regs[s2, t] != 0 else regs[s1, t]) & msk


@njit(**INLINE)
def cvt_is_int(code, P):
    """Whether cvt row `P` converts an integer to an integer with no rounding or saturation (`ex_cvt_int`)."""
    ty = code[P, F_TY]
    ty2 = code[P, F_TY2]
    return code[P, F_SUB] == RND_NONE and code[P, F_FLAGS] == 0 and code[P, F_S1] < 0 \
        and not (ty2 == T_F16 or ty2 == T_F32 or ty2 == T_F64 or ty2 == T_BF16 or ty2 == T_F16X2 or ty2 == T_BF16X2) \
        and not (ty == T_F16 or ty == T_F32 or ty == T_F64 or ty == T_BF16 or ty == T_F16X2 or ty == T_BF16X2)


@njit(**INLINE)
def ex_cvt_int(P, act, code, regs, base, NL):
    """cvt between integer types (`cvt_is_int`); a signed 8/16-bit result is sign-extended to its
    register's width (F_AUX2)."""
    ty = code[P, F_TY]
    ty2 = code[P, F_TY2]
    d0 = code[P, F_D0]
    s0 = code[P, F_S0]
    dbits = code[P, F_AUX2]
    sb = tbits(ty2)
    db = tbits(ty)
    sg = ty2 == T_S8 or ty2 == T_S16 or ty2 == T_S32 or ty2 == T_S64
    dsg = ty == T_S8 or ty == T_S16
    for l in range(NL):
        if (act >> l) & 1:
            t = base + l
            x = sext(regs[s0, t], sb) if sg else zext(regs[s0, t], sb)
            regs[d0, t] = zext(sext(x, db), dbits) if dsg else zext(x, db)


@njit(**INLINE)
def ex_cvta(P, act, code, regs, base, NL):
    """cvta (generic <-> a space's own addresses; null stays null) and isspacep."""
    op = code[P, F_OP]
    ty = code[P, F_TY]
    d0 = code[P, F_D0]
    s0 = code[P, F_S0]
    if op == OP_CVTA_TO or op == OP_CVTA_FROM:
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
    else:
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


@njit(**INLINE)
def float_is_plain(code, P):
    """Whether float row `P` is add, sub, mul or fma on f32 or f64, rounded to nearest with no
    flags: hardware arithmetic gives its IEEE result (`ex_float_plain`)."""
    op = code[P, F_OP]
    ty = code[P, F_TY]
    sub = code[P, F_SUB]
    return (op == OP_FADD or op == OP_FSUB or op == OP_FMUL or op == OP_FFMA) and (ty == T_F32 or ty == T_F64) \
        and (sub == RND_RN or sub == RND_NONE) and code[P, F_FLAGS] == 0


@njit(**INLINE)
def ex_float_plain(P, act, code, regs, base, NL):
    """add / sub / mul / fma.rn on f32 or f64 (`float_is_plain`); NaN results are canonical."""
    op = code[P, F_OP]
    d0 = code[P, F_D0]
    s0 = code[P, F_S0]
    s1 = code[P, F_S1]
    s2 = code[P, F_S2]
    if code[P, F_TY] == T_F32:
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                x = f32_of(regs[s0, t])
                y = f32_of(regs[s1, t])
                if op == OP_FFMA:
                    r = fma32(x, y, f32_of(regs[s2, t]))
                elif op == OP_FADD:
                    r = x + y
                elif op == OP_FMUL:
                    r = x * y
                else:
                    r = x - y
                regs[d0, t] = bits_f32(r) if r == r else 0x7FFFFFFF
    else:
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                xd = f64_of(regs[s0, t])
                yd = f64_of(regs[s1, t])
                if op == OP_FFMA:
                    rd_ = fma64(xd, yd, f64_of(regs[s2, t]))
                elif op == OP_FADD:
                    rd_ = xd + yd
                elif op == OP_FMUL:
                    rd_ = xd * yd
                else:
                    rd_ = xd - yd
                regs[d0, t] = bits_f64(rd_) if rd_ == rd_ else 0x7FFFFFFFFFFFFFFF


# ------------------------------------------------------------------ compiled once per family


@emu_kernel
def alu_int(P, act, code, regs, base, NL):
    """The rarer integer, bit and pack instructions (FAM_INT_MORE). Returns False for another opcode."""
    op = code[P, F_OP]
    ty = code[P, F_TY]
    d0 = code[P, F_D0]
    s0 = code[P, F_S0]
    s1 = code[P, F_S1]
    s2 = code[P, F_S2]
    if op == OP_IDIV or op == OP_IREM:
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
    else:
        return False
    return True


@emu_kernel
def alu_cmp(P, act, code, regs, base, NL):
    """setp on floats or with a boolean combination, set, slct (FAM_CMP). False for another opcode."""
    op = code[P, F_OP]
    ty = code[P, F_TY]
    d0 = code[P, F_D0]
    s0 = code[P, F_S0]
    s1 = code[P, F_S1]
    s2 = code[P, F_S2]
    if op == OP_SETP or op == OP_SET:
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
                c = compare(regs[s0, t], regs[s1, t], ty2, cmp, ftz)
                if boolop != BOOL_NONE:
                    q = (regs[s2, t] != 0) != negc
                    p1 = combine(c, q, boolop)
                    p2 = combine(not c, q, boolop)
                else:
                    p1 = c
                    p2 = not c
                if op == OP_SET:
                    if ty == T_F32:
                        regs[d0, t] = 0x3F800000 if p1 else 0
                    else:
                        regs[d0, t] = zext(np.int64(-1), tbits(ty)) if p1 else 0
                else:
                    if d0 >= 0:
                        regs[d0, t] = 1 if p1 else 0
                    if d1 >= 0:
                        regs[d1, t] = 1 if p2 else 0
    elif op == OP_SLCT:
        ty2 = code[P, F_TY2]
        bits = tbits(ty)
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                if ty2 == T_F32:
                    ge = f32_of(regs[s2, t]) >= 0.0
                else:
                    ge = sext(regs[s2, t], 32) >= 0
                regs[d0, t] = zext(regs[s0, t] if ge else regs[s1, t], bits)
    else:
        return False
    return True


@emu_kernel
def alu_float(P, act, code, regs, base, NL):
    """Every float instruction with a rounding mode, flag or type that `ex_float_plain` does not
    take, and testp (FAM_FLOAT). False for another opcode."""
    op = code[P, F_OP]
    ty = code[P, F_TY]
    d0 = code[P, F_D0]
    s0 = code[P, F_S0]
    s1 = code[P, F_S1]
    s2 = code[P, F_S2]
    sub = code[P, F_SUB]
    fl = code[P, F_FLAGS]
    if op == OP_TESTP:
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                regs[d0, t] = 1 if testp(regs[s0, t], ty, sub) else 0
    elif op >= OP_FADD and op <= OP_FTANH or op == OP_COPYSIGN:
        for l in range(NL):
            if (act >> l) & 1:
                t = base + l
                regs[d0, t] = float_op(op, ty, sub, fl, regs[s0, t], regs[s1, t] if s1 >= 0 else 0,
                                       regs[s2, t] if s2 >= 0 else 0)
    else:
        return False
    return True


@emu_kernel
def alu_cvt(P, act, code, regs, base, NL):
    """cvt with a float on either side, rounding or saturation, and the packing forms (FAM_CVT).
    False for another opcode."""
    if code[P, F_OP] != OP_CVT:
        return False
    ty = code[P, F_TY]
    ty2 = code[P, F_TY2]
    d0 = code[P, F_D0]
    s0 = code[P, F_S0]
    s1 = code[P, F_S1]
    dbits = code[P, F_AUX2]   # a signed 8/16-bit result is sign-extended to its register's width
    sub = code[P, F_SUB]
    fl = code[P, F_FLAGS]
    if s1 >= 0:
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
    return True


# ------------------------------------------------------------------ the family of each row (plain Python)

_FAMILY_OF_OP = {OP_NOP: FAM_NOP, OP_MOV: FAM_MOV, OP_IADD: FAM_IADD, OP_ISUB: FAM_IADD, OP_IMUL: FAM_IMUL,
                 OP_IMAD: FAM_IMUL, OP_SHL: FAM_SHIFT, OP_SHR: FAM_SHIFT, OP_AND: FAM_LOGIC, OP_OR: FAM_LOGIC,
                 OP_XOR: FAM_LOGIC, OP_NOT: FAM_LOGIC, OP_SELP: FAM_SELP, OP_SET: FAM_CMP, OP_SLCT: FAM_CMP,
                 OP_TESTP: FAM_FLOAT, OP_LD: FAM_LDST, OP_ST: FAM_LDST, OP_ATOM: FAM_ATOM, OP_TEX: FAM_TEX,
                 OP_SULD: FAM_TEX, OP_SUST: FAM_TEX, OP_CPASYNC: FAM_CPASYNC, OP_BRA: FAM_BRA, OP_CALL: FAM_CALL,
                 OP_RET: FAM_CALL, OP_EXIT: FAM_EXIT, OP_BAR: FAM_BAR, OP_ACTIVEMASK: FAM_MISC, OP_CLOCK: FAM_MISC,
                 OP_NANOSLEEP: FAM_MISC, OP_PRINTF: FAM_MISC, OP_TRAP: FAM_MISC}
_FAMILY_OF_OP.update({op: FAM_SYNC for op in SYNC_OPS})
_FAMILY_OF_OP.update({op: FAM_INT_MORE for op in (
    OP_PACK, OP_UNPACK, OP_IDIV, OP_IREM, OP_IABS, OP_INEG, OP_IMIN, OP_IMAX, OP_CNOT, OP_BFE, OP_BFI, OP_BREV, OP_CLZ,
    OP_POPC, OP_BFIND, OP_PRMT, OP_LOP3, OP_MUL24, OP_SAD, OP_SHF, OP_DP4A, OP_DP2A)})
_FAMILY_OF_OP.update({OP_CVTA_TO: FAM_CVTA, OP_CVTA_FROM: FAM_CVTA, OP_ISSPACEP: FAM_CVTA})
_FAMILY_OF_OP.update({op: FAM_FLOAT for op in range(OP_FADD, OP_COPYSIGN + 1) if op != OP_TESTP})


def is_scalar_ldst(code: np.ndarray, P: int) -> bool:
    """Whether row `P`, an ld or st, is the case `interp.scalar_ldst` runs (FAM_SCALAR_LDST): one
    element of global or shared memory, an ld with a destination register or an st."""
    if code[P, F_VEC] != 1 or code[P, F_SPACE] not in (SP_GLOBAL, SP_SHARED):
        return False
    return code[P, F_OP] == OP_ST or code[P, F_D0] >= 0


def is_bank_ld(code: np.ndarray, P: int) -> bool:
    """Whether row `P`, an ld or st, is the case `interp.ld_bank` runs (FAM_LD_BANK): an ld of one
    element of the kernel parameters or the constant bank into a register."""
    return (code[P, F_OP] == OP_LD and code[P, F_VEC] == 1 and code[P, F_D0] >= 0
            and code[P, F_SPACE] in (SP_PARAM, SP_CONST))


def row_family(code: np.ndarray, P: int) -> int:
    """The family (FAM_*) of decoded row `P`: the handler that runs it. The split of setp, cvt and
    the float arithmetic between an inlined handler and a compiled family follows the handlers' own
    predicates (`setp_is_int`, `cvt_is_int`, `float_is_plain`), run here as Python; so does that
    of ld and st between the scalar cases and `mem_ldst` (`is_scalar_ldst`, `is_bank_ld`)."""
    op = int(code[P, F_OP])
    if op == OP_LD or op == OP_ST:
        if is_scalar_ldst(code, P):
            return FAM_SCALAR_LDST
        if is_bank_ld(code, P):
            return FAM_LD_BANK
    if op == OP_SETP:
        return FAM_SETP_INT if setp_is_int.py_func(code, P) else FAM_CMP
    if op == OP_CVT:
        return FAM_CVT_INT if cvt_is_int.py_func(code, P) else FAM_CVT
    if float_is_plain.py_func(code, P):
        return FAM_FLOAT_PLAIN
    return _FAMILY_OF_OP.get(op, FAM_NONE)


def assign_families(code: np.ndarray) -> None:
    """Fill the F_FAM column of a decoded code table."""
    for P in range(code.shape[0]):
        code[P, F_FAM] = row_family(code, P)
