"""One Monte Carlo trial of the stochastic memory-hierarchy model (Baghsorkhi12 sec. 3).

A trial is a pure function of (prepared trace, arch parameters, MD, seed): it draws all its
randomness from its own SplitMix64 stream, so results do not depend on the thread that runs it.
Steps 1-4 (CTA placement, intra-core scheduling, schedule deviation, inter-core merge) are
`tuiprof.sim.schedule`'s; steps 5-7 (L1s, L2, DRAM batches) are the replay kernel of
`tuiprof.sim.replay`, compiled per cache and DRAM geometry. The model's rules, step by step, are
written out in ARCHITECTURE.md ("The stochastic memory-hierarchy model") and in
`tuiprof.sim.reference`, the kernel this one reproduces exactly.
"""

from __future__ import annotations

import time

import numpy as np

from tuiprof.arch.spec import Arch
from tuiprof.sim.prepared import P_L1_LINE, P_SM, Prepared, pack_arch
from tuiprof.sim.replay import Geometry, replay_kernel, runtime_params
from tuiprof.sim.results import (
    C_DR,
    C_DW,
    C_L1_RA,
    C_L1_REQ,
    C_L1_RH,
    C_L1_WA,
    C_L2_LA,
    C_L2_LH,
    C_L2_RA,
    C_L2_RH,
    C_L2_WA,
    C_L2_WH,
    TrialResult,
    latency_counts,
)
from tuiprof.sim.rng import rng_new
from tuiprof.sim.schedule import order_accesses


def params_for(prepared: Prepared, arch: Arch | np.ndarray | None) -> np.ndarray:
    """The `pack_arch` vector of `arch` (an Arch, a vector, or None for the prepared Arch),
    checked against the preparation (same L1 line size and SM count)."""
    if arch is None:
        arch = prepared.arch
    if isinstance(arch, Arch):
        if not prepared.compatible(arch):
            raise ValueError(f"arch {arch.name!r} differs from the prepared one in L1 line size or SM count; "
                             "prepare the trace again")
        return pack_arch(arch)
    p = np.ascontiguousarray(arch, dtype=np.int64)
    if p[P_L1_LINE] != prepared.arch.l1.line or p[P_SM] != prepared.sm_count:
        raise ValueError("arch parameters differ from the prepared arch in L1 line size or SM count")
    return p


def normal_seed(seed: int) -> int:
    """`seed` as the int64 the kernels take (larger ints reduced to their low 64 bits)."""
    return int(np.uint64(int(seed) & 0xFFFFFFFFFFFFFFFF).astype(np.int64))


def trial_result(prepared: Prepared, md: int, seed: int, index: int, counts: np.ndarray, lat_sum: np.ndarray,
                 batches: np.ndarray, writebacks: int, owed: int, elapsed: float) -> TrialResult:
    """A TrialResult from a kernel's outputs (per-op counters, DRAM read latency sums, batch
    latencies, write-back transactions of evictions and those owed at the end)."""
    reads = counts[C_DR]
    with np.errstate(invalid="ignore", divide="ignore"):
        lat = np.where(reads > 0, lat_sum / np.maximum(reads, 1), np.nan)
    used = prepared.used_ops()
    keep = used if used.size < prepared.n_ops // 2 else None  # a few ops of many: keep their columns only

    def col(a: np.ndarray) -> np.ndarray:
        return a[keep] if keep is not None else a.copy()

    batches = narrow_latencies(batches)
    return TrialResult(
        index=index, seed=seed, md=int(md),
        l1_requests=col(counts[C_L1_REQ]), l1_read_hits=col(counts[C_L1_RH]),
        l1_read_accesses=col(counts[C_L1_RA]), l1_write_accesses=col(counts[C_L1_WA]),
        l2_read_hits=col(counts[C_L2_RH]), l2_read_accesses=col(counts[C_L2_RA]),
        l2_write_hits=col(counts[C_L2_WH]), l2_write_accesses=col(counts[C_L2_WA]),
        dram_reads=col(counts[C_DR]), dram_writes=col(counts[C_DW]), dram_latency=col(lat),
        l2_lookup_hits=col(counts[C_L2_LH]), l2_lookups=col(counts[C_L2_LA]),
        dram_batch_latencies=batches, dram_batch_counts=latency_counts(batches), dram_writebacks=int(writebacks), dram_writebacks_owed=int(owed),
        sm_requests=prepared.sm_requests.copy(), elapsed=elapsed, op_ids=keep,
        total_ops=prepared.n_ops if keep is not None else 0)


def narrow_latencies(batches: np.ndarray) -> np.ndarray:
    """`batches` (int64 cycles) as int32 when every value fits, else unchanged: a result keeps
    its batch latencies for as long as the run is analysed (2.8 MB a trial of spmv-b128 in
    int64, 100-odd trials in a default report with its MD sweep)."""
    if batches.size and (batches.min() < np.iinfo(np.int32).min or batches.max() > np.iinfo(np.int32).max):
        return batches
    return batches.astype(np.int32)


def trial_arrays(prepared: Prepared, params: np.ndarray, md: int, seed: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """The kernels' outputs for one trial: ``(counts [N_COUNTS, n_ops], DRAM read latency sums
    [n_ops], batch latencies, write-back transactions of evictions, those owed at the end)``."""
    geometry = Geometry.of(params)
    kernel = replay_kernel(geometry)
    co = prepared.coalesced
    S = int(params[P_SM])
    st = rng_new(seed)
    order, lab = order_accesses(st, S, md, prepared.seq_epoch, prepared.warp_seq_off, prepared.warp_cta,
                                prepared.cta_warp_off,
                                prepared.cta_warps, prepared.sm_seq_off, prepared.seq_off, prepared.acc_op,
                                prepared.op_cached, prepared.sm_acc_off, prepared.cta_acc, prepared.split)
    if geometry.wide_l2:
        req_id2, lines2 = prepared.line_ids((geometry.l2_chunks // geometry.l1_chunks).bit_length() - 1)
        n_ids2 = lines2.shape[0]
    else:
        req_id2, lines2 = co.req_id, co.lines
        n_ids2 = co.lines.shape[0] * geometry.sub
    counts, lat_sum, batches, writebacks, owed = kernel(
        st, lab, order, prepared.sm_acc_off, prepared.acc_op, prepared.op_write, co.req_off, co.req_id, co.req_mask,
        co.req_full, req_id2, co.lines, lines2, n_ids2, prepared.kernel_ops,
        runtime_params(params, geometry), prepared.warm_accesses)
    n = prepared.n_ops  # the warm-up CTAs' shadow columns are dropped: replayed, not counted
    return counts[:, :n], lat_sum[:n], batches, int(writebacks), int(owed)


def run_trial(prepared: Prepared, arch_params: Arch | np.ndarray | None, md: int, seed: int, *,
              index: int = 0) -> TrialResult:
    """Run one trial of `prepared` with MD `md` and seed `seed` (an int64; larger ints are
    reduced to their low 64 bits).

    `arch_params`: an Arch compatible with the prepared one (same L1 line size and SM count:
    other cache or DRAM settings may differ), its `pack_arch` vector, or None for the prepared
    Arch. The Numba kernels release the GIL, so trials run in parallel on threads.
    """
    if md < 1:
        raise ValueError(f"MD must be at least 1, got {md}")
    params = params_for(prepared, arch_params)
    seed = normal_seed(seed)
    t0 = time.perf_counter()
    counts, lat_sum, batches, writebacks, owed = trial_arrays(prepared, params, int(md), seed)
    return trial_result(prepared, md, seed, index, counts, lat_sum, batches, writebacks, owed, time.perf_counter() - t0)
