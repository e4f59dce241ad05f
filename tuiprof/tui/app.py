"""The tuiprof Textual app: the annotated source, with the histogram, SM utilisation and model
panes beside it when they fit after the source's lines (else as tabs), over one Session.

Worker threads only post messages (`tuiprof.tui.messages`); the app owns every piece of state
and repaints at most about ten times a second, whatever the rate of trials. A rerun keeps the
previous results on screen, dimmed, until the new ones arrive. The workers are daemon threads,
not Textual thread workers: those run on asyncio's default executor, which the app waits for on
exit (a cancelled run would keep the process alive, headless, until its last trial), and whose
threads keep a reference to the last worker they ran (and so to its Session, its trials and its
prepared trace) for as long as the app lives.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial, wraps
from pathlib import Path
from typing import TYPE_CHECKING, Concatenate, Literal, ParamSpec

from textual import events, on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.css.query import NoMatches
from textual.driver import Driver
from textual.filter import Monochrome, NoColor
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, Static

from tuiprof.compare.cache import SessionRuns
from tuiprof.errors import TuiprofError
from tuiprof.model.analysis import HEADLINES, load_rank
from tuiprof.progress import Phase
from tuiprof.session import MIN_TRIALS as EARLY_STOP_AFTER
from tuiprof.session import AnalysisUpdated, Cancelled, Failed, Finished, RunConfig, Session, SweepProgress, TrialDone
from tuiprof.toolchain.demangle import display_name
from tuiprof.tui import delta, heap
from tuiprof.tui import format as fmt
from tuiprof.tui.actions import ACTIONS, GROUPS, bindings
from tuiprof.tui.commands import TuiprofCommands
from tuiprof.tui.messages import (
    Compiling,
    ExportDone,
    LoadFailed,
    LoadProgress,
    PatternsReady,
    RecollectFailed,
    RunEvent,
    RunReused,
    TraceLoaded,
    WarmupProgress,
)
from tuiprof.tui.metrics import DEFAULT, OP_PARTS, Levels, series
from tuiprof.tui.panes.histogram import HistogramView
from tuiprof.tui.panes.md import MdPane
from tuiprof.tui.panes.sm import SmPane
from tuiprof.tui.panes.source import CODE_WANT, SourceView
from tuiprof.tui.screens.drill import DrillScreen
from tuiprof.tui.screens.modals import ArchScreen, ErrorScreen, ExportScreen, HelpScreen, MdScreen
from tuiprof.tui.status import AppFooter, Field, StatusBar
from tuiprof.tui.text import MAX_MESSAGE, clean, file_part
from tuiprof.tui.themes import DEFAULT_THEME, MUTED, load_themes

if TYPE_CHECKING:
    from tuiprof.model.analysis import Analysis
    from tuiprof.model.md import MdDecision
    from tuiprof.model.pattern import AddressPattern
    from tuiprof.session import Event
    from tuiprof.trace.data import Trace

REFRESH = 0.1
"""Seconds between repaints of the panes while a run streams in (about 10 per second)."""
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
PANES = (("source", "Source"), ("hist", "Histogram"), ("sm", "SMs"), ("md", "Model"))
UiPhase = Literal["loading", "preparing", "running", "sweep", "done", "cancelled", "failed"]
"""Where the app is: opening the target, then a run's phases, then how it ended."""
RUNNING: tuple[UiPhase, ...] = ("preparing", "running", "sweep")
MIN_SIDE = 36
"""Columns the side panes need beside the source; with fewer left they become tabs."""
MAX_SIDE = 96
"""Columns the side panes take at most (the rest stays the source's)."""
MIN_CODE = 40
"""Code columns the layout always leaves the source when it has panes beside it."""
MAX_TOLERANCE = 0.05
"""The loosest tolerance `t` goes to (5 points of hit ratio)."""
MAX_TRIALS, MIN_TRIALS = 4096, 4
COVERED_REFRESH = 1.0
"""Seconds between updates of the main screen while a dialog covers it: each one redrew the
whole terminal under the dialog (~22 kB at 120x40, ten times a second), and a key pressed in
the dialog waited behind those frames (issue 25)."""
MAIN_SCREEN_ONLY = ("zoom", "pane", "metric")
"""Actions about the main screen's layout: hidden in the drill-down."""


BACKGROUND_NICE = 10
"""How much lower than the UI's thread the work runs (Linux's per-thread nice value): on a machine
whose cores the trials fill, the key the user presses must not wait for them (issue 25)."""


def lower_priority() -> None:
    """Lower the calling thread's scheduling priority by BACKGROUND_NICE; the threads it starts
    inherit it (the trial pool's, the emulator's). Linux only: there the nice value belongs to a
    thread; elsewhere it would be the whole process's, the UI's thread included."""
    if not sys.platform.startswith("linux"):
        return
    try:
        os.setpriority(os.PRIO_PROCESS, 0, min(19, os.getpriority(os.PRIO_PROCESS, 0) + BACKGROUND_NICE))
    except OSError:  # not permitted here: the work runs at the UI's priority
        pass


def _background(target: Callable[..., None], *args: object) -> None:
    lower_priority()
    target(*args)


P = ParamSpec("P")


def while_running(handler: Callable[Concatenate[TuiprofApp, P], None]) -> Callable[Concatenate[TuiprofApp, P], None]:
    """A handler of a message or timer that does nothing once the app has begun to shut down.
    Textual removes the screens' widgets while the app still dispatches what was queued before
    (`run_test` shuts down beside the message loop), so a late message (a background line, a
    trace loaded, a trial) would find its panes gone and fail the exit with NoMatches. A
    handler that never awaits runs whole or not at all: the check before it is exact."""
    @wraps(handler)
    def guarded(app: TuiprofApp, /, *args: P.args, **kwargs: P.kwargs) -> None:
        if app.is_running:
            handler(app, *args, **kwargs)
    return guarded


def spawn(name: str, target: Callable[..., None], *args: object) -> threading.Thread:
    """Run `target(*args)` on a daemon thread at a lower priority than the UI's (see the module
    docstring for why not a Textual worker)."""
    thread = threading.Thread(target=_background, args=(target, *args), name=f"tuiprof-{name}", daemon=True)
    thread.start()
    return thread


def side_width(width: int, gutter: int, longest: int) -> int:
    """Columns for the side panes at terminal `width`: what is left after the gutter and the
    source's longest line (up to CODE_WANT columns of it), at most MAX_SIDE; 0 when fewer than
    MIN_SIDE are left (the panes are then tabs)."""
    code = min(CODE_WANT, max(MIN_CODE, longest))
    side = min(MAX_SIDE, width - gutter - code - 1)
    return side if side >= MIN_SIDE else 0


def precision_step(config: RunConfig, sweep_trials: int, more: bool) -> RunConfig:
    """`T` (more) and `t`: with a tolerance, halve (double) it and allow 4x (a quarter of) the
    trials, since the confidence interval narrows as 1/sqrt(n), never fewer than the early stop's
    minimum (below it a run could never converge); without one, double (halve) the trials. The MD
    sweep keeps its trial count and tolerance, so that it is not rerun for nothing."""
    sweep = replace(config, sweep_trials=config.sweep_trials or sweep_trials, sweep_adaptive=config.adaptive_sweep,
                    sweep_tolerance=config.tolerance if config.sweep_tolerance == "same" else config.sweep_tolerance)
    if config.tolerance:
        tol = config.tolerance / 2 if more else min(MAX_TOLERANCE, config.tolerance * 2)
        trials = min(MAX_TRIALS, config.trials * 4) if more else max(EARLY_STOP_AFTER, config.trials // 4)
        return replace(sweep, tolerance=tol, trials=trials)
    trials = min(MAX_TRIALS, config.trials * 2) if more else max(MIN_TRIALS, config.trials // 2)
    return replace(sweep, trials=trials)


class TabStrip(Static):
    """When the panes do not fit beside the source they become tabs; this is their strip (1-4 or click)."""

    DEFAULT_CSS = "TabStrip { height: 1; background: $panel; padding: 0 1; }"


class TuiprofApp(App[int]):
    """Annotated source, live Monte Carlo histogram, SM utilisation and the model pane of a trace."""

    TITLE = "tuiprof"
    COMMANDS = App.COMMANDS | {TuiprofCommands}
    CSS = """
    #body { height: 1fr; }
    #left { width: 1fr; height: 1fr; }
    #side { height: 1fr; border-left: vkey $panel; }
    #search { display: none; dock: bottom; height: 3; }
    #search.-open { display: block; }
    #hist { height: 1fr; min-height: 8; }
    #sm { border-top: hkey $panel; }
    #md { border-top: hkey $panel; }
    Screen.-split #tabs { display: none; }
    Screen.-split #sm { max-height: 12; }
    Screen.-split.-zoom #side { display: none; }
    Screen.-tabs #body { layout: vertical; }
    Screen.-tabs #side { width: 100%; border-left: none; }
    Screen.-tabs #side > * { height: 1fr; border-top: none; max-height: 100%; }
    Screen.-tabs #body.-source #side { display: none; }
    Screen.-tabs #body.-hist #left, Screen.-tabs #body.-sm #left, Screen.-tabs #body.-md #left { display: none; }
    Screen.-tabs #body.-hist #sm, Screen.-tabs #body.-hist #md { display: none; }
    Screen.-tabs #body.-sm #hist, Screen.-tabs #body.-sm #md { display: none; }
    Screen.-tabs #body.-md #hist, Screen.-tabs #body.-md #sm { display: none; }
    """
    BINDINGS = bindings()  # type: ignore[assignment]  # list[Binding] is what Textual reads

    def __init__(self, target: str | Path | None = None, config: RunConfig | None = None, *,
                 theme: str | None = None, session: Session | None = None, analysis: "Analysis | None" = None,
                 show_timing: bool = True, clock: Callable[[], float] = time.monotonic, warm_up: bool = False) -> None:
        """Open `target` (a .tptrace path or a demo name) and run it under `config`; or show a
        given `session` with a finished `analysis` (no run starts: r reruns), as tests do. With
        `warm_up`, once the first run has its first trial, the kernels not yet compiled for the
        other presets and the emulator are compiled in a background process (`tuiprof.warmup`)."""
        super().__init__()
        if self.no_color:  # NO_COLOR means no colour at all, not Textual's greys (no-color.org)
            self._filters = [NoColor() if isinstance(f, Monochrome) else f for f in self._filters]
        self.target = str(target) if target is not None else (str(session.path) if session else "")
        self.config = config or (session.config if session else RunConfig())
        self.theme_name = theme or DEFAULT_THEME
        self.session: Session | None = session
        self.trace: "Trace | None" = session.trace if session else None
        self.path: Path | None = session.path if session else None
        self.analysis: "Analysis | None" = analysis
        self._pending: "Analysis | None" = None
        self.generation = 0
        self._settled = 0
        """The run whose results froze the heap (`tuiprof.tui.heap`)."""
        self._retired: list[weakref.ref[Session]] = []
        """The sessions this app replaced: the heap is frozen again only once they are collected
        (a frozen object is never collected, and a session lives in reference cycles)."""
        self.collector = heap.Collector()
        self._drill: DrillScreen | None = None
        self._drill_asked = False
        self._painted_at = 0.0
        """When the tick last updated the main screen."""
        """A quiet tick asked for the drill-down to be built ahead (`_prepare_drill`)."""
        self._key_at = 0.0
        self.phase: UiPhase = "done" if analysis is not None else "loading"
        self.trials_done = analysis.trials if analysis is not None else 0
        self.planned = analysis.planned if analysis is not None else self.config.trials
        self.sweep: SweepProgress | None = None
        self.metric = DEFAULT
        self.levels = Levels.of(session.arch) if session else Levels()
        """The cache levels of the GPU the results shown are for (an absent one's figures are not shown)."""
        self.pane = "source"
        self.zoom = False
        self.stale = False
        """The panes show the previous run's results (dimmed) while a rerun computes."""
        self.previous_md: "MdDecision | None" = None
        """The previous run's MD decision, shown while a rerun's sweep computes."""
        self.compiles: bool | None = None
        """Whether this run's first trial compiles the simulator (None: not known yet)."""
        self.warm_up = warm_up
        self.warming: str | None = None
        """The background warm-up's latest line while it runs."""
        self._warmup: subprocess.Popen[str] | None = None
        self._warmup_lock = threading.Lock()
        self._closing_down = False
        """The app is quitting: no background warm-up may start."""
        self.cancelling = False
        """`c` was pressed: the run stops after the trials in flight (its Cancelled event follows)."""
        self.patterns: dict[int, "AddressPattern"] | None = None
        self._patterns_asked = False
        self.show_timing = show_timing
        self.clock = clock
        self.t_start = clock()
        self.t_first_update: float | None = None
        self.error: TuiprofError | None = None
        self.fatal: TuiprofError | None = None
        """Why the target could not be opened: quitting then exits 2 and prints it."""
        self.end_process: Callable[[int], None] | None = None
        """Set by `tuiprof.tui.run_app`: restores the terminal and ends the process with a status,
        so that `q` does not wait for the widget tree's teardown; None under a test pilot."""
        self._keep_line = 0
        """The source line to return to after a recollect (0: none pending)."""
        self.loop: asyncio.AbstractEventLoop | None = None
        self._spin = 0
        self.load_phase = Phase("loading the trace")
        """What opening (or recollecting) the target is doing now."""
        self._phase_before_recollect: UiPhase = "done"
        self._search_from: tuple[int, int] | None = None
        """The source cursor and top row when `/` opened the search (esc goes back there)."""
        self.baseline: delta.Baseline | None = None
        """The pinned run (`b`) every view compares with; None until `b`, again after `B`."""
        self._against: delta.Against | None = None
        self.runs = SessionRuns()
        """This session's finished runs by run key: settings seen before are shown again, not simulated."""
        self._digest: tuple[object, str] | None = None
        """(trace, its digest) of the last trace keyed."""

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
        yield AppFooter()

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver for this terminal; on POSIX terminals its Linux driver with an input
        thread that hands a lone Esc on once its escape delay is over (`tuiprof.tui.driver`)."""
        chosen = super().get_driver_class()
        if chosen.__name__ == "LinuxDriver" and chosen.__module__ == "textual.drivers.linux_driver":
            from tuiprof.tui.driver import PromptEscDriver

            return PromptEscDriver
        return chosen

    def on_mount(self) -> None:
        self.loop = asyncio.get_running_loop()
        for theme in load_themes():
            self.register_theme(theme)
        self.theme = self.theme_name
        self.collector.start()
        self.set_interval(REFRESH, self._tick)
        self._layout()
        self._render_tabs()
        if self.session is not None:
            self._show_trace()
            self._update_views()
            self.call_after_refresh(heap.settle, True)
        else:
            self._load(self.target, self.config)
        self.query_one(SourceView).focus()

    def on_unmount(self) -> None:
        self.collector.stop()

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key):
            self._key_at = time.monotonic()
        await super().on_event(event)

    @while_running
    def on_resize(self, event: events.Resize) -> None:
        """Lay out for the size the event carries: this handler runs before Textual's own stores
        the new size, so `self.size` would still be the previous one (a layout one resize late)."""
        self._layout(event.size.width)

    @property
    def split(self) -> bool:
        """The side panes sit beside the source (else they are tabs)."""
        return bool(self.screen_stack) and self.screen_stack[0].has_class("-split")

    def _layout(self, width: int | None = None) -> None:
        """Split or tabs, and the side panes' width at terminal `width` (default: the app's size):
        the source gets its lines first."""
        if not self.screen_stack:
            return
        main = self.screen_stack[0]
        try:
            view = main.query_one(SourceView)
        except NoMatches:
            return
        side = side_width(self.size.width if width is None else width, view.gutter_width, view.longest)
        main.set_class(side > 0, "-split")
        main.set_class(side == 0, "-tabs")
        main.set_class(self.zoom, "-zoom")
        main.query_one("#side").styles.width = side + 1 if side else None  # + its left border; tabs: the CSS's
        self._render_tabs()

    # --- loading and runs -------------------------------------------------------------------

    def _load(self, target: str, config: RunConfig) -> None:
        spawn("load", self._open_thread, target, config, False)

    def _open_thread(self, target: str, config: RunConfig, recollect: bool) -> None:
        """(On a daemon thread) open `target`, posting each phase, then the session or why not
        (a failed recollect keeps the results shown; a failed load has nothing to show)."""
        try:
            session = Session.open(target, config, self._post_phase)
        except Exception as exc:  # an unreadable file must still be one clear message
            error = exc if isinstance(exc, TuiprofError) else TuiprofError(
                f"cannot open {target}: {type(exc).__name__}: {exc}")
            self.post_message(RecollectFailed(error) if recollect else LoadFailed(error))
            return
        self.post_message(TraceLoaded(session))

    def _post_phase(self, phase: Phase) -> None:
        """(On the loading thread, or the emulator's) hand each phase of opening the target on."""
        self.post_message(LoadProgress(phase))

    @while_running
    def on_load_progress(self, message: LoadProgress) -> None:
        """Shown at the next tick (the emulator reports its CTAs many times a second)."""
        if self.phase == "loading":
            self.load_phase = message.phase

    @while_running
    def on_trace_loaded(self, message: TraceLoaded) -> None:
        fresh = message.session.trace is not self.trace
        self._retire(message.session)
        self.session = message.session
        self.trace, self.path = message.session.trace, message.session.path
        if fresh:
            self.analysis, self.patterns, self._patterns_asked = None, None, False
            self._show_trace()
            self.call_after_refresh(heap.settle, True)  # after the first paint: the trace and what loading it imported
        if self._keep_line:
            self.query_one(SourceView).go_to_line(self._keep_line)
            self._keep_line = 0
        self.start_run(self.config, session=message.session)

    @while_running
    def on_load_failed(self, message: LoadFailed) -> None:
        self.phase = "failed"
        self.error = self.fatal = message.error
        self._render_status()
        self.push_screen(ErrorScreen(message.error, f"cannot open {clean(self.target)}", fatal=True))

    def source_files(self) -> list[str]:
        """The trace's source files that hold ops (a kernel and the headers its device code is
        in), most ops first; the first source when none does."""
        trace = self.trace
        if trace is None:
            return []
        per_file = Counter(o.file for o in trace.ops)
        names = [s.name for s in trace.sources if per_file.get(s.name)]
        return sorted(names, key=lambda n: -per_file[n]) or [trace.sources[0].name]

    def _show_trace(self, name: str | None = None) -> None:
        """Put a source file of the trace in the source pane: `name`, else the file with most ops."""
        trace = self.trace
        if trace is None:
            return
        files = self.source_files()
        name = name if name in files else files[0]
        ops = [o for o in trace.ops if o.file == name] or (list(trace.ops) if len(files) == 1 else [])
        view = self.query_one(SourceView)
        view.set_source(name, trace.source_text(name), ops)
        if self.analysis is not None:
            view.set_analysis(self.analysis, self.stale)
            if self.patterns is not None:
                view.set_patterns(self.patterns)
        self._layout()
        if self.analysis is not None:
            self._start_patterns()

    def action_next_file(self) -> None:
        """Show the next source file that holds ops (a header's kernel or device functions)."""
        files = self.source_files()
        if len(files) < 2:
            self.notify("the trace's ops are all in one file", timeout=2)
            return
        current = self.query_one(SourceView).file
        self._show_trace(files[(files.index(current) + 1) % len(files)] if current in files else files[0])
        if self.pane != "source":
            self.action_pane("source")

    def _start_patterns(self) -> None:
        """The ops' address patterns (for the reason words), on a thread, once per trace: after the
        first analysis, so that they never delay the first histogram."""
        if self.patterns is None and self.session is not None and not self._patterns_asked:
            self._patterns_asked = True
            spawn("patterns", self._patterns_thread, self.session)

    def _patterns_thread(self, session: Session) -> None:
        self.post_message(PatternsReady(session, session.patterns()))

    @while_running
    def on_patterns_ready(self, message: PatternsReady) -> None:
        if self.session is None or message.session.trace is not self.trace:
            return
        self.patterns = message.patterns
        self.query_one(SourceView).set_patterns(message.patterns)

    def start_run(self, config: RunConfig, session: Session | None = None) -> bool:
        """Cancel any run in progress and start one under `config`, keeping the results shown
        (dimmed) until the new run's first arrive; False when the configuration is rejected
        (shown as an error)."""
        if self.trace is None:
            self.notify("The trace is still loading.", severity="warning")
            return False
        old = self.session if self.phase in RUNNING else None
        if session is None:
            try:
                session = Session(self.trace, config, self.path, previous=self.session)
            except TuiprofError as exc:
                self.push_screen(ErrorScreen(exc, "this run cannot start"))
                return False
        if old is not None and old is not session:
            old.cancel()
        self.generation += 1
        self._retire(session)
        self.session, self.config = session, config
        shown = self.analysis if self.analysis is not None else self._pending
        self.stale = shown is not None
        self.analysis, self._pending = shown, None
        if shown is not None and shown.decisions is not None and shown.decisions.md is not None:
            self.previous_md = shown.decisions.md
        self.sweep, self.error, self.compiles, self.cancelling = None, None, None, False
        self.trials_done, self.planned = 0, config.trials
        self.phase = "preparing"
        self.t_start = self.clock()
        spawn("run", self._run, session, self.generation)
        self._update_views()
        return True

    def run_key(self, session: Session) -> str:
        """`session`'s run key (`tuiprof.compare.cache.run_key`; the trace's digest computed once)."""
        from tuiprof.compare.cache import run_key, trace_digest

        known = self._digest
        if known is None or known[0] is not session.trace:
            known = self._digest = (session.trace, trace_digest(session.trace))
        return run_key(known[1], session.requested_arch, session.config)

    def _run(self, session: Session, generation: int) -> None:
        """(On a daemon thread) show the run made before under the same key if this session has
        one; else say whether the simulator compiles first, then run `session`, posting each of
        its events, and keep the run when it completes."""
        def on_event(event: "Event") -> None:
            self.post_message(RunEvent(generation, event))

        try:
            key: str | None = self.run_key(session)
        except Exception:  # keying is an optimisation: never stop the run for it
            key = None
        found = self.runs.get(key) if key is not None else None
        if found is not None:
            self.post_message(RunReused(generation, *found))
            return
        try:
            self.post_message(Compiling(generation, session.compiles()))
        except Exception:  # only a hint for the status bar: never stop the run for it
            pass
        try:
            analysis = session.run(on_event)
            if key is not None and analysis is not None and session.stop_reason in ("completed", "converged"):
                self.runs.put(key, session, analysis)
        except TuiprofError:
            pass  # the Session emitted Failed with the message
        except BaseException as exc:  # never let a worker take the app down
            self.post_message(RunEvent(generation, Failed(TuiprofError(f"simulation failed: {exc}"))))
        finally:
            session.release()

    def _warm_up_in_background(self) -> None:
        """(On a daemon thread) when kernels are missing from the cache, run `tuiprof warmup
        --progress` (niced; it ends with this process) and post each line it prints."""
        from tuiprof import warmup

        try:
            if not any(warmup.needed(s) for s in warmup.plan()):
                return
            with self._warmup_lock:  # a quit before this point must not leave it running
                if self._closing_down:
                    return
                self._warmup = subprocess.Popen(warmup.background_command(), stdin=subprocess.DEVNULL,
                                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            for line in self._warmup.stdout or ():
                self.post_message(WarmupProgress(line.strip()))
            self._warmup.wait()
        except Exception:  # a convenience: never disturb the run for it
            pass
        self.post_message(WarmupProgress(None))

    @while_running
    def on_warmup_progress(self, message: WarmupProgress) -> None:
        self.warming = message.text
        self._render_status()

    @while_running
    def on_compiling(self, message: Compiling) -> None:
        if message.generation == self.generation:
            self.compiles = message.compiles
            self._render_status()

    @while_running
    def on_run_reused(self, message: RunReused) -> None:
        """A run made before under the same key: shown at once, as if it had just finished."""
        if message.generation != self.generation:
            return
        self.session = message.session
        self.trials_done, self.planned = message.analysis.trials, message.analysis.planned
        self.notify("the same trace and settings as a run made before in this session: shown again, not simulated",
                    timeout=3)
        self._handle(Finished(message.analysis))

    @while_running
    def on_run_event(self, message: RunEvent) -> None:
        if message.generation != self.generation:
            return  # a cancelled run's late event
        self._handle(message.event)

    def _handle(self, e: "Event") -> None:
        if isinstance(e, TrialDone):
            self.trials_done, self.planned = e.done, e.planned
            self.phase = "running"
            if self.warm_up:  # this GPU's kernels are ready: the others compile beside the run
                self.warm_up = False
                spawn("warmup", self._warm_up_in_background)
        elif isinstance(e, AnalysisUpdated):
            self._pending = e.analysis
        elif isinstance(e, SweepProgress):
            self.sweep = e
            self.phase = "sweep"
        elif isinstance(e, Finished):
            self._pending = e.analysis
            self.phase = "done"
            self.previous_md = None
            self._apply_pending()  # the last analysis shows with the "done" status, not a tick later
        elif isinstance(e, Cancelled):
            if e.analysis is not None:
                self._pending = e.analysis
            self.phase = "cancelled"
            self._apply_pending()
            self._update_md()
        elif isinstance(e, Failed):
            self.phase = "failed"
            self.error = e.error
            self.push_screen(ErrorScreen(e.error, "the run failed"))
        if not self.covered():  # under a dialog the tick shows it (see COVERED_REFRESH)
            self._render_status()

    def covered(self) -> bool:
        """A dialog (or the command palette) is open over the main screen: Textual draws the
        main screen under it, dimmed, and redraws the whole terminal for any change to it."""
        return len(self.screen_stack) > 1 and isinstance(self.screen, ModalScreen)

    @while_running
    def _tick(self) -> None:
        """Apply the latest analysis (at most every REFRESH s, every COVERED_REFRESH s while a
        dialog covers the main screen) and turn the spinner."""
        now = time.monotonic()
        if not self.covered() or now - self._painted_at >= COVERED_REFRESH:
            self._painted_at = now
            self._apply_pending()
        quiet = now - self._key_at
        self.collector.tick(quiet)
        self._settle(quiet)
        if quiet >= heap.QUIET and self._drill is None and not self._drill_asked and self._drill_op() is not None:
            self._drill_asked = True
            self.call_after_refresh(self._prepare_drill)  # after this tick's paint: never in front of it

    def _retire(self, session: Session) -> None:
        """`session` replaces the app's: give what an earlier settle froze (the replaced session
        among it) back to the collector, and watch the replaced one until it is freed."""
        if self.session is not None and self.session is not session:
            self._retired.append(weakref.ref(self.session))
            heap.release()
            if self._drill is not None:
                self._drill.follow(session)

    def _settle(self, quiet: float) -> None:
        """Once a run has trials on screen and the user is not typing, freeze what lives on (what
        its first trial compiled or imported) out of full collections' walk, after collecting
        every session this app replaced: frozen, one would never be freed."""
        if self._settled == self.generation or self.trials_done < 1 or quiet < heap.QUIET:
            return
        collected = any(r() is not None for r in self._retired)
        if collected:
            self.collector.collect()  # a replaced session in a cycle is freed only by a collection
            if any(r() is not None for r in self._retired):  # its trials in flight end soon: a later tick
                return
        self._retired.clear()
        self._settled = self.generation
        heap.settle(not collected)  # no second full collection right after the one above

    def _apply_pending(self) -> None:
        if self._pending is not None:
            self.analysis, self._pending, self.stale = self._pending, None, False
            if self.session is not None:
                self.levels = Levels.of(self.session.arch)
            if self.t_first_update is None:
                self.t_first_update = self.clock() - self.t_start
            self._update_views()
            self._start_patterns()
        elif self.phase in ("loading", *RUNNING):
            self._spin += 1
            self._render_status()
            if self.phase == "sweep":
                self._update_md()

    # --- views ------------------------------------------------------------------------------

    def _update_views(self) -> None:
        self._against = delta.against(self.baseline, self.trace, self.analysis, self._against)
        self.query_one(SourceView).set_against(self._against, self.baseline is not None)
        self.query_one(SourceView).set_analysis(self.analysis, self.stale, self.levels)
        self._update_hist()
        d = self.analysis.decisions if self.analysis is not None else None
        waiting = "waiting for the main run…" if self.phase != "failed" else "no result: the run failed"
        sm = self.query_one(SmPane)
        sm.show(d.sm if d is not None else None, waiting)
        for pane in (sm, self.query_one(HistogramView), self.query_one(MdPane)):
            pane.set_class(self.stale, "-stale")
        self._update_md()
        self._render_status()
        screen = self.screen
        if isinstance(screen, DrillScreen) and self.analysis is not None:
            screen.update_analysis(self.analysis)

    def _update_md(self) -> None:
        d = self.analysis.decisions if self.analysis is not None else None
        previous = self.previous_md if d is None or d.md is None else None
        lines = delta.model_lines(self._against, self.levels) if self._against is not None else ()
        self.query_one(MdPane).show(d, self.sweep, self.session.md if self.session else None, self.phase, previous, lines)

    def histogram_op(self) -> int | None:
        """The op whose X/H1/H2 the histogram shows: the one under the cursor, else L1."""
        view = self.query_one(SourceView)
        if view.current_op is not None:
            return view.current_op
        order = view.loads_by_cost()
        return order[0] if order else None

    def _update_hist(self) -> None:
        measured = self.trace.provenance.measured if self.trace is not None else {}
        running = "waiting for the first trial…"
        if self.phase == "preparing" and self.compiles:
            running = "waiting for the first trial (compiling the simulator for this GPU first, once)…"
        empty = {"loading": f"{self.load_phase.text()}…", "failed": "no result: the run failed",
                 "cancelled": "cancelled before the first trial"}.get(self.phase, running)
        if not self.levels.has(self.metric):  # the arch changed to one without that cache level
            self.metric = DEFAULT
        op = self.histogram_op()
        shared = self.analysis.ops[op].passes if self.analysis is not None and op is not None else None
        if shared is not None:  # bank conflicts, constant serialisation: the same in every trial, drawn per request
            self.query_one(HistogramView).show_shared(shared)
            return
        s = series(self.analysis, self.metric, op, measured)
        if s is not None and self._against is not None:
            s = replace(s, baseline=self._against.values(self.metric, op))
        self.query_one(HistogramView).show(s, empty)

    def _phase(self) -> tuple[str, str]:
        """The run's phase as (text, style): what is happening now, with its progress."""
        spin = SPINNER[self._spin % len(SPINNER)]
        elapsed = f" {self.clock() - self.t_start:.0f}s" if self.show_timing else ""
        if self.cancelling and self.phase in RUNNING:
            return (f"■ cancelling at {self.trials_done}/{self.planned} (trials in flight end in the background)…",
                    "bold $text-warning")
        if self.phase == "loading":
            return f"{spin} {self.load_phase.text()}…{elapsed}", ""
        if self.phase == "preparing":
            what = "compiling the simulator (first run on this GPU geometry)" if self.compiles else "preparing the simulator"
            return f"{spin} {what}…{elapsed}", ""
        if self.phase == "running":
            return f"{spin} trial {self.trials_done}/{self.planned}", "bold"
        if self.phase == "sweep" and self.sweep is not None:
            sw = self.sweep
            return f"{spin} MD sweep {sw.sweep_done}/{sw.sweep_planned} trials (MD {sw.md})", "bold"
        if self.phase == "done":
            timing = f" · simulated in {self.analysis.elapsed:.1f}s" if self.show_timing and self.analysis is not None else ""
            converged = " (converged)" if self.trials_done < self.planned else ""
            return f"✓ {self.trials_done}/{self.planned} trials{converged}{timing}", "bold $text-success"
        if self.phase == "cancelled":
            return f"■ cancelled at {self.trials_done}/{self.planned}", "bold $text-warning"
        if self.phase == "failed":
            return "✗ failed (r reruns)", "bold $text-error"
        return "", ""

    def _render_status(self) -> None:
        """The status line's fields in display order with their priorities (`tuiprof.tui.status`):
        the phase is kept longest, then the arch with its what-if `*`, the MD, what a background
        warm-up compiles, the kernel, the hit ratios, the seed, the tolerance, the trace's origin
        and last the target's name; a pinned baseline's field goes last and is kept as long as the
        MD."""
        s, a = self.session, self.analysis
        name = clean(Path(self.target).name or self.target)
        fields = [Field((("tuiprof ", "bold $text-accent"), (name, "bold")), 8, 0), Field((self._phase(),), 0, 1)]
        if self.warming:
            fields.append(Field(((f"in the background: {clean(self.warming.removeprefix('warmup: '))}", MUTED),), 3, 1))
        if a is not None:
            dim = MUTED if self.stale else "bold"
            ratios: list[tuple[str, str]] = []
            for level, key in (("L1", "l1_read"), ("L2", "l2_read")):
                if self.levels.has(key):  # an absent cache level has no figure
                    ratios += [(f" {level} " if ratios else f"{level} ", MUTED), (fmt.pct(a.headline[key].mean), dim)]
            if ratios:
                fields.append(Field(tuple(ratios), 4, 2))
        if s is not None:
            fields += [Field(((clean(s.arch.name), "bold"),), 1, 3), Field(((f"MD {s.md}", "bold"),), 2, 3),
                       Field(((clean(display_name(s.trace.launch.kernel)), ""),), 3, 3),
                       Field(((f"seed {s.config.seed}", MUTED),), 5, 3)]
            if s.config.tolerance:
                fields.append(Field(((f"±{100 * s.config.tolerance:g} pts", MUTED),), 6, 3))
            fields.append(Field(((f"{clean(s.trace.provenance.backend)} trace", MUTED),), 7, 3))
        if self.baseline is not None:  # the views show changes against it: kept as long as the MD
            fields.append(Field(delta.status_part(self.baseline), 2, 4))
        self.query_one(StatusBar).show(fields)

    def _render_tabs(self) -> None:
        parts: list[Content] = []
        for i, (key, label) in enumerate(PANES, 1):
            text = f" {i} {label} "
            if key == self.pane:
                parts.append(Content.styled(f"▸{text}", "bold reverse"))
            else:
                parts.append(Content.from_markup(f"[@click=app.pane('{key}')] {text}[/]"))
        try:
            self.query_one(TabStrip).update(Content("│").join(parts))
        except NoMatches:
            pass

    # --- events from the panes --------------------------------------------------------------

    @while_running
    def on_source_view_cursor_moved(self, message: SourceView.CursorMoved) -> None:
        self._update_hist()

    def on_source_view_drill_requested(self, message: SourceView.DrillRequested) -> None:
        self.open_drill(message.op)

    @while_running
    def on_drill_screen_stepped(self, message: DrillScreen.Stepped) -> None:
        """`n`/`N` in the drill-down move the source cursor along, so that esc returns to the op shown."""
        self.query_one(SourceView).go_to_op(message.op)

    def _drill_op(self) -> int | None:
        """The op a drill-down built ahead starts on (the one under the cursor, else the costliest
        load); None while there is nothing to show in one (no session or no analysis yet)."""
        if self.trace is None or self.session is None or self.analysis is None or not self.trace.ops:
            return None
        op = self.histogram_op()
        return op if op is not None else 0

    def _install_drill(self, op: int) -> DrillScreen:
        """The one drill-down, installed so that it is kept when closed."""
        drill = self._drill = DrillScreen(op, self.analysis, self.session,  # type: ignore[arg-type]  # callers check
                                          self.patterns, lambda: self._against)
        self.install_screen(drill, name="drill")
        return drill

    @while_running
    def _prepare_drill(self) -> None:
        """Build the drill-down ahead, off-screen, at a quiet moment once results are on screen:
        composing and mounting its widgets (and Textual's styling of them) cost the first Enter
        of a session ~90-120 ms of the UI thread, later Enters ~30 ms (issue 25). Its screen is
        started (registered) without being pushed: it composes and mounts in the background and
        the first Enter only fills it and shows it."""
        op = self._drill_op()
        if self._drill is not None or op is None or time.monotonic() - self._key_at < heap.QUIET:
            self._drill_asked = False  # a key came meanwhile (or nothing to show yet): a later quiet tick
            return
        self._get_screen(self._install_drill(op))  # Textual's own start of a screen, as push_screen does first

    def open_drill(self, op: int) -> None:
        if self.trace is None or self.session is None:
            return
        drill = self._drill
        if drill is None:  # one drill-down, kept when closed (installed): the next Enter does not compose it again
            drill = self._install_drill(op)
        else:
            drill.reopen(op, self.analysis, self.session, self.patterns)
        self.push_screen(drill)

    @on(Input.Submitted, "#search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        self._search_from = None  # enter accepts the match: esc then leaves the cursor there
        if not self.query_one(SourceView).search(event.value):
            self.notify(f"{clean(event.value)!r} not found", severity="warning", timeout=2, markup=False)

    @on(Input.Changed, "#search")
    def _search_changed(self, event: Input.Changed) -> None:
        view = self.query_one(SourceView)
        if event.value and view.rows:
            view.cursor = max(0, view.cursor - 1)
            view.search(event.value)

    def on_key(self, event: events.Key) -> None:
        """Esc closes the search and puts the cursor back where `/` found it, unless enter
        accepted a match."""
        search = self.query_one("#search", Input)
        if event.key == "escape" and search.has_class("-open"):
            search.remove_class("-open")
            view = self.query_one(SourceView)
            if self._search_from is not None:
                view.cursor, view.top = self._search_from
                view.refresh()
            self._search_from = None
            view.focus()
            event.stop()

    # --- actions ----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Which actions are available now: True shown, None shown dimmed (not now), False hidden
        (the main screen's views are hidden in the drill-down, which has its own)."""
        if action in MAIN_SCREEN_ONLY and isinstance(self.screen, DrillScreen):
            return False
        if action == "cancel_run":
            return True if self.phase in RUNNING else None
        if action == "export":
            return True if self.analysis is not None else None
        if action in ("rerun", "precision", "arch", "md"):
            return True if self.trace is not None and self.session is not None else None
        if action == "zoom":
            return True if self.split or self.zoom else None
        if action == "next_file":
            return True if len(self.source_files()) > 1 else False
        if action == "baseline":
            return True if self._pinnable() else None
        if action == "clear_baseline":
            return True if self.baseline is not None else None
        return True

    async def action_quit(self) -> None:
        self.cancel_everything()
        code = 2 if self.fatal is not None else 0
        if self.end_process is not None and self.fatal is None:
            self.end_process(code)
        self.exit(code, return_code=code)

    def cancel_everything(self) -> None:
        """Cancel the run and end the background warm-up (and any that was about to start)."""
        if self.session is not None:
            self.session.cancel()
        with self._warmup_lock:
            self._closing_down = True
            if self._warmup is not None and self._warmup.poll() is None:
                self._warmup.terminate()

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
        from tuiprof.glossary import GLOSSARY

        terms = [(f"Terms: {title}", [(t.term, t.meaning) for t in group]) for title, group in GLOSSARY]
        self.push_screen(HelpScreen(self.key_groups() + terms))

    def action_show_help_panel(self) -> None:
        """Textual's keys panel, which esc did not close, is tuiprof's help screen instead."""
        self.action_help()

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """Textual's palette commands, less its "Keys" panel (tuiprof's "Keys" is the help screen)."""
        for command in super().get_system_commands(screen):
            if command.title != "Keys":
                yield command

    def _pinnable(self) -> bool:
        """A finished run (done or cancelled after its main run) is shown, not a previous one."""
        a = self.analysis
        return (a is not None and a.decisions is not None and not self.stale and self.session is not None
                and self.phase not in ("loading", *RUNNING))

    def action_baseline(self) -> None:
        """b: pin the run shown as the baseline."""
        if not self._pinnable():
            self.notify("b pins a finished run: wait for this one to finish", severity="warning", timeout=3)
            return
        pinned = self.pin_baseline(self.session, self.analysis)  # type: ignore[arg-type]
        self.notify(f"baseline pinned: {clean(pinned.label)}; reruns, MD, arch and R now show changes "
                    "against it (* significant); B clears it", timeout=4, markup=False)

    def pin_baseline(self, session: Session, analysis: "Analysis") -> delta.Baseline:
        """Make the run of `session` with `analysis` the baseline every view compares with."""
        from tuiprof.compare.record import record_of

        s = session
        short = f"{s.arch.name} · MD {s.md} · seed {s.config.seed}"
        label = f"{display_name(s.trace.launch.kernel)} · {short} · {analysis.trials} trials"
        self.baseline = delta.Baseline(record_of(s, analysis, self.target), clean(label, MAX_MESSAGE),
                                       clean(short, MAX_MESSAGE))
        self._against = None
        self._update_views()
        self._layout()
        self.refresh_bindings()
        return self.baseline

    def action_clear_baseline(self) -> None:
        """B: no baseline any more."""
        if self.baseline is None:
            return
        self.baseline, self._against = None, None
        self._update_views()
        self._layout()
        self.refresh_bindings()
        self.notify("baseline cleared", timeout=2)

    def action_rerun(self) -> None:
        """New seed (seed + 1), same everything else; cancels the run in progress."""
        if self.start_run(replace(self.config, seed=self.config.seed + 1)):
            self.notify(f"rerun with seed {self.config.seed} (the previous results stay, dimmed, until the new ones "
                        "arrive)", timeout=2)

    def action_cancel_run(self) -> None:
        if self.session is not None and self.phase in RUNNING:
            self.session.cancel()
            self.cancelling = True
            self._render_status()

    def action_precision(self, step: int) -> None:
        """T: a tighter tolerance (more precision), t: a looser one; then rerun."""
        if self.session is None:
            return
        config = precision_step(self.config, self.session.sweep_trial_count(), step > 0)
        if config == self.config:
            self.notify(f"already at {config.trials} trials", severity="warning", timeout=2)
            return
        if self.start_run(config):
            what = (f"to ±{100 * config.tolerance:g} points (95% CI), up to {config.trials} trials"
                    if config.tolerance else f"with {config.trials} trials")
            self.notify(f"rerun {what}", timeout=3)

    def action_arch(self) -> None:
        from tuiprof.arch.presets import load_arch, preset_names

        presets = [(n, load_arch(n).description) for n in preset_names()]
        current = self.config.arch or (self.trace.provenance.arch if self.trace is not None else "")

        def chosen(result: tuple[str, dict[str, str]] | None) -> None:
            if result is not None:
                name, overrides = result
                before = self.session.md if self.session is not None else None
                if self.start_run(replace(self.config, arch=name, overrides=overrides, md=None)):
                    after = self.session.md if self.session is not None else None
                    reset = (f" at MD {after}, its occupancy limit for this kernel (the MD resets with the GPU: it "
                             f"was {before}; m picks another)" if before is not None and after != before else "")
                    self.notify(clean(f"rerun on {name}" + "".join(f", {k}={v}" for k, v in overrides.items())
                                      + reset, 400), timeout=6 if reset else 3, markup=False)

        self.push_screen(ArchScreen(presets, current, dict(self.config.overrides)), chosen)

    def action_md(self) -> None:
        if self.session is None:
            return
        d = self.analysis.decisions.md if self.analysis is not None and self.analysis.decisions else None

        def chosen(md: int | None) -> None:
            if md is not None and self.start_run(replace(self.config, md=md)):
                self.notify(f"rerun at MD {md} (the sweep's other MDs come from its cache)", timeout=2)

        self.push_screen(MdScreen(self.session.occupancy.ctas_per_sm, self.session.md, d), chosen)

    def action_hot(self, step: int) -> None:
        view = self.query_one(SourceView)
        ranks = self.analysis.ranks() if self.analysis is not None and self.trace is not None else {}
        hottest = min((i for i, r in ranks.items() if load_rank(r) is not None), key=lambda i: load_rank(ranks[i]) or 0,
                      default=None)
        if not view.loads_by_cost() and hottest is not None:  # the loads are in another file: go there
            self._show_trace(self.trace.ops[hottest].file)  # type: ignore[union-attr]
        if view.jump_hot(step) is None:
            self.notify("no ranked load yet (waiting for the first trial)", severity="warning", timeout=2)
        elif self.pane != "source":
            self.action_pane("source")

    def action_drill(self) -> None:
        op = self.query_one(SourceView).current_op
        if op is not None:
            self.open_drill(op)

    async def action_search(self) -> None:
        """`/`: search the source; from the drill-down, back to the source first (the letters
        typed next are the search's, never commands)."""
        if isinstance(self.screen, DrillScreen):
            await self.pop_screen()
        self.action_pane("source")
        search = self.query_one("#search", Input)
        if not search.has_class("-open"):
            view = self.query_one(SourceView)
            self._search_from = (view.cursor, view.top)
        search.add_class("-open")
        search.focus()

    def action_metric(self, step: int) -> None:
        metrics = self.levels.metrics()
        i = metrics.index(self.metric) if self.metric in metrics else 0
        self.metric = metrics[(i + step) % len(metrics)]
        self._update_hist()

    def action_zoom(self) -> None:
        self.zoom = not self.zoom
        self._layout()
        self.refresh_bindings()

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
        if self.path is None or self.path.suffix not in (".cu", ".ptx"):
            self.notify("R recollects from a .cu source (or a .ptx file); this target is a recorded trace "
                        f"({self.path.name if self.path else self.target}), so there is nothing to recollect.",
                        severity="warning", timeout=4)
            return
        if self.session is not None:
            self.session.cancel()
        self._keep_line = self.query_one(SourceView).current_line
        self._phase_before_recollect = "cancelled" if self.phase in RUNNING else self.phase
        self.generation += 1  # the cancelled run's late events are dropped
        self.phase, self.load_phase, self.cancelling = "loading", Phase(f"recollecting {self.path.name}"), False
        self.stale = self.analysis is not None
        self.t_start = self.clock()
        self._update_views()
        spawn("recollect", self._open_thread, str(self.path), self.config, True)

    @while_running
    def on_recollect_failed(self, message: RecollectFailed) -> None:
        """A failed recollect (the edit does not compile, the script raises) is shown; the last
        results stay, no longer dimmed."""
        self._keep_line = 0
        self.phase, self.stale = self._phase_before_recollect, False
        self._update_views()
        self.push_screen(ErrorScreen(message.error, "recollecting failed; the results shown are the previous ones"))

    def export_name(self) -> str:
        """The export's default file name: kernel, arch, MD and seed, in characters that are no
        glob or shell special (a what-if arch's * becomes "whatif")."""
        s = self.session
        if s is None:
            return "tuiprof-report.txt"
        arch = file_part(s.arch.name.replace("*", "-whatif"))
        return f"tuiprof-{file_part(display_name(s.trace.launch.kernel, qualified=False))}-{arch}-md{s.md}-seed{self.config.seed}.txt"

    def action_export(self) -> None:
        if self.session is None or self.analysis is None:
            self.notify("nothing to export before the first trial", severity="warning")
            return

        def chosen(path: Path | None) -> None:
            if path is not None:
                self.export(path)

        self.push_screen(ExportScreen(self.export_name()), chosen)

    def export(self, path: Path) -> None:
        """Write the report of the current session and analysis (format from the suffix) on a
        daemon thread: a FIFO or a slow disk must not freeze the UI, and any failure (a name too
        long, a folder that is a file, a full disk) is a modal, never the end of the session.
        During a run the report is the partial one so far, and says so."""
        if self.session is None or self.analysis is None:
            return
        partial = ""
        if self.phase in RUNNING or self.stale:
            partial = f"{self.analysis.trials}/{self.analysis.planned} trials"
            if self.stale:
                partial = "the previous run's results"
        spawn("export", self._export, self.session, self.analysis, str(path), partial)

    def _export(self, session: Session, analysis: "Analysis", path: str, partial: str) -> None:
        from tuiprof.output import write_output
        from tuiprof.report import document, render
        from tuiprof.session import input_files

        try:
            fmt_name = {".json": "json", ".md": "md"}.get(Path(path).suffix.lower(), "text")
            inputs = input_files(session.path or self.target, session.config)  # never written over
            write_output(render(document(session, analysis, partial=bool(partial)), fmt_name), path, protect=inputs)
        except TuiprofError as exc:
            self.post_message(ExportDone(path, exc))
        except Exception as exc:  # OSError and the like: still one message, the app lives on
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            self.post_message(ExportDone(path, TuiprofError(f"cannot write {path}: {reason}",
                                                            "choose another name or folder")))
        else:
            self.post_message(ExportDone(path, None, partial))

    @while_running
    def on_export_done(self, message: ExportDone) -> None:
        if message.error is not None:
            self.push_screen(ErrorScreen(message.error, "export failed"))
        elif message.partial:
            self.notify(f"partial report ({message.partial}; the run goes on) written to "
                        f"{clean(message.path, MAX_MESSAGE)}", timeout=4, markup=False)
        else:
            self.notify(f"report written to {clean(message.path, MAX_MESSAGE)}", timeout=3, markup=False)

    # --- help and palette -------------------------------------------------------------------

    def key_groups(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """Every key, grouped, for the help screen: the action registry, then the source pane's
        movement keys and the drill-down's."""
        def key(b: Binding) -> str:
            return b.key_display or ", ".join(self.get_key_display(Binding(k, "")) for k in b.key.split(","))

        groups: list[tuple[str, list[tuple[str, str]]]] = []
        for group in GROUPS:
            rows = [(key(a.binding()), a.help) for a in ACTIONS if a.group == group]
            if group == "Navigation":
                rows += [(key(b), b.tooltip or b.description) for b in SourceView.BINDINGS
                         if isinstance(b, Binding) and b.id != "source.drill"]
            if group == "App":
                rows.append(("ctrl+p", "Command palette (tuiprof's commands, themes)"))
            groups.append((group, rows))
        groups.insert(2, ("Drill-down", [(key(b), b.tooltip or b.description) for b in DrillScreen.BINDINGS
                                         if isinstance(b, Binding)]))
        return groups

    def palette_commands(self) -> list[tuple[str, str, Callable[[], object]]]:
        """(name, help, callback) of tuiprof's commands available now, for the command palette."""
        cmds: list[tuple[str, str, Callable[[], object]]] = []
        for a in ACTIONS:
            if not a.palette or not self.check_action(a.action.split("(")[0], ()):
                continue
            cmds.append((a.palette, f"{a.key_display or a.keys}: {a.help}",
                         partial(self.run_action, a.action)))
        for key in self.levels.metrics():
            title = OP_PARTS.get(key) or f"{HEADLINES[key]} · kernel"
            cmds.append((f"Histogram: {title}", "[ ] cycle the metrics", partial(self._set_metric, key)))
        return cmds

    def _set_metric(self, key: str) -> None:
        self.metric = key
        self._update_hist()
