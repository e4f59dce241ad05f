"""The replay kernel's helpers that it calls with its family's constants (`locate`'s DRAM shape,
`dirty_transactions`' levels, `rng_streams`' count) compile once per argument types, whatever the
constants: as literal specialisations each family compiled them again (`tuiprof.jit.plain_kernel`)."""

from __future__ import annotations

import tuiprof.jit  # noqa: F401  (sets Numba's cache folder: before numba is imported)

# isort: split
import numpy as np
from numba import njit

from tuiprof.sim.addressing import xor_table
from tuiprof.sim.replay import dirty_transactions, locate
from tuiprof.sim.rng import rng_new, rng_streams


def one_signature(dispatcher) -> bool:  # noqa: ANN001 (a Numba dispatcher)
    return len(dispatcher.signatures) == 1 and "Literal" not in str(dispatcher.signatures[0])


def test_locate_compiles_once_for_two_dram_shapes() -> None:
    @njit  # the callers are not cached: each test process compiles them afresh
    def fermi(x, tab):
        return locate(x, 6, 8, 8, 11, False, tab)

    @njit
    def volta(x, tab):
        return locate(x, 32, 16, 8, 11, True, tab)

    tab6, tab32 = xor_table(6, 0), xor_table(32, 37)
    x = np.uint64(123457)
    assert fermi(x, tab6) == locate.py_func(x, 6, 8, 8, 11, False, tab6)
    assert volta(x, tab32) == locate.py_func(x, 32, 16, 8, 11, True, tab32)
    assert one_signature(locate), locate.signatures


def test_rng_streams_compiles_once_for_a_constant_and_a_variable_count() -> None:
    @njit
    def none(st):
        return rng_streams(st, 0)

    @njit
    def some(st, n):
        return rng_streams(st, n + 1)

    assert none(rng_new(1)).shape == (1,) and some(rng_new(1), 2).shape == (3,)
    with np.errstate(over="ignore"):  # the plain Python oracle wraps around as the kernel does
        assert np.array_equal(some(rng_new(7), 2), rng_streams.py_func(rng_new(7), 3))
    assert one_signature(rng_streams), rng_streams.signatures


def test_dirty_transactions_compiles_once_for_two_l2_shapes() -> None:
    """Two dirty sectors, two write-backs queued, whether L1 and L2 lines are alike (4 chunks
    each) or the L2's are 1 chunk (``sub`` 4: the blocks of L1 line l are L2 ids 4l .. 4l+3)."""
    dty2 = np.array([0b0101, 0], dtype=np.uint8)
    tag2 = np.array([1, -1], dtype=np.int32)
    lines = np.array([10, 20], dtype=np.int64)
    qtx, qop = np.zeros(16, dtype=np.int64), np.zeros(16, dtype=np.int64)
    split, dtyS, tagS = np.zeros(1, np.uint8), np.zeros(2, np.uint8), np.full(2, -1, np.int32)

    @njit
    def alike(dty2, tag2, lines, split, dtyS, tagS, qtx, qop):
        return dirty_transactions(dty2, tag2, lines, lines, False, 1, 4, 4, False, split, dtyS, tagS, 2, 15,
                                  qtx, qop, 1, 0)

    @njit
    def blocks(dty2, tag2, lines, split, dtyS, tagS, qtx, qop):
        return dirty_transactions(dty2, tag2, lines, lines, False, 4, 4, 1, False, split, dtyS, tagS, 2, 1,
                                  qtx, qop, 1, 0)

    assert alike(dty2, tag2, lines, split, dtyS, tagS, qtx, qop) == 2
    assert list(qtx[:2]) == [20 * 4 + 0, 20 * 4 + 2]  # line 20's chunks 0 and 2 (address / 32)
    # L2 ids 1 and 6: block 1 of line 10 (chunk 41) and block 2 of line 20 (chunk 82), dirty
    assert blocks(np.array([1, 1], np.uint8), np.array([1, 6], np.int32), lines, split, dtyS, tagS, qtx, qop) == 2
    assert qtx[0] == 20 * 4 + 2  # each line's write-backs are queued from the scratch queue's start: the last
    assert one_signature(dirty_transactions), dirty_transactions.signatures
