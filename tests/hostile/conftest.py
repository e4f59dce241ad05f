"""Fixtures of the hostile-input tests: the kernel caches warmed once per session by an uncapped
run, so that capped runs never compile (helpers: tests/support/hostile_run.py)."""

from __future__ import annotations

import resource

import pytest

from tests.support.hostile_run import kernel_file, run_cli


@pytest.fixture(scope="session")
def warm_numba(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One uncapped run that reaches the simulator, so that capped runs never compile (a cold
    Numba cache compiles every kernel, which needs more address space than a run)."""
    d = tmp_path_factory.mktemp("warm")
    run = run_cli(["report", "vecadd", "--trials", "2", "--no-sweep"], d, cap=resource.RLIM_INFINITY, timeout=900)
    assert run.code == 0, run.stderr


@pytest.fixture(scope="session")
def warm_emulator(tmp_path_factory: pytest.TempPathFactory, warm_numba: None) -> None:
    """One uncapped `record` in the emulator, so that capped runs find its kernels compiled."""
    d = tmp_path_factory.mktemp("warm-emu")
    run = run_cli(["record", str(kernel_file(d)), "-o", str(d / "k.tptrace"), "--backend", "emu"], d,
                  cap=resource.RLIM_INFINITY, timeout=900)
    assert run.code == 0, run.stderr
