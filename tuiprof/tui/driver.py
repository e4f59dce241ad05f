"""The terminal driver: Textual's Linux driver with an input thread that wakes every 10 ms.

A lone Esc cannot be told from the start of an escape sequence until ESCDELAY (100 ms) has
passed with no byte after it. Textual's input thread waits on the terminal in selects of 0.1 s
and asks its parser about that deadline only when a select returns, so an Esc reached the app
100-200 ms after the key (115-330 ms measured in tmux by `benchmarks/bench_tui.py`), most of the
150 ms a key may take. Waking every 10 ms delivers it at ESCDELAY + 10 ms at most, and `q` ends
the input thread sooner. ESCDELAY itself stays: over SSH an arrow key's bytes can arrive apart,
and a shorter wait would read them as Esc and letters (set ESCDELAY, in ms, as for curses
programs, to change it)."""

from __future__ import annotations

import os
import selectors
from codecs import getincrementaldecoder

from textual._xterm_parser import XTermParser  # textual is pinned (pyproject.toml)
from textual.drivers.linux_driver import LinuxDriver

INPUT_TICK_S = 0.01
"""How long the input thread waits for a byte before it checks the parser's Esc deadline."""

READ_BYTES = 4096


class PromptLinuxDriver(LinuxDriver):
    """`LinuxDriver` whose input thread checks the Esc deadline every `INPUT_TICK_S`."""

    def run_input_thread(self) -> None:
        """Read the terminal until the driver stops, feeding Textual's parser and posting its
        events; at end of input, the parser's pending Esc is delivered and the thread waits to be stopped."""
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        selector = selectors.DefaultSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        try:
            while not self.exit_event.is_set():
                if selector.select(INPUT_TICK_S):
                    data = os.read(self.fileno, READ_BYTES)
                    if not data:  # end of input (a closed pty or pipe): deliver a pending Esc, then wait
                        for message in parser.feed(""):
                            self.process_message(message)
                        self.exit_event.wait()
                        break
                    for message in parser.feed(decode(data)):
                        self.process_message(message)
                for message in parser.tick():
                    self.process_message(message)
        finally:
            selector.close()


__all__ = ["INPUT_TICK_S", "PromptLinuxDriver"]
