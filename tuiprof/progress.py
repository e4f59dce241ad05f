"""What a long step is doing now, for a view to show as it happens (issue 25: opening a kernel
file said "loading the trace..." for 45 s while it compiled and ran in the emulator).

The core reports phases through an optional callback and never prints them; the UI turns each
into a message for its status bar. Callbacks may come from worker threads (the emulator's CTA
batches), so they must only hand the phase on.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable


@dataclass(frozen=True)
class Phase:
    """One step: `what` in words, with `done` of `total` `unit` where the progress is known."""

    what: str
    done: int | None = None
    total: int | None = None
    unit: str = ""

    def text(self) -> str:
        """'emulating launch 2 (stencil7, the recorded one): 1,024/4,096 CTAs'."""
        if self.total is None:
            return self.what
        done = f"{self.done:,}/" if self.done is not None else ""
        return f"{self.what}: {done}{self.total:,} {self.unit}".rstrip()


Progress = Callable[[Phase], None]


def ignore(phase: Phase) -> None:
    """The default listener: nobody shows the phases."""
