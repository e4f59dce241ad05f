"""On a GPU (marked `gpu`: skipped elsewhere, see tests/conftest.py): every demo kernel recorded
through its launch script; its instrumented outputs equal the plain run's and pass the script's
own check; the trace is consistent, every CTA has measured SM and times; a whole program with
`main` is profiled end to end, its gather addresses checked against the host's indices; and the
command line (`--backend gpu`, `--cuda`, `tuiprof app.cu -- ARGS`, `tuiprof -- nvcc ...`, a crashing
program) records GPU traces."""

from __future__ import annotations

import re
import runpy
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.ptx_support import CUDA_DIR, DEMO_DIR
from tuiprof.trace.packed import lane_addresses

pytestmark = pytest.mark.gpu

SCRIPTS = sorted(DEMO_DIR.glob("*_launch*.py"))


def _source_of(script: Path) -> Path:
    return script.with_name(script.name.split("_launch", 1)[0] + ".cu")


def _setup(script: Path) -> dict[str, Any]:
    return runpy.run_path(str(script), run_name="__tuiprof_test__")


@pytest.fixture(scope="module")
def device_cc() -> tuple[int, int]:
    from tuiprof.collect.gpu.driver import _open_driver

    drv = _open_driver("cuda-bindings")
    cc = drv.info.compute_capability
    drv.close()
    return cc


def _plain_then_recorded(script: Path, device_cc: tuple[int, int], flags: tuple[str, ...] = ()) -> tuple[Any, ...]:
    """The demo's launch script run plain, then recorded (counting and recording passes) with the
    snapshot Baghsorkhi12's rule picks for the device's preset: (namespace, program, plain outputs,
    the outputs of both instrumented passes, the GpuRun)."""
    from tuiprof.arch import load_arch
    from tuiprof.arch.calibrate import base_preset
    from tuiprof.arch.occupancy import occupancy
    from tuiprof.collect.gpu.device import GpuDevice
    from tuiprof.collect.gpu.run import collect_gpu
    from tuiprof.ptx import parse_module
    from tuiprof.toolchain import build_program
    from tuiprof.trace.snapshot import choose_snapshot

    ns = _setup(script)
    program = build_program(_source_of(script), compute_capability=device_cc, flags=flags)
    module = parse_module(program.ptx)
    with GpuDevice(program, module, mode="plain") as dev:
        plain = ns["setup"](dev)
    outputs: list[dict[str, np.ndarray]] = []
    arch = load_arch(base_preset(device_cc))
    run = collect_gpu(program, lambda dev: outputs.append(ns["setup"](dev)), arch_name=arch.name,
                      snapshot_rule=lambda launch: choose_snapshot(launch, arch),
                      ctas_per_sm=lambda L: occupancy(arch, L.threads_per_cta, L.registers_per_thread,
                                                      L.static_shared, L.dynamic_shared).ctas_per_sm, module=module)
    assert len(outputs) == 2
    for out in outputs:
        assert out.keys() == plain.keys()
    return ns, program, plain, outputs, run


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_demo_recorded_on_gpu(script: Path, device_cc: tuple[int, int]) -> None:
    ns, program, plain, outputs, run = _plain_then_recorded(script, device_cc)
    # instrumented outputs (both passes) equal the plain run's, and pass the script's check
    fusable = _fusable_float_ops(program.ptx)
    for out in outputs:
        for k in plain:
            _assert_same_output(out[k], plain[k], fusable)
    if "check" in ns:
        ns["check"](outputs[-1])
    t = run.trace
    assert t.provenance.backend == "gpu" and t.provenance.gpu
    assert t.ctas.measured_timing and np.all(t.ctas.end >= t.ctas.start)
    assert t.ctas.sm.max() < run.info.sm_count
    assert t.n_warps == t.snapshot.n_ctas * t.launch.warps_per_cta
    assert t.n_accesses > 0 and set(np.unique(t.op)) <= set(range(len(t.ops)))


FUSABLE = re.compile(r"^\s*(?:@!?%\w+\s+)?(?:mul|add|sub)(?:\.ftz)?(?:\.sat)?\.f(?:32|64)\b", re.M)


def _fusable_float_ops(ptx: str) -> bool:
    """Whether the PTX has multiplies or adds without a rounding modifier, which ptxas may fuse
    into FMAs (PTX ISA, mul/add: "may be optimized aggressively by the code generator")."""
    return FUSABLE.search(ptx) is not None


def _assert_same_output(got: np.ndarray, want: np.ndarray, fusable: bool) -> None:
    """Bit for bit, except floats where the PTX lets ptxas fuse: the probes split some of the
    multiply-add pairs ptxas fuses in the plain kernel (issue 12's GPU run: cyclic reduction, 10
    FFMAs fewer, outputs within 2e-7), so there a few rounding steps' difference is allowed."""
    if fusable and got.dtype.kind == "f":
        scale = float(np.abs(want).max()) if want.size else 0.0
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale)
    else:
        np.testing.assert_array_equal(got, want)


def test_without_fused_multiply_add_outputs_are_bit_identical(device_cc: tuple[int, int]) -> None:
    """The rounding difference above is the FMA contraction alone: compiled with -fmad=false
    (rounded mul.rn/sub.rn that ptxas may not fuse), cyclic reduction's instrumented outputs
    equal the plain run's bit for bit."""
    _, program, plain, outputs, _ = _plain_then_recorded(DEMO_DIR / "cyclic_reduction_launch.py", device_cc,
                                                          flags=("-fmad=false",))
    assert not _fusable_float_ops(program.ptx)
    for out in outputs:
        for k in plain:
            np.testing.assert_array_equal(out[k], plain[k])


def test_whole_program_end_to_end(tmp_path: Path, device_cc: tuple[int, int]) -> None:
    from tuiprof.arch import load_arch
    from tuiprof.arch.calibrate import base_preset
    from tuiprof.collect.gpu.program_run import collect_program
    from tuiprof.toolchain.wholeprog import build_instrumented

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
    addrs = lane_addresses(t)
    for w in range(t.n_warps):
        lo, hi = t.warp_offsets[w], t.warp_offsets[w + 1]
        first = (int(cta_of[w]) * 128 + int(t.warp_index[w]) * 32)
        for r in range(lo, hi):
            lanes = np.arange(32)
            a = addrs[r].astype(np.int64)
            if t.op[r] == idx_op:
                assert t.mask[r] == 0xFFFFFFFF and np.all(np.diff(a) == 4)
            elif t.op[r] == gather_op:
                want = 4 * idx[first + lanes]
                assert np.array_equal(a - a[0], want - want[0])


def _normalise(addr: np.ndarray, buffers: dict[int, Any]) -> np.ndarray:
    """Addresses as (allocation number, offset) pairs packed in one int, so that two devices whose
    allocators place the same arrays at different addresses compare equal; shared and local
    addresses (in no allocation) stay as they are."""
    out = addr.astype(np.int64).copy()
    for n, (ptr, meta) in enumerate(buffers.items()):
        size = int(np.prod(meta.shape, dtype=np.int64)) * meta.dtype.itemsize
        inside = (addr >= np.uint64(ptr)) & (addr < np.uint64(ptr + max(size, 1)))
        out[inside] = (n + 1) * (1 << 40) + (addr[inside].astype(np.int64) - ptr)
    return out


@pytest.mark.parametrize("case", range(12))
def test_gpu_trace_equals_emulator_trace(case: int, device_cc: tuple[int, int]) -> None:
    """The same small launch of each demo kernel recorded on the GPU and natively in the emulator:
    warp by warp the same ops, masks and addresses (relative to each array), i.e. the same trace
    up to the order between warps."""
    import dataclasses

    from tests.support.demo_launches import DEMOS, NativeEmuDriver
    from tuiprof.collect.gpu.device import GpuDevice, LaunchChoice
    from tuiprof.collect.gpu.records import build_trace
    from tuiprof.ptx import parse_module
    from tuiprof.ptx.ops import static_ops
    from tuiprof.toolchain import build_program
    from tuiprof.trace.data import Provenance, Snapshot, SourceFile

    source, setup, kernel, index, n_ctas = DEMOS[case]
    program = build_program(DEMO_DIR / source, compute_capability=device_cc)
    module = parse_module(program.ptx)
    symbol = program.kernel(kernel).name if kernel else None
    choice = LaunchChoice(symbol, index)
    rule = lambda launch: Snapshot(np.arange(min(n_ctas, launch.grid_ctas), dtype=np.int64), "test")  # noqa: E731
    with GpuDevice(program, module, mode="count", choice=choice, snapshot_rule=rule) as dev:
        setup(dev)
        counted = dev.recorded
    with GpuDevice(program, module, mode="record", choice=choice, counts=counted,
                   instrumented=None) as dev:
        setup(dev)
        rec = dev.recorded
        gpu_buffers = dict(dev._buffers)
        local = dev.local_bytes(rec.kernel)
        launch = dev._launch_of(rec.kernel, rec.grid, rec.block, rec.dynamic_shared)
        table = static_ops(module, rec.kernel, program.source.path, program.source.text)
        t = build_trace(launch=launch, table=table, sites=dev.instrumented.sites, tag=0, snapshot=rec.snapshot,
                        words=rec.words, woff=rec.woff, used=rec.used, cta=rec.cta, local_bytes=local,
                        sources=(SourceFile("k.cu", ""),), provenance=Provenance(backend="gpu", arch="a100"))
    emu_program = dataclasses.replace(program, kernels=tuple(dataclasses.replace(k, resources=None)
                                                             for k in program.kernels))
    native = NativeEmuDriver(table, rec.kernel, index if symbol else 0, rec.snapshot.cta_ids)
    with GpuDevice(emu_program, module, mode="plain", driver=native) as dev:
        setup(dev)
        emu_buffers = dict(dev._buffers)
    res = native.result
    warps = t.n_warps
    np.testing.assert_array_equal(np.diff(t.warp_offsets), np.bincount(res.key, minlength=warps)[:warps])
    np.testing.assert_array_equal(t.op, res.op.astype(np.int32))
    np.testing.assert_array_equal(t.mask, res.mask.astype(np.uint32))
    global_rows = np.array([t.ops[o].space == "global" for o in t.op], bool)
    np.testing.assert_array_equal(_normalise(lane_addresses(t)[global_rows], gpu_buffers),
                                  _normalise(res.addr.astype(np.uint64)[global_rows], emu_buffers))


# --------------------------------------------------------------------------- the command line on a GPU


def test_cli_kernel_file_on_gpu(tmp_path: Path) -> None:
    """`tuiprof record KERNEL.cu --backend gpu [--cuda LIB]`, and auto choosing the GPU: a GPU trace
    that names its library; cuda-bindings and pycuda (when installed) record the same ops and masks."""
    from tuiprof.cli.main import main
    from tuiprof.collect.gpu.driver import gpu_problem
    from tuiprof.trace.io import load_trace

    libraries = ["cuda-bindings"] + (["pycuda"] if gpu_problem("pycuda") is None else [])
    traces = {}
    for lib in libraries:
        out = tmp_path / f"{lib}.tptrace"
        assert main(["record", str(DEMO_DIR / "vecadd.cu"), "-o", str(out), "--backend", "gpu", "--cuda", lib]) == 0
        t = traces[lib] = load_trace(out)
        assert t.provenance.backend == "gpu" and t.provenance.generator["library"].startswith(lib)
        assert t.provenance.generator["launch_script"] == "vecadd_launch.py"
    if len(traces) == 2:
        a, b = traces.values()
        assert np.array_equal(a.warp_offsets, b.warp_offsets) and np.array_equal(a.op, b.op)
        assert np.array_equal(a.mask, b.mask)
    assert main(["record", str(DEMO_DIR / "vecadd.cu"), "-o", str(tmp_path / "auto.tptrace")]) == 0
    assert load_trace(tmp_path / "auto.tptrace").provenance.backend == "gpu"


CRASH = r"""
#include <cstdlib>
#include <cstring>
__global__ void k(int *p) { p[threadIdx.x] = threadIdx.x; }
int main(int argc, char **argv)
{
    if (argc > 1 && std::strcmp(argv[1], "before") == 0) std::abort();
    int *p;
    cudaMalloc(&p, 128 * sizeof(int));
    k<<<1, 128>>>(p);
    cudaDeviceSynchronize();
    std::abort();
}
"""


def test_cli_whole_programs_on_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capfd: pytest.CaptureFixture[str]) -> None:
    """`tuiprof record app.cu -- ARGS` end to end (the program's own output on stderr, the trace
    kept); a crash after the chosen launch keeps the trace and says so, one before it is one clear
    error; `tuiprof record -- nvcc -rdc=true ...` on two translation units."""
    from tuiprof.cli.main import main
    from tuiprof.trace.io import load_trace

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    for name in ("wholeprog_main.cu", "wholeprog_rdc_main.cu", "wholeprog_rdc_lib.cu"):
        shutil.copy(CUDA_DIR / name, tmp_path / name)
    (tmp_path / "crash.cu").write_text(CRASH)

    assert main(["record", "wholeprog_main.cu", "-o", "app.tptrace", "--kernel", "gather", "--", "4096"]) == 0
    out, err = capfd.readouterr()
    assert "ok" in err.splitlines() and "the trace is kept in" in err and "note:" not in err
    t = load_trace(tmp_path / "app.tptrace")
    assert t.provenance.backend == "gpu" and t.launch.grid == (32, 1, 1) and t.ctas.measured_timing

    assert main(["record", "crash.cu", "-o", "after.tptrace", "--", "after"]) == 0
    err = capfd.readouterr().err
    assert "note: the counting run was killed by SIGABRT after the chosen launch" in err
    assert load_trace(tmp_path / "after.tptrace").n_accesses > 0
    assert main(["record", "crash.cu", "-o", "before.tptrace", "--", "before"]) == 2
    err = capfd.readouterr().err
    assert "was killed by SIGABRT before the chosen launch was recorded" in err and "Traceback" not in err
    assert not (tmp_path / "before.tptrace").exists()

    assert main(["record", "-o", "rdc.tptrace", "--kernel", "apply", "--", "nvcc", "-rdc=true", "-o", "rdc",
                 "wholeprog_rdc_main.cu", "wholeprog_rdc_lib.cu"]) == 0
    t = load_trace(tmp_path / "rdc.tptrace")
    assert {o.file for o in t.ops} == {"wholeprog_rdc_main.cu", "wholeprog_rdc_lib.cu"}


async def test_ui_opens_a_kernel_file_on_a_gpu_recorded_trace() -> None:
    """`tuiprof demo_traces/vecadd.cu` (its launch script found beside it): the UI's worker records
    on the GPU (tests/gpu/test_gpu_cli.py checks the same with the emulator playing the driver)."""
    pytest.importorskip("textual")
    from tests.support.tui_support import assert_ui_records_on_the_gpu

    trace = await assert_ui_records_on_the_gpu(str(DEMO_DIR / "vecadd.cu"))
    assert trace.provenance.generator["library"].startswith("cuda-bindings")
