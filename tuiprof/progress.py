"""What a long step is doing now, for a view to show as it happens (issue 25: opening a kernel
file said "loading the trace..." for 45 s while it compiled and ran in the emulator).

The core reports phases through an optional callback and never prints them; the UI turns each
into a message for its status bar. Callbacks may come from worker threads (the emulator's CTA
batches), so they must only hand the phase on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


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


def _silent(text: str) -> None:
    """A writer that drops the text (standard error is not a terminal)."""


class SlowPhases:
    """Says on standard error what a command is doing once a phase has lasted `after` seconds
    (issue 27: `tuiprof report` on fresh caches was silent for minutes), then again every `every`
    seconds while it goes on, with its progress; quick phases print nothing. `set` may be called
    from any thread; a daemon thread does the printing, `close` stops it. `on_stderr` makes one
    that speaks only to a terminal: a script or a test reading standard error gets the one
    `error:` and `hint:` lines of a failure and nothing before them."""

    def __init__(self, write: Callable[[str], None], *, after: float = 2.0, every: float = 10.0,
                 clock: Callable[[], float] | None = None, tick: float = 0.25) -> None:
        import threading
        import time

        self._write, self._after, self._every, self._tick = write, after, every, tick
        self._clock = clock or time.monotonic
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._what, self._detail = "", ""
        self._since = self._said = self._clock()
        self._told = False
        self._thread = threading.Thread(target=self._loop, name="tuiprof-progress", daemon=True)
        if write is not _silent:  # nothing to say: no thread
            self._thread.start()

    @classmethod
    def on_stderr(cls) -> "SlowPhases":
        """Phases said on standard error when it is a terminal; silent otherwise."""
        import sys

        from tuiprof.output import note

        tty = sys.stderr is not None and hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
        return cls(note if tty else _silent)

    def set(self, what: str, detail: str = "") -> None:
        """The phase now running (`what`) and its progress (`detail`, updated without restarting
        the phase's clock)."""
        with self._lock:
            if what != self._what:
                self._what, self._since, self._told = what, self._clock(), False
            self._detail = detail

    def phase(self, p: Phase) -> None:
        """A `Progress` listener: the phase's words and its progress."""
        self.set(p.what, p.text()[len(p.what):].lstrip(": "))

    def poll(self) -> None:
        """Print the phase if it is due (the thread calls this; tests call it with their clock)."""
        with self._lock:
            now, what = self._clock(), self._what
            due = what and now - self._since >= self._after and (not self._told or now - self._said >= self._every)
            if not due:
                return
            text = f"tuiprof: {what}" + (f": {self._detail}" if self._detail else "") + (
                "..." if not self._told else f" ({now - self._since:.0f} s)")
            self._told, self._said = True, now
        self._write(text)

    def _loop(self) -> None:
        while not self._stop.wait(self._tick):
            self.poll()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=1.0)
