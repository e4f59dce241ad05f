"""Keep Python's full garbage collections off the keys while the UI is open.

A full (generation 2) collection walks every object the process tracks and holds the GIL while
it runs: with Numba, NumPy, Textual and a loaded trace that was 150-170 ms of the UI thread's
CPU, and it came about every second key press (issue 25: key-to-repaint outliers). Two things
keep it off the keys:

- Objects that live as long as the app (modules, the trace, the panes) never become garbage, so
  once they exist they are moved out of the collector's walk (`settle`, `gc.freeze`).
- What remains (mostly Textual's render caches, ~120k objects, 40-90 ms a walk) is collected
  when the user is not typing (`Collector`): Python's own trigger for a full collection is
  raised out of reach, and the app asks for one at a quiet tick once as many younger
  collections have passed as would have triggered it, or at once after `FORCED` of them.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field

QUIET = 0.4
"""Seconds without a key before a full collection may run."""
DUE = 10
"""Generation-1 collections after which a full one is due (Python's default threshold)."""
FORCED = 200
"""Generation-1 collections after which a full one runs even while keys come."""
OUT_OF_REACH = 1 << 30


def settle(collect: bool) -> int:
    """Move every object tracked now out of later collections' walk (after a full collection
    first when `collect`, so that no garbage is kept); returns how many are frozen in all."""
    if collect:
        gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def release() -> None:
    """Give every frozen object back to the collector (`settle` froze what was alive then: an
    object that has since become garbage in a reference cycle is freed only after this)."""
    gc.unfreeze()


def walked() -> int:
    """How many objects a full collection walks now (the frozen ones are not among them)."""
    return len(gc.get_objects())


@dataclass
class Collector:
    """Full collections at quiet moments: `start` takes them from Python's trigger, `tick`
    (called often, with the seconds since the last key) runs one when due, `stop` gives the
    trigger and the frozen objects back."""

    thresholds: tuple[int, int, int] | None = None
    full: int = field(default=0)
    """Full collections this collector ran."""

    def start(self) -> None:
        if self.thresholds is None:
            self.thresholds = gc.get_threshold()
            t0, t1, _ = self.thresholds
            gc.set_threshold(t0, t1, OUT_OF_REACH)

    def tick(self, since_key: float) -> bool:
        """Run a full collection if one is due and no key came for `QUIET` s (or one is long
        overdue); True when it ran."""
        pending = gc.get_count()[2]
        if self.thresholds is None or pending < DUE or (since_key < QUIET and pending < FORCED):
            return False
        self.collect()
        return True

    def collect(self) -> None:
        """A full collection now."""
        gc.collect()
        self.full += 1

    def stop(self) -> None:
        if self.thresholds is not None:
            gc.set_threshold(*self.thresholds)
            self.thresholds = None
        gc.unfreeze()  # what the app held can be freed once it is gone
