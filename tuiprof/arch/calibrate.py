"""`tuiprof calibrate`: pointer-chasing microbenchmarks for the GPU at hand (paper 000 sec. 2.1
and 3.2.3), written as an Arch TOML that ``--arch calibrated`` loads.

What is measured, each by one thread (or many, for DRAM) following a chain ``j = next[j]`` of
dependent loads, timed with ``clock64()`` in SM cycles:

- ``t1``: the L1 hit latency (``ld.global.ca``, a 4 KiB chain, warmed);
- ``t2``: the L2 hit latency (``ld.global.cg`` bypasses L1; a 1 MiB chain, warmed);
- the L1 size: the largest chain (stride 128 B) still at the L1 latency, and the L2 size likewise
  with ``.cg`` (capacity sweeps);
- the sector size: chains longer than L1 with strides of 4 .. 128 B: an access costs ``t2`` once
  the stride reaches the unit L1 fills, the sector;
- the line size: chases of the L1 capacity plus 0, 32, 64 ... bytes at the sector stride (Mei and
  Chu's fine-grained P-chase): each line past the capacity makes one more set thrash, so the
  latency climbs in steps one line apart (when the steps are not clean, the preset's line stays);
- DRAM: the unloaded latency (a chain 4x the L2, ``.cg``), and the latency of batches of
  concurrent requests: 1, 2, 4 ... warps per SM each chasing its own chain (paper 000's Tm).

The analysis of the sweeps (`capacity`, `sector_size`, `line_size`, `calibrated_arch`,
`arch_toml`) is plain functions over arrays, tested without a GPU; `measure` runs the kernels and
needs one. Everything not measured is the preset of the same compute capability, and the file
says which values are measured and which come from it.
"""

from __future__ import annotations

import datetime
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from tuiprof import units
from tuiprof.arch.model import Arch, arch_from_mapping, arch_to_mapping
from tuiprof.errors import ArchError, TuiprofError

if TYPE_CHECKING:
    from tuiprof.collect.gpu import Driver

CALIBRATED = "calibrated"
"""The name ``--arch`` takes for the calibrated file."""


def config_dir() -> Path:
    """The user's tuiprof configuration folder (XDG)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "tuiprof"


def calibrated_path() -> Path:
    """Where `tuiprof calibrate` writes, and ``--arch calibrated`` reads."""
    return config_dir() / "arch" / f"{CALIBRATED}.toml"


def load_calibrated() -> Arch:
    """The calibrated Arch; ArchError when `tuiprof calibrate` never ran here."""
    from tuiprof.arch.presets import load_arch

    path = calibrated_path()
    if not path.is_file():
        raise ArchError(f"no calibrated arch: {path} does not exist",
                        "run `tuiprof calibrate` on the GPU first, or choose a preset (`tuiprof archs`)")
    return load_arch(str(path))


# --------------------------------------------------------------------------- analysis


@dataclass(frozen=True)
class Measurements:
    """What the microbenchmarks found (cycles are SM cycles, sizes bytes)."""

    gpu: str
    compute_capability: tuple[int, int]
    sm_count: int
    clock_mhz: int
    t1: float
    t2: float
    dram: float
    l1_size: int
    l2_size: int
    sector: int
    line: int
    dram_batches: tuple[tuple[int, float], ...] = ()
    """(concurrent warps per SM, mean cycles per dependent DRAM access)."""
    sweeps: dict[str, list[list[float]]] = field(default_factory=dict)
    """The raw sweeps: name -> [x, cycles] pairs, kept beside the TOML for the record."""
    line_measured: bool = True
    """False when the line-size staircase was not clean: the preset's line size is kept."""
    l2_reported: int = 0
    """The L2 size the driver reports (0: unknown). An H100 reports 50 MiB and one SM's chase
    finds 25: its L2 is two partitions."""

    def l2_note(self) -> str:
        """How the measured L2 compares with the driver's figure, where they differ by over 10%."""
        if not self.l2_reported or abs(self.l2_size - self.l2_reported) <= self.l2_reported // 10:
            return ""
        return f"the driver reports {units.size(self.l2_reported)}"


def capacity(footprints: np.ndarray, cycles: np.ndarray, tolerance: float = 0.3, t_hit: float | None = None) -> int:
    """The largest footprint whose latency is still on the first plateau (within `tolerance` of
    the hit latency `t_hit`, else of the smallest footprints' latency) before the first jump: a
    cache's capacity; 0 when the smallest footprint already misses."""
    f = np.asarray(footprints, np.float64)
    c = np.asarray(cycles, np.float64)
    if f.size == 0 or f.shape != c.shape:
        raise ValueError("capacity: footprints and cycles must be non-empty and of one length")
    order = np.argsort(f)
    f, c = f[order], c[order]
    base = t_hit if t_hit is not None else float(np.median(c[: max(1, min(3, c.size))]))
    above = np.flatnonzero(c > base * (1.0 + tolerance))
    if above.size and above[0] == 0:
        return 0
    return int(f[above[0] - 1 if above.size else c.size - 1])


class CalibrationError(TuiprofError):
    """A microbenchmark sweep that does not show what it measures (no cache step, levels out of
    order): the GPU was busy, or behaves unlike the model the sweep assumes."""


CALIBRATION_HINT = ("run it again on an idle GPU (nothing else running on it), without --quick; if it "
                    "persists, choose a preset with --arch (`tuiprof archs`) and please report the output")


def sector_size(strides: np.ndarray, cycles: np.ndarray, t_hit: float, t_miss: float) -> int:
    """The smallest stride at which every access misses (latency within 20% of the gap from
    `t_miss`): the unit the cache fills, its sector. CalibrationError when no stride does."""
    s = np.asarray(strides)
    c = np.asarray(cycles, np.float64)
    missing = c >= t_hit + 0.8 * (t_miss - t_hit)
    if not missing.any():
        raise CalibrationError(f"the sector sweep never reached the L2 latency ({t_miss:.0f} cycles): strides "
                               f"{', '.join(f'{int(a)} B' for a in s)} took {', '.join(f'{v:.0f}' for v in c)} cycles",
                               CALIBRATION_HINT)
    return int(np.min(s[missing]))


def check_levels(t1: float, t2: float, dram: float | None = None) -> None:
    """CalibrationError unless each level is clearly slower than the one above it (an L1 hit
    faster than an L2 hit, faster than DRAM), which every later sweep relies on."""
    if not t2 > 1.2 * t1 > 0:
        raise CalibrationError(f"an L2 hit ({t2:.0f} cycles) did not take clearly longer than an L1 hit "
                               f"({t1:.0f} cycles): the loads meant to hit the L1 (ld.ca) did not, or those "
                               "meant to bypass it (ld.cg) did not", CALIBRATION_HINT)
    if dram is not None and not dram > 1.2 * t2:
        raise CalibrationError(f"a DRAM access ({dram:.0f} cycles) did not take clearly longer than an L2 hit "
                               f"({t2:.0f} cycles): the chase meant to miss the L2 hit it", CALIBRATION_HINT)


def refine_capacity(latency: Callable[[int], float], lo: int, hi: int, stride: int, t_hit: float,
                    tolerance: float = 0.03) -> int:
    """The largest footprint in [lo, hi] (multiples of `stride`) whose chase still runs at the hit
    latency (within `tolerance`: one thrashing set is a small rise), by bisection
    (`latency(footprint)` runs one chase; lo must hit)."""
    lo, hi = lo // stride, hi // stride
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if latency(mid * stride) <= t_hit * (1.0 + tolerance):
            lo = mid
        else:
            hi = mid
    return lo * stride


def line_size(extras: np.ndarray, cycles: np.ndarray) -> int | None:
    """The line size from chases of the capacity plus `extras` bytes (at the sector stride; Mei
    and Chu's fine-grained P-chase): every line beyond the capacity makes one more set thrash, so
    the latency climbs in big steps one line apart (and by one miss per sector in between). None
    when no clean staircase shows (a replacement policy other than LRU), so the caller keeps the
    preset's line size."""
    d = np.asarray(extras, np.float64)
    c = np.asarray(cycles, np.float64)
    order = np.argsort(d)
    d, c = d[order], c[order]
    step = np.diff(c)
    if step.size < 3 or step.max() <= 0:
        return None
    jumps = d[1:][step > 0.5 * step.max()]
    if jumps.size < 2:
        return None
    gaps = np.diff(jumps)
    spacing = int(np.median(gaps))
    if spacing <= 0 or spacing & (spacing - 1) or np.any(np.abs(gaps - spacing) > 0.25 * spacing):
        return None
    return spacing


def fit_cache(size: int, line: int, sets: int, partitions: int) -> tuple[int, int]:
    """(size, associativity) for a measured capacity with the preset's set count: the ways absorb
    the capacity, so the set count stays the power of two the simulator needs."""
    ways = max(1, round(size / (line * sets * partitions)))
    return ways * line * sets * partitions, ways


def base_preset(cc: tuple[int, int]) -> str:
    """The preset whose values stand in for what is not measured."""
    major, minor = cc
    if major >= 9:
        return "h100"
    if major == 8:
        return "a100"
    return "v100"


def calibrated_arch(m: Measurements, base: Arch) -> Arch:
    """`base` with every measured value of `m` in place."""
    data = arch_to_mapping(base)
    data["name"] = CALIBRATED
    data["description"] = f"{m.gpu} (CC {m.compute_capability[0]}.{m.compute_capability[1]}), measured by tuiprof calibrate"
    data["compute_capability"] = f"{m.compute_capability[0]}.{m.compute_capability[1]}"
    data["sm_count"] = m.sm_count
    data["clock_mhz"] = m.clock_mhz
    for level, size, latency in (("l1", m.l1_size, m.t1), ("l2", m.l2_size, m.t2)):
        c = data[level]
        line = m.line if level == "l1" and m.line_measured else c["line"]
        sector = m.sector if level == "l1" else c["sector"]
        if line < sector:
            line = sector
        sets = max(1, c["size"] // (c["line"] * c["assoc"] * c["partitions"]))
        c["size"], c["assoc"] = fit_cache(size, line, sets, c["partitions"])
        c["line"], c["sector"], c["hit_latency"] = line, sector, int(round(latency))
    data["dram"]["base_latency"] = int(round(m.dram))
    return arch_from_mapping(data, origin="the calibration")


MEASURED_KEYS = {"sm_count", "clock_mhz", "compute_capability", "l1.size", "l1.line", "l1.sector",
                 "l1.hit_latency", "l1.assoc", "l2.size", "l2.hit_latency", "l2.assoc", "dram.base_latency"}


def arch_toml(arch: Arch, m: Measurements, base_name: str, date: str | None = None) -> str:
    """The Arch as TOML, each value commented with where it comes from."""
    when = date or datetime.date.today().isoformat()
    lines = [f"# {m.gpu}: measured by `tuiprof calibrate` on {when} (pointer-chasing microbenchmarks,",
             f"# SM cycles at {m.clock_mhz} MHz); values marked 'preset' come from the {base_name} preset.",
             "# DRAM batches (warps per SM: cycles): " +
             ", ".join(f"{w}: {c:.0f}" for w, c in m.dram_batches)]

    def value(v: Any) -> str:
        return f'"{v}"' if isinstance(v, str) else str(v)

    measured = MEASURED_KEYS if m.line_measured else MEASURED_KEYS - {"l1.line"}

    def note(key: str) -> str:
        return "measured" if key in measured else f"preset {base_name}"

    data = arch_to_mapping(arch)
    for k, v in data.items():
        if not isinstance(v, dict):
            comment = "" if k in ("name", "description") else f"  # {note(k)}"
            lines.append(f"{k} = {value(v)}{comment}")
    for section, values in data.items():
        if isinstance(values, dict):
            lines += ["", f"[{section}]"]
            for k, v in values.items():
                extra = ""
                if f"{section}.{k}" == "l1.assoc":
                    extra = f" ({units.size(m.l1_size)} measured, ways fitted to the preset's sets)"
                elif f"{section}.{k}" == "l2.size" and m.l2_note():
                    extra = f" ({m.l2_note()})"
                lines.append(f"{k} = {value(v)}  # {note(f'{section}.{k}')}{extra}")
    return "\n".join(lines) + "\n"


def write_calibrated(text: str, path: Path | None = None) -> Path:
    """Write the TOML as every output is written (`tuiprof.output`: atomically for a file, a
    device or FIFO written through, never replaced; a read-only file refused)."""
    from tuiprof.output import write_output

    target = path or calibrated_path()
    if path is None:
        target.parent.mkdir(parents=True, exist_ok=True)
    write_output(text, str(target))
    return target


# --------------------------------------------------------------------------- the GPU part


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


def strided_chain(footprint: int, stride: int) -> np.ndarray:
    """u32 words of a `footprint`-byte buffer whose chain visits every `stride`-th byte in order."""
    words = max(1, footprint // 4)
    step = max(1, stride // 4)
    nxt = np.zeros(words, np.uint32)
    idx = np.arange(0, words, step, dtype=np.int64)
    nxt[idx] = np.roll(idx, -1).astype(np.uint32)
    return nxt


def random_chain(footprint: int, granule: int, rng: np.random.Generator) -> np.ndarray:
    """A chain visiting every `granule`-byte slot of the buffer once, in random order (no
    prefetcher or open DRAM row helps), as u32 words."""
    words = max(1, footprint // 4)
    step = max(1, granule // 4)
    slots = np.arange(0, words, step, dtype=np.int64)
    order = rng.permutation(slots)
    nxt = np.zeros(words, np.uint32)
    nxt[order] = np.roll(order, -1).astype(np.uint32)
    return nxt


Progress = Callable[[str], None]


def measure(cuda: str = "cuda-bindings", quick: bool = False, progress: Progress | None = None,
            driver: Driver | None = None) -> Measurements:
    """Run the microbenchmarks on GPU 0 (see the module docstring), or through `driver` (which
    it then closes); needs a GPU. CalibrationError when a sweep does not show what it measures."""
    from tuiprof.build import build_program
    from tuiprof.collect.gpu import _open_driver, pack_params, require_gpu
    from tuiprof.ptx import parse_module

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


__all__ = ["CALIBRATED", "CalibrationError", "Measurements", "arch_toml", "base_preset", "calibrate", "calibrated_arch",
           "calibrated_path", "capacity", "fit_cache", "line_size", "load_calibrated", "measure",
           "random_chain", "refine_capacity", "sector_size", "strided_chain", "write_calibrated"]

