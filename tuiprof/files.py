"""Reading the files a user names: one bounded reader of regular files for every command.

A trace, a CUDA source and the headers it includes, a launch script, an arch file: each is
opened here and nowhere else. Only a regular file is read; a directory, FIFO, device or socket is
refused before it is opened (opening a FIFO blocks until a writer comes; reading /dev/zero never
ends; opening some devices acts on the hardware), and checked again on the open descriptor (the
name may have changed in between). Reading stops one byte past the caller's limit, so a file
that grows while it is read costs no more than the limit. Every failure is one TuiprofError of the
caller's class (`FileRole.error`) that names the file and the problem in words.

Imports nothing heavy (the CLI's light paths use it).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from typing import BinaryIO

from tuiprof.errors import TuiprofError
from tuiprof.units import size

_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
"""How every reader here opens a file: never blocking (a FIFO or a device), never becoming the
controlling terminal, never inherited by a child process."""


@dataclass(frozen=True)
class FileRole:
    """What a file is to the command reading it, for its messages: ``noun`` prefixes the name
    ("launch script k_launch.py does not exist"), ``expected`` is what it should have been ("is
    a FIFO (named pipe), not a CUDA source file")."""

    noun: str
    expected: str
    error: type[TuiprofError]
    missing_hint: str
    """What to do when the file does not exist."""
    other_hint: str
    """What to do with a FIFO, device or socket."""
    folder_hint: str
    """What to do when it is a directory."""
    too_large: str = ""
    """Said after "is larger than N": what a file that large cannot be."""


def kind_of_file(mode: int) -> str:
    """A file type in words, as messages say it."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _name(path: str | os.PathLike[str], role: FileRole) -> str:
    from tuiprof.trace.text import shown_path  # the package imports NumPy: only once a message is needed

    return f"{role.noun}{shown_path(path)}"


def not_regular(path: str | os.PathLike[str], mode: int, role: FileRole) -> TuiprofError:
    """The error for a `path` of type `mode` that is not a regular file."""
    hint = role.folder_hint if stat.S_ISDIR(mode) else role.other_hint
    return role.error(f"{_name(path, role)} is {kind_of_file(mode)}, not {role.expected}", hint)


def cannot_read(path: str | os.PathLike[str], exc: OSError, role: FileRole) -> TuiprofError:
    """The error for a file that exists (or may) but cannot be opened or read."""
    name = _name(path, role)
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return role.error(f"{name} does not exist", role.missing_hint)
    if exc.errno in (errno.EACCES, errno.EPERM):
        return role.error(f"cannot read {name}: permission denied",
                          "check the file's permissions (ls -l), or copy it somewhere you can read it")
    if exc.errno == errno.ENAMETOOLONG:
        return role.error(f"cannot read {name}: the file name is too long", "check the path; rename the file if needed")
    if exc.errno == errno.ELOOP:
        return role.error(f"cannot read {name}: too many levels of symbolic links", "check where the link points")
    reason = (exc.strerror or "input/output error").lower()
    return role.error(f"cannot read {name}: {reason}", "check the file and the disk it is on")


def regular_file_problem(path: str | os.PathLike[str], role: FileRole) -> TuiprofError | None:
    """Why `path` cannot be read as a regular file (as `open_regular` would say it), or None:
    for a file handed to another program (a compiler) rather than read here."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return cannot_read(path, exc, role)
    except ValueError:
        return role.error(f"cannot read {_name(path, role)}: the file name holds a NUL character", "check the path")
    return None if stat.S_ISREG(st.st_mode) else not_regular(path, st.st_mode, role)


def open_regular(path: str | os.PathLike[str], role: FileRole) -> BinaryIO:
    """`path` opened for reading if it is a regular file (see the module docstring)."""
    problem = regular_file_problem(path, role)
    if problem is not None:
        raise problem
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        raise cannot_read(path, exc, role) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise not_regular(path, st.st_mode, role)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], role: FileRole, limit: int) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them (a larger file is refused)."""
    with open_regular(path, role) as fh:
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise cannot_read(path, exc, role) from None
    if len(data) > limit:
        raise role.error(f"{_name(path, role)} is larger than {size(limit)}{role.too_large}",
                         f"tuiprof reads {role.expected.removeprefix('a ').removeprefix('an ')}s of up to {size(limit)}")
    return data


def read_regular_text(path: str | os.PathLike[str], role: FileRole, limit: int) -> str:
    """`read_regular` decoded as UTF-8, bytes that are not UTF-8 replaced rather than refused."""
    return read_regular(path, role, limit).decode("utf-8", "replace")


def read_regular_quietly(path: str | os.PathLike[str], limit: int) -> bytes | None:
    """At most `limit` + 1 bytes of the regular file `path` (one byte more than `limit` says the file
    is larger), opened as `open_regular` opens it; None instead of an error where it would refuse or
    fail: for files tuiprof only peeks at (the sources a PTX ``.file`` names, a compiler's log)."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except (OSError, ValueError):
        return None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)  # checked on the descriptor: a folder opens too
    except OSError:
        regular = False
    if not regular:
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as fh:
        try:
            return fh.read(limit + 1)
        except OSError:
            return None


__all__ = ["FileRole", "cannot_read", "kind_of_file", "not_regular", "open_regular", "read_regular",
           "read_regular_quietly", "read_regular_text", "regular_file_problem"]
