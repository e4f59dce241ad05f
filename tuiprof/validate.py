"""`tuiprof validate`'s comparison: each prediction of a run against what Nsight Compute measured for
the same kernel (`compare`), and the table that prints them side by side (`render`). Running ncu,
reading its CSV and the uninstrumented run it profiles are the GPU wing's
(`tuiprof.collect.gpu.ncu`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tuiprof.collect.gpu.ncu import HIT_RATES

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
    for key, _ in HIT_RATES:
        est = analysis.headline.get(key)
        if key in measured and est is not None and est.mean == est.mean:
            out.append(Comparison(key, float(est.mean), float(est.spread_lo), float(est.spread_hi), measured[key]))
    exact = {"sectors_per_request": predicted_sectors_per_request(analysis),
             "shared_ld_wavefronts_per_request": predicted_wavefronts_per_request(analysis, "load"),
             "shared_st_wavefronts_per_request": predicted_wavefronts_per_request(analysis, "store")}
    for key, value in exact.items():
        if key in measured and value is not None:
            out.append(Comparison(key, value, value, value, measured[key]))
    return out


LABELS = {"l1_read": "L1 read hit ratio", "l2_read": "L2 read hit ratio", "l2_write": "L2 write hit ratio",
          "sectors_per_request": "sectors / request (global loads)",
          "shared_ld_wavefronts_per_request": "wavefronts / request (shared loads)",
          "shared_st_wavefronts_per_request": "wavefronts / request (shared stores)"}
COUNTS = frozenset({"sectors_per_request", "shared_ld_wavefronts_per_request", "shared_st_wavefronts_per_request"})
"""Keys that are counts per request, not ratios (no interval, errors in their own units)."""


def render(rows: list[Comparison]) -> str:
    """Prediction against measurement, per metric, with the absolute error (percentage points for
    ratios)."""
    table = [["metric", "predicted", "95% interval", "measured (ncu)", "abs. error", ""]]
    for c in rows:
        if c.key in COUNTS:
            table.append([LABELS[c.key], f"{c.predicted:.2f}", "-", f"{c.measured:.2f}", f"{c.abs_error:.2f}", ""])
        else:
            table.append([LABELS[c.key], f"{100 * c.predicted:.1f}%", f"{100 * c.low:.1f}-{100 * c.high:.1f}%",
                          f"{100 * c.measured:.1f}%", f"{100 * c.abs_error:.1f} pts",
                          "inside" if c.inside else "outside"])
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in table]
    ratios = [c.abs_error for c in rows if c.key not in COUNTS]
    if ratios:
        lines.append(f"mean absolute error of the hit ratios: {100 * sum(ratios) / len(ratios):.1f} percentage points")
    return "\n".join(lines) + "\n"
