"""The hot loop of .tptrace loading: undoing the lane-wise address differencing in one pass.

The differenced values arrive as byte planes (``[itemsize, n]`` uint8, least significant first,
as the file stores them), so neither the un-shuffled integers nor any [R, 32] temporary is ever
materialised: loading peaks at the decoded addresses plus the compressed file's raw bytes.
"""

from __future__ import annotations

import numpy as np

from tuiprof.jit import INLINE, KERNEL, njit


@njit(**INLINE)
def _value(planes, idx):  # pragma: no cover - jitted
    """Signed little-endian integer number `idx` of a byte-plane array."""
    k = planes.shape[0]
    v = np.int64(0)
    for j in range(k):
        v |= np.int64(planes[j, idx]) << (8 * j)
    if k < 8:
        sign = np.int64(1) << (8 * k - 1)
        if v & sign:
            v -= sign << 1
    return v


@njit(**KERNEL)
def decode_lanes(warp_offsets, op, mask, n_ops, base_planes, lane_planes, unit, out):  # pragma: no cover - jitted
    """Fill `out` (int64 view of the uint64 addresses, zeroed) from the differenced encoding;
    0 when done, -1 (with nothing read or written outside an array) when a shape, offset or op
    id from the file does not fit the arrays.

    Per warp and per op, in program order: the access base accumulates the base deltas; a lane's
    first address in the group is base + its delta, later ones add their delta to the lane's
    previous address. Values are in `unit` bytes; int64 wraps like uint64. Per-op state is reset
    only for the ops a warp touches (`stamp`), so the work follows the accesses, not the op table.
    """
    n = op.shape[0]
    if (mask.shape[0] != n or out.shape[0] != n or out.shape[1] != 32 or base_planes.shape[1] != n
            or lane_planes.shape[1] != n * 32 or not 1 <= base_planes.shape[0] <= 8
            or not 1 <= lane_planes.shape[0] <= 8 or warp_offsets.shape[0] < 1 or n_ops < 0):
        return -1
    prev = np.zeros((n_ops, 32), np.int64)
    seen = np.zeros((n_ops, 32), np.bool_)
    base = np.zeros(n_ops, np.int64)
    stamp = np.full(n_ops, -1, np.int64)
    for w in range(warp_offsets.shape[0] - 1):
        lo, hi = warp_offsets[w], warp_offsets[w + 1]
        if lo < 0 or hi < lo or hi > n:
            return -1
        for i in range(lo, hi):
            o = op[i]
            if o < 0 or o >= n_ops:
                return -1
            if stamp[o] != w:
                stamp[o] = w
                base[o] = 0
                seen[o, :] = False
            base[o] += _value(base_planes, i)
            m = mask[i]
            for lane in range(32):
                if (m >> lane) & 1:
                    d = _value(lane_planes, i * 32 + lane)
                    v = prev[o, lane] + d if seen[o, lane] else base[o] + d
                    seen[o, lane] = True
                    prev[o, lane] = v
                    out[i, lane] = v * unit
    return 0
