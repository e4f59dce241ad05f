"""The address pattern of one static op, from its warp accesses in the snapshot, and the
plain-words advice of the drill-down.

Pure NumPy over the Trace arrays: lane-to-lane strides inside a warp access (coalescing),
strides between successive accesses of the same lane (per-thread walks), distinct L1 lines per
warp access, and reuse of lines by the same warp (the reuse that paper 000 sec. 6.2 finds is
lost when "the loaded cache lines are evicted before being reused").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tuiprof.trace.model import Trace

SAMPLE = 100_000
"""Warp accesses examined per op; more are sampled evenly (the figures are shares and medians)."""


@dataclass(frozen=True)
class AddressPattern:
    """What one op's warp accesses look like, in the Arch's L1 lines."""

    warp_accesses: int
    examined: int
    mean_active_lanes: float
    lines_per_access: float
    """Distinct L1 lines one warp access touches (1 = fully coalesced for <= line-size warps)."""
    lane_strides: tuple[tuple[int, float], ...]
    """Most common byte strides between adjacent active lanes, with their shares."""
    thread_strides: tuple[tuple[int, float], ...]
    """Most common byte strides between successive accesses of one lane (same warp, same op)."""
    distinct_lines: int
    line_touches: int
    reuse: float
    """Share of line touches that touch a line the same warp touched before with this op."""
    reuse_distance: float
    """Median warp accesses (of that warp, any op) between two touches of a line: the longer,
    the likelier the line is evicted first."""


def _top(values: np.ndarray, k: int = 3) -> tuple[tuple[int, float], ...]:
    if values.size == 0:
        return ()
    uniq, counts = np.unique(values, return_counts=True)
    order = np.argsort(-counts, kind="stable")[:k]
    return tuple((int(uniq[i]), float(counts[i] / values.size)) for i in order)


def address_pattern(trace: Trace, op_id: int, line_bytes: int) -> AddressPattern:
    """The address pattern of op `op_id` with L1 lines of `line_bytes`."""
    rows = np.flatnonzero(trace.op == op_id)
    total = int(rows.size)
    if total > SAMPLE:
        rows = rows[np.linspace(0, total - 1, SAMPLE).astype(np.int64)]
    if rows.size == 0:
        return AddressPattern(0, 0, 0.0, math.nan, (), (), 0, 0, math.nan, math.nan)
    addr = trace.addr[rows].astype(np.int64)                       # [n, 32]; < 2^63 in practice
    lanes = np.arange(32, dtype=np.uint32)
    active = ((trace.mask[rows][:, None] >> lanes) & 1).astype(bool)
    # Coalescing: strides between adjacent active lanes, distinct lines per warp access.
    both = active[:, 1:] & active[:, :-1]
    lane_strides = _top((addr[:, 1:] - addr[:, :-1])[both])
    lines = np.where(active, addr // line_bytes, -1)
    srt = np.sort(lines, axis=1)
    distinct = ((srt[:, 1:] != srt[:, :-1]) & (srt[:, 1:] >= 0)).sum(axis=1) + (srt[:, 0] >= 0)
    # Per-thread walk: successive accesses of the same op by the same warp, lane by lane.
    warp = np.searchsorted(trace.warp_offsets, rows, side="right") - 1
    same = warp[1:] == warp[:-1]
    walk = (addr[1:] - addr[:-1])[same]
    walk_ok = (active[1:] & active[:-1])[same]
    thread_strides = _top(walk[walk_ok])
    # Reuse by the same warp: each (warp, line) touch after the first is a reuse.
    n, _ = lines.shape
    acc_idx = np.repeat(np.arange(n), 32).reshape(n, 32)
    keep = srt >= 0
    first = np.ones_like(srt, dtype=bool)
    first[:, 1:] = srt[:, 1:] != srt[:, :-1]
    sel = keep & first                                              # one touch per line per access
    t_line, t_acc = srt[sel], acc_idx[sel]
    t_warp, t_row = warp[t_acc], rows[t_acc]
    order = np.lexsort((t_row, t_line, t_warp))
    tw, tl, tr = t_warp[order], t_line[order], t_row[order]
    again = (tw[1:] == tw[:-1]) & (tl[1:] == tl[:-1])
    touches = int(tl.size)
    reuse = float(again.sum() / touches) if touches else math.nan
    gaps = (tr[1:] - tr[:-1])[again]
    distance = float(np.median(gaps)) if gaps.size else math.nan
    distinct_lines = int(np.unique(tl).size)
    return AddressPattern(total, int(rows.size), float(active.sum(axis=1).mean()), float(distinct.mean()),
                          lane_strides, thread_strides, distinct_lines, touches, reuse, distance)


def advice(stats, pattern: AddressPattern | None, line_bytes: int, warp_size: int = 32) -> list[str]:
    """Plain-words advice for one op (OpStats), strongest first; always at least one line."""
    op = stats.op
    out: list[str] = []
    h1 = stats.h1.mean if stats.h1.defined else math.nan
    if op.kind != "load":
        out.append(f"{op.kind.capitalize()}s go to L2 (the L1 does not keep written lines): H2 here is the L2 "
                   "write hit ratio, and the store's latency is mostly hidden from the warp.")
    ideal = max(1, -(-warp_size * op.bytes // line_bytes))
    lpa = pattern.lines_per_access if pattern is not None else stats.requests_per_access
    if op.kind == "load" and pattern is not None and pattern.thread_strides and math.isfinite(h1):
        step, share = pattern.thread_strides[0]
        walks = 0 < step < line_bytes and share >= 0.5
        if walks and h1 < 0.5 and lpa >= 4 * ideal:
            per_line = max(2, min(4, line_bytes // max(step, 1), 16 // max(op.bytes, 1)))
            out.append(f"Each lane walks its own row ({step} B per step) so the next element is in the line it just "
                       f"loaded, but that line is evicted before its reuse (H1 {100 * h1:.0f}%). Vectorize these "
                       f"loads (paper 000 sec. 6.2): read {per_line} elements per lane in one "
                       f"{per_line * op.bytes}-byte vector load (e.g. float{per_line}/int{per_line}).")
    if math.isfinite(lpa) and lpa >= 2 * ideal and lpa > 1.5:
        out.append(f"Uncoalesced: one warp access touches {lpa:.1f} L1 lines where {ideal} would do "
                   f"({stats.sectors_per_request:.1f} sectors per request). Make consecutive lanes read "
                   "consecutive addresses (structure of arrays, or stage the data through shared memory).")
    if math.isfinite(stats.dram_share) and stats.dram_share > 0.5 and op.kind == "load":
        out.append(f"DRAM dominates this load's latency ({100 * stats.dram_share:.0f}% of X): raise its H1 or H2 "
                   "with a smaller working set per SM (a lower MD, see the MD pane) or better locality.")
    if pattern is not None and math.isfinite(pattern.reuse) and pattern.reuse < 0.05 and op.kind == "load" \
            and math.isfinite(h1) and h1 < 0.2:
        out.append("Streaming: the warps almost never touch a line twice, so no cache size helps; only "
                   "coalescing and DRAM bandwidth matter.")
    if op.kind == "load" and math.isfinite(h1) and h1 >= 0.8:
        out.append(f"Served from L1 (H1 {100 * h1:.0f}%): little to gain on this load.")
    if not out:
        out.append("No single cause stands out: this load's latency follows the kernel's overall L1/L2 behaviour.")
    return out
