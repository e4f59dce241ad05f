"""The UI in a real terminal: tmux runs `tuiprof demo`, the test waits for what the screen shows
(never for a fixed time: every step waits on the screen it expects), presses keys and reads the
screen with capture-pane; NO_COLOR sends no colour escape and draws the cursor in reverse video;
each resize lays the screen out as a fresh start at that size does; closing the terminal ends
the process.

The first two tests run in CI (a small demo, a few seconds each); the others are slow."""

from __future__ import annotations

import re
import shlex
import shutil
import sys

import pytest

from tests.support.tui_support import Tmux, wait_gone

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

MAIN = "#1 costliest load"
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
    assert "#1" in text and "vecadd.cu" in text and MAIN in text and "emulator trace" in text
    coloured = tmux("capture-pane", "-p", "-e", "-t", tmux.name)
    assert not re.search(r"\x1b\[[0-9;]*(3[0-8]|4[0-8]|9[0-7]|10[0-7])[;m]", coloured), "NO_COLOR sent a colour"
    # The cursor (on L1, the costliest load) is reverse video; the other source lines are not.
    rows = coloured.splitlines()
    cursor = next(r for r in rows if "#1" in r)
    assert re.search(r"\x1b\[([0-9;]*;)?7[;m]", cursor), repr(cursor)
    others = [r for r in rows[2:] if "│" in r and "#1" not in r and "Source" not in r]
    assert others and not any(re.search(r"\x1b\[([0-9;]*;)?7[;m]", r) for r in others)
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


def body(screen: str) -> list[str]:
    """The screen without its status line (which holds the run's time)."""
    return [line.rstrip() for line in screen.splitlines()[1:]]


def test_resizes_lay_out_as_a_fresh_start_would(tmux: Tmux) -> None:
    """Issue 25: the layout followed a resize one step late (120x40 -> 200x60 kept the tabs;
    then 100x30 left the code 2 cells). After each resize the screen is a fresh start's."""
    args = ("demo", "vecadd", "--trials", "4", "--sweep-trials", "2")
    tmux.start(command(*args))
    tmux.wait_screen("✓ 4/4 trials", 300)
    settled(tmux)
    for cols, rows in ((200, 60), (100, 30), (80, 24)):
        fresh = Tmux(cols, rows)
        try:
            fresh.start(command(*args))
            fresh.wait_screen("✓ 4/4 trials", 300)
            want = settled(fresh)
        finally:
            fresh.close()
        tmux("resize-window", "-t", tmux.name, "-x", str(cols), "-y", str(rows))
        got = settled(tmux)
        assert got == want, (cols, rows, "\n".join(got))


def settled(tmux: Tmux, quiet: float = 1.0, timeout: float = 30.0) -> list[str]:
    """The screen's `body` once it has not changed for `quiet` seconds (the reason words land
    after the last trial)."""
    import time

    t0 = time.monotonic()
    last, since = body(tmux.screen()), time.monotonic()
    while time.monotonic() - since < quiet and time.monotonic() - t0 < timeout:
        time.sleep(0.1)
        now = body(tmux.screen())
        if now != last:
            last, since = now, time.monotonic()
    return last


@pytest.mark.slow
def test_spmv_in_a_real_terminal_with_the_md_decision(tmux: Tmux) -> None:
    tmux.cols, tmux.rows = 160, 50
    pid = tmux.start(command("demo", "spmv-u", "--trials", "4", "--sweep-trials", "2"))
    tmux.wait_screen("tuiprof spmv-u", 30)                         # first paint
    text = tmux.wait_screen("✓ 4/4 trials", 600)
    assert "#1" in text and "spmv.cu" in text and "MD decision" in text and "★" in text and "gather" in text
    tmux("send-keys", "-t", tmux.name, "q")
    assert wait_gone(pid, 10) < 10


@pytest.mark.slow
def test_closing_the_terminal_ends_the_process(tmux: Tmux) -> None:
    pid = tmux.start(command("demo", "spmv-u", "--trials", "64"))
    tmux.wait_screen("trial ", 300)                                # trials are running on every core
    tmux.close()                                                   # the terminal goes away (SIGHUP)
    assert wait_gone(pid, 10) < 10, "tuiprof kept running after its terminal closed"
