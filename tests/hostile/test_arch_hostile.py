"""Issue 9 items 1, 7 and 8: a trace names only a preset, an arch file is read with a cap, absurd
arch values are refused with their bound, a run that would not fit in memory is refused before it
starts, and an unwritable Numba cache falls back instead of failing every trace."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.support import hostile as H
from tests.support.cli_run import RUN, assert_one_error, tuiprof
from tests.support.factories import make_trace
from tests.support.hostile_run import CAP, assert_clean_error, mknod, run_cli, snapshot
from tuiprof.arch import load_arch
from tuiprof.arch.spec import LIMITS
from tuiprof.errors import ArchError, UsageError
from tuiprof.trace.data import MAX_GRID_CTAS, Provenance
from tuiprof.trace.io import save_trace


def trace_naming(tmp_path: Path, arch: str) -> Path:
    addr = 0x7F0000000000 + np.arange(32, dtype=np.uint64).reshape(1, 32) * 4
    t = make_trace(addr)
    t = replace(t, provenance=Provenance(backend="synthetic", arch=arch))
    return save_trace(t, tmp_path / "named.tptrace")


@pytest.mark.parametrize("named", ["a FIFO", "/dev/zero"])
def test_a_trace_naming_a_file_never_opens_it(tmp_path: Path, named: str) -> None:
    # Before: the trace's provenance.arch was opened as a TOML path: a FIFO blocked forever,
    # /dev/zero grew by 200 MB/s until the OOM killer came.
    if named == "a FIFO":
        named = str(tmp_path / "arch.toml")
        os.mkfifo(named)  # opening it for reading would block: the run must not even try
    path = trace_naming(tmp_path, named)
    before = snapshot(tmp_path)
    run = run_cli(["report", str(path), *RUN], tmp_path, timeout=60)
    assert_clean_error(run, "not a preset")
    assert "--arch" in run.stderr and run.peak_mib < 400 and snapshot(tmp_path) == before


def test_a_trace_naming_a_valid_arch_file_is_still_refused(tmp_path: Path) -> None:
    from tuiprof.arch.presets import PRESET_DIR

    secret = tmp_path / "mine.toml"
    secret.write_text((PRESET_DIR / "v100.toml").read_text())
    assert_one_error(tuiprof("report", str(trace_naming(tmp_path, str(secret))), *RUN), "not a preset")
    # the same file is fine when the user names it on the command line
    r = tuiprof("report", str(trace_naming(tmp_path, str(secret))), *RUN, "--arch", str(secret))
    assert r.returncode == 0, r.stderr


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail (TimeoutError) instead of hanging when the block blocks longer than `seconds` (an
    open() of a FIFO is interrupted by the alarm: PEP 475 lets the handler's exception through)."""
    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"still blocked after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_arch_files_that_never_end_or_are_huge_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "endless"
    os.mkfifo(fifo)
    with deadline(10), pytest.raises(ArchError, match="not a regular file"):
        load_arch(str(fifo))
    huge = tmp_path / "huge.toml"
    huge.write_bytes(b"# " + b"x" * (2 << 20))
    with pytest.raises(ArchError, match="larger than 1 MiB"):
        load_arch(str(huge))


def test_arch_from_a_device_on_the_command_line(tmp_path: Path) -> None:
    # Before: `--arch /dev/zero` read until the memory ran out (a MemoryError traceback at the
    # cap). The device is a zero node made here (as root), never the system's.
    zero = mknod(tmp_path / "zero", 1, 5)
    before = snapshot(tmp_path)
    run = run_cli(["report", "vecadd", *RUN, "--arch", str(zero)], tmp_path, timeout=60)
    assert_clean_error(run, "is a device, not a regular file")
    assert run.peak_mib < 400 and snapshot(tmp_path) == before


@pytest.mark.parametrize("feed", ["an endless pipe", "a 3 MB file"])
def test_arch_from_standard_input(tmp_path: Path, feed: str) -> None:
    # Before: `--arch /dev/stdin` fed by `yes` read forever (MemoryError traceback at the cap);
    # fed a 3 MB file, it said "missing setting 'name'".
    big = tmp_path / "big.toml"
    big.write_bytes(b"# " + b"x" * (3 << 20))
    before = snapshot(tmp_path)
    if feed == "an endless pipe":
        writer = subprocess.Popen(["yes", "x = 1"], stdout=subprocess.PIPE)
        try:
            run = run_cli(["report", "vecadd", *RUN, "--arch", "/dev/stdin"], tmp_path, timeout=60, stdin=writer.stdout)
        finally:
            writer.kill()
            writer.wait()
        assert_clean_error(run, "/dev/stdin is a FIFO (named pipe), not a regular file")
    else:
        with big.open("rb") as fh:
            run = run_cli(["report", "vecadd", *RUN, "--arch", "/dev/stdin"], tmp_path, timeout=60, stdin=fh)
        assert_clean_error(run, "/dev/stdin is larger than 1 MiB")
    assert run.peak_mib < 400 and snapshot(tmp_path) == before


def test_unknown_keys_in_an_arch_file_have_a_hint(tmp_path: Path) -> None:
    from tuiprof.arch.presets import PRESET_DIR

    f = tmp_path / "typo.toml"
    f.write_text((PRESET_DIR / "v100.toml").read_text().replace("[l1]", "[l1]\nsise = 4", 1))
    with pytest.raises(ArchError, match="unknown arch setting 'l1.sise'") as err:
        load_arch(str(f))
    assert err.value.hint.startswith("did you mean l1.size?") and len(err.value.hint) < 100, err.value.hint
    for typo, meant in (("sm_cont", "sm_count"), ("l2.asoc", "l2.assoc"), ("dram.chanels", "dram.channels")):
        with pytest.raises(ArchError) as err:
            load_arch("v100", {typo: "4"})
        assert err.value.hint.startswith(f"did you mean {meant}?"), (typo, err.value.hint)
    with pytest.raises(ArchError) as err:
        load_arch("v100", {"zzzzzz": "4"})
    assert "did you mean" not in err.value.hint and "tuiprof archs --show" in err.value.hint


@pytest.mark.parametrize("override,bound", [
    ("sm_count=1000000", "at most 1024"),
    ("l1.size=1GiB", "at most 16 MiB"),
    ("l1.size=9223372036854775808", "at most 16 MiB"),
    ("l2.size=6GiB", "at most 1 GiB"),
    ("dram.channels=1000000000", "at most 1024"),
    ("l2.assoc=100000", "at most 1024"),
])
def test_absurd_values_are_refused_with_their_bound(override: str, bound: str) -> None:
    with pytest.raises(ArchError, match=bound):
        load_arch("v100", {override.split("=")[0]: override.split("=")[1]})


@pytest.mark.parametrize("where", ["--set", "an arch file"])
def test_absurd_value_on_the_command_line_is_quick_and_bounded(tmp_path: Path, where: str) -> None:
    from tuiprof.arch.presets import PRESET_DIR

    if where == "--set":
        args = ["--set", "sm_count=1000000"]
    else:
        toml = tmp_path / "huge.toml"
        toml.write_text(re.sub(r"(?m)^sm_count = .*$", "sm_count = 1000000", (PRESET_DIR / "v100.toml").read_text()))
        args = ["--arch", str(toml)]
    before = snapshot(tmp_path)
    run = run_cli(["report", "vecadd", *RUN, *args], tmp_path, timeout=60)
    assert_clean_error(run, "sm_count", "at most 1024")
    assert run.peak_mib < 400 and snapshot(tmp_path) == before


def test_every_preset_is_within_the_limits() -> None:
    from tuiprof.arch import preset_names

    for name in preset_names():
        load_arch(name)  # validation includes the limits
    assert LIMITS["l2.size"] >= 50 << 20  # the H100's 50 MiB L2 stays possible


@pytest.mark.parametrize("case", ["what-if", "grid"])
def test_a_run_that_would_not_fit_is_refused_before_it_starts(tmp_path: Path, case: str) -> None:
    """Under an address-space limit (the budget is half of it): a 1 GiB L2 of 32-byte lines (32 Mi
    lines per trial thread; 820-880 MiB measured) under 1 GiB, and a small trace with per-CTA
    records for 2^24 CTAs (the SM-utilisation model's per-CTA arrays: 1.3 GB measured) under
    1.5 GiB. Before: the limit was ignored and the runs went ahead, into a MemoryError
    ("simulation failed ... this is a tuiprof bug"; the what-if, depending on when its trials'
    allocations met, sometimes fit). (A grid of 2^24 CTAs without records costs nothing since
    issue 21: `test_trace_write.test_declared_ctas_without_accesses_cost_nothing`.)"""
    if case == "grid":
        t = H.TraceFile()
        t.header["launch"]["grid"] = [MAX_GRID_CTAS, 1, 1]
        for name in [k for k in t.arrays if k.startswith("cta_")]:
            del t.arrays[name], t.header["arrays"][name]
        t.set_array("cta_insts", np.zeros(MAX_GRID_CTAS, np.int8))
        args = [str(t.save(tmp_path / "grid.tptrace"))]
    else:
        args = ["vecadd", "--arch", "v100", "--set", "l2.size=1GiB", "--set", "l2.line=32", "--set", "l2.assoc=16"]
    before = snapshot(tmp_path)
    run = run_cli(["report", *args, *RUN], tmp_path, timeout=60, cap=CAP if case == "grid" else 1 << 30)
    line = assert_clean_error(run, "would need about", "half the process's memory limit, ulimit -v)")
    assert ("16,777,216 CTAs" in line) == (case == "grid"), line
    assert run.peak_mib < 400 and snapshot(tmp_path) == before


def test_the_estimate_is_not_wildly_pessimistic(monkeypatch: pytest.MonkeyPatch) -> None:
    """A what-if that runs in about 200 MB (measured: stencil7 on 1024 SMs of 16 MiB L1s; the
    replay kernel holds one SM's L1 at a time) fits a 1 GiB budget. Before: estimated at 16.1 GiB
    and refused even on a 23 GiB machine."""
    from tuiprof.resources import MemoryBudget, data_dir
    from tuiprof.sim import budget
    from tuiprof.trace.io import load_trace

    trace = load_trace(data_dir("demo_traces") / "stencil7.tptrace")
    arch = load_arch("v100", {"sm_count": "1024", "l1.size": "16MiB"})
    monkeypatch.setattr(budget, "memory_budget", lambda: MemoryBudget(1 << 30, "a test's memory"))
    budget.check_run_memory(arch, trace, 4)
    monkeypatch.setattr(budget, "memory_budget", lambda: MemoryBudget(128 << 20, "a test's memory"))
    with pytest.raises(UsageError, match=r"would need about 2\d\d MiB \(65,024 warp accesses, 4 trial thread\(s\)\), "
                                         r"more than the 128 MiB budget \(half a test's memory\)"):
        budget.check_run_memory(arch, trace, 4)


def test_the_estimate_follows_the_replay_kernel() -> None:
    """The estimate holds one SM's L1 when the replay kernel does (it cannot import the kernel:
    that would import Numba on the light path)."""
    from tuiprof.sim import budget, replay

    assert budget.L1_BY_SM_LINES == replay.L1_BY_SM_LINES


def test_unwritable_numba_cache_falls_back_to_a_temp_folder(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {"NUMBA_CACHE_DIR": str(blocker / "numba"), "XDG_CACHE_HOME": str(blocker), "TMPDIR": str(scratch)}
    code = "from tuiprof import jit; print(jit.kernel_cache_dir(), jit.KERNEL['cache'])"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **env}, timeout=120)
    assert r.returncode == 0, r.stderr
    folder, cached = r.stdout.split()
    assert Path(folder).is_relative_to(scratch) and cached == "True"
    assert "not writable" in r.stderr


def test_nothing_writable_means_uncached_kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import tempfile

    from tuiprof import jit

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(blocker / "numba"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(blocker))
    assert jit._choose_cache_dir() is None
    assert "compiles them again" in capsys.readouterr().err
