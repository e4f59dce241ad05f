"""`tuiprof.jit.borrowed`: a view without a reference reads and writes its owner's memory, in
place, through inlined helpers with branches (the emulator's handlers), with the same shape and
strides; the oracle is the same arithmetic in NumPy."""

from __future__ import annotations

import numpy as np
from numba import njit

from tuiprof.jit import borrowed, keep


@njit(inline="always")
def _scale_row(a, r, k, neg):
    """A helper with branches, inlined at the IR level (its array argument gets a new variable)."""
    for j in range(a.shape[1]):
        if neg:
            a[r, j] = -a[r, j] * k
        else:
            a[r, j] = a[r, j] * k


@njit
def _through_views(x, k):
    own = np.zeros((4, 5), np.int64)
    v = borrowed(own)
    xv = borrowed(x)
    for r in range(4):
        for j in range(5):
            v[r, j] = r * 10 + j + xv[r, j]
        _scale_row(v, r, k, r % 2 == 1)
        _scale_row(xv, r, k + 1, False)
    keep(own)
    return own


def test_a_borrowed_view_writes_its_owner_in_place() -> None:
    x = np.arange(20, dtype=np.int64).reshape(4, 5)
    want_x = x * 4
    want = (np.arange(4)[:, None] * 10 + np.arange(5)[None, :] + x) * 3
    want[1::2] *= -1
    got = _through_views(x, 3)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(x, want_x)   # the argument's view wrote the caller's array


def test_a_borrowed_view_keeps_shape_and_strides() -> None:
    @njit
    def shape_strides(a):
        v = borrowed(a)
        return v.shape[0], v.shape[1], v.strides[0], v.strides[1], v[2, 1]

    a = np.arange(24, dtype=np.int32).reshape(6, 4)[::2, 1:]   # a non-contiguous view
    assert shape_strides(a) == (a.shape[0], a.shape[1], a.strides[0], a.strides[1], a[2, 1])
