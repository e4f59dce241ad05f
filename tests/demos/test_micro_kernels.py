"""The micro-kernels of issue 24's GPU session (benchmarks/micro/), each isolating one effect of
the memory system, recorded here by the emulator and simulated as the `h100`: each test's oracle
is what today's model must predict, counted by hand from the kernel's addresses (the comments
say how). On a GPU, benchmarks/gpu_accuracy.sh measures the same kernels with ncu; the gap
between these hand counts and ncu's is the effect each kernel isolates.

The model's rules the counts rest on (arch/presets/h100.toml): 128 B lines of four 32 B
sectors; the L1 and the L2 fill only the sectors a request misses (32 B); a store makes a sector
readable in the L1 (write-allocate) and the L2 (write-back, allocated dirty) only where it wrote
all 32 of its bytes (`tuiprof.sim.coalesce`); every store is an L2 write hit; the L1 holds 217 KiB as 4 sets
of 434 ways, LRU; the L2 holds 50 MiB. Each launch here is small enough that the snapshot is the
whole grid."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tests.support.ptx_support import needs_compiler
from tuiprof.sim.addressing import home_half

MICRO = Path(__file__).resolve().parents[2] / "benchmarks" / "micro"
pytestmark = needs_compiler


def record(name: str, kernel: str | None = None, launch_index: int = 0, backend: str = "emu", **env: str):
    """Micro-kernel `name` recorded (its default, emulator-sized launch unless `env` sets its
    MICRO_* variables) in the emulator or on the GPU, with the h100's snapshot rule."""
    from tuiprof.collect.options import CollectOptions
    from tuiprof.collect.pipeline import collect_trace
    from tuiprof.session import RunConfig

    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        opts = CollectOptions(launch=MICRO / f"{name}_launch.py", kernel=kernel, launch_index=launch_index,
                              backend=backend)
        return collect_trace(MICRO / f"{name}.cu", RunConfig(arch="h100", collect=opts))
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def simulate(name: str, kernel: str | None = None, launch_index: int = 0, **env: str):
    """`record` in the emulator, simulated as the h100: (trace, analysis)."""
    from tuiprof.session import RunConfig, Session

    trace = record(name, kernel, launch_index, **env)
    analysis = Session(trace, RunConfig(arch="h100", trials=4, sweep=False, tolerance=None)).run()
    return trace, analysis


def ratio(analysis, key: str) -> float:
    return float(analysis.headline[key].mean)


def global_ops(analysis, kind: str):
    return [s for s in analysis.ops if s.op.space == "global" and s.op.kind == kind and s.warp_accesses]


def lines_and_far(trace, ops) -> tuple[int, int]:
    """The 128 B lines the accesses of `ops` touch, and how many of them are homed in the L2's
    half 1 (`home_half`): far from SMs 0-65, where these kernels' few CTAs run."""
    picked = np.isin(trace.op, [s.op.id for s in ops])
    active = ((trace.mask[picked, None] >> np.arange(32, dtype=np.uint32)) & 1).astype(bool)
    lines = np.unique(trace.addr[picked][active] >> np.uint64(7))
    return len(lines), sum(int(home_half(int(line))) for line in lines)


def test_neighbour_sector() -> None:
    """4096 threads, lane stride 64 B: a warp's first load touches sectors 0 and 2 of 16 lines
    (32 sectors, 32 per request), its second load sectors 1 and 3 of the same lines (32 more).
    No sector is read twice, so the L1 never hits. The H100's L2 fills 64 B (measured): the first
    load's misses bring the second load's sectors, which hit. Each line is 4 near lookups, 2 of
    them hits; a line homed in the far half (the 16 CTAs run on SMs 0-15, half 0) adds a far
    lookup of its two 64 B blocks, 4 sectors, missing: L2 read = 2 L / (4 L + 4 F) for L lines, F
    far (1/3 at F = L / 2; the H100 measured 30.2%). The store of out[i] is 4 sectors per warp, an
    L2 write hit each."""
    trace, a = simulate("neighbour_sector")
    assert trace.snapshot.n_ctas == trace.launch.grid_ctas == 16
    loads = global_ops(a, "load")
    assert len(loads) == 2 and all(s.warp_accesses == 128 for s in loads)  # 4096 threads / 32
    assert [s.sectors_per_access for s in loads] == [32.0, 32.0]
    assert [s.requests_per_access for s in loads] == [16.0, 16.0]
    lines, far = lines_and_far(trace, loads)
    assert lines == 2048 and 900 < far < 1150
    assert ratio(a, "l1_read") == 0.0
    assert ratio(a, "l2_read") == pytest.approx(2 * lines / (4 * lines + 4 * far), abs=1e-12)
    assert ratio(a, "l2_write") == 1.0
    (store,) = global_ops(a, "store")
    assert store.sectors_per_access == 4.0


def test_chase_second_pass_hits_in_the_l2_only() -> None:
    """One thread walks 8192 lines (1 MiB) twice, one sector per step: 16384 loads of one
    sector. The first pass misses everywhere. The second finds nothing in the L1 (each of its 4
    sets sees about 2048 lines cycle through 434 LRU ways: a cyclic walk longer than the ways
    evicts every line before its reuse) and everything in its SM's L2 half (1 MiB of 25): L1 read
    0. The L2 read figure counts lookups as ncu does: 2 near lookups a line, one hit; a line homed
    in the far half adds a far lookup of its 64 B block (2 sectors) in the first pass: L2 read
    8192 / (16384 + 2 F) for F far lines (1/2 with one shared L2)."""
    trace, a = simulate("chase")
    (load,) = global_ops(a, "load")
    assert load.warp_accesses == 16384 and load.sectors_per_access == 1.0
    assert ratio(a, "l1_read") == 0.0
    lines, far = lines_and_far(trace, [load])
    assert lines == 8192 and 3800 < far < 4400
    assert ratio(a, "l2_read") == pytest.approx(8192 / (16384 + 2 * far), abs=1e-12)


def test_chase_inside_the_l1() -> None:
    """The same walk over 64 KiB (512 lines, 128 per L1 set, fewer than its 434 ways): the
    second pass hits in the L1 every time: L1 read 512 / 1024 = 0.5; the L2 sees only the first
    pass, all misses: L2 read 0."""
    _, a = simulate("chase", MICRO_FOOTPRINT_KIB="64")
    (load,) = global_ops(a, "load")
    assert load.warp_accesses == 1024
    assert ratio(a, "l1_read") == pytest.approx(0.5, abs=1e-12)
    assert ratio(a, "l2_read") == 0.0


@pytest.mark.parametrize("kernel", ["read_twice", "read_twice_cs"])
def test_streaming_read(kernel: str) -> None:
    """8192 elements, 256 warps: each warp's first load brings its line's 4 sectors (all L1 and
    L2 misses), its second load (in[i ^ 1], the same line) hits all 4 in the L1: L1 read 4 / 8 =
    0.5, L2 read 0. The model does not act on the `.cs` hint (evict-first), so `read_twice_cs`
    predicts the same; ncu's figures for the two kernels say whether the hardware does."""
    trace, a = simulate("streaming", kernel=kernel)
    assert trace.launch.kernel == kernel
    loads = global_ops(a, "load")
    assert len(loads) == 2 and all(s.warp_accesses == 256 and s.sectors_per_access == 4.0 for s in loads)
    h1 = sorted(float(s.h1.mean) for s in loads)
    assert h1 == [0.0, 1.0]
    assert ratio(a, "l1_read") == pytest.approx(0.5, abs=1e-12)
    assert ratio(a, "l2_read") == 0.0


def test_partial_store_then_read_of_the_rest_of_the_sector() -> None:
    """4096 threads, lane stride 32 B: each warp stores 4 B into each of 32 sectors (8 lines),
    then reads the next 4 B of the same 32 sectors. A store of 4 of a sector's 32 bytes leaves it
    unreadable in the L1 and the L2, so every read sector misses both and comes from DRAM: L1
    read 0 of 32, L2 read 0 of 32. Every store (buf and out) is an L2 write hit: L2 write 1.0.
    ncu shows whether the hardware serves these reads from the L1 or the L2 (byte masks) or, as
    the model does, from DRAM (dram__sectors_read against the L2's read misses)."""
    _, a = simulate("partial_store")
    (load,) = global_ops(a, "load")
    assert load.warp_accesses == 128 and load.sectors_per_access == 32.0
    assert float(load.h1.mean) == 0.0 and float(load.h2.mean) == 0.0 and load.dram_share == 1.0
    assert ratio(a, "l1_read") == 0.0 and ratio(a, "l2_read") == 0.0
    assert ratio(a, "l2_write") == 1.0
    stores = global_ops(a, "store")
    assert sorted(s.sectors_per_access for s in stores) == [4.0, 32.0]


@pytest.mark.parametrize("launch_index, l1, l2_hit", [
    (0, 0.5, False),  # 8 KiB window: 64 lines, 16 per L1 set; the second pass hits every sector
    (1, 0.0, True),  # 256 KiB: 2048 lines, 512 per set past 434 LRU ways: every sector misses the L1, hits the L2
])
def test_l1_sweep(launch_index: int, l1: float, l2_hit: bool) -> None:
    """One CTA of 256 threads (SpMV's CTA) reads its window twice, one 128 B line (4 sectors)
    per warp load: the first pass misses the L1 and the L2; the second hits the L1 while the
    window fits its ways, else misses it and hits its SM's L2 half. L2 lookups as ncu counts
    them: 4 near a line and pass, and in the first pass 4 more at home for a line homed far (its
    two 64 B blocks): L2 read 4 L / (8 L + 4 F) = L / (2 L + F) when the second pass reaches the L2."""
    trace, a = simulate("l1_sweep", launch_index=launch_index)
    (load,) = global_ops(a, "load")
    assert load.sectors_per_access == 4.0
    assert ratio(a, "l1_read") == pytest.approx(l1, abs=1e-12)
    lines, far = lines_and_far(trace, [load])
    assert ratio(a, "l2_read") == pytest.approx(lines / (2 * lines + far) if l2_hit else 0.0, abs=1e-12)


def test_through_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    """`tuiprof report` on a micro-kernel (the emulator path a user runs): the streaming kernel
    with the hint, selected by --kernel, predicts L1 read 0.5 and L2 read 0 as counted above."""
    import json

    from tuiprof.cli.main import main

    assert main(["report", str(MICRO / "streaming.cu"), "--backend", "emu", "--arch", "h100", "--kernel",
                 "read_twice_cs", "--format", "json", "--trials", "4", "--no-sweep"]) == 0
    report = json.loads(capsys.readouterr().out)
    headline = report["analysis"]["headline"]
    assert headline["l1_read"]["mean"] == pytest.approx(0.5, abs=1e-12) and headline["l2_read"]["mean"] == 0.0


@pytest.mark.parametrize("name", ["neighbour_sector", "chase", "streaming", "partial_store", "l1_sweep"])
def test_the_emulator_computes_what_each_launch_script_checks(name: str, tmp_path: Path) -> None:
    """Each launch script's setup run in the emulator (its default sizes) passes its own check:
    the kernels compute what their NumPy references say, so the accesses above are the real ones."""
    import runpy

    from tests.support.emu_support import Compiler
    from tuiprof.collect.emu.device import EmuDevice, RecordChoice

    module, src, text = Compiler(tmp_path).file(MICRO / f"{name}.cu")
    ns = runpy.run_path(str(MICRO / f"{name}_launch.py"), run_name="__tuiprof_test__")
    out = ns["setup"](EmuDevice(module, src, text, record=RecordChoice(snapshot=())))
    ns["check"](out)
    bad = {k: v + 1 for k, v in out.items()}
    with pytest.raises(AssertionError):  # the check can fail
        ns["check"](bad)


GPU_CASES = [("neighbour_sector", None, 0), ("chase", None, 0), ("streaming", "read_twice", 0),
             ("streaming", "read_twice_cs", 0), ("partial_store", None, 0), ("l1_sweep", None, 1)]


@pytest.mark.gpu
@pytest.mark.parametrize("name, kernel, launch_index", GPU_CASES)
def test_recorded_on_the_gpu_as_in_the_emulator(name: str, kernel: str | None, launch_index: int) -> None:
    """On a GPU: each micro-kernel's GPU recording holds the emulator's accesses, warp by warp
    (same ops, masks and per-warp counts), so the hand counts above are what the GPU session's
    traces predict."""
    gpu = record(name, kernel, launch_index, backend="gpu")
    emu = record(name, kernel, launch_index)
    assert gpu.provenance.backend == "gpu"
    assert np.array_equal(gpu.warp_offsets, emu.warp_offsets)
    assert np.array_equal(gpu.op, emu.op) and np.array_equal(gpu.mask, emu.mask)


@pytest.mark.gpu
@pytest.mark.parametrize("run", range(6))
def test_the_gpu_size_launches_pass_their_checks(run: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU: each launch benchmarks/gpu_accuracy.sh profiles (its MICRO_* sizes), run plain
    as ncu runs it, computes what its launch script's check expects."""
    import runpy
    import sys

    from tuiprof.collect.gpu.device import GpuDevice
    from tuiprof.collect.gpu.driver import gpu_info
    from tuiprof.ptx import parse_module
    from tuiprof.toolchain import build_program

    sys.path.insert(0, str(MICRO.parent))
    from gpu_accuracy import MICRO_RUNS

    _, stem, env, _, _ = MICRO_RUNS[run]
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    ns = runpy.run_path(str(MICRO / f"{stem}_launch.py"), run_name="__tuiprof_test__")
    program = build_program(MICRO / f"{stem}.cu", compute_capability=gpu_info().compute_capability)
    with GpuDevice(program, parse_module(program.ptx), mode="plain") as dev:
        out = ns["setup"](dev)
    ns["check"](out)


def test_partition_map_probe_reads_only_on_its_sm() -> None:
    """The partition map's first probe (SM 1) on the emulator: 32 CTAs (8 an SM of 4), %smid = CTA
    mod 132 for a whole one-wave grid (arch.occupancy.snapshot_spread), so CTA 1 alone reads: 4 warps,
    each thread 512 / 128 = 4 lines, one warp access each: 16 warp accesses of 32 lines."""
    trace, a = simulate("partition_map", kernel="probe")
    (load,) = global_ops(a, "load")
    assert trace.launch.grid_ctas == 32
    assert load.warp_accesses == 16 and load.requests_per_access == 32.0
    assert set(trace.snapshot.cta_ids[trace.warp_cta[np.repeat(np.arange(trace.warp_cta.size),
                                                                  np.diff(trace.warp_offsets))]].tolist()) == {1}

