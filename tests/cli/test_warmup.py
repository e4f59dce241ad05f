"""`tuiprof warmup`: the kernels compiled into the kernel cache ahead of any run (issue 23 item 3)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tuiprof.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def test_warmup_runs_only_the_steps_whose_kernels_are_missing(monkeypatch, capsys) -> None:
    from tuiprof import warmup

    ran: list[str] = []
    monkeypatch.setattr(warmup, "needed", lambda step: step.target in ("v100", warmup.EMULATOR))
    monkeypatch.setattr(warmup, "run_step", lambda step: ran.append(step.target))
    assert main(["warmup"]) == 0
    out = capsys.readouterr().out
    assert ran == ["v100", warmup.EMULATOR]
    assert "compiling the simulator for v100 (1 of 2)" in out and "compiling the emulator (2 of 2)" in out
    ran.clear()
    assert main(["warmup", "--arch", "h100", "--no-emulator"]) == 0
    assert ran == [] and "nothing to compile" in capsys.readouterr().out
    assert main(["warmup", "--arch", "nope"]) == 2 and "not a preset" in capsys.readouterr().err


def test_the_plan_covers_every_preset_then_the_emulator() -> None:
    from tuiprof.arch.presets import preset_names
    from tuiprof.warmup import EMULATOR, plan

    assert [s.target for s in plan()] == [*preset_names(), EMULATOR]
    assert [s.what for s in plan(["gtx480"], emulator=False)] == ["the simulator for gtx480"]


def test_whether_a_step_is_needed_is_asked_without_compiling() -> None:
    # Before: the emulator's step imported `run_ctas`, which the emulator's variants replaced
    # (ImportError on every `tuiprof warmup` and first UI launch).
    from tuiprof.warmup import EMULATOR, Step, needed

    assert isinstance(needed(Step(EMULATOR)), bool) and isinstance(needed(Step("gtx480")), bool)


@pytest.mark.slow
def test_warmup_fills_a_given_cache_folder(tmp_path: Path) -> None:
    # A fresh folder: the first warm-up compiles the gtx480 family and the shared kernels into it,
    # after which nothing is missing and a session on gtx480 would compile nothing.
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "tuiprof", "warmup", "--arch", "gtx480", "--no-emulator"]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0 and "compiling the simulator for gtx480 (1 of 1)" in first.stdout, first.stderr
    assert list(tmp_path.rglob("*replay_*.nbi")) and list(tmp_path.rglob("*weighted_round_robin*.nbi"))
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "nothing to compile" in again.stdout


def test_the_emulator_step_is_needed_until_every_variant_is_cached(monkeypatch) -> None:
    # a kernel with branches, barriers or atomics runs on a larger variant than the demo's: each
    # must be compiled for a later run to compile nothing
    import tuiprof.jit
    from tuiprof.collect.emu.kernel.interp import VARIANTS, interpreter
    from tuiprof.warmup import EMULATOR, Step, needed

    missing = interpreter(VARIANTS[3])
    monkeypatch.setattr(tuiprof.jit, "is_cached", lambda kernel: kernel is not missing)
    assert needed(Step(EMULATOR))
    monkeypatch.setattr(tuiprof.jit, "is_cached", lambda kernel: True)
    assert not needed(Step(EMULATOR))
