"""Running a compiler as a child process: bounded in memory and time, never outliving tuiprof.

Every compiler tuiprof starts (nvcc and what it runs: cicc, ptxas, the host compiler; the steps of
a whole-program build; NVRTC, which runs in a child of its own) goes through `run_bounded`:

- **Memory**: the compiler runs under an address-space limit (RLIMIT_AS, `COMPILER_MEMORY`), so a
  source that includes ``/dev/zero`` or a generated header of gigabytes ends with "the compiler
  ran out of the N GiB of memory tuiprof allows it" instead of taking the machine.
- **Time**: past its timeout the whole process group is killed, and the error says so.
- **No orphans**: the compiler runs under a small guard process (`GUARD`, plain Python, no
  tuiprof import) that asks the kernel to signal it when tuiprof dies (``PR_SET_PDEATHSIG``, even
  for SIGKILL) and then kills the compiler's whole process group (nvcc's cicc and ptxas with it)
  and removes the temporary folders it was given. When tuiprof ends on SIGTERM or SIGHUP,
  `stop_all` (called by the CLI's handler) does the same at once.
- **Temporaries**: `temp_folder` makes ``tuiprof-build-<pid>-*`` folders that are removed on every
  exit; if tuiprof is killed (SIGKILL included, between two compiler runs too) a janitor process
  (`JANITOR`, started with the first folder) removes those still there when tuiprof's end closes
  its pipe. Folders left by a machine that lost power are removed by the next compile once their
  process is gone and they are `STALE_SECONDS` old. A temporary folder that cannot be made names
  TMPDIR, the real cause, in a BuildError.

Imports nothing heavy.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tuiprof.errors import BuildError
from tuiprof.output import sweep_stale

COMPILER_MEMORY = 4 << 30
"""Address space (bytes) one compiler process may reserve: several times what the largest
template-heavy CUDA source needs (CUB and Thrust compile in under 1 GiB), far below what a
runaway include takes."""
MAX_OUTPUT_BYTES = 1 << 20
"""How much of a child's standard output and error is read back (head; the tail is kept too)."""
TAIL_BYTES = 64 << 10
STALE_SECONDS = 600.0
"""A temporary folder of a dead process is removed once it is this old (a live one's never is)."""
TEMP_PREFIX = "tuiprof-build-"

GUARD = r"""
import ctypes, os, resource, shutil, signal, subprocess, sys, time
parent, memory, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
folders, cmd = sys.argv[4:4 + n], sys.argv[4 + n:]
child = None
def gone(group):
    try:
        os.killpg(group, 0)
    except OSError:
        return True
    return False
def stop(signum, frame):
    if child is not None:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.waitpid(child.pid, 0)  # reaped here: the handler may have interrupted child.wait()
        except OSError:
            pass
        for _ in range(100):  # until the group is gone: a dying compiler may still write a file
            if gone(child.pid):
                break
            time.sleep(0.01)
    for _ in range(3):
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
        if not any(os.path.lexists(f) for f in folders):
            break
        time.sleep(0.05)
    os._exit(128 + signum)
for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(s, stop)
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass
if os.getppid() != parent:
    stop(signal.SIGTERM, None)
def limit():
    if memory > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
try:
    child = subprocess.Popen(cmd, preexec_fn=limit, start_new_session=True)
except OSError as exc:
    sys.stderr.write(f"tuiprof-guard: cannot run {cmd[0]}: {exc.strerror}\n")
    os._exit(127)
code = child.wait()
try:
    os.killpg(child.pid, signal.SIGKILL)  # whatever the compiler left running
except OSError:
    pass
os._exit(code if code >= 0 else 128 - code)
"""
"""The guard between tuiprof and a compiler (see the module docstring). Its argv: tuiprof's
pid, the memory limit, the number of folders to remove if tuiprof dies, those folders, then
the command. It exits with the compiler's status (128 + N for a signal N)."""

JANITOR = r"""
import os, shutil, signal, sys
for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
    signal.signal(s, signal.SIG_IGN)
held = set()
for line in sys.stdin.buffer:
    path = os.fsdecode(bytes.fromhex(line[1:].decode().strip()))
    (held.add if line[:1] == b"+" else held.discard)(path)
for path in held:
    shutil.rmtree(path, ignore_errors=True)
"""
"""The janitor: reads ``+HEX`` (a folder to remove if tuiprof dies) and ``-HEX`` (not any more)
lines on its standard input, a pipe only tuiprof holds; at its end (tuiprof exited or was
killed), removes the folders still held."""

_janitor: int | None = None
"""The write end of the janitor's pipe (None before the first folder, or when it cannot run)."""
_held: list[subprocess.Popen[bytes]] = []
"""The janitor itself, referenced for the life of the process (it ends with it)."""
_running: set[subprocess.Popen[bytes]] = set()
_folders: set[str] = set()
_lock = threading.Lock()


@dataclass(frozen=True)
class ChildResult:
    """A finished compiler run: its exit status (negative: killed by that signal, as
    subprocess says it), its output (bounded), and the limit that ended it, if one did."""

    returncode: int
    stdout: str
    stderr: str
    limit: str | None = None
    """"memory" when the output shows the compiler hit its address-space limit, else None (a
    run past its time raises instead)."""

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


_OUT_OF_MEMORY = re.compile(r"out of memory|bad_alloc|cannot allocate memory|MemoryError|memory exhausted|"
                            r"virtual memory exhausted|std::bad_alloc|died due to signal (?:6|9|11)\b", re.I)


def memory_limit() -> int:
    """The address space a compiler gets: `COMPILER_MEMORY`, or tuiprof's own limit when lower."""
    try:
        import resource
    except ImportError:  # not POSIX: no address-space limit to give
        return 0
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    return COMPILER_MEMORY if soft == resource.RLIM_INFINITY else min(COMPILER_MEMORY, soft)


def limit_words(limit: str, what: str, timeout: float) -> BuildError:
    """The BuildError for `what` ended by tuiprof's `limit` ("memory" or "time")."""
    if limit == "memory":
        return BuildError(f"{what} ran out of the {memory_limit() / (1 << 30):g} GiB of memory tuiprof allows a "
                          "compiler (RLIMIT_AS)",
                          "does the source include a device, a FIFO or a huge generated file? "
                          "A real kernel compiles in far less")
    return BuildError(f"{what} took longer than {timeout:g} s, tuiprof's time limit for it, and was stopped",
                      "does the source include a FIFO, or a file that never ends? Simplify the source, or check "
                      "that the compiler is not stuck")


def _read_back(fh: IO[bytes]) -> str:
    """The head of a child's output file (MAX_OUTPUT_BYTES) and, when it was longer, its tail."""
    fh.seek(0, os.SEEK_END)
    size = fh.tell()
    fh.seek(0)
    head = fh.read(MAX_OUTPUT_BYTES)
    if size <= MAX_OUTPUT_BYTES:
        return head.decode("utf-8", "replace")
    fh.seek(max(MAX_OUTPUT_BYTES, size - TAIL_BYTES))
    tail = fh.read(TAIL_BYTES)
    return head.decode("utf-8", "replace") + "\n...\n" + tail.decode("utf-8", "replace")


def run_bounded(cmd: Sequence[str], *, cwd: str | os.PathLike[str], timeout: float, what: str,
                env: Mapping[str, str] | None = None, memory: int | None = None,
                cleanup: Sequence[str | os.PathLike[str]] = ()) -> ChildResult:
    """Run `cmd` under the guard (module docstring): its memory limited (`memory`, default
    `memory_limit()`; 0 for none), its output read back bounded. Past `timeout` seconds the
    compiler's process group is killed and BuildError says which limit it hit; `cleanup` folders,
    and every folder of `temp_folder` alive now, are removed by the guard if tuiprof dies first."""
    mem = memory_limit() if memory is None else memory
    folders = [os.fspath(f) for f in cleanup]
    with _lock:  # every temporary folder of this process, whoever made it (a build's staging folder too)
        folders += sorted(f for f in _folders if f not in folders)
    argv = [sys.executable, "-I", "-S", "-c", GUARD, str(os.getpid()), str(mem), str(len(folders)), *folders, *cmd]
    if os.name != "posix":  # no guard (its process groups and prctl are POSIX): the timeout only
        argv = list(cmd)
    with temp_file() as out, temp_file() as err:
        try:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd,
                                    env=dict(env) if env is not None else None, start_new_session=os.name == "posix")
        except OSError as exc:
            raise BuildError(f"cannot run {cmd[0]}: {exc.strerror}", "check the CUDA toolkit installation") from None
        with _lock:
            _running.add(proc)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise limit_words("time", what, timeout) from None
        finally:
            if proc.poll() is None:
                _stop(proc)
            with _lock:
                _running.discard(proc)
        stdout, stderr = _read_back(out), _read_back(err)
    code = -(code - 128) if code > 128 else code
    if code == 127 and stderr.startswith("tuiprof-guard: cannot run"):
        raise BuildError(stderr.strip().removeprefix("tuiprof-guard: "), "check the CUDA toolkit installation")
    limit = "memory" if code != 0 and mem > 0 and _OUT_OF_MEMORY.search(stdout + stderr) else None
    return ChildResult(code, stdout, stderr, limit)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End a guard and its compiler: SIGTERM makes the guard kill the compiler's group and remove
    its folders; SIGKILL to the guard's own group after a second if it has not exited."""
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=2.0)
    except (OSError, subprocess.TimeoutExpired):
        with contextlib.suppress(OSError, AttributeError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=2.0)


def stop_all() -> None:
    """Stop every compiler still running and remove every temporary folder (a signal is ending
    tuiprof: called from the CLI's SIGTERM/SIGHUP handler)."""
    with _lock:
        running, folders = list(_running), list(_folders)
    for proc in running:
        with contextlib.suppress(OSError):
            proc.send_signal(signal.SIGTERM)
    for proc in running:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            proc.wait(timeout=2.0)
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


def _tell_janitor(sign: str, folder: str) -> None:
    """Ask the janitor to hold (``+``) or drop (``-``) `folder`, starting it on first use."""
    global _janitor
    if os.name != "posix":
        return
    if _janitor is None:
        r, w = os.pipe()
        try:
            _held.append(subprocess.Popen([sys.executable, "-I", "-S", "-c", JANITOR], stdin=r,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          start_new_session=True))
        except OSError:
            os.close(w)
            return
        finally:
            os.close(r)
        _janitor = w
    try:
        os.write(_janitor, f"{sign}{os.fsencode(folder).hex()}\n".encode())
    except OSError:
        pass


def _temp_root() -> str:
    """The folder for temporaries, or BuildError naming TMPDIR when none is usable."""
    try:
        return tempfile.gettempdir()
    except (FileNotFoundError, OSError) as exc:
        where = os.environ.get("TMPDIR")
        raise BuildError(f"no folder for temporary files: {('TMPDIR=' + where + ' is not a writable folder, and ') if where else ''}"
                         f"none of /tmp, /var/tmp, /usr/tmp or the current folder is writable ({exc})",
                         "set TMPDIR to a writable folder (compilers write their temporaries there)") from None


@contextlib.contextmanager
def temp_file() -> Iterator[IO[bytes]]:
    """An anonymous temporary file (a child's output), BuildError naming TMPDIR when none can be made."""
    try:
        fh = tempfile.TemporaryFile(dir=_temp_root())
    except OSError as exc:
        raise _temp_error(exc) from None
    with fh:
        yield fh


def _temp_error(exc: OSError) -> BuildError:
    root = tempfile.gettempdir()
    via = f" (TMPDIR={os.environ['TMPDIR']})" if os.environ.get("TMPDIR") else ""
    return BuildError(f"cannot make a temporary file in {root}{via}: {(exc.strerror or str(exc)).lower()}",
                      "set TMPDIR to a writable folder with free space (compilers write their temporaries there)")


@contextlib.contextmanager
def temp_folder(root: str | os.PathLike[str] | None = None, prefix: str = TEMP_PREFIX) -> Iterator[Path]:
    """A private ``<prefix><pid>-*`` folder in `root` (default: the temporary folder), removed on
    every exit (and by `stop_all`, or the guard when tuiprof is killed); stale ones of dead
    processes are swept first (`tuiprof.output.sweep_stale`)."""
    where = _temp_root() if root is None else os.fspath(root)
    sweep_stale(Path(where), re.compile(rf"^{re.escape(prefix)}(\d+)-[A-Za-z0-9_]+$"), STALE_SECONDS)
    try:
        folder = tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=where)
    except OSError as exc:
        if root is not None:
            raise BuildError(f"cannot make a temporary folder in {where}: {(exc.strerror or str(exc)).lower()}",
                             "choose a writable folder for the output") from None
        raise _temp_error(exc) from None
    with _lock:
        _folders.add(folder)
        _tell_janitor("+", folder)
    try:
        yield Path(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        with _lock:
            _folders.discard(folder)
            _tell_janitor("-", folder)


__all__ = ["COMPILER_MEMORY", "ChildResult", "limit_words", "memory_limit", "run_bounded", "stop_all",
           "temp_file", "temp_folder"]
