"""Shared helpers of the UI tests: a finished run of a small demo, and waiting on the app."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

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


class Tmux:
    """A private tmux server (its own socket, so no other tmux user's server or environment is
    involved) holding one window of `cols` x `rows` that runs a shell script."""

    def __init__(self, cols: int = 120, rows: int = 40) -> None:
        import uuid

        self.socket = f"tuiprof-test-{uuid.uuid4().hex[:10]}"
        self.name = "t"
        self.cols, self.rows = cols, rows

    def __call__(self, *args: str) -> str:
        import subprocess

        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30).stdout

    def start(self, script: str) -> int:
        """Run `script` (sh) in the window, with this process's environment; the pane's pid."""
        self("new-session", "-d", "-s", self.name, "-x", str(self.cols), "-y", str(self.rows), f"sh -c {_quote(script)}")
        return int(self("display-message", "-p", "-t", self.name, "#{pane_pid}").strip() or 0)

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", self.name)

    def wait_screen(self, needle: str, timeout: float) -> str:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            text = self.screen()
            if needle in text:
                return text
            time.sleep(0.1)
        raise AssertionError(f"{needle!r} never appeared; the screen was:\n{self.screen()}")

    def wait_screen_without(self, needle: str, timeout: float) -> str:
        """Wait until `needle` is gone from the screen (a modal closed)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            text = self.screen()
            if needle not in text:
                return text
            time.sleep(0.1)
        raise AssertionError(f"{needle!r} never went away; the screen was:\n{self.screen()}")

    def flags(self) -> dict[str, str]:
        """The pane's terminal modes: alternate screen, cursor shown, mouse tracking."""
        names = ("alternate_on", "cursor_flag", "mouse_any_flag", "mouse_button_flag", "mouse_standard_flag",
                 "mouse_sgr_flag")
        values = self("display-message", "-p", "-t", self.name, " ".join(f"#{{{n}}}" for n in names)).split()
        return dict(zip(names, values))

    def close(self) -> None:
        self("kill-server")


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def alive(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie does not: a private tmux server that exits with
    its last pane leaves its child to an init that may never reap it)."""
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def wait_gone(pid: int, timeout: float) -> float:
    """Seconds until process `pid` is gone (at most `timeout`; then it is still alive)."""
    t0 = time.monotonic()
    while alive(pid) and time.monotonic() - t0 < timeout:
        time.sleep(0.01)
    return time.monotonic() - t0


async def assert_ui_records_on_the_gpu(target: str) -> Any:
    """`tuiprof TARGET` with the command line's settings (--backend auto) in the UI: its worker
    records on the GPU, the status bar names the gpu trace and the SM pane says *measured*.
    Returns the trace."""
    from tuiprof.cli.main import build_parser, parse_command_line, run_config
    from tuiprof.tui.app import TuiprofApp

    config = run_config(parse_command_line(build_parser(), [target, "--trials", "2", "--no-sweep"]))
    assert config.collect.backend == "auto"
    app = TuiprofApp(target, config, show_timing=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_for(pilot, lambda: app.trace is not None or app.phase == "failed")
        assert app.trace is not None, app.error
        assert app.trace.provenance.backend == "gpu" and app.trace.ctas.measured_timing
        await wait_for(pilot, lambda: "SM utilisation [measured]" in screen_text(app))
        assert "gpu trace" in screen_text(app).splitlines()[0]
        return app.trace
