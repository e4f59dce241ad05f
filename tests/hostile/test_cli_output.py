"""Issue 9 items 3 and 6: writing an output never damages a file, and every failure to write or
to name a target is one `error:` line, exit 2, no traceback.

Every path here lives under the test's own tmp_path: device nodes are made there with mknod (as
root; skipped otherwise), never pointed at the system's /dev."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tests.support import hostile as H
from tests.support.cli_run import RUN, assert_one_error, tuiprof
from tests.support.factories import make_trace
from tests.support.hostile_run import PRELUDE_THEN_MAIN, ROOT, SLOW_WRITE, mknod
from tuiprof.errors import OutputError
from tuiprof.output import write_bytes_to, write_output
from tuiprof.trace.io import load_trace, save_trace


@pytest.fixture()
def trace_file(tmp_path: Path) -> Path:
    addr = 0x7F0000000000 + np.arange(4 * 32, dtype=np.uint64).reshape(4, 32) * 4
    return save_trace(make_trace(addr, ops=[0, 1, 0, 1], kinds=("load", "store")), tmp_path / "k.tptrace")


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_new_file_honours_the_umask(tmp_path: Path, trace_file: Path) -> None:
    out = tmp_path / "r.txt"
    r = tuiprof("report", str(trace_file), *RUN, "-o", str(out), preexec=lambda: os.umask(0o027))
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert out.read_text().startswith("tuiprof ")
    assert not _leftovers(tmp_path)


def test_replacing_a_file_keeps_its_mode(tmp_path: Path) -> None:
    out = tmp_path / "r.txt"
    out.write_text("old")
    out.chmod(0o604)
    write_output("new", str(out))
    assert out.read_text() == "new\n" and stat.S_IMODE(out.stat().st_mode) == 0o604


def test_a_symlink_is_followed_not_replaced(tmp_path: Path) -> None:
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    write_output("new", str(link))
    assert link.is_symlink() and target.read_text() == "new\n"


def test_a_fifo_is_written_through(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_output("through the pipe", str(fifo))
    reader.join(10)
    assert got == [b"through the pipe\n"]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_null_device_is_written_through_and_stays_a_device(tmp_path: Path, trace_file: Path) -> None:
    null = mknod(tmp_path / "null", 1, 3)
    r = tuiprof("report", str(trace_file), *RUN, "-o", str(null))
    assert r.returncode == 0, r.stderr
    st = null.lstat()
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert not _leftovers(tmp_path)


def test_a_full_device_is_one_error_and_stays_a_device(tmp_path: Path, trace_file: Path) -> None:
    full = mknod(tmp_path / "full", 1, 7)
    r = tuiprof("report", str(trace_file), *RUN, "-o", str(full))
    assert_one_error(r, "No space left")
    assert stat.S_ISCHR(full.lstat().st_mode)


def test_stdout_on_a_full_device_is_one_error(tmp_path: Path, trace_file: Path) -> None:
    full = mknod(tmp_path / "full", 1, 7)
    with full.open("wb") as fh:
        r = tuiprof("report", str(trace_file), *RUN, stdout=fh)
    assert_one_error(r, "standard output", "No space left")


def test_stdout_closed_is_one_error(trace_file: Path) -> None:
    r = tuiprof("report", str(trace_file), *RUN, preexec=lambda: os.close(1), stdout=None)
    assert_one_error(r, "standard output is closed")


def test_stderr_closed_sends_nothing_to_stdout(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "tuiprof", "report", str(tmp_path / "missing.tptrace")],
                       stdout=subprocess.PIPE, stderr=None, preexec_fn=lambda: os.close(2), timeout=120)
    assert r.returncode == 2 and r.stdout == b""


def test_the_input_is_never_overwritten(tmp_path: Path, trace_file: Path) -> None:
    before = trace_file.read_bytes()
    r = tuiprof("report", str(trace_file), *RUN, "-o", str(trace_file))
    assert_one_error(r, "the input being read")
    assert trace_file.read_bytes() == before
    link = tmp_path / "alias.txt"
    link.symlink_to(trace_file)
    assert_one_error(tuiprof("report", str(trace_file), *RUN, "-o", str(link)), "the input being read")
    assert trace_file.read_bytes() == before


@pytest.mark.parametrize("command", ["report", "record"])
def test_no_input_is_ever_overwritten_and_refused_before_any_work(tmp_path: Path, command: str) -> None:
    """`-o` naming an --arch file, the launch script found beside a .cu source or one given with
    --launch is refused before anything is compiled or simulated (the source here would not even
    compile), and every file stays as it was."""
    from tuiprof.arch.presets import PRESET_DIR

    source, beside, given, arch = (tmp_path / "k.cu", tmp_path / "k_launch.py", tmp_path / "other.py",
                                   tmp_path / "gpu.toml")
    source.write_text("this is not CUDA\n")
    beside.write_text("def setup(dev):\n    pass\n")
    given.write_text("def setup(dev):\n    pass\n")
    arch.write_text((PRESET_DIR / "v100.toml").read_text())
    before = {p: p.read_bytes() for p in (source, beside, given, arch)}
    cases = [(["--arch", str(arch)], arch), ([], beside), (["--launch", str(given)], given)]
    for extra, victim in cases:
        r = tuiprof(command, str(source), *extra, "-o", str(victim), cwd=tmp_path)
        assert_one_error(r, f"{victim} is the input being read")
        assert {p: p.read_bytes() for p in before} == before
    if command == "report":  # a recorded trace with an arch file: the same (before: overwritten)
        start = time.monotonic()
        r = tuiprof("report", "vecadd", *RUN, "--arch", str(arch), "-o", str(arch), cwd=tmp_path)
        assert_one_error(r, "gpu.toml is the input being read")
        assert arch.read_bytes() == before[arch] and time.monotonic() - start < 60
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in before)


def test_a_read_only_file_is_not_replaced(tmp_path: Path) -> None:
    out = tmp_path / "ro.txt"
    out.write_text("keep me")
    out.chmod(0o444)
    with pytest.raises(OutputError, match="read-only"):
        write_output("new", str(out))
    assert out.read_text() == "keep me" and stat.S_IMODE(out.stat().st_mode) == 0o444


def test_a_missing_folder_with_a_slash_makes_no_file(tmp_path: Path, trace_file: Path) -> None:
    r = tuiprof("report", str(trace_file), *RUN, "-o", "newdir/", cwd=tmp_path)
    assert_one_error(r, "folder does not exist")
    assert not (tmp_path / "newdir").exists()


def test_dash_is_standard_output(tmp_path: Path, trace_file: Path) -> None:
    r = tuiprof("report", str(trace_file), *RUN, "-o", "-", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith(b"tuiprof ")
    assert not (tmp_path / "-").exists()


def test_record_to_standard_output(tmp_path: Path) -> None:
    # Before: `record -o -` (save_trace to "-") made a file named "-".
    code = ("import sys; from tuiprof.trace.io import load_trace, save_trace\n"
            "save_trace(load_trace(sys.argv[1]), '-')\n")
    r = subprocess.run([sys.executable, "-c", code, str(H.BASE)], cwd=tmp_path, capture_output=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "piped.tptrace").write_bytes(r.stdout)
    assert load_trace(tmp_path / "piped.tptrace").n_accesses == load_trace(H.BASE).n_accesses


def test_record_to_a_terminal_is_refused_before_any_work(tmp_path: Path) -> None:
    """A zip on a terminal is garbage: refused before the source is even compiled (it would
    not compile here)."""
    import pty

    source = tmp_path / "k.cu"
    source.write_text("this is not CUDA\n")
    leader, follower = pty.openpty()
    try:
        r = tuiprof("record", str(source), "-o", "-", cwd=tmp_path, stdout=follower)
    finally:
        os.close(follower)
        os.close(leader)
    assert_one_error(r, "standard output is a terminal", "-o trace.tptrace")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.cu"]


def test_an_interrupted_write_leaves_no_temp_file(tmp_path: Path) -> None:
    out = tmp_path / "r.txt"
    out.write_text("old")

    def boom(fh) -> None:  # noqa: ANN001
        fh.write(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_bytes_to(str(out), boom)
    assert out.read_text() == "old" and not _leftovers(tmp_path)


def test_sigterm_during_a_write_leaves_no_temp_file(tmp_path: Path) -> None:
    code = ("import sys, time; import tuiprof.cli.main as cli; from tuiprof.output import write_bytes_to\n"
            "import signal; signal.signal(signal.SIGTERM, cli._terminate)\n"
            "def slow(fh):\n    fh.write(b'half'); print('writing', flush=True); time.sleep(60)\n"
            f"write_bytes_to({str(tmp_path / 'r.txt')!r}, slow)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert p.stdout is not None and p.stdout.readline() == b"writing\n"
    p.send_signal(signal.SIGTERM)
    assert p.wait(10) == -signal.SIGTERM
    assert not _leftovers(tmp_path) and not (tmp_path / "r.txt").exists()



@pytest.mark.usefixtures("warm_numba")
@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_the_command_line_leaves_no_temp_file_on_hangup_or_terminate(tmp_path: Path, sig: int) -> None:
    # Before: SIGHUP (the terminal closed) kept its default and left `.tuiprof-*.tmp` behind.
    out = tmp_path / "r.txt"
    p = subprocess.Popen([sys.executable, "-c", SLOW_WRITE + PRELUDE_THEN_MAIN, "report", "vecadd", *RUN, "-o", str(out)],
                         cwd=tmp_path, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.stdout is not None and p.stdout.readline() == b"writing\n"
    assert _leftovers(tmp_path)                       # the temp file exists while it is written
    p.send_signal(sig)
    assert p.wait(10) == -sig
    assert not _leftovers(tmp_path) and not out.exists()


EXPORT_THREAD = """
import sys, threading, time
from tuiprof.output import write_bytes_to

def half_then_wait(fh):
    fh.write(b"half a report")
    fh.flush()
    print("writing", flush=True)
    time.sleep(60)

def export():  # as the UI's export does: write_bytes_to on a daemon thread
    threading.Thread(target=write_bytes_to, args=(sys.argv[1], half_then_wait), daemon=True).start()
"""
UI_SIGNALLED = EXPORT_THREAD + """
from tuiprof.tui.signals import SignalExit

with SignalExit(lambda signum: False, grace=0.2):  # as when the app cannot close itself in time
    export()
    time.sleep(60)
"""
UI_QUIT = EXPORT_THREAD + """
export()
time.sleep(1)  # then the app quits (q) while the export still writes
"""


def export_run(tmp_path: Path, code: str) -> tuple[subprocess.Popen[bytes], Path]:
    out = tmp_path / "r.txt"
    p = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.stdout is not None and p.stdout.readline() == b"writing\n"
    assert _leftovers(tmp_path)
    return p, out


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_a_ui_export_leaves_no_temp_file(tmp_path: Path, sig: int, status: int) -> None:
    # Before: the UI's signal exit (os._exit) skipped the export thread's cleanup.
    p, out = export_run(tmp_path, UI_SIGNALLED)
    p.send_signal(sig)
    assert p.wait(10) == status
    assert not _leftovers(tmp_path) and not out.exists()


def test_quitting_during_a_ui_export_leaves_no_temp_file(tmp_path: Path) -> None:
    # Before: the daemon thread died at the interpreter's exit, its `finally` never ran.
    p, out = export_run(tmp_path, UI_QUIT)
    assert p.wait(30) == 0
    assert not _leftovers(tmp_path) and not out.exists()


def test_names_too_long_are_one_error(tmp_path: Path, trace_file: Path) -> None:
    assert_one_error(tuiprof("report", str(trace_file), *RUN, "-o", str(tmp_path / ("o" * 300))), "longer than 255")
    assert_one_error(tuiprof("report", "x" * 5000), "too long")
    assert_one_error(tuiprof("x" * 5000), "too long")
    assert not _leftovers(tmp_path)


def test_a_non_utf8_output_name_is_written(tmp_path: Path, trace_file: Path) -> None:
    name = os.fsencode(str(tmp_path)) + b"/r\xff\xfe.txt"
    r = tuiprof("report", str(trace_file), *RUN, "-o", name)
    assert r.returncode == 0, r.stderr
    assert os.path.exists(name) and not _leftovers(tmp_path)


def test_ascii_terminal_with_a_non_ascii_trace(tmp_path: Path) -> None:
    addr = 0x7F0000000000 + np.arange(32, dtype=np.uint64).reshape(1, 32) * 4
    t = make_trace(addr)
    from dataclasses import replace

    from tuiprof.trace.data import SourceFile

    t = replace(t, sources=(SourceFile("k.cu", "// größe ≤ 4 µs\n" + t.sources[0].text),))
    path = save_trace(t, tmp_path / "ü.tptrace")
    r = tuiprof("report", str(path), *RUN, env={"PYTHONIOENCODING": "ascii"})
    assert r.returncode == 0, r.stderr
    assert b"Traceback" not in r.stderr


def test_sigterm_ends_a_report_run_quickly(trace_file: Path) -> None:
    p = subprocess.Popen([sys.executable, "-m", "tuiprof", "report", "spmv-u", "--tolerance", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(3)
    p.send_signal(signal.SIGTERM)
    assert p.wait(10) == -signal.SIGTERM
