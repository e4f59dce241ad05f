"""CTA dispatch to SMs for the modeled SM-utilisation figures (`tuiprof.model.sm_util`).

The hardware block scheduler as Yen14 Table 8 describes it ("load balance scheduling"): CTAs
0, 1, ... go in order to the SM with a free slot that holds the fewest CTAs (lowest SM id on
ties); an SM holds `md` CTAs at once and a CTA holds its slot for its cost. One pass in compiled
code with memory in the SMs and slots only: the per-SM busy time (the union of the SM's CTA
intervals), span and CTA count are summed as CTAs are placed, never stored per CTA. CTA i costs
``cost[i % cost.size]``, so a grid of millions of CTAs that repeats a snapshot's costs needs only
the snapshot's (a 232 KB trace declaring 2^24 CTAs took 57 s and 1.65 GB in Python).
"""

from __future__ import annotations

import numpy as np

from tuiprof.jit import INLINE, KERNEL, njit


@njit(**INLINE)
def _before(res, a, b):  # pragma: no cover - jitted
    """SM `a` comes before SM `b` in the free-slot order: fewer resident CTAs, then lower id."""
    return res[a] < res[b] or (res[a] == res[b] and a < b)


@njit(**INLINE)
def _sift_up(heap, pos, res, i):  # pragma: no cover - jitted
    while i > 0:
        p = (i - 1) >> 1
        if not _before(res, heap[i], heap[p]):
            break
        heap[i], heap[p] = heap[p], heap[i]
        pos[heap[i]] = i
        pos[heap[p]] = p
        i = p


@njit(**INLINE)
def _sift_down(heap, pos, res, i, size):  # pragma: no cover - jitted
    while True:
        left = 2 * i + 1
        if left >= size:
            break
        best = left
        if left + 1 < size and _before(res, heap[left + 1], heap[left]):
            best = left + 1
        if not _before(res, heap[best], heap[i]):
            break
        heap[i], heap[best] = heap[best], heap[i]
        pos[heap[i]] = i
        pos[heap[best]] = best
        i = best


@njit(**INLINE)
def _earlier(end, cta, a, b):  # pragma: no cover - jitted
    """Running slot `a` ends before slot `b`: earlier end, then lower CTA number."""
    return end[a] < end[b] or (end[a] == end[b] and cta[a] < cta[b])


@njit(**KERNEL)
def dispatch(cost, n, sm_count, md, busy, span, ctas):  # pragma: no cover - jitted
    """Place `n` CTAs (CTA i costing ``cost[i % cost.size]``) on `sm_count` SMs of `md` slots;
    fill `busy`, `span` (float64) and `ctas` (int64), one entry per SM."""
    period = cost.shape[0]
    res = np.zeros(sm_count, np.int64)
    # Free-slot heap: every SM with res < md, ordered by (res, id); pos[s] = its index or -1.
    heap = np.arange(sm_count)
    pos = np.arange(sm_count)
    size = sm_count
    # Running CTAs: a heap over (end, CTA number), payload the SM.
    cap = sm_count * md
    r_end = np.empty(cap, np.float64)
    r_cta = np.empty(cap, np.int64)
    r_sm = np.empty(cap, np.int64)
    r_size = 0
    first = np.zeros(sm_count, np.float64)
    seg = np.zeros(sm_count, np.float64)
    reach = np.zeros(sm_count, np.float64)
    now = 0.0
    for i in range(n):
        while size == 0:  # every slot busy: advance to the next end, release all that end then
            now = r_end[0]
            while r_size > 0 and r_end[0] <= now:
                s = r_sm[0]
                r_size -= 1
                r_end[0], r_cta[0], r_sm[0] = r_end[r_size], r_cta[r_size], r_sm[r_size]
                j = 0
                while True:
                    left = 2 * j + 1
                    if left >= r_size:
                        break
                    best = left
                    if left + 1 < r_size and _earlier(r_end, r_cta, left + 1, left):
                        best = left + 1
                    if not _earlier(r_end, r_cta, best, j):
                        break
                    r_end[j], r_end[best] = r_end[best], r_end[j]
                    r_cta[j], r_cta[best] = r_cta[best], r_cta[j]
                    r_sm[j], r_sm[best] = r_sm[best], r_sm[j]
                    j = best
                res[s] -= 1
                if pos[s] < 0:  # it was full: back into the free heap
                    heap[size] = s
                    pos[s] = size
                    size += 1
                    _sift_up(heap, pos, res, size - 1)
                else:
                    _sift_up(heap, pos, res, pos[s])
        s = heap[0]
        res[s] += 1
        if res[s] >= md:  # full: out of the free heap
            size -= 1
            pos[s] = -1
            if size > 0:
                heap[0] = heap[size]
                pos[heap[0]] = 0
                _sift_down(heap, pos, res, 0, size)
        else:
            _sift_down(heap, pos, res, 0, size)
        c = cost[i % period]
        end = now + c
        if ctas[s] == 0:
            first[s] = now
            seg[s] = now
            reach[s] = end
        elif now > reach[s]:  # a gap: the SM's previous busy stretch ended
            busy[s] += reach[s] - seg[s]
            seg[s] = now
            reach[s] = end
        elif end > reach[s]:
            reach[s] = end
        ctas[s] += 1
        j = r_size
        r_end[j], r_cta[j], r_sm[j] = end, i, s
        r_size += 1
        while j > 0:
            p = (j - 1) >> 1
            if not _earlier(r_end, r_cta, j, p):
                break
            r_end[j], r_end[p] = r_end[p], r_end[j]
            r_cta[j], r_cta[p] = r_cta[p], r_cta[j]
            r_sm[j], r_sm[p] = r_sm[p], r_sm[j]
            j = p
    for s in range(sm_count):
        if ctas[s] > 0:
            busy[s] += reach[s] - seg[s]
            span[s] = reach[s] - first[s]
    return 0


def dispatch_ctas(cost: np.ndarray, n: int, sm_count: int, md: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(busy, span, CTAs) per SM of `n` CTAs dispatched as the module docstring says. CTAs of one
    cost (every CTA alike, or none making an access) take `uniform_dispatch`, whose work is in
    the SMs only; others the compiled pass, whose work is one step per CTA."""
    cost = np.ascontiguousarray(cost, dtype=np.float64).ravel()
    if n > 0 and cost.size and np.all(cost == cost[0]):
        return uniform_dispatch(float(cost[0]), n, sm_count, md)
    busy = np.zeros(sm_count)
    span = np.zeros(sm_count)
    ctas = np.zeros(sm_count, np.int64)
    if n > 0:
        dispatch(cost, np.int64(n), np.int64(sm_count), np.int64(md), busy, span, ctas)
    return busy, span, ctas


def uniform_dispatch(cost: float, n: int, sm_count: int, md: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`dispatch` when every CTA costs `cost`, in closed form: CTAs go out in waves of
    ``sm_count x md`` that start and end together, CTA i on SM ``i mod sm_count``; an SM is busy
    for `cost` in each wave that gives it a CTA."""
    s = np.arange(sm_count)
    ctas = (n // sm_count + (s < n % sm_count)).astype(np.int64)
    wave = sm_count * md
    waves = n // wave + (s < n % wave)
    busy = waves * cost
    return busy.astype(np.float64), busy.astype(np.float64).copy(), ctas


__all__ = ["dispatch_ctas"]
