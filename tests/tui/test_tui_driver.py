"""The terminal driver's input thread (`tuiprof.tui.driver`) on a real pseudo-terminal: keys arrive
as Textual's parser reads them, a lone Esc included, and end of input stops nothing it should not."""

from __future__ import annotations

import os
import pty
import threading
import tty
from collections.abc import Iterator

import pytest
from textual import events
from textual.message import Message

from tuiprof.tui.driver import PromptLinuxDriver


class _Keys:
    """A driver's input thread reading the slave end of a pty; the test types into the master."""

    def __init__(self) -> None:
        self.master, self.slave = pty.openpty()
        tty.setraw(self.slave)
        self.got: list[str] = []
        self.arrived = threading.Condition()
        driver = PromptLinuxDriver.__new__(PromptLinuxDriver)  # no app: only the input thread runs
        driver.fileno = self.slave
        driver.exit_event = threading.Event()
        driver._debug = False
        driver.process_message = self._post  # type: ignore[method-assign]
        self.driver = driver
        self.thread = threading.Thread(target=driver.run_input_thread, daemon=True)
        self.thread.start()

    def _post(self, message: Message) -> None:
        if isinstance(message, events.Key):
            with self.arrived:
                self.got.append(message.key)
                self.arrived.notify_all()

    def type(self, text: str, keys: int) -> list[str]:
        """Type `text`; the `keys` keys it makes, once they have all arrived."""
        start = len(self.got)
        os.write(self.master, text.encode())
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.got) >= start + keys, timeout=30), self.got
            return self.got[start:]

    def close(self) -> None:
        self.driver.exit_event.set()
        self.thread.join(timeout=30)
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass


@pytest.fixture
def keys() -> Iterator[_Keys]:
    k = _Keys()
    yield k
    k.close()


def test_a_lone_esc_is_the_escape_key(keys: _Keys) -> None:
    assert keys.type("\x1b", 1) == ["escape"]


def test_escape_sequences_and_letters_are_their_keys(keys: _Keys) -> None:
    assert keys.type("\x1b[Aq", 2) == ["up", "q"]
    assert keys.type("\r", 1) == ["enter"]


def test_the_thread_stops_when_the_driver_does(keys: _Keys) -> None:
    keys.type("m", 1)
    keys.driver.exit_event.set()
    keys.thread.join(timeout=30)
    assert not keys.thread.is_alive()


def test_end_of_input_delivers_a_pending_esc_and_waits_to_be_stopped() -> None:
    r, w = os.pipe()
    got: list[str] = []
    driver = PromptLinuxDriver.__new__(PromptLinuxDriver)
    driver.fileno = r
    driver.exit_event = threading.Event()
    driver._debug = False
    driver.process_message = lambda m: got.append(m.key) if isinstance(m, events.Key) else None  # type: ignore[method-assign]
    os.write(w, b"a\x1b")
    os.close(w)
    thread = threading.Thread(target=driver.run_input_thread, daemon=True)
    thread.start()
    thread.join(timeout=0.5)
    assert thread.is_alive()  # at end of input it waits for the driver to stop, not spinning on reads
    driver.exit_event.set()
    thread.join(timeout=30)
    os.close(r)
    assert not thread.is_alive() and got == ["a", "escape"]
