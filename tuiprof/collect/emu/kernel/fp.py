"""Floating-point rounding for the emulator: IEEE results in every PTX rounding mode.

Every exact operation is computed as an unevaluated sum ``hi + lo`` of two doubles that equals the
exact result (or whose ``lo`` has the sign of the remaining error), then rounded once to the
destination format (f64, f32, f16, bf16) in the requested mode by `round_fmt`. That gives
correctly rounded ``.rn``, ``.rz``, ``.rm`` and ``.rp`` results for add, sub, mul, fma, div,
sqrt and every ``cvt``, with subnormals and overflow as IEEE 754 defines them.
"""

from __future__ import annotations

import math

import numpy as np

from tuiprof.collect.emu.kernel.bits import bits_f32, bits_f64, f32_of, f64_of, fma64
from tuiprof.collect.emu.kernel.codes import (
    RND_RM,
    RND_RMI,
    RND_RN,
    RND_RNA,
    RND_RP,
    RND_RPI,
    RND_RZ,
    RND_RZI,
    T_BF16,
    T_F16,
    T_F32,
    T_F64,
    T_S8,
    T_S16,
    T_S32,
    T_S64,
    T_U8,
    T_U16,
    T_U32,
    T_U64,
)
from tuiprof.jit import emu_kernel

F32_P, F32_EMIN, F32_EMAX = 24, -126, 127
F16_P, F16_EMIN, F16_EMAX = 11, -14, 15
BF16_P = 8
F64_P, F64_EMIN, F64_EMAX = 53, -1022, 1023

NAN32 = 0x7FFFFFFF
"""The canonical NaN PTX produces for f32 results."""
NAN16 = 0x7FFF
NAN64 = 0x7FFFFFFFFFFFFFFF


@emu_kernel
def two_sum(a, b):
    """(s, e) with s = fl(a + b) and s + e = a + b exactly (Knuth)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


@emu_kernel
def fmt_params(ty):
    """(precision, emin, emax) of a float type code."""
    if ty == T_F32:
        return F32_P, F32_EMIN, F32_EMAX
    if ty == T_F16:
        return F16_P, F16_EMIN, F16_EMAX
    if ty == T_BF16:
        return BF16_P, F32_EMIN, F32_EMAX
    return F64_P, F64_EMIN, F64_EMAX


@emu_kernel
def round_fmt(x, lo, mode, p, emin, emax):
    """The value ``x + lo`` rounded to a binary format of precision `p` (significand bits) and
    exponent range ``emin..emax`` in `mode` (RND_RN/RZ/RM/RP/RNA), as a float64.

    ``x`` must be the double nearest the exact value and ``lo`` the remainder (only its sign
    matters when ``x`` itself is not representable). Overflow gives an infinity or the largest
    finite value, as the mode says."""
    if x != x or math.isinf(x):
        return x
    if x == 0.0:
        if lo == 0.0:
            return x
        x, lo = lo, 0.0
    neg = x < 0.0
    ax = -x if neg else x
    alo = -lo if neg else lo
    m, k = math.frexp(ax)
    e = k - 1
    if m == 0.5 and alo < 0.0 and e > emin:
        e -= 1
    if e < emin:
        e = emin
    q = math.ldexp(1.0, e - (p - 1))
    s = ax / q
    n0 = math.floor(s)
    d = s - n0
    # n0 <= |v|/q < n0 + 1 unless d == 0 and alo < 0 (then n0 - 1 < |v|/q < n0)
    if mode == RND_RN or mode == RND_RNA:
        if d > 0.5 or (d == 0.5 and alo > 0.0):
            n = n0 + 1.0
        elif d < 0.5 or (d == 0.5 and alo < 0.0):
            n = n0
        elif mode == RND_RNA:
            n = n0 + 1.0
        else:
            n = n0 + 1.0 if n0 - 2.0 * math.floor(n0 * 0.5) != 0.0 else n0
    else:
        exact = d == 0.0 and alo == 0.0
        if d == 0.0 and alo < 0.0:
            lo_n, hi_n = n0 - 1.0, n0
        elif exact:
            lo_n, hi_n = n0, n0
        else:
            lo_n, hi_n = n0, n0 + 1.0
        if mode == RND_RZ:
            n = lo_n
        elif mode == RND_RP:
            n = lo_n if neg else hi_n
        else:  # RND_RM
            n = hi_n if neg else lo_n
    r = n * q
    big = math.ldexp(1.0, emax + 1)
    if r >= big:
        maxf = math.ldexp(2.0 - math.ldexp(1.0, 1 - p), emax)
        if mode == RND_RN or mode == RND_RNA:
            r = math.inf
        elif mode == RND_RZ:
            r = maxf
        elif mode == RND_RP:
            r = maxf if neg else math.inf
        else:
            r = math.inf if neg else maxf
    return -r if neg else r


# ------------------------------------------------------------------ half and bfloat16 encodings

@emu_kernel
def f16_value(h):
    """The value of IEEE half bits `h` (low 16 bits), exactly, as float64."""
    h = h & 0xFFFF
    sign = -1.0 if h & 0x8000 else 1.0
    ex = (h >> 10) & 0x1F
    man = h & 0x3FF
    if ex == 0:
        return sign * math.ldexp(float(man), -24)
    if ex == 31:
        if man:
            return math.nan
        return sign * math.inf
    return sign * math.ldexp(float(man | 0x400), ex - 25)


@emu_kernel
def f16_bits(v):
    """Half bits of float64 `v`, which must already be representable (see `round_fmt`)."""
    if v != v:
        return NAN16
    sign = 0x8000 if (v < 0.0 or (v == 0.0 and math.copysign(1.0, v) < 0.0)) else 0
    a = abs(v)
    if math.isinf(a):
        return sign | 0x7C00
    if a < math.ldexp(1.0, -14):
        return sign | int(a * math.ldexp(1.0, 24))
    m, k = math.frexp(a)
    ex = k - 1
    man = int((a * math.ldexp(1.0, -ex) - 1.0) * 1024.0)
    return sign | ((ex + 15) << 10) | man


@emu_kernel
def bf16_value(h):
    """The value of bfloat16 bits `h` (low 16 bits), exactly."""
    return float(f32_of((h & 0xFFFF) << 16))


@emu_kernel
def bf16_bits(v):
    """bfloat16 bits of float64 `v`, which must already be representable."""
    if v != v:
        return 0x7FFF
    return (bits_f32(np.float32(v)) >> 16) & 0xFFFF


@emu_kernel
def value_of(bits, ty):
    """The exact value of a float register of type `ty` as float64."""
    if ty == T_F32:
        return float(f32_of(bits))
    if ty == T_F64:
        return f64_of(bits)
    if ty == T_F16:
        return f16_value(bits)
    return bf16_value(bits)


@emu_kernel
def flush(v, ty):
    """`v` with a subnormal of type `ty` replaced by a zero of the same sign (.ftz)."""
    if ty == T_F64:
        return v
    tiny = math.ldexp(1.0, -14) if ty == T_F16 else math.ldexp(1.0, -126)
    if v != 0.0 and abs(v) < tiny:
        return math.copysign(0.0, v)
    return v


@emu_kernel
def bits_of(hi, lo, mode, ty, ftz, sat):
    """Round ``hi + lo`` to float type `ty` in `mode` and return its bits (.ftz, .sat applied)."""
    if sat:
        if hi != hi:
            hi, lo = 0.0, 0.0
        elif hi < 0.0 or (hi == 0.0 and lo < 0.0):
            hi, lo = 0.0, 0.0
        elif hi > 1.0 or (hi == 1.0 and lo > 0.0):
            hi, lo = 1.0, 0.0
    p, emin, emax = fmt_params(ty)
    if mode > RND_RNA:
        mode = RND_RN
    r = round_fmt(hi, lo, mode, p, emin, emax)
    if ftz:
        r = flush(r, ty)
    if ty == T_F32:
        if r != r:
            return NAN32
        return bits_f32(np.float32(r))
    if ty == T_F64:
        if r != r:
            return NAN64
        return bits_f64(r)
    if ty == T_F16:
        return f16_bits(r)
    return bf16_bits(r)


# ------------------------------------------------------------------ exact arithmetic

@emu_kernel
def exact_add(a, b):
    """(hi, lo) = a + b exactly."""
    return two_sum(a, b)


@emu_kernel
def exact_mul(a, b):
    """(hi, lo) = a * b exactly (lo from a fused multiply-add)."""
    p = a * b
    if math.isinf(p) or p != p or p == 0.0:
        return p, 0.0
    return p, fma64(a, b, -p)


@emu_kernel
def exact_div(a, b):
    """(q, r) with q = fl(a / b) and r of the sign of a / b - q."""
    q = a / b
    if math.isinf(q) or q != q or q == 0.0 or math.isinf(b):
        return q, 0.0
    r = fma64(-q, b, a)
    if b < 0.0:
        r = -r
    return q, r


@emu_kernel
def exact_sqrt(a):
    """(s, r) with s = fl(sqrt(a)) and r of the sign of sqrt(a) - s."""
    s = math.sqrt(a) if a >= 0.0 else math.nan
    if s != s or math.isinf(s) or s == 0.0:
        return s, 0.0
    return s, fma64(-s, s, a)


@emu_kernel
def exact_fma(a, b, c):
    """(hi, lo) = a * b + c exactly when a * b is exact in double (f32, f16, bf16 operands);
    for f64 operands hi is the correctly rounded fma and lo is 0 (round-to-nearest only)."""
    p, e = exact_mul(a, b)
    if e == 0.0:
        if math.isinf(p) or p != p:
            return p + c, 0.0
        return two_sum(p, c)
    return fma64(a, b, c), 0.0


# ------------------------------------------------------------------ conversions

@emu_kernel
def int_range(ty):
    """(lo, hi) of an integer type as float64 (exact powers of two for the 64-bit types)."""
    if ty == T_U8:
        return 0.0, 255.0
    if ty == T_U16:
        return 0.0, 65535.0
    if ty == T_U32:
        return 0.0, 4294967295.0
    if ty == T_U64:
        return 0.0, 18446744073709551616.0
    if ty == T_S8:
        return -128.0, 127.0
    if ty == T_S16:
        return -32768.0, 32767.0
    if ty == T_S32:
        return -2147483648.0, 2147483647.0
    return -9223372036854775808.0, 9223372036854775808.0


@emu_kernel
def round_integral(v, mode):
    """`v` rounded to an integral value (.rni/.rzi/.rmi/.rpi; ties to even for .rni)."""
    if mode == RND_RZI or mode == RND_RZ:
        return np.trunc(v)
    if mode == RND_RMI or mode == RND_RM:
        return np.floor(v)
    if mode == RND_RPI or mode == RND_RP:
        return np.ceil(v)
    return float(np.rint(v))


@emu_kernel
def float_to_int(v, mode, ty):
    """Float value `v` to integer type `ty` in integral-rounding `mode`, saturating, NaN -> 0;
    the result's bits (masked to the type's width)."""
    if v != v:
        return 0
    r = round_integral(v, mode)
    lo, hi = int_range(ty)
    if ty == T_U64:
        if r <= 0.0:
            return 0
        if r >= hi:
            return -1
        if r >= 9223372036854775808.0:
            return np.int64(np.uint64(r))
        return np.int64(r)
    if ty == T_S64:
        if r <= lo:
            return np.int64(-9223372036854775808)
        if r >= hi:
            return np.int64(9223372036854775807)
        return np.int64(r)
    if r <= lo:
        r = lo
    if r >= hi:
        r = hi
    x = np.int64(r)
    if ty == T_S32 or ty == T_U32:
        return x & 0xFFFFFFFF
    if ty == T_S16 or ty == T_U16:
        return x & 0xFFFF
    return x & 0xFF


@emu_kernel
def int_to_pair(x, unsigned):
    """(hi, lo) doubles whose exact sum is the 64-bit integer `x` (unsigned when asked)."""
    if unsigned:
        top = float(np.uint64(x) >> np.uint64(32)) * 4294967296.0
    else:
        top = float(x >> 32) * 4294967296.0
    bottom = float(x & 0xFFFFFFFF)
    return two_sum(top, bottom)


__all__ = ["NAN16", "NAN32", "NAN64", "bits_of", "bf16_bits", "bf16_value", "exact_add", "exact_div", "exact_fma",
           "exact_mul", "exact_sqrt", "f16_bits", "f16_value", "float_to_int", "flush", "int_range", "int_to_pair",
           "round_fmt", "round_integral", "two_sum", "value_of"]
