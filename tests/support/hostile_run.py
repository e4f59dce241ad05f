"""Shared helpers of the hostile-input tests: run the CLI in a child process under a memory
cap and measure it, and snapshot a folder to prove nothing in it changed. Their fixtures (the
warm kernel caches) are in tests/hostile/conftest.py."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import tuiprof

ROOT = Path(tuiprof.__file__).resolve().parents[1]
"""The tree whose tuiprof the tests import: children run the same one."""
CAP = 3 << 29
"""Address-space cap of a child run: 1.5 GiB. Numba and LLVM reserve address space they never
touch (a normal report on the vecadd demo needs 0.5-0.75 GiB of it), so the cap is about twice
what a small trace needs, far below what any of the hostile files took before they were fixed."""
TIMEOUT = 120.0
PRELUDE_THEN_MAIN = """
import runpy as _runpy, sys as _sys
_sys.argv = ["tuiprof", *_sys.argv[1:]]
_runpy.run_module("tuiprof", run_name="__main__", alter_sys=True)
"""


LAUNCHER = """
import os, resource, sys
cap, report, closed, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4:]
pid = os.fork()
if pid == 0:
    os.close(report)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    for fd in filter(None, closed.split(",")):
        os.close(int(fd))
    os.execv(argv[0], argv)
_, status, usage = os.wait4(pid, 0)
os.write(report, f"{status} {usage.ru_maxrss}".encode())
"""
"""Runs the child for `run_cli` and reports its wait status and peak. The child is forked from
this small process, not from the test's: Linux counts the resident set of the image a process
had before `exec` into its peak, so a child forked from a pytest worker holding 470 MiB of
loaded traces (xdist puts any test before any other) measured 470 MiB for a one-line error."""


@dataclass(frozen=True)
class Run:
    """One finished child process."""

    code: int
    stdout: bytes
    stderr: str
    peak_mib: float
    """Its maximum resident set (ru_maxrss from wait4, this child only)."""
    seconds: float


def run_cli(args: list[str], cwd: Path, cap: int = CAP, timeout: float = TIMEOUT, close_fds: tuple[int, ...] = (),
            env: dict[str, str] | None = None, stdin: Any = subprocess.DEVNULL, prelude: str | None = None,
            wrap: list[str] | None = None) -> Run:
    """`python -m tuiprof ARGS` from this tree, in `cwd`, under an address-space cap (and with the
    descriptors `close_fds` closed); a run past `timeout` is killed and fails the test (a hang is
    a failure). `prelude` is Python run before tuiprof's main in the same process (to simulate a
    fault of the machine); `wrap` a command that runs it (`read_only_mount`)."""
    out, err = cwd / ".run.stdout", cwd / ".run.stderr"
    start = ["-m", "tuiprof"] if prelude is None else ["-c", prelude + PRELUDE_THEN_MAIN]
    r, w = os.pipe()
    t0 = time.perf_counter()
    try:
        with open(out, "wb") as fo, open(err, "wb") as fe:
            head = [shutil.which(wrap[0]) or wrap[0], *wrap[1:]] if wrap else []
            p = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(cap), str(w), ",".join(map(str, close_fds)),
                                  *head, sys.executable, *start, *args], cwd=cwd, stdin=stdin, stdout=fo, stderr=fe,
                                 pass_fds=(w,), process_group=0,
                                 env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
            os.close(w)
            w = -1
            while p.poll() is None:
                if time.perf_counter() - t0 > timeout:
                    os.killpg(p.pid, 9)
                    p.wait()
                    pytest.fail(f"`tuiprof {' '.join(args)[:200]}` still running after {timeout:.0f} s")
                time.sleep(0.01)
        status, peak_kib = map(int, os.read(r, 64).split())
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
    run = Run(os.waitstatus_to_exitcode(status), out.read_bytes(), err.read_text(errors="replace"), peak_kib / 1024,
              time.perf_counter() - t0)
    out.unlink()
    err.unlink()
    return run


def assert_clean_error(run: Run, *needles: str) -> str:
    """One `error:` line and one `hint:` line on stderr, exit status 2, no traceback, nothing on
    stdout, and each needle in the error line. Returns the error line."""
    lines = run.stderr.strip().splitlines()
    assert run.code == 2, (run.code, run.stderr[-2000:])
    assert "Traceback" not in run.stderr
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert len(errors) == 1 and lines[-1].startswith("hint: ") and len(lines[-1]) > len("hint: "), run.stderr
    assert lines.index(errors[0]) == len(lines) - 2, run.stderr
    assert run.stdout == b""
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


def mknod(path: Path, major: int, minor: int) -> Path:
    """A character device node at `path` (inside the test's own folder, never the system's /dev);
    the test is skipped where that needs a privilege it does not have."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    except PermissionError:
        pytest.skip("making a device node needs root")
    return path


def snapshot(folder: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under `folder`: (size, mtime in ns, SHA-1 of the contents)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and not p.is_symlink():
            st = p.stat()
            out[str(p.relative_to(folder))] = (st.st_size, st.st_mtime_ns, hashlib.sha1(p.read_bytes()).hexdigest())
    return out


KERNEL = "__global__ void add(float *a, int n)\n{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) a[i] += 1.0f;\n}\n"
"""A small kernel file for the commands that compile: one global load and one store."""
LAUNCH = ("import numpy as np\n\n\ndef setup(dev):\n    a = dev.to_device(np.zeros(256, np.float32))\n"
          "    dev.launch(\"_Z3addPfi\", {grid}, (32, 1, 1), [a, np.int32(256)])\n")
"""Its launch script; ``{grid}`` is the launch's grid."""
PROGRAM = KERNEL + "int main()\n{\n    float *d;\n    cudaMalloc(&d, 1024);\n    add<<<1, 256>>>(d, 256);\n" \
                   "    return cudaDeviceSynchronize() != cudaSuccess;\n}\n"
"""A whole program (it defines main) for `tuiprof build`."""


def kernel_file(folder: Path, name: str = "k", grid: str = "(8, 1, 1)", source: str = KERNEL) -> Path:
    """`folder/name.cu` with its launch script beside it (`name_launch.py`)."""
    (folder / f"{name}_launch.py").write_text(LAUNCH.format(grid=grid))
    path = folder / f"{name}.cu"
    path.write_text(source)
    return path


def read_only_mount(folder: Path) -> list[str]:
    """A command prefix that runs its command with `folder` read-only for it (a bind mount in a
    mount namespace of its own: as root, a chmod'ed folder is still writable). Skips the test
    where that is not possible."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return []
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind {folder} {folder} && "
                            f"mount -o remount,bind,ro {folder} {folder} && ! touch {folder}/.probe"],
                           capture_output=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a read-only folder here: {probe.stderr.decode(errors='replace')[:200]}")
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"'
    return ["unshare", "-m", "sh", "-c", script, str(folder)]


# A prelude that makes the next report write stop half-way (after "writing" on stdout) for a signal.
SLOW_WRITE = """
import time, tuiprof.output as _output

_replace = _output._replace_atomically

def _slowly(real, name, folder, mode, write):
    def half_then_wait(fh):
        fh.write(b"half a report")
        fh.flush()
        print("writing", flush=True)
        time.sleep(60)
    _replace(real, name, folder, mode, half_then_wait)

_output._replace_atomically = _slowly
"""
