"""Which L2 set (slice and set) and which DRAM channel an address maps to: ``linear`` or ``xor``
(`tuiprof.arch.spec.ADDRESS_HASHES`).

A unit ``x`` (an L2 line number, or an address over the channel interleave) maps to one of ``n``
targets (the L2's sets across all slices, or the DRAM channels). Write ``x = q n + r``:

- ``linear`` (Fermi; Baghsorkhi12's model): target ``r = x mod n``.
- ``xor`` (Volta and later): target ``r XOR h(q)``, where ``h(q) = q(z) z^k mod P(z)`` over GF(2),
  ``2^k`` the largest power of two dividing ``n`` and ``P`` an irreducible polynomial of degree
  ``k``. ``h(q) < 2^k`` changes only the low ``k`` bits of ``r``, so the target stays below ``n``.
  Within an aligned block of ``n`` units ``q`` is constant and XOR by a constant is a permutation:
  a stream still fills every target once per block, as with ``linear``. For ``n = 2^k`` the
  target is ``x(z) mod P(z)``, the IPOLY hash of Rau ("Pseudo-randomly interleaved memory",
  ISCA 1991) that GPGPU-Sim and Accel-Sim use for Volta and later L2 slices
  (``-gpgpu_memory_partition_indexing 2``): any power-of-two stride ``2^s`` visits every target,
  because multiplication by ``z^s`` is invertible modulo ``P``. For ``n = m 2^k`` with ``m`` odd
  (the A100's 40 channels, the H100's 80) the odd factor is interleaved linearly, which already
  spreads a power-of-two stride over its ``m`` residues, and the power-of-two factor is hashed.

This is a model: NVIDIA documents no hash. What is known is that every index bit is an XOR of
many address bits: Jain et al. (Fractional GPUs, RTAS 2019, doc/REVERSE.md of their code)
measured, on a Tesla V100, every bit of the memory-module index (32 modules) and of the L2 set
index as the XOR of 8 to 13 physical-address bits between bit 7 and bit 33. Linear XOR functions of that
kind spread power-of-two strides; IPOLY is the member of the family with the proven property.

``h`` is linear over GF(2), so it is computed with one table lookup per byte of ``q``
(`xor_table`, `xor_fold`), like a table-driven CRC.
"""

from __future__ import annotations

from functools import cache
from itertools import combinations

import numpy as np

from tuiprof.jit import INLINE, keep, mulhi, njit, plain_kernel

HASH_LINEAR, HASH_XOR = 0, 1
HASH_CODES = {"linear": HASH_LINEAR, "xor": HASH_XOR}


def two_adic(n: int) -> int:
    """k such that 2^k is the largest power of two dividing `n` (> 0)."""
    return (n & -n).bit_length() - 1


def _mulmod(a: int, b: int, p: int, k: int) -> int:
    """a(z) b(z) mod p(z) over GF(2), for a, b of degree < k = deg p."""
    out = 0
    while b:
        if b & 1:
            out ^= a
        b >>= 1
        a <<= 1
        if a >> k & 1:
            a ^= p
    return out


def _gcd(a: int, b: int) -> int:
    while b:
        while a and a.bit_length() >= b.bit_length():
            a ^= b << (a.bit_length() - b.bit_length())
        a, b = b, a
    return a


def is_irreducible(p: int) -> bool:
    """Rabin's test: p (degree k >= 1) is irreducible over GF(2) iff z^(2^k) = z mod p and
    gcd(z^(2^(k/d)) - z, p) = 1 for every prime d dividing k."""
    k = p.bit_length() - 1
    if k < 1:
        return False
    if k == 1:
        return True
    z = 0b10

    def frobenius(times: int) -> int:  # z^(2^times) mod p
        x = z
        for _ in range(times):
            x = _mulmod(x, x, p, k)
        return x

    if frobenius(k) != z:
        return False
    primes = [d for d in range(2, k + 1) if k % d == 0 and all(d % e for e in range(2, d))]
    return all(_gcd(p, frobenius(k // d) ^ z) == 1 for d in primes)


@cache
def polynomial(k: int) -> int:
    """An irreducible polynomial of degree `k` over GF(2) with the fewest terms (bit i: the
    coefficient of z^i): the first of z^k + z^a + 1 for a = 1, 2, ..., then of the pentanomials
    in the same order; 0 for k = 0 (nothing to hash)."""
    if k == 0:
        return 0
    if k == 1:
        return 0b11
    # An irreducible polynomial of degree >= 2 has a constant term and an odd number of terms
    # (else z + 1 divides it); every degree up to 10000 has a trinomial or a pentanomial one.
    for terms in range(3, k + 2, 2):
        for middle in combinations(range(1, k), terms - 2):
            p = (1 << k) | 1 | sum(1 << i for i in middle)
            if is_irreducible(p):
                return p
    raise ValueError(f"no irreducible polynomial of degree {k}")  # unreachable: k + 1 terms cover every k


def hash_polynomial(n: int) -> int:
    """The polynomial the ``xor`` hash over `n` targets reduces by (0 when `n` is odd)."""
    return polynomial(two_adic(n))


@plain_kernel
def xor_table(n, poly):
    """``tab[j, b] = b(z) z^(k + 8j) mod poly(z)`` for the ``xor`` hash over `n` targets (k: the
    two-adic order of `n`, the degree of `poly`): ``h(q)`` is the XOR of ``tab[j, byte j of q]``.
    All zeros when `n` is odd."""
    tab = np.zeros((8, 256), dtype=np.uint64)
    if n < 1:
        return tab
    k = 0
    while (n >> k) & 1 == 0:
        k += 1
    if k == 0:
        return tab
    top = np.uint64(1) << np.uint64(k)
    p = np.uint64(poly)
    for j in range(8):
        for bit in range(8):
            # z^(k + 8j + bit) mod poly: k + 8j + bit multiplications by z from 1.
            x = np.uint64(1)
            for _ in range(k + 8 * j + bit):
                x = x << np.uint64(1)
                if x & top:
                    x ^= p
            for b in range(256):
                if (b >> bit) & 1:
                    tab[j, b] ^= x
    return tab


@njit(**INLINE)
def xor_fold(q, tab):
    """``h(q)`` of the ``xor`` hash (`q` a uint64 quotient): one table row per byte of `q`."""
    h = np.uint64(0)
    j = 0
    while q != np.uint64(0):
        h ^= tab[j, np.int64(q & np.uint64(255))]
        q = q >> np.uint64(8)
        j += 1
    keep(tab)
    return h


def divider(d: int) -> tuple[int, int, int]:
    """``(magic, sh1, sh2)`` that divide any uint64 by `d` (1 <= d < 2**63) in `udivmod`: a
    multiplication, two shifts and an add instead of a 64-bit DIV (20-90 cycles), so that set
    counts, channels and banks can be run-time values of a kernel at about the cost of the
    constants LLVM divides by (Granlund and Montgomery 1994, fig. 4.1). ``magic`` is a uint64 bit
    pattern as an int64, for the kernels' int64 parameter vectors."""
    if not 1 <= d < 1 << 63:
        raise ValueError(f"divisor {d} out of range")
    ell = (d - 1).bit_length()  # ceil(log2 d)
    magic = ((1 << 64) * ((1 << ell) - d)) // d + 1
    return (magic - (1 << 64) if magic >= 1 << 63 else magic), min(ell, 1), max(ell - 1, 0)


@njit(**INLINE)
def udivmod(x, d, magic, sh1, sh2, pow2):
    """``(x // d, x % d)`` of uint64 `x` with `divider` (d)'s values (uint64 quotient and
    remainder). With `pow2` (a compile-time constant: `d` a power of two), a shift and a mask."""
    ux = np.uint64(x)
    if pow2:
        return ux >> np.uint64(sh1 + sh2), ux & np.uint64(d - 1)
    t = mulhi(np.uint64(magic), ux)
    q = (t + ((ux - t) >> np.uint64(sh1))) >> np.uint64(sh2)
    return q, ux - q * np.uint64(d)


@njit(**INLINE)
def target(x, n, xor, tab):
    """``(q, target)`` of unit `x` (uint64) over `n` targets: ``q = x // n`` and the linear or
    ``xor`` (`xor` true) target. `tab` is `xor_table` of `n`."""
    un = np.uint64(n)
    q = x // un
    r = x - q * un
    if xor:
        r ^= xor_fold(q, tab)
    keep(tab)
    return q, np.int64(r)


__all__ = ["HASH_CODES", "HASH_LINEAR", "HASH_XOR", "divider", "hash_polynomial", "is_irreducible", "polynomial", "target",
           "two_adic", "udivmod", "xor_fold", "xor_table"]



HOME_MUL = np.uint64(0x9E3779B97F4A7C15)
"""Fibonacci hashing's multiplier (2**64 over the golden ratio): `home_half`'s hash."""


@njit(**INLINE)
def home_half(line):
    """The L2 half (0 or 1) that L2 line number `line` is homed in, with two L2 partitions
    (`tuiprof.arch.spec.L2Config.halves`): the top bit of the number times `HOME_MUL` (Fibonacci
    hashing, Knuth, TAOCP vol. 3, 6.4). NVIDIA documents no address-to-partition map; measured on
    an H100 (ncu, benchmarks/gpu_accuracy.sh, 2026-11-27), kernels that miss everywhere send
    exactly half their L2 misses to the far partition (``lts__t_sectors_srcunit_ltcfabric_op_read``
    over the near misses: 0.500 on vecadd, cr, both transposes, a streaming read and an L1 sweep),
    whatever their stride. This hash splits runs of lines at every stride evenly (within 0.3% over
    4096 lines at strides 1 to 4096); the parity of the line's bits would not (38% at stride 3)."""
    return np.int64((np.uint64(line) * HOME_MUL) >> np.uint64(63))
