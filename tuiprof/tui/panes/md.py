"""The model pane: the kernel time and what bounds it (the timing model: Hong & Kim's MWP/CWP,
HongKim09, floored by bandwidth), Zhang11's bottleneck, and the MD decision: both predictions
per MD (the timing model, Yen14's thesis rules), the default and the recommended MD, the gain
with its range and confidence, and how to apply it. While the MD sweep runs the pane shows its
progress; after a cancel it says so; `m` picks an MD to rerun at."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from textual.content import Content
from textual.widget import Widget

from tuiprof.tui import format as fmt
from tuiprof.tui.text import MAX_MESSAGE, clean
from tuiprof.tui.themes import MUTED

if TYPE_CHECKING:
    from tuiprof.model.decisions import Decisions
    from tuiprof.model.md import MdDecision
    from tuiprof.session import SweepProgress

RUNNING = ("loading", "preparing", "running", "sweep")


def md_marks(md: int, decision: "MdDecision", current: int | None) -> str:
    """Glyphs for an MD row: ▸ the MD being simulated, D default, ★ recommended."""
    return (("▸" if md == current else " ") + ("D" if md == decision.default_md else " ")
            + ("★" if md == decision.recommended_md else " "))


def seconds(t: float) -> str:
    """A kernel time in the unit that reads best: 7.2 ms, 312 us, 1.25 s."""
    if not fmt.finite(t):
        return "—"
    for div, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if t >= div:
            return f"{t / div:.3g} {unit}"
    return f"{t * 1e9:.3g} ns"


def model_lines(d: "Decisions") -> list[Content]:
    """The kernel time with what bounds it (MWP/CWP inside the timing model) and Zhang11's
    bottleneck: the report's kernel-time and bottleneck sections in two lines."""
    k, w, b = d.time, d.mwp, d.bottleneck
    return [
        Content.assemble(("time ", MUTED), (seconds(k.time_s), "bold"), (" bound by ", MUTED),
                         (k.bound_label, "bold"), (f" · MWP {w.mwp:.1f} CWP {w.cwp:.1f} N {w.n:.0f} (HongKim09)",
                                                   MUTED)),
        Content.assemble(("bottleneck ", MUTED), (b.bottleneck, "bold"),
                         (f" · without it {b.next_bottleneck} binds: at most {fmt.num(b.speedup_if_removed, 2)}x faster (Zhang11)",
                          MUTED)),
    ]


def _mds(mds: tuple[int, ...]) -> str:
    """(1, 2, 3, 4) -> '1-4'; others listed."""
    if mds and list(mds) == list(range(mds[0], mds[0] + len(mds))) and len(mds) > 2:
        return f"{mds[0]}-{mds[-1]}"
    return ", ".join(map(str, mds))


def _title(text: str, note: str, width: int) -> Content:
    return Content.assemble((text, "bold"), (note, MUTED)).truncate(max(1, width), ellipsis=True)


def render_md(decisions: "Decisions | None", sweep: "SweepProgress | None", current: int | None, width: int,
              phase: str = "done", previous: "MdDecision | None" = None, baseline: Sequence[Content] = ()) -> Content:
    """The pane in `width` cells. `phase` is the app's (a cancelled run's sweep is said to be
    cancelled, never awaited); `previous` is the last run's MD decision, shown dimmed while a
    rerun's sweep computes; `baseline`, the lines comparing the run with a pinned baseline."""
    lines = [_title("Model", "  kernel time · bottleneck · MD decision", width)]
    if decisions is None:
        waiting = {"failed": "no result: the run failed", "cancelled": "cancelled before the first trial (r reruns)"}
        lines.append(Content.styled(waiting.get(phase, "waiting for the main run…"), MUTED))
        return Content("\n").join(lines)
    lines += model_lines(decisions)
    lines += [line.truncate(max(1, width), ellipsis=True) for line in baseline]
    lines.append(_title("MD decision", "  (CTAs per SM: timing model, Yen14's rules beside it)", width))
    d = decisions.md
    if d is None:
        if decisions.md_note and not (phase in RUNNING and decisions.md_note.endswith("still running")):
            lines.append(Content.styled(clean(decisions.md_note, MAX_MESSAGE, newlines=True)
                                        + (" (r reruns)" if "cancel" in decisions.md_note else ""), "$text-warning"))
        elif phase == "cancelled":
            lines.append(Content.styled("MD sweep cancelled (r reruns)", "$text-warning"))
        elif sweep is not None:
            whole = f" ({sweep.sweep_done / sweep.sweep_planned:.0%})" if sweep.sweep_planned else ""
            lines.append(Content.assemble(("MD sweep: ", MUTED),
                                          (f"{sweep.sweep_done} of {sweep.sweep_planned} trials{whole}", "bold"),
                                          (f" · MDs {_mds(sweep.mds)}, MD {sweep.md} at {sweep.done}/{sweep.planned}",
                                           MUTED)))
        else:
            lines.append(Content.styled("waiting for the MD sweep…", MUTED))
        if previous is not None:
            lines.append(Content.styled(f"previous run: recommended {previous.recommended_md} of "
                                        f"{previous.default_md}, gain {previous.gain_label}", f"{MUTED} italic"))
        for s in decisions.md_samples:
            lines.append(Content.styled(f"  MD {s.md:>2}: L1 miss {fmt.pct(s.miss_rate)}, "
                                        f"DRAM reads/CTA {fmt.num(s.dram_reads_per_cta, 1)}", MUTED))
        return Content("\n").join(lines)
    timing = d.timing
    sims = {s.md: s for s in decisions.md_samples}
    lines.append(Content.assemble(
        ("default ", MUTED), (f"{d.default_md}", "bold"), (f" ({d.limiter}) → ", MUTED),
        (f"★ {d.recommended_md}", "bold $text-success"), ("  gain ", MUTED),
        (d.gain_label, "bold $text-warning" if d.low_confidence else "bold"), (f"  [{d.headline}]", MUTED)))
    if decisions.md_note:
        lines.append(Content.styled(clean(decisions.md_note, MAX_MESSAGE), f"{MUTED} italic"))
    lines.append(Content.styled(f"  {'':3}{'MD':>3} {'miss':>4} {'L2':>4} {'DRAM/CTA':>8} {'timing':>6} {'thesis':>6}",
                                MUTED))
    perf = [timing.relative_performance(m) for m in range(1, len(timing.times) + 1)] if timing else \
        [r.relative_performance for r in d.thesis.rows]
    best_p = max((x for x in perf if fmt.finite(x)), default=1.0)
    for r in d.thesis.rows:
        src = sims.get(r.md) or r
        p = timing.relative_performance(r.md) if timing is not None and r.md <= len(timing.times) else None
        bar = fmt.hbar((p if p is not None else r.relative_performance) / best_p if best_p else None,
                       max(0, min(12, width - 42)))
        style = "bold" if r.md == d.recommended_md else ""
        lines.append(Content.assemble(
            (f"  {md_marks(r.md, d, current)}", "bold $text-success" if r.md == d.recommended_md else "$text-accent"),
            (f"{r.md:>3} {fmt.pct(src.miss_rate, 0, 4)} {fmt.pct(getattr(src, 'l2_hit_rate', None), 0, 4)}"
             f" {fmt.num(src.dram_reads_per_cta, 1, 8)}"
             f" {fmt.num(p, 2, 6)} {fmt.num(r.relative_performance, 2, 6)} ", style), (bar, "$primary")))
    lines.append(Content.styled("  ▸ simulated now · D default · ★ recommended · miss: L1 read misses, L2: L2 read "
                                "hits, DRAM/CTA: 32 B DRAM reads per CTA (simulated) · timing, thesis: throughput vs "
                                "MD 1 (timing model, Yen14's rules)", MUTED))  # wraps: never cut
    lines.append(Content.assemble(("apply: ", "bold"), (clean(d.apply, MAX_MESSAGE, newlines=True), "")))
    if d.advice:
        lines.append(Content.styled(clean(d.advice, MAX_MESSAGE, newlines=True), MUTED))
    return Content("\n").join(lines)


class MdPane(Widget):
    """The model pane (kernel time, bottleneck, MD decision); as tall as its content."""

    DEFAULT_CSS = """
    MdPane { height: auto; padding: 0 1; }
    MdPane.-stale { text-opacity: 60%; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.decisions: "Decisions | None" = None
        self.sweep: "SweepProgress | None" = None
        self.current: int | None = None
        self.phase = "loading"
        self.previous: "MdDecision | None" = None
        self.baseline: Sequence[Content] = ()

    def show(self, decisions: "Decisions | None", sweep: "SweepProgress | None", current: int | None,
             phase: str = "done", previous: "MdDecision | None" = None, baseline: Sequence[Content] = ()) -> None:
        """Show the models; nothing is redrawn when nothing changed (the app calls this with every
        analysis of a run and every tick of the sweep, and a redraw here lays out the screen)."""
        lines = tuple(baseline)
        same = (decisions is self.decisions and previous is self.previous
                and (sweep, current, phase) == (self.sweep, self.current, self.phase)
                and [(c.plain, c.spans) for c in lines] == [(c.plain, c.spans) for c in self.baseline])
        if same:
            return
        self.decisions, self.sweep, self.current, self.phase, self.previous = decisions, sweep, current, phase, previous
        self.baseline = lines
        self.refresh(layout=True)

    def render(self) -> Content:
        return render_md(self.decisions, self.sweep, self.current, self.content_size.width or 60, self.phase,
                         self.previous, self.baseline)
