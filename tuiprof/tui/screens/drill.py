"""The drill-down of one op: its histograms (H1, H2, X), latency breakdown (L1/L2/DRAM shares of
X, paper 000 sec. 6.1 and Fig. 8), coalescing, address pattern and plain-words advice."""

from __future__ import annotations

from typing import Any

import threading

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Static

from tuiprof.tui import format as fmt
from tuiprof.tui.messages import PatternReady
from tuiprof.tui.panes.histogram import HistogramView, Series
from tuiprof.tui.pattern import AddressPattern, address_pattern, advice
from tuiprof.tui.text import MAX_LABEL, clean


def op_series(analysis: Any, op_id: int, which: str, measured: dict[str, float] | None = None) -> Series | None:
    """Series of op `op_id`'s H1, H2 or X over the trials."""
    if analysis is None:
        return None
    s = analysis.ops[op_id]
    values = analysis.samples.get(f"op{op_id}.{which}")
    if values is None:
        return None
    est = {"h1": s.h1, "h2": s.h2, "x": s.x}[which]
    title = {"h1": "H1 · L1 hit ratio", "h2": "H2 · L2 hit ratio", "x": "X · expected latency (cycles)"}[which]
    from tuiprof.tui.metrics import measured_value

    m, label = measured_value(measured or {}, f"op{op_id}.{which}")
    return Series(title, values, est, which != "x", analysis.planned, fmt.running_std(values), m, label)


def breakdown(s: Any, width: int) -> Content:
    """X split into its L1, L2 and DRAM terms as one labelled stacked bar."""
    shares = [("L1", s.l1_share, "$success", "▓"), ("L2", s.l2_share, "$primary", "▒"),
              ("DRAM", s.dram_share, "$error", "░")]
    if not all(fmt.finite(x) for _, x, _, _ in shares):
        return Content.styled("latency breakdown: undefined (no accesses reached memory)", "$text-muted")
    w = max(10, width)
    parts: list[tuple[str, str]] = []
    used = 0
    for i, (_, x, style, glyph) in enumerate(shares):
        n = w - used if i == len(shares) - 1 else int(round(x * w))
        n = max(0, min(n, w - used))
        parts.append((glyph * n, style))
        used += n
    legend = "  ".join(f"{glyph} {name} {fmt.pct(x)}" for name, x, _, glyph in shares)
    return Content("\n").join([Content.assemble(*parts), Content(legend)])


class DrillScreen(Screen[None]):
    """One op in depth; it follows the live run (the app forwards each analysis)."""

    BINDINGS = [
        Binding("escape,backspace", "app.pop_screen", "Back", id="drill.back"),
        Binding("n", "step(1)", "Next load", id="drill.next"),
        Binding("N", "step(-1)", "Prev load", id="drill.prev"),
    ]
    DEFAULT_CSS = """
    DrillScreen { layout: vertical; }
    DrillScreen #drill-title { height: auto; padding: 0 1; background: $panel; }
    DrillScreen #drill-hists { height: 14; }
    DrillScreen #drill-hists HistogramView { width: 1fr; border-right: vkey $panel; }
    DrillScreen VerticalScroll { height: 1fr; padding: 0 1; }
    DrillScreen .section { height: auto; margin-bottom: 1; }
    """

    def __init__(self, op_id: int, analysis: Any, trace: Any, arch: Any) -> None:
        super().__init__()
        self.op_id, self.analysis, self.trace, self.arch = op_id, analysis, trace, arch
        self.pattern: AddressPattern | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="drill-title")
        with Horizontal(id="drill-hists"):
            yield HistogramView(id="hist-h1")
            yield HistogramView(id="hist-h2")
            yield HistogramView(id="hist-x")
        with VerticalScroll():
            yield Static(id="drill-latency", classes="section")
            yield Static(id="drill-coalescing", classes="section")
            yield Static(Content.styled("address pattern: analysing the op's warp accesses…", "$text-muted"),
                         id="drill-pattern", classes="section")
            yield Static(id="drill-advice", classes="section")
        yield Footer()

    def on_mount(self) -> None:
        self.update_analysis(self.analysis)
        self._pattern(self.op_id)

    def _pattern(self, op_id: int) -> None:
        """Compute op `op_id`'s address pattern on a daemon thread (posted as PatternReady; a
        pattern for an op no longer shown is dropped on arrival)."""
        def work() -> None:
            self.post_message(PatternReady(op_id, address_pattern(self.trace, op_id, self.arch.l1.line)))

        threading.Thread(target=work, name="tuiprof-pattern", daemon=True).start()

    def on_pattern_ready(self, message: PatternReady) -> None:
        if message.op_id == self.op_id:
            self.pattern = message.pattern
            self._render_text()

    def action_step(self, step: int) -> None:
        """Move to the next/previous load by cost without leaving the drill-down."""
        if self.analysis is None:
            return
        loads = [s.op.id for s in self.analysis.by_cost() if s.op.kind == "load"]
        if not loads:
            return
        i = loads.index(self.op_id) if self.op_id in loads else -1
        self.op_id = loads[(i + step) % len(loads)]
        self.pattern = None
        self.query_one("#drill-pattern", Static).update(
            Content.styled("address pattern: analysing the op's warp accesses…", "$text-muted"))
        self.update_analysis(self.analysis)
        self._pattern(self.op_id)

    def update_analysis(self, analysis: Any) -> None:
        self.analysis = analysis
        measured = self.trace.provenance.measured
        for which in ("h1", "h2", "x"):
            self.query_one(f"#hist-{which}", HistogramView).show(op_series(analysis, self.op_id, which, measured))
        self._render_text()

    def _render_text(self) -> None:
        op = self.trace.ops[self.op_id]
        a = self.analysis
        s = a.ops[self.op_id] if a is not None else None
        rank = ""
        if a is not None:
            order = [t.op.id for t in a.by_cost()]
            rank = f" · rank {order.index(self.op_id) + 1} of {len(order)} by cost"
        title = Content.assemble(
            (f"op {op.id} · {op.kind} ", "bold"), (clean(op.label, MAX_LABEL), "bold $text-accent"),
            (f" · {clean(op.file)}:{op.line} · {op.space} · {op.bytes} B/lane", ""),
            (f" · {s.warp_accesses:,} warp accesses · cost share {fmt.pct(s.cost_share, 1)}{rank}" if s else "",
             "$text-muted"))
        self.query_one("#drill-title", Static).update(title)
        width = max(20, self.size.width - 4)
        if s is None:
            self.query_one("#drill-latency", Static).update(Content.styled("waiting for the first trial…", "$text-muted"))
            return
        t1, t2 = self.arch.l1.hit_latency, self.arch.l2.hit_latency
        eq = (f"X = H1·t1 + (1−H1)·[H2·t2 + (1−H2)·Tm] = {fmt.num(s.h1.mean, 3)}·{t1} + … "
              f"with Tm {fmt.cycles(s.tm.mean)} → X {fmt.cycles(s.x.mean)} cycles "
              f"[{fmt.cycles(s.x.lo)}–{fmt.cycles(s.x.hi)}] (paper 000 sec. 6.1)")
        self.query_one("#drill-latency", Static).update(Content("\n").join([
            Content.styled("Latency breakdown", "bold"), breakdown(s, min(width, 60)), Content.styled(eq, "$text-muted")]))
        p = self.pattern
        ideal = max(1, -(-self.arch.warp_size * op.bytes // self.arch.l1.line))
        coal = [Content.styled("Coalescing", "bold"),
                Content(f"sectors per request {fmt.num(s.sectors_per_request, 2)}"
                        f" · L1 requests per warp access {fmt.num(s.requests_per_access, 2)} (ideal {ideal})"
                        + (f" · distinct lines per warp access {fmt.num(p.lines_per_access, 2)}"
                           f" · active lanes {fmt.num(p.mean_active_lanes, 1)}/32" if p else ""))]
        self.query_one("#drill-coalescing", Static).update(Content("\n").join(coal))
        if p is not None:
            def strides(items: tuple[tuple[int, float], ...]) -> str:
                return ", ".join(f"{b:+d} B ({fmt.pct(sh)})" for b, sh in items) or "—"
            sample = f" (sampled {p.examined:,} of {p.warp_accesses:,})" if p.examined < p.warp_accesses else ""
            pat = [Content.styled("Address pattern" + sample, "bold"),
                   Content(f"lane-to-lane stride: {strides(p.lane_strides)}"),
                   Content(f"successive accesses of one lane: {strides(p.thread_strides)}"),
                   Content(f"reuse by the same warp: {fmt.pct(p.reuse)} of {p.line_touches:,} line touches "
                           f"({p.distinct_lines:,} distinct lines); median reuse distance "
                           f"{fmt.num(p.reuse_distance, 0)} warp accesses")]
            self.query_one("#drill-pattern", Static).update(Content("\n").join(pat))
        tips = advice(s, p, self.arch.l1.line, self.arch.warp_size)
        self.query_one("#drill-advice", Static).update(Content("\n").join(
            [Content.styled("Advice", "bold")] + [Content(f"• {t}") for t in tips]))
