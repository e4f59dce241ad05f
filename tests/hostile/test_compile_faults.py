"""Issue 21 items 4, 6, 13 and 14: every command reads sources with the one bounded regular-file
reader; compilers run bounded in memory and time and say which limit stopped them; an unusable
TMPDIR is named, not disguised as an unsupported GPU; a compiler never outlives tuiprof, nor do
its temporaries.

Devices are nodes made in the test's own folder (as root; skipped otherwise), never /dev's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.hostile_run import PROGRAM, ROOT, assert_clean_error, kernel_file, mknod, run_cli, snapshot
from tuiprof.errors import BuildError

RUN = ("--trials", "2", "--no-sweep")


def device_or_fifo(path: Path, kind: str) -> Path:
    """A zero device (1, 5) or a FIFO at `path`."""
    if kind == "device":
        return mknod(path, 1, 5)
    os.mkfifo(path)
    return path


# --- item 4: sources are read as regular files only -----------------------------------------------

@pytest.mark.parametrize("kind", ["device", "FIFO"])
@pytest.mark.parametrize("command", ["init", "report", "record", "open"])
def test_a_source_that_is_a_device_or_fifo_is_refused(tmp_path: Path, kind: str, command: str) -> None:
    # Before: `init /dev/zero` grew to 3.7 GB and ended in a MemoryError traceback; `init` on a
    # FIFO hung. The other commands said "is not a file", now as init says it.
    src = device_or_fifo(tmp_path / "k.cu", kind)
    args = {"init": ["init", str(src)], "report": ["report", str(src), *RUN],
            "record": ["record", str(src), "-o", str(tmp_path / "t.tptrace")], "open": [str(src), *RUN]}[command]
    before = snapshot(tmp_path)
    run = run_cli(args, tmp_path, timeout=60)
    word = "a device" if kind == "device" else "a FIFO (named pipe)"
    assert_clean_error(run, f"k.cu is {word}, not a CUDA source file")
    assert run.peak_mib < 400 and snapshot(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".run.")) == ["k.cu"]


# --- item 6: the compiler is bounded ----------------------------------------------------------------

@pytest.mark.parametrize("kind", ["device", "FIFO"])
@pytest.mark.parametrize("compiler", ["nvcc", "nvrtc"])
def test_an_include_of_a_device_or_fifo_is_refused_before_compiling(tmp_path: Path, kind: str, compiler: str) -> None:
    # Before: `#include "zero.h"` (a zero device) made nvcc's cc1plus grow past 4 GB; a FIFO
    # stalled the compile for its 300 s timeout.
    device_or_fifo(tmp_path / "beside.h", kind)
    src = kernel_file(tmp_path, source='#include "beside.h"\n' + PROGRAM.split("int main")[0])
    before = snapshot(tmp_path)
    run = run_cli(["report", str(src), "--backend", "emu", "--compiler", compiler, *RUN], tmp_path, timeout=60)
    assert_clean_error(run, "k.cu includes 'beside.h'", "not a CUDA source file")
    assert run.seconds < 30 and run.peak_mib < 400 and snapshot(tmp_path) == before


def test_a_compiler_past_its_memory_is_stopped_and_says_so(tmp_path: Path) -> None:
    """An include no directive names (a macro), so only the compiler's memory limit stops it:
    the message names that limit. Before: under a 1.5 GiB cap, 'does not compile ... out of
    memory' with 'fix the source at the line shown'; without a cap, cc1plus past 4 GB."""
    mknod(tmp_path / "zero.h", 1, 5)
    src = kernel_file(tmp_path, source='#define HEADER "zero.h"\n#include HEADER\n' + PROGRAM.split("int main")[0])
    before = snapshot(tmp_path)
    run = run_cli(["report", str(src), "--backend", "emu", "--compiler", "nvcc", *RUN], tmp_path, timeout=120)
    assert_clean_error(run, "ran out of the 1.5 GiB of memory tuiprof allows a compiler")
    assert run.peak_mib < 1536 and snapshot(tmp_path) == before  # the peak counts the compiler's own


def test_nvrtc_is_bounded_in_time() -> None:
    """NVRTC runs in a child of its own, so its compile can be stopped. Before: in process, its
    time bound did not apply (nor any memory bound)."""
    from tuiprof.toolchain import build_program

    with pytest.raises(BuildError, match="took longer than 0.01 s, tuiprof's time limit"):
        build_program(ROOT / "tests" / "cuda" / "ptx_spmv_csr.cu", compute_capability=(8, 0), compiler="nvrtc",
                      cache=False, timeout=0.01)


def test_the_guard_bounds_memory_and_names_the_limit(tmp_path: Path) -> None:
    from tuiprof.toolchain.child import run_bounded

    r = run_bounded([sys.executable, "-c", "x = bytearray(1 << 30)"], cwd=tmp_path, timeout=60, what="a hog",
                    memory=256 << 20)
    assert r.returncode != 0 and r.limit == "memory"
    r = run_bounded([sys.executable, "-c", "print('fine')"], cwd=tmp_path, timeout=60, what="fine")
    assert (r.returncode, r.stdout, r.limit) == (0, "fine\n", None)


# --- item 13: TMPDIR ----------------------------------------------------------------------------

@pytest.mark.usefixtures("warm_emulator")
@pytest.mark.parametrize("tmpdir", ["missing", "a file"])
def test_an_unusable_tmpdir_is_not_an_unsupported_gpu(tmp_path: Path, tmpdir: str) -> None:
    # Before: `nvcc --list-gpu-arch` failed, the target fell back to sm_70, and the user read
    # "Unsupported gpu architecture 'sm_70'" with "fix the source at the line shown".
    from tuiprof.jit import kernel_cache_dir

    src = kernel_file(tmp_path)
    bad = tmp_path / "no-such-folder"
    if tmpdir == "a file":
        bad = tmp_path / "tmpfile"
        bad.write_text("")
    env = {"TMPDIR": str(bad), "XDG_CACHE_HOME": str(tmp_path / "cache"), "NUMBA_CACHE_DIR": str(kernel_cache_dir())}
    run = run_cli(["report", str(src), "--backend", "emu", "--compiler", "nvcc", "--arch", "v100", *RUN], tmp_path,
                  env=env, timeout=300)
    assert run.code == 0, run.stderr
    assert "sm_70" not in run.stderr


def test_the_hint_says_when_the_target_was_a_guess() -> None:
    from tuiprof.toolchain.compilers import _failure

    err = _failure("nvcc 13.0", Path("k.cu"), "sm_70", "nvcc fatal   : Unsupported gpu architecture 'sm_70'", (),
                   "nvcc --list-gpu-arch failed: Could not open output file '/nonexistent/tmpxft'")
    assert "sm_70 was a guess" in err.hint and "TMPDIR" in err.hint and "/nonexistent" in err.hint


def test_no_folder_for_temporaries_names_tmpdir(monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    from tuiprof.toolchain import child

    def none(*args: object) -> str:
        raise FileNotFoundError(2, "No usable temporary directory found in ['/x']")

    monkeypatch.setattr(tempfile, "gettempdir", none)
    monkeypatch.setenv("TMPDIR", "/x")
    with pytest.raises(BuildError, match="TMPDIR=/x is not a writable folder") as exc:
        with child.temp_folder():
            pass
    assert "set TMPDIR" in exc.value.hint


# --- item 14: nothing outlives tuiprof ------------------------------------------------------------

def descendants(pid: int) -> set[int]:
    """Every process below `pid` (by parent links in /proc), whatever session it started."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def stuck_compile(tmp_path: Path, command: str) -> tuple[list[str], Path]:
    """A command whose compiler blocks for ever (its source includes a FIFO by a macro, which no
    check sees), and the TMPDIR it runs with."""
    os.mkfifo(tmp_path / "pipe.h")
    body = '#define HEADER "pipe.h"\n#include HEADER\n'
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    if command == "report":
        src = kernel_file(tmp_path, source=body + PROGRAM.split("int main")[0])
        return ["report", str(src), "--backend", "emu", "--compiler", "nvcc", *RUN], tmp
    (tmp_path / "app.cu").write_text(body + PROGRAM)
    return ["build", "app.cu", "-o", "app"], tmp


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
@pytest.mark.parametrize("command", ["report", "build"])
def test_a_signal_during_a_compile_leaves_no_compiler_and_no_temporaries(tmp_path: Path, sig: int,
                                                                          command: str) -> None:
    # Before: nvcc and cicc (in a session of their own) went on as orphans of init, and
    # tuiprof-build-* stayed in TMPDIR; SIGTERM during `build` left a 13 MB app.tuiprof/.
    args, tmp = stuck_compile(tmp_path, command)
    before = {p.name for p in tmp_path.iterdir()}
    below: set[int] = set()
    p = subprocess.Popen([sys.executable, "-m", "tuiprof", *args], cwd=tmp_path, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)})
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # until the compiler proper (cc1plus or cicc) is reading
            below = descendants(p.pid)
            names = {Path(f"/proc/{c}/comm").read_text().strip() for c in below if alive(c)}
            if names & {"cc1plus", "cicc", "cudafe++"}:
                break
            assert p.poll() is None, p.stderr.read() if p.stderr else ""
            time.sleep(0.1)
        else:
            pytest.fail("the compiler never started")
        p.send_signal(sig)
        assert p.wait(10) == -sig
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(alive(c) for c in below):
            time.sleep(0.1)
        assert not [c for c in below if alive(c)], "compiler processes outlived tuiprof"
        assert list(tmp.iterdir()) == []
        assert {p.name for p in tmp_path.iterdir()} == before  # no staging folder, no app.tuiprof
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for c in below | descendants(p.pid):  # whatever a failure left running
            if alive(c):
                try:
                    os.kill(c, signal.SIGKILL)
                except OSError:
                    pass
