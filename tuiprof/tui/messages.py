"""Messages from the worker threads to the app. Workers only post these; the app owns state.

Each run's messages carry the `generation` of the run that produced them, so that the late events
of a cancelled run (trials in flight finish in the background) are recognised and dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

from tuiprof.errors import TuiprofError

if TYPE_CHECKING:
    from tuiprof.model.analysis import Analysis
    from tuiprof.model.pattern import AddressPattern
    from tuiprof.progress import Phase
    from tuiprof.session import Event, Session


class TraceLoaded(Message):
    """The target's trace is loaded and its Session resolved."""

    def __init__(self, session: "Session") -> None:
        super().__init__()
        self.session = session


class RecollectFailed(Message):
    """Recompiling or re-emulating a .cu target failed; the previous results stay."""

    def __init__(self, error: TuiprofError) -> None:
        super().__init__()
        self.error = error


class LoadProgress(Message):
    """The target being opened (or recollected) is in `phase`: compiling, emulating launch k with
    its CTAs done, recording, loading a trace file."""

    def __init__(self, phase: "Phase") -> None:
        super().__init__()
        self.phase = phase


class LoadFailed(Message):
    """The target could not be opened (missing, corrupt, bad configuration)."""

    def __init__(self, error: TuiprofError) -> None:
        super().__init__()
        self.error = error


class RunEvent(Message):
    """One Session event (TrialDone, AnalysisUpdated, SweepProgress, Finished, Cancelled, Failed)."""

    def __init__(self, generation: int, event: "Event") -> None:
        super().__init__()
        self.generation = generation
        self.event = event


class Compiling(Message):
    """Whether the run of `generation` compiles the simulator first (known before its first trial)."""

    def __init__(self, generation: int, compiles: bool) -> None:
        super().__init__()
        self.generation = generation
        self.compiles = compiles


class WarmupProgress(Message):
    """The background warm-up's latest line (`tuiprof.warmup`), or None once it has ended."""

    def __init__(self, text: str | None) -> None:
        super().__init__()
        self.text = text


class PatternsReady(Message):
    """Every op's address pattern for `session` (computed once per trace and L1 line size, off
    the UI thread)."""

    def __init__(self, session: "Session", patterns: dict[int, "AddressPattern"]) -> None:
        super().__init__()
        self.session = session
        self.patterns = patterns


class ExportDone(Message):
    """The report was written to `path` (`error` is None) or could not be (`error` says why);
    `partial`: during a run, so the report says it is partial."""

    def __init__(self, path: str, error: TuiprofError | None, partial: str = "") -> None:
        super().__init__()
        self.path = path
        self.error = error
        self.partial = partial


class RunReused(Message):
    """The run of `generation` was made before in this session (same trace, arch, settings and
    seed: `tuiprof.compare.cache.run_key`): its `session` and `analysis` are shown instead."""

    def __init__(self, generation: int, session: "Session", analysis: "Analysis") -> None:
        super().__init__()
        self.generation = generation
        self.session = session
        self.analysis = analysis
