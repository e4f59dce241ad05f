"""The quantities the histogram pane can show, and the measured (ncu) value of each.

A metric is one of an op's own (X, H1, H2: of the op under the cursor, or of L1, the costliest
load, when the cursor is on no op) or one of the kernel-wide headline ratios. The default is
the op's X: the hottest load's latency is what a developer looks at first, and a kernel ratio
can be 0% for a whole kernel."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tuiprof.metrics import measured_in
from tuiprof.model.analysis import HEADLINES, running_std
from tuiprof.tui.panes.histogram import Series
from tuiprof.tui.text import MAX_LABEL, clean

if TYPE_CHECKING:
    from tuiprof.arch.spec import Arch
    from tuiprof.model.analysis import Analysis

OP_PARTS = {"x": "X expected latency (cyc)", "h1": "H1 (L1 hit ratio)", "h2": "H2 (L2 hit ratio)"}
METRICS = (*OP_PARTS, *HEADLINES)
"""The order `]` steps through; the first is the default."""
DEFAULT = METRICS[0]
LEVEL_OF = {"h1": "l1", "l1_read": "l1", "h2": "l2", "l2_read": "l2", "l2_write": "l2"}
"""The cache level each hit-ratio metric is about."""


@dataclass(frozen=True)
class Levels:
    """Which cache levels the simulated GPU has. An absent level's figures are not shown (issue
    25: on a gtx480, whose L2 is disabled, the simulator still reports H2 = 0 for every op)."""

    l1: bool = True
    l2: bool = True

    @classmethod
    def of(cls, arch: "Arch") -> "Levels":
        return cls(arch.l1.enabled, arch.l2.enabled)

    def has(self, metric: str) -> bool:
        """Whether `metric` (a key of METRICS) means anything on this GPU."""
        level = LEVEL_OF.get(metric)
        return level is None or getattr(self, level)

    def metrics(self) -> tuple[str, ...]:
        """The metrics `[`/`]` step through here."""
        return tuple(m for m in METRICS if self.has(m))

    def formula(self) -> str:
        """Baghsorkhi12's X (sec. 6.1) with the absent levels' terms left out."""
        if self.l1 and self.l2:
            return "X = H1·t1 + (1−H1)·[H2·t2 + (1−H2)·Tm]"
        if self.l1:
            return "X = H1·t1 + (1−H1)·Tm"
        return "X = H2·t2 + (1−H2)·Tm" if self.l2 else "X = Tm"


def measured_value(measured: dict[str, float], key: str) -> tuple[float | None, str]:
    """The hardware counter value for `key` if the trace carries one under any of its spellings
    (`tuiprof.metrics.measured_in`), in the unit the pane draws; the loader keeps each within its
    meaning (`trace.data.measured_range`)."""
    found = measured_in(measured, key)
    if found is None:
        return None, ""
    return found[0], f"({found[1]}, measured on the GPU)"


def series(analysis: "Analysis | None", metric: str, op: int | None, measured: dict[str, float]) -> Series | None:
    """The Series of `metric` in `analysis`: a headline ratio, or part `metric` of op `op` (None
    before the first trial, or for an op metric without an op)."""
    if analysis is None:
        return None
    if metric in HEADLINES:
        if metric not in analysis.samples:
            return None
        m, label = measured_value(measured, metric)
        return Series(f"{HEADLINES[metric]} · kernel", analysis.samples[metric], analysis.headline[metric], True,
                      analysis.planned, analysis.convergence[metric] if metric in analysis.convergence
                      else running_std(analysis.samples[metric]),
                      m, label)
    key = f"op{op}.{metric}"
    if op is None or key not in analysis.samples:
        return None
    s = analysis.ops[op]
    rank = analysis.ranks().get(op)
    est = {"h1": s.h1, "h2": s.h2, "x": s.x}[metric]
    title = f"{OP_PARTS[metric]} · {rank + ' ' if rank else ''}op {op} {clean(s.op.label, MAX_LABEL)} (line {s.op.line})"
    values = analysis.samples[key]
    m, label = measured_value(measured, key)
    return Series(title, values, est, metric != "x", analysis.planned, running_std(values), m, label)
