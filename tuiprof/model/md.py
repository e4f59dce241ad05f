"""The multithreading-degree (MD) decision of Yen14 (Yen, NCTU 2014), sec. 4-5.

MD is the number of CTAs resident on one SM (the thesis counts warps, eq. 1: effective CTA
buffer size x warps per CTA; we count CTAs, as its tables do). More CTAs hide more latency, but
they share one L1: past the cache capacity their working sets evict each other's reusable lines,
the DRAM reads per CTA grow (sec. 4.2), the memory latency grows with them (sec. 4.3) and the
pipeline is shared by more warps (sec. 4.4). The thesis predicts, for MD = N, the growth of a
CTA's execution time over MD = N-1 as the product of three rates (Table 7, sec. 4.4):

    cta_exe_rate(N) = dr_inc_rate(N) x mf_latency_rate(N) x pipeline_adverse_effect(N)

so that a CTA takes T(N) = T(1) x prod_{k=2..N} cta_exe_rate(k) and, with N CTAs at a time per
SM, the relative performance (throughput, IPC) is P(N) = N T(1) / T(N). The best MD maximises P.
It is used twice:

- **thesis rules** (`predict_thesis`): everything from the statistics of MD = 1, as the thesis'
  hardware predictor does (sec. 5.2): DRAM reads per MD from the reuse the L1 loses (sec. 4.2,
  Fig. 6; eq. 2), the latency growth rules and the pipeline adverse effect rules of sec. 5.1,
  and the compute-bound test (#DRAM reads / #warp insts < 0.05 keeps the maximum MD).
- the same formula on statistics measured at every MD (`predict_from_measurements`), which is
  what the thesis' Tables 5-7 tabulate for its GPGPU-Sim runs.

The thesis uses the product to *choose* an MD, never to size the gain: it counts L1 misses with
the L2 off, its latency rate is flat when the latency is measured, its pipeline factor fires at
every step, and it models no latency hiding. The headline of the decision is therefore the
timing model (`tuiprof.model.timing`: Hong & Kim's MWP/CWP with each MD's simulated latency and
bytes, floored by DRAM and L2 bandwidth), with the thesis rules beside it; when the two predicted
speedups differ by more than `LOW_CONFIDENCE_RATIO` the decision is marked low confidence.

`decide_md` puts both side by side with the default MD (the occupancy limit) and the dynamic
shared memory that caps residency at the recommended MD (`dynamic_shared_for_md`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tuiprof.arch.occupancy import dynamic_shared_for_md, occupancy
from tuiprof.arch.spec import Arch
from tuiprof.errors import UsageError
from tuiprof.model.timing import TIMING, MdTiming

COMPUTE_BOUND_RATIO = 0.05
"""Sec. 5.1: a kernel with #DRAM reads / #warp insts below this is computation bound."""

THESIS = "thesis rules"
MEASURED = "thesis formula on measured MDs"
MIN_GAIN = 0.02
"""A change of MD is recommended only when it is predicted to gain more than this (simulated
figures carry Monte Carlo noise)."""
LOW_CONFIDENCE_RATIO = 2.0
"""The timing model's and the thesis rules' predicted speedups differing by more than this factor
mark the decision low confidence."""

# Sec. 5.1, second stage (latency growth rate per MD step).
LAT_RATE_EXTREME_MISS = 1.03      # miss rate < 0.15 or > 0.85
LAT_RATE_LOW_MISS = 1.1           # 0.15 <= miss rate < 0.3
LAT_RATE_WS5 = 1.9                # working set > 5 x cache and delta miss rate > 0.1
LAT_RATE_WS15 = 1.75              # working set > 15 x cache and delta miss rate > 0.04
LAT_RATE_OTHER = 1.1
# Sec. 5.1, third stage (pipeline adverse effect per MD step).
PIPE_FITS = 1.05                  # working set at the target MD fits the cache
PIPE_MEMORY_INTENSIVE = 1.2       # DRAM reads per CTA > 5 x cache capacity
PIPE_OTHER = 1.1


@dataclass(frozen=True)
class MdSample:
    """What one run at MD = `md` measured (hardware) or simulated, per CTA.

    ``mf_latency`` is the average memory fetch (DRAM) latency in cycles, the thesis' mf_latency
    (Table 7); ``warp_insts`` counts the warp instructions of the ``cta_count`` CTAs the other
    figures were taken over (NaN when unknown: the compute-bound test is then skipped).
    """

    md: int
    miss_rate: float
    dram_reads_per_cta: float
    mf_latency: float
    cta_count: int = 1
    warp_insts: float = math.nan
    cta_exe_time: float = math.nan
    """Cycles one CTA took at this MD, when measured (Table 6); only displayed."""
    l2_hit_rate: float = math.nan
    """The simulated L2 read hit ratio at this MD: the thesis' rules assume no L2 (its GTX480 has it
    disabled), so DRAM reads per CTA can move with it while the L1 miss rate stays; only displayed."""
    trials: int = 0
    """Simulated trials the figures average (0: measured, or unknown)."""

    @property
    def dram_per_inst(self) -> float:
        """#DRAM reads / #warp insts (sec. 5.1), NaN when the instruction count is unknown."""
        if not (self.warp_insts > 0):
            return math.nan
        return self.dram_reads_per_cta * self.cta_count / self.warp_insts


@dataclass(frozen=True)
class MdRow:
    """One MD of a prediction. Rates are over MD - 1 and NaN at MD = 1 (the initial values)."""

    md: int
    miss_rate: float
    dram_reads_per_cta: float
    dr_inc_rate: float
    """Eq. 2: DRAM reads per CTA at MD = N over those at MD = N - 1."""
    mf_latency: float
    mf_latency_rate: float
    pipeline_effect: float
    cta_exe_rate: float
    """dr_inc_rate x mf_latency_rate x pipeline_effect (Table 7's comparison, sec. 4.4)."""
    cta_exe_ratio: float
    """T(N) / T(1): the product of cta_exe_rate over MD = 2..N."""
    cta_exe_time: float
    """T(1) x cta_exe_ratio in cycles when T(1) was measured, else NaN."""
    relative_performance: float
    """P(N) = N / cta_exe_ratio: throughput relative to MD = 1."""


@dataclass(frozen=True)
class MdPrediction:
    """Relative performance per MD by one method, and the MD it picks."""

    method: str
    rows: tuple[MdRow, ...]
    dram_per_inst: float
    compute_bound: bool
    """Sec. 5.1's test: #DRAM reads / #warp insts < 0.05 keeps the maximum MD."""
    best_md: int

    def row(self, md: int) -> MdRow:
        return self.rows[md - 1]

    @property
    def max_md(self) -> int:
        return self.rows[-1].md

    def gain(self, md: int, over: int) -> float:
        """Predicted speedup of `md` over `over`, minus one (0.38 = +38%)."""
        return self.row(md).relative_performance / self.row(over).relative_performance - 1.0


@dataclass(frozen=True)
class MdDecision:
    """The MD panel: both predictions, the default, the recommendation and how to apply it."""

    default_md: int
    """Resident CTAs per SM the launch gets today (the occupancy limit)."""
    limiter: str
    """The resource that sets the default (occupancy: ctas, warps, registers, shared)."""
    thesis: MdPrediction
    timing: MdTiming | None
    """The timing model at every MD (the headline), when the sweep simulated every MD."""
    headline: str
    """Which prediction `recommended_md` and `gain` come from: `TIMING`, or `THESIS` without a sweep."""
    recommended_md: int
    gain: float
    """Headline predicted speedup of the recommended MD over the default, minus one."""
    thesis_md: int
    thesis_gain: float
    low_confidence: bool
    """The timing model's and the thesis rules' speedups differ by more than `LOW_CONFIDENCE_RATIO`."""
    dynamic_shared: int | None
    """Bytes of (unused) dynamic shared memory per CTA that cap residency at the recommended MD;
    0 when no change is needed, None when shared memory cannot reach it."""
    apply: str
    advice: str
    gain_range: tuple[float, float] | None = None
    """Range of `gain` from the trials and the uncertain constants (`timing.gain_range`); None
    when the default is kept or there is no timing model."""

    @property
    def gain_label(self) -> str:
        """The gain with its range and confidence, e.g. '+38% [+20%..+55%]' or '+9% (low confidence)'."""
        text = _pct(self.gain)
        if self.gain_range is not None:
            text += f" [{_pct(self.gain_range[0])}..{_pct(self.gain_range[1])}]"
        return text + (" (low confidence)" if self.low_confidence else "")


# ---------------------------------------------------------------------------------------------
# The thesis' stages, one function each.

def dram_read_increasing_rate(dram_reads: float, dram_reads_prev: float) -> float:
    """Eq. 2: #DRAM reads at MD = N over #DRAM reads at MD = N - 1 (1 when both are zero)."""
    if dram_reads_prev > 0:
        return dram_reads / dram_reads_prev
    return 1.0 if dram_reads <= 0 else math.inf


def step_rates(values: Sequence[float]) -> tuple[float, ...]:
    """Each value over the one before (eq. 2's form), for MD = 2..: the dr_inc_rate column of
    Table 5, the ratio / cta_exe_rate column of Tables 6-7 and mf_latency_rate of Table 7."""
    return tuple(dram_read_increasing_rate(b, a) for a, b in zip(values, values[1:]))


def relative_performance_from_times(cta_exe_times: Sequence[float]) -> tuple[float, ...]:
    """P(N) = N T(1) / T(N) from measured per-CTA execution times at MD = 1, 2, ... (Table 6)."""
    t1 = cta_exe_times[0]
    return tuple((n + 1) * t1 / t for n, t in enumerate(cta_exe_times))


def latency_growth_rate(miss_rate: float, delta_miss_rate: float, working_set_lines: float,
                        cache_lines: float) -> float:
    """Sec. 5.1, second stage: growth of the memory latency from MD = N - 1 to N.

    ``miss_rate`` is the (predicted) L1 miss rate at MD = N, ``delta_miss_rate`` its increase
    over MD = N - 1, ``working_set_lines`` the working set of the CTAs resident at MD = N.
    The thesis leaves 0.15 itself in no range; we put it with "lower than 0.3 and higher than
    0.15" (1.1). Its 5x rule is tested before its 15x rule, as written.
    """
    if miss_rate < 0.15 or miss_rate > 0.85:
        return LAT_RATE_EXTREME_MISS
    if miss_rate < 0.3:
        return LAT_RATE_LOW_MISS
    if working_set_lines > 5 * cache_lines and delta_miss_rate > 0.1:
        return LAT_RATE_WS5
    if working_set_lines > 15 * cache_lines and delta_miss_rate > 0.04:
        return LAT_RATE_WS15
    return LAT_RATE_OTHER


def pipeline_adverse_effect(working_set_lines: float, dram_reads_per_cta: float,
                            cache_lines: float) -> float:
    """Sec. 5.1, third stage (and sec. 4.4): growth of a CTA's time from sharing the pipeline.

    1.05 when the working set at the target MD fits the cache; otherwise 1.2 when the DRAM reads
    of each CTA exceed 5 x the cache capacity (in lines: the memory-intensive case), else 1.1.
    """
    if working_set_lines <= cache_lines:
        return PIPE_FITS
    if dram_reads_per_cta > 5 * cache_lines:
        return PIPE_MEMORY_INTENSIVE
    return PIPE_OTHER


def is_compute_bound(dram_per_inst: float) -> bool:
    """Sec. 5.1: #DRAM reads / #warp insts < 0.05. Unknown (NaN) counts are not compute bound."""
    return bool(dram_per_inst < COMPUTE_BOUND_RATIO)


def predict_dram_reads(md1: MdSample, md: int, working_set_lines: float,
                       cache_lines: float) -> tuple[float, float]:
    """DRAM reads per CTA and L1 miss rate at `md` from MD = 1 alone (sec. 4.2, Fig. 6).

    The thesis fits "a segmented curve" to three factors, miss rate, cache capacity and working
    set per CTA, without publishing it; this is the curve its Fig. 6 argument gives. A CTA makes
    A = D1 / m1 L1 accesses, of which H1 = A - D1 hit (each line is reused with probability
    1 - miss rate). With N CTAs sharing C lines, a CTA keeps a fraction rho(N) = min(1, C / (N W))
    of its working set W; a reuse whose line was evicted becomes a DRAM read:

        D(N) = D1 + H1 (1 - rho(N) / rho(1)),    m(N) = D(N) / A.

    Segment 1 (N W <= C): D(N) = D1. Beyond, D grows (faster for a lower miss rate, a bigger
    working set, a smaller cache: Figs. 9-11) and saturates when all reuse is lost.
    """
    d1, m1 = md1.dram_reads_per_cta, md1.miss_rate
    if d1 <= 0 or m1 <= 0:
        return max(d1, 0.0), max(m1, 0.0)
    accesses = d1 / m1
    hits = max(accesses - d1, 0.0)
    w = max(working_set_lines, 1e-12)

    def kept(n: int) -> float:
        return min(1.0, cache_lines / (n * w))

    d = d1 + hits * (1.0 - kept(md) / kept(1))
    return d, d / accesses


def _check_common(working_set_lines: float, cache_lines: float) -> None:
    if not cache_lines > 0:
        raise UsageError("the MD decision needs an L1 cache (cache capacity in lines > 0)",
                         "Yen14's scheme is about L1 contention; choose an arch with an L1")
    if not working_set_lines > 0:
        raise UsageError("the working set per CTA must be positive (distinct L1 lines a CTA touches)")


def _rows(per_md: list[tuple[float, float, float]], working_set_lines: float,
          cache_lines: float, t1: float, rules_latency: bool) -> tuple[MdRow, ...]:
    """Rows from (miss rate, DRAM reads per CTA, latency) per MD = 1..max.

    With ``rules_latency`` only MD = 1's latency is used and later ones follow sec. 5.1's rules.
    """
    rows: list[MdRow] = []
    ratio = 1.0
    for i, (m, d, lat) in enumerate(per_md):
        n = i + 1
        if n == 1:
            rows.append(MdRow(1, m, d, math.nan, lat, math.nan, math.nan, math.nan, 1.0,
                              t1, 1.0))
            continue
        prev = rows[-1]
        dr = dram_read_increasing_rate(d, prev.dram_reads_per_cta)
        ws = n * working_set_lines
        if rules_latency:
            lat_rate = latency_growth_rate(m, m - prev.miss_rate, ws, cache_lines)
            lat = prev.mf_latency * lat_rate
        else:
            lat_rate = lat / prev.mf_latency if prev.mf_latency > 0 else 1.0
        pipe = pipeline_adverse_effect(ws, d, cache_lines)
        rate = dr * lat_rate * pipe
        ratio *= rate
        perf = n / ratio if ratio > 0 else math.inf
        rows.append(MdRow(n, m, d, dr, lat, lat_rate, pipe, rate, ratio, t1 * ratio, perf))
    return tuple(rows)


def _best(rows: Sequence[MdRow], compute_bound: bool) -> int:
    """Argmax of P(N); ties go to the larger MD; compute-bound keeps the maximum (sec. 5.1)."""
    if compute_bound:
        return rows[-1].md
    best = rows[0]
    for r in rows[1:]:
        if r.relative_performance >= best.relative_performance * (1 - 1e-12):
            best = r
    return best.md


def predict_thesis(md1: MdSample, max_md: int, working_set_lines: float,
                   cache_lines: float) -> MdPrediction:
    """The thesis' rule-based prediction for MD = 1..max_md from the statistics of MD = 1.

    DRAM reads per MD: `predict_dram_reads` (sec. 4.2) and eq. 2; memory latency: MD = 1's
    latency grown by `latency_growth_rate` per step (sec. 5.1); pipeline adverse effect:
    `pipeline_adverse_effect` (sec. 5.1); compute-bound test on MD = 1's counts (sec. 5.1).
    """
    if md1.md != 1:
        raise UsageError(f"the thesis rules start from MD = 1, got a sample at MD = {md1.md}")
    if max_md < 1:
        raise UsageError(f"the maximum MD must be at least 1, got {max_md}")
    _check_common(working_set_lines, cache_lines)
    base = []
    for n in range(1, max_md + 1):
        d, m = (md1.dram_reads_per_cta, md1.miss_rate) if n == 1 else \
            predict_dram_reads(md1, n, working_set_lines, cache_lines)
        base.append((m, d, md1.mf_latency if n == 1 else math.nan))
    rows = _rows(base, working_set_lines, cache_lines, md1.cta_exe_time, rules_latency=True)
    ratio = md1.dram_per_inst
    cb = is_compute_bound(ratio)
    return MdPrediction(THESIS, rows, ratio, cb, _best(rows, cb))


def predict_from_measurements(samples: Sequence[MdSample], working_set_lines: float,
                              cache_lines: float) -> MdPrediction:
    """The thesis' formula on DRAM reads and latencies measured at every MD (`samples` for MD =
    1..max), as its Tables 5-7 tabulate them.

    dr_inc_rate is eq. 2 on the measured DRAM reads, mf_latency_rate the ratio of measured
    latencies, the pipeline adverse effect the sec. 5.1 rule on the measured DRAM reads. The
    compute-bound test uses the largest #DRAM reads / #warp insts over all MDs: the kernel is kept
    at the maximum only if it is compute bound at every MD, thrashing included. A check of the
    thesis' own tables, not the decision's headline (see the module docstring).
    """
    samples = sorted(samples, key=lambda s: s.md)
    if not samples or [s.md for s in samples] != list(range(1, len(samples) + 1)):
        raise UsageError("MD samples must cover MD = 1, 2, ... without gaps",
                         f"got MDs {[s.md for s in samples]}")
    _check_common(working_set_lines, cache_lines)
    base = [(s.miss_rate, s.dram_reads_per_cta, s.mf_latency) for s in samples]
    rows = _rows(base, working_set_lines, cache_lines, samples[0].cta_exe_time, rules_latency=False)
    ratios = [s.dram_per_inst for s in samples]
    ratio = max(ratios) if all(not math.isnan(r) for r in ratios) else math.nan
    cb = is_compute_bound(ratio)
    return MdPrediction(MEASURED, rows, ratio, cb, _best(rows, cb))


# ---------------------------------------------------------------------------------------------
# The decision.

def _pct(x: float) -> str:
    return f"{x * 100:+.0f}%"


def _ctas(n: int) -> str:
    return f"{n} CTA" if n == 1 else f"{n} CTAs"


def speedup_disagreement(gain: float, other: float) -> float:
    """How far apart two predicted gains are, as the ratio of their speedups (>= 1)."""
    a, b = 1.0 + gain, 1.0 + other
    if not (a > 0 and b > 0) or not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return max(a / b, b / a)


def undecided_mds(candidates: Sequence[int], default: int, interval: Callable[[int, int], tuple[float, float]],
                  min_gain: float = MIN_GAIN) -> list[int]:
    """The MDs of `candidates` (the default aside) that the trials so far cannot rule out as the
    timing model's recommendation in `decide_md`: their gain over the default is not surely below
    `min_gain` (the upper end of ``interval(md, default)``, the 95% interval of the gain of `md`
    over `default`), and no other candidate is surely faster (the lower end of ``interval(other,
    md)`` above 0). The MD sweep runs more trials of these only (issue 23: trials per MD adapted
    to how close the decision is)."""
    out = []
    for m in candidates:
        if m == default or interval(m, default)[1] < min_gain:
            continue
        if not any(interval(o, m)[0] > 0 for o in candidates if o != m):
            out.append(m)
    return out


def decide_md(arch: Arch, samples: Sequence[MdSample], *, threads_per_cta: int,
              registers_per_thread: int, shared_per_cta: int = 0, dynamic_shared: int = 0,
              working_set_lines: float | None = None, timing: MdTiming | None = None,
              min_gain: float = MIN_GAIN,
              range_of: Callable[[int, int], tuple[float, float]] | None = None) -> MdDecision:
    """The timing model and the thesis rules for MD = 1..occupancy limit, the recommendation and
    how to apply it.

    `samples` holds MD = 1 at least (the thesis rules need only it); `timing` is the timing model
    over MD = 1 .. the default (`tuiprof.model.timing.predict_timing`) when the sweep simulated
    every MD: it is then the headline. ``working_set_lines`` is the distinct L1 lines one CTA
    touches; when unknown, MD = 1's DRAM reads per CTA stand in (every distinct line is read from
    DRAM at least once, so they bound it from above). A change of MD is recommended only when it
    is predicted to gain more than ``min_gain`` (simulated figures carry Monte Carlo noise) and,
    given `range_of` (the range of the timing model's gain of one MD over another:
    `tuiprof.model.timing.gain_range`), only when the whole range is a gain; otherwise the default
    is kept and the advice names the best MD with its range, as within the prediction's uncertainty.
    """
    occ = occupancy(arch, threads_per_cta, registers_per_thread, shared_per_cta, dynamic_shared)
    default = occ.ctas_per_sm
    cache_lines = arch.l1.size / arch.l1.line if arch.l1.enabled else 0.0
    by_md = {s.md: s for s in samples}
    if 1 not in by_md:
        raise UsageError("the MD decision needs the statistics of MD = 1 (Yen14 sec. 5.2)")
    md1 = by_md[1]
    ws = working_set_lines if working_set_lines is not None else md1.dram_reads_per_cta
    thesis = predict_thesis(md1, default, ws, cache_lines)
    if timing is not None and len(timing.times) < default:
        raise UsageError(f"the timing model covers MD 1..{len(timing.times)}, the decision needs 1..{default}")

    t_md = thesis.best_md if thesis.gain(thesis.best_md, default) > min_gain else default
    t_gain = thesis.gain(t_md, default)
    best_range: tuple[float, float] | None = None
    uncertain = ""
    if timing is not None:
        best = min(range(1, default + 1), key=lambda m: (timing.time(m).time_s, -m))
        rec = best if timing.gain(best, default) > min_gain else default
        if rec != default and range_of is not None:
            best_range = range_of(rec, default)
            if not best_range[0] > 0:
                uncertain = (f"; {_ctas(rec)}/SM is predicted {_pct(timing.gain(rec, default))} "
                             f"[{_pct(best_range[0])}..{_pct(best_range[1])}], a range that includes no gain")
                rec, best_range = default, None
        gain, head = timing.gain(rec, default), TIMING
    else:
        rec, gain, head = t_md, t_gain, THESIS
    low = timing is not None and speedup_disagreement(gain, t_gain) > LOW_CONFIDENCE_RATIO

    dyn: int | None
    if rec == default:
        dyn, apply = 0, f"nothing to change: the launch already runs {_ctas(default)}/SM"
    else:
        try:
            extra = dynamic_shared_for_md(arch, threads_per_cta, registers_per_thread,
                                          shared_per_cta + dynamic_shared, rec)
            dyn = dynamic_shared + extra
            apply = (f"launch with {dyn} B of dynamic shared memory per CTA "
                     f"(caps residency at {_ctas(rec)}/SM)")
        except UsageError:
            dyn = None
            apply = (f"{_ctas(rec)}/SM cannot be reached with dynamic shared memory on {arch.name}; "
                     "use __launch_bounds__ or more registers per thread")

    if head == THESIS:
        thesis_note = "thesis rules; no simulation per MD"
    elif t_md == rec:
        thesis_note = "thesis rules agree" if rec == default else f"thesis rules: also {_ctas(rec)}/SM, {_pct(t_gain)}"
    elif t_md == default:
        thesis_note = f"thesis rules: keep {default}"
    else:
        thesis_note = f"thesis rules: {_ctas(t_md)}/SM, {_pct(t_gain)}"
    if low:
        thesis_note += (f"; low confidence: the two predicted speedups differ by more than "
                        f"{LOW_CONFIDENCE_RATIO:g}x")
    if rec != default:
        advice = f"limit to {_ctas(rec)}/SM: predicted {_pct(gain)} ({thesis_note})"
    elif head == THESIS and thesis.compute_bound:
        advice = (f"keep {_ctas(default)}/SM: compute bound ({thesis.dram_per_inst:.3g} DRAM reads per warp "
                  f"instruction < {COMPUTE_BOUND_RATIO}) ({thesis_note})")
    else:
        why = ""
        if timing is not None:
            k = timing.time(default)
            why = f"; bound by {k.bound_label}"
        word = "surely" if uncertain else "predicted"
        advice = f"keep {_ctas(default)}/SM: no lower MD is {word} faster{uncertain}{why} ({thesis_note})"
    return MdDecision(default, occ.limiter, thesis, timing, head, rec, gain, t_md, t_gain, low,
                      dyn, apply, advice, best_range)
