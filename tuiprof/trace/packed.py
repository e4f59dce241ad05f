"""Lane addresses a loaded trace keeps packed, and their decoding on demand.

The cache model never replays shared-memory accesses; only the bank-conflict model
(`tuiprof.model.shared`) and the address pattern (`tuiprof.model.pattern`) read their lanes. A
loaded trace therefore keeps them as the file stores them (`tuiprof.trace.data.PackedLanes`:
differenced per warp and op, each chunk of accesses in its narrowest integer type), a few bytes
per lane instead of eight, and these functions decode them a chunk at a time.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from tuiprof.trace.data import LANES, PackedLanes, Trace

CHUNK = 1 << 14
"""Warp accesses decoded at a time (4 MiB of addresses: the temporaries stay small beside the
trace, the work per chunk large beside the Python around it)."""


class Undelta:
    """The state of one decoding walk (`tuiprof.trace._codec.undelta`) over a trace's accesses
    in program order, fed one chunk at a time."""

    def __init__(self, n_ops: int, unit: int) -> None:
        n = max(n_ops, 1)
        self.unit = np.int64(unit)
        self.prev = np.zeros((n, LANES), np.int64)
        self.seen = np.zeros((n, LANES), np.bool_)
        self.base = np.zeros(n, np.int64)
        self.stamp = np.full(n, -1, np.int64)

    def decode(self, warp: np.ndarray, op: np.ndarray, base_vals: np.ndarray, lane_vals: np.ndarray,
               mask: np.ndarray, out: np.ndarray) -> bool:
        """Decode one chunk into `out` (uint64 [C, 32]); False when an op id or shape does not fit."""
        from tuiprof.trace._codec import undelta  # Numba: imported only when something is decoded

        status = undelta(np.ascontiguousarray(warp, np.int64), np.ascontiguousarray(op, np.int32),
                         np.ascontiguousarray(base_vals, np.int64), np.ascontiguousarray(lane_vals, np.int64),
                         np.ascontiguousarray(mask, np.int64), self.unit, self.prev, self.seen, self.base, self.stamp,
                         out.view(np.int64))
        return bool(status == 0)

    def decode_packed(self, warp: np.ndarray, op: np.ndarray, base_vals: np.ndarray, steps: np.ndarray,
                      lane_row: np.ndarray, lanes: np.ndarray, mask: np.ndarray, out: np.ndarray) -> bool:
        """`decode` from a chunk of `PackedLanes` as it is kept (`steps`, and for accesses whose
        ``lane_row`` is not -1 that row of `lanes`), without widening it to [C, 32] first."""
        from tuiprof.trace._codec import undelta_packed

        status = undelta_packed(np.ascontiguousarray(warp, np.int64), np.ascontiguousarray(op, np.int32),
                                np.ascontiguousarray(base_vals, np.int64), np.ascontiguousarray(steps, np.int64),
                                np.ascontiguousarray(lane_row, np.int64), np.ascontiguousarray(lanes, np.int64),
                                np.ascontiguousarray(mask, np.int64), self.unit, self.prev, self.seen, self.base,
                                self.stamp, out.view(np.int64))
        return bool(status == 0)


def narrowest(a: np.ndarray) -> np.ndarray:
    """`a` (integers) in the narrowest signed type that holds every value."""
    if a.size == 0:
        return a.astype(np.int8)
    lo, hi = int(a.min()), int(a.max())
    for dt in (np.int8, np.int16, np.int32):
        if np.iinfo(dt).min <= lo and hi <= np.iinfo(dt).max:
            return a.astype(dt)
    return a.astype(np.int64)


def pack_chunk(base_vals: np.ndarray, lane_vals: np.ndarray, mask: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(bases, steps, odd, lanes) of one chunk of `PackedLanes` from the differenced values of
    its accesses (int64 [c], [c, 32]) and their active `mask`s."""
    first = lane_vals[:, 0].copy()
    shared_step = np.all(lane_vals == first[:, None], axis=1)  # every lane alike, inactive ones too
    rest = np.flatnonzero(~shared_step)
    if rest.size:  # the others: compare the active lanes only
        vals = lane_vals[rest]
        active = ((mask[rest].astype(np.uint32)[:, None] >> np.arange(LANES, dtype=np.uint32)) & 1).astype(bool)
        first[rest] = vals[np.arange(rest.size), np.argmax(active, axis=1)]
        shared_step[rest] = np.all(~active | (vals == first[rest, None]), axis=1)
    odd = np.flatnonzero(~shared_step).astype(np.int32)
    return (narrowest(base_vals), narrowest(np.where(shared_step, first, 0)), odd, narrowest(lane_vals[odd]))


def packed_chunks(trace: Trace, ops: np.ndarray | None = None, warps: np.ndarray | None = None
                  ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(rows int64 [c], lane addresses uint64 [c, 32]) of the trace's packed accesses, chunk by
    chunk in program order; with `ops` (bool [n_ops]) only the accesses of those ops, with
    `warps` (bool [W]) only those warps' (each warp's accesses of an op decode on their own)."""
    p = trace.packed
    if p is None:
        return
    state = Undelta(len(trace.ops), p.unit)
    in_warps = None if warps is None else np.repeat(warps, np.diff(trace.warp_offsets))  # per access
    for k in range(len(p.bases)):
        rows = p.rows[p.starts[k]:p.starts[k + 1]]
        if in_warps is not None and not in_warps[rows[0]:rows[-1] + 1].any():
            continue
        op = trace.op[rows]
        keep = np.ones(rows.shape[0], dtype=bool)
        if ops is not None:
            keep &= ops[op]
        if in_warps is not None:
            keep &= in_warps[rows]
        if not keep.any():
            continue
        base_vals, steps = p.bases[k], p.steps[k]
        lane_row = np.full(steps.shape[0], -1, np.int64)
        lane_row[p.odd[k]] = np.arange(p.odd[k].shape[0])
        if not keep.all():
            rows, op, base_vals, steps, lane_row = rows[keep], op[keep], base_vals[keep], steps[keep], lane_row[keep]
        warp = np.searchsorted(trace.warp_offsets, rows, side="right") - 1
        out = np.empty((rows.shape[0], LANES), np.uint64)
        if not state.decode_packed(warp, op, base_vals, steps, lane_row, p.lanes[k], trace.mask[rows], out):
            raise ValueError("packed lane addresses do not fit their trace")  # check_trace rules this out
        yield rows, out


def lane_addresses(trace: Trace, rows: np.ndarray | None = None) -> np.ndarray:
    """Lane addresses (uint64 [len(rows), 32], inactive lanes 0) of warp accesses `rows`
    (default: all), decoding the packed ones among them (only their ops' accesses are walked)."""
    p = trace.packed
    if p is None:
        return trace.addr if rows is None else trace.addr[rows]
    rows = np.arange(trace.n_accesses, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    out = np.empty((rows.shape[0], LANES), np.uint64)
    before = np.searchsorted(p.rows, rows)  # packed accesses before each row (or its own index)
    hit = np.zeros(rows.shape[0], dtype=bool)
    if p.rows.size:
        hit = p.rows[np.minimum(before, p.rows.size - 1)] == rows
    out[~hit] = trace.addr[rows[~hit] - before[~hit]]
    if hit.any():
        where = np.flatnonzero(hit)
        order = np.argsort(rows[where], kind="stable")
        want, where = rows[where][order], where[order]
        ops = np.zeros(len(trace.ops), dtype=bool)
        ops[trace.op[want]] = True
        warps = np.zeros(trace.n_warps, dtype=bool)
        warps[np.searchsorted(trace.warp_offsets, want, side="right") - 1] = True
        last = want[-1]
        for crow, caddr in packed_chunks(trace, ops, warps):
            j = np.searchsorted(want, crow)
            ok = j < want.size
            ok[ok] = want[j[ok]] == crow[ok]
            out[where[j[ok]]] = caddr[ok]
            if crow[-1] >= last:
                break
    return out


def address_blocks(trace: Trace, size: int = CHUNK) -> Iterator[np.ndarray]:
    """Every access's lane addresses, in program order, as consecutive blocks of at most about
    `size` rows (plus a packed chunk's span): what ``lane_addresses(trace)`` holds whole."""
    p = trace.packed
    if p is None:
        for lo in range(0, trace.n_accesses, size):
            yield trace.addr[lo:lo + size]
        return
    lo = 0
    for crow, caddr in packed_chunks(trace):
        hi = int(crow[-1]) + 1
        block = np.empty((hi - lo, LANES), np.uint64)
        packed = np.zeros(hi - lo, dtype=bool)
        packed[crow - lo] = True
        block[crow - lo] = caddr
        dense = np.flatnonzero(~packed) + lo
        block[dense - lo] = trace.addr[dense - np.searchsorted(p.rows, dense)]
        yield block
        lo = hi
    for start in range(lo, trace.n_accesses, size):
        stop = min(start + size, trace.n_accesses)
        dense = np.arange(start, stop)
        yield trace.addr[dense - p.rows.size]


__all__ = ["CHUNK", "PackedLanes", "Undelta", "address_blocks", "lane_addresses", "narrowest", "pack_chunk",
           "packed_chunks"]
