"""`tuiprof validate`'s comparison: each prediction of a run against what Nsight Compute measured for
the same kernel (`compare`), and the table that prints them side by side (`render`). Running ncu,
reading its CSV and the uninstrumented run it profiles are the GPU wing's
(`tuiprof.collect.gpu.ncu`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tuiprof.metrics import BY_KEY, HEADLINE_METRICS, Predictor
from tuiprof.metrics import METRICS as REGISTRY

if TYPE_CHECKING:
    from tuiprof.model.analysis import Analysis


@dataclass(frozen=True)
class Comparison:
    """One metric: the prediction (mean and the spread of trials, where one run may fall), the
    measurement, |prediction - measurement|."""

    key: str
    predicted: float
    low: float
    high: float
    measured: float

    @property
    def abs_error(self) -> float:
        return abs(self.predicted - self.measured)

    @property
    def inside(self) -> bool:
        return self.low <= self.measured <= self.high


def predicted_sectors_per_request(analysis: "Analysis") -> float | None:
    """Global-load sectors per request as Nsight Compute counts them (a request is one warp
    instruction: l1tex__t_sectors / l1tex__t_requests), over the snapshot's global loads."""
    sectors = accesses = 0.0
    for s in analysis.ops:
        if s.op.kind == "load" and s.op.space == "global" and s.warp_accesses:
            accesses += s.warp_accesses
            sectors += s.warp_accesses * s.sectors_per_access
    return sectors / accesses if accesses else None


def predicted_wavefronts_per_request(analysis: "Analysis", kind: str) -> float | None:
    """Shared-memory wavefronts per warp instruction of the snapshot's shared loads (``kind``
    "load") or stores, as Nsight Compute counts them (`tuiprof.model.shared`)."""
    total = requests = 0.0
    for s in analysis.ops:
        p = s.passes
        if p is not None and p.space == "shared" and (s.op.kind == "load") == (kind == "load"):
            total += p.passes * p.warp_accesses
            requests += p.warp_accesses
    return total / requests if requests else None


def compare(analysis: "Analysis", measured: dict[str, float]) -> list[Comparison]:
    """Each measured key against the analysis's headline estimate (sectors and wavefronts per
    request have no spread: the snapshot's coalescing and banks are exact, the interval is the
    value itself)."""
    out: list[Comparison] = []
    for m in HEADLINE_METRICS:
        est = analysis.headline.get(m.key)
        if m.key in measured and est is not None and est.mean == est.mean:
            out.append(Comparison(m.key, float(est.mean), float(est.spread_lo), float(est.spread_hi), measured[m.key]))
    exact: dict[Predictor, Callable[[], float | None]] = {
        "sectors per request": lambda: predicted_sectors_per_request(analysis),
        "shared load wavefronts": lambda: predicted_wavefronts_per_request(analysis, "load"),
        "shared store wavefronts": lambda: predicted_wavefronts_per_request(analysis, "store")}
    for m in REGISTRY:
        value = exact[m.predictor]() if m.predictor in exact and m.key in measured else None
        if value is not None:
            out.append(Comparison(m.key, value, value, value, measured[m.key]))
    return out


LABELS = {m.key: m.label for m in REGISTRY}
COUNTS = frozenset(m.key for m in REGISTRY if not m.is_ratio)
"""Keys that are counts per request, not ratios (no interval, errors in their own units)."""


def render(rows: list[Comparison]) -> str:
    """Prediction against measurement, per metric, with the absolute error (percentage points for
    ratios)."""
    table = [["metric", "predicted", "95% interval", "measured (ncu)", "abs. error", ""]]
    for c in rows:
        m = BY_KEY[c.key]
        if not m.is_ratio:
            table.append([m.label, m.format(c.predicted), "-", m.format(c.measured), m.format_error(c.abs_error), ""])
        else:
            table.append([m.label, m.format(c.predicted), f"{100 * c.low:.1f}-{100 * c.high:.1f}%",
                          m.format(c.measured), m.format_error(c.abs_error), "inside" if c.inside else "outside"])
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in table]
    ratios = [c.abs_error for c in rows if BY_KEY[c.key].is_ratio]
    if ratios:
        lines.append(f"mean absolute error of the hit ratios: {100 * sum(ratios) / len(ratios):.1f} percentage points")
    return "\n".join(lines) + "\n"
