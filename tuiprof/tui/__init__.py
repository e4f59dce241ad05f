"""The terminal UI (Textual). The only package that imports Textual; it talks to `Session`."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

EXIT_GRACE = 3.0
"""Seconds to let cancelled trials in flight finish after the app exits, before a hard exit."""


def run_app(target: str | Path, config: Any, theme: str | None = None) -> int:
    """Run the app on `target` until the user quits (or the terminal goes away), then make sure
    no simulation thread keeps the process alive."""
    from tuiprof.tui.app import TuiprofApp

    app = TuiprofApp(target, config, theme=theme)
    try:
        code = app.run()
    finally:
        app.cancel_everything()
    rc = int(code or 0) if app.return_code is None else app.return_code
    deadline = time.monotonic() + EXIT_GRACE
    while time.monotonic() < deadline:
        if not [t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon]:
            return rc
        time.sleep(0.05)
    # Trials in flight (Numba, nogil) cannot be interrupted: leave without waiting for them.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
