"""Messages from the worker threads to the app. Workers only post these; the app owns state.

Each carries the `generation` of the run that produced it, so that the late events of a
cancelled run (trials in flight finish in the background) are recognised and dropped.
"""

from __future__ import annotations

from typing import Any

from textual.message import Message

from tuiprof.errors import TuiprofError


class TraceLoaded(Message):
    """The target's trace is loaded and its Session resolved."""

    def __init__(self, session: Any) -> None:
        super().__init__()
        self.session = session


class RecollectFailed(Message):
    """Recompiling or re-emulating a .cu target failed; the previous results stay."""

    def __init__(self, error: TuiprofError) -> None:
        super().__init__()
        self.error = error


class LoadFailed(Message):
    """The target could not be opened (missing, corrupt, bad configuration)."""

    def __init__(self, error: TuiprofError) -> None:
        super().__init__()
        self.error = error


class RunEvent(Message):
    """One Session event (TrialDone, AnalysisUpdated, SweepProgress, Finished, Cancelled, Failed)."""

    def __init__(self, generation: int, event: Any) -> None:
        super().__init__()
        self.generation = generation
        self.event = event


class PatternReady(Message):
    """The drill-down's address pattern of one op, computed off the UI thread."""

    def __init__(self, op_id: int, pattern: Any) -> None:
        super().__init__()
        self.op_id = op_id
        self.pattern = pattern


class ExportDone(Message):
    """The report was written to `path` (`error` is None) or could not be (`error` says why)."""

    def __init__(self, path: str, error: TuiprofError | None) -> None:
        super().__init__()
        self.path = path
        self.error = error
