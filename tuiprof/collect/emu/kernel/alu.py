"""Scalar semantics of the PTX integer, float and conversion instructions, one lane at a time.

Registers hold raw bits in an int64; an operation reads its sources as its type says
(sign- or zero-extending the low bits) and returns the bits of its result, zero-extended from the
type's width. Everything here follows the PTX ISA's pseudo-code (bfe, bfi, prmt, shf, bfind...)
and its rules for corner cases: shifts beyond the width, division by zero, saturation, NaN.
"""

from __future__ import annotations

import math

import numpy as np

from tuiprof.collect.emu.kernel.bits import bits_f32, brev32, brev64, clz32, clz64, popc32, popc64
from tuiprof.collect.emu.kernel.codes import (
    BOOL_AND,
    BOOL_OR,
    BOOL_XOR,
    CMP_EQ,
    CMP_EQU,
    CMP_GT,
    CMP_LE,
    CMP_LT,
    CMP_NAN,
    CMP_NE,
    CMP_NUM,
    FL_APPROX,
    FL_FTZ,
    FL_SAT,
    OP_COPYSIGN,
    OP_FABS,
    OP_FADD,
    OP_FCOS,
    OP_FDIV,
    OP_FEX2,
    OP_FFMA,
    OP_FLG2,
    OP_FMAX,
    OP_FMIN,
    OP_FMUL,
    OP_FNEG,
    OP_FRCP,
    OP_FRSQRT,
    OP_FSIN,
    OP_FSQRT,
    OP_FSUB,
    OP_FTANH,
    RND_NONE,
    RND_RMI,
    RND_RN,
    RND_RNI,
    RND_RPI,
    RND_RZI,
    T_BF16,
    T_BF16X2,
    T_F16,
    T_F16X2,
    T_F32,
    T_F64,
    T_PRED,
    T_S8,
    T_S16,
    T_S32,
    T_S64,
    T_U8,
    T_U16,
    T_U32,
    T_U64,
    TESTP_FINITE,
    TESTP_INFINITE,
    TESTP_NORMAL,
    TESTP_NOTANUMBER,
    TESTP_NUMBER,
)
from tuiprof.collect.emu.kernel.fp import (
    bits_of,
    exact_add,
    exact_div,
    exact_fma,
    exact_mul,
    exact_sqrt,
    float_to_int,
    flush,
    int_to_pair,
    round_integral,
    value_of,
)
from tuiprof.jit import INLINE, emu_kernel, njit

MIN64 = np.int64(-9223372036854775808)


# ------------------------------------------------------------------ type helpers

@emu_kernel
def tbits(ty):
    """Width in bits of a type code (1 for .pred)."""
    if ty == T_U32 or ty == T_S32 or ty == T_F32 or ty == T_F16X2 or ty == T_BF16X2:
        return 32
    if ty == T_U64 or ty == T_S64 or ty == T_F64:
        return 64
    if ty == T_U16 or ty == T_S16 or ty == T_F16 or ty == T_BF16:
        return 16
    if ty == T_U8 or ty == T_S8:
        return 8
    return 1


@emu_kernel
def is_signed(ty):
    return ty == T_S32 or ty == T_S64 or ty == T_S16 or ty == T_S8


@emu_kernel
def is_float(ty):
    return ty == T_F32 or ty == T_F64 or ty == T_F16 or ty == T_BF16 or ty == T_F16X2 or ty == T_BF16X2


@emu_kernel
def sext(v, bits):
    """The low `bits` of `v`, sign-extended."""
    if bits >= 64:
        return v
    s = 64 - bits
    return (v << s) >> s


@emu_kernel
def zext(v, bits):
    """The low `bits` of `v`, zero-extended."""
    if bits >= 64:
        return v
    return v & ((np.int64(1) << bits) - 1)


@njit(**INLINE)
def low_mask(bits):
    """The mask of the low `bits` bits (all ones for 64): ``zext(v, bits) == v & low_mask(bits)``."""
    if bits >= 64:
        return np.int64(-1)
    return (np.int64(1) << bits) - 1


@emu_kernel
def rd(v, ty):
    """Register bits `v` read as integer type `ty` (sign- or zero-extended; .pred as 0/1)."""
    if ty == T_PRED:
        return np.int64(1) if v != 0 else np.int64(0)
    b = tbits(ty)
    if is_signed(ty):
        return sext(v, b)
    return zext(v, b)


@emu_kernel
def wr(v, ty):
    """Result `v` stored as type `ty`: the low bits, zero-extended (.pred as 0/1)."""
    if ty == T_PRED:
        return np.int64(1) if v != 0 else np.int64(0)
    return zext(v, tbits(ty))


@emu_kernel
def ult(a, b):
    """Unsigned 64-bit a < b."""
    return (a ^ MIN64) < (b ^ MIN64)


@emu_kernel
def lt_typed(a, b, ty):
    """a < b for values already read as `ty` (unsigned 64-bit compares unsigned)."""
    if ty == T_U64:
        return ult(a, b)
    return a < b


# ------------------------------------------------------------------ integer operations

@emu_kernel
def mulhi_u64(a, b):
    """High 64 bits of the unsigned 128-bit product."""
    m = np.int64(0xFFFFFFFF)
    a0, a1 = a & m, (a >> 32) & m
    b0, b1 = b & m, (b >> 32) & m
    p00 = a0 * b0
    p01 = a0 * b1
    p10 = a1 * b0
    p11 = a1 * b1
    mid = ((p00 >> 32) & m) + (p01 & m) + (p10 & m)
    return p11 + ((p01 >> 32) & m) + ((p10 >> 32) & m) + ((mid >> 32) & m)


@emu_kernel
def mulhi_s64(a, b):
    """High 64 bits of the signed 128-bit product."""
    h = mulhi_u64(a, b)
    if a < 0:
        h -= b
    if b < 0:
        h -= a
    return h


@emu_kernel
def int_mul(a, b, ty, hi, wide):
    """mul.lo / mul.hi / mul.wide of integer type `ty` (operands raw bits)."""
    bits = tbits(ty)
    x = rd(a, ty)
    y = rd(b, ty)
    if wide:
        return zext(x * y, 2 * bits)
    if hi:
        if bits == 64:
            return mulhi_s64(x, y) if is_signed(ty) else mulhi_u64(x, y)
        return zext((x * y) >> bits, bits)
    return zext(x * y, bits)


@emu_kernel
def int_div(a, b, ty, rem):
    """div / rem with C truncation; x / 0 gives all ones (rem: x), MIN / -1 gives MIN."""
    bits = tbits(ty)
    x = rd(a, ty)
    y = rd(b, ty)
    if y == 0:
        return zext(x, bits) if rem else zext(np.int64(-1), bits)
    if is_signed(ty):
        if bits == 64 and x == MIN64 and y == -1:
            return np.int64(0) if rem else MIN64
        q = abs(x) // abs(y)
        if (x < 0) != (y < 0):
            q = -q
        if rem:
            return zext(x - q * y, bits)
        return zext(q, bits)
    if bits == 64:
        ux = np.uint64(x)
        uy = np.uint64(y)
        if rem:
            return np.int64(ux % uy)
        return np.int64(ux // uy)
    if rem:
        return x % y
    return x // y


@emu_kernel
def shift(a, b, ty, left):
    """shl / shr: amounts beyond the width give 0 (or the sign for shr.s)."""
    bits = tbits(ty)
    n = b & 0xFFFFFFFF
    if left:
        return shl_bits(a, n, bits)
    if is_signed(ty):
        x = sext(a, bits)
        if n >= bits:
            n = bits - 1 if bits < 64 else 63
        return zext(x >> n, bits)
    x = zext(a, bits)
    if n >= bits:
        return np.int64(0)
    if bits == 64:
        return np.int64(np.uint64(x) >> np.uint64(n))
    return x >> n


@njit(**INLINE)
def shl_bits(a, n, bits):
    """shl of `a` by `n` (already the low 32 bits of the amount) on a `bits`-bit type: 0 past the width."""
    if n >= bits:
        return np.int64(0)
    return (a << n) & low_mask(bits)


@emu_kernel
def add_sat_s32(x, y):
    r = sext(x, 32) + sext(y, 32)
    if r > 2147483647:
        r = 2147483647
    if r < -2147483648:
        r = -2147483648
    return zext(r, 32)


@emu_kernel
def sub_sat_s32(x, y):
    r = sext(x, 32) - sext(y, 32)
    if r > 2147483647:
        r = 2147483647
    if r < -2147483648:
        r = -2147483648
    return zext(r, 32)


@emu_kernel
def bfe(a, b, c, ty):
    """Bit-field extract (PTX pseudo-code)."""
    bits = tbits(ty)
    msb = bits - 1
    pos = b & 0xFF
    ln = c & 0xFF
    sbit = 0
    if is_signed(ty) and ln != 0:
        k = pos + ln - 1
        if k > msb:
            k = msb
        sbit = (a >> k) & 1
    d = np.int64(0)
    for i in range(bits):
        if i < ln and pos + i <= msb:
            bit = (a >> (pos + i)) & 1
        else:
            bit = sbit
        d |= np.int64(bit) << i
    return zext(d, bits)


@emu_kernel
def bfi(f, b, c, dd, ty):
    """Bit-field insert: `f`'s low bits into `b` at position c, length dd."""
    bits = tbits(ty)
    pos = c & 0xFF
    ln = dd & 0xFF
    r = zext(b, bits)
    i = 0
    while i < ln and pos + i <= bits - 1:
        bit = (f >> i) & 1
        r = (r & ~(np.int64(1) << (pos + i))) | (np.int64(bit) << (pos + i))
        i += 1
    return zext(r, bits)


@emu_kernel
def bfind(a, ty, shiftamt):
    """Position of the most significant non-sign bit (0xFFFFFFFF when none)."""
    bits = tbits(ty)
    x = rd(a, ty)
    if is_signed(ty) and x < 0:
        x = ~x
    x = zext(x, bits)
    if x == 0:
        return np.int64(0xFFFFFFFF)
    pos = bits - 1 - (clz64(x) - (64 - bits))
    if shiftamt:
        return np.int64(bits - 1 - pos)
    return np.int64(pos)


_PRMT_MODES = np.array([
    [0x3210, 0x4321, 0x5432, 0x6543],   # f4e
    [0x5670, 0x6701, 0x7012, 0x0123],   # b4e
    [0x0000, 0x1111, 0x2222, 0x3333],   # rc8
    [0x3210, 0x3211, 0x3222, 0x3333],   # ecl
    [0x0000, 0x1110, 0x2210, 0x3210],   # ecr
    [0x1010, 0x3232, 0x1010, 0x3232],   # rc16
], dtype=np.int64)


@emu_kernel
def prmt(a, b, c, mode):
    """Byte permute of {b, a} by selector c (mode 0: the generic form; 1..6: f4e b4e rc8 ecl ecr rc16)."""
    tmp = zext(a, 32) | (zext(b, 32) << 32)
    if mode == 0:
        sel = c
        msbmode = True
    else:
        sel = _PRMT_MODES[mode - 1, c & 3]
        msbmode = False
    d = np.int64(0)
    for i in range(4):
        s = (sel >> (4 * i)) & 0xF
        byte = (tmp >> (8 * (s & 7))) & 0xFF
        if msbmode and (s & 8):
            byte = 0xFF if byte & 0x80 else 0
        d |= byte << (8 * i)
    return d


@emu_kernel
def lop3(a, b, c, lut):
    r = np.int64(0)
    for i in range(8):
        if (lut >> i) & 1:
            x = a if i & 4 else ~a
            y = b if i & 2 else ~b
            z = c if i & 1 else ~c
            r |= x & y & z
    return zext(r, 32)


@emu_kernel
def shf(a, b, c, right, clamp):
    """Funnel shift of the 64-bit {b, a} by c (clamped to 32 or taken mod 32)."""
    n = c & 0xFFFFFFFF
    if clamp:
        if n > 32:
            n = 32
    else:
        n = n & 31
    v = zext(a, 32) | (zext(b, 32) << 32)
    if right:
        return zext(np.int64(np.uint64(v) >> np.uint64(n)), 32)
    return zext(np.int64(np.uint64(v) << np.uint64(n)) >> 32, 32)


@emu_kernel
def int_op2(op_min, a, b, ty):
    """min (op_min True) or max of two integers of type `ty`."""
    x = rd(a, ty)
    y = rd(b, ty)
    less = lt_typed(x, y, ty)
    if op_min:
        return wr(x if less else y, ty)
    return wr(y if less else x, ty)


@emu_kernel
def brev(a, ty):
    return brev64(a) if tbits(ty) == 64 else brev32(a)


@emu_kernel
def clz(a, ty):
    return clz64(a) if tbits(ty) == 64 else clz32(a)


@emu_kernel
def popc(a, ty):
    return popc64(a) if tbits(ty) == 64 else popc32(a)


# ------------------------------------------------------------------ comparisons

@emu_kernel
def compare(a, b, ty, cmp, ftz):
    """setp's comparison of two sources of type `ty` (integers signed or not; floats ordered or
    unordered)."""
    if is_float(ty):
        x = value_of(a, ty)
        y = value_of(b, ty)
        if ftz:
            x = flush(x, ty)
            y = flush(y, ty)
        nan = x != x or y != y
        if cmp == CMP_NUM:
            return not nan
        if cmp == CMP_NAN:
            return nan
        if cmp >= CMP_EQU:
            if nan:
                return True
            cmp -= CMP_EQU
        elif nan:
            return False
        if cmp == CMP_EQ:
            return x == y
        if cmp == CMP_NE:
            return x != y
        if cmp == CMP_LT:
            return x < y
        if cmp == CMP_LE:
            return x <= y
        if cmp == CMP_GT:
            return x > y
        return x >= y
    return icmp(a, b, ty, cmp)


@njit(**INLINE)
def icmp(a, b, ty, cmp):
    """setp's comparison of two integer sources of type `ty` (signed or not); the 32- and 64-bit
    types read without a call (the interpreter's hot loop)."""
    if ty == T_S32:
        x = (a << 32) >> 32
        y = (b << 32) >> 32
    elif ty == T_U32:
        x = a & 0xFFFFFFFF
        y = b & 0xFFFFFFFF
    elif ty == T_S64 or ty == T_U64:
        x = a
        y = b
    else:
        x = rd(a, ty)
        y = rd(b, ty)
    if cmp == CMP_EQ:
        return x == y
    if cmp == CMP_NE:
        return x != y
    if ty == T_U64:
        x ^= MIN64
        y ^= MIN64
    if cmp == CMP_LT:
        return x < y
    if cmp == CMP_LE:
        return x <= y
    if cmp == CMP_GT:
        return x > y
    return x >= y


@emu_kernel
def combine(p, q, boolop):
    """setp's optional boolean combination with a third predicate."""
    if boolop == BOOL_AND:
        return p and q
    if boolop == BOOL_OR:
        return p or q
    if boolop == BOOL_XOR:
        return p != q
    return p


# ------------------------------------------------------------------ floats

@emu_kernel
def _fminmax(x, y, is_min):
    if x != x and y != y:
        return math.nan
    if x != x:
        return y
    if y != y:
        return x
    if x == y:
        # -0 < +0 for min and max
        sx = math.copysign(1.0, x)
        if is_min:
            return x if sx < 0 else y
        return y if sx < 0 else x
    if is_min:
        return x if x < y else y
    return x if x > y else y


@emu_kernel
def float_scalar(op, ty, rnd, flags, xa, xb, xc):
    """Bits of a float instruction's result on one lane, for f64/f32/f16/bf16 (not the x2 forms)."""
    ftz = (flags & FL_FTZ) != 0
    sat = (flags & FL_SAT) != 0
    if op == OP_FABS or op == OP_FNEG:
        bits = tbits(ty)
        signbit = np.int64(1) << (bits - 1)
        if ftz and ty == T_F32:
            v = flush(value_of(xa, ty), ty)
            xa = bits_f32(np.float32(v))
        if op == OP_FABS:
            return zext(xa & ~signbit, bits)
        return zext(xa ^ signbit, bits)
    a = value_of(xa, ty)
    b = value_of(xb, ty)
    if ftz:
        a = flush(a, ty)
        b = flush(b, ty)
    mode = rnd
    if mode == RND_NONE:
        mode = RND_RN
    lo = 0.0
    if op == OP_FADD:
        hi, lo = exact_add(a, b)
    elif op == OP_FSUB:
        hi, lo = exact_add(a, -b)
    elif op == OP_FMUL:
        hi, lo = exact_mul(a, b)
    elif op == OP_FFMA:
        c = value_of(xc, ty)
        if ftz:
            c = flush(c, ty)
        hi, lo = exact_fma(a, b, c)
    elif op == OP_FDIV:
        if flags & FL_APPROX:
            hi = a / b
        else:
            hi, lo = exact_div(a, b)
    elif op == OP_FRCP:
        if flags & FL_APPROX:
            hi = 1.0 / a
        else:
            hi, lo = exact_div(1.0, a)
    elif op == OP_FSQRT:
        if flags & FL_APPROX:
            hi = math.sqrt(a) if a >= 0.0 else math.nan
        else:
            hi, lo = exact_sqrt(a)
    elif op == OP_FRSQRT:
        hi = 1.0 / math.sqrt(a) if a >= 0.0 else math.nan
    elif op == OP_FEX2:
        hi = 2.0 ** a
    elif op == OP_FLG2:
        if a < 0.0 or a != a:
            hi = math.nan
        elif a == 0.0:
            hi = -math.inf
        else:
            hi = math.log2(a)
    elif op == OP_FSIN:
        hi = math.sin(a) if not math.isinf(a) else math.nan
    elif op == OP_FCOS:
        hi = math.cos(a) if not math.isinf(a) else math.nan
    elif op == OP_FTANH:
        hi = math.tanh(a)
    elif op == OP_FMIN:
        hi = _fminmax(a, b, True)
    elif op == OP_FMAX:
        hi = _fminmax(a, b, False)
    elif op == OP_COPYSIGN:
        hi = math.copysign(b, a)
    else:
        hi = math.nan
    return bits_of(hi, lo, mode, ty, ftz, sat)


@emu_kernel
def float_op(op, ty, rnd, flags, xa, xb, xc):
    """A float instruction on one lane, including the packed .f16x2 / .bf16x2 forms."""
    if ty == T_F16X2 or ty == T_BF16X2:
        et = T_F16 if ty == T_F16X2 else T_BF16
        lo = float_scalar(op, et, rnd, flags, xa & 0xFFFF, xb & 0xFFFF, xc & 0xFFFF)
        hi = float_scalar(op, et, rnd, flags, (xa >> 16) & 0xFFFF, (xb >> 16) & 0xFFFF, (xc >> 16) & 0xFFFF)
        return (lo & 0xFFFF) | ((hi & 0xFFFF) << 16)
    return float_scalar(op, ty, rnd, flags, xa, xb, xc)


@emu_kernel
def testp(x, ty, what):
    v = value_of(x, ty)
    if what == TESTP_FINITE:
        return v == v and not math.isinf(v)
    if what == TESTP_INFINITE:
        return math.isinf(v)
    if what == TESTP_NUMBER:
        return v == v
    if what == TESTP_NOTANUMBER:
        return v != v
    tiny = math.ldexp(1.0, -1022) if ty == T_F64 else (math.ldexp(1.0, -14) if ty == T_F16 else math.ldexp(1.0, -126))
    if what == TESTP_NORMAL:
        return v == v and not math.isinf(v) and abs(v) >= tiny
    return v != 0.0 and abs(v) < tiny


# ------------------------------------------------------------------ conversions

@emu_kernel
def cvt(x, dty, sty, rnd, flags):
    """Bits of ``cvt.rnd.dty.sty`` applied to source bits `x`."""
    ftz = (flags & FL_FTZ) != 0
    sat = (flags & FL_SAT) != 0
    dfl = is_float(dty)
    sfl = is_float(sty)
    if not sfl and not dfl:
        v = rd(x, sty)
        if sat:
            db = tbits(dty)
            if is_signed(dty):
                lo = -(np.int64(1) << (db - 1)) if db < 64 else MIN64
                hi = (np.int64(1) << (db - 1)) - 1 if db < 64 else np.int64(9223372036854775807)
                if sty == T_U64 and v < 0:
                    v = hi
                elif v < lo:
                    v = lo
                elif v > hi:
                    v = hi
            else:
                if is_signed(sty) and v < 0:
                    v = np.int64(0)
                elif db < 64 and (v > (np.int64(1) << db) - 1 or (sty == T_U64 and v < 0)):
                    v = (np.int64(1) << db) - 1
        return zext(v, tbits(dty))
    if not sfl:
        v = rd(x, sty)
        if tbits(sty) == 64:
            hi, lo = int_to_pair(v, sty == T_U64)
        else:
            hi, lo = float(v), 0.0
        mode = rnd if rnd != RND_NONE else RND_RN
        return bits_of(hi, lo, mode, dty, ftz, sat)
    v = value_of(x, sty)
    if ftz:
        v = flush(v, sty)
    if not dfl:
        mode = rnd if rnd != RND_NONE else RND_RZI
        return float_to_int(v, mode, dty)
    if rnd == RND_RNI or rnd == RND_RZI or rnd == RND_RMI or rnd == RND_RPI:
        if v == v and not math.isinf(v):
            v = math.copysign(round_integral(v, rnd), v)
        return bits_of(v, 0.0, RND_RN, dty, ftz, sat)
    mode = rnd if rnd != RND_NONE else RND_RN
    return bits_of(v, 0.0, mode, dty, ftz, sat)


@emu_kernel
def cvt_pack2(xa, xb, dty, rnd, flags):
    """``cvt.rn.f16x2.f32 d, a, b`` (and bf16x2): a into the upper half, b into the lower."""
    et = T_F16 if dty == T_F16X2 else T_BF16
    hi = cvt(xa, et, T_F32, rnd, flags)
    lo = cvt(xb, et, T_F32, rnd, flags)
    return (lo & 0xFFFF) | ((hi & 0xFFFF) << 16)


__all__ = ["add_sat_s32", "bfe", "bfi", "bfind", "brev", "clz", "combine", "compare", "cvt", "cvt_pack2", "float_op",
           "icmp", "int_div", "int_mul", "int_op2", "is_float", "is_signed", "lop3", "low_mask", "lt_typed", "mulhi_s64", "mulhi_u64",
           "popc", "prmt", "rd", "sext", "shf", "shift", "shl_bits", "sub_sat_s32", "tbits", "testp", "ult", "wr", "zext"]
