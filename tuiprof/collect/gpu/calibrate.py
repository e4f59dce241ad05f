"""`tuiprof calibrate`'s GPU half: the dependent-load microbenchmarks run on the GPU at hand, and
the measured Arch written as TOML. What the measurements mean (capacities, sector and line sizes,
the calibrated Arch and its TOML) is pure data work in `tuiprof.arch.calibrate`."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tuiprof.arch.calibrate import (
    Measurements,
    arch_toml,
    base_preset,
    calibrated_arch,
    capacity,
    check_levels,
    line_size,
    random_chain,
    refine_capacity,
    sector_size,
    strided_chain,
    write_calibrated,
)
from tuiprof.arch.spec import Arch

if TYPE_CHECKING:
    from tuiprof.collect.gpu.driver import Driver


MICROBENCHMARKS = r"""
// tuiprof calibrate: dependent-load chains (one thread each), timed in SM cycles.
extern "C" __global__ void chase_ca(const unsigned int *next, unsigned int steps, unsigned int *sink,
                                    long long *cycles)
{
    unsigned int j = 0;
    for (unsigned int i = 0; i < steps; ++i) j = __ldca(next + j);
    long long t0 = clock64();
    for (unsigned int i = 0; i < steps; ++i) j = __ldca(next + j);
    long long t1 = clock64();
    sink[0] = j;
    cycles[0] = t1 - t0;
}

extern "C" __global__ void chase_cg(const unsigned int *next, unsigned int steps, unsigned int *sink,
                                    long long *cycles)
{
    unsigned int j = 0;
    for (unsigned int i = 0; i < steps; ++i) j = __ldcg(next + j);
    long long t0 = clock64();
    for (unsigned int i = 0; i < steps; ++i) j = __ldcg(next + j);
    long long t1 = clock64();
    sink[0] = j;
    cycles[0] = t1 - t0;
}

extern "C" __global__ void chase_many(const unsigned int *next, const unsigned int *start, unsigned int steps,
                                      unsigned int *sink, long long *cycles)
{
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int j = start[t];
    long long t0 = clock64();
    for (unsigned int i = 0; i < steps; ++i) j = __ldcg(next + j);
    long long t1 = clock64();
    sink[t] = j;
    cycles[t] = t1 - t0;
}
"""


Progress = Callable[[str], None]


def measure(cuda: str = "cuda-bindings", quick: bool = False, progress: Progress | None = None,
            driver: Driver | None = None) -> Measurements:
    """Run the microbenchmarks on GPU 0 (see the module docstring), or through `driver` (which
    it then closes); needs a GPU. CalibrationError when a sweep does not show what it measures."""
    from tuiprof.collect.gpu.driver import _open_driver, require_gpu
    from tuiprof.collect.gpu.params import pack_params
    from tuiprof.ptx import parse_module
    from tuiprof.toolchain import build_program

    if driver is None:
        require_gpu("tuiprof calibrate", cuda, hint="calibration measures a real GPU; without one, choose a preset "
                    "(`tuiprof archs`) with --arch")
    say = progress or (lambda text: None)
    drv = driver if driver is not None else _open_driver(cuda)
    info = drv.info
    try:
        with tempfile.TemporaryDirectory(prefix="tuiprof-calibrate-") as tmp:
            src = Path(tmp) / "calibrate.cu"
            src.write_text(MICROBENCHMARKS)
            program = build_program(src, compute_capability=info.compute_capability, cache=False)
        module = parse_module(program.ptx)
        mod = drv.load(program.ptx)
        fns = {k: drv.get_function(mod, k) for k in ("chase_ca", "chase_cg", "chase_many")}

        def run(kernel: str, nxt: np.ndarray, steps: int, grid: int = 1, block: int = 1,
                start: np.ndarray | None = None) -> np.ndarray:
            threads = grid * block
            ptrs = [drv.alloc(nxt.nbytes), drv.alloc(4 * threads), drv.alloc(8 * threads)]
            try:
                drv.htod(ptrs[0], nxt)
                from tuiprof.collect import DeviceArray

                arr = [DeviceArray(p, (1,), "<u4", 4) for p in ptrs]
                if kernel == "chase_many":
                    assert start is not None
                    sp = drv.alloc(start.nbytes)
                    ptrs.append(sp)
                    drv.htod(sp, start)
                    args: list[Any] = [arr[0], DeviceArray(sp, (1,), "<u4", 4), np.uint32(steps), arr[1], arr[2]]
                else:
                    args = [arr[0], np.uint32(steps), arr[1], arr[2]]
                params = pack_params(module.functions[kernel], args, kernel)
                drv.launch(fns[kernel], (grid, 1, 1), (block, 1, 1), 0, params)
                out = np.zeros(threads, np.int64)
                drv.dtoh(out, ptrs[2])
                return out.astype(np.float64) / max(steps, 1)
            finally:
                for p in ptrs:
                    drv.free(p)

        def chase(kernel: str, footprint: int, stride: int) -> float:
            steps = max(4096, footprint // stride)
            return float(run(kernel, strided_chain(footprint, stride), steps)[0])

        sweeps: dict[str, list[list[float]]] = {}
        say("L1 and L2 hit latencies")
        t1 = chase("chase_ca", 4 << 10, 128)
        t2 = chase("chase_cg", min(1 << 20, info.l2_bytes // 2) if info.l2_bytes else 1 << 20, 128)  # fits the L2
        check_levels(t1, t2)
        l1_guess = max(info.shared_per_sm, 64 << 10) + (64 << 10)
        step = (8 << 10) if not quick else (32 << 10)
        say("L1 capacity")
        feet = np.arange(step, 2 * l1_guess + step, step)
        lat = [chase("chase_ca", int(f), 128) for f in feet]
        sweeps["l1_capacity"] = [[float(f), c] for f, c in zip(feet, lat)]
        coarse = capacity(feet, np.array(lat), t_hit=t1)
        l1 = refine_capacity(lambda f: chase("chase_ca", f, 128), coarse, coarse + step, 128, t1)
        say("sector size")
        sector_strides = np.array([4, 8, 16, 32, 64, 128])
        lat = [chase("chase_ca", 4 * l1, int(s)) for s in sector_strides]
        sweeps["sector"] = [[float(s), c] for s, c in zip(sector_strides, lat)]
        sector = sector_size(sector_strides, np.array(lat), t1, t2)
        say("line size")
        extras = np.arange(0, 8 * 128 + sector, sector)
        lat = [chase("chase_ca", int(l1 + e), sector) for e in extras]
        sweeps["line"] = [[float(e), c] for e, c in zip(extras, lat)]
        line = line_size(extras, np.array(lat))
        say("L2 capacity")
        l2_guess = max(info.l2_bytes, 1 << 20)
        points = 8 if quick else 16
        feet = np.linspace(l2_guess / 4, 3 * l2_guess, points).astype(np.int64) // 4096 * 4096
        lat = [chase("chase_cg", int(f), 128) for f in feet]
        sweeps["l2_capacity"] = [[float(f), c] for f, c in zip(feet, lat)]
        coarse = capacity(feet, np.array(lat), t_hit=t2)
        above = feet[feet > coarse]
        l2 = refine_capacity(lambda f: chase("chase_cg", f, 128), coarse, int(above[0]) if above.size else coarse,
                             128, t2)
        say("DRAM latency")
        rng = np.random.default_rng(0)
        big = random_chain(4 * l2_guess, 128, rng)
        dram = float(run("chase_cg", big, 1 << 14)[0])
        check_levels(t1, t2, dram)
        batches = []
        slots = np.flatnonzero(big != 0) if big.any() else np.zeros(1, np.int64)
        for warps in ((1, 2, 4, 8, 16, 32) if not quick else (1, 4, 16)):
            say(f"DRAM batches, {warps} warps per SM")
            threads = 32 * warps * info.sm_count
            start = rng.choice(slots, size=threads, replace=threads > slots.size).astype(np.uint32)
            # the chains are segments of one random cycle: keep them from running into each other
            steps = int(max(8, min(1 << 10, slots.size // threads)))
            per = run("chase_many", big, steps, grid=warps * info.sm_count, block=32, start=start)
            batches.append((warps, float(np.mean(per))))
        return Measurements(gpu=info.name, compute_capability=info.compute_capability, sm_count=info.sm_count,
                            clock_mhz=info.clock_mhz, t1=t1, t2=t2, dram=dram, l1_size=l1, l2_size=l2,
                            sector=sector, line=max(line or 0, sector), dram_batches=tuple(batches),
                            sweeps=sweeps, line_measured=line is not None, l2_reported=info.l2_bytes)
    finally:
        drv.close()


def calibrate(cuda: str = "cuda-bindings", quick: bool = False, output: Path | None = None,
              progress: Progress | None = None) -> tuple[Path, Arch, Measurements]:
    """Measure, build the Arch, write the TOML (and the raw sweeps as JSON beside it)."""
    import json

    from tuiprof.arch.presets import load_arch
    from tuiprof.output import check_output, write_output

    if output is not None:
        check_output(str(output))  # before minutes of measuring
    m = measure(cuda, quick, progress)
    base_name = base_preset(m.compute_capability)
    arch = calibrated_arch(m, load_arch(base_name))
    path = write_calibrated(arch_toml(arch, m, base_name), output)
    raw = path.with_suffix(".json") if path.suffix != ".json" else path.with_name(path.name + ".sweeps.json")
    if not path.is_file():  # a device or FIFO took the TOML: the sweeps have no file to sit beside
        return path, arch, m
    write_output(json.dumps({"gpu": m.gpu, "t1": m.t1, "t2": m.t2, "dram": m.dram, "l1_size": m.l1_size,
                               "l2_size": m.l2_size, "sector": m.sector, "line": m.line,
                               "dram_batches": m.dram_batches, "sweeps": m.sweeps}, indent=1), str(raw))
    return path, arch, m


__all__ = ["MICROBENCHMARKS", "calibrate", "measure"]
