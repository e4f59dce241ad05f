"""The timing model: kernel time from Hong & Kim's MWP/CWP (HongKim09) fed with what the simulator
measured, floored by DRAM and L2 bandwidth.

Hong & Kim model a GPU without caches: every memory warp instruction waits Mem_LD cycles and moves
Load_bytes_per_warp bytes over DRAM. With caches (Baghsorkhi12), the simulation says what a memory
instruction really costs at a given MD (resident CTAs per SM):

- Mem_LD is the access-weighted expected latency X of the global loads (Baghsorkhi12 sec. 6.1), so L1
  and L2 hits shorten it and thrashing lengthens it;
- Load_bytes_per_warp is the bytes one memory warp instruction actually moves at the level whose
  bandwidth binds: simulated DRAM transactions x 32 B, or simulated L2 sectors x 32 B, per memory
  warp instruction (not the 32 x 4 B a warp uses), paired with that level's bandwidth as
  Mem_Bandwidth in MWP_peak_BW;
- N = MD x warps per CTA, so latency hiding grows with the MD while the cache share shrinks.

T(MD) = max(MWP/CWP's Exec_cycles_app / clock, DRAM bytes / DRAM bandwidth, L2 bytes / L2
bandwidth, warp instructions x issue cycles / SMs / clock), over the whole grid (the snapshot's
figures x grid CTAs / snapshot CTAs). The DRAM floor is Zhang11's global memory time on the same
bytes and bandwidth, and the issue floor its instruction time at the peak issue rate, so the
bottleneck model and this one cannot contradict each other: T is never below them. (The issue
floor also guards the slides' case rule, which takes the memory-bound formula whenever
Comp_cycles > Mem_cycles and then counts only Comp_p (MWP - 1) of a compute-heavy warp's work.)

Two constants are not measured for the GPUs we model and enter the gain's range: the departure
delays (the Arch's values are derived from bandwidth shares) and the sustained L2 bandwidth.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tuiprof.arch.spec import Arch
from tuiprof.errors import UsageError
from tuiprof.model.mwp_cwp import MwpCwp, mwp_cwp_for_arch
from tuiprof.stats import ci_half_width

DEPARTURE_RANGE = (0.5, 2.0)
"""Factors on the Arch's departure delays spanned by the gain's range: they are derived from
bandwidth shares, not measured (Hong & Kim measure them per GPU with microbenchmarks)."""
L2_BANDWIDTH_RANGE = (0.7, 1.3)
"""Factors on the Arch's sustained L2 bandwidth spanned by the gain's range: published
measurements differ by about +-30% with clock, part and access pattern."""
RANGE_ROUNDS = 100
"""Bootstrap rounds per setting of the constants for the gain's range."""

MWP_BOUND = "MWP/CWP"
DRAM_BOUND = "DRAM bandwidth"
L2_BOUND = "L2 bandwidth"
ISSUE_BOUND = "instruction issue"
TIMING = "timing model"


@dataclass(frozen=True)
class KernelShape:
    """What the trace says about the kernel: the same at every MD."""

    threads_per_cta: int
    grid_ctas: int
    snapshot_ctas: int
    snapshot_warps: int
    coal_mem_insts: float
    """#Coal_Mem_insts per warp (HongKim09)."""
    uncoal_mem_insts: float
    """#Uncoal_Mem_insts per warp."""
    uncoal_per_mw: float
    """#Uncoal_per_mw: L1 requests per uncoalesced memory warp instruction."""
    cta_insts: np.ndarray | None
    """Dynamic warp instructions per CTA when the trace has them (else HongKim09's estimate)."""

    @property
    def grid_scale(self) -> float:
        """Grid CTAs per snapshot CTA (Baghsorkhi12 sec. 3.1: the snapshot stands for the grid)."""
        return self.grid_ctas / max(self.snapshot_ctas, 1)

    @property
    def snapshot_mem_insts(self) -> float:
        """Memory warp instructions (global and local) of the snapshot."""
        return (self.coal_mem_insts + self.uncoal_mem_insts) * self.snapshot_warps


@dataclass(frozen=True)
class Traffic:
    """What the simulation measured at one MD for the snapshot (one trial, or a mean of trials)."""

    mem_ld: float
    """Access-weighted expected latency X of the global loads, cycles (Mem_LD)."""
    dram_transactions: float
    """DRAM transactions: reads, write-throughs and write-backs."""
    l2_sectors: float
    """L2 sectors read and written (the L1's misses and the stores)."""


@dataclass(frozen=True)
class Constants:
    """The machine constants the timing model uses; `constants` reads them from an Arch."""

    departure_del_coal: float
    departure_del_uncoal: float
    l2_gbs: float
    dram_gbs: float


def constants(arch: Arch, departure_factor: float = 1.0, l2_factor: float = 1.0) -> Constants:
    """The Arch's constants, the uncertain ones scaled by the given factors."""
    return Constants(arch.departure_del_coal * departure_factor, arch.departure_del_uncoal * departure_factor,
                     arch.l2.bandwidth_gbs * l2_factor if arch.l2.enabled else 0.0, float(arch.dram.bandwidth_gbs))


@dataclass(frozen=True)
class KernelTime:
    """The timing model's prediction for one MD, with every term."""

    md: int
    mwp: MwpCwp
    mwp_s: float
    """Exec_cycles_app / clock: MWP/CWP's time for the grid."""
    dram_floor_s: float
    """Grid DRAM bytes / DRAM bandwidth (Zhang11's global memory time)."""
    l2_floor_s: float
    """Grid L2 bytes / L2 bandwidth (0 without an L2)."""
    issue_floor_s: float
    """Grid warp instructions x issue cycles / active SMs / clock: the pipeline's peak rate."""
    time_s: float
    """The largest of the four: the predicted kernel time."""
    bound: str
    """What sets it: `MWP_BOUND`, `DRAM_BOUND`, `L2_BOUND` or `ISSUE_BOUND`."""

    @property
    def bound_label(self) -> str:
        """The bound in words, with MWP/CWP's case and limiter ('MWP/CWP: memory bound, MWP
        limited by bandwidth')."""
        if self.bound != MWP_BOUND:
            return self.bound
        return f"{MWP_BOUND}: {self.mwp.case}, MWP limited by {self.mwp.mwp_limiter}"
    bandwidth_level: str
    """The level whose bytes and bandwidth MWP_peak_BW uses: 'DRAM' or 'L2', whichever binds."""
    load_bytes_per_warp: float
    """Bytes one memory warp instruction moves at that level (simulated, not 32 x 4 B)."""
    dram_bytes: float
    l2_bytes: float
    """Grid bytes moved at each level."""


def kernel_time(arch: Arch, shape: KernelShape, traffic: Traffic, md: int,
                consts: Constants | None = None) -> KernelTime:
    """T(md) = max(MWP/CWP, DRAM floor, L2 floor, issue floor) for the whole grid (see the module
    docstring)."""
    if md < 1:
        raise UsageError(f"the timing model needs at least one CTA per SM, got MD {md}")
    c = consts or constants(arch)
    scale = shape.grid_scale
    dram_bytes = traffic.dram_transactions * arch.dram.transaction * scale
    l2_bytes = traffic.l2_sectors * arch.l2.sector * scale if c.l2_gbs > 0 else 0.0
    dram_floor = dram_bytes / (c.dram_gbs * 1e9)
    l2_floor = l2_bytes / (c.l2_gbs * 1e9) if c.l2_gbs > 0 else 0.0
    grid_insts = max(shape.snapshot_mem_insts * scale, 1e-300)
    level, bytes_, gbs = ("L2", l2_bytes, c.l2_gbs) if l2_floor > dram_floor else ("DRAM", dram_bytes, c.dram_gbs)
    load_bytes = bytes_ / grid_insts
    mem_ld = traffic.mem_ld if math.isfinite(traffic.mem_ld) and traffic.mem_ld > 0 else float(arch.dram.base_latency)
    w = mwp_cwp_for_arch(arch, ctas_per_sm=md, threads_per_block=shape.threads_per_cta, blocks=shape.grid_ctas,
                         coal_mem_insts=shape.coal_mem_insts, uncoal_mem_insts=shape.uncoal_mem_insts,
                         uncoal_per_mw=shape.uncoal_per_mw, mem_ld=mem_ld, cta_insts=shape.cta_insts,
                         departure_del_coal=c.departure_del_coal, departure_del_uncoal=c.departure_del_uncoal,
                         issue_cycles=arch.warp_size / arch.cores_per_sm, load_bytes_per_warp=load_bytes,
                         mem_bandwidth_gbs=gbs)
    hz = arch.clock_mhz * 1e6
    mwp_s = w.exec_cycles_app / hz
    warps = -(-shape.threads_per_cta // arch.warp_size) * shape.grid_ctas
    issue_floor = w.comp_cycles * warps / min(arch.sm_count, shape.grid_ctas) / hz
    terms = {MWP_BOUND: mwp_s, DRAM_BOUND: dram_floor, L2_BOUND: l2_floor, ISSUE_BOUND: issue_floor}
    bound = max(terms, key=lambda k: terms[k])
    return KernelTime(md, w, mwp_s, dram_floor, l2_floor, issue_floor, terms[bound], bound, level, load_bytes,
                      dram_bytes, l2_bytes)


@dataclass(frozen=True)
class MdTiming:
    """The timing model at every MD = 1 .. max: the headline of the MD decision."""

    times: tuple[KernelTime, ...]
    best_md: int

    def time(self, md: int) -> KernelTime:
        return self.times[md - 1]

    def relative_performance(self, md: int) -> float:
        """Throughput relative to MD = 1: T(1) / T(md)."""
        return self.times[0].time_s / self.time(md).time_s if self.time(md).time_s > 0 else math.inf

    def gain(self, md: int, over: int) -> float:
        """Predicted speedup of `md` over `over`, minus one: T(over) / T(md) - 1."""
        return self.time(over).time_s / self.time(md).time_s - 1.0 if self.time(md).time_s > 0 else math.inf


def predict_timing(arch: Arch, shape: KernelShape, traffic: Sequence[Traffic],
                   consts: Constants | None = None) -> MdTiming:
    """T(N) for MD = 1, 2, ... from each MD's simulated `traffic` (in MD order); the best MD is the
    fastest, ties going to the larger MD (more warps to hide what the model does not see)."""
    if not traffic:
        raise UsageError("the timing model needs the simulation of MD = 1 at least")
    times = tuple(kernel_time(arch, shape, t, md, consts) for md, t in enumerate(traffic, 1))
    best = min(times, key=lambda k: (k.time_s, -k.md))
    return MdTiming(times, best.md)


def mean_traffic(table: np.ndarray) -> Traffic:
    """The mean over trials of `traffic_table` rows (NaN latencies ignored)."""
    lat = table[:, 0][np.isfinite(table[:, 0])]
    return Traffic(float(lat.mean()) if lat.size else math.nan, float(table[:, 1].mean()), float(table[:, 2].mean()))


def paired_resample(rng: np.random.Generator, n_a: int, n_b: int) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap indices into two MDs' trials that keep their pairing: trial i of every MD ran with
    the same seed (common random numbers), so the trials both MDs have are drawn together (their
    shared randomness cancels in the gain) and the rest of the longer run on its own."""
    common = min(n_a, n_b)
    joint = rng.integers(0, common, common)

    def rest(n: int) -> np.ndarray:
        return np.concatenate([joint, rng.integers(common, n, n - common)]) if n > common else joint

    return rest(n_a), rest(n_b)


def gain_range(arch: Arch, shape: KernelShape, tables: Sequence[np.ndarray], md: int, over: int,
               rounds: int = RANGE_ROUNDS, seed: int = 0) -> tuple[float, float]:
    """The range of the predicted gain of `md` over `over` from the trials and from the uncertain
    constants: for each setting of the departure delays (x `DEPARTURE_RANGE` and 1) and of the L2
    bandwidth (x `L2_BANDWIDTH_RANGE` and 1), the two MDs' trials (`tables`, rows of (Mem_LD, DRAM
    transactions, L2 sectors), MD = 1, 2, ...) are resampled with replacement, in pairs
    (`paired_resample`), and the gain is recomputed; the range spans the 2.5th to the 97.5th
    percentile of every setting."""
    rng = np.random.default_rng(seed)
    a, b = tables[md - 1], tables[over - 1]
    lo, hi = math.inf, -math.inf
    for dep in (DEPARTURE_RANGE[0], 1.0, DEPARTURE_RANGE[1]):
        for l2 in (L2_BANDWIDTH_RANGE[0], 1.0, L2_BANDWIDTH_RANGE[1]):
            c = constants(arch, dep, l2)
            gains = np.empty(rounds)
            for k in range(rounds):
                ia, ib = paired_resample(rng, len(a), len(b))
                t_md = kernel_time(arch, shape, mean_traffic(a[ia]), md, c).time_s
                t_over = kernel_time(arch, shape, mean_traffic(b[ib]), over, c).time_s
                gains[k] = t_over / t_md - 1.0 if t_md > 0 else math.inf
            p_lo, p_hi = np.percentile(gains, [2.5, 97.5])
            lo, hi = min(lo, float(p_lo)), max(hi, float(p_hi))
    return lo, hi


def trial_times(arch: Arch, shape: KernelShape, table: np.ndarray, md: int) -> np.ndarray:
    """T(md) predicted from each trial's traffic alone (`table` rows as in `gain_range`)."""
    c = constants(arch)
    return np.array([kernel_time(arch, shape, Traffic(*map(float, row)), md, c).time_s for row in table])


def paired_gain_interval(times_md: np.ndarray, times_over: np.ndarray) -> tuple[float, float]:
    """The 95% confidence interval of the mean gain of one MD over another from the trials both
    ran (`trial_times` of each, in trial order): trial i of every MD has the same seed, so each
    pair's gain is mostly the MD's doing; Student's t on the pairs' gains. Infinite below two
    pairs. It screens which MDs can still change the MD decision (the decision itself uses each
    MD's mean traffic)."""
    n = min(len(times_md), len(times_over))
    if n < 2:
        return -math.inf, math.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        gains = times_over[:n] / times_md[:n] - 1.0
    if not np.all(np.isfinite(gains)):
        return -math.inf, math.inf
    half = ci_half_width(float(np.std(gains, ddof=1)), n)
    mean = float(np.mean(gains))
    return mean - half, mean + half
