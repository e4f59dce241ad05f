"""The measured metrics: every value a GPU measures that tuiprof predicts, spelled once.

Each `Metric` names its key (in a trace's ``provenance.measured`` and in
``demo_traces/measured.json``), the label every view prints, the Nsight Compute metrics it is
read from, its unit, what predicts it, how it is written and the largest value a trace may
claim. `tuiprof.validate` reads ncu's output and compares through it, the report and the UI's
histogram label and format it, the trace loader bounds it (`tuiprof.trace.data.measured_range`),
and `tuiprof.model.analysis.HEADLINES` are its kernel-wide hit ratios. Adding a measured metric
is one entry here (and its predictor in `tuiprof.validate.compare` when it is a new kind).

Data only: no import of the pipeline, so every layer may read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Unit = Literal["ratio", "per request"]
"""``ratio``: a share in 0..1 (ncu gives a percentage); ``per request``: a count per request."""
Predictor = Literal["headline", "sectors per request", "shared load wavefronts", "shared store wavefronts"]
"""What predicts a metric: the kernel-wide headline ratio of the same key (`Analysis.headline`,
a mean with the spread of trials), or a count over the snapshot's ops that has no spread
(`tuiprof.validate.predicted_sectors_per_request`, `predicted_wavefronts_per_request`)."""

MAX_SECTORS_PER_REQUEST = 64.0
"""Largest sectors-per-request a measured value may claim: 32 lanes, each touching two sectors."""
MAX_WAVEFRONTS_PER_REQUEST = 128.0
"""Largest shared-memory wavefronts-per-request a measured value may claim: 32 lanes of 16 B in
quarter-warps, each lane's four words in one bank."""


@dataclass(frozen=True)
class Metric:
    """One measured metric (see the module docstring)."""

    key: str
    label: str
    ncu: tuple[str, ...]
    """The Nsight Compute metric (one), or the counters whose quotient it is (numerator, denominator)."""
    unit: Unit
    predictor: Predictor
    upper: float = 1.0
    """The largest value a trace may carry (the smallest is 0)."""
    meaning: str = "a ratio"
    """What a value is, in words (the loader's message when one is out of range)."""

    @property
    def is_ratio(self) -> bool:
        return self.unit == "ratio"

    def format(self, value: float) -> str:
        """A value as the validation table writes it: ``12.5%`` for a ratio, ``4.00`` for a count."""
        return f"{100 * value:.1f}%" if self.is_ratio else f"{value:.2f}"

    def format_error(self, error: float) -> str:
        """An absolute error: percentage points for a ratio, the count's own unit otherwise."""
        return f"{100 * error:.1f} pts" if self.is_ratio else f"{error:.2f}"

    def from_ncu(self, metrics: Mapping[str, float | None], units: Mapping[str, str]) -> float | None:
        """The metric's value from one launch's ncu metrics (a percentage made a ratio; a quotient
        of two counters, None when the denominator is 0 or a counter is missing)."""
        if len(self.ncu) == 2:
            num, den = metrics.get(self.ncu[0]), metrics.get(self.ncu[1])
            return num / den if num is not None and den else None
        v = metrics.get(self.ncu[0])
        if v is None:
            return None
        return v / 100.0 if self.is_ratio and units.get(self.ncu[0], "%") in ("%", "") else v


def _wavefronts(kind: str, op: str, predictor: Predictor) -> Metric:
    return Metric(f"shared_{op}_wavefronts_per_request", f"wavefronts / request (shared {kind}s)",
                  (f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum", f"smsp__sass_inst_executed_op_shared_{op}.sum"),
                  "per request", predictor, MAX_WAVEFRONTS_PER_REQUEST, "wavefronts per request")


METRICS: tuple[Metric, ...] = (
    Metric("l1_read", "L1 read hit ratio", ("l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct",), "ratio",
           "headline"),
    Metric("l2_read", "L2 read hit ratio", ("lts__t_sector_op_read_hit_rate.pct",), "ratio", "headline"),
    Metric("l2_write", "L2 write hit ratio", ("lts__t_sector_op_write_hit_rate.pct",), "ratio", "headline"),
    Metric("sectors_per_request", "sectors / request (global loads)",
           ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"),
           "per request", "sectors per request", MAX_SECTORS_PER_REQUEST, "sectors per request"),
    _wavefronts("load", "ld", "shared load wavefronts"),
    _wavefronts("store", "st", "shared store wavefronts"),
)
"""Every measured metric, in the order the validation table lists them."""
BY_KEY: dict[str, Metric] = {m.key: m for m in METRICS}
HEADLINE_METRICS: tuple[Metric, ...] = tuple(m for m in METRICS if m.predictor == "headline")
"""The kernel-wide hit ratios every view leads with (Baghsorkhi12 Figs. 5-6)."""

SPELLINGS = ("", "_hit", "_hit_ratio", "_hit_rate")
"""The spellings of a hit ratio's key a trace may carry (``l1_read``, ``l1_read_hit``,
``l1_read_hit_ratio``, and ``l1_read_hit_rate`` in percent), in the order they are looked for:
traces written by other tools or by hand name ncu's rates these ways."""


def measured_in(measured: Mapping[str, float], key: str) -> tuple[float, str] | None:
    """The value of `key` (a metric's key, or an op's ``op<N>.h1``) that `measured` carries under
    any of its `SPELLINGS`, as a ratio (a ``_rate`` in percent divided by 100), and the spelling
    found; None when it carries none that is a finite number."""
    for suffix in SPELLINGS:
        name = key + suffix
        v = measured.get(name)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf"):
            return (float(v) / 100.0 if suffix == "_hit_rate" else float(v)), name
    return None


__all__ = ["BY_KEY", "HEADLINE_METRICS", "MAX_SECTORS_PER_REQUEST", "MAX_WAVEFRONTS_PER_REQUEST", "METRICS", "Metric",
           "Predictor", "SPELLINGS", "Unit", "measured_in"]
