"""Issue 21 items 2 and 15 and the output half of the minor list: the `-o` rules of report and
record (never an input, never a read-only file, devices and FIFOs written through or refused,
checked before any work, never a half-written file) hold for `build` and every command that
writes; a killed writer's temp file is cleaned up later, safely.

Device nodes are made in the test's own folder (as root; skipped otherwise), never /dev's, and
no test lets tuiprof write to one: each is refused before anything runs."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.hostile_run import (
    PRELUDE_THEN_MAIN,
    PROGRAM,
    ROOT,
    SLOW_WRITE,
    assert_clean_error,
    kernel_file,
    mknod,
    read_only_mount,
    run_cli,
    snapshot,
)

RUN = ("--trials", "2", "--no-sweep")


def program(folder: Path) -> Path:
    path = folder / "app.cu"
    path.write_text(PROGRAM)
    return path


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith(".run."))


# --- build -o ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["the source", "a read-only file", "a device", "a FIFO", "a directory"])
def test_build_refuses_an_output_it_must_not_write(tmp_path: Path, case: str) -> None:
    # Before: `build app.cu -o app.cu` replaced the source with the binary; a read-only file was
    # replaced; a device "built" nothing beside it; a directory said "please report it".
    src = program(tmp_path)
    out = {"the source": src, "a read-only file": tmp_path / "ro", "a device": tmp_path / "null",
           "a FIFO": tmp_path / "fifo", "a directory": tmp_path / "dir"}[case]
    if case == "a read-only file":
        out.write_text("keep me")
        out.chmod(0o444)
    elif case == "a device":
        mknod(out, 1, 3)
    elif case == "a FIFO":
        os.mkfifo(out)
    elif case == "a directory":
        out.mkdir()
    needle = {"the source": "is the input being read", "a read-only file": "is read-only",
              "a device": "is a device; a program must be a regular file",
              "a FIFO": "is a FIFO (named pipe); a program must be a regular file",
              "a directory": "is a directory"}[case]
    before, listing = snapshot(tmp_path), names(tmp_path)
    run = run_cli(["build", "app.cu", "-o", out.name], tmp_path, timeout=120)
    assert_clean_error(run, needle)
    assert run.seconds < 20 and snapshot(tmp_path) == before and names(tmp_path) == listing
    if case == "a device":
        assert stat.S_ISCHR(os.lstat(out).st_mode)


@pytest.mark.parametrize("case", ["a file", "a symlink", "a dangling symlink", "a folder of the user's"])
def test_build_never_removes_what_sits_at_its_metadata_folder(tmp_path: Path, case: str) -> None:
    # Before: a file or a symlink there gave a traceback; a folder there was removed with all it held.
    program(tmp_path)
    meta = tmp_path / "app.instr.tuiprof"
    if case == "a file":
        meta.write_text("notes")
    elif case == "a symlink":
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "elsewhere" / "keep.txt").write_text("keep")
        meta.symlink_to(tmp_path / "elsewhere")
    elif case == "a dangling symlink":
        meta.symlink_to(tmp_path / "nowhere")
    else:
        meta.mkdir()
        (meta / "thesis.tex").write_text("years of work")
    before, listing = snapshot(tmp_path), names(tmp_path)
    run = run_cli(["build", "app.cu", "-o", "app.instr"], tmp_path, timeout=120)
    assert_clean_error(run, "app.instr.tuiprof, where tuiprof keeps the program's metadata")
    assert snapshot(tmp_path) == before and names(tmp_path) == listing


def test_build_into_a_read_only_folder_is_refused_first(tmp_path: Path) -> None:
    # Before: a traceback (PermissionError at mkdir) once nvcc had been found.
    program(tmp_path)
    ro = tmp_path / "ro"
    ro.mkdir()
    wrap = read_only_mount(ro)
    before = snapshot(tmp_path)
    run = run_cli(["build", "app.cu", "-o", "ro/app"], tmp_path, timeout=120, wrap=wrap)
    assert_clean_error(run, "the folder", "is not writable")
    assert run.seconds < 20 and snapshot(tmp_path) == before


def test_build_replaces_its_own_output_whole(tmp_path: Path) -> None:
    """A build over an earlier one replaces the binary and its metadata folder; a failed build
    leaves the earlier ones as they were, and no staging folder either way."""
    program(tmp_path)
    assert run_cli(["build", "app.cu", "-o", "app.instr"], tmp_path, timeout=300).code == 0
    (tmp_path / "app.instr.tuiprof" / "stale").write_text("from before")
    run = run_cli(["build", "app.cu", "-o", "app.instr"], tmp_path, timeout=300)
    assert run.code == 0, run.stderr
    assert not (tmp_path / "app.instr.tuiprof" / "stale").exists()
    assert names(tmp_path) == ["app.cu", "app.instr", "app.instr.tuiprof"]
    before = snapshot(tmp_path)
    (tmp_path / "bad.cu").write_text("this is not CUDA\nint main() { return 0; }\n")
    run = run_cli(["build", "bad.cu", "-o", "app.instr"], tmp_path, timeout=300)
    assert run.code == 2 and "Traceback" not in run.stderr
    assert {k: v for k, v in snapshot(tmp_path).items() if k != "bad.cu"} == before
    assert names(tmp_path) == ["app.cu", "app.instr", "app.instr.tuiprof", "bad.cu"]


# --- the other commands -----------------------------------------------------------------------------

def test_init_checks_its_output_before_compiling(tmp_path: Path) -> None:
    # Before: a read-only -o was refused only after the compile (here: after a compile error).
    src = tmp_path / "k.cu"
    src.write_text("this is not CUDA\n")
    out = tmp_path / "ro.py"
    out.write_text("keep")
    out.chmod(0o444)
    before = snapshot(tmp_path)
    run = run_cli(["init", str(src), "-o", str(out), "--force"], tmp_path, timeout=60)
    assert_clean_error(run, "ro.py is read-only")
    assert snapshot(tmp_path) == before


def test_record_into_a_read_only_folder_is_refused_before_any_work(tmp_path: Path) -> None:
    # Before: refused only after the whole run (here the source does not even compile, and the
    # compile error came first).
    src = tmp_path / "k.cu"
    src.write_text("this is not CUDA\n")
    ro = tmp_path / "ro"
    ro.mkdir()
    wrap = read_only_mount(ro)
    before = snapshot(tmp_path)
    run = run_cli(["record", str(src), "-o", str(ro / "t.tptrace")], tmp_path, timeout=60, wrap=wrap)
    assert_clean_error(run, f"the folder {ro} is not writable")
    assert snapshot(tmp_path) == before


@pytest.mark.usefixtures("warm_numba")
def test_a_fifo_nobody_reads_is_refused_not_waited_for(tmp_path: Path) -> None:
    # Before: `report -o FIFO` with no reader blocked for ever once the run was done.
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    run = run_cli(["report", "vecadd", *RUN, "-o", str(fifo)], tmp_path, timeout=90)
    assert_clean_error(run, "no process is reading this FIFO")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.usefixtures("warm_numba")
def test_a_fifo_with_a_reader_is_written_through(tmp_path: Path) -> None:
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    run = run_cli(["report", "vecadd", *RUN, "-o", str(fifo)], tmp_path, timeout=90)
    out, _ = reader.communicate(timeout=30)
    assert run.code == 0, run.stderr
    assert out.startswith(b"tuiprof ") and stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.usefixtures("warm_emulator")
def test_a_trace_cut_by_its_reader_is_an_error(tmp_path: Path) -> None:
    # Before: `record -o - | head -c 100` exited 0: a cut trace, reported as success. (A trace
    # that fits the pipe's buffer, 64 KiB, may be written whole before its reader goes, and then
    # nothing can tell: this one is 170 KB.)
    src = kernel_file(tmp_path, grid="(8192, 1, 1)", source=(
        "__global__ void add(float *a, int n)\n{\n    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    a[(i * 2654435761u) & 65535u] += 1.0f;\n    a[(i * 40503u + 7u) & 65535u] += (float)n;\n}\n"))
    (tmp_path / "k_launch.py").write_text((tmp_path / "k_launch.py").read_text().replace("np.zeros(256,", "np.zeros(65536,"))
    p = subprocess.Popen([sys.executable, "-m", "tuiprof", "record", str(src), "-o", "-", "--backend", "emu"],
                         cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.stdout is not None and p.stderr is not None
    head = p.stdout.read(100)
    p.stdout.close()
    err = p.stderr.read().decode(errors="replace")
    assert p.wait(120) == 2, err
    assert len(head) == 100 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[-2].startswith("error: standard output was closed before the whole file was written")
    assert lines[-1].startswith("hint: ")


@pytest.mark.usefixtures("warm_emulator")
def test_the_success_line_escapes_the_output_name(tmp_path: Path) -> None:
    # Before: `recorded ... into t<ESC>[2J.tptrace` reached the terminal raw.
    src = kernel_file(tmp_path)
    run = run_cli(["record", str(src), "-o", "t\x1b[2J.tptrace", "--backend", "emu"], tmp_path, timeout=120)
    assert run.code == 0, run.stderr
    assert "\x1b" not in run.stderr and "t\\x1b[2J.tptrace" in run.stderr



@pytest.mark.usefixtures("warm_numba")
def test_a_temp_file_left_by_sigkill_is_removed_by_a_later_write(tmp_path: Path) -> None:
    # Before: SIGKILL in the write window left `.tuiprof-*.tmp` for ever.
    out = tmp_path / "r.txt"
    p = subprocess.Popen([sys.executable, "-c", SLOW_WRITE + PRELUDE_THEN_MAIN, "report", "vecadd", *RUN, "-o", str(out)],
                         cwd=tmp_path, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.stdout is not None and p.stdout.readline() == b"writing\n"
    p.send_signal(signal.SIGKILL)
    assert p.wait(10) == -signal.SIGKILL
    left = [q for q in tmp_path.iterdir() if q.name.endswith(".tmp")]
    assert len(left) == 1
    fresh = tmp_path / f".tuiprof-{2**22 + 7}-young.tmp"   # a dead writer's, but recent: kept
    live = tmp_path / f".tuiprof-{os.getpid()}-live.tmp"     # a live process's, however old: kept
    other = tmp_path / ".tuiprof-notes.tmp"                 # not our pattern: kept
    for q in (fresh, live, other):
        q.write_text("x")
    old = time.time() - 3600
    for q in (left[0], live, other):
        os.utime(q, (old, old))
    run = run_cli(["report", "vecadd", *RUN, "-o", str(out)], tmp_path, timeout=90)
    assert run.code == 0, run.stderr
    assert not left[0].exists() and fresh.exists() and live.exists() and other.exists()
