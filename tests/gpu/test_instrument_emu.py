"""The instrumented PTX run in the emulator (tests/support/emu_driver.py under the GPU collector's
`GpuDevice`: counting pass, recording pass, the probes executing instruction by instruction)
yields buffers that decode to exactly the warp accesses the emulator records natively from the
uninstrumented PTX of the same launch: same ops, masks, addresses, program order per warp. The
launch scripts' outputs are the same with and without probes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.ptx_support import CUDA_DIR, DEMO_DIR, find_nvcc

pytest.importorskip("tuiprof.collect.emu.run")

from tests.support.demo_launches import DEMOS, NativeEmuDriver, _program, _vecadd  # noqa: E402
from tests.support.emu_driver import EmuDriver  # noqa: E402

needs_compiler = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is needed to compile the demos")


@pytest.fixture(scope="module")
def programs() -> dict[Path, Any]:
    return {}


def assert_same_accesses(source: Path, setup: Callable[[Any], dict[str, np.ndarray]], n_ctas: int,
                         programs: dict[Path, Any], kernel: str | None = None, launch_index: int = 0) -> Any:
    """Record the chosen launch through the probes in the emulator and natively; assert the
    traces' accesses and the script's outputs are the same; return the probes' trace."""
    import dataclasses

    from tuiprof.collect.gpu.device import GpuDevice, LaunchChoice
    from tuiprof.collect.gpu.run import collect_gpu
    from tuiprof.ptx import parse_module
    from tuiprof.ptx.ops import static_ops
    from tuiprof.trace.data import Snapshot

    program = _program(programs, source)
    # the emulator's own local-memory layout (not ptxas's stack frame) for the probes' local accesses
    program = dataclasses.replace(program, kernels=tuple(dataclasses.replace(k, resources=None)
                                                         for k in program.kernels))
    module = parse_module(program.ptx)
    symbol = program.kernel(kernel).name if kernel else None
    outputs: list[dict[str, np.ndarray]] = []
    snapshots: list[Snapshot] = []

    def rule(launch: Any) -> Snapshot:
        grid = launch.grid[0] * launch.grid[1] * launch.grid[2]
        snap = Snapshot(np.arange(min(n_ctas, grid), dtype=np.int64), "test")
        snapshots.append(snap)
        return snap

    run = collect_gpu(program, lambda dev: outputs.append(setup(dev)), arch_name="a100", snapshot_rule=rule,
                      ctas_per_sm=lambda L: 1, choice=LaunchChoice(symbol, launch_index), module=module,
                      driver=EmuDriver())
    t = run.trace
    # native: the same launch of the plain PTX (the same allocations, so the same addresses)
    table = static_ops(module, t.launch.kernel, program.source.path, program.source.text)
    native = NativeEmuDriver(table, t.launch.kernel, launch_index if symbol else 0, snapshots[0].cta_ids)
    with GpuDevice(program, module, mode="plain", driver=native) as dev:
        plain_out = setup(dev)
    res = native.result
    assert res is not None
    for out in outputs:  # outputs with probes (both passes) equal the plain run's
        for k in plain_out:
            np.testing.assert_array_equal(out[k], plain_out[k])
    warps = t.launch.warps_per_cta * snapshots[0].n_ctas
    counts = np.bincount(res.key, minlength=warps)[:warps]
    np.testing.assert_array_equal(np.diff(t.warp_offsets), counts)
    np.testing.assert_array_equal(t.op, res.op.astype(np.int32))
    np.testing.assert_array_equal(t.mask, res.mask.astype(np.uint32))
    np.testing.assert_array_equal(t.addr, res.addr.astype(np.uint64))
    assert t.n_accesses > 0
    # every CTA of the grid left its SM and times (the emulator's %smid and %globaltimer)
    assert t.ctas.measured_timing and t.ctas.sm.shape[0] == t.launch.grid_ctas
    return t


@needs_compiler
@pytest.mark.parametrize("source, setup, kernel, launch_index, n_ctas", DEMOS,
                         ids=[f"{d[0][:-3]}-{d[2] or getattr(d[1], '__qualname__', '').split('.')[0]}-{i}"
                              for i, d in enumerate(DEMOS)])
def test_demo_kernels_record_the_same_accesses(source: str, setup: Callable[[Any], dict[str, np.ndarray]],
                                               kernel: str | None, launch_index: int, n_ctas: int,
                                               programs: dict) -> None:
    if not (DEMO_DIR / source).is_file():
        pytest.skip(f"{source} is not in demo_traces")
    assert_same_accesses(DEMO_DIR / source, setup, n_ctas, programs, kernel, launch_index)


def _generic_setup(dev: Any) -> dict[str, np.ndarray]:
    g = dev.to_device(np.arange(1024, dtype=np.float32) * np.float32(0.5))
    out = dev.zeros(1024, np.float32)
    dev.launch("generic_ptr", 4, 256, (g, out, np.int32(1024), np.int32(1)))
    dev.launch("generic_ptr", 4, 256, (g, out, np.int32(1024), np.int32(0)))
    return {"out": dev.from_device(out)}


@needs_compiler
@pytest.mark.parametrize("launch_index, space", [(0, "shared"), (1, "global")])
def test_generic_pointer_to_shared_and_global(launch_index: int, space: str, programs: dict) -> None:
    """`isspacep` sorts the generic loop's lanes: shared offsets for the first launch, global
    addresses for the second, as the emulator resolves them."""
    t = assert_same_accesses(CUDA_DIR / "ptx_generic_ptr.cu", _generic_setup, 2, programs, "generic_ptr",
                             launch_index)
    spaces = {o.space for o in t.ops if o.label.startswith("p[")}
    assert spaces == {space}


def _local_setup(dev: Any) -> dict[str, np.ndarray]:
    inp = dev.to_device(np.arange(300, dtype=np.int32) * np.int32(3))
    out = dev.zeros(300, np.int32)
    dev.launch("local_mix", 3, 128, (inp, out, np.int32(300), np.int32(5)))
    return {"out": dev.from_device(out)}


@needs_compiler
def test_local_array_and_mixed_space_pointer(programs: dict) -> None:
    """A local array indexed at run time (per-thread local addresses laid out per warp as the
    emulator lays them out), a generic pointer local in odd lanes and global in even ones (each
    lane classified by `isspacep`), and the early return's partial masks in the last CTA."""
    from tuiprof.collect.emu.kernel import codes
    from tuiprof.collect.gpu.records import LOCAL_TRACE_BASE

    assert LOCAL_TRACE_BASE == codes.LOCAL_TRACE_BASE  # one layout of local memory in every trace
    t = assert_same_accesses(CUDA_DIR / "instrument_local.cu", _local_setup, 3, programs, "local_mix")
    on = ((t.mask[:, None] >> np.arange(32, dtype=np.uint32)) & 1).astype(bool)
    in_local = (t.addr >= LOCAL_TRACE_BASE) & (t.addr < LOCAL_TRACE_BASE + (1 << 40))
    local, other = in_local & on, ~in_local & on
    assert np.any(local.all(axis=1) & on.any(axis=1))  # the local array's own accesses
    mixed = local.any(axis=1) & other.any(axis=1)
    assert mixed.any()  # the generic pointer: odd lanes local, even lanes global
    assert np.all(local[mixed][:, 1::2] == on[mixed][:, 1::2]) and not local[mixed][:, 0::2].any()
    assert np.any(t.mask != 0xFFFFFFFF)  # the early return



# The emulator corpus (tests/cuda/emu_*.cu): atomics on shared and global memory, warp shuffles
# and votes (also on both sides of a divergent branch), vector loads, cp.async (two sites), half2
# and double accesses, a template instantiation, data-dependent loops, an early exit before a
# barrier. Small launches: about a second each.


def _launch(kernel: str, grid: Any, block: Any, arrays: dict[str, np.ndarray], args: tuple[Any, ...],
            returned: tuple[str, ...]) -> Callable[[Any], dict[str, np.ndarray]]:
    """A setup that copies `arrays` to the device, launches `kernel` with `args` (a name: that
    array; anything else: a scalar) and returns the `returned` arrays read back."""
    def setup(dev: Any) -> dict[str, np.ndarray]:
        bufs = {k: dev.to_device(v) for k, v in arrays.items()}
        dev.launch(kernel, grid, block, tuple(bufs[a] if isinstance(a, str) else a for a in args))
        return {k: dev.from_device(bufs[k]) for k in returned}
    return setup


_R = np.random.default_rng(12)
_Z = np.zeros
CORPUS = [
    ("ptx_histogram_atomic.cu", _launch("histogram_shared", 2, 64, {"d": _R.integers(0, 256, 600).astype(np.uint8),
                                        "h": _Z(256, np.uint32)}, ("d", np.int32(600), "h"), ("h",))),
    ("ptx_histogram_atomic.cu", _launch("atomics_misc", 1, 64, {"p": _Z(9, np.int32), "f": _Z(1, np.float32),
                                        "d": _Z(1), "u": _Z(1, np.uint64)}, ("p", "f", "d", "u"), ("p", "f", "d", "u"))),
    ("ptx_reduce_shfl.cu", _launch("reduce_shfl", 2, 64, {"i": _R.integers(-9, 9, 500).astype(np.float32),
                                   "o": _Z(1, np.float32)}, ("i", "o", np.int32(500)), ("o",))),
    ("ptx_reduce_shfl.cu", _launch("vote_ops", 1, 96, {"i": _R.integers(-5, 5, 96).astype(np.int32),
                                   "o": _Z(96, np.uint32)}, ("i", "o", np.int32(80)), ("o",))),
    ("ptx_sync_in_divergence.cu", _launch("shfl_both_sides2", 1, 64, {"i": _R.integers(-50, 50, 64).astype(np.int32),
                                          "o": _Z(64, np.int32)}, ("i", "o"), ("o",))),
    ("ptx_sync_in_divergence.cu", _launch("early_exit_then_bar", 2, 64, {"i": np.arange(128, dtype=np.int32),
                                          "o": _Z(128, np.int32)}, ("i", "o", np.int32(100)), ("o",))),
    ("ptx_divergent.cu", _launch("divergent", 1, 64, {"i": _R.integers(1, 60, 64).astype(np.int32),
                                 "o": _Z(64, np.int32)}, ("i", "o", np.int32(60)), ("o",))),
    ("ptx_vector_loads.cu", _launch("copy_float4", 1, 64, {"i": _R.uniform(-1, 1, (64, 4)).astype(np.float32),
                                    "o": _Z((64, 4), np.float32)}, ("i", "o", np.int32(50)), ("o",))),
    ("ptx_vector_loads.cu", _launch("shared_vec", 2, 128, {"i": _R.uniform(-1, 1, (256, 4)).astype(np.float32),
                                    "o": _Z((256, 4), np.float32)}, ("i", "o"), ("o",))),
    ("ptx_modern_features.cu", _launch("async_copy", 2, 256, {"i": _R.integers(-3, 4, 512).astype(np.float32),
                                       "o": _Z(512, np.float32)}, ("i", "o", np.int32(300)), ("o",))),
    ("ptx_half_double.cu", _launch("half2_math", 2, 128, {"a": _R.uniform(-2, 2, 512).astype(np.float16),
                                   "c": _Z(512, np.float16)}, ("a", "c", np.int32(256)), ("c",))),
    ("ptx_half_double.cu", _launch("double_math", 1, 64, {"x": _R.uniform(0.1, 5, 64), "y": _Z(64),
                                   "z": _Z(64, np.float32), "w": _Z(64, np.int64)},
                                   ("x", "y", "z", "w", np.int32(64)), ("y", "z", "w"))),
    ("ptx_template_saxpy.cu", _launch("_Z4axpyIfLi4EEvT_PKS0_PS0_i", 1, 64,
                                      {"x": _R.uniform(-1, 1, 300).astype(np.float32),
                                       "y": _R.uniform(-1, 1, 300).astype(np.float32)},
                                      (np.float32(2.5), "x", "y", np.int32(290)), ("y",))),
]


@needs_compiler
@pytest.mark.parametrize("source, setup", CORPUS, ids=[f"{s[:-3]}-{i}" for i, (s, _) in enumerate(CORPUS)])
def test_corpus_kernels_record_the_same_accesses(source: str, setup: Callable[[Any], dict[str, np.ndarray]],
                                                 programs: dict) -> None:
    assert_same_accesses(CUDA_DIR / source, setup, 2, programs)


@needs_compiler
def test_a_warp_that_records_more_than_counted_writes_only_inside_its_region(programs: dict) -> None:
    """The probe's own fit test, before any store: regions made too short for the first and the
    last snapshot warp (as when the recording run takes other paths than the counting run) keep
    the records that fit whole and nothing else; no other warp's region changes, nothing is
    written past the buffer's end, and the host reports the lost records."""
    from tests.support.emu_driver import EmuDriver
    from tuiprof.collect.gpu.device import GpuDevice, LaunchChoice
    from tuiprof.collect.gpu.records import RecordsError, check_regions
    from tuiprof.ptx import parse_module
    from tuiprof.trace.data import Snapshot

    program = _program(programs, DEMO_DIR / "vecadd.cu")
    module = parse_module(program.ptx)
    choice = LaunchChoice(None, 0)

    def rule(launch: Any) -> Snapshot:
        return Snapshot(np.arange(2, dtype=np.int64), "test")

    def record(counted: Any) -> Any:
        with GpuDevice(program, module, mode="record", choice=choice, counts=counted, driver=EmuDriver()) as dev:
            _vecadd(dev)
            return dev.recorded

    with GpuDevice(program, module, mode="count", choice=choice, snapshot_rule=rule, driver=EmuDriver()) as dev:
        _vecadd(dev)
        counted = dev.recorded
    full = record(counted)
    np.testing.assert_array_equal(full.counts, [3 * 33] * 4)  # 3 full-warp accesses, 1 + 32 words each
    np.testing.assert_array_equal(full.used, [3 * 18] * 4)  # compressed: 2 + 16 words each
    short = counted.counts.copy()
    short[0], short[-1] = 40, 20  # room for two records / one record
    counted.counts = short
    cut = record(counted)
    np.testing.assert_array_equal(cut.used, full.used)  # the reservations go on: the host sees them
    with pytest.raises(RecordsError, match="2 snapshot warps recorded more than the counting run announced"):
        check_regions(cut.woff, cut.used)

    def region(r: Any, w: int) -> np.ndarray:
        return r.words[int(r.woff[w]):int(r.woff[w + 1])]

    np.testing.assert_array_equal(region(cut, 0), np.r_[region(full, 0)[:36], np.zeros(4, np.uint64)])
    np.testing.assert_array_equal(region(cut, 3), np.r_[region(full, 3)[:18], np.zeros(2, np.uint64)])
    for w in (1, 2):
        np.testing.assert_array_equal(region(cut, w), region(full, w))
