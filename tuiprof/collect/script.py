"""Launch scripts: the small Python file that builds a kernel's inputs and launches it.

A launch script defines ``setup(dev)``; `dev` is a Device (the emulator or a GPU) offering
``to_device``, ``empty``, ``zeros``, ``launch`` and ``from_device``. The script is the user's
code: it runs in a namespace of its own, and anything it raises is shown as the user's error with
the script's own traceback lines, never as a tuiprof traceback.
"""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import CodeType
from typing import Callable

from tuiprof.errors import TuiprofError
from tuiprof.files import FileRole, read_regular

MAX_SCRIPT_BYTES = 1 << 20
"""A launch script is a page of Python; anything past 1 MiB is not one."""
SCRIPT_NAMES = ("launch.py", "{stem}_launch.py")
"""Launch scripts found beside a kernel file without --launch, in this order."""


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


def _guarded(path: Path, call: Callable[[], object], where: str) -> None:
    try:
        call()
    except TuiprofError:
        raise  # the device's own clear errors (bad launch arguments, out-of-bounds access, ...)
    except Exception as exc:  # the user's code: show its own traceback lines, nothing of ours
        raise LaunchScriptError(f"launch script {path} raised {type(exc).__name__} {where}: {exc}",
                                "its traceback:\n" + _script_traceback(exc, path)) from None


def _script_traceback(exc: BaseException, path: Path) -> str:
    """The frames of `exc`'s traceback that are in the script file (where the user can act)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
    lines = traceback.format_list(frames) if frames else []
    lines += traceback.format_exception_only(type(exc), exc)
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
