"""`TrialResult`: what one Monte Carlo trial of the memory-hierarchy model observed.

Units. Cache counters are in *sectors of the level*: ``Arch.l1.sector`` bytes for the L1 counters,
``Arch.l2.sector`` bytes for the L2 counters. An unsectored level (sector == line, e.g. the Fermi
L1 of 128 B) therefore counts one per line touched; Volta+ levels count 32 B sectors. A read
access is a sector a load asks for; a read hit is such a sector found valid. A write access is a
sector a store or atomic writes; an L2 write hit is such a sector that was valid before the write
(Baghsorkhi12 sec. 2.1: a store hits only a block that is already valid) or, on a write-back L2, any
sector a store writes (it completes in L2 without DRAM, as Nsight Compute counts it). The L1 keeps
no write hits (stores are write-through). DRAM counters are 32 B transactions (``Arch.dram.transaction``).
Atomics are counted with the stores.

The L2's read hits are the sectors it served (``l2_read_hits`` of ``l2_read_accesses``: the H2 of
the latency equation). With two L2 partitions (`tuiprof.arch.spec.L2Config.halves`) a read that
misses its SM's half is looked up again at its home half over the fabric; ``l2_lookups`` and
``l2_lookup_hits`` count both lookups (the far one over the fetched block), as Nsight Compute's
``lts__t_sector_op_read_hit_rate`` does: the kernel's L2 read figure. With one L2 they equal the
read accesses and hits.

A level that is absent (size 0) still counts its accesses, all as misses, so that H = 0 there
and the latency equation X = H1 t1 + (1 - H1)(H2 t2 + (1 - H2) Tm) stays valid (Baghsorkhi12, 6.1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Rows of the per-op counter matrix the trial kernels fill, and the TrialResult field of each.
C_L1_REQ, C_L1_RH, C_L1_RA, C_L1_WA, C_L2_RH, C_L2_RA, C_L2_WH, C_L2_WA, C_DR, C_DW, C_L2_LH, C_L2_LA = range(12)
N_COUNTS = 12
COUNTER_FIELDS = ("l1_requests", "l1_read_hits", "l1_read_accesses", "l1_write_accesses", "l2_read_hits",
                  "l2_read_accesses", "l2_write_hits", "l2_write_accesses", "dram_reads", "dram_writes",
                  "l2_lookup_hits", "l2_lookups")


def _ratio(num: np.ndarray | int, den: np.ndarray | int) -> float:
    n = int(np.sum(num))
    d = int(np.sum(den))
    return n / d if d else float("nan")


def _ratios(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.maximum(den, 1), np.nan)


SPAN_PER_VALUE = 4
"""`latency_counts` counts into one slot per cycle of the values' span while the span is at most
this many times the number of values (plus SPAN_FLOOR); past that it sorts."""
SPAN_FLOOR = 4096


def latency_counts(values: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values ascending, int64 count of each) of integer latencies `values`, each
    counted `weights[i]` times (default once): a trial's DRAM batch latencies tallied, or many
    trials' tallies pooled (their values and counts concatenated)."""
    v = np.asarray(values, dtype=np.int64).ravel()
    if v.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    w = None if weights is None else np.asarray(weights, dtype=np.int64).ravel()
    lo, hi = int(v.min()), int(v.max())
    if hi - lo <= SPAN_PER_VALUE * v.size + SPAN_FLOOR:  # latencies in cycles: a short span, no sort
        slots = np.bincount(v - lo, weights=w)
        distinct = np.flatnonzero(slots)
        counts = slots[distinct]
        return distinct + lo, (np.rint(counts).astype(np.int64) if w is not None else counts.astype(np.int64))
    distinct, inverse = np.unique(v, return_inverse=True)
    counts = np.bincount(inverse.ravel(), weights=w, minlength=distinct.size)
    return distinct, np.rint(counts).astype(np.int64)


@dataclass(frozen=True, eq=False)
class TrialResult:
    """One trial: per-op counters (int64 [n_ops], indexed by StaticOp id), DRAM batch latencies,
    per-SM L1 request counts. See the module docstring for units.

    When `op_ids` is given, the per-op arrays hold only those ops (the ones the trace accesses,
    in order; every other op's counters are 0 and its DRAM latency NaN) and `total_ops` is the
    op table's length: a trace of 65,536 ops of which a few are accessed keeps a few columns per
    trial, not 65,536 (64 trials and a sweep took 1 GB). `per_op` gives any of them whole; sums
    over the ops are the same either way."""

    index: int
    """Trial number within its Monte Carlo run (0-based)."""
    seed: int
    """The trial's own seed: ``run_trial(prepared, arch, md, seed)`` reproduces it exactly."""
    md: int
    """CTAs resident per SM (multithreading degree) the trial ran with."""
    l1_requests: np.ndarray
    """L1 line requests (after coalescing), loads and stores."""
    l1_read_hits: np.ndarray
    l1_read_accesses: np.ndarray
    l1_write_accesses: np.ndarray
    l2_read_hits: np.ndarray
    l2_read_accesses: np.ndarray
    l2_write_hits: np.ndarray
    l2_write_accesses: np.ndarray
    dram_reads: np.ndarray
    """DRAM read transactions caused by the op's L2 read misses (and, for a store or atomic
    that misses a write-through L2, the fetch of the sectors it did not write entirely)."""
    dram_writes: np.ndarray
    """DRAM write transactions written through by the op's L2 store misses (write-through L2,
    atomics, or no L2; a store on a write-back L2 writes none)."""
    l2_lookup_hits: np.ndarray
    """L2 read lookups that hit: the SM's half, and the home half's over the fabric (module docstring)."""
    l2_lookups: np.ndarray
    """L2 read lookups, in sectors: every read sector, plus each far lookup's fetched block."""
    dram_latency: np.ndarray
    """float64 [n_ops]: mean latency (cycles) of the op's DRAM reads; nan where it has none."""
    dram_batch_latencies: np.ndarray
    """Latency of every batch of concurrently issued DRAM requests, in queue order (those closed
    from the first counted access on): int32, or int64 if a value does not fit
    (`tuiprof.sim.trial.narrow_latencies`)."""
    dram_writebacks: int
    """DRAM write transactions of dirty L2 evictions (belonging to no op), from the first counted
    access on (a snapshot's warm-up CTAs are replayed, not counted)."""
    dram_writebacks_owed: int
    """DRAM write transactions the L2's dirty sectors still owe when the snapshot ends: written
    back after it, or when later CTAs evict them. Every dirty sector reaches DRAM once, so the
    kernel's write traffic counts them (on a write-back L2 most stores end here). With a warm-up,
    those beyond the ones owed when the counted CTAs began (negative when the counted CTAs wrote
    back more of the warm-up's dirty sectors than they left)."""
    sm_requests: np.ndarray
    """int64 [sm_count]: L1 requests issued by each SM."""
    elapsed: float
    """Wall-clock seconds the trial took."""
    op_ids: np.ndarray | None = None
    """The ops the per-op arrays hold (None: every op, by id)."""
    total_ops: int = 0
    """The op table's length when `op_ids` is given."""
    dram_batch_counts: tuple[np.ndarray, np.ndarray] | None = None
    """`dram_batch_latencies` tallied (`latency_counts`): the distinct latencies, ascending, and
    how many batches had each. Made once on the trial's own thread, so that the analysis pools
    thousands of trials' tens of thousands of batches by adding up a few dozen counts per trial
    (issue 25: pooling the raw latencies held the GIL for seconds). None: tallied when asked."""

    @property
    def n_ops(self) -> int:
        return self.total_ops if self.op_ids is not None else int(self.l1_requests.shape[0])

    def per_op(self, name: str) -> np.ndarray:
        """Per-op array `name` (a counter, or ``dram_latency``) over the whole op table."""
        a = getattr(self, name)
        if self.op_ids is None:
            return a
        out = np.full(self.total_ops, np.nan) if name == "dram_latency" else np.zeros(self.total_ops, dtype=a.dtype)
        out[self.op_ids] = a
        return out

    # Kernel-wide headline figures.
    @property
    def l1_read_hit_ratio(self) -> float:
        return _ratio(self.l1_read_hits, self.l1_read_accesses)

    @property
    def l2_read_hit_ratio(self) -> float:
        return _ratio(self.l2_read_hits, self.l2_read_accesses)

    @property
    def l2_write_hit_ratio(self) -> float:
        return _ratio(self.l2_write_hits, self.l2_write_accesses)

    @property
    def mean_dram_latency(self) -> float:
        """Tm: the mean latency seen by DRAM read transactions (nan when there are none)."""
        n = int(self.dram_reads.sum())
        if n == 0:
            return float("nan")
        lat = np.where(self.dram_reads > 0, self.dram_latency, 0.0)
        return float(np.sum(lat * self.dram_reads) / n)

    def batch_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """(distinct DRAM batch latencies ascending, batches with each): `dram_batch_counts`, or
        tallied from `dram_batch_latencies` when the result was made without it."""
        if self.dram_batch_counts is not None:
            return self.dram_batch_counts
        return latency_counts(self.dram_batch_latencies)

    @property
    def mean_batch_latency(self) -> float:
        """Mean over DRAM batches, reads and writes alike (nan when DRAM was never used)."""
        b = self.dram_batch_latencies
        return float(b.mean()) if b.size else float("nan")

    def headline(self) -> dict[str, float]:
        """The three kernel-wide hit ratios the Monte Carlo convergence test watches."""
        return {"l1_read_hit_ratio": self.l1_read_hit_ratio, "l2_read_hit_ratio": self.l2_read_hit_ratio,
                "l2_write_hit_ratio": self.l2_write_hit_ratio}

    # Per-op ratios (float64 [n_ops], nan where the op has no such access).
    def op_l1_read_hit_ratio(self) -> np.ndarray:
        return _ratios(self.per_op("l1_read_hits"), self.per_op("l1_read_accesses"))

    def op_l2_read_hit_ratio(self) -> np.ndarray:
        return _ratios(self.per_op("l2_read_hits"), self.per_op("l2_read_accesses"))

    def op_l2_write_hit_ratio(self) -> np.ndarray:
        return _ratios(self.per_op("l2_write_hits"), self.per_op("l2_write_accesses"))
