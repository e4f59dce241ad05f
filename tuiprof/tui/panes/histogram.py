"""The Monte Carlo histogram: the distribution over trials of one quantity (Baghsorkhi12 Figs. 5-6),
its mean with its 95% confidence interval, std and the spread of trials, trials done / planned, a measured value (ncu) drawn as a dashed
marker like the paper's dashed line, and the convergence of the std with the number of trials
(Baghsorkhi12 Fig. 7)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from textual.content import Content
from textual.widget import Widget

from tuiprof.tui import format as fmt
from tuiprof.tui.themes import MUTED

if TYPE_CHECKING:
    from tuiprof.model.latency import Estimate
    from tuiprof.model.shared import PassStats

MAX_BINS = 24


@dataclass(frozen=True)
class Series:
    """What the histogram shows: per-trial values of one quantity and its estimate."""

    title: str
    values: np.ndarray
    estimate: "Estimate"
    """An Estimate (mean, std, spread of trials, confidence interval, n)."""
    ratio: bool
    """A hit ratio (shown in %) rather than cycles."""
    planned: int
    convergence: np.ndarray = field(default_factory=lambda: np.zeros(0))
    measured: float | None = None
    measured_label: str = ""
    baseline: np.ndarray | None = None
    """The pinned baseline's trials of the same quantity, drawn behind (`tuiprof.tui.delta`)."""


def _value(x: float | None, ratio: bool, digits: int | None = None) -> str:
    """A value of the series in its unit: the one rendering of ratios and cycles (`digits` only
    for the axis, whose ends need the span's)."""
    if digits is None:
        return fmt.pct(x) if ratio else fmt.cyc(x)
    return fmt.pct(x, digits) if ratio else (f"{fmt.num(x, digits)} cyc" if fmt.finite(x) else "—")


def axis_labels(lo: float, hi: float, ratio: bool, room: int) -> str:
    """The axis' two ends in `room` cells, the low one left and the high one right, at least a
    space apart: with the digits the span needs and the unit when they fit, else with fewer
    digits and no unit (the title names it), else the low end alone."""
    for d in range(fmt.decimals_for((hi - lo) / 4, ratio), -1, -1):
        for unit in (True,) if ratio else (True, False):
            left, right = (_value(lo, ratio, d), _value(hi, ratio, d)) if unit else (fmt.num(lo, d), fmt.num(hi, d))
            if len(left) + 1 + len(right) <= room:
                return left + right.rjust(room - len(left))
    return _value(lo, ratio, 0)[:room]


def axis_range(values: np.ndarray, measured: float | None, ratio: bool) -> tuple[float, float]:
    """The x axis: the data's own span (and the measured value's), widened by 5% of it on each
    side; a span of zero gets a sliver around the value (a ratio's 0.01 points, a cycle count's
    half cycle), so that one bar means one value, never padding."""
    lo, hi = float(values.min()), float(values.max())
    if measured is not None:
        lo, hi = min(lo, measured), max(hi, measured)
    span = hi - lo
    if span <= 0:
        pad = 1e-4 if ratio else 0.5
    else:
        pad = 0.05 * span
    lo, hi = lo - pad, hi + pad
    if ratio:
        lo, hi = max(0.0, lo), min(1.0, hi)
        if hi <= lo:
            lo, hi = max(0.0, hi - 1e-4), min(1.0, lo + 1e-4)
    return lo, hi


def render_histogram(s: Series | None, width: int, height: int, empty: str) -> Content:
    """The histogram of `s` drawn in `width` x `height` cells (text + theme styles)."""
    if s is None or width < 12 or height < 3:
        return Content.styled(empty, MUTED)
    v = np.asarray(s.values, dtype=np.float64)
    v = v[np.isfinite(v)]
    e = s.estimate
    lines: list[Content] = [Content.assemble((s.title, "bold"), (f"  {v.size}/{s.planned} trials", MUTED))
                            .truncate(width, ellipsis=True)]
    if v.size == 0:
        lines.append(Content.styled("no defined values yet (no accesses reached this level)", MUTED))
        return Content("\n").join(lines)
    m = s.measured if fmt.finite(s.measured) else None
    base = np.asarray(s.baseline, dtype=np.float64) if s.baseline is not None else np.zeros(0)
    base = base[np.isfinite(base)]
    lo, hi = axis_range(np.concatenate([v, base]), m, s.ratio)
    axis_w = 5
    plot_w = max(8, width - axis_w - 1)
    bins = max(4, min(MAX_BINS, plot_w))
    col = max(1, plot_w // bins)
    plot_w = bins * col
    counts, edges = np.histogram(v, bins=bins, range=(lo, hi))

    def column(x: float) -> int:
        return int(min(plot_w - 1, max(0, (x - lo) / (hi - lo) * plot_w)))

    counts_b = np.histogram(base, bins=bins, range=(lo, hi))[0] if base.size else np.zeros(bins, np.int64)
    chart_h = max(1, height - 7 - (1 if m is not None else 0) - (1 if base.size else 0))
    top = max(1, int(counts.max()), int(counts_b.max()))
    mcol = column(m) if m is not None else -1
    for r in range(chart_h, 0, -1):
        label = f"{top:>{axis_w - 1}} " if r == chart_h else " " * axis_w
        cells: list[tuple[str, str]] = [(label + "│", MUTED)]
        for b, c in enumerate(counts):
            eighths = c / top * chart_h * 8
            level = eighths - (r - 1) * 8
            glyph = "█" if level >= 8 else (fmt.EIGHTHS_V[int(round(level))] if level > 0 else " ")
            behind = glyph == " " and counts_b[b] / top * chart_h * 8 - (r - 1) * 8 >= 4  # the baseline's bar
            for k in range(col):
                x = b * col + k
                if x == mcol and glyph in " ▁▂▃":
                    cells.append(("┊", "bold $text-error"))
                elif behind:
                    cells.append(("░", "$text-muted"))
                else:
                    cells.append((glyph, "$primary"))
        lines.append(Content.assemble(*cells))
    lines.append(Content.styled(f"{0:>{axis_w - 1}} └" + "─" * plot_w, MUTED))
    # Spread of trials and mean under the axis: ├───▲───┤ (mean +- 1.96 std, mean).
    marks = [" "] * plot_w
    if fmt.finite(e.spread_lo) and fmt.finite(e.spread_hi):
        a, b = column(e.spread_lo), column(e.spread_hi)
        for x in range(a, b + 1):
            marks[x] = "─"
        marks[a], marks[b] = "├", "┤"
    if base.size:
        marks[column(float(base.mean()))] = "△"
    if fmt.finite(e.mean):
        marks[column(e.mean)] = "▲"
    if m is not None:
        marks[mcol] = "┊"
    lines.append(Content.assemble((" " * (axis_w + 1), ""), ("".join(marks), "$text-accent")))
    lines.append(Content.styled(" " * (axis_w + 1) + axis_labels(lo, hi, s.ratio, plot_w), MUTED))
    half = (e.ci_hi - e.ci_lo) / 2
    lines.append(Content.assemble(
        ("mean ", MUTED), (_value(e.mean, s.ratio), "bold"),
        (f" ±{_value(half, s.ratio)} (95% CI)", MUTED)))
    lines.append(Content.assemble(
        ("σ ", MUTED), (_value(e.std, s.ratio), ""),
        ("  trials 95% ", MUTED), (f"[{_value(e.spread_lo, s.ratio)}, {_value(e.spread_hi, s.ratio)}]", ""),
    ))
    if m is not None:
        lines.append(Content.assemble(("┊ measured ", "bold $text-error"), (_value(m, s.ratio), "bold"),
                                      (f"  {s.measured_label}", MUTED)))
    if base.size:
        from tuiprof.compare.baseline import delta_of
        from tuiprof.tui.delta import amount, p_value

        dd = delta_of(base, v)
        mark = "*" if dd.significant else ""
        change = "—" if dd.delta is None else amount(dd.delta, s.ratio)
        lines.append(Content.assemble(("░△ baseline ", MUTED), (_value(dd.base, s.ratio), ""),
                                      (" · Δ ", MUTED), (change + mark, "bold" if mark else ""),
                                      (f"  {p_value(dd)}", MUTED)))
    conv = np.asarray(s.convergence, dtype=np.float64)
    if conv.size >= 2:
        spark_w = max(4, width - 32)
        last = conv[np.isfinite(conv)][-1] if np.isfinite(conv).any() else float("nan")
        lines.append(Content.assemble(("σ vs trials ", MUTED), (fmt.sparkline(conv, spark_w), "$secondary"),
                                      (f" {_value(last, s.ratio)} (Fig. 7)",
                                       MUTED)))
    else:
        lines.append(Content.styled("σ vs trials: after 2 trials (Fig. 7)", MUTED))
    return Content("\n").join(line.truncate(width, ellipsis=True) for line in lines[:height])


class HistogramView(Widget):
    """A live histogram; `show` replaces the series and repaints (the app throttles calls)."""

    DEFAULT_CSS = """
    HistogramView { height: 1fr; min-height: 8; padding: 0 1; }
    HistogramView.-stale { text-opacity: 60%; }
    """

    def __init__(self, empty: str = "waiting for the first trial…", *, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.series: Series | None = None
        self.shared: "PassStats | None" = None
        self.empty = empty

    def show(self, series: Series | None, empty: str | None = None) -> None:
        self.series, self.shared = series, None
        if empty is not None:
            self.empty = empty
        self.refresh()

    def show_shared(self, stats: "PassStats") -> None:
        """A shared-memory op's wavefronts (a constant op's requests) per warp access instead of a
        distribution over trials."""
        self.series, self.shared = None, stats
        self.refresh()

    def render(self) -> Content:
        w, h = self.content_size.width, self.content_size.height
        if self.shared is not None:
            return render_wavefronts(self.shared, w, h)
        return render_histogram(self.series, w, h, self.empty)


def render_wavefronts(st: "PassStats", width: int, height: int) -> Content:
    """A shared-memory op's requests by wavefronts needed (bank conflicts, as Nsight Compute counts
    them), or a constant op's warp accesses by constant-cache requests (distinct addresses): one
    bar per count from 1 to the most seen, the ideal marked. Deterministic: the same in every
    trial, so no trials and no spread."""
    hist = np.asarray(st.histogram, dtype=np.int64)
    top_k = int(np.flatnonzero(hist)[-1]) if hist.any() else 1
    counts = hist[1:top_k + 1]
    per = "wavefronts per request" if st.space == "shared" else "constant-cache requests per warp access"
    count = "requests" if st.space == "shared" else "warp accesses"
    title = Content.assemble((per, "bold"), (f"  {st.warp_accesses:,} {count} · the same in every trial", MUTED))
    lines = [title.truncate(width, ellipsis=True)]
    if width < 12 or height < 4 or counts.size == 0:
        return Content("\n").join(lines)
    label_w = max(3, len(str(top_k)) + 1)
    bar_w = max(4, width - label_w - 12)
    rows = max(1, height - 3)
    shown = [k for k in range(1, top_k + 1) if hist[k]] or [1]
    if len(shown) > rows:  # the most frequent counts, in order
        shown = sorted(sorted(shown, key=lambda k: -hist[k])[:rows])
    peak = max(1, int(max(hist[k] for k in shown)))
    ideal = int(round(st.ideal))
    for k in shown:
        n = int(hist[k])
        bar = fmt.hbar(n / peak, bar_w).rstrip()
        mark = " ideal" if k == ideal else ""
        lines.append(Content.assemble((f"{k:>{label_w}} ", MUTED),
                                      (bar, "$success" if k <= ideal else "$error"),
                                      (f" {fmt.pct(n / max(1, st.warp_accesses), 0)}{mark}", MUTED)))
    lines.append(Content.assemble(("mean ", MUTED), (f"{st.passes:.2f}", "bold"),
                                  (f" {per}, ideal {st.ideal:.0f}; X {fmt.cyc(st.latency)}", MUTED)))
    return Content("\n").join(line.truncate(width, ellipsis=True) for line in lines[:height])
