"""`tuiprof calibrate`'s data half: pointer-chasing microbenchmarks for the GPU at hand (Baghsorkhi12 sec. 2.1
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
  concurrent requests: 1, 2, 4 ... warps per SM each chasing its own chain (Baghsorkhi12's Tm).

The analysis of the sweeps (`capacity`, `sector_size`, `line_size`, `calibrated_arch`,
`arch_toml`) is plain functions over arrays, tested without a GPU; `tuiprof.collect.gpu.calibrate`
runs the kernels (`measure`) and needs one. Everything not measured is the preset of the same compute capability, and the file
says which values are measured and which come from it.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tuiprof import units
from tuiprof.arch.presets import CALIBRATED, calibrated_path
from tuiprof.arch.spec import Arch, arch_from_mapping, arch_to_mapping
from tuiprof.errors import TuiprofError

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


# --------------------------------------------------------------------------- the dependent-load chains


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


__all__ = ["CALIBRATED", "CalibrationError", "Measurements", "arch_toml", "base_preset", "calibrated_arch",
           "calibrated_path", "capacity", "fit_cache", "line_size", 
           "random_chain", "refine_capacity", "sector_size", "strided_chain", "write_calibrated"]

