"""The MD decision: both predictions side by side (the timing model, paper 002's thesis rules), the
default and the recommended MD, the predicted gain with its range and confidence, and how to apply it. While the MD sweep runs
the pane shows its progress; `m` picks an MD to rerun at."""

from __future__ import annotations

from typing import Any

from textual.content import Content
from textual.widget import Widget

from tuiprof.tui import format as fmt
from tuiprof.tui.text import MAX_MESSAGE, clean


def md_marks(md: int, decision: Any, current: int | None) -> str:
    """Glyphs for an MD row: D default, ★ recommended, ▸ the MD being simulated."""
    return (("▸" if md == current else " ") + ("D" if md == decision.default_md else " ")
            + ("★" if md == decision.recommended_md else " "))


def render_md(decisions: Any | None, sweep: Any | None, current: int | None, width: int) -> Content:
    title = Content.assemble(("MD decision", "bold"), ("  (CTAs per SM: timing model, paper 002 beside it)", "$text-muted"))
    if decisions is None:
        return Content("\n").join([title, Content.styled("waiting for the main run…", "$text-muted")])
    d = decisions.md
    if d is None:
        lines = [title]
        if decisions.md_note:
            lines.append(Content.styled(clean(decisions.md_note, MAX_MESSAGE, newlines=True), "$text-warning"))
        elif sweep is not None:
            k = sweep.mds.index(sweep.md) if sweep.md in sweep.mds else 0
            lines.append(Content.assemble(("waiting for the MD sweep… ", "$text-muted"),
                                          (f"MD {sweep.md} ({k + 1} of {len(sweep.mds)}): "
                                           f"{sweep.done}/{sweep.planned} trials", "")))
        else:
            lines.append(Content.styled("waiting for the MD sweep…", "$text-muted"))
        for s in decisions.md_samples:
            lines.append(Content.styled(f"  MD {s.md:>2}: L1 miss {fmt.pct(s.miss_rate, 1)}, "
                                        f"DRAM reads/CTA {fmt.num(s.dram_reads_per_cta, 1)}", "$text-muted"))
        return Content("\n").join(lines)
    timing = d.timing
    sims = {s.md: s for s in decisions.md_samples}
    lines = [title, Content.assemble(
        ("default ", "$text-muted"), (f"{d.default_md}", "bold"), (f" (by {d.limiter}) → recommended ", "$text-muted"),
        (f"{d.recommended_md}", "bold $text-success"), ("  gain ", "$text-muted"),
        (d.gain_label, "bold $text-warning" if d.low_confidence else "bold"), (f"  [{d.headline}]", "$text-muted"))]
    lines.append(Content.styled("     MD   miss  DRAM/CTA  thesis P timing P", "$text-muted"))
    perf = [timing.relative_performance(m) for m in range(1, len(timing.times) + 1)] if timing else \
        [r.relative_performance for r in d.thesis.rows]
    best_p = max((x for x in perf if fmt.finite(x)), default=1.0)
    for r in d.thesis.rows:
        srow = sims.get(r.md)
        src = srow or r
        p = timing.relative_performance(r.md) if timing is not None and r.md <= len(timing.times) else None
        bar = fmt.hbar((p if p is not None else r.relative_performance) / best_p if best_p else None,
                       max(0, min(12, width - 46)))
        style = "bold" if r.md == d.recommended_md else ""
        lines.append(Content.assemble(
            (f"  {md_marks(r.md, d, current)}", "bold $text-success" if r.md == d.recommended_md else "$text-accent"),
            (f"{r.md:>3} {fmt.pct(src.miss_rate, 0, 6)} {fmt.num(src.dram_reads_per_cta, 1, 9)}"
             f" {fmt.num(r.relative_performance, 2, 9)} {fmt.num(p, 2, 8)} ", style), (bar, "$primary")))
    lines.append(Content.styled("  ▸ simulated now · D default · ★ recommended · P = throughput vs MD 1",
                                "$text-muted"))
    lines.append(Content.assemble(("apply: ", "bold"), (clean(d.apply, MAX_MESSAGE, newlines=True), "")))
    if d.advice:
        lines.append(Content.styled(clean(d.advice, MAX_MESSAGE, newlines=True), "$text-muted"))
    return Content("\n").join(lines)


class MdPane(Widget):
    DEFAULT_CSS = "MdPane { height: auto; padding: 0 1; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.decisions: Any = None
        self.sweep: Any = None
        self.current: int | None = None

    def show(self, decisions: Any | None, sweep: Any | None, current: int | None) -> None:
        self.decisions, self.sweep, self.current = decisions, sweep, current
        self.refresh(layout=True)

    def render(self) -> Content:
        return render_md(self.decisions, self.sweep, self.current, self.content_size.width or 60)
