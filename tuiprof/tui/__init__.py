"""The terminal UI (Textual). The only package that imports Textual; it talks to `Session`."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tuiprof.session import RunConfig


ESCDELAY_MS = 50
"""How long a lone Esc waits for the rest of a key's escape sequence before it counts as Esc
(Textual's default is 100 ms, Neovim's ttimeoutlen 50 ms). The user's `ESCDELAY` wins: over a
slow link whose bytes can arrive more than 50 ms apart, an arrow key could otherwise read as Esc
and the rest of its sequence."""


def prepare_terminal() -> None:
    """Set tuiprof's Esc delay unless the user set `ESCDELAY` (before Textual is imported: it
    reads the variable once)."""
    os.environ.setdefault("ESCDELAY", str(ESCDELAY_MS))


prepare_terminal()  # here, since every module of the package that imports Textual runs this first
# (the CLI checks the theme through `tuiprof.tui.themes` before `run_app`: Textual, and its
# 100 ms Esc delay, were imported by then)


def run_app(target: str | Path, config: "RunConfig", theme: str | None = None) -> int:
    """Run the app on `target` until the user quits, a signal arrives (SIGINT 130, SIGTERM 143)
    or the terminal goes away, then end the process at once with the app's status: trials in
    flight (Numba, nogil) cannot be interrupted and nothing they compute is wanted, yet Python's
    exit would join the trial pool's threads (seconds during an MD sweep) and then take another
    second unloading Numba. The terminal is restored by then. A trace that cannot be opened is
    printed as `error:`/`hint:` first (exit 2)."""
    from tuiprof.tui.app import TuiprofApp
    from tuiprof.tui.signals import SignalExit, exit_status, finish

    app = TuiprofApp(target, config, theme=theme, warm_up=True)
    with SignalExit(app.request_signal_exit) as signals:

        def end_now(code: int) -> None:
            """`q`: the frames already sent are written (the driver's `close` drains its writer
            thread), then the terminal is restored and the process ends. Textual's own teardown
            takes 0.2 s more: its input thread sleeps in two 0.1 s selects before it stops."""
            driver = app._driver  # textual is pinned (pyproject.toml)
            if driver is not None:
                driver.close()
            signals.emergency_exit(code)

        app.end_process = end_now
        try:
            code = app.run()
        finally:
            app.cancel_everything()
    if signals.signum is not None:
        finish(exit_status(signals.signum))
    if app.fatal is not None:
        print(app.fatal.render(), file=sys.stderr)
    rc = int(code or 0) if app.return_code is None else app.return_code
    finish(rc)  # see the docstring: never wait for trials in flight, nor for Python's exit
    return rc
