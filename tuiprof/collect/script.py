"""Launch scripts: the small Python file that builds a kernel's inputs and launches it.

A launch script defines ``setup(dev)``; `dev` is a Device (the emulator or a GPU) offering
``to_device``, ``empty``, ``zeros``, ``launch`` and ``from_device``. The script is the user's
code: it runs in a namespace of its own, and every way it can end is reported as what it is: an
exception (whatever it is, even one whose message cannot be printed) as the user's error with the
script's own traceback lines, ``sys.exit`` as an exit (tuiprof runs the script inside its own
process, so an exit cannot be a success: the report would be missing), never as a tuiprof
traceback. What it prints goes to standard error, marked with its name and bounded: standard
output is the report's.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import CodeType

from tuiprof.errors import TuiprofError
from tuiprof.files import FileRole, read_regular

MAX_SCRIPT_BYTES = 1 << 20
"""A launch script is a page of Python; anything past 1 MiB is not one."""
SCRIPT_NAMES = ("launch.py", "{stem}_launch.py")
"""Launch scripts found beside a kernel file without --launch, in this order."""
MAX_SCRIPT_OUTPUT = 64 << 10
"""Characters of a launch script's standard output shown (on standard error); the rest is counted."""
MAX_FRAMES = 12
"""Traceback frames of the script shown in a hint (the innermost; a runaway recursion has 1,000)."""
MAX_MESSAGE = 300
"""Characters of an exception's message shown in the error line."""


class LaunchScriptError(TuiprofError):
    """A launch script that cannot be read, does not define setup(dev), or raises."""


SCRIPT_FILE = FileRole(noun="launch script ", expected="a regular file", error=LaunchScriptError,
                       missing_hint="give its path with --launch, or write one with `tuiprof init KERNEL.cu`",
                       other_hint="give the path of a .py file", folder_hint="give the path of a .py file",
                       too_large=": a launch script is a page of Python")


@dataclass(frozen=True)
class LaunchScript:
    """A launch script read and compiled; `load` runs its top level once."""

    path: Path
    code: CodeType

    def load(self) -> "LoadedScript":
        """Execute the script's top level (imports, constants, functions) in a namespace of its own."""
        namespace: dict[str, object] = {"__name__": "__tuiprof_launch__", "__file__": str(self.path)}
        _guarded(self.path, lambda: exec(self.code, namespace), "while loading it")
        setup = namespace.get("setup")
        if not callable(setup):
            raise LaunchScriptError(f"launch script {self.path} does not define setup(dev)",
                                    "define `def setup(dev):` that launches the kernel (`tuiprof init KERNEL.cu` writes one)")
        arch = namespace.get("ARCH")
        if arch is not None and not isinstance(arch, str):
            raise LaunchScriptError(f"launch script {self.path}: ARCH must be a preset name (a string), not {arch!r}",
                                    "for example ARCH = \"v100\", or leave it out and pass --arch")
        return LoadedScript(self.path, setup, arch)

    def run(self, dev: object) -> None:
        """Load the script and run its ``setup(dev)``."""
        self.load().run(dev)


@dataclass(frozen=True)
class LoadedScript:
    """A launch script whose top level has run: its ``setup`` and the GPU model it names (``ARCH``)."""

    path: Path
    setup: Callable[[object], object]
    arch: str | None
    """The preset the script was written for (``ARCH = "tesla-c2050"``), used when --arch is not given."""

    def run(self, dev: object) -> None:
        """``setup(dev)``; the user's exceptions become LaunchScriptError with the script's own lines."""
        _guarded(self.path, lambda: self.setup(dev), "in setup(dev)")


class ScriptOutput(io.TextIOBase):
    """A launch script's ``sys.stdout``: its text goes to `sink` (standard error), each line
    marked with the script's name, up to MAX_SCRIPT_OUTPUT characters; `finish` says how much more
    there was. Standard output is the report's: a print in a script made ``--format json``
    invalid, and a 10 MB print landed in the report."""

    def __init__(self, name: str, sink: object) -> None:
        super().__init__()
        self.name = name
        self.sink = sink
        self.shown = 0
        self.dropped = 0
        self._line_start = True

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        part = text[:max(MAX_SCRIPT_OUTPUT - self.shown, 0)]
        self.shown += len(part)
        self.dropped += len(text) - len(part)
        out = []
        for piece in part.splitlines(keepends=True):
            out.append(f"{self.name}: {piece}" if self._line_start else piece)
            self._line_start = piece.endswith(("\n", "\r"))
        self._emit("".join(out))
        return len(text)

    def flush(self) -> None:
        with contextlib.suppress(Exception):
            self.sink.flush()  # type: ignore[attr-defined]

    def finish(self) -> None:
        """End the script's last line, and say what was not shown."""
        if not self._line_start:
            self._emit("\n")
            self._line_start = True
        if self.dropped:
            self._emit(f"{self.name}: ... {self.dropped:,} more characters of output not shown "
                       f"(print to sys.stderr or a file to keep them)\n")
            self.dropped = 0
        self.flush()

    def _emit(self, text: str) -> None:
        if text and self.sink is not None:
            with contextlib.suppress(OSError, ValueError):
                self.sink.write(text)  # type: ignore[attr-defined]


def _guarded(path: Path, call: Callable[[], object], where: str) -> None:
    """Run the user's `call` with its output on standard error; any way it ends but returning,
    except the device's own errors and an interrupt, becomes a LaunchScriptError."""
    out = ScriptOutput(path.name, sys.stderr)
    try:
        with contextlib.redirect_stdout(out):
            call()
    except (TuiprofError, KeyboardInterrupt):
        raise  # the device's own clear errors (bad launch arguments, out-of-bounds access, ...), ctrl-C
    except SystemExit as exc:  # tuiprof runs the script in its own process: an exit is never a success
        raise LaunchScriptError(f"launch script {path} called sys.exit({_exit_argument(exc)}) {where}",
                                "a launch script must not exit (tuiprof runs it inside its own process and "
                                "needs its launches): return from setup(dev), or raise an exception to "
                                "report a failure; it exited at:\n" + _script_traceback(exc, path, with_exception=False)
                                ) from None
    except BaseException as exc:  # the user's code: show its own traceback lines, nothing of ours
        raise LaunchScriptError(f"launch script {path} raised {_name(exc)} {where}{_message(exc)}",
                                "its traceback:\n" + _script_traceback(exc, path)) from None
    finally:
        out.finish()


def _name(exc: BaseException) -> str:
    return type(exc).__name__[:100]


def _message(exc: BaseException) -> str:
    """``: <first line of the message>`` bounded, or nothing; never raises (a user's ``__str__``
    may raise, or return something huge or many lines long)."""
    try:
        text = str(exc)
    except KeyboardInterrupt:
        raise
    except BaseException:
        return " (its message cannot be printed: its __str__ raised)"
    lines = text.strip().splitlines() or [""]
    first = lines[0][:MAX_MESSAGE]
    more = " …" if len(lines) > 1 or len(lines[0]) > MAX_MESSAGE else ""
    return f": {first}{more}" if first else ""


def _exit_argument(exc: SystemExit) -> str:
    """What the script passed to sys.exit, as it would be written (bounded)."""
    if exc.code is None:
        return ""
    try:
        text = repr(exc.code)
    except KeyboardInterrupt:
        raise
    except BaseException:
        text = f"<a {type(exc.code).__name__[:100]}>"
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + " …"


def _script_traceback(exc: BaseException, path: Path, with_exception: bool = True) -> str:
    """The frames of `exc`'s traceback that are in the script file (where the user can act), the
    innermost MAX_FRAMES of them, then the exception as Python prints it (bounded)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
    lines = [f"  ... {len(frames) - MAX_FRAMES} frames not shown\n"] if len(frames) > MAX_FRAMES else []
    lines += traceback.format_list(frames[-MAX_FRAMES:]) if frames else []
    if with_exception:
        try:
            shown = "".join(traceback.format_exception_only(type(exc), exc))
        except KeyboardInterrupt:
            raise
        except BaseException:
            shown = f"{_name(exc)}: <its message cannot be printed>\n"
        lines.append(shown if len(shown) <= 4 * MAX_MESSAGE else shown[:4 * MAX_MESSAGE] + " …\n")
    return "".join(lines).rstrip()


def read_launch_script(path: str | os.PathLike[str]) -> LaunchScript:
    """Read and compile a launch script: a regular file of at most MAX_SCRIPT_BYTES."""
    p = Path(path)
    data = read_regular(p, SCRIPT_FILE, MAX_SCRIPT_BYTES)
    try:
        code = compile(data, str(p), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        where = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
        raise LaunchScriptError(f"launch script {p} is not valid Python{where}: {exc}", "fix the script") from None
    return LaunchScript(p, code)


def find_launch_script(source: Path) -> Path | None:
    """The launch script beside `source` (``launch.py``, then ``<stem>_launch.py``), if any."""
    for pattern in SCRIPT_NAMES:
        candidate = source.with_name(pattern.format(stem=source.stem))
        if candidate.is_file():
            return candidate
    return None
