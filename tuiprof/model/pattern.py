"""What one static op's accesses look like: its address pattern and its ideal coalescing, pure
NumPy over the Trace arrays (what to do about them is `tuiprof.model.advice`).

The address pattern is pure NumPy over the Trace arrays: lane-to-lane strides inside a warp
access (coalescing), strides between successive accesses of one lane (per-thread walks), distinct
L1 lines per warp access, and reuse of lines by the same warp (the reuse that Baghsorkhi12 sec. 6.2
finds is lost when "the loaded cache lines are evicted before being reused"). It depends on the
trace and the L1 line only, so a session computes it once (`address_patterns`).

Coalescing is counted as Nsight Compute counts it: *sectors per request*, a request being one
warp instruction (here a warp access), so 32 lanes of 4 B ideally move 4 sectors of 32 B and at
worst 32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tuiprof.trace.data import LANES, Trace
from tuiprof.trace.packed import lane_addresses

SAMPLE = 25_000
"""Warp accesses examined per op; beyond, whole warps are sampled evenly (the figures are shares
and medians, and a lane's successive accesses stay successive)."""
MIN_STRIDE_SHARE = 0.05
"""Strides seen in fewer of the pairs than this are not listed (noise, not a pattern)."""
SECTOR = 32
"""Bytes of one sector: the unit of Nsight Compute's sectors per request."""

REGULAR = 0.5
"""A lane stride that covers at least this share of adjacent active lanes makes an access regular;
below, the lanes follow data (a gather)."""


@dataclass(frozen=True)
class AddressPattern:
    """What one op's warp accesses look like, in the Arch's L1 lines."""

    warp_accesses: int
    examined: int
    mean_active_lanes: float
    lines_per_access: float
    """Distinct L1 lines one warp access touches (1 = fully coalesced for <= line-size warps)."""
    lane_strides: tuple[tuple[int, float], ...]
    """Most common byte strides between adjacent active lanes, with their shares (those above
    `MIN_STRIDE_SHARE`)."""
    thread_strides: tuple[tuple[int, float], ...]
    """Most common byte strides between successive accesses of one lane (same warp, same op)."""
    distinct_lines: int
    """Distinct fill units touched (sectors on a sectored L1, else lines)."""
    line_touches: int
    reuse: float
    """Share of touches of the L1's fill units (sectors on a sectored L1, else lines) that touch
    one the same warp touched before with this op."""
    reuse_distance: float
    """Median warp accesses (of that warp, any op) between two touches of a fill unit: the
    longer, the likelier it is evicted first."""
    regular_share: float
    """Share of adjacent active lane pairs at the most common lane stride (1 = perfectly regular;
    NaN with no such pairs)."""

    @property
    def gather(self) -> bool:
        """The lanes' addresses follow data, not a stride (an indirect load such as x[col[j]])."""
        return math.isfinite(self.regular_share) and self.regular_share < REGULAR


EMPTY = AddressPattern(0, 0, 0.0, math.nan, (), (), 0, 0, math.nan, math.nan, math.nan)


def _top(values: np.ndarray, k: int = 3) -> tuple[tuple[tuple[int, float], ...], float]:
    """The `k` most common values with their shares (at least MIN_STRIDE_SHARE), and the share of
    the most common one (NaN for no values)."""
    if values.size == 0:
        return (), math.nan
    uniq, counts = np.unique(values, return_counts=True)
    order = np.argsort(-counts, kind="stable")[:k]
    shares = [(int(uniq[i]), float(counts[i] / values.size)) for i in order]
    return tuple(s for s in shares if s[1] >= MIN_STRIDE_SHARE), shares[0][1]


def _sample(rows: np.ndarray, warp: np.ndarray) -> np.ndarray:
    """Indices into `rows` of whole warps, evenly spaced, about `SAMPLE` accesses in all."""
    if rows.size <= SAMPLE:
        return np.arange(rows.size)
    uniq, start = np.unique(warp, return_index=True)
    stride = -(-rows.size // SAMPLE)
    keep = np.zeros(uniq.size, dtype=bool)
    keep[::stride] = True
    return np.flatnonzero(keep[np.searchsorted(uniq, warp)])


def pattern_of(trace: Trace, rows: np.ndarray, line_bytes: int, fill_bytes: int | None = None) -> AddressPattern:
    """The address pattern of the warp accesses `rows` (ascending, one op's) with L1 lines of
    `line_bytes` that fill `fill_bytes` at a time (a sectored L1 fetches a 32 B sector, not the
    line: a warp that comes back to another sector of a line reuses nothing). Reuse is counted
    in fill units; lines per access in lines."""
    fill = fill_bytes or line_bytes
    total = int(rows.size)
    if total == 0:
        return EMPTY
    warp_all = np.searchsorted(trace.warp_offsets, rows, side="right") - 1
    pick = _sample(rows, warp_all)
    rows, warp = rows[pick], warp_all[pick]
    addr = lane_addresses(trace, rows).astype(np.int64)            # [n, 32]; < 2^63 in practice
    lanes = np.arange(LANES, dtype=np.uint32)
    active = ((trace.mask[rows][:, None] >> lanes) & 1).astype(bool)
    # Coalescing: strides between adjacent active lanes, distinct lines per warp access.
    both = active[:, 1:] & active[:, :-1]
    lane_strides, regular = _top((addr[:, 1:] - addr[:, :-1])[both])
    lines = np.where(active, addr // line_bytes, -1)
    srt = np.sort(lines, axis=1)
    distinct = ((srt[:, 1:] != srt[:, :-1]) & (srt[:, 1:] >= 0)).sum(axis=1) + (srt[:, 0] >= 0)
    # Per-thread walk: successive accesses of the same op by the same warp, lane by lane.
    same = warp[1:] == warp[:-1]
    walk = (addr[1:] - addr[:-1])[same]
    walk_ok = (active[1:] & active[:-1])[same]
    thread_strides, _ = _top(walk[walk_ok])
    # Reuse by the same warp: each (warp, fill unit) touch after the first is a reuse.
    n = lines.shape[0]
    srt = np.sort(np.where(active, addr // fill, -1), axis=1) if fill != line_bytes else srt
    acc_idx = np.repeat(np.arange(n), LANES).reshape(n, LANES)
    first = np.ones_like(srt, dtype=bool)
    first[:, 1:] = srt[:, 1:] != srt[:, :-1]
    sel = (srt >= 0) & first                                        # one touch per unit per access
    t_line, t_acc = srt[sel], acc_idx[sel]
    t_warp, t_row = warp[t_acc], rows[t_acc]
    order = np.lexsort((t_row, t_line, t_warp))
    tw, tl, tr = t_warp[order], t_line[order], t_row[order]
    again = (tw[1:] == tw[:-1]) & (tl[1:] == tl[:-1])
    touches = int(tl.size)
    reuse = float(again.sum() / touches) if touches else math.nan
    gaps = (tr[1:] - tr[:-1])[again]
    distance = float(np.median(gaps)) if gaps.size else math.nan
    return AddressPattern(total, int(rows.size), float(active.sum(axis=1).mean()), float(distinct.mean()),
                          lane_strides, thread_strides, int(np.unique(tl).size), touches, reuse, distance, regular)


def address_pattern(trace: Trace, op_id: int, line_bytes: int, fill_bytes: int | None = None) -> AddressPattern:
    """The address pattern of op `op_id` with L1 lines of `line_bytes` (filled `fill_bytes` at a time)."""
    return pattern_of(trace, np.flatnonzero(trace.op == op_id), line_bytes, fill_bytes)


def address_patterns(trace: Trace, line_bytes: int, fill_bytes: int | None = None) -> dict[int, AddressPattern]:
    """Every op's address pattern (one sort of the access table, not one scan per op)."""
    order = np.argsort(trace.op, kind="stable")
    bounds = np.searchsorted(trace.op[order], np.arange(len(trace.ops) + 1))
    return {o.id: pattern_of(trace, order[bounds[o.id]:bounds[o.id + 1]], line_bytes, fill_bytes)
            for o in trace.ops}


def ideal_sectors(op_bytes: int, active_lanes: float, sector: int = SECTOR) -> float:
    """Sectors one warp access needs at best: its active lanes' bytes in whole sectors."""
    lanes = active_lanes if math.isfinite(active_lanes) and active_lanes > 0 else LANES
    return float(max(1, math.ceil(lanes * op_bytes / sector - 1e-9)))


def ideal_sectors_per_op(trace: Trace, sector: int = SECTOR) -> np.ndarray:
    """`ideal_sectors` of every op at its mean active lanes in the snapshot's counted CTAs."""
    counted = trace.counted_accesses()
    counts = np.bincount(trace.op[counted], minlength=len(trace.ops))
    lanes = np.bincount(trace.op[counted], weights=trace.active_lanes()[counted], minlength=len(trace.ops))
    mean = np.divide(lanes, counts, out=np.full(len(trace.ops), np.nan), where=counts > 0)
    return np.array([ideal_sectors(o.bytes, float(mean[o.id]), sector) for o in trace.ops])
