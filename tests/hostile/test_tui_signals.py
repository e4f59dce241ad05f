"""SIGINT and SIGTERM in a real terminal (tmux): the UI closes, the run is cancelled, the process
ends within seconds with 130 / 143, and the terminal is sane afterwards (echo and canonical mode
on, main screen, cursor shown, no mouse tracking) with the shell's prompt on screen. Also: a
trace that cannot be opened quits on q with exit 2 and its error printed on the restored terminal."""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
from pathlib import Path

import pytest

from tests.support.terminal_run import assert_sane, read_pid, script
from tests.support.tui_support import Tmux, wait_gone

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

DEADLINE = 2.0
"""Seconds the process may take to end after the signal (it takes well under one; the margin
is for a loaded machine)."""


@pytest.fixture()
def tmux():
    t = Tmux()
    yield t
    t.close()


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_at_start_restores_the_terminal(tmux: Tmux, tmp_path: Path, sig: int, status: int) -> None:
    """A signal while the trace loads or the simulator prepares (compiles, on a cold cache)."""
    text, pidfile = script(tmp_path, "demo", "spmv-u", "--trials", "64")
    tmux.start(text)
    tmux.wait_screen("tuiprof spmv-u", 60)                           # the UI is up (alternate screen)
    assert tmux.flags()["alternate_on"] == "1"
    pid = read_pid(pidfile)
    os.kill(pid, sig)
    took = wait_gone(pid, 10)
    assert took < DEADLINE, f"tuiprof took {took:.1f}s to end after signal {sig}"
    assert_sane(tmux, status)


def wait_for_trials(tmux: Tmux, timeout: float) -> None:
    """Until the status bar counts landed trials ("trial 3/64"; not "waiting for the first trial")."""
    t0 = time.monotonic()
    while not re.search(r"trial [1-9][0-9]*/", tmux.screen()):
        assert time.monotonic() - t0 < timeout, f"no trial landed; the screen was:\n{tmux.screen()}"
        time.sleep(0.1)


@pytest.mark.usefixtures("warm_numba")
def test_sigint_during_trials_cancels_the_run(tmux: Tmux, tmp_path: Path) -> None:
    """The CI variant of the next test (issue 9 item 5: SIGINT closed the UI and the process went
    on computing headless for minutes, then exited 0): vecadd, whose kernels `warm_numba` has
    compiled, with far more trials than the deadline allows (about a millisecond each)."""
    text, pidfile = script(tmp_path, "demo", "vecadd", "--trials", "100000", "--tolerance", "0")
    tmux.start(text)
    wait_for_trials(tmux, 120)
    pid = read_pid(pidfile)
    os.kill(pid, signal.SIGINT)
    took = wait_gone(pid, 30)
    assert took < DEADLINE, f"tuiprof took {took:.1f}s to end after SIGINT"
    assert_sane(tmux, 130)


@pytest.mark.slow
@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_during_trials_cancels_the_run(tmux: Tmux, tmp_path: Path, sig: int, status: int) -> None:
    """A signal while trials run on every core (each takes seconds): the run is cancelled, not
    finished headless, and nothing waits for the trials in flight."""
    text, pidfile = script(tmp_path, "demo", "spmv-u", "--trials", "64")
    tmux.start(text)
    wait_for_trials(tmux, 300)
    pid = read_pid(pidfile)
    os.kill(pid, sig)
    took = wait_gone(pid, 30)
    assert took < DEADLINE, f"tuiprof took {took:.1f}s to end after signal {sig}"
    assert_sane(tmux, status)


@pytest.mark.usefixtures("warm_numba")
def test_q_during_trials_ends_at_once_and_restores_the_terminal(tmux: Tmux, tmp_path: Path) -> None:
    """`q` skips Textual's teardown (its input thread sleeps 0.2 s before it stops): the frames
    already sent are written, then the terminal is restored by tuiprof. It must be as sane as
    after Textual's own teardown, with exit status 0 and nothing printed over the shell."""
    text, pidfile = script(tmp_path, "demo", "vecadd", "--trials", "100000", "--tolerance", "0")
    tmux.start(text)
    wait_for_trials(tmux, 120)
    assert tmux.flags()["alternate_on"] == "1"
    tmux("send-keys", "-t", tmux.name, "q")
    took = wait_gone(read_pid(pidfile), 30)
    assert took < DEADLINE, f"tuiprof took {took:.1f}s to end after q"
    screen = assert_sane(tmux, 0)
    assert "trial" not in screen                                     # no frame drawn on the main screen


def test_unopenable_trace_quits_on_q_with_status_2(tmux: Tmux, tmp_path: Path) -> None:
    bad = tmp_path / "broken.tptrace"
    bad.write_bytes(b"PK\x03\x04 this is not a trace")
    text, pidfile = script(tmp_path, str(bad))
    tmux.start(text)
    tmux.wait_screen("cannot open", 60)
    tmux("send-keys", "-t", tmux.name, "q")
    took = wait_gone(read_pid(pidfile), 10)
    assert took < DEADLINE
    screen = assert_sane(tmux, 2)
    assert "error: " in screen and "broken.tptrace" in screen       # printed after the terminal came back
