"""Per-SM utilisation and load imbalance (Farooqui11, sec. 3.3 and Fig. 6).

Measured: the instrumented kernel records, for every CTA, the %clock at its start and end and
the %smid it ran on (the ClockCycleCountInstrumentor). An SM's busy time is the length of the
union of its CTAs' [start, end) intervals; ``%clock`` is a per-SM counter, so times are only
compared within an SM and the kernel time is, as in Fig. 6, "the maximum number of cycles over
all SMs" (the longest first-start-to-last-end span). Fig. 6 plots busy / kernel time per SM.

Modeled (emulator, synthetic traces, no clocks): all CTAs of the grid are dispatched in order,
each to the SM with a free slot that holds the fewest CTAs (lowest SM id on ties: the
breadth-first placement of the hardware CTA scheduler, Yen14 Table 8 "load balance
scheduling"); an SM holds `md` CTAs at once and a CTA holds its slot for its cost. The cost is
``inst_weight x dynamic warp instructions + access_weight x warp memory accesses``, in issue
cycles of a CTA running with its co-resident CTAs (CTAs sharing an SM overlap, the latency-hiding
assumption of Zhang11 sec. 3). Modeled times are relative work, not cycles.

Imbalance = max / mean busy time over all SMs (idle ones included): 1 when balanced; Fig. 6's
Mandelbrot (3 idle SMs of 15, 3 SMs twice as busy as the other 9) gives 2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tuiprof.errors import UsageError

MEASURED = "measured"
MODELED = "modeled"

INST_WEIGHT = 1.0
"""Modeled cost per dynamic warp instruction: one issue cycle."""
ACCESS_WEIGHT = 4.0
"""Modeled cost per warp memory access on top of its instruction: the departure delay of a
coalesced memory warp request (`tuiprof.model.mwp_cwp.DEPARTURE_DEL_COAL`), the SM-side cost of
putting the request out; the latency itself is overlapped by the other resident warps."""


@dataclass(frozen=True)
class SmUtilisation:
    """Per-SM busy time, CTAs executed and the imbalance, labelled measured or modeled."""

    source: str
    """'measured' (per-CTA clock and %smid) or 'modeled' (dispatch of per-CTA work)."""
    busy: np.ndarray
    """Busy time per SM (cycles when measured, relative work units when modeled)."""
    ctas: np.ndarray
    """CTAs executed per SM."""
    kernel_time: float
    """The longest per-SM span (Farooqui11 Fig. 6: the maximum number of cycles over all SMs)."""
    busy_fraction: np.ndarray
    """busy / kernel_time per SM: the bars of Fig. 6."""
    imbalance: float
    """max / mean busy time over all SMs (1 = balanced; NaN when nothing ran)."""
    utilisation: float
    """Mean busy fraction: the share of SM-time the kernel kept busy."""
    idle_sms: tuple[int, ...]
    """SMs that ran no CTA."""
    unit: str
    caveat: str = ""
    """What the figures do not show as the plain kernel would run (a measured timeline taken
    with the probes resident at fewer CTAs per SM than the plain kernel); empty when nothing."""

    @property
    def sm_count(self) -> int:
        return int(self.busy.size)


def _summarise(source: str, busy: np.ndarray, ctas: np.ndarray, span: np.ndarray, unit: str) -> SmUtilisation:
    kernel_time = float(span.max()) if span.size else 0.0
    frac = busy / kernel_time if kernel_time > 0 else np.zeros_like(busy)
    mean = float(busy.mean()) if busy.size else 0.0
    imbalance = float(busy.max()) / mean if mean > 0 else float("nan")
    idle = tuple(int(i) for i in np.flatnonzero(ctas == 0))
    return SmUtilisation(source, busy, ctas, kernel_time, frac, imbalance, float(frac.mean()) if frac.size else 0.0,
                         idle, unit)


def measured_sm_utilisation(sm: np.ndarray, start: np.ndarray, end: np.ndarray, sm_count: int) -> SmUtilisation:
    """From per-CTA %smid, start and end clocks (Farooqui11 sec. 3.3). Busy = union of intervals."""
    sm = np.asarray(sm, dtype=np.int64)
    start = np.asarray(start, dtype=np.float64)
    end = np.asarray(end, dtype=np.float64)
    if not (sm.shape == start.shape == end.shape) or sm.ndim != 1:
        raise UsageError("per-CTA SM ids, start and end clocks must be 1-D arrays of one length")
    bad = sm[(sm < 0) | (sm >= sm_count)]
    if bad.size:
        raise UsageError(f"a CTA ran on SM {int(bad[0])}, outside 0..{sm_count - 1}",
                         "check the GPU model (--arch) the trace was recorded on")
    if np.any(end < start):
        raise UsageError("a CTA ends before it starts in the per-CTA clock records",
                         "the 32-bit %clock may have wrapped; record %clock64")
    busy = np.zeros(sm_count)
    span = np.zeros(sm_count)
    ctas = np.bincount(sm, minlength=sm_count).astype(np.int64)
    order = np.lexsort((start, sm))
    s_sm, s_start, s_end = sm[order], start[order], end[order]
    bounds = np.searchsorted(s_sm, np.arange(sm_count + 1))
    for k in range(sm_count):
        a, b = bounds[k], bounds[k + 1]
        if a == b:
            continue
        st, en = s_start[a:b], s_end[a:b]
        reach = np.maximum.accumulate(en)                 # furthest end seen so far, by start order
        new = np.ones(b - a, dtype=bool)
        new[1:] = st[1:] > reach[:-1]                      # a CTA that starts after all before ended
        seg_start = st[new]
        seg_end = np.maximum.reduceat(en, np.flatnonzero(new))
        busy[k] = float((seg_end - seg_start).sum())
        span[k] = float(reach[-1] - st[0])
    return _summarise(MEASURED, busy, ctas, span, "cycles")


def cta_cost(insts: np.ndarray | None = None, accesses: np.ndarray | None = None,
             inst_weight: float = INST_WEIGHT, access_weight: float = ACCESS_WEIGHT) -> np.ndarray:
    """Modeled per-CTA cost from dynamic warp instructions and warp memory accesses."""
    if insts is None and accesses is None:
        raise UsageError("modeling SM utilisation needs per-CTA instruction or access counts")
    n = np.size(insts) if insts is not None else np.size(accesses)  # type: ignore[arg-type]  # one is given
    cost = np.zeros(n)
    if insts is not None:
        cost += inst_weight * np.asarray(insts, dtype=np.float64)
    if accesses is not None:
        if np.size(accesses) != n:
            raise UsageError("per-CTA instruction and access counts differ in length")
        cost += access_weight * np.asarray(accesses, dtype=np.float64)
    return cost


def modeled_sm_utilisation(cost: np.ndarray, sm_count: int, md: int, n_ctas: int | None = None) -> SmUtilisation:
    """Dispatch CTAs 0, 1, ... in order to the least-filled SM with a free slot (`md` slots per
    SM, lowest SM id on ties), each holding its slot for its cost; busy = union of each SM's
    CTA intervals. CTA i costs ``cost[i % cost.size]`` over `n_ctas` CTAs (default: one per cost),
    so a grid that repeats a snapshot passes the snapshot's costs only. Compiled, memory in the
    SMs only (`tuiprof.sim.dispatch`)."""
    from tuiprof.sim.dispatch import dispatch_ctas

    cost = np.asarray(cost, dtype=np.float64).ravel()
    n = cost.size if n_ctas is None else int(n_ctas)
    if sm_count < 1 or md < 1:
        raise UsageError(f"need at least one SM and MD >= 1, got {sm_count} SMs and MD {md}")
    if np.any(cost < 0) or not np.all(np.isfinite(cost)):
        raise UsageError("per-CTA costs must be finite and not negative")
    if n and not cost.size:
        raise UsageError("modeling SM utilisation needs the cost of at least one CTA")
    busy, span, ctas = dispatch_ctas(cost, n, sm_count, md)
    return _summarise(MODELED, busy, ctas, span, "work units")


def sm_utilisation(sm_count: int, md: int, *, sm: np.ndarray | None = None, start: np.ndarray | None = None,
                   end: np.ndarray | None = None, insts: np.ndarray | None = None,
                   accesses: np.ndarray | None = None, inst_weight: float = INST_WEIGHT,
                   access_weight: float = ACCESS_WEIGHT, n_ctas: int | None = None) -> SmUtilisation:
    """Measured when per-CTA SM ids and clocks are given, otherwise modeled from per-CTA work
    (repeated over `n_ctas` CTAs when given: `modeled_sm_utilisation`)."""
    if sm is not None and start is not None and end is not None:
        return measured_sm_utilisation(sm, start, end, sm_count)
    return modeled_sm_utilisation(cta_cost(insts, accesses, inst_weight, access_weight), sm_count, md, n_ctas)
