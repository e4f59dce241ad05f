"""The UI in a real terminal: tmux runs `tuiprof demo`, the test waits for what the screen shows
(never for a fixed time: every step waits on the screen it expects), presses keys and reads the
screen with capture-pane; NO_COLOR sends no colour escape; closing the terminal ends the process.

The first test runs in CI (a small demo, a few seconds); the others are slow."""

from __future__ import annotations

import re
import shlex
import shutil
import sys

import pytest

from tests.tui_support import Tmux, wait_gone

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

MAIN = "▶1 costliest load"
"""On the main screen only (the legend under the source)."""


def command(*args: str, env: str = "") -> str:
    return f"exec env -u COLUMNS -u LINES {env} " + " ".join(shlex.quote(a) for a in (sys.executable, "-m", "tuiprof", *args))


@pytest.fixture()
def tmux():
    t = Tmux(120, 40)
    yield t
    t.close()


def test_demo_in_a_real_terminal(tmux: Tmux) -> None:
    """vecadd on every core: trials, the drill-down, help, q; and with NO_COLOR not one colour
    escape in what the terminal received."""
    pid = tmux.start(command("demo", "vecadd", "--trials", "4", "--sweep-trials", "2", env="NO_COLOR=1"))
    text = tmux.wait_screen("✓ 4/4 trials", 300)                  # every trial and the MD sweep
    assert "▶1" in text and "vecadd.cu" in text and MAIN in text and "emulator trace" in text
    coloured = tmux("capture-pane", "-p", "-e", "-t", tmux.name)
    assert not re.search(r"\x1b\[[0-9;]*(3[0-8]|4[0-8]|9[0-7]|10[0-7])[;m]", coloured), "NO_COLOR sent a colour"
    tmux("send-keys", "-t", tmux.name, "n", "Enter")
    text = tmux.wait_screen("Latency breakdown", 30)
    assert "Advice" in text and "sectors per request" in text
    tmux("send-keys", "-t", tmux.name, "Escape")
    tmux.wait_screen(MAIN, 30)                                     # back on the main screen
    tmux("send-keys", "-t", tmux.name, "?")
    tmux.wait_screen("tuiprof keys", 30)
    tmux("send-keys", "-t", tmux.name, "Escape")
    tmux.wait_screen_without("tuiprof keys", 30)                   # the lone ESC was taken: q is q
    tmux("send-keys", "-t", tmux.name, "q")
    assert wait_gone(pid, 10) < 10


@pytest.mark.slow
def test_spmv_in_a_real_terminal_with_the_md_decision(tmux: Tmux) -> None:
    tmux.cols, tmux.rows = 160, 50
    pid = tmux.start(command("demo", "spmv-u", "--trials", "4", "--sweep-trials", "2"))
    tmux.wait_screen("tuiprof spmv-u", 30)                         # first paint
    text = tmux.wait_screen("✓ 4/4 trials", 600)
    assert "▶1" in text and "spmv.cu" in text and "MD decision" in text and "★" in text and "gather" in text
    tmux("send-keys", "-t", tmux.name, "q")
    assert wait_gone(pid, 10) < 10


@pytest.mark.slow
def test_closing_the_terminal_ends_the_process(tmux: Tmux) -> None:
    pid = tmux.start(command("demo", "spmv-u", "--trials", "64"))
    tmux.wait_screen("trial ", 300)                                # trials are running on every core
    tmux.close()                                                   # the terminal goes away (SIGHUP)
    assert wait_gone(pid, 10) < 10, "tuiprof kept running after its terminal closed"
