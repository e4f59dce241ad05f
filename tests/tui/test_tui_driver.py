"""A lone Esc reaches the app once the escape delay is over, not at the input thread's next 0.1 s
poll (issue 25 item 4: every dialog closes with Esc). Counted, never timed: the waits the input
thread asks for, on a pipe standing in for the terminal."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

pytest.importorskip("textual")
if sys.platform == "win32":
    pytest.skip("the POSIX driver only", allow_module_level=True)

from textual import constants, events  # noqa: E402
from textual.app import App  # noqa: E402
from textual.message import Message  # noqa: E402

from tuiprof.tui import driver  # noqa: E402
from tuiprof.tui.app import TuiprofApp  # noqa: E402


def test_the_input_thread_waits_until_a_held_key_is_due_and_no_longer() -> None:
    assert driver.input_wait(None, 10.0) == driver.POLL
    assert driver.input_wait(10.05, 10.0) == pytest.approx(0.05)
    assert driver.input_wait(9.0, 10.0) == 0.0  # overdue: look at once
    assert driver.input_wait(99.0, 10.0) == driver.POLL


class Recorder(driver.PromptEscDriver):
    """The driver on a pipe, keeping the keys it hands on."""

    def __init__(self, fd: int) -> None:
        super().__init__(App())
        self.fileno = fd
        self.keys: list[str] = []
        self.got = threading.Event()

    def process_message(self, message: Message) -> None:
        if isinstance(message, events.Key):
            self.keys.append(message.key)
            self.got.set()


@contextmanager
def pipe_driver(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Recorder, int, list[float]]]:
    """The driver's input thread reading a pipe, with tuiprof's 50 ms escape delay; yields it,
    the pipe's write end and the waits it asked `select` for (in a test with a running event
    loop: Textual's driver takes it when made)."""
    monkeypatch.setattr(constants, "ESCAPE_DELAY", 0.05)
    waits: list[float] = []
    real = driver.input_wait

    def recorded(due: float | None, now: float) -> float:
        waits.append(real(due, now))
        return waits[-1]

    monkeypatch.setattr(driver, "input_wait", recorded)
    r, w = os.pipe()
    d = Recorder(r)
    thread = threading.Thread(target=d.run_input_thread, daemon=True)
    thread.start()
    try:
        yield d, w, waits
    finally:
        d.exit_event.set()
        thread.join(timeout=30)
        os.close(w)
        os.close(r)


async def test_a_lone_esc_is_handed_on_after_the_escape_delay_not_the_next_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    with pipe_driver(monkeypatch) as (d, w, waits):
        os.write(w, b"\x1b")
        assert d.got.wait(timeout=60)
    assert d.keys == ["escape"]
    held = [t for t in waits if t < driver.POLL]
    assert held and max(held) <= 0.05  # it slept for the delay, not a whole poll


async def test_keys_and_escape_sequences_still_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    with pipe_driver(monkeypatch) as (d, w, _):
        os.write(w, b"j\x1b[A")
        for _ in range(200):
            if len(d.keys) >= 2:
                break
            d.got.wait(timeout=0.3)
            d.got.clear()
    assert d.keys == ["j", "up"]


def test_the_app_runs_in_a_terminal_with_that_driver() -> None:
    assert TuiprofApp("spmv-u").driver_class is driver.PromptEscDriver
