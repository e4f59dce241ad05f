"""The decision models joined for one run: MD decision, timing model (MWP/CWP), bottleneck, SM
utilisation.

`Decisions` is what the report's decision sections and the UI's MD and SM panes show. It joins
the Analysis (as ``analysis.decisions``) once the main run's trials are in; the MD decision
needs the MD sweep (one simulation per MD, Yen14) and stays None until the sweep ends.

The functions here turn a trace, its simulated trials and the Arch into the inputs each paper's
model asks for; the models themselves live in `md`, `timing` (with `mwp_cwp`), `bottleneck` and
`sm_util`. Figures of the snapshot are scaled to the whole grid by ``grid CTAs / snapshot CTAs``
where a model wants whole-kernel work (Baghsorkhi12 sec. 3.1: the snapshot stands for the grid).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tuiprof.arch.spec import Arch
from tuiprof.model.bottleneck import Bottleneck, StageWork, bottleneck, scaled_throughputs
from tuiprof.model.latency import memory_latency, op_latency
from tuiprof.model.md import MdDecision, MdSample
from tuiprof.model.mwp_cwp import INSTS_PER_MEM_INST, MwpCwp
from tuiprof.model.sm_util import SmUtilisation, sm_utilisation
from tuiprof.model.timing import KernelShape, KernelTime, Traffic, kernel_time, mean_traffic
from tuiprof.trace.data import Trace

if TYPE_CHECKING:
    from tuiprof.sim.results import TrialResult

MISS, DRAM_READS_PER_CTA, TM, MEM_LD, DRAM_TX, L2_SECTORS, L2_READ_HIT = range(7)
"""Columns of `trial_table`."""
TRAFFIC = [MEM_LD, DRAM_TX, L2_SECTORS]
"""The `trial_table` columns the timing model reads (`tuiprof.model.timing.Traffic`'s order)."""


@dataclass(frozen=True)
class Decisions:
    """The models' results for one run."""

    sm: SmUtilisation
    """Farooqui11 Fig. 6: per-SM busy fraction, measured or modeled."""
    time: KernelTime
    """The timing model at the run's MD: MWP/CWP (HongKim09) on the simulated latency and bytes,
    floored by DRAM and L2 bandwidth: the headline kernel time."""
    bottleneck: Bottleneck
    """Zhang11: component times, the bottleneck and the next one."""
    md_samples: tuple[MdSample, ...] = ()
    """What each simulated MD gave (MD = 1 .. limit as the sweep lands them)."""
    md: MdDecision | None = None
    """Yen14 and the timing model: both predictions and the recommendation; None until the
    MD sweep is done."""
    sweep_trials: int = 0
    """Most trials the sweep ran at one MD (fewer where it converged early; 0 before it ran)."""
    sweep_elapsed: float = 0.0
    """Wall seconds the MD sweep took."""
    md_note: str = ""
    """Why there is no MD decision, when there is none (sweep off, cancelled, no L1)."""
    time_trials: tuple[float, ...] = ()
    """The timing model's kernel time (seconds) of each trial of the run at its MD, in trial
    order: the same model on one trial's traffic instead of the mean's. `time` is the headline;
    these are its spread, what a comparison of two runs tests (`tuiprof.model.significance`)."""

    @property
    def mwp(self) -> MwpCwp:
        """HongKim09's MWP, CWP, case and cycles at the run's MD (inside the timing model)."""
        return self.time.mwp


# ---------------------------------------------------------------------------------------------
# Facts of the trace.

def grid_scale(trace: Trace) -> float:
    """Grid CTAs per counted snapshot CTA: what multiplies snapshot work into whole-kernel work
    (the trials count the snapshot's CTAs but its warm-up, `Snapshot.warm`)."""
    return trace.launch.grid_ctas / max(trace.snapshot.counted_ctas, 1)


def snapshot_insts(trace: Trace) -> float:
    """Dynamic warp instructions of the counted snapshot CTAs (its warm-up aside; NaN when the
    trace has no counts)."""
    insts = trace.ctas.insts
    if insts is None or np.size(insts) == 0:
        return math.nan
    ids = trace.snapshot.cta_ids[trace.snapshot.warm:]
    if np.size(insts) > int(ids.max(initial=0)):
        return float(np.asarray(insts, dtype=np.float64)[ids].sum())
    return float(np.mean(insts)) * trace.snapshot.counted_ctas


def working_set_lines(trace: Trace, req_off: np.ndarray, req_line: np.ndarray) -> float:
    """Mean distinct L1 lines one snapshot CTA touches (Yen14's working set per CTA), from
    the coalesced requests (``req_off`` [R+1] / ``req_line`` per warp access)."""
    per_acc = np.diff(req_off)
    acc_cta = np.repeat(trace.warp_cta.astype(np.int64), np.diff(trace.warp_offsets))
    keep = np.array([o.is_cached for o in trace.ops], dtype=bool)[trace.op]
    cta = np.repeat(np.where(keep, acc_cta, -1), per_acc)
    line = np.asarray(req_line, dtype=np.int64)
    sel = cta >= 0
    cta, line = cta[sel], line[sel]
    if cta.size == 0:
        return 0.0
    order = np.lexsort((line, cta))
    c, l = cta[order], line[order]
    distinct = 1 + int(np.count_nonzero((c[1:] != c[:-1]) | (l[1:] != l[:-1])))
    return distinct / max(trace.snapshot.n_ctas, 1)


def coalescing_split(trace: Trace, arch: Arch, accesses: np.ndarray, requests_per_access: np.ndarray
                     ) -> tuple[float, float, float, float]:
    """Per counted warp of the snapshot: (#Coal_Mem_insts, #Uncoal_Mem_insts, #Uncoal_per_mw, useful bytes
    per warp access). An op is coalesced when its warp accesses need no more L1 requests than a
    full warp of its width ideally does (ceil(32 x bytes / line)); #Uncoal_per_mw is the
    access-weighted mean of the uncoalesced ops' requests per access. The useful bytes (32 lanes x
    width) are what the warp asks for, not what it moves: the timing model takes the moved bytes
    from the simulation."""
    warps = max(trace.counted_warps, 1)  # `accesses` are the counted CTAs' (`Prepared.op_stats`)
    coal = uncoal = weighted = 0.0
    bytes_sum = n_sum = 0.0
    for o in trace.ops:
        if not o.is_cached:
            continue
        a = float(accesses[o.id])
        rpa = float(requests_per_access[o.id])
        if a == 0 or not math.isfinite(rpa):
            continue
        ideal = max(1, -(-arch.warp_size * o.bytes // arch.l1.line))
        if rpa <= ideal + 1e-9:
            coal += a
        else:
            uncoal += a
            weighted += a * rpa
        bytes_sum += a * arch.warp_size * o.bytes
        n_sum += a
    per_mw = weighted / uncoal if uncoal > 0 else 1.0
    load_bytes = bytes_sum / n_sum if n_sum > 0 else 4.0 * arch.warp_size
    return coal / warps, uncoal / warps, max(per_mw, 1.0), load_bytes


def kernel_shape(trace: Trace, arch: Arch, accesses: np.ndarray, requests_per_access: np.ndarray) -> KernelShape:
    """The timing model's view of the kernel: launch, snapshot and HongKim09's coalescing counts."""
    coal, uncoal, per_mw, _ = coalescing_split(trace, arch, accesses, requests_per_access)
    L = trace.launch
    counted_warps = trace.counted_warps
    return KernelShape(threads_per_cta=L.threads_per_cta, grid_ctas=L.grid_ctas,
                       snapshot_ctas=trace.snapshot.counted_ctas, snapshot_warps=max(counted_warps, 1), coal_mem_insts=coal, uncoal_mem_insts=uncoal,
                       uncoal_per_mw=per_mw, cta_insts=trace.ctas.insts)


# ---------------------------------------------------------------------------------------------
# One MD's statistics from its trials (Yen14's inputs and the timing model's).

def trial_table(results: Sequence[TrialResult], trace: Trace, arch: Arch, accesses: np.ndarray) -> np.ndarray:
    """Per trial: L1 read miss rate, DRAM reads per CTA, Tm (columns MISS, DRAM_READS_PER_CTA, TM:
    the thesis' Table 7 inputs), Mem_LD = the access-weighted expected latency of the global
    loads, DRAM transactions (reads, writes, write-backs, including those owed at the end) and L2
    sectors read and written
    (MEM_LD, DRAM_TX, L2_SECTORS: the timing model's), and the L2 read hit ratio (L2_READ_HIT: what
    makes DRAM reads per CTA move when the L1 miss rate does not). DRAM reads are 32 B transactions
    (the L2's read misses, in its 32 B sectors) over the snapshot's counted CTAs. NaN where a trial has none."""
    n_ctas = max(trace.snapshot.counted_ctas, 1)
    if not results:
        return np.zeros((0, 7))
    acc = np.asarray(accesses)
    used = np.flatnonzero(acc > 0)  # the others weigh nothing in Mem_LD: a few ops of many, only those
    if used.size < len(trace.ops) // 2:
        mem_ld = memory_latency(op_latency(results, trace.ops, arch, used).x, [trace.ops[int(i)] for i in used],
                                acc[used])
    else:
        mem_ld = memory_latency(op_latency(results, trace.ops, arch).x, trace.ops, acc)
    rows = []
    for r, ld in zip(results, mem_ld):
        reads = float(np.sum(r.l1_read_accesses))
        miss = 1.0 - float(np.sum(r.l1_read_hits)) / reads if reads > 0 else 0.0
        dram = float(np.sum(r.dram_reads) + np.sum(r.dram_writes) + r.dram_writebacks + r.dram_writebacks_owed)
        l2 = float(np.sum(r.l2_read_accesses) + np.sum(r.l2_write_accesses))
        rows.append((miss, float(np.sum(r.dram_reads)) / n_ctas, r.mean_dram_latency, ld, dram, l2,
                     r.l2_read_hit_ratio))
    return np.array(rows, dtype=np.float64).reshape(-1, 7)


def md_sample(md: int, table: np.ndarray, trace: Trace) -> MdSample:
    """The thesis' per-MD inputs (Table 7) from `trial_table` rows at `md`: L1 read miss rate,
    DRAM reads per CTA and mean memory fetch latency (Tm), averaged over trials."""
    lat = table[:, TM][np.isfinite(table[:, TM])]
    return MdSample(md=md, miss_rate=float(table[:, MISS].mean()) if len(table) else 0.0,
                    dram_reads_per_cta=float(table[:, DRAM_READS_PER_CTA].mean()) if len(table) else 0.0,
                    mf_latency=float(lat.mean()) if lat.size else 0.0,
                    l2_hit_rate=float(np.nanmean(table[:, L2_READ_HIT])) if np.isfinite(table[:, L2_READ_HIT]).any()
                    else math.nan,
                    cta_count=trace.snapshot.counted_ctas, warp_insts=snapshot_insts(trace), trials=len(table))


# ---------------------------------------------------------------------------------------------
# Farooqui11: SM utilisation.

def probe_caveat(trace: Trace) -> str:
    """When the GPU ran the probes at fewer resident CTAs per SM than the plain kernel gets (their
    registers), the measured per-CTA timeline says so; else empty."""
    occ = trace.provenance.generator.get("probe_occupancy")
    try:
        (plain_regs, probe_regs), (plain_ctas, probe_ctas) = occ["registers"], occ["ctas_per_sm"]  # type: ignore[index]
    except (TypeError, KeyError, ValueError):
        return ""
    if not isinstance(probe_ctas, int) or not isinstance(plain_ctas, int) or probe_ctas >= plain_ctas:
        return ""
    return f"timed with the probes at {probe_ctas} CTAs/SM ({probe_regs} regs/thread); plain: {plain_ctas} ({plain_regs} regs)"


def sm_model(trace: Trace, arch: Arch, md: int) -> SmUtilisation:
    """Measured from per-CTA SM ids and clocks when the trace has them; otherwise modeled from
    per-CTA work: the grid records' instructions and accesses, or (without records) the snapshot
    CTAs' warp accesses repeated over the grid in order."""
    c = trace.ctas
    if c.measured_timing:
        u = sm_utilisation(arch.sm_count, md, sm=c.sm, start=c.start, end=c.end)
        return dataclasses.replace(u, caveat=probe_caveat(trace))
    if c.insts is not None or c.accesses is not None:
        return sm_utilisation(arch.sm_count, md, insts=c.insts, accesses=c.accesses)
    return sm_utilisation(arch.sm_count, md, accesses=snapshot_cta_accesses(trace), n_ctas=trace.launch.grid_ctas)


def snapshot_cta_accesses(trace: Trace) -> np.ndarray:
    """Warp accesses of each snapshot CTA, the costs the grid repeats in `sm_model`; one entry
    when every CTA has the same (a trace that declares millions of CTAs and no access costs
    nothing here)."""
    per_warp = np.diff(trace.warp_offsets)
    used, inverse = np.unique(trace.warp_cta, return_inverse=True)
    per_cta = np.bincount(inverse, weights=per_warp, minlength=used.size)
    n = trace.snapshot.n_ctas
    if per_cta.size == 0 or (np.all(per_cta == per_cta[0]) and (used.size == n or per_cta[0] == 0)):
        return np.array([per_cta[0] if per_cta.size else 0.0])
    return np.bincount(trace.warp_cta, weights=per_warp, minlength=n)


# ---------------------------------------------------------------------------------------------
# Zhang11: the bottleneck.

def bottleneck_model(trace: Trace, arch: Arch, md: int, results: Sequence[TrialResult], shared_wavefronts: float = 0.0
                     ) -> Bottleneck:
    """Zhang11's verdict for the whole grid: warp instructions (the trace's counts, else the
    paper-004 estimate per memory instruction), shared transactions after bank conflicts (the
    snapshot's shared wavefronts, `tuiprof.model.shared`), and global memory bytes = simulated
    DRAM transactions (reads, writes, write-backs, owed ones included) x their size."""
    scale = grid_scale(trace)
    insts = snapshot_insts(trace)
    if not math.isfinite(insts):
        insts = INSTS_PER_MEM_INST * trace.n_accesses
    dram = [float(np.sum(r.dram_reads) + np.sum(r.dram_writes) + r.dram_writebacks + r.dram_writebacks_owed)
            for r in results]
    global_bytes = (float(np.mean(dram)) if dram else 0.0) * arch.dram.transaction
    work = StageWork(warp_insts=insts * scale, shared_transactions=shared_wavefronts * scale,
                     shared_bytes_per_transaction=arch.shared_banks * 4.0, global_bytes=global_bytes * scale)
    thr = scaled_throughputs(arch, md * trace.launch.warps_per_cta,
                             warp_insts_per_cycle=arch.cores_per_sm / arch.warp_size,
                             shared_banks=arch.shared_banks)
    return bottleneck(work, thr, ctas_per_sm=md)


def decisions(trace: Trace, arch: Arch, md: int, results: Sequence[TrialResult], accesses: np.ndarray,
              requests_per_access: np.ndarray, shared_wavefronts: float = 0.0) -> Decisions:
    """The SM, timing (MWP/CWP) and bottleneck models of a finished (or partial) run at `md`;
    ``accesses`` and ``requests_per_access`` are the per-op coalescing counts of the run,
    ``shared_wavefronts`` the snapshot's shared-memory wavefronts."""
    shape = kernel_shape(trace, arch, accesses, requests_per_access)
    table = trial_table(results, trace, arch, accesses)[:, TRAFFIC]
    per_trial = tuple(kernel_time(arch, shape, Traffic(*map(float, row)), md).time_s for row in table)
    return Decisions(sm=sm_model(trace, arch, md), time=kernel_time(arch, shape, mean_traffic(table), md),
                     bottleneck=bottleneck_model(trace, arch, md, results, shared_wavefronts), time_trials=per_trial)


def sm_list(sms: tuple[int, ...], limit: int = 12) -> str:
    shown = ", ".join(str(s) for s in sms[:limit])
    return shown + (f" and {len(sms) - limit} more" if len(sms) > limit else "")


def summary(d: Decisions) -> list[str]:
    """The decisions in plain words, most actionable first: the MD decision, the kernel time
    and what bounds it (HongKim09's MWP/CWP inside the timing model), Zhang11's bottleneck and
    Farooqui11's SM utilisation. The report's advice and the UI's model lines are these."""
    out = []
    if d.md is not None:
        rng = (f" (range {d.md.gain_range[0]:+.0%} to {d.md.gain_range[1]:+.0%} over the sweep's trials and the "
               f"uncertain departure delays and L2 bandwidth)") if d.md.gain_range else ""
        out.append(d.md.advice + rng + "; " + d.md.apply)
    k = d.time
    out.append(f"kernel time (timing model): {1e6 * k.time_s:.1f} us, bound by {k.bound_label} (MWP "
               f"{k.mwp.mwp:.1f}, CWP {k.mwp.cwp:.1f}, N {k.mwp.n:.0f} warps/SM)")
    b = d.bottleneck
    out.append(f"bottleneck: {b.bottleneck} (Zhang11); if it took no time, {b.next_bottleneck} would bound the "
               f"kernel at {1e6 * b.time_without_bottleneck:.1f} us, {b.speedup_if_removed:.3g}x less time: the most "
               f"that improving {b.bottleneck} alone can gain")
    u = d.sm
    idle = f", idle SMs {sm_list(u.idle_sms)}" if u.idle_sms else ""
    out.append(f"SM utilisation ({u.source}, Farooqui11): {u.utilisation:.0%} mean busy, imbalance {u.imbalance:.2f}{idle}")
    return out
