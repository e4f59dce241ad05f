"""The hot loop of .tptrace loading: undoing the lane-wise address differencing, chunk by chunk.

The loader streams the file's byte planes a chunk of accesses at a time (`tuiprof.trace.io`) and
decodes each chunk here with the state the chunk before left; the same kernel decodes, on
demand, the shared-memory accesses a loaded trace keeps packed (`tuiprof.trace.packed`).
"""

from __future__ import annotations

import numpy as np

from tuiprof.jit import KERNEL, njit


@njit(**KERNEL)
def undelta(row_warp, op, base_vals, lane_vals, mask, unit, prev, seen, base, stamp, out):  # pragma: no cover - jitted
    """Lane addresses of consecutive warp accesses (``out`` uint64 [C, 32] as int64, inactive
    lanes 0) from their differenced values (``base_vals`` int64 [C], ``lane_vals`` int64 [C, 32],
    in `unit` bytes); ``row_warp`` [C] each access's warp. The decoding state (``prev``/``seen``
    [n_ops, 32], ``base``/``stamp`` [n_ops]) carries over from the chunk before, so a trace is
    decoded chunk by chunk, and the accesses of some ops alone decode as they do among all.
    0 when done, -1 (nothing read or written outside an array) when a shape or op id does not fit.
    `undelta_packed` with every access's lanes in their own row."""
    n = op.shape[0]
    if lane_vals.shape[0] != n:
        return -1
    return undelta_packed(row_warp, op, base_vals, np.zeros(n, np.int64), np.arange(n, dtype=np.int64), lane_vals,
                          mask, unit, prev, seen, base, stamp, out)


@njit(**KERNEL)
def undelta_packed(row_warp, op, base_vals, steps, lane_row, lane_vals, mask, unit, prev, seen, base, stamp,
                   out):  # pragma: no cover - jitted
    """`undelta` from values as `tuiprof.trace.data.PackedLanes` keeps them: access i's lane values
    are row ``lane_row[i]`` of ``lane_vals`` [K, 32], or where that is -1 ``steps[i]`` in every lane.

    Per warp and per op, in program order: the access base accumulates the base deltas; a lane's
    first address in the group is base + its delta, later ones add their delta to the lane's
    previous address. int64 wraps like uint64. Per-op state is reset when a warp first touches
    the op (`stamp`), so the work follows the accesses, not the op table.
    """
    n = op.shape[0]
    n_ops = base.shape[0]
    k = lane_vals.shape[0]
    if (row_warp.shape[0] != n or base_vals.shape[0] != n or steps.shape[0] != n or lane_row.shape[0] != n
            or lane_vals.shape[1] != 32 or mask.shape[0] != n or out.shape[0] != n or out.shape[1] != 32
            or prev.shape[0] != n_ops or prev.shape[1] != 32 or seen.shape[0] != n_ops or seen.shape[1] != 32
            or stamp.shape[0] != n_ops):
        return -1
    for i in range(n):
        o = op[i]
        if o < 0 or o >= n_ops:
            return -1
        r = lane_row[i]
        if r >= k:
            return -1
        w = row_warp[i]
        if stamp[o] != w:
            stamp[o] = w
            base[o] = 0
            seen[o, :] = False
        base[o] += base_vals[i]
        m = mask[i]
        for lane in range(32):
            if (m >> lane) & 1:
                d = lane_vals[r, lane] if r >= 0 else steps[i]
                v = prev[o, lane] + d if seen[o, lane] else base[o] + d
                seen[o, lane] = True
                prev[o, lane] = v
                out[i, lane] = v * unit
            else:
                out[i, lane] = 0
    return 0
