"""On a GPU (marked `gpu`: skipped elsewhere, see tests/conftest.py): every demo kernel recorded
through its launch script; its instrumented outputs equal the plain run's and pass the script's
own check; the trace is consistent, every CTA has measured SM and times; and a whole program
with `main` is profiled end to end, its gather addresses checked against the host's indices."""

from __future__ import annotations

import runpy
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.ptx_support import CUDA_DIR, DEMO_DIR

pytestmark = pytest.mark.gpu

SCRIPTS = sorted(DEMO_DIR.glob("*_launch*.py"))


def _source_of(script: Path) -> Path:
    return script.with_name(script.name.split("_launch", 1)[0] + ".cu")


def _setup(script: Path) -> dict[str, Any]:
    return runpy.run_path(str(script), run_name="__tuiprof_test__")


@pytest.fixture(scope="module")
def device_cc() -> tuple[int, int]:
    from tuiprof.collect.gpu import _open_driver

    drv = _open_driver("cuda-bindings")
    cc = drv.info.compute_capability
    drv.close()
    return cc


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_demo_recorded_on_gpu(script: Path, device_cc: tuple[int, int]) -> None:
    from tuiprof.arch import load_arch
    from tuiprof.arch.calibrate import base_preset
    from tuiprof.arch.occupancy import occupancy
    from tuiprof.build import build_program
    from tuiprof.collect.gpu import GpuDevice, collect_gpu
    from tuiprof.ptx import parse_module
    from tuiprof.trace.snapshot import choose_snapshot

    ns = _setup(script)
    program = build_program(_source_of(script), compute_capability=device_cc)
    module = parse_module(program.ptx)
    with GpuDevice(program, module, mode="plain") as dev:
        plain = ns["setup"](dev)
    outputs: list[dict[str, np.ndarray]] = []
    arch = load_arch(base_preset(device_cc))
    run = collect_gpu(program, lambda dev: outputs.append(ns["setup"](dev)), arch_name=arch.name,
                      snapshot_rule=lambda launch: choose_snapshot(launch, arch),
                      ctas_per_sm=lambda L: occupancy(arch, L.threads_per_cta, L.registers_per_thread,
                                                      L.static_shared, L.dynamic_shared).ctas_per_sm, module=module)
    # instrumented outputs (both passes) equal the plain run's, and pass the script's check
    assert len(outputs) == 2
    for out in outputs:
        assert out.keys() == plain.keys()
        for k in plain:
            np.testing.assert_array_equal(out[k], plain[k])
    if "check" in ns:
        ns["check"](outputs[-1])
    t = run.trace
    assert t.provenance.backend == "gpu" and t.provenance.gpu
    assert t.ctas.measured_timing and np.all(t.ctas.end >= t.ctas.start)
    assert t.ctas.sm.max() < run.info.sm_count
    assert t.n_warps == t.snapshot.n_ctas * t.launch.warps_per_cta
    assert t.n_accesses > 0 and set(np.unique(t.op)) <= set(range(len(t.ops)))


def test_whole_program_end_to_end(tmp_path: Path, device_cc: tuple[int, int]) -> None:
    from tuiprof.arch import load_arch
    from tuiprof.arch.calibrate import base_preset
    from tuiprof.build.wholeprog import build_instrumented
    from tuiprof.collect.program_run import collect_program

    shutil.copy(CUDA_DIR / "wholeprog_main.cu", tmp_path / "app.cu")
    prog = build_instrumented(["app.cu", f"-arch=sm_{device_cc[0]}{device_cc[1]}", "-o", "app"], cwd=tmp_path)
    n = 4096
    run = collect_program(prog, [str(n)], arch=load_arch(base_preset(device_cc)), kernel="gather", cwd=tmp_path)
    assert run.exits == (0, 0) and not run.notes
    t = run.trace
    assert t.launch.grid == (n // 128, 1, 1) and t.launch.block == (128, 1, 1)
    assert t.ctas.measured_timing
    idx = (np.arange(n, dtype=np.int64) * 7919) % n
    labels = {o.id: o.label for o in t.ops}
    gather_op = next(i for i, lab in labels.items() if lab.startswith("in["))
    idx_op = next(i for i, lab in labels.items() if lab.startswith("idx["))
    cta_of = t.snapshot.cta_ids[t.warp_cta]
    for w in range(t.n_warps):
        lo, hi = t.warp_offsets[w], t.warp_offsets[w + 1]
        first = (int(cta_of[w]) * 128 + int(t.warp_index[w]) * 32)
        for r in range(lo, hi):
            lanes = np.arange(32)
            a = t.addr[r].astype(np.int64)
            if t.op[r] == idx_op:
                assert t.mask[r] == 0xFFFFFFFF and np.all(np.diff(a) == 4)
            elif t.op[r] == gather_op:
                want = 4 * idx[first + lanes]
                assert np.array_equal(a - a[0], want - want[0])
