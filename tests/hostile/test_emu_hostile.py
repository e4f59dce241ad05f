"""Hostile kernels, launch scripts and faults on the emulator's path (issue 21 items 5, 7, 8, 10,
11, 12 and brkpt): each CLI case runs `tuiprof report KERNEL.cu --launch SCRIPT` in a child under
a memory cap and must end in exit 2 with one `error:` line and a `hint:`, no traceback, bounded
memory and nothing changed in its folder; the Numba cache cases run on a copy of the warm cache
under the test's own folder, never on the user's."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.hostile_kernels import FULL_DISK, KERNELS, SPIN, TOUCH, script_text
from tests.support.hostile_run import CAP, ROOT, Run, run_cli, snapshot
from tests.support.ptx_support import require_compiler

RUN = ("--trials", "2", "--no-sweep")
SLOW = pytest.mark.slow


def line_of(needle: str) -> int:
    return next(i + 1 for i, line in enumerate(KERNELS.splitlines()) if needle in line)


def kernel_cache() -> Path:
    """The compiled kernels' folder this tree uses (warmed by `warm_emulator`)."""
    from tuiprof.jit import kernel_cache_dir

    folder = kernel_cache_dir()
    if folder is None:
        pytest.skip("no writable folder for compiled kernels")
    return folder


def child_env(tmp_path: Path, numba: Path | None = None) -> dict[str, str]:
    """A child's caches: builds under the test's folder, compiled kernels in `numba` (default: the warm folder)."""
    return {"XDG_CACHE_HOME": str(tmp_path / "cache"), "NUMBA_CACHE_DIR": str(numba or kernel_cache())}


def emulate(tmp_path: Path, setup_body: str, *args: str, top: str = "", cap: int = CAP, timeout: float = 120.0,
            command: str = "report") -> tuple[Run, Path]:
    """`tuiprof report k.cu --launch s.py ARGS` (KERNELS, and a script whose setup(dev) is
    `setup_body`) in a folder of its own, asserting that nothing in that folder changed."""
    require_compiler()
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "k.cu").write_text(KERNELS)
    (work / "s.py").write_text(script_text(setup_body, top))
    before = snapshot(work)
    extra = RUN if command == "report" else ()
    run = run_cli([command, "k.cu", "--launch", "s.py", *extra, *args], work, cap=cap, timeout=timeout,
                  env=child_env(tmp_path))
    assert snapshot(work) == before
    return run, work


def assert_one_error(run: Run, *needles: str) -> str:
    """Exit 2, nothing on stdout, no traceback of tuiprof's, exactly one `error:` line followed by
    its `hint:` (a launch script's error adds the script's own frames after the hint). Returns the
    error line."""
    lines = run.stderr.strip().splitlines()
    assert run.code == 2, (run.code, run.stderr[-3000:])
    assert "Traceback (most recent call last)" not in run.stderr, run.stderr[-3000:]
    errors = [i for i, ln in enumerate(lines) if ln.startswith("error: ")]
    assert len(errors) == 1 and errors[0] + 1 < len(lines) and lines[errors[0] + 1].startswith("hint: "), run.stderr
    assert sum(ln.startswith("hint: ") for ln in lines) == 1, run.stderr
    assert run.stdout == b""
    for needle in needles:
        assert needle in lines[errors[0]], (needle, lines[errors[0]])
    return lines[errors[0]]


@pytest.fixture(scope="module")
def warm_emulator(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One uncapped emulated run, so that capped runs never compile the emulator's and the
    simulator's kernels (compiling takes more address space than running)."""
    run, _ = emulate(tmp_path_factory.mktemp("warm-emu"), TOUCH.format(grid=32), cap=resource.RLIM_INFINITY,
                     timeout=900)
    assert run.code == 0, run.stderr[-3000:]


# ---------------------------------------------------------------- items 5 and 7: runaway kernels

def test_a_runaway_loop_with_a_load_is_bounded_and_named(tmp_path: Path, warm_emulator: None) -> None:
    # Before: every iteration's load was kept until the step limit: 12M steps took 1.8 GB (the
    # default 2^26, 6.5 GB), and under the cap it ended as "launch script raised MemoryError".
    run, _ = emulate(tmp_path, SPIN, "--step-limit", "12000000")
    assert_one_error(run, "ran more than 12,000,000 warp instructions", "runaway", f"k.cu:{line_of('// SPIN')}")
    assert run.peak_mib < 800, run.peak_mib


@pytest.mark.slow
def test_a_runaway_loop_at_the_default_step_limit(tmp_path: Path, warm_emulator: None) -> None:
    run, _ = emulate(tmp_path, SPIN, timeout=300)
    assert_one_error(run, "ran more than 67,108,864 warp instructions", f"k.cu:{line_of('// SPIN')}")
    assert run.peak_mib < 800, run.peak_mib


def test_a_runaway_grid_stops_at_its_first_cta(tmp_path: Path, warm_emulator: None) -> None:
    # Before: each of the 1,023 batches ran its first CTA to the step limit (about 3 minutes
    # here; 9 minutes for 4,096 CTAs at the default limit, hours for 64K).
    body = "a = dev.zeros(33, np.int32)\nout = dev.zeros(65535 * 32, np.int32)\ndev.launch('runaway', 65535, 32, (a, out))"
    run, _ = emulate(tmp_path, body, "--step-limit", "1000000", timeout=60)
    assert_one_error(run, "ran more than 1,000,000 warp instructions in CTA (0,0,0)", f"k.cu:{line_of('// RUNAWAY')}")
    assert run.seconds < 60 and run.peak_mib < 800


def test_a_snapshot_too_large_to_keep_is_a_tuiprof_limit(tmp_path: Path, warm_emulator: None) -> None:
    """A finite kernel whose snapshot makes more warp accesses than the memory budget can keep
    (1,000,001 here; about 740,000 fit half the cap) is refused as tuiprof's limit once it ran."""
    body = ("a = dev.zeros(32, np.int32)\nout = dev.zeros(32, np.int32)\n"
            "dev.launch('many', 1, 32, (a, out, np.int32(1000000)))")
    run, _ = emulate(tmp_path, body)
    assert_one_error(run, "made 1,000,001 warp accesses; the emulator keeps at most", "(a tuiprof limit)")
    assert run.peak_mib < 800, run.peak_mib


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """KERNELS compiled to PTX and parsed once: (module, source path, source text)."""
    from tests.support.emu_support import Compiler

    require_compiler()
    folder = tmp_path_factory.mktemp("emu-hostile-ptx")
    (folder / "k.cu").write_text(KERNELS)
    return Compiler(folder).file(folder / "k.cu")


def _device(kernels: tuple, threads: int, **options: object):  # noqa: ANN202
    from tuiprof.collect.emu.device import EmuDevice, RecordChoice

    module, src, text = kernels
    return EmuDevice(module, src, text, record=RecordChoice(), threads=threads, **options)


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_the_record_budget_is_exact_whatever_the_threads(kernels: tuple, monkeypatch: pytest.MonkeyPatch,
                                                         threads: int) -> None:
    """The snapshot's warp accesses are counted across worker threads without losing one: 64 CTAs
    of 3 loads and a store make 256, kept in full under a budget of 256 and refused under 255."""
    import numpy as np

    import tuiprof.collect.emu.run as run_mod
    from tuiprof.collect.emu.run import EmulationError

    def launch() -> object:
        dev = _device(kernels, threads)
        a, out = dev.to_device(np.arange(32, dtype=np.int32)), dev.zeros(64 * 32, np.int32)
        dev.launch("many", 64, 32, (a, out, np.int32(3)))
        return dev.recorded

    free = launch()
    assert free.op.shape[0] == 256
    monkeypatch.setattr(run_mod, "record_limit", lambda: 256)
    kept = launch()
    assert np.array_equal(kept.op, free.op) and np.array_equal(kept.addr, free.addr)
    monkeypatch.setattr(run_mod, "record_limit", lambda: 255)
    with pytest.raises(EmulationError, match=r"\(64 CTAs\) made 256 warp accesses; the emulator keeps at most 255"):
        launch()


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_the_first_failing_cta_is_reported_whatever_the_threads(kernels: tuple, threads: int) -> None:
    """Every CTA runs away: the error names CTA 0, as a serial run would, however the batches ran."""
    import numpy as np

    from tuiprof.collect.emu.run import EmulationError

    dev = _device(kernels, threads, step_limit=20_000)
    a, out = dev.zeros(33, np.int32), dev.zeros(256 * 32, np.int32)
    with pytest.raises(EmulationError, match=r"ran more than 20,000 warp instructions in CTA \(0,0,0\)"):
        dev.launch("runaway", 256, 32, (a, out))


# ---------------------------------------------------------------- item 8: huge grids

@pytest.mark.parametrize("grid", ["2**31 - 1", pytest.param("(2**31 - 1, 65535, 65535)", marks=pytest.mark.slow)])
def test_a_huge_legal_grid_is_a_tuiprof_limit(tmp_path: Path, warm_emulator: None, grid: str) -> None:
    # Before: "launch script raised MemoryError ... Unable to allocate 16.0 GiB" (2^31-1), a
    # ValueError traceback (the 3-d grid), or 21 GB and the OOM killer without a cap.
    run, _ = emulate(tmp_path, TOUCH.format(grid=grid), "--snapshot", "64")
    assert_one_error(run, "the emulator runs at most 16,777,216 CTAs per launch (a tuiprof limit")
    assert run.peak_mib < 400, run.peak_mib


@pytest.mark.slow
def test_a_large_grid_that_is_not_recorded_costs_no_per_cta_memory(tmp_path: Path, warm_emulator: None) -> None:
    """2^22 CTAs launched, 32 recorded: memory follows the snapshot (before: 765 MiB)."""
    body = TOUCH.format(grid="2**22") + "\n" + TOUCH.format(grid=32)
    run, _ = emulate(tmp_path, body, "--launch-index", "1", timeout=300)
    assert run.code == 0, run.stderr[-2000:]
    assert run.peak_mib < 400, run.peak_mib


# ---------------------------------------------------------------- item 11: allocation sizes

@pytest.mark.parametrize("shape,needles", [
    ("(2**62, 2)", ["dev.empty", "(4611686018427387904, 2)", "9,223,372,036,854,775,808 bytes"]),   # wrapped negative
    pytest.param("(2**33, 2**31)", ["dev.empty", "18,446,744,073,709,551,616 bytes"], marks=pytest.mark.slow),  # was 0 bytes
    ("50 << 30", ["dev.empty", "50 GiB", "a tuiprof limit"]),                                         # "Unable to allocate 64.0 GiB"
])
def test_allocation_sizes_are_checked_in_the_scripts_terms(tmp_path: Path, warm_emulator: None, shape: str,
                                                             needles: list[str]) -> None:
    run, _ = emulate(tmp_path, f"dev.empty({shape}, np.uint8)\n" + TOUCH.format(grid=1))
    assert_one_error(run, *needles)
    assert "Error" not in run.stderr.splitlines()[-2] and run.peak_mib < 400


# ---------------------------------------------------------------- brkpt

def test_brkpt_stops_the_kernel_like_a_trap(tmp_path: Path, warm_emulator: None) -> None:
    # Before: brkpt was a no-op and the kernel ran on to a report (exit 0).
    run, _ = emulate(tmp_path, "out = dev.zeros(32, np.int32)\ndev.launch('breakpoint', 1, 32, (out,))")
    assert_one_error(run, "breakpoint (brkpt) in thread (3,0,0) of CTA (0,0,0)", f"k.cu:{line_of('// BRKPT')}")


# ---------------------------------------------------------------- item 10: how launch scripts end

EXITS = [
    pytest.param("sys.exit(0)", "", "called sys.exit(0) in setup(dev)", id="exit(0) in setup"),
    pytest.param("pass", "sys.exit()", "called sys.exit() while loading it", id="exit() at top level", marks=SLOW),
    pytest.param("sys.exit('no input files')", "", "called sys.exit('no input files') in setup(dev)",
                 id="exit with a message"),
    pytest.param("raise SystemExit(3)", "", "called sys.exit(3) in setup(dev)", id="exit with a status", marks=SLOW),
    pytest.param("raise GeneratorExit", "", "raised GeneratorExit in setup(dev)", id="GeneratorExit"),
    pytest.param("raise Bad()", "class Bad(Exception):\n    def __str__(self):\n        raise RuntimeError('no')",
                 "raised Bad in setup(dev) (its message cannot be printed", id="__str__ raises"),
    pytest.param("raise ValueError('x' * (1 << 20))", "", "raised ValueError in setup(dev): xxx", id="a 1 MB message",
                 marks=SLOW),
]


@pytest.mark.parametrize("body,top,needle", EXITS)
def test_every_way_a_script_ends_is_reported_as_what_it_is(tmp_path: Path, warm_emulator: None, body: str, top: str,
                                                             needle: str) -> None:
    # Before: sys.exit(0) was a silent exit 0 with no report, sys.exit("msg") exit 1 with no
    # error:, GeneratorExit and a raising __str__ tuiprof tracebacks.
    run, _ = emulate(tmp_path, body, top=top)
    line = assert_one_error(run, needle)
    assert len(line) < 600 and len(run.stderr) < 4000


def test_record_of_a_script_that_exits_writes_nothing(tmp_path: Path, warm_emulator: None) -> None:
    # Before: exit 0, nothing written, nothing said.
    run, work = emulate(tmp_path, "sys.exit(0)", "-o", str(tmp_path / "t.tptrace"), command="record")
    assert_one_error(run, "called sys.exit(0) in setup(dev)")
    assert not (tmp_path / "t.tptrace").exists()


def test_what_a_script_prints_goes_to_stderr_bounded(tmp_path: Path, warm_emulator: None) -> None:
    # Before: the prints went to stdout: `--format json` was not JSON, and a 10 MB print landed
    # in the report.
    body = "print('hello from the script')\nprint('x' * (10 << 20))\n" + TOUCH.format(grid=32)
    run, _ = emulate(tmp_path, body, "--format", "json")
    assert run.code == 0, run.stderr[-2000:]
    assert json.loads(run.stdout)["trace"]["kernel"]
    assert "s.py: hello from the script" in run.stderr.splitlines()
    assert "more characters of output not shown" in run.stderr and len(run.stderr) < 100_000
    assert run.peak_mib < 600


async def test_the_ui_shows_a_script_that_exits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: the load thread died of SystemExit and the UI said "loading the trace..." forever.
    pytest.importorskip("textual")
    from tests.support.tui_support import wait_for
    from tuiprof.collect.options import CollectOptions
    from tuiprof.session import RunConfig
    from tuiprof.tui.app import TuiprofApp
    from tuiprof.tui.screens.modals import ErrorScreen

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "k.cu").write_text(KERNELS)
    (tmp_path / "s.py").write_text(script_text("sys.exit(0)"))
    config = RunConfig(trials=2, sweep=False, collect=CollectOptions(launch=tmp_path / "s.py", backend="emu"))
    app = TuiprofApp(tmp_path / "k.cu", config, show_timing=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ErrorScreen), timeout=60)
        assert "called sys.exit(0) in setup(dev)" in app.screen.error.message


# ---------------------------------------------------------------- item 12: the Numba cache

def _copy_cache(tmp_path: Path, damage: str) -> Path:
    """A copy of the warm kernel folder under `tmp_path` whose trace-decoding kernel entries
    (quick to compile again) are truncated to half (`damage` "truncate") or gone ("remove")."""
    folder = tmp_path / "numba"
    shutil.copytree(kernel_cache(), folder)
    hit = [p for p in folder.rglob("*_codec*") if p.suffix in (".nbi", ".nbc")]
    assert hit, "the warm cache holds no trace-decoding kernel"
    for p in hit:
        if damage == "truncate":
            os.truncate(p, p.stat().st_size // 2)
        else:
            p.unlink()
    return folder


def _report(tmp_path: Path, numba: Path, prelude: str | None = None) -> Run:
    return run_cli(["report", "vecadd", *RUN, "--format", "json"], tmp_path, env=child_env(tmp_path, numba),
                   prelude=prelude)


def _figures(stdout: bytes) -> object:
    """The JSON report without its timings."""
    def strip(x: object) -> object:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in ("elapsed_s", "l1_requests_per_second")}
        return [strip(v) for v in x] if isinstance(x, list) else x
    return strip(json.loads(stdout))


def test_a_damaged_numba_cache_is_discarded_and_recompiled_once(tmp_path: Path, warm_numba: None) -> None:
    # Before: "loading vecadd.tptrace failed: UnpicklingError: pickle data was truncated" + "this
    # is a tuiprof bug", at every run (the launch script's "raised EOFError" on the emulator).
    reference = _report(tmp_path, kernel_cache())
    numba = _copy_cache(tmp_path, "truncate")
    first = _report(tmp_path, numba)
    assert first.code == 0, first.stderr
    assert first.stderr.strip().splitlines() == [ln for ln in first.stderr.strip().splitlines()
                                                  if ln.startswith("note: ")]
    assert first.stderr.count("discarded damaged compiled kernels") == 1 and "UnpicklingError" in first.stderr
    assert _figures(first.stdout) == _figures(reference.stdout)
    again = _report(tmp_path, numba)                       # recovered: the entries were compiled and saved again
    assert again.code == 0 and again.stderr == "" and _figures(again.stdout) == _figures(reference.stdout)


def test_a_full_disk_under_the_numba_cache_runs_uncached(tmp_path: Path, warm_numba: None) -> None:
    # Before: "cannot read vecadd.tptrace: no space left on device" + "check the file and the
    # disk it is on", blaming a trace it had read perfectly.
    numba = _copy_cache(tmp_path, "remove")
    run = _report(tmp_path, numba, prelude=FULL_DISK)
    assert run.code == 0, run.stderr
    assert run.stderr.strip().splitlines() == [f"note: cannot save compiled kernels in {numba} (No space left on "
                                               "device); they are compiled again at the next run"]
    assert json.loads(run.stdout)["trace"]["kernel"] == "kernel_vec_add"


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncate", "remove"])
@pytest.mark.parametrize("n", [2, 4])
def test_processes_sharing_a_damaged_cache_agree(tmp_path: Path, warm_numba: None, n: int, damage: str) -> None:
    """`n` processes at once on one folder whose entries are damaged (or missing: cold): each
    exits 0 with the same figures as an undamaged run, says at most once that it discarded
    entries, and the folder is healthy after."""
    reference = _figures(_report(tmp_path, kernel_cache()).stdout)
    numba = _copy_cache(tmp_path, damage)
    env = {**os.environ, "PYTHONPATH": str(ROOT), **child_env(tmp_path, numba)}
    procs = [subprocess.Popen([sys.executable, "-m", "tuiprof", "report", "vecadd", *RUN, "--format", "json"],
                              cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(n)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err.decode()[-2000:]
        assert _figures(out) == reference
        assert err.decode().count("note: discarded damaged") <= 1 and "error" not in err.decode()
    again = _report(tmp_path, numba)
    assert again.code == 0 and again.stderr == ""
