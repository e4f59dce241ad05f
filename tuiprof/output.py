"""Writing what tuiprof produces (reports, exports, traces) without ever damaging a file.

Rules (issue 9 item 3; a shared machine once lost its /dev/null to ``-o /dev/null`` as root):

- ``-`` (or no path) is standard output; a binary file (a trace) only when it is not a terminal.
- A new path or an existing regular file is replaced atomically: a temp file beside the target,
  then a rename; the file gets the mode the umask gives a new file, or keeps the mode of the file it
  replaces. A symlink is followed: its target is written, the link stays.
- Anything else that exists (a character device such as /dev/null or /dev/full, a FIFO, a socket)
  is written through, never replaced; a directory is refused. A FIFO that no process reads is
  refused after `FIFO_WAIT` seconds instead of blocking forever.
- A read-only file, a folder that does not exist or cannot be written, the input being read
  (``protect``), or a name the file system cannot hold is refused before anything is written
  (`check_output`, which the commands call before their work).
- The temp file (``.tuiprof-<pid>-*.tmp``) is removed on every exit path, exceptions and
  interrupts included; one left by a process killed with SIGKILL is removed by the next write to
  its folder once that process is gone and the file is `STALE_SECONDS` old (`sweep_stale`).
- Standard output that closes before a binary file is all written (``record -o - | head -c
  100``) is an error, never a cut file reported as success.

The UI's export and the CLI both call this module; it imports nothing heavy.
"""

from __future__ import annotations

import atexit
import errno
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

from tuiprof.errors import OutputError

_pending: set[str] = set()
"""Temp files being written, removed by `discard_pending` when a signal ends the process (or
the process exits while a daemon thread, such as the UI's export, is still writing one)."""

NAME_MAX = 255
"""Longest file name (one path component, in bytes) on the file systems we write to."""
FIFO_WAIT = 5.0
"""Seconds a FIFO output waits for a reader before the write is refused."""
STALE_SECONDS = 600.0
"""A temp file left by a dead process is removed once it is this old."""
TMP_PREFIX = ".tuiprof-"
_OUR_TMP = re.compile(r"^\.tuiprof-(\d+)-[A-Za-z0-9_]+\.tmp$")
"""Our temp files: the pid of the writer, then mkstemp's letters."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def shown(path: str | os.PathLike[str]) -> str:
    """A path as it can be printed on any terminal: undecodable bytes and control characters escaped."""
    text = os.fsdecode(path)
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _is_input(target: str, protect: Iterable[str | os.PathLike[str]]) -> bool:
    for p in protect:
        try:
            if os.path.samefile(target, p):
                return True
        except OSError:
            continue
    return False


def check_output(output: str, protect: Iterable[str | os.PathLike[str]] = ()) -> os.stat_result | None:
    """Refuse `output` (OutputError) if the module's rules forbid writing it, before any work is
    done for it; its stat (None for a new file) otherwise."""
    name = shown(output)
    if any(len(os.fsencode(part)) > NAME_MAX for part in Path(output).parts):
        raise OutputError(f"cannot write {name[:80]}…: a file name is longer than {NAME_MAX} bytes",
                          "choose a shorter name for the output")
    if output.endswith(os.sep) or output.endswith("/"):
        if not os.path.isdir(output):
            raise OutputError(f"cannot write {name}: the folder does not exist",
                              "give a file name, e.g. -o report.txt, or create the folder first")
        raise OutputError(f"{name} is a directory", "give a file name for the output")
    real = os.path.realpath(output)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        folder = os.path.dirname(real) or "."
        if not os.path.isdir(folder):
            raise OutputError(f"cannot write {name}: the folder {shown(folder)} does not exist",
                              "create the folder first, or choose another output path") from None
        _check_folder(name, folder)
        return None
    except OSError as exc:
        raise OutputError(f"cannot write {name}: {_reason(exc)}", "choose another output path") from None
    if _is_input(real, protect):
        raise OutputError(f"{name} is the input being read; writing the output there would destroy it",
                          "choose another output path")
    if stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{name} is a directory", "give a file name for the output")
    if stat.S_ISREG(st.st_mode) and not st.st_mode & 0o222:
        raise OutputError(f"{name} is read-only; tuiprof does not replace it",
                          "choose another output path, or make the file writable first")
    if stat.S_ISREG(st.st_mode):
        _check_folder(name, os.path.dirname(real) or ".")
    return st


def _check_folder(name: str, folder: str) -> None:
    """Refuse an output whose folder cannot take the temp file and the rename (a read-only
    folder or file system), before any work rather than after it."""
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write {name}: the folder {shown(folder)} is not writable",
                          "choose another output path, or make the folder writable first")


def check_binary_stdout() -> None:
    """Refuse (OutputError) to write a binary file to standard output when it is closed or a
    terminal (a zip on a terminal is garbage, and can set its modes)."""
    out = sys.stdout
    try:
        tty = out is not None and out.isatty()
    except ValueError:  # closed file object
        out = None
    if out is None:
        raise OutputError("standard output is closed", "give a file name with -o FILE")
    if tty:
        raise OutputError("standard output is a terminal; tuiprof does not write a binary file there",
                          "give a file name (-o trace.tptrace), or redirect standard output (-o - > trace.tptrace)")


def _write_stdout_binary(write: Callable[[BinaryIO], object]) -> None:
    check_binary_stdout()
    try:
        sys.stdout.flush()
        write(sys.stdout.buffer)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        quiet_stdout()
        raise OutputError("standard output was closed before the whole file was written: what its reader got is cut",
                          "write to a file with -o FILE, or let the reader take the whole output") from None
    except OSError as exc:
        raise OutputError(f"cannot write to standard output: {_reason(exc)}", "give a file name with -o FILE") from None


def write_bytes_to(output: str, write: Callable[[BinaryIO], object], *,
                   protect: Iterable[str | os.PathLike[str]] = ()) -> None:
    """Write through `write(fh)` to `output` following the module's rules; ``-`` is standard
    output when it is not a terminal."""
    if output == "-":
        _write_stdout_binary(write)
        return
    st = check_output(output, protect)
    name, real = shown(output), os.path.realpath(output)
    if st is not None and not stat.S_ISREG(st.st_mode):
        _write_through(real, name, write)
        return
    folder = os.path.dirname(real) or "."
    mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
    _replace_atomically(real, name, folder, mode, write)


def _write_through(real: str, name: str, write: Callable[[BinaryIO], object]) -> None:
    """A device, FIFO or socket: write into it, never replace it. Opened without blocking (a FIFO
    without a reader would block forever): a FIFO waits `FIFO_WAIT` seconds for a reader."""
    fd = _open_through(real, name)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
    except OSError as exc:
        raise OutputError(f"cannot write {name}: {_reason(exc)}", "check the device or choose another output path") from None


def _open_through(real: str, name: str) -> int:
    """`real` opened for writing through, blocking mode restored once open."""
    nonblock = getattr(os, "O_NONBLOCK", 0)
    deadline = time.monotonic() + FIFO_WAIT
    while True:
        try:
            fd = os.open(real, os.O_WRONLY | nonblock | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
            break
        except OSError as exc:
            if exc.errno == errno.ENXIO and time.monotonic() < deadline:  # a FIFO with no reader (yet)
                time.sleep(0.05)
                continue
            if exc.errno == errno.ENXIO:
                raise OutputError(f"cannot write {name}: no process is reading this FIFO (waited {FIFO_WAIT:g} s)",
                                  "start the reader first (e.g. `cat FIFO > file &`), or write to a file") from None
            raise OutputError(f"cannot write {name}: {_reason(exc)}", "choose another output path") from None
    if nonblock:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~nonblock)
    return fd


def _replace_atomically(real: str, name: str, folder: str, mode: int, write: Callable[[BinaryIO], object]) -> None:
    import tempfile

    sweep_stale(Path(folder), _OUR_TMP, STALE_SECONDS)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{os.getpid()}-", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise OutputError(f"cannot write {name}: {_reason(exc)}", "choose a writable folder") from None
    _pending.add(tmp)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, real)
    except OSError as exc:
        hint = "free some disk space" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "check the disk space and permissions"
        raise OutputError(f"cannot write {name}: {_reason(exc)}", hint) from None
    finally:
        _pending.discard(tmp)
        _unlink(tmp)  # nothing left to remove after the rename


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists on this machine (one that exists but is not ours counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def sweep_stale(folder: Path, pattern: "re.Pattern[str]", min_age: float) -> None:
    """Remove what a killed tuiprof left in `folder`: only entries whose name matches our own
    `pattern` (the writer's pid in its first group), whose process is gone and which nothing has
    touched for `min_age` seconds. Never follows a symlink; never raises."""
    import shutil

    try:
        names = os.listdir(folder)
    except OSError:
        return
    now = time.time()
    for entry in names:
        m = pattern.match(entry)
        if m is None or int(m.group(1)) == os.getpid() or pid_alive(int(m.group(1))):
            continue
        path = folder / entry
        try:
            st = os.lstat(path)
            if now - st.st_mtime < min_age:
                continue
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(path, ignore_errors=True)
            elif stat.S_ISREG(st.st_mode):
                os.unlink(path)
        except OSError:
            continue


def quiet_stdout() -> None:
    """Standard output to /dev/null: its reader went away, and Python must not complain about
    the pipe again while it flushes at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def discard_pending() -> None:
    """Remove every temp file still being written (a signal is ending the process)."""
    for tmp in list(_pending):
        _unlink(tmp)


atexit.register(discard_pending)


def note(text: str) -> None:
    """One line of status on standard error; nothing when standard error is closed or broken
    (never on stdout: ``print(file=None)`` would write there, into the report)."""
    if sys.stderr is None:
        return
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def write_stdout(text: str) -> None:
    """Print `text` on standard output, as one clear error when that is impossible."""
    out = sys.stdout
    if out is None:
        raise OutputError("standard output is closed", "run tuiprof with its output open, or use -o FILE")
    try:
        out.write(text)
        out.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        hint = "free some disk space, or use -o FILE elsewhere" if exc.errno in (errno.ENOSPC, errno.EDQUOT) \
            else "use -o FILE"
        raise OutputError(f"cannot write to standard output: {_reason(exc)}", hint) from None
    except ValueError:  # closed file object
        raise OutputError("standard output is closed", "run tuiprof with its output open, or use -o FILE") from None


def write_output(text: str, output: str | None, *, protect: Iterable[str | os.PathLike[str]] = ()) -> None:
    """Print `text` (``output`` None or ``-``), or write it to the file `output` safely."""
    text = text if text.endswith("\n") else text + "\n"
    if output is None or output == "-":
        write_stdout(text)
        return
    data = text.encode("utf-8")
    write_bytes_to(output, lambda fh: fh.write(data), protect=protect)
