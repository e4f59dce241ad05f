"""A tiny counter-based random generator (SplitMix64) usable inside Numba kernels.

Each trial owns its generator state (a one-element uint64 array) seeded from the trial seed, so
a trial's draws never depend on the thread that runs it or on other trials.
"""

from __future__ import annotations

import numpy as np

from tuiprof.jit import INLINE, KERNEL, njit, plain_kernel

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


@njit(**KERNEL)
def rng_new(seed: int) -> np.ndarray:
    """A fresh generator state for `seed` (any int64; a uint64 bit pattern is fine)."""
    st = np.empty(1, dtype=np.uint64)
    st[0] = np.uint64(seed)
    rng_next(st)
    return st


@njit(**INLINE)
def rng_next_at(sts: np.ndarray, k: int) -> np.uint64:
    """The next 64 random bits of state `k` of `sts` (SplitMix64, Steele et al. 2014)."""
    z = sts[k] + _GOLDEN
    sts[k] = z
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@njit(**INLINE)
def rng_next(st: np.ndarray) -> np.uint64:
    """The next 64 random bits of a generator state (`rng_next_at` of its one element)."""
    return rng_next_at(st, 0)


@njit(**INLINE)
def rng_below_at(sts: np.ndarray, k: int, n: int) -> int:
    """A uniform integer in [0, n) for 1 <= n < 2**32 from state `k` of `sts` (multiply-shift;
    bias below n / 2**32)."""
    return np.int64(((rng_next_at(sts, k) >> np.uint64(32)) * np.uint64(n)) >> np.uint64(32))


@njit(**INLINE)
def rng_below(st: np.ndarray, n: int) -> int:
    """`rng_below_at` of a generator state's one element."""
    return rng_below_at(st, 0, n)


@njit(**INLINE)
def rng_unit(st: np.ndarray) -> float:
    """A uniform float in [0, 1) (the top 53 bits of the next draw)."""
    return np.float64(rng_next(st) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@plain_kernel
def rng_streams(st: np.ndarray, n: int) -> np.ndarray:
    """`n` generator states forked from `st`'s current state without advancing it: independent
    streams (state k starts at a hashed point of the sequence) for draws that must not shift
    `st`'s own, read with `rng_below_at`."""
    out = np.empty(max(n, 1), dtype=np.uint64)
    tmp = np.empty(1, dtype=np.uint64)
    for k in range(n):
        tmp[0] = st[0] ^ ((np.uint64(k) + np.uint64(1)) * _M2)
        out[k] = rng_next(tmp)
    return out


def trial_seed(seed: int, index: int) -> int:
    """The seed of trial `index` of a run seeded with `seed`: independent streams per trial."""
    ss = np.random.SeedSequence([int(seed) & 0xFFFFFFFFFFFFFFFF, int(index)])
    return int(ss.generate_state(1, dtype=np.uint64)[0].astype(np.int64))
