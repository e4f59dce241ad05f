"""Shared helpers of the UI tests: a finished run of a small demo, and waiting on the app."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

from tuiprof.session import RunConfig, Session

DEMO = "stencil7"
"""8 ops (two on one line), 80 SMs (the compact SM layout), about a second for 4 trials."""
CONFIG = RunConfig(trials=4, seed=0, sweep_trials=2)

_FINISHED: dict[str, tuple[Session, Any]] = {}


def finished(demo: str = DEMO, config: RunConfig = CONFIG) -> tuple[Session, Any]:
    """A Session of `demo` and its finished Analysis (computed once per test process)."""
    key = f"{demo}:{config}"
    if key not in _FINISHED:
        session = Session.open(demo, config)
        _FINISHED[key] = (session, session.run())
    return _FINISHED[key]


def make_app(size_note: str = "", **kwargs: Any):
    """The app showing the finished run (no run starts until a key asks), without timings."""
    from tuiprof.tui.app import TuiprofApp

    session, analysis = finished()
    return TuiprofApp(session=session, analysis=analysis, show_timing=False, **kwargs)


async def wait_for(pilot: Any, cond: Callable[[], bool], timeout: float = 90.0) -> None:
    """Let the app run until `cond()` holds (fails the test after `timeout` seconds)."""
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise AssertionError("timed out waiting for the app")
        await pilot.pause(0.05)
    await asyncio.sleep(0)


def screen_text(app: Any) -> str:
    """The current screen as plain text (what a terminal would show)."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)
