"""The tuiprof Textual app: four panes over one Session (source, histogram, SMs, MD decision).

Worker threads only post messages (`tuiprof.tui.messages`); the app owns every piece of state
and repaints at most about ten times a second, whatever the rate of trials. The workers are
daemon threads, not Textual thread workers: those run on asyncio's default executor, which the
app waits for on exit (a cancelled run would keep the process alive, headless, until its last
trial), and whose threads keep a reference to the last worker they ran (and so to its Session,
its trials and its prepared trace) for as long as the app lives.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.content import Content
from textual.widgets import Footer, Input, Static

from tuiprof.errors import TuiprofError
from tuiprof.session import (AnalysisUpdated, Cancelled, Failed, Finished, RunConfig, Session, SweepProgress,
                             TrialDone)
from tuiprof.tui import format as fmt
from tuiprof.tui.commands import TuiprofCommands
from tuiprof.tui.messages import ExportDone, LoadFailed, RecollectFailed, RunEvent, TraceLoaded
from tuiprof.tui.metrics import HEADLINES, metric_keys, series
from tuiprof.tui.panes.histogram import HistogramView
from tuiprof.tui.panes.md import MdPane
from tuiprof.tui.panes.sm import SmPane
from tuiprof.tui.panes.source import SourceView
from tuiprof.tui.screens.drill import DrillScreen
from tuiprof.tui.screens.modals import ArchScreen, ErrorScreen, ExportScreen, HelpScreen, MdScreen
from tuiprof.tui.text import MAX_MESSAGE, clean, file_part
from tuiprof.tui.themes import DEFAULT_THEME, load_themes

REFRESH = 0.1
"""Seconds between repaints of the panes while a run streams in (about 10 per second)."""
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
PANES = (("source", "Source"), ("hist", "Histogram"), ("sm", "SMs"), ("md", "MD"))


def spawn(name: str, target: Callable[..., None], *args: Any) -> threading.Thread:
    """Run `target(*args)` on a daemon thread (see the module docstring for why not a worker)."""
    thread = threading.Thread(target=target, args=args, name=f"tuiprof-{name}", daemon=True)
    thread.start()
    return thread


class StatusBar(Static):
    """One line: target, kernel, arch, MD, seed, the run's phase and the headline ratios."""

    DEFAULT_CSS = "StatusBar { height: 1; background: $panel; color: $foreground; padding: 0 1; }"


class TabStrip(Static):
    """Below the width breakpoint the panes become tabs; this is their strip (1-4 or click)."""

    DEFAULT_CSS = "TabStrip { height: 1; background: $panel; padding: 0 1; }"


class TuiprofApp(App[int]):
    """Annotated source, live Monte Carlo histogram, SM utilisation and MD decision of a trace."""

    TITLE = "tuiprof"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    COMMANDS = App.COMMANDS | {TuiprofCommands}
    CSS = """
    #body { height: 1fr; }
    #left { width: 1fr; height: 1fr; }
    #side { height: 1fr; border-left: vkey $panel; }
    #search { display: none; dock: bottom; height: 3; }
    #search.-open { display: block; }
    #hist { height: 1fr; min-height: 10; }
    #sm { border-top: hkey $panel; }
    #md { border-top: hkey $panel; }
    Screen.-wide #tabs { display: none; }
    Screen.-wide #side { width: 42%; max-width: 96; }
    Screen.-narrow #body { layout: vertical; }
    Screen.-narrow #side { width: 100%; border-left: none; }
    Screen.-narrow #side > * { height: 1fr; border-top: none; max-height: 100%; }
    Screen.-narrow #body.-source #side { display: none; }
    Screen.-narrow #body.-hist #left, Screen.-narrow #body.-sm #left, Screen.-narrow #body.-md #left { display: none; }
    Screen.-narrow #body.-hist #sm, Screen.-narrow #body.-hist #md { display: none; }
    Screen.-narrow #body.-sm #hist, Screen.-narrow #body.-sm #md { display: none; }
    Screen.-narrow #body.-md #hist, Screen.-narrow #body.-md #sm { display: none; }
    """
    BINDINGS = [
        Binding("q", "quit", "Quit", tooltip="Quit (cancels the run)", id="quit"),
        Binding("question_mark", "help", "Help", tooltip="This list of keys", key_display="?", id="help"),
        Binding("r", "rerun", "Rerun", tooltip="Rerun with a new seed (seed + 1), cancelling any run in progress", id="rerun"),
        Binding("c", "cancel_run", "Cancel run", tooltip="Cancel the run after the trials in flight", show=False, id="cancel"),
        Binding("t", "trials(-1)", "Fewer trials", tooltip="Halve the trial count and rerun", key_display="t", id="trials-fewer"),
        Binding("T", "trials(1)", "More trials", tooltip="Double the trial count and rerun", key_display="T", id="trials-more"),
        Binding("a", "arch", "Arch", tooltip="GPU model: presets and what-if L1/L2 size and associativity", id="arch"),
        Binding("m", "md", "MD", tooltip="Choose the MD (CTAs per SM) and rerun at it", id="md"),
        Binding("n", "hot(1)", "Next hot", tooltip="Next load by cost (hottest first)", id="hot-next"),
        Binding("N", "hot(-1)", "Prev hot", tooltip="Previous load by cost", show=False, id="hot-prev"),
        Binding("slash", "search", "Search", tooltip="Search the source (enter: next match, esc: close)", key_display="/", id="search"),
        Binding("right_square_bracket", "metric(1)", "Metric", tooltip="Next histogram metric (kernel L1/L2 ratios, the op's H1/H2/X)", key_display="]", id="metric-next"),
        Binding("left_square_bracket", "metric(-1)", "Prev metric", tooltip="Previous histogram metric", key_display="[", show=False,
                id="metric-prev"),
        Binding("e", "export", "Export", tooltip="Export the report (.txt, .md or .json)", id="export"),
        Binding("R", "recollect", "Recollect", tooltip="Recollect the trace from a .cu source (only for .cu targets)", key_display="R", show=False, id="recollect"),
        Binding("1", "pane('source')", "Source pane", show=False, id="pane-source"),
        Binding("2", "pane('hist')", "Histogram pane", show=False, id="pane-hist"),
        Binding("3", "pane('sm')", "SM pane", show=False, id="pane-sm"),
        Binding("4", "pane('md')", "MD pane", show=False, id="pane-md"),
    ]

    def __init__(self, target: str | Path | None = None, config: RunConfig | None = None, *,
                 theme: str | None = None, session: Session | None = None, analysis: Any = None,
                 show_timing: bool = True, clock: Callable[[], float] = time.monotonic) -> None:
        """Open `target` (a .tptrace path or a demo name) and run it under `config`; or show a
        given `session` with a finished `analysis` (no run starts: r reruns), as tests do."""
        super().__init__()
        self.target = str(target) if target is not None else (str(session.path) if session else "")
        self.config = config or (session.config if session else RunConfig())
        self.theme_name = theme or DEFAULT_THEME
        self.session: Session | None = session
        self.trace: Any = session.trace if session else None
        self.path: Path | None = session.path if session else None
        self.analysis: Any = analysis
        self._pending: Any = None
        self.generation = 0
        self.phase = "done" if analysis is not None else "loading"
        self.trials_done = analysis.trials if analysis is not None else 0
        self.planned = analysis.planned if analysis is not None else self.config.trials
        self.sweep: SweepProgress | None = None
        self.metric = "l1_read"
        self.pane = "source"
        self.show_timing = show_timing
        self.clock = clock
        self.t_start = clock()
        self.t_first_update: float | None = None
        self.error: TuiprofError | None = None
        self.fatal: TuiprofError | None = None
        self._keep_line = 0
        """The source line to return to after a recollect (0: none pending)."""
        """Why the target could not be opened: quitting then exits 2 and prints it."""
        self.loop: asyncio.AbstractEventLoop | None = None
        self._spin = 0
        self._autorun = session is None

    # --- layout -----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        with Horizontal(id="body", classes="-source"):
            with Vertical(id="left"):
                yield SourceView(id="source")
                yield Input(placeholder="search the source · enter: next match · esc: close", id="search")
            with Vertical(id="side"):
                yield HistogramView(id="hist")
                yield SmPane(id="sm")
                yield MdPane(id="md")
        yield TabStrip(id="tabs")
        yield Footer()

    def on_mount(self) -> None:
        self.loop = asyncio.get_running_loop()
        for theme in load_themes():
            self.register_theme(theme)
        self.theme = self.theme_name
        self.set_interval(REFRESH, self._tick)
        self._render_tabs()
        if self.session is not None:
            self._show_trace()
            self._update_views()
        else:
            self._load(self.target, self.config)
        self.query_one(SourceView).focus()

    # --- loading and runs -------------------------------------------------------------------

    def _load(self, target: str, config: RunConfig) -> None:
        spawn("load", self._load_thread, target, config)

    def _load_thread(self, target: str, config: RunConfig) -> None:
        try:
            session = Session.open(target, config)
        except TuiprofError as exc:
            self.post_message(LoadFailed(exc))
            return
        except Exception as exc:  # an unreadable file must still be one clear message
            self.post_message(LoadFailed(TuiprofError(f"cannot open {target}: {type(exc).__name__}: {exc}")))
            return
        self.post_message(TraceLoaded(session))

    def on_trace_loaded(self, message: TraceLoaded) -> None:
        self.session = message.session
        self.trace, self.path = message.session.trace, message.session.path
        self._show_trace()
        if self._keep_line:
            self.query_one(SourceView).go_to_line(self._keep_line)
            self._keep_line = 0
        self.start_run(self.config, session=message.session)

    def on_load_failed(self, message: LoadFailed) -> None:
        self.phase = "failed"
        self.error = self.fatal = message.error
        self._render_status()
        self.push_screen(ErrorScreen(message.error, f"cannot open {clean(self.target)}", fatal=True))

    def _show_trace(self) -> None:
        """Put the trace's kernel source (the file with most ops) in the source pane."""
        trace = self.trace
        per_file = Counter(o.file for o in trace.ops)
        counts = {s.name: per_file.get(s.name, 0) for s in trace.sources}
        name = max(counts, key=lambda n: counts[n]) if counts else trace.sources[0].name
        if not any(counts.values()):
            ops = list(trace.ops)
        else:
            ops = [o for o in trace.ops if o.file == name]
        self.query_one(SourceView).set_source(name, trace.source_text(name), ops)

    def start_run(self, config: RunConfig, session: Session | None = None) -> bool:
        """Cancel any run in progress and start one under `config`; False when the configuration
        is rejected (shown as an error)."""
        if self.trace is None:
            self.notify("The trace is still loading.", severity="warning")
            return False
        old = self.session if self.phase in ("preparing", "running", "sweep") else None
        if session is None:
            try:
                reuse = self.session.prepared if self.session is not None else None
                session = Session(self.trace, config, self.path, prepared=reuse)
            except TuiprofError as exc:
                self.push_screen(ErrorScreen(exc, "this run cannot start"))
                return False
        if old is not None and old is not session:
            old.cancel()
        self.generation += 1
        self.session, self.config = session, config
        self.analysis, self._pending, self.sweep, self.error = None, None, None, None
        self.trials_done, self.planned = 0, config.trials
        self.phase = "preparing"
        self.t_start = self.clock()
        spawn("run", self._run, session, self.generation)
        self._update_views()
        return True

    def _run(self, session: Session, generation: int) -> None:
        """(On a daemon thread) run `session`, posting each of its events."""
        def on_event(event: Any) -> None:
            self.post_message(RunEvent(generation, event))

        try:
            session.run(on_event)
        except TuiprofError:
            pass  # the Session emitted Failed with the message
        except BaseException as exc:  # never let a worker take the app down
            self.post_message(RunEvent(generation, Failed(TuiprofError(f"simulation failed: {exc}"))))
        finally:
            session.release()

    def on_run_event(self, message: RunEvent) -> None:
        if message.generation != self.generation:
            return  # a cancelled run's late event
        try:
            self._handle(message.event)
        except NoMatches:  # the app is closing: its panes are gone
            pass

    def _handle(self, e: Any) -> None:
        if isinstance(e, TrialDone):
            self.trials_done, self.planned = e.done, e.planned
            self.phase = "running"
        elif isinstance(e, AnalysisUpdated):
            self._pending = e.analysis
        elif isinstance(e, SweepProgress):
            self.sweep = e
            self.phase = "sweep"
        elif isinstance(e, Finished):
            self._pending = e.analysis
            self.phase = "done"
            self._apply_pending()  # the last analysis shows with the "done" status, not a tick later
        elif isinstance(e, Cancelled):
            if e.analysis is not None:
                self._pending = e.analysis
            self.phase = "cancelled"
            self._apply_pending()
        elif isinstance(e, Failed):
            self.phase = "failed"
            self.error = e.error
            self.push_screen(ErrorScreen(e.error, "the run failed"))
        self._render_status()

    def _tick(self) -> None:
        """Apply the latest analysis (at most every REFRESH s) and turn the spinner."""
        try:
            self._apply_pending()
        except NoMatches:  # the app is closing: its panes are gone
            pass

    def _apply_pending(self) -> None:
        if self._pending is not None:
            self.analysis, self._pending = self._pending, None
            if self.t_first_update is None:
                self.t_first_update = self.clock() - self.t_start
            self._update_views()
        elif self.phase in ("loading", "preparing", "running", "sweep"):
            self._spin += 1
            self._render_status()
            if self.phase == "sweep":
                self._update_md()

    # --- views ------------------------------------------------------------------------------

    def _update_views(self) -> None:
        self.query_one(SourceView).set_analysis(self.analysis)
        self._update_hist()
        d = self.analysis.decisions if self.analysis is not None else None
        waiting = "waiting for the main run…" if self.phase != "failed" else "no result: the run failed"
        self.query_one(SmPane).show(d.sm if d is not None else None, waiting)
        self._update_md()
        self._render_status()
        screen = self.screen
        if isinstance(screen, DrillScreen) and self.analysis is not None:
            screen.update_analysis(self.analysis)

    def _update_md(self) -> None:
        d = self.analysis.decisions if self.analysis is not None else None
        self.query_one(MdPane).show(d, self.sweep, self.session.md if self.session else None)

    def _update_hist(self) -> None:
        keys = metric_keys(self.query_one(SourceView).current_op)
        if self.metric not in keys:
            self.metric = keys[0]
        measured = self.trace.provenance.measured if self.trace is not None else {}
        empty = {"loading": "loading the trace…", "failed": "no result: the run failed",
                 "cancelled": "cancelled before the first trial"}.get(
            self.phase, "waiting for the first trial (the first run compiles the simulator)…")
        self.query_one(HistogramView).show(series(self.analysis, self.metric, measured), empty)

    def _render_status(self) -> None:
        """Phase first (it changes), then the headline ratios, then what is simulated."""
        s = self.session
        parts: list[tuple[str, str]] = [("tuiprof ", "bold $text-accent"),
                                         (clean(Path(self.target).name or self.target), "bold"), (" │ ", "$text-muted")]
        spin = SPINNER[self._spin % len(SPINNER)]
        elapsed = f" {self.clock() - self.t_start:.0f}s" if self.show_timing else ""
        if self.phase == "loading":
            parts.append((f"{spin} loading the trace…{elapsed}", ""))
        elif self.phase == "preparing":
            parts.append((f"{spin} preparing the simulator (the first run compiles it)…{elapsed}", ""))
        elif self.phase == "running":
            parts.append((f"{spin} trial {self.trials_done}/{self.planned}", "bold"))
        elif self.phase == "sweep" and self.sweep is not None:
            sw = self.sweep
            parts.append((f"{spin} MD sweep {sw.md}/{len(sw.mds)}: {sw.done}/{sw.planned}", "bold"))
        elif self.phase == "done":
            timing = (f" in {self.analysis.elapsed:.1f}s" if self.show_timing and self.analysis is not None else "")
            converged = " (converged)" if self.trials_done < self.planned else ""
            parts.append((f"✓ {self.trials_done}/{self.planned} trials{converged}{timing}", "bold $text-success"))
        elif self.phase == "cancelled":
            parts.append((f"■ cancelled at {self.trials_done}/{self.planned}", "bold $text-warning"))
        elif self.phase == "failed":
            parts.append(("✗ failed (r reruns)", "bold $text-error"))
        a = self.analysis
        if a is not None:
            h = a.headline
            parts += [(" │ L1 ", "$text-muted"), (fmt.pct(h["l1_read"].mean, 1), "bold"),
                      (" L2 ", "$text-muted"), (fmt.pct(h["l2_read"].mean, 1), "bold")]
        if s is not None:
            over = "*" if s.config.overrides else ""
            parts.append((f" │ {clean(s.arch.name)}{over} · MD {s.md} · seed {s.config.seed} · {s.config.trials} trials"
                          f" · {clean(s.trace.launch.kernel)}", "$text-muted"))
        self.query_one(StatusBar).update(Content.assemble(*parts))

    def _render_tabs(self) -> None:
        parts: list[Content] = []
        for i, (key, label) in enumerate(PANES, 1):
            text = f" {i} {label} "
            if key == self.pane:
                parts.append(Content.styled(f"▸{text}", "bold reverse"))
            else:
                parts.append(Content.from_markup(f"[@click=app.pane('{key}')] {text}[/]"))
        self.query_one(TabStrip).update(Content("│").join(parts))

    # --- events from the panes --------------------------------------------------------------

    def on_source_view_cursor_moved(self, message: SourceView.CursorMoved) -> None:
        if "." in self.metric and message.op is not None:
            self.metric = f"op{message.op}.{self.metric.split('.', 1)[1]}"
        self._update_hist()

    def on_source_view_drill_requested(self, message: SourceView.DrillRequested) -> None:
        self.open_drill(message.op)

    def open_drill(self, op: int) -> None:
        if self.trace is None or self.session is None:
            return
        self.push_screen(DrillScreen(op, self.analysis, self.trace, self.session.arch))

    @on(Input.Submitted, "#search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        if not self.query_one(SourceView).search(event.value):
            self.notify(f"{clean(event.value)!r} not found", severity="warning", timeout=2, markup=False)

    @on(Input.Changed, "#search")
    def _search_changed(self, event: Input.Changed) -> None:
        view = self.query_one(SourceView)
        if event.value and view.rows:
            view.cursor = max(0, view.cursor - 1)
            view.search(event.value)

    def on_key(self, event: Any) -> None:
        search = self.query_one("#search", Input)
        if event.key == "escape" and search.has_class("-open"):
            search.remove_class("-open")
            self.query_one(SourceView).focus()
            event.stop()

    # --- actions ----------------------------------------------------------------------------

    async def action_quit(self) -> None:
        self.cancel_everything()
        code = 2 if self.fatal is not None else 0
        self.exit(code, return_code=code)

    def cancel_everything(self) -> None:
        if self.session is not None:
            self.session.cancel()

    def exit_on_signal(self, signum: int) -> None:
        """SIGINT or SIGTERM (on the event loop): cancel the run and close with 128 + signum."""
        self.cancel_everything()
        self.exit(128 + signum, return_code=128 + signum)

    def request_signal_exit(self, signum: int) -> bool:
        """From a signal handler: schedule `exit_on_signal` on the event loop, never blocking;
        False when the loop is not running (the caller's watchdog then ends the process)."""
        loop = self.loop
        if loop is None or loop.is_closed() or not loop.is_running():
            return False
        loop.call_soon_threadsafe(self.exit_on_signal, signum)
        return True

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.key_groups()))

    def action_rerun(self) -> None:
        """New seed (seed + 1), same everything else; cancels the run in progress."""
        if self.start_run(replace(self.config, seed=self.config.seed + 1)):
            self.notify(f"rerun with seed {self.config.seed}", timeout=2)

    def action_cancel_run(self) -> None:
        if self.session is not None and self.phase in ("preparing", "running", "sweep"):
            self.session.cancel()
            self.notify("cancelling after the trials in flight…", timeout=2)

    def action_trials(self, step: int) -> None:
        n = fmt.trial_count_steps(self.config.trials, step > 0)
        if n == self.config.trials:
            self.notify(f"already at {n} trials", severity="warning", timeout=2)
            return
        if self.start_run(replace(self.config, trials=n)):
            self.notify(f"rerun with {n} trials", timeout=2)

    def action_arch(self) -> None:
        from tuiprof.arch.presets import load_arch, preset_names

        presets = [(n, load_arch(n).description) for n in preset_names()]
        current = self.config.arch or (self.trace.provenance.arch if self.trace is not None else "")

        def chosen(result: tuple[str, dict[str, str]] | None) -> None:
            if result is not None:
                name, overrides = result
                if self.start_run(replace(self.config, arch=name, overrides=overrides, md=None)):
                    self.notify(clean(f"rerun on {name}" + "".join(f", {k}={v}" for k, v in overrides.items()), 300),
                                timeout=3, markup=False)

        self.push_screen(ArchScreen(presets, current, dict(self.config.overrides)), chosen)

    def action_md(self) -> None:
        if self.session is None:
            return
        d = self.analysis.decisions.md if self.analysis is not None and self.analysis.decisions else None

        def chosen(md: int | None) -> None:
            if md is not None and self.start_run(replace(self.config, md=md)):
                self.notify(f"rerun at MD {md}", timeout=2)

        self.push_screen(MdScreen(self.session.occupancy.ctas_per_sm, self.session.md, d), chosen)

    def action_hot(self, step: int) -> None:
        if self.query_one(SourceView).jump_hot(step) is None:
            self.notify("no ranked load yet (waiting for the first trial)", severity="warning", timeout=2)
        elif self.pane != "source":
            self.action_pane("source")

    def action_search(self) -> None:
        self.action_pane("source")
        search = self.query_one("#search", Input)
        search.add_class("-open")
        search.focus()

    def action_metric(self, step: int) -> None:
        keys = metric_keys(self.query_one(SourceView).current_op)
        i = keys.index(self.metric) if self.metric in keys else 0
        self.metric = keys[(i + step) % len(keys)]
        self._update_hist()

    def action_pane(self, pane: str) -> None:
        body = self.query_one("#body")
        body.remove_class(*(f"-{k}" for k, _ in PANES))
        body.add_class(f"-{pane}")
        self.pane = pane
        self._render_tabs()
        if pane == "source":
            self.query_one(SourceView).focus()

    def action_recollect(self) -> None:
        """Recompile the .cu target, re-run its launch script in the emulator and rerun, keeping
        the cursor's source line (after the user edited the source)."""
        if self.path is None or self.path.suffix != ".cu":
            self.notify("R recollects from a .cu source; this target is a recorded trace "
                        f"({self.path.name if self.path else self.target}), so there is nothing to recollect.",
                        severity="warning", timeout=4)
            return
        if self.session is not None:
            self.session.cancel()
        self._keep_line = self.query_one(SourceView).current_line
        self.notify(f"recompiling {clean(self.path.name)} and running its launch script in the emulator…", timeout=3)
        spawn("recollect", self._recollect_thread, str(self.path), self.config)

    def _recollect_thread(self, target: str, config: RunConfig) -> None:
        try:
            session = Session.open(target, config)
        except TuiprofError as exc:
            self.post_message(RecollectFailed(exc))
            return
        self.post_message(TraceLoaded(session))

    def on_recollect_failed(self, message: RecollectFailed) -> None:
        """A failed recollect (the edit does not compile, the script raises) is shown; the last
        results stay."""
        self._keep_line = 0
        self.push_screen(ErrorScreen(message.error, "recollecting failed; the results shown are the previous ones"))

    def action_export(self) -> None:
        if self.session is None or self.analysis is None:
            self.notify("nothing to export before the first trial", severity="warning")
            return
        kernel = file_part(self.session.trace.launch.kernel)
        arch = file_part(self.session.arch.name)
        default = f"tuiprof-{kernel}-{arch}-md{self.session.md}-seed{self.config.seed}.txt"

        def chosen(path: Path | None) -> None:
            if path is not None:
                self.export(path)

        self.push_screen(ExportScreen(default), chosen)

    def export(self, path: Path) -> None:
        """Write the report of the current session and analysis (format from the suffix) on a
        daemon thread: a FIFO or a slow disk must not freeze the UI, and any failure (a name too
        long, a folder that is a file, a full disk) is a modal, never the end of the session."""
        if self.session is None or self.analysis is None:
            return
        spawn("export", self._export, self.session, self.analysis, str(path))

    def _export(self, session: Session, analysis: Any, path: str) -> None:
        from tuiprof.output import write_output
        from tuiprof.report import document, render
        from tuiprof.session import input_files

        try:
            fmt_name = {".json": "json", ".md": "md"}.get(Path(path).suffix.lower(), "text")
            inputs = input_files(session.path or self.target, session.config)  # never written over
            write_output(render(document(session, analysis), fmt_name), path, protect=inputs)
        except TuiprofError as exc:
            self.post_message(ExportDone(path, exc))
        except Exception as exc:  # OSError and the like: still one message, the app lives on
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            self.post_message(ExportDone(path, TuiprofError(f"cannot write {path}: {reason}",
                                                            "choose another name or folder")))
        else:
            self.post_message(ExportDone(path, None))

    def on_export_done(self, message: ExportDone) -> None:
        if message.error is not None:
            self.push_screen(ErrorScreen(message.error, "export failed"))
        else:
            self.notify(f"report written to {clean(message.path, MAX_MESSAGE)}", timeout=3, markup=False)

    # --- help and palette -------------------------------------------------------------------

    def key_groups(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """Every binding, grouped, for the help screen."""
        def rows(bindings: Iterable[Any]) -> list[tuple[str, str]]:
            out = []
            for b in bindings:
                key = b.key_display or ", ".join(self.get_key_display(Binding(k, "")) for k in b.key.split(","))
                out.append((key, b.tooltip or b.description))
            return out

        app = [b for b in self.BINDINGS if isinstance(b, Binding)]
        return [
            ("Runs", rows(b for b in app if b.id in ("rerun", "cancel", "trials-fewer", "trials-more", "arch", "md",
                                                     "recollect", "export"))),
            ("Navigation", rows(b for b in app if b.id in ("hot-next", "hot-prev", "search", "metric-next",
                                                           "metric-prev", "pane-source", "pane-hist", "pane-sm",
                                                           "pane-md"))
             + rows(SourceView.BINDINGS)),
            ("Drill-down", rows(DrillScreen.BINDINGS)),
            ("App", rows(b for b in app if b.id in ("help", "quit")) + [("ctrl+p", "Command palette")]),
        ]

    def palette_commands(self) -> list[tuple[str, str, Callable[[], Any]]]:
        """(name, help, callback) of tuiprof's commands for the command palette."""
        cmds: list[tuple[str, str, Callable[[], Any]]] = [
            ("Rerun with a new seed", "r: cancel any run and start again with seed + 1", self.action_rerun),
            ("Cancel the run", "c: stop after the trials in flight", self.action_cancel_run),
            ("More trials", "T: double the trial count and rerun", partial(self.action_trials, 1)),
            ("Fewer trials", "t: halve the trial count and rerun", partial(self.action_trials, -1)),
            ("Choose the GPU model", "a: presets and what-if L1/L2 edits", self.action_arch),
            ("Choose the MD", "m: resident CTAs per SM, and rerun", self.action_md),
            ("Export the report", "e: text, Markdown or JSON", self.action_export),
            ("Jump to the hottest load", "n: loads by cost", partial(self.action_hot, 1)),
            ("Drill into the load under the cursor", "enter", self._drill_current),
            ("Keys", "?: every key", self.action_help),
        ]
        for key, title in HEADLINES.items():
            cmds.append((f"Histogram: {title}", "[ ] cycle the metrics", partial(self._set_metric, key)))
        for key, label in PANES:
            cmds.append((f"Show the {label} pane", "1-4 below 120 columns", partial(self.action_pane, key)))
        return cmds

    def _set_metric(self, key: str) -> None:
        self.metric = key
        self._update_hist()

    def _drill_current(self) -> None:
        op = self.query_one(SourceView).current_op
        if op is not None:
            self.open_drill(op)
