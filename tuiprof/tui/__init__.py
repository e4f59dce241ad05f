"""The terminal UI (Textual). The only package that imports Textual; it talks to `Session`."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tuiprof.session import RunConfig

EXIT_GRACE = 0.05
"""Seconds to let other threads end after the app exits, before a hard exit: trials in flight
(Numba, nogil, a second or more each) cannot be interrupted and nothing they compute is wanted,
so `q` must not wait for them (Python's exit would join the pool's threads)."""


def run_app(target: str | Path, config: "RunConfig", theme: str | None = None) -> int:
    """Run the app on `target` until the user quits, a signal arrives (SIGINT 130, SIGTERM 143)
    or the terminal goes away; then make sure no simulation thread keeps the process alive. A
    trace that cannot be opened is printed as `error:`/`hint:` once the terminal is restored
    (exit 2)."""
    from tuiprof.tui.app import TuiprofApp
    from tuiprof.tui.signals import SignalExit, exit_status, finish

    app = TuiprofApp(target, config, theme=theme)
    with SignalExit(app.request_signal_exit) as signals:
        try:
            code = app.run()
        finally:
            app.cancel_everything()
    if signals.signum is not None:
        finish(exit_status(signals.signum))
    if app.fatal is not None:
        print(app.fatal.render(), file=sys.stderr)
    rc = int(code or 0) if app.return_code is None else app.return_code
    deadline = time.monotonic() + EXIT_GRACE
    while time.monotonic() < deadline:
        if not lingering():
            return rc
        time.sleep(0.01)
    finish(rc)  # trials in flight (Numba, nogil) cannot be interrupted: leave without them
    return rc


def lingering() -> list[threading.Thread]:
    """Threads that would hold the process after the app: non-daemon ones, and the trial pool's
    workers (daemon when started from a daemon thread, yet joined by Python's exit)."""
    return [t for t in threading.enumerate() if t is not threading.current_thread()
            and (not t.daemon or t.name.startswith("tuiprof-trial"))]
