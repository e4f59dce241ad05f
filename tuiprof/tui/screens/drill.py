"""The drill-down of one op: its histograms (X, H1, H2), latency breakdown (L1/L2/DRAM shares of
X, Baghsorkhi12 sec. 6.1 and Fig. 8), coalescing as Nsight Compute counts it, address pattern, and
the same reason and advice the report prints (`tuiprof.model.pattern`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Static

from tuiprof.model.advice import advice, insight
from tuiprof.model.analysis import load_rank
from tuiprof.tui import delta
from tuiprof.tui import format as fmt
from tuiprof.tui.messages import PatternsReady
from tuiprof.tui.metrics import Levels, series
from tuiprof.tui.panes.histogram import HistogramView
from tuiprof.tui.status import AppFooter
from tuiprof.tui.text import MAX_LABEL, MAX_MESSAGE, clean
from tuiprof.tui.themes import MUTED

if TYPE_CHECKING:
    from tuiprof.model.analysis import Analysis, OpStats
    from tuiprof.model.pattern import AddressPattern
    from tuiprof.session import Session
    from tuiprof.trace.data import StaticOp
    from tuiprof.tui.delta import Against

ANALYSING = "address pattern: analysing the op's warp accesses…"


def breakdown(s: "OpStats", width: int, levels: Levels = Levels()) -> Content:
    """X split into its L1, L2 and DRAM terms as one labelled stacked bar (an absent cache level
    has no term)."""
    terms = [("L1", "h1", s.l1_share, "$success", "▓"), ("L2", "h2", s.l2_share, "$primary", "▒"),
             ("DRAM", "x", s.dram_share, "$error", "░")]
    shares = [(name, x, style, glyph) for name, metric, x, style, glyph in terms if levels.has(metric)]
    if not all(fmt.finite(x) for _, x, _, _ in shares):
        return Content.styled("latency breakdown: undefined (no accesses reached memory)", MUTED)
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


PTX_SHOWN = 4
"""PTX instructions the drill-down lists per op (the JSON report has them all)."""


def ptx_lines(op: "StaticOp") -> list[Content]:
    """The PTX instructions behind an op, so that a user can check which ones it counts."""
    if not op.ptx:
        return []
    copies = f" ({len(op.ptx)} copies of one source access)" if len(op.ptx) > 1 else ""
    out = [Content.styled("PTX" + copies, "bold")]
    out += [Content.styled(f"  line {line}: {clean(text, MAX_MESSAGE)}", MUTED) for line, text in op.ptx[:PTX_SHOWN]]
    if len(op.ptx) > PTX_SHOWN:
        out.append(Content.styled(f"  … {len(op.ptx) - PTX_SHOWN} more (tuiprof report --format json lists them)",
                                  MUTED))
    return out


def strides(items: tuple[tuple[int, float], ...]) -> str:
    return ", ".join(f"{b:+d} B ({fmt.pct(sh)})" for b, sh in items) or "none common (irregular)"


class DrillScreen(Screen[None]):
    """One op in depth; it follows the live run (the app forwards each analysis)."""

    class Stepped(Message):
        """`n`/`N` moved the drill-down to op `op` (the app moves the source cursor along)."""

        def __init__(self, op: int) -> None:
            super().__init__()
            self.op = op

    BINDINGS = [
        Binding("escape,backspace", "app.pop_screen", "Back", id="drill.back"),
        Binding("n", "step(1)", "Next load", tooltip="Next load by cost, without leaving the drill-down", id="drill.next"),
        Binding("N", "step(-1)", "Prev load", tooltip="Previous load by cost", id="drill.prev"),
    ]
    DEFAULT_CSS = """
    DrillScreen { layout: vertical; }
    DrillScreen #drill-title { height: auto; padding: 0 1; background: $panel; }
    DrillScreen #drill-hists { height: 45%; min-height: 9; max-height: 15; }
    DrillScreen #drill-hists HistogramView { width: 1fr; border-right: vkey $panel; }
    DrillScreen VerticalScroll { height: 1fr; padding: 0 1; }
    DrillScreen .section { height: auto; margin-bottom: 1; }
    """

    def __init__(self, op_id: int, analysis: "Analysis | None", session: "Session",
                 patterns: dict[int, "AddressPattern"] | None = None,
                 against: "Callable[[], Against | None] | None" = None) -> None:
        super().__init__()
        self.op_id, self.analysis, self.patterns = op_id, analysis, patterns
        self._bind(session)
        self.against = against or (lambda: None)
        """The run against the pinned baseline, as the app has it now (`tuiprof.tui.delta`)."""
        self._asked: "Session | None" = None
        """The session whose address patterns this screen asked for."""
        self._shown: dict[str, tuple[str, tuple[object, ...]]] = {}
        """What each text section shows now (its text and styles)."""

    @property
    def pattern(self) -> "AddressPattern | None":
        return self.patterns.get(self.op_id) if self.patterns is not None else None

    def compose(self) -> ComposeResult:
        yield Static(id="drill-title")
        with Horizontal(id="drill-hists"):
            yield HistogramView(id="hist-x")
            yield HistogramView(id="hist-h1")
            yield HistogramView(id="hist-h2")
        with VerticalScroll():
            yield Static(id="drill-baseline", classes="section")
            yield Static(id="drill-latency", classes="section")
            yield Static(id="drill-coalescing", classes="section")
            yield Static(Content.styled(ANALYSING, MUTED), id="drill-pattern", classes="section")
            yield Static(id="drill-advice", classes="section")
            yield Static(id="drill-ptx", classes="section")
        yield AppFooter()

    def on_mount(self) -> None:
        if not self.query("#hist-x"):  # built ahead, and the app closed while it mounted: its widgets are gone
            return
        self.update_analysis(self.analysis)
        if not self.is_current:  # built ahead: lay it out for the terminal too, off-screen
            self.call_after_refresh(self._refresh_layout, self.app.size)

    def on_screen_resume(self) -> None:
        """Shown: ask for the address patterns if nobody has them (not before: the app may build
        this screen ahead, off-screen, while it computes them itself)."""
        self._ask_patterns()

    def reopen(self, op_id: int, analysis: "Analysis | None", session: "Session",
               patterns: dict[int, "AddressPattern"] | None) -> None:
        """Show op `op_id` of `session` in this screen, kept from the last time it was open or
        built ahead (the app keeps one: composing its widgets and footer again took ~40 ms of
        each Enter); before it has mounted, its mount shows them."""
        self.op_id, self.patterns, self.analysis = op_id, patterns, analysis
        self._bind(session)
        if not self.is_mounted:
            return
        self.query_one(VerticalScroll).scroll_home(animate=False)
        self.update_analysis(analysis)

    def follow(self, session: "Session") -> None:
        """Refer to `session`, which replaced the app's (kept between visits, this screen must not
        keep a replaced session, its trials and its prepared trace alive); the next `reopen` or
        analysis update shows it."""
        same_trace = session.trace is self.trace
        if self._asked is not None:
            self._asked = session if same_trace else None
        if not same_trace:
            self.patterns = None
        self._bind(session)

    def _bind(self, session: "Session") -> None:
        """Show `session`: its trace, its arch and that arch's cache levels."""
        self.session, self.trace, self.arch = session, session.trace, session.arch
        self.levels = Levels.of(session.arch)

    def _ask_patterns(self) -> None:
        """Work out the address patterns on a thread of their own when nobody has them yet."""
        if self.patterns is not None or self._asked is self.session:
            return
        session = self._asked = self.session

        def work() -> None:  # a second of NumPy on a large trace: off the UI thread
            self.post_message(PatternsReady(session, session.patterns()))

        threading.Thread(target=work, name="tuiprof-pattern", daemon=True).start()

    def on_patterns_ready(self, message: PatternsReady) -> None:
        if not self.app.is_running:
            return  # it came while the app shuts down: the widgets may be gone (see app.while_running)
        if message.session.trace is not self.trace:
            return  # asked for a trace no longer shown
        self.patterns = message.patterns
        self._render_text()

    def action_step(self, step: int) -> None:
        """Move to the next/previous load by cost (L1, L2, ...) without leaving the drill-down."""
        if self.analysis is None:
            return
        ranks = self.analysis.ranks()
        loads = sorted((i for i, r in ranks.items() if load_rank(r) is not None), key=lambda i: load_rank(ranks[i]) or 0)
        if not loads:
            return
        i = loads.index(self.op_id) if self.op_id in loads else -1
        self.op_id = loads[(i + step) % len(loads)]
        self.update_analysis(self.analysis)
        self.post_message(self.Stepped(self.op_id))

    def _render_shared(self, op: "StaticOp", s: "OpStats") -> None:
        """A shared-memory op (its bank conflicts) or a constant op (its serialisation) and what
        they cost; no cache, no L2, no DRAM."""
        sh = s.passes
        assert sh is not None
        if sh.space == "shared":
            conflict = (f"{sh.ways:.1f}-way on average, up to {sh.worst} wavefronts in one request; "
                        f"{fmt.pct(sh.conflicted, 0)} of requests conflict") if sh.extra > 0 else "no bank conflict"
            lines = [Content.styled("Shared memory: bank conflicts", "bold"),
                     Content.assemble(("wavefronts per request ", ""), (f"{sh.passes:.2f}", "bold"),
                                      (f" (ideal {sh.ideal:.0f}: one per {128 // max(1, 32 * op.bytes // 128 or 1)} B "
                                       f"part of the warp, as Nsight Compute counts them) · {conflict}", MUTED)),
                     Content.styled(f"X = shared latency {self.arch.shared_latency} + {sh.extra:.2f} extra wavefronts = "
                                    f"{fmt.cyc(sh.latency)} (each extra wavefront is one more cycle in the shared-memory "
                                    f"pipe, and one cycle of the SM's shared bandwidth taken from every warp)", MUTED)]
        else:
            serial = (f"{sh.ways:.1f} addresses per warp access on average, up to {sh.worst}; "
                      f"{fmt.pct(sh.conflicted, 0)} of accesses serialised") if sh.extra > 0 else "a broadcast"
            lines = [Content.styled("Constant memory: the constant cache", "bold"),
                     Content.assemble(("requests per warp access ", ""), (f"{sh.passes:.2f}", "bold"),
                                      (f" (one per distinct address; ideal 1) · {serial}", MUTED)),
                     Content.styled(f"X = constant cache hit {self.arch.l1.hit_latency} + {sh.extra:.2f} extra requests "
                                    f"= {fmt.cyc(sh.latency)} (the cache serves one address per cycle)", MUTED)]
        self._set("drill-latency", Content("\n").join(lines))
        self._set("drill-coalescing", Content(""))
        self._set("drill-ptx", Content("\n").join(ptx_lines(op)))
        self._set("drill-pattern", Content(""))
        self._set("drill-advice", Content("\n").join(
            [Content.styled("Advice", "bold")] + [Content(f"• {clean(t, MAX_MESSAGE)}") for t in advice(s, None)]))

    def _set(self, name: str, content: Content) -> None:
        """Put `content` in the section `name`, unless it shows that already: a run's analyses
        come ten times a second and most sections do not change, and each update lays out the
        screen."""
        widget = self.query_one(f"#{name}", Static)
        key = (content.plain, tuple(content.spans))
        if self._shown.get(name) != key:
            self._shown[name] = key
            widget.update(content)

    def update_analysis(self, analysis: "Analysis | None") -> None:
        self.analysis = analysis
        measured = self.trace.provenance.measured
        shared = analysis.ops[self.op_id].passes if analysis is not None else None
        against = self.against()
        for which in ("x", "h1", "h2"):  # shared and constant memory: no trials to draw, no cache hit ratios
            hist = self.query_one(f"#hist-{which}", HistogramView)
            hist.display = which == "x" or (shared is None and self.levels.has(which))
            if shared is not None:
                hist.show_shared(shared)
            else:
                s = series(analysis, which, self.op_id, measured)
                if s is not None and against is not None:
                    s = replace(s, baseline=against.values(which, self.op_id))
                hist.show(s)
        self.query_one("#drill-baseline", Static).display = against is not None
        if against is not None:
            self._set("drill-baseline", Content("\n").join(
                delta.drill_lines(against.baseline, against.op(self.op_id), self.levels)))
        self._render_text()

    def _render_text(self) -> None:
        op = self.trace.ops[self.op_id]
        a = self.analysis
        s = a.ops[self.op_id] if a is not None else None
        rank = a.ranks().get(self.op_id) if a is not None else None
        p = self.pattern
        why, tips = insight(s, p, a, self.arch.l1.line) if a is not None and s is not None and p is not None else ("", [])
        title = Content.assemble(
            (f"{rank} " if rank else "", "bold $text-warning"), (f"op {op.id} · {op.kind} ", "bold"),
            (clean(op.label, MAX_LABEL), "bold $text-accent"), (f" · {why}" if why else "", "bold $text-error"),
            (f" · {clean(op.file)}:{op.line} · {op.space} · {op.bytes} B/lane", ""),
            (f" · {s.warp_accesses:,} warp accesses · {fmt.pct(s.cost_share)} of the cost" if s else "",
             MUTED))
        self._set("drill-title", title)
        width = max(20, self.app.size.width - 4)  # the app's: a kept screen may not have followed a resize yet
        if s is None or a is None:
            self._set("drill-latency", Content.styled("waiting for the first trial…", MUTED))
            return
        if s.passes is not None:
            self._render_shared(op, s)
            return
        lv = self.levels
        given = [f"t1 {self.arch.l1.hit_latency}"] * lv.l1 + [f"t2 {self.arch.l2.hit_latency}"] * lv.l2
        eq = (f"{lv.formula()} with {', '.join([*given, f'Tm {fmt.cyc(s.tm.mean)}'])}: "
              f"X {fmt.cyc(s.x.mean)} (trials 95% [{fmt.cycles(s.x.spread_lo)}–{fmt.cycles(s.x.spread_hi)}], mean "
              f"±{fmt.cyc((s.x.ci_hi - s.x.ci_lo) / 2)} 95% CI; the model's randomness only; Baghsorkhi12 sec. 6.1)")
        self._set("drill-latency", Content("\n").join([
            Content.styled("Latency breakdown", "bold"), breakdown(s, min(width, 60), lv),
            Content.styled(eq, MUTED)]))
        ideal_lines = max(1, -(-self.arch.warp_size * op.bytes // self.arch.l1.line))
        coal = [Content.styled("Coalescing", "bold"),
                Content.assemble(("sectors per request ", ""), (fmt.num(s.sectors_per_access, 1), "bold"),
                                 (f" (ideal {s.ideal_sectors:.0f}: as Nsight Compute counts them, per warp instruction; "
                                  "4 for 32 lanes of 4 B, 32 at worst)", MUTED)),
                Content(f"L1 requests (lines) per warp access {fmt.num(s.requests_per_access, 2)} (ideal {ideal_lines})"
                        f" · sectors per L1 request {fmt.num(s.sectors_per_request, 2)}"
                        + (f" · active lanes {fmt.num(p.mean_active_lanes, 1)}/32" if p else ""))]
        self._set("drill-coalescing", Content("\n").join(coal))
        self._set("drill-ptx", Content("\n").join(ptx_lines(op)))
        if p is not None:
            sample = f" (whole warps sampled: {p.examined:,} of {p.warp_accesses:,})" if p.examined < p.warp_accesses else ""
            l1 = self.arch.l1
            unit = "sector" if l1.enabled and l1.sector < l1.line else "line"  # what the L1 fills
            pat = [Content.styled("Address pattern" + sample, "bold"),
                   Content(f"lane-to-lane stride: {strides(p.lane_strides)}"),
                   Content(f"successive accesses of one lane: {strides(p.thread_strides)}"),
                   Content(f"reuse by the same warp: {fmt.pct(p.reuse)} of {p.line_touches:,} {unit} touches "
                           f"({p.distinct_lines:,} distinct {unit}s); median reuse distance "
                           f"{fmt.num(p.reuse_distance, 0)} warp accesses")]
            self._set("drill-pattern", Content("\n").join(pat))
            self._set("drill-advice", Content("\n").join(
                [Content.styled("Advice", "bold")] + [Content(f"• {clean(t, MAX_MESSAGE)}") for t in tips]))
        else:
            self._set("drill-pattern", Content.styled(ANALYSING, MUTED))
            self._set("drill-advice", Content(""))
