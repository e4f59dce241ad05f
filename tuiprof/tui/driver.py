"""The terminal driver: Textual's Linux (POSIX) driver, whose input thread wakes up when a lone Esc
is due instead of at its next 0.1 s poll.

Textual's parser holds an Esc byte for the escape delay (50 ms, `tuiprof.tui.ESCDELAY_MS`) in
case more of an escape sequence follows, and its input thread looks at that timeout only between
`select` calls of 0.1 s: with no more input, the Esc reached the app 100 ms after it was typed,
twice the delay (issue 25: every dialog and the drill-down close with Esc). Here the thread
sleeps only until the held key is due. Imported only where Textual picked its Linux driver (the
module needs termios).
"""

from __future__ import annotations

import os
import selectors
import time
from codecs import getincrementaldecoder

from textual._parser import ParseError
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

POLL = 0.1
"""Seconds the input thread sleeps at most between looks at the exit flag (Textual's)."""


def input_wait(due: float | None, now: float) -> float:
    """Seconds the input thread may wait for input at `now` (monotonic): until a held key is
    `due` (the parser's timeout; None: nothing held), at most POLL."""
    if due is None:
        return POLL
    return min(POLL, max(0.0, due - now))


class PromptEscDriver(LinuxDriver):
    """Textual's driver, its input thread timed by the key the parser holds (`input_wait`)."""

    def run_input_thread(self) -> None:
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode

        def step(final: bool = False) -> None:
            """Wait for input (at most until the held key is due), parse it, and hand on every
            event it and the parser's timeout give."""
            wait = POLL if final else input_wait(getattr(parser, "_timeout_time", None), time.monotonic())
            if selector.select(wait):
                text = decode(os.read(self.fileno, 4096), final=final)
                for event in parser.feed(text) if text else ():
                    self.process_message(event)
            for event in parser.tick():
                self.process_message(event)

        selector = selectors.SelectSelector()  # as Textual's: select() also works on macOS ttys
        selector.register(self.fileno, selectors.EVENT_READ)
        try:
            while not self.exit_event.is_set():
                step()
            step(final=True)
        finally:
            selector.close()
            try:
                for _ in parser.feed(""):
                    pass
            except (EOFError, ParseError):
                pass
