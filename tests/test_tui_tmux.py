"""The UI in a real terminal: tmux runs `tuiprof demo spmv-u`, the test waits for every trial,
presses keys and reads the screen with capture-pane; and closing the terminal ends the process."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid

import pytest

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]

COLS, ROWS = 120, 40


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=30).stdout


def screen(name: str) -> str:
    return tmux("capture-pane", "-p", "-t", name)


def wait_screen(name: str, needle: str, timeout: float) -> str:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        text = screen(name)
        if needle in text:
            return text
        time.sleep(0.25)
    raise AssertionError(f"{needle!r} never appeared; the screen was:\n{screen(name)}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture()
def session_name():
    name = f"tuiprof-test-{uuid.uuid4().hex[:8]}"
    yield name
    tmux("kill-session", "-t", name)


def start(name: str, *args: str) -> int:
    cmd = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "tuiprof", *args))
    tmux("new-session", "-d", "-s", name, "-x", str(COLS), "-y", str(ROWS), f"exec env -u COLUMNS -u LINES {cmd}")
    return int(tmux("display-message", "-p", "-t", name, "#{pane_pid}").strip())


def test_demo_in_a_real_terminal(session_name: str) -> None:
    pid = start(session_name, "demo", "spmv-u", "--trials", "4", "--sweep-trials", "2")
    wait_screen(session_name, "tuiprof spmv-u", 30)                 # first paint
    text = wait_screen(session_name, "✓ 4/4 trials", 600)          # every trial (and the MD sweep) done
    assert "▶1" in text and "spmv.cu" in text and "L1 read hit ratio" in text
    assert "recommended" in text                                    # the MD decision arrived
    tmux("send-keys", "-t", session_name, "n", "Enter")
    text = wait_screen(session_name, "Latency breakdown", 30)
    assert "Advice" in text and ("indices[j]" in text or "val[j]" in text)
    tmux("send-keys", "-t", session_name, "Escape")
    time.sleep(0.5)                                                 # a lone ESC, not the start of alt+key
    tmux("send-keys", "-t", session_name, "?")
    wait_screen(session_name, "tuiprof keys", 30)
    tmux("send-keys", "-t", session_name, "Escape")
    time.sleep(0.5)
    wait_screen(session_name, "✓ 4/4 trials", 10)
    tmux("send-keys", "-t", session_name, "q")
    t0 = time.monotonic()
    while alive(pid) and time.monotonic() - t0 < 10:
        time.sleep(0.1)
    assert not alive(pid)


def test_closing_the_terminal_ends_the_process(session_name: str) -> None:
    pid = start(session_name, "demo", "spmv-u", "--trials", "64")
    wait_screen(session_name, "tuiprof spmv-u", 30)
    time.sleep(3)                                                   # trials are running on every core
    tmux("kill-session", "-t", session_name)                       # the terminal goes away (SIGHUP)
    t0 = time.monotonic()
    while alive(pid) and time.monotonic() - t0 < 10:
        time.sleep(0.1)
    assert not alive(pid), "tuiprof kept running after its terminal closed"
