"""A pinned run (the UI's baseline) against the run shown now: per op and kernel-wide deltas, each
with Welch's test over the two runs' trials, as `tuiprof diff` computes them.

The baseline is a `RunRecord` (its trials and its ops), so it outlives its session: reruns, MD and
arch changes, what-ifs and a recollect after an edit of the source (whose ops are matched to the
baseline's by `tuiprof.compare.match`) are all compared with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tuiprof.compare.match import match_ops, refs_of_ops, refs_of_trace
from tuiprof.compare.record import HEADLINE_KEYS, RunRecord
from tuiprof.model.latency import estimate
from tuiprof.model.significance import welch

if TYPE_CHECKING:
    from tuiprof.model.analysis import Analysis
    from tuiprof.trace.data import Trace

OP_METRICS = ("h1", "h2", "x")


@dataclass(frozen=True)
class Delta:
    """One figure, baseline -> now, with Welch's test of the change (p None: not testable)."""

    base: float | None
    now: float | None
    delta: float | None
    p: float | None
    significant: bool


def delta_of(base: np.ndarray, now: np.ndarray) -> Delta:
    """The change from the trials `base` to the trials `now`."""
    eb, en = estimate(base), estimate(now)
    w = welch(base, now)

    def f(x: float) -> float | None:
        return float(x) if math.isfinite(x) else None

    return Delta(f(eb.mean) if eb.defined else None, f(en.mean) if en.defined else None,
                 f(w.delta) if eb.defined and en.defined else None, w.p, w.significant())


def op_map(baseline: RunRecord, trace: "Trace") -> dict[int, int]:
    """Each op of `trace` -> its op in the baseline (ops with no counterpart are left out)."""
    m = match_ops(refs_of_ops(baseline.ops), baseline.sources, refs_of_trace(trace), {s.name: s.text for s in trace.sources})
    return {p.b: p.a for p in m.pairs}


def op_deltas(baseline: RunRecord, mapping: dict[int, int], analysis: "Analysis") -> dict[int, dict[str, Delta]]:
    """H1, H2 and X of every matched op of `analysis`, baseline -> now."""
    out = {}
    for now_id, base_id in mapping.items():
        if now_id >= len(analysis.ops):
            continue
        out[now_id] = {m: delta_of(baseline.samples(base_id, m), analysis.samples.get(f"op{now_id}.{m}", np.zeros(0)))
                       for m in OP_METRICS}
    return out


def kernel_deltas(baseline: RunRecord, analysis: "Analysis") -> dict[str, Delta]:
    """The headline hit ratios and the kernel time (per-trial times when the run has them),
    baseline -> now; the time's `base` and `now` are the timing model's headline times."""
    out = {k: delta_of(baseline.headline[i], analysis.samples[k]) for i, k in enumerate(HEADLINE_KEYS)}
    d = analysis.decisions
    if d is not None and d.time_trials:
        t = delta_of(baseline.time, np.asarray(d.time_trials))
        base = baseline.meta["time"]["time_s"]
        out["time_s"] = Delta(base, d.time.time_s, d.time.time_s - base if base is not None else None, t.p,
                              t.significant)
    return out


def baseline_values(baseline: RunRecord, mapping: dict[int, int], metric: str, op: int | None) -> np.ndarray | None:
    """The baseline's trials of the histogram's `metric` (a headline key, or an op part of the
    current op `op`), or None when the baseline has no counterpart."""
    if metric in HEADLINE_KEYS:
        return baseline.headline[HEADLINE_KEYS.index(metric)]
    if op is None or op not in mapping:
        return None
    return baseline.samples(mapping[op], metric)
