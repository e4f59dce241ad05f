"""SIGINT and SIGTERM while the UI runs: the run cancelled, the terminal restored, the process
gone within a second, with the shell's exit status for the signal (130, 143).

Python's default SIGINT handling raises KeyboardInterrupt, which asyncio turns into a quiet
cancellation of the app while the simulation goes on; SIGTERM's default kills the process with
the terminal still raw (no echo, alternate screen, mouse tracking, hidden cursor). Here the
handler asks the app to close through its event loop (the app cancels the run and Textual
restores the terminal) and arms a watchdog: if the app has not closed within `GRACE` seconds
(a busy event loop, a signal before the loop started), the watchdog restores the terminal itself
and ends the process. A second signal ends it at once. Either way the temp file of an export
being written is removed. SIGHUP is the CLI's (the terminal is gone: remove the temp files and
end now, see `tuiprof.cli.main`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)
GRACE = 0.7
"""Seconds the app gets to close itself after a signal before the watchdog ends the process."""
RESET = ("\x1b[<u"                                          # kitty keyboard protocol off
         "\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1015l\x1b[?1006l"  # mouse tracking off
         "\x1b[?1004l\x1b[?2004l\x1b[?2048l\x1b[?7h"       # focus, bracketed paste, resize reports off; wrap on
         "\x1b[?1049l\x1b[?25h")                            # main screen, cursor shown
"""What the emergency exit writes to the terminal: every mode Textual's driver turns on, off."""


def exit_status(signum: int) -> int:
    """The shell's convention for a process ended by signal `signum`: 128 + signum."""
    return 128 + signum


class SignalExit:
    """Installs the handlers of SIGINT and SIGTERM for the life of a `with` block.

    `request` is called (in the main thread, from the handler) with the signal number and must
    only schedule the app's closing, never block; it returns False when the app cannot be
    reached (its loop not running), in which case the watchdog alone ends the process.
    """

    def __init__(self, request: Callable[[int], bool], grace: float = GRACE) -> None:
        self.request = request
        self.grace = grace
        self.signum: int | None = None
        self._previous: dict[int, Callable[[int, FrameType | None], object] | int | None] = {}
        self._tty_attrs: list[int | list[bytes | int]] | None = None  # termios.tcgetattr's value
        self._timer: threading.Timer | None = None

    def __enter__(self) -> "SignalExit":
        try:
            import termios

            if sys.stdin is not None and sys.stdin.isatty():
                self._tty_attrs = termios.tcgetattr(sys.stdin.fileno())
        except Exception:  # no terminal to restore (termios.error, a closed stdin)
            self._tty_attrs = None
        for sig in SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:  # a second signal: do not wait any longer
            self.emergency_exit(exit_status(signum))
        self.signum = signum
        self._timer = threading.Timer(self.grace, self.emergency_exit, args=(exit_status(signum),))
        self._timer.daemon = True
        self._timer.start()
        try:
            self.request(signum)
        except Exception:  # the watchdog still ends the process
            pass

    def restore_terminal(self) -> None:
        """Put the terminal back as it was before the app started (best effort): the modes off
        on the stream Textual draws on (stderr, else stdout), the saved line settings back, and
        input typed meanwhile (mouse reports in flight) dropped, as Textual's driver does."""
        for stream in (sys.__stderr__, sys.__stdout__):
            try:
                if stream is not None and stream.isatty():
                    os.write(stream.fileno(), RESET.encode())
                    break
            except (OSError, ValueError):
                pass
        if self._tty_attrs is not None:
            try:
                import termios

                termios.tcsetattr(sys.stdin.fileno(), termios.TCSANOW, self._tty_attrs)
                termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)
            except Exception:  # termios.error: the terminal is gone
                pass

    def emergency_exit(self, status: int) -> None:
        """Restore the terminal and end the process now, whatever is still running."""
        self.restore_terminal()
        finish(status)


def finish(status: int) -> None:
    """End the process with `status` without waiting for simulation threads: trials in flight
    (Numba, nogil) cannot be interrupted, and nothing they compute is wanted any more. An export
    still being written leaves no temp file behind."""
    from tuiprof.output import discard_pending

    discard_pending()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)
