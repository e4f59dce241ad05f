"""The MD decision (paper 002): both predictions side by side (thesis rules, simulation), the
default and the recommended MD, the predicted gain and how to apply it. While the MD sweep runs
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
    title = Content.assemble(("MD decision", "bold"), ("  (paper 002: CTAs per SM)", "$text-muted"))
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
    sim = d.simulated
    gain = f"{100 * d.gain:+.1f}%"
    if decisions.gain_interval is not None:
        lo, hi = decisions.gain_interval
        gain += f" [{100 * lo:+.0f}%…{100 * hi:+.0f}%]"
    lines = [title, Content.assemble(
        ("default ", "$text-muted"), (f"{d.default_md}", "bold"), (f" (by {d.limiter}) → recommended ", "$text-muted"),
        (f"{d.recommended_md}", "bold $text-success"), ("  gain ", "$text-muted"), (gain, "bold"),
        (f"  [{d.headline}]", "$text-muted"))]
    lines.append(Content.styled("     MD   miss  DRAM/CTA  thesis P  sim P", "$text-muted"))
    best_p = max((r.relative_performance for r in (sim or d.thesis).rows if fmt.finite(r.relative_performance)),
                 default=1.0)
    for r in d.thesis.rows:
        srow = sim.row(r.md) if sim is not None and r.md <= sim.max_md else None
        src = srow or r
        p = srow.relative_performance if srow else None
        bar = fmt.hbar((p if p is not None else r.relative_performance) / best_p if best_p else None,
                       max(0, min(12, width - 46)))
        style = "bold" if r.md == d.recommended_md else ""
        lines.append(Content.assemble(
            (f"  {md_marks(r.md, d, current)}", "bold $text-success" if r.md == d.recommended_md else "$text-accent"),
            (f"{r.md:>3} {fmt.pct(src.miss_rate, 0, 6)} {fmt.num(src.dram_reads_per_cta, 1, 9)}"
             f" {fmt.num(r.relative_performance, 2, 9)} {fmt.num(p, 2, 6)} ", style), (bar, "$primary")))
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
