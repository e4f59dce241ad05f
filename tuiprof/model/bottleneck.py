"""The throughput model and bottleneck of Zhang11 (Zhang & Owens, HPCA'11).

Three components run concurrently (sec. 3): the instruction pipeline, shared memory and global
memory. Each one's time is its work over its sustained throughput at the kernel's warp-level
parallelism (sec. 4); the slowest is the bottleneck and, with near-perfect overlap, the kernel
time. Removing it exposes the next bottleneck (sec. 3: "if this bottleneck is removed, what will
be the next component"). A program split by barriers into stages is serialized stage by stage
when a single CTA is resident per SM; with several CTAs the stages overlap and one bottleneck is
found for the whole program (sec. 3).

- instruction time: warp instructions of each type (Table 1: type I 10 units, II 8, III 4, IV 1
  per SM) in type-II equivalents (8 / units each) over the instruction throughput;
- shared memory time: shared transactions, corrected for bank conflicts (`bank_conflict_degree`,
  sec. 4.2), x bytes per transaction over the shared memory bandwidth;
- global memory time: global memory bytes (transactions after coalescing x their size, sec. 4.3)
  over the global memory bandwidth.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tuiprof.arch.spec import Arch
from tuiprof.errors import UsageError

INSTRUCTION = "instruction pipeline"
SHARED = "shared memory"
GLOBAL = "global memory"
COMPONENTS = (INSTRUCTION, SHARED, GLOBAL)

FUNCTIONAL_UNITS = {"I": 10, "II": 8, "III": 4, "IV": 1}
"""Zhang11 Table 1: functional units per SM that run each instruction type (GT200)."""

# Zhang11 sec. 5.1: for {6, 16, 32} active warps per SM, "an instruction throughput of
# {8.39, 9.05, 9.33} gigainstructions/s and a shared memory bandwidth of {870, 1112, 1165} GB/s"
# (type II instructions, the whole GTX 285; read off Figure 2).
GT200_WARPS = (6.0, 16.0, 32.0)
GT200_INSTRUCTION_GIPS = (8.39, 9.05, 9.33)
GT200_SHARED_GBS = (870.0, 1112.0, 1165.0)
GT200_GLOBAL_GBS = 160.0
"""Zhang11 sec. 4.3: the GTX 285's theoretical peak, 2.484 GHz x 512 bit / 8 = 160 GB/s."""


# ---------------------------------------------------------------------------------------------
# Peak throughputs (Zhang11's formulas).

def peak_instruction_throughput(units: int, clock_ghz: float, sm_count: int, warp_size: int = 32) -> float:
    """Sec. 4.1: numberFunctionalUnits x frequency x numberSM / warpSize, in Ginstructions/s."""
    return units * clock_ghz * sm_count / warp_size


def peak_shared_bandwidth(sps_per_sm: int, sm_count: int, clock_ghz: float, word: int = 4) -> float:
    """Sec. 4.2: numberSP x numberSM x frequency x 4 B, in GB/s."""
    return sps_per_sm * sm_count * clock_ghz * word


def peak_global_bandwidth(memory_clock_ghz: float, bus_bits: int) -> float:
    """Sec. 4.3: memoryFrequency x busWidth / 8 bits per byte, in GB/s."""
    return memory_clock_ghz * bus_bits / 8.0


# ---------------------------------------------------------------------------------------------
# Sustained throughputs at a warp-level parallelism.

@dataclass(frozen=True)
class Throughputs:
    """Sustained rates of the three components at one warp-level parallelism (whole GPU)."""

    instruction_gips: float
    """Type-II warp instructions per second, in units of 1e9."""
    shared_gbs: float
    global_gbs: float
    warps_per_sm: float
    source: str


def _interp_from_origin(warps: float, xs: Sequence[float], ys: Sequence[float]) -> float:
    """Piecewise-linear through (0, 0) and the measured points, flat past the last one."""
    return float(np.interp(warps, (0.0, *xs), (0.0, *ys)))


def gt200_throughputs(warps_per_sm: float) -> Throughputs:
    """Zhang11's measured GTX 285 throughputs (sec. 5.1, Fig. 2) at `warps_per_sm`.

    Exact at 6, 16 and 32 warps; linear between them; below 6 warps linear to zero at zero
    warps (the pipeline is latency bound there: Fig. 2 rises from the origin, type II saturating
    at 6 warps, sec. 4.1). Global memory: the 160 GB/s peak of sec. 4.3 (the paper measures a
    synthetic benchmark of the same configuration instead; pass a measured figure when known).
    """
    return Throughputs(_interp_from_origin(warps_per_sm, GT200_WARPS, GT200_INSTRUCTION_GIPS),
                       _interp_from_origin(warps_per_sm, GT200_WARPS, GT200_SHARED_GBS),
                       GT200_GLOBAL_GBS, float(warps_per_sm), "Zhang11 (GTX 285 measured)")


def scaled_throughputs(arch: Arch, warps_per_sm: float, *, warp_insts_per_cycle: float = 1.0,
                       shared_banks: int = 32, bank_width: int = 4,
                       instruction_saturation_warps: float = 6.0,
                       shared_saturation_warps: float = 16.0,
                       global_gbs: float | None = None) -> Throughputs:
    """Throughputs for an Arch Zhang11 did not measure: peak x min(1, warps / saturation).

    Peaks: ``warp_insts_per_cycle`` type-II warp instructions per cycle per SM (GT200: 8 SPs /
    32 lanes = 0.25); one ``shared_banks`` x ``bank_width`` byte shared transaction per cycle per
    SM; the Arch's DRAM bandwidth (``dram.bandwidth_gbs``, the figure MWP/CWP and the timing model
    use too) unless ``global_gbs`` is given. Saturation points follow
    Zhang11's GT200 curves: the type-II pipeline saturates at 6 warps (sec. 4.1), shared
    memory, a longer pipeline, reaches 95% of its 32-warp bandwidth at 16 warps (sec. 5.1).
    """
    ghz = arch.clock_mhz / 1000.0
    inst_peak = warp_insts_per_cycle * ghz * arch.sm_count
    shared_peak = shared_banks * bank_width * ghz * arch.sm_count
    if global_gbs is None:
        global_gbs = arch.dram.bandwidth_gbs
    return Throughputs(inst_peak * min(1.0, warps_per_sm / instruction_saturation_warps),
                       shared_peak * min(1.0, warps_per_sm / shared_saturation_warps),
                       float(global_gbs), float(warps_per_sm), f"scaled peaks of {arch.name}")


# ---------------------------------------------------------------------------------------------
# Bank conflicts (sec. 4.2).

def bank_conflict_degree(addresses: Sequence[int] | np.ndarray, mask: int = 0xFFFFFFFF,
                         banks: int = 32, width: int = 4, group: int = 32) -> int:
    """The n of an n-way bank conflict of one shared memory warp access.

    Adjacent `width`-byte words sit in adjacent banks; lanes reading different words of one bank
    are serialized, lanes reading the same word share it (broadcast). Lanes are serviced `group`
    at a time: 32 (a warp, 32 banks, Fermi and later) or 16 (a half-warp, 16 banks, GT200:
    ``banks=16, group=16``). Returns the largest number of distinct words any bank must deliver
    within one group (1 = conflict free, 0 = no active lane).
    """
    return int(shared_transactions(np.asarray(addresses, dtype=np.uint64).reshape(1, -1),
                                   np.array([mask], dtype=np.uint64), banks, width, group,
                                   reduce="max")[0])


def shared_transactions(addresses: np.ndarray, masks: np.ndarray, banks: int = 32, width: int = 4,
                        group: int = 32, reduce: str = "sum") -> np.ndarray:
    """Per warp access (rows of `addresses`, R x 32): shared memory transactions after bank
    conflicts, the sum over lane groups of each group's conflict degree (sec. 4.2: "3 threads
    read from different locations in the same bank ... 3 memory transactions"); with
    ``reduce='max'`` the largest degree instead (`bank_conflict_degree`). The wavefronts of
    `tuiprof.model.shared` for lanes of ``banks * width / group`` bytes (4 B on 32 banks by warp,
    or 16 banks by half-warp)."""
    from tuiprof.model.wavefronts import wavefronts

    addr = np.ascontiguousarray(addresses, dtype=np.uint64)
    if addr.ndim != 2 or addr.shape[1] != 32:
        raise UsageError("shared_transactions expects an R x 32 array of lane addresses")
    if banks <= 0 or width <= 0 or group <= 0:
        raise UsageError("banks, width and group must be positive")
    r = addr.shape[0]
    mask = np.asarray(masks, dtype=np.uint64).reshape(-1).astype(np.uint32)
    total, _, worst = wavefronts(addr, mask, np.zeros(r, dtype=np.int32),
                                 np.array([max(1, banks * width // group)], dtype=np.int64),
                                 np.arange(r, dtype=np.int64), int(banks), int(width))
    return worst if reduce == "max" else total


# ---------------------------------------------------------------------------------------------
# The bottleneck.

@dataclass(frozen=True)
class StageWork:
    """The work of one program stage (between barriers), summed over the whole grid."""

    warp_insts: Mapping[str, float] | float
    """Warp instructions by type ('I'..'IV', Table 1), or one number of type-II instructions."""
    shared_transactions: float = 0.0
    """Shared memory transactions after bank conflicts."""
    shared_bytes_per_transaction: float = 128.0
    """banks x bank width: 128 B on 32 x 4 B banks, 64 B on GT200's 16 half-warp banks."""
    global_bytes: float = 0.0
    """Global memory traffic after coalescing (transactions x transaction size)."""

    def type_ii_insts(self) -> float:
        if isinstance(self.warp_insts, Mapping):
            unknown = set(self.warp_insts) - set(FUNCTIONAL_UNITS)
            if unknown:
                raise UsageError(f"unknown instruction type {sorted(unknown)[0]!r}",
                                 "Zhang11 Table 1 types are I, II, III, IV")
            return sum(n * FUNCTIONAL_UNITS["II"] / FUNCTIONAL_UNITS[t] for t, n in self.warp_insts.items())
        return float(self.warp_insts)


def component_times(work: StageWork, thr: Throughputs) -> dict[str, float]:
    """Seconds each component needs for `work` at the sustained rates `thr`."""
    def per(x: float, rate: float) -> float:
        return 0.0 if x == 0 else (x / rate if rate > 0 else math.inf)

    return {INSTRUCTION: per(work.type_ii_insts(), thr.instruction_gips * 1e9),
            SHARED: per(work.shared_transactions * work.shared_bytes_per_transaction, thr.shared_gbs * 1e9),
            GLOBAL: per(work.global_bytes, thr.global_gbs * 1e9)}


@dataclass(frozen=True)
class StageBottleneck:
    times: dict[str, float]
    bottleneck: str
    time: float


@dataclass(frozen=True)
class Bottleneck:
    """Zhang11's verdict: component times, the bottleneck, and the next one once removed."""

    times: dict[str, float]
    """Seconds per component, summed over the stages."""
    bottleneck: str
    time: float
    """Predicted kernel time: the bottleneck's time, or the sum of each stage's when serialized."""
    next_bottleneck: str
    time_without_bottleneck: float
    """Predicted time if the bottleneck's cost were zero (its time overlapped by the others)."""
    speedup_if_removed: float
    serialized: bool
    """True when stages run one after another (one CTA per SM and more than one stage)."""
    stages: tuple[StageBottleneck, ...]
    throughputs: Throughputs


def _verdict(stage_times: list[dict[str, float]], serialized: bool,
             candidates: Sequence[str] = COMPONENTS) -> tuple[float, str, list[StageBottleneck]]:
    """(time, bottleneck among `candidates`, per-stage verdicts); ties go to COMPONENTS order."""
    stages = [StageBottleneck(t, max(candidates, key=lambda c: t[c]), max(t.values())) for t in stage_times]
    totals = {c: sum(t[c] for t in stage_times) for c in COMPONENTS}
    if serialized:
        time = sum(s.time for s in stages)
        share = {c: sum(s.time for s in stages if s.bottleneck == c) for c in candidates}
        return time, max(candidates, key=lambda c: (share[c], totals[c])), stages
    return max(totals.values()), max(candidates, key=lambda c: totals[c]), stages


def bottleneck(stages: StageWork | Sequence[StageWork], thr: Throughputs,
               ctas_per_sm: int = 2) -> Bottleneck:
    """The bottleneck of a kernel made of `stages` at the throughputs `thr` (sec. 3).

    With one CTA per SM and several stages, each stage is its own max and the stages add up; the
    bottleneck is the component that bounds the most time. Otherwise the components' totals
    overlap and the largest is the bottleneck. The next bottleneck is found the same way with the
    bottleneck's time set to zero.
    """
    seq = [stages] if isinstance(stages, StageWork) else list(stages)
    if not seq:
        raise UsageError("the bottleneck model needs at least one stage of work")
    serialized = ctas_per_sm <= 1 and len(seq) > 1
    times = [component_times(s, thr) for s in seq]
    time, first, st = _verdict(times, serialized)
    removed = [dict(t, **{first: 0.0}) for t in times]
    time2, second, _ = _verdict(removed, serialized, [c for c in COMPONENTS if c != first])
    totals = {c: sum(t[c] for t in times) for c in COMPONENTS}
    speedup = time / time2 if time2 > 0 else math.inf
    return Bottleneck(totals, first, time, second, time2, speedup, serialized, tuple(st), thr)

