"""The emulator's arithmetic, one PTX form at a time (tests/cuda/emu_alu.cu, inline asm), against
independent references: exact rationals rounded to the format in each IEEE mode, NumPy, and Python
transcriptions of the PTX ISA's pseudo-code for the bit operations."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from tests.support.emu_support import cuda_ptx, run  # noqa: F401 (a fixture)

N = 256


def alu(cuda_ptx, kernel: str, *inputs: np.ndarray, out_dtype=None) -> np.ndarray:
    n = inputs[0].shape[0]
    out = np.zeros(n, out_dtype or inputs[0].dtype)
    res = run(cuda_ptx("emu_alu"), kernel, -(-n // 128), 128, (*inputs, out, np.int32(n)))
    return res[len(inputs)]


def rounded(x: Fraction, dtype, mode: str) -> float:
    """`x` rounded to `dtype` (float16/32/64) in `mode` (rn rz rm rp): bracket `x` between two
    neighbouring values of the format by stepping from a nearby one, then choose."""
    dt = np.dtype(dtype)
    info = np.finfo(dt)
    big = Fraction(float(info.max))
    if x > big or x < -big:
        over = x > 0
        if mode == "rn":
            # beyond max + half an ulp rounds to infinity
            half_ulp = (big - Fraction(float(np.nextafter(info.max, dt.type(0))))) / 2
            if abs(x) >= big + half_ulp:
                return math.inf if over else -math.inf
            return float(info.max) if over else -float(info.max)
        to_inf = (mode == "rp" and over) or (mode == "rm" and not over)
        if to_inf:
            return math.inf if over else -math.inf
        return float(info.max) if over else -float(info.max)
    c = dt.type(float(x)) if dt != np.float64 else np.float64(float(x))
    while Fraction(float(c)) > x:
        c = np.nextafter(c, dt.type(-np.inf))
    lo = c
    while np.isfinite(np.nextafter(lo, dt.type(np.inf))) and Fraction(float(np.nextafter(lo, dt.type(np.inf)))) <= x:
        lo = np.nextafter(lo, dt.type(np.inf))
    hi = lo if Fraction(float(lo)) == x else np.nextafter(lo, dt.type(np.inf))
    if mode == "rz":
        return float(lo if x >= 0 else hi)
    if mode == "rm":
        return float(lo)
    if mode == "rp":
        return float(hi)
    dl, dh = x - Fraction(float(lo)), Fraction(float(hi)) - x
    if dl != dh:
        return float(lo if dl < dh else hi)
    bits = np.array(lo, dt).view({2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize])
    return float(lo if int(bits) % 2 == 0 else hi)


def interesting_doubles(rng, n: int) -> np.ndarray:
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-45, 45, n)
    f = rng.standard_normal(n // 4).astype(np.float32).astype(np.float64)
    ulp = np.spacing(f.astype(np.float32)).astype(np.float64)
    mids = f + ulp / 2          # exact halfway cases
    special = np.array([0.0, -0.0, 1e-46, -1e-46, 1.4e-45, 3.5e38, -3.5e38, 1e300, 1.0, -1.0])
    return np.concatenate([x[:n - mids.shape[0] - special.shape[0]], mids, special])


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_cvt_f64_to_f32_in_every_rounding_mode(cuda_ptx, mode):
    x = interesting_doubles(np.random.default_rng(1), N)
    got = alu(cuda_ptx, f"cvt_{mode}_f32_f64", x, out_dtype=np.float32)
    ref = np.array([rounded(Fraction(v), np.float32, mode) if v != 0 else v for v in x], np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_cvt_s64_to_f32(cuda_ptx, mode):
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.integers(-2**63, 2**63 - 1, N - 4, dtype=np.int64),
                        np.array([2**24 + 1, -(2**24 + 3), 2**63 - 1, -2**63], np.int64)])
    got = alu(cuda_ptx, f"cvt_{mode}_f32_s64", x, out_dtype=np.float32)
    ref = np.array([rounded(Fraction(int(v)), np.float32, mode) for v in x], np.float32)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("mode", ["rn", "rz", "rp"])
def test_cvt_u64_to_f64(cuda_ptx, mode):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 2**64 - 1, N, dtype=np.uint64)
    x[:3] = [2**64 - 1, 2**53 + 1, 2**63 + 1]
    got = alu(cuda_ptx, f"cvt_{mode}_f64_u64", x, out_dtype=np.float64)
    ref = np.array([rounded(Fraction(int(v)), np.float64, mode) for v in x])
    np.testing.assert_array_equal(got, ref)


def test_cvt_float_to_int_saturates_and_rounds(cuda_ptx):
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.uniform(-10, 10, N - 8), [2.5, -2.5, 3e9, -3e9, np.nan, np.inf, -np.inf, 0.5]]).astype(np.float32)
    for name, fn in (("rni", np.rint), ("rzi", np.trunc), ("rmi", np.floor), ("rpi", np.ceil)):
        got = alu(cuda_ptx, f"cvt_{name}_s32_f32", x, out_dtype=np.int32)
        with np.errstate(invalid="ignore"):
            ref = np.where(np.isnan(x), 0, np.clip(fn(x.astype(np.float64)), -2**31, 2**31 - 1)).astype(np.int64)
        np.testing.assert_array_equal(got, ref.astype(np.int32), err_msg=name)
    xd = np.array([-1.0, 4294967296.0, 3.9, np.nan, 1e20, 4294967295.5], np.float64)
    got = alu(cuda_ptx, "cvt_rzi_u32_f64", xd, out_dtype=np.uint32)
    np.testing.assert_array_equal(got, [0, 0xFFFFFFFF, 3, 0, 0xFFFFFFFF, 0xFFFFFFFF])


def test_cvt_float_to_float_integral_sat_ftz(cuda_ptx):
    x = np.array([2.5, 3.5, -2.5, 0.49, 1.5, -0.0, 1e-40, -1e-40, np.nan, 7.0, -3.0, 0.25], np.float32)
    np.testing.assert_array_equal(alu(cuda_ptx, "cvt_rni_f32_f32", x), np.rint(x))
    sat = alu(cuda_ptx, "cvt_sat_f32_f32", x)
    np.testing.assert_array_equal(sat, np.where(np.isnan(x), 0, np.clip(x, 0, 1)).astype(np.float32))
    ftz = alu(cuda_ptx, "cvt_ftz_f32_f32", x)
    ref = np.where(np.abs(x) < np.finfo(np.float32).tiny, np.copysign(0, x), x).astype(np.float32)
    np.testing.assert_array_equal(ftz.view(np.uint32)[~np.isnan(x)], ref.view(np.uint32)[~np.isnan(x)])


def test_cvt_integer_saturation_and_extension(cuda_ptx):
    x = np.array([-1000, -129, -128, 5, 127, 128, 70000, -1, 0x1FF, 0x180], np.int32)
    np.testing.assert_array_equal(alu(cuda_ptx, "cvt_s8_s32_sat", x), np.clip(x, -128, 127))
    np.testing.assert_array_equal(alu(cuda_ptx, "cvt_u16_s32_sat", x), np.clip(x, 0, 65535))
    np.testing.assert_array_equal(alu(cuda_ptx, "cvt_s32_s8", x), x.astype(np.int8).astype(np.int32))


def test_half_conversions(cuda_ptx):
    rng = np.random.default_rng(5)
    a = np.concatenate([rng.standard_normal(N - 6) * 10.0 ** rng.integers(-8, 6, N - 6),
                        [65520.0, 65519.0, 1e-8, 6e-8, -0.0, 2049.0]]).astype(np.float32)
    rn, rz, back = run(cuda_ptx("emu_alu"), "half_cvt", 2, 128,
                       (a, np.zeros(N, np.uint16), np.zeros(N, np.uint16), np.zeros(N, np.float32), np.int32(N)))[1:4]
    with np.errstate(over="ignore"):
        half = a.astype(np.float16)   # 65520 rounds to infinity
    np.testing.assert_array_equal(rn, half.view(np.uint16))
    ref_rz = np.array([rounded(Fraction(float(v)), np.float16, "rz") if v != 0 else v for v in a], np.float16)
    np.testing.assert_array_equal(rz, ref_rz.view(np.uint16))
    np.testing.assert_array_equal(back, half.astype(np.float32))


def rand_f32(rng, n):
    return (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(np.float32)


@pytest.mark.parametrize("kernel, fn, mode, dtype", [
    ("add_rz_f32", lambda a, b: a + b, "rz", np.float32), ("add_rm_f32", lambda a, b: a + b, "rm", np.float32),
    ("sub_rp_f32", lambda a, b: a - b, "rp", np.float32), ("mul_rz_f32", lambda a, b: a * b, "rz", np.float32),
    ("div_rn_f32", lambda a, b: a / b, "rn", np.float32), ("div_rz_f32", lambda a, b: a / b, "rz", np.float32),
    ("mul_rp_f64", lambda a, b: a * b, "rp", np.float64), ("div_rm_f64", lambda a, b: a / b, "rm", np.float64),
    ("add_rz_f64", lambda a, b: a + b, "rz", np.float64),
])
def test_binary_float_ops_are_correctly_rounded(cuda_ptx, kernel, fn, mode, dtype):
    rng = np.random.default_rng(6)
    a = rand_f32(rng, N).astype(dtype) * (np.pi if dtype == np.float64 else 1)
    b = rand_f32(rng, N).astype(dtype) * (np.e if dtype == np.float64 else 1)
    got = alu(cuda_ptx, kernel, a, b)
    ref = np.array([rounded(fn(Fraction(float(x)), Fraction(float(y))), dtype, mode) for x, y in zip(a, b)], dtype)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("kernel, mode, dtype", [("fma_rz_f32", "rz", np.float32), ("fma_rp_f32", "rp", np.float32),
                                                 ("fma_rn_f64", "rn", np.float64)])
def test_fma_is_one_rounding(cuda_ptx, kernel, mode, dtype):
    rng = np.random.default_rng(7)
    a, b, c = (rand_f32(rng, N).astype(dtype) * s for s in (1.1, 0.7, 1.3))
    got = alu(cuda_ptx, kernel, a, b, c)
    ref = np.array([rounded(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)), dtype, mode)
                    for x, y, z in zip(a, b, c)], dtype)
    np.testing.assert_array_equal(got, ref)


def test_sqrt_rcp_rounding(cuda_ptx):
    rng = np.random.default_rng(8)
    x = np.abs(rand_f32(rng, N))
    np.testing.assert_array_equal(alu(cuda_ptx, "sqrt_rn_f32", x), np.sqrt(x))
    got = alu(cuda_ptx, "sqrt_rz_f32", x)
    for v, g in zip(x, got):   # rz: the largest float whose square does not exceed v
        assert Fraction(float(g)) ** 2 <= Fraction(float(v)) < Fraction(float(np.nextafter(g, np.float32(np.inf)))) ** 2
    np.testing.assert_array_equal(alu(cuda_ptx, "rcp_rn_f32", x), np.float32(1) / x)
    xd = x.astype(np.float64) * np.pi
    ref = np.array([rounded(1 / Fraction(float(v)), np.float64, "rm") for v in xd])
    np.testing.assert_array_equal(alu(cuda_ptx, "rcp_rm_f64", xd), ref)


def test_min_max_sat_with_nan(cuda_ptx):
    a = np.array([1, np.nan, np.nan, -0.0, 0.0, 3, 0.7, -5], np.float32)
    b = np.array([2, 5, np.nan, 0.0, -0.0, -np.inf, 0.6, 0.2], np.float32)
    np.testing.assert_array_equal(alu(cuda_ptx, "min_f32", a, b)[[0, 1, 5, 6, 7]], np.fmin(a, b)[[0, 1, 5, 6, 7]])
    mx = alu(cuda_ptx, "max_f32", a, b)
    np.testing.assert_array_equal(mx[[0, 1, 5, 6, 7]], np.fmax(a, b)[[0, 1, 5, 6, 7]])
    assert np.isnan(mx[2])
    assert np.signbit(alu(cuda_ptx, "min_f32", a, b)[3]) and not np.signbit(mx[3])
    np.testing.assert_array_equal(alu(cuda_ptx, "add_sat_f32", a, b)[[0, 5, 6, 7]], [1, 0, 1, 0])


def test_setp_ordered_unordered_and_testp(cuda_ptx):
    a = np.array([1, np.nan, 2, 3, np.inf, 1e-40, 5, -1], np.float32)
    b = np.array([2, 1, np.nan, 3, 1, 1e-40, 4, -1], np.float32)
    got = alu(cuda_ptx, "setp_all", a, b, out_dtype=np.uint32)
    for i, (x, y) in enumerate(zip(a.astype(float), b.astype(float))):
        nan = math.isnan(x) or math.isnan(y)
        bits = [(not nan) and x < y, nan or x < y, (not nan) and x != y, nan or x != y, nan, nan or x >= y,
                math.isinf(x), x != 0 and abs(x) < 1.1754943508222875e-38]
        assert got[i] == sum(1 << k for k, v in enumerate(bits) if v), i


def test_integer_arithmetic(cuda_ptx):
    rng = np.random.default_rng(9)
    a64 = rng.integers(-2**63, 2**63 - 1, N, dtype=np.int64)
    b64 = rng.integers(-2**63, 2**63 - 1, N, dtype=np.int64)
    np.testing.assert_array_equal(alu(cuda_ptx, "mul_hi_s64", a64, b64), [(int(x) * int(y)) >> 64 for x, y in zip(a64, b64)])
    ua, ub = a64.view(np.uint64), b64.view(np.uint64)
    np.testing.assert_array_equal(alu(cuda_ptx, "mul_hi_u64", ua, ub), [(int(x) * int(y)) >> 64 for x, y in zip(ua, ub)])
    ub2 = ub >> rng.integers(0, 64, N).astype(np.uint64)
    ub2[0] = 0
    got = alu(cuda_ptx, "div_u64", ua, ub2)
    nz = ub2 != 0
    np.testing.assert_array_equal(got[nz], ua[nz] // ub2[nz])
    assert (got[~nz] == 2**64 - 1).all()   # division by zero: all ones
    a = rng.integers(-1000, 1000, N).astype(np.int32)
    b = rng.integers(-20, 20, N).astype(np.int32)
    a[:2], b[:2] = [-2**31, 7], [-1, 0]
    q = alu(cuda_ptx, "div_s32", a, b)
    r = alu(cuda_ptx, "rem_s32", a, b)
    for i in range(2, N):
        if b[i]:
            assert q[i] == int(a[i] / b[i]) and r[i] == a[i] - int(a[i] / b[i]) * b[i]
    assert q[0] == -2**31 and r[0] == 0 and q[1] == -1 and r[1] == 7
    big = np.array([2**31 - 1, -2**31, 5, -7], np.int32)
    one = np.array([1, -1, -9, 2**31 - 1], np.int32)
    np.testing.assert_array_equal(alu(cuda_ptx, "add_sat_s32", big, one), np.clip(big.astype(np.int64) + one, -2**31, 2**31 - 1))
    np.testing.assert_array_equal(alu(cuda_ptx, "sub_sat_s32", big, one), np.clip(big.astype(np.int64) - one, -2**31, 2**31 - 1))
    ua32, ub32 = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32), rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    np.testing.assert_array_equal(alu(cuda_ptx, "min_u32", ua32, ub32), np.minimum(ua32, ub32))
    np.testing.assert_array_equal(alu(cuda_ptx, "max_s64", a64, b64), np.maximum(a64, b64))
    sh = rng.integers(0, 40, N).astype(np.int32)
    np.testing.assert_array_equal(alu(cuda_ptx, "shr_s32", a, sh), a >> np.minimum(sh, 31))
    np.testing.assert_array_equal(alu(cuda_ptx, "shr_u32", ua32, sh.view(np.uint32)),
                                  np.where(sh < 32, ua32.astype(np.uint64) >> sh.astype(np.uint64), 0))
    s64 = rng.integers(0, 70, N).astype(np.uint64)
    np.testing.assert_array_equal(alu(cuda_ptx, "shl_b64", ua, s64),
                                  [(int(x) << int(s)) & (2**64 - 1) if s < 64 else 0 for x, s in zip(ua, s64)])
    x24 = rng.integers(-2**23, 2**23, N).astype(np.int32)
    y24 = rng.integers(-2**23, 2**23, N).astype(np.int32)
    np.testing.assert_array_equal(alu(cuda_ptx, "mul24_hi_s32", x24, y24),
                                  [((int(x) * int(y)) >> 16) & 0xFFFFFFFF for x, y in zip(x24, y24)] and
                                  np.array([((int(x) * int(y)) >> 16) & 0xFFFFFFFF for x, y in zip(x24, y24)], np.uint32).view(np.int32))
    c32 = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    np.testing.assert_array_equal(alu(cuda_ptx, "mad_hi_u32", ua32, ub32, c32),
                                  [((int(x) * int(y) >> 32) + int(z)) & 0xFFFFFFFF for x, y, z in zip(ua32, ub32, c32)])
    np.testing.assert_array_equal(alu(cuda_ptx, "sad_s32", a, b, big[np.arange(N) % 4] // 4),
                                  (np.abs(a.astype(np.int64) - b) + big[np.arange(N) % 4] // 4).astype(np.int32))


def ptx_bfe(a: int, pos: int, ln: int, signed: bool, bits: int = 32) -> int:
    """bfe from the PTX ISA pseudo-code."""
    msb = bits - 1
    pos, ln = pos & 0xFF, ln & 0xFF
    sbit = (a >> min(pos + ln - 1, msb)) & 1 if signed and ln != 0 else 0
    d = 0
    for i in range(bits):
        bit = (a >> (pos + i)) & 1 if (i < ln and pos + i <= msb) else sbit
        d |= bit << i
    return d


def test_bit_operations(cuda_ptx):
    rng = np.random.default_rng(10)
    a = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 40, N).astype(np.uint32)
    c = rng.integers(0, 40, N).astype(np.uint32)
    np.testing.assert_array_equal(alu(cuda_ptx, "bfe_u32", a, b, c), [ptx_bfe(int(x), int(p), int(l), False) for x, p, l in zip(a, b, c)])
    np.testing.assert_array_equal(alu(cuda_ptx, "bfe_s32", a.view(np.int32), b.view(np.int32), c.view(np.int32)).view(np.uint32),
                                  [ptx_bfe(int(x), int(p), int(l), True) for x, p, l in zip(a, b, c)])
    base = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    got = run(cuda_ptx("emu_alu"), "bfi_b32", 2, 128, (a, base, b, c, np.zeros(N, np.uint32), np.int32(N)))[4]
    ref = []
    for f, bb, p, l in zip(a, base, b, c):
        r = int(bb)
        for i in range(int(l)):
            if p + i > 31:
                break
            r = (r & ~(1 << (p + i))) | (((int(f) >> i) & 1) << (p + i))
        ref.append(r)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(alu(cuda_ptx, "brev_b32", a), [int(f"{int(x):032b}"[::-1], 2) for x in a])
    u64 = rng.integers(0, 2**64 - 1, N, dtype=np.uint64) >> rng.integers(0, 64, N).astype(np.uint64)
    np.testing.assert_array_equal(alu(cuda_ptx, "clz_b64", u64, out_dtype=np.uint32), [64 - int(x).bit_length() for x in u64])
    np.testing.assert_array_equal(alu(cuda_ptx, "popc_b64", u64, out_dtype=np.uint32), [bin(int(x)).count("1") for x in u64])
    s = a.view(np.int32)
    ref = [(int(~x if x < 0 else x) & 0xFFFFFFFF).bit_length() - 1 if (x != 0 and x != -1) else 0xFFFFFFFF for x in s]
    np.testing.assert_array_equal(alu(cuda_ptx, "bfind_s32", s, out_dtype=np.uint32), ref)
    a[0] = 0
    ref = [31 - (int(x).bit_length() - 1) if x else 0xFFFFFFFF for x in a]
    np.testing.assert_array_equal(alu(cuda_ptx, "bfind_shiftamt_u32", a), ref)
    sel = rng.integers(0, 2**16, N).astype(np.uint32)
    ref = []
    for x, y, z in zip(a, base, sel):
        t = int(x) | (int(y) << 32)
        r = 0
        for i in range(4):
            nib = (int(z) >> (4 * i)) & 0xF
            byte = (t >> (8 * (nib & 7))) & 0xFF
            if nib & 8:
                byte = 0xFF if byte & 0x80 else 0
            r |= byte << (8 * i)
        ref.append(r)
    np.testing.assert_array_equal(alu(cuda_ptx, "prmt_b32", a, base, sel), ref)
    n = rng.integers(0, 64, N).astype(np.uint32)
    np.testing.assert_array_equal(alu(cuda_ptx, "shf_l_wrap", a, base, n),
                                  [(((int(y) << 32 | int(x)) << (int(k) & 31)) >> 32) & 0xFFFFFFFF for x, y, k in zip(a, base, n)])
    np.testing.assert_array_equal(alu(cuda_ptx, "shf_r_clamp", a, base, n),
                                  [((int(y) << 32 | int(x)) >> min(int(k), 32)) & 0xFFFFFFFF for x, y, k in zip(a, base, n)])
    np.testing.assert_array_equal(alu(cuda_ptx, "lop3_e8", a, base, sel), (a & base) | (a & sel) | (base & sel))   # majority


def test_dot_products(cuda_ptx):
    rng = np.random.default_rng(11)
    a, b, c = (rng.integers(-2**31, 2**31, N, dtype=np.int64).astype(np.int32) for _ in range(3))
    ab, bb = a.view(np.uint8).reshape(N, 4), b.view(np.uint8).reshape(N, 4)
    ref = c.astype(np.int64) + (ab.view(np.int8).astype(np.int64) * bb.astype(np.int64)).sum(axis=1)
    np.testing.assert_array_equal(alu(cuda_ptx, "dp4a_s32_u32", a, b, c), ref.astype(np.uint64).astype(np.uint32).view(np.int32))
    ah = a.view(np.uint16).reshape(N, 2).astype(np.int64)
    ref = c.astype(np.int64) + (ah * bb.view(np.int8)[:, 2:].astype(np.int64)).sum(axis=1)
    np.testing.assert_array_equal(alu(cuda_ptx, "dp2a_hi_u32_s32", a, b, c), ref.astype(np.uint64).astype(np.uint32).view(np.int32))


def bf16_bits(x: Fraction, mode: str) -> int:
    """The bf16 bit pattern of the real `x` (zero or in the normal range) rounded to bf16's 8
    significant bits: to nearest, ties to even (``rn``), or toward zero (``rz``)."""
    if x == 0:
        return 0
    m = abs(x)
    e = m.numerator.bit_length() - m.denominator.bit_length()
    if Fraction(2) ** e > m:
        e -= 1
    ulp = Fraction(2) ** (e - 7)        # 2^e <= m < 2^(e+1): 8 bits from 2^e down to ulp
    q, r = divmod(m, ulp)
    if mode == "rn" and (2 * r > ulp or (2 * r == ulp and q % 2 == 1)):
        q += 1
    value = float(q * ulp) * (1 if x > 0 else -1)
    return int(np.array(value, np.float32).view(np.uint32)) >> 16


def bf16_value(bits: int) -> Fraction:
    return Fraction(float(np.array(bits << 16, np.uint32).view(np.float32)))


@pytest.mark.parametrize("arch, opcodes", [("sm_80", {"fma"}), ("sm_90", {"add", "mul", "fma"})])
def test_bf16_arithmetic_and_conversions(cuda_ptx, arch, opcodes):
    """__hadd, __hmul, __hfma and the float -> bf16 conversions (cvt.rn, cvt.rz) against exact
    rationals rounded to bf16; sm_80 does add and mul with fma.rn.bf16, sm_90 has add/mul.bf16."""
    compiled = cuda_ptx("emu_bf16", arch)
    used = {i.opcode for f in compiled[0].functions.values() for i in f.instructions if "bf16" in i.mods}
    assert opcodes <= used, used
    rng = np.random.default_rng(8)
    a, b = rand_f32(rng, N), rand_f32(rng, N)
    kept = rng.integers(0x3C00, 0x4400, 64).astype(np.uint32)
    a[:64] = ((kept << 16) | 0x8000).view(np.float32)   # exact ties: half of them round up (odd kept bits)
    raw = run(compiled, "bf16_ops", 2, 128, (a, b, np.zeros(6 * N, np.uint16), np.int32(N)))[2].reshape(N, 6)
    expected = np.zeros((N, 6), np.uint16)
    for i in range(N):
        x, y = bf16_bits(Fraction(float(a[i])), "rn"), bf16_bits(Fraction(float(b[i])), "rn")
        xv, yv = bf16_value(x), bf16_value(y)
        z = bf16_bits(xv + yv, "rn")
        expected[i] = (x, y, z, bf16_bits(xv * yv, "rn"), bf16_bits(xv * yv + bf16_value(z), "rn"),
                       bf16_bits(Fraction(float(a[i])), "rz"))
    for k, name in enumerate(("cvt.rn x", "cvt.rn y", "add", "mul", "fma", "cvt.rz")):
        np.testing.assert_array_equal(raw[:, k], expected[:, k], err_msg=name)
    back = run(compiled, "bf16_to_float", 2, 128, (raw[:, 4].copy(), np.zeros(N, np.float32), np.int32(N)))[1]
    np.testing.assert_array_equal(back.view(np.uint32), raw[:, 4].astype(np.uint32) << 16)
