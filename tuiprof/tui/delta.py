"""The baseline in the UI: `b` pins the run shown as the baseline, and every view then shows its
figures against it (`tuiprof.compare.baseline`): a ΔX column in the source gutter, the cursor op's
changes under the code, the baseline's histogram behind the current one, a section of the
drill-down and lines of the model pane. `B` clears it. This module holds the baseline's state for
one analysis (computed lazily, op by op, and kept until the analysis changes) and the text of each
view; the panes only place it.

A change is marked `*` when Welch's test over the two runs' trials finds it significant at 5%
(`tuiprof.model.significance`); better is green, worse red, and the sign and the mark say the same
without colour.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from textual.content import Content

from tuiprof.compare.baseline import Delta, baseline_values, kernel_deltas, op_deltas, op_map
from tuiprof.tui import format as fmt
from tuiprof.tui.metrics import Levels
from tuiprof.tui.panes.md import seconds
from tuiprof.tui.themes import MUTED

if TYPE_CHECKING:
    from tuiprof.compare.record import RunRecord
    from tuiprof.model.analysis import Analysis
    from tuiprof.trace.data import Trace

GUTTER = 6
"""Cells the ΔX column adds to the source gutter (a space and five)."""
LOWER_IS_BETTER = {"x": True, "time_s": True, "h1": False, "h2": False, "l1_read": False, "l2_read": False,
                   "l2_write": False}


@dataclass(frozen=True, eq=False)
class Baseline:
    """The pinned run: its record (trials, ops, sources) and how the UI names it."""

    record: "RunRecord"
    label: str
    """Kernel, arch, MD, seed and trials (the drill-down and the model pane)."""
    short: str = ""
    """Arch, MD and seed (the status bar)."""


@dataclass(eq=False)
class Against:
    """The run shown now against the baseline: deltas per op (as they are asked for) and kernel-wide."""

    baseline: Baseline
    trace: "Trace"
    analysis: "Analysis"
    mapping: dict[int, int]
    _ops: dict[int, dict[str, Delta] | None] = field(default_factory=dict)
    _kernel: dict[str, Delta] | None = None

    def op(self, op_id: int) -> dict[str, Delta] | None:
        """H1, H2, X of op `op_id` against its baseline op; None when the baseline has none."""
        if op_id not in self._ops:
            one = {op_id: self.mapping[op_id]} if op_id in self.mapping else {}
            self._ops[op_id] = op_deltas(self.baseline.record, one, self.analysis).get(op_id)
        return self._ops[op_id]

    def kernel(self) -> dict[str, Delta]:
        if self._kernel is None:
            self._kernel = kernel_deltas(self.baseline.record, self.analysis)
        return self._kernel

    def values(self, metric: str, op: int | None) -> np.ndarray | None:
        """The baseline's trials of a histogram metric, to draw behind the current ones."""
        return baseline_values(self.baseline.record, self.mapping, metric, op)


def against(baseline: Baseline | None, trace: "Trace | None", analysis: "Analysis | None",
            previous: Against | None = None) -> Against | None:
    """The comparison of `analysis` (of `trace`) with `baseline`, reusing `previous`'s op matching
    when the trace and the baseline are the same."""
    if baseline is None or trace is None or analysis is None:
        return None
    if previous is not None and previous.analysis is analysis and previous.baseline is baseline:
        return previous
    if previous is not None and previous.trace is trace and previous.baseline is baseline:
        return Against(baseline, trace, analysis, previous.mapping)
    return Against(baseline, trace, analysis, op_map(baseline.record, trace))


def _style(d: Delta, metric: str) -> str:
    if not d.significant or not d.delta:
        return MUTED
    worse = (d.delta > 0) == LOWER_IS_BETTER.get(metric, True)
    return "bold $text-error" if worse else "bold $text-success"


def change(d: Delta | None, metric: str) -> str:
    """A change as text: '+3.2 pts*' for a ratio, '-48 cyc*' for cycles; '*' when significant."""
    if d is None or d.delta is None:
        return "—"
    mark = "*" if d.significant else ""
    if metric == "time_s":
        if not d.base:
            return "—"
        rel = d.delta / d.base
        return f"{'-' if rel < 0 else '+'}{fmt.pct(abs(rel))}{mark}"  # '+2.4%', '-0.000026%'; never an exponent
    return amount(d.delta, ratio=metric not in ("x", "tm")) + mark


def amount(delta: float, ratio: bool) -> str:
    """A change, signed, in the one rendering of its unit (`tuiprof.tui.format`): '+3.2 pts',
    '+0.15 pts' for ratios (percentage points), '-48 cyc', '+8.6 cyc' for cycles."""
    sign = "-" if delta < 0 else "+"
    return f"{sign}{fmt.pct(abs(delta))[:-1]} pts" if ratio else f"{sign}{fmt.cycles(abs(delta))} cyc"


def p_value(d: Delta) -> str:
    return "p n/a" if d.p is None else ("p<0.001" if d.p < 0.001 else f"p {d.p:.3f}")


def gutter_cell(d: dict[str, Delta] | None, has_row: bool) -> Content:
    """The gutter's ΔX column for one op (5 cells after a space): '  -48*', ' +1.2k*', '   new'."""
    if not has_row:
        return Content(" " * GUTTER)
    if d is None:
        return Content.styled(f"{'new':>{GUTTER}}", f"{MUTED} italic")
    x = d["x"]
    if x.delta is None:
        return Content.styled(f"{'-':>{GUTTER}}", MUTED)
    text = f"{x.delta:+.0f}"
    if len(text) > 4:
        text = ("+" if x.delta > 0 else "-") + fmt.short(abs(x.delta), 3).strip()
    return Content.styled(f"{text + ('*' if x.significant else ' '):>{GUTTER}}", _style(x, "x"))


def op_summary(d: dict[str, Delta] | None, h1: bool) -> list[tuple[str, str]]:
    """The cursor op against the baseline, for the line under the code (H1's change when `h1`:
    a load on a GPU with an L1)."""
    if d is None:
        return [(" · not in the baseline", f"{MUTED} italic")]
    parts = [(" · vs baseline ", MUTED), (f"X {change(d['x'], 'x')}", _style(d["x"], "x"))]
    if h1:
        parts.append((f" H1 {change(d['h1'], 'h1')}", _style(d["h1"], "h1")))
    return parts


def drill_lines(baseline: Baseline, d: dict[str, Delta] | None, levels: Levels = Levels()) -> list[Content]:
    """The drill-down's section: each figure baseline -> now, the change and its p-value (no
    figures of a cache level the GPU shown lacks)."""
    title = Content.assemble(("Against the baseline", "bold"), (f"  {baseline.label}", MUTED))
    if d is None:
        return [title, Content.styled("this op has no counterpart in the baseline (new, or its line changed "
                                      "beyond matching)", MUTED)]
    out = [title]
    for metric, name in (("h1", "H1"), ("h2", "H2"), ("x", "X")):
        if not levels.has(metric):
            continue
        x = d[metric]
        show = fmt.cyc if metric == "x" else fmt.pct
        out.append(Content.assemble((f"{name:<3}", MUTED), (f"{show(x.base)} → {show(x.now)}  ", ""),
                                    (change(x, metric), _style(x, metric)), (f"  {p_value(x)}", MUTED)))
    out.append(Content.styled("* significant at 5% (Welch's t-test over the trials; the model's randomness only)",
                              MUTED))
    return out


def model_lines(a: Against, levels: Levels = Levels()) -> list[Content]:
    """The model pane's lines: the kernel time and the headline hit ratios against the baseline
    (those of the cache levels the GPU shown has)."""
    k = a.kernel()
    out = [Content.assemble(("vs baseline ", "bold"), (a.baseline.label, MUTED))]
    t = k.get("time_s")
    if t is not None and t.base is not None and t.now is not None:
        speed = t.base / t.now if t.now else None
        out.append(Content.assemble(("time ", MUTED), (f"{seconds(t.base)} → {seconds(t.now)} ", ""),
                                    (change(t, "time_s"), _style(t, "time_s")),
                                    (f" ({speed:.2f}x) {p_value(t)}" if speed else f" {p_value(t)}", MUTED)))
    parts: list[tuple[str, str]] = []
    for key, name, level in (("l1_read", "L1", levels.l1), ("l2_read", "L2", levels.l2)):
        if not level:
            continue
        d = k[key]
        parts += [(f"{name} {fmt.pct(d.base)} → {fmt.pct(d.now)} ", ""), (change(d, key), _style(d, key)),
                  ("  ", "")]
    if parts:
        out.append(Content.assemble(*parts))
    return out


def status_part(baseline: Baseline) -> tuple[tuple[str, str], ...]:
    """The status line's field naming the baseline: 'Δ vs tesla-c2050 · MD 2 · seed 0'."""
    return (("Δ vs ", MUTED), (baseline.short or baseline.label, "bold $text-accent"))
