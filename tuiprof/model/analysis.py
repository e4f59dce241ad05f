"""Aggregating Monte Carlo trials into an Analysis: per-op and kernel-wide estimates.

Per op (Baghsorkhi12 sec. 6.1): H1, H2 and X with mean, std and 95% interval over trials; its
dynamic warp accesses, coalescing (sectors per request, requests per warp access) and cost
(accesses x mean X) with its share of the kernel's total. Kernel-wide: L1 read, L2 read and L2
write hit ratios (Baghsorkhi12 Figs. 5-6), the DRAM batch latency distribution (Fig. 3), and the
convergence of the standard deviation with the number of trials (Fig. 7).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tuiprof.arch.spec import Arch
from tuiprof.metrics import HEADLINE_METRICS
from tuiprof.model.decisions import Decisions
from tuiprof.model.latency import Estimate, estimate, op_latency, ratio, stack_counter
from tuiprof.model.pattern import ideal_sectors as ideal_sectors_of
from tuiprof.model.shared import PassStats
from tuiprof.sim.results import latency_counts
from tuiprof.trace.data import LANES, StaticOp

if TYPE_CHECKING:
    from tuiprof.sim.results import TrialResult

HEADLINES = {m.key: m.label for m in HEADLINE_METRICS}
"""The kernel-wide hit ratios every view leads with (Baghsorkhi12 Figs. 5-6), by key, with their names
(`tuiprof.metrics.HEADLINE_METRICS`)."""


@dataclass(frozen=True)
class OpStats:
    """One static memory op's prediction."""

    op: StaticOp
    warp_accesses: int
    requests_per_access: float
    """L1 requests (distinct lines) per warp access."""
    sectors_per_request: float
    """32 B sectors per L1 request (per line: 1 .. line / 32)."""
    sectors_per_access: float
    """Sectors per warp access: Nsight Compute's *sectors per request*, a request being one warp
    instruction (4 at best for 32 lanes of 4 B, 32 at worst)."""
    ideal_sectors: float
    """The fewest sectors a warp access of this op could move (its active lanes' bytes)."""
    h1: Estimate
    h2: Estimate
    x: Estimate
    tm: Estimate
    cost: float
    """Dynamic warp accesses x mean expected latency (cycles): what this op costs the kernel."""
    cost_share: float
    l1_share: float
    """Shares of mean X spent in L1 hits, L2 hits and DRAM (sum to 1 when X is defined)."""
    l2_share: float
    dram_share: float
    passes: PassStats | None = None
    """A shared-memory op's bank conflicts (`tuiprof.model.shared`) or a constant op's
    serialisation (`tuiprof.model.constant`); its X is their latency and it has no cache figures.
    None for the ops of the cache model (global, local, texture)."""


@dataclass(frozen=True)
class Analysis:
    """Everything the report and the UI show, aggregated over the trials so far."""

    trials: int
    planned: int
    md: int
    arch: str
    ops: tuple[OpStats, ...]
    headline: dict[str, Estimate]
    samples: dict[str, np.ndarray]
    """Per-trial values of each headline ratio, of Tm ('tm') and of each op's h1/h2/x (keys 'op3.x')."""
    tm: Estimate
    dram_hist: tuple[np.ndarray, np.ndarray]
    """(counts, bin edges) of DRAM batch latencies pooled over trials."""
    convergence: dict[str, np.ndarray]
    """Std of each headline ratio over the first n trials, n = 2..trials."""
    sm_requests: np.ndarray
    """Mean L1 requests per SM per trial."""
    elapsed: float
    requests_per_second: float
    decisions: Decisions | None = None
    """The decision models (MD, MWP/CWP, bottleneck, SM utilisation), once the trials are in."""

    def by_cost(self) -> list[OpStats]:
        """Ops sorted by cost, most expensive first (undefined last)."""
        return sorted(self.ops, key=lambda s: -s.cost if np.isfinite(s.cost) else np.inf)

    def ranks(self) -> dict[int, str]:
        """`#1`, `#2`, ... for loads and `w1`, ... for stores and atomics (writes), each by cost
        (their latency is mostly hidden from the warp, so they are ranked apart): the one numbering
        of hot ops that the source pane, the drill-down, the report and the JSON share, spelled so
        that it cannot be read as a cache level (L1, L2). Ops without a cost are not ranked."""
        out: dict[int, str] = {}
        seen = {LOAD_RANK: 0, STORE_RANK: 0}
        for s in self.by_cost():
            if not (np.isfinite(s.cost) and s.cost > 0):
                continue
            k = LOAD_RANK if s.op.kind == "load" else STORE_RANK
            seen[k] += 1
            out[s.op.id] = f"{k}{seen[k]}"
        return out


def trial_rate(results: Sequence[TrialResult]) -> float:
    """L1 requests per second of one worker: the median over the trials of each trial's requests
    over its wall time, so that the trials that compiled the simulator first (one per worker) do
    not count their compile as simulation. 0 when no trial took measurable time."""
    rates = [float(np.sum(r.l1_requests)) / r.elapsed for r in results if r.elapsed > 0]
    return float(np.median(rates)) if rates else 0.0


LOAD_RANK = "#"
"""Prefix of a load's rank: `#1` is the costliest load."""
STORE_RANK = "w"
"""Prefix of a store's or atomic's rank: `w1` is the costliest write."""


def load_rank(label: str | None) -> int | None:
    """The number of a load's rank label (`#3` -> 3); None for a store's or no rank."""
    return int(label[1:]) if label and label[0] == LOAD_RANK else None


def running_std(x: np.ndarray) -> np.ndarray:
    """Std (ddof=1) of the non-NaN values among the first n, for n = 2 .. len(x) (NaN while fewer
    than two are defined): the convergence curve of Baghsorkhi12 Fig. 7, in one pass."""
    v = np.asarray(x, dtype=np.float64)
    if v.size < 2:
        return np.zeros(0)
    ok = np.isfinite(v)
    shift = v[ok][0] if ok.any() else 0.0          # centred sums: no cancellation for large means
    d = np.where(ok, v - shift, 0.0)
    n = np.cumsum(ok)
    s, sq = np.cumsum(d), np.cumsum(d * d)
    with np.errstate(invalid="ignore", divide="ignore"):
        var = (sq - s * s / np.maximum(n, 1)) / (n - 1)
    out = np.where(n >= 2, np.sqrt(np.maximum(var, 0.0)), np.nan)
    return out[1:]


def batch_histogram(results: Sequence[TrialResult]) -> tuple[np.ndarray, np.ndarray]:
    """(counts, bin edges) of the DRAM batch latencies pooled over `results`: up to 16 equal bins
    over their range, one per distinct latency when there are fewer (what `np.histogram` of the
    pooled latencies gives). Pooled from each trial's tally (`TrialResult.batch_counts`), so
    its cost follows the trials' distinct latencies, not their batches."""
    tallies = [r.batch_counts() for r in results]
    if not tallies:
        return np.zeros(0, np.int64), np.zeros(1)
    values, counts = latency_counts(np.concatenate([v for v, _ in tallies]), np.concatenate([c for _, c in tallies]))
    if not values.size:
        return np.zeros(0, np.int64), np.zeros(1)
    at = values.astype(np.float64)
    edges = np.histogram_bin_edges(at, bins=min(16, values.size))
    hist, edges = np.histogram(at, bins=edges, weights=counts)
    return hist.astype(np.int64), edges


def representatives(ops: Sequence[StaticOp], accesses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the ops whose columns are computed, each op's column among them): every op some access
    names, plus the first unaccessed load and the first unaccessed other op, which stand for all
    the unaccessed ones (their counters are zero in every trial, so their columns are those of
    their representative). The per-op work and memory follow the accessed ops, not the op table."""
    acc = np.asarray(accesses)
    kind = np.array([o.kind == "load" for o in ops], dtype=bool)
    used = acc > 0
    rep: list[int] = list(np.flatnonzero(used))
    col_of = np.empty(len(ops), dtype=np.int64)
    col_of[used] = np.arange(len(rep))
    for load in (True, False):
        idle = np.flatnonzero(~used & (kind == load))
        if idle.size:
            col_of[idle] = len(rep)
            rep.append(int(idle[0]))
    order = np.argsort(rep, kind="stable")  # columns in op order, as before
    rank = np.empty(len(rep), dtype=np.int64)
    rank[order] = np.arange(len(rep))
    return np.asarray(rep, dtype=np.int64)[order], rank[col_of]


def ncu_columns(ops: Sequence[StaticOp]) -> tuple[np.ndarray, np.ndarray]:
    """Which ops the kernel-wide L1 read and L2 write figures count, as Nsight Compute's do
    (docs/memory-system.md, section 4): the L1 read figure is
    ``l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate``, global loads only (a local load, a
    spill, is ``mem_local``); the L2 write figure is ``lts__t_sector_op_write_hit_rate``, stores
    only (atomics and reductions are ``op_atom`` / ``op_red``). The L2 read figure,
    ``lts__t_sector_op_read_hit_rate``, counts every read sector the L2 sees, whatever its space,
    so it needs no filter; it counts lookups (``TrialResult.l2_lookups``: with two L2 partitions a
    far read is looked up twice). Returns two bool arrays over `ops`."""
    l1 = np.array([o.kind == "load" and o.space == "global" for o in ops], dtype=bool)
    l2w = np.array([o.kind == "store" for o in ops], dtype=bool)
    return l1, l2w


def analyse(ops: Sequence[StaticOp], arch: Arch, md: int, results: Sequence[TrialResult], planned: int,
            accesses: np.ndarray, requests_per_access: np.ndarray, sectors_per_request: np.ndarray,
            elapsed: float, ideal_sectors: np.ndarray | None = None,
            passes: Mapping[int, PassStats] | None = None) -> Analysis:
    """Aggregate TrialResults (in trial order) into an Analysis. `ideal_sectors` per op (see
    `tuiprof.model.pattern.ideal_sectors_per_op`) defaults to full warps; `passes` holds the
    shared-memory ops' bank conflicts and the constant ops' serialisation (`PassStats`), whose
    latency is their X in every trial."""
    T = len(results)
    shared = passes or {}
    rep, col_of = representatives(ops, accesses)
    counted_l1, counted_l2w = ncu_columns([ops[int(i)] for i in rep])
    lat = op_latency(results, ops, arch, rep)
    h1, h2, h2_for_x, x, tm = lat.h1, lat.h2, lat.h2_for_x, lat.x, lat.tm
    for j, st in shared.items():  # no cache figures: its latency is its passes' (bank conflicts, serialisation)
        c = col_of[j]
        h1[:, c] = h2[:, c] = h2_for_x[:, c] = tm[:, c] = np.nan
        x[:, c] = st.latency
    t1, t2 = float(arch.l1.hit_latency), float(arch.l2.hit_latency)

    def stack(name: str) -> np.ndarray:
        return stack_counter(results, name, len(ops), rep)

    l1h, l1a = stack("l1_read_hits"), stack("l1_read_accesses")
    l2lh, l2la = stack("l2_lookup_hits"), stack("l2_lookups")
    l2wh, l2wa = stack("l2_write_hits"), stack("l2_write_accesses")
    trial_tm = np.array([r.mean_dram_latency for r in results], dtype=np.float64)
    tm_for_shares = np.where(np.isnan(tm), 0.0, tm)

    samples: dict[str, np.ndarray] = {
        "l1_read": ratio(l1h[:, counted_l1].sum(axis=1), l1a[:, counted_l1].sum(axis=1)) if arch.l1.enabled else np.full(T, np.nan),
        "l2_read": ratio(l2lh.sum(axis=1), l2la.sum(axis=1)) if arch.l2.enabled else np.full(T, np.nan),
        "l2_write": ratio(l2wh[:, counted_l2w].sum(axis=1), l2wa[:, counted_l2w].sum(axis=1)) if arch.l2.enabled else np.full(T, np.nan),
    }
    headline = {k: estimate(v, 0.0, 1.0) for k, v in samples.items()}
    samples["tm"] = trial_tm
    # Ops whose per-trial columns are bit for bit the same (every op the snapshot never reaches,
    # for one) share their estimates: the work follows the distinct ops, not the op table.
    cols = np.ascontiguousarray(np.concatenate([h1, h2, h2_for_x, x, tm, tm_for_shares], axis=0).T)
    keys = cols.view(np.dtype((np.void, cols.dtype.itemsize * cols.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    per_kind = []
    for j in first:
        mh1 = np.nanmean(h1[:, j]) if T and not np.all(np.isnan(h1[:, j])) else np.nan
        mh2 = np.nanmean(h2_for_x[:, j]) if T and not np.all(np.isnan(h2_for_x[:, j])) else np.nan
        mtm = np.nanmean(tm_for_shares[:, j]) if T else np.nan
        parts = np.array([mh1 * t1, (1 - mh1) * mh2 * t2, (1 - mh1) * (1 - mh2) * mtm])
        shares = parts / parts.sum() if np.all(np.isfinite(parts)) and parts.sum() > 0 else np.full(3, np.nan)
        per_kind.append((estimate(h1[:, j], 0.0, 1.0), estimate(h2[:, j], 0.0, 1.0), estimate(x[:, j], 0.0),
                         estimate(tm[:, j], 0.0), float(shares[0]), float(shares[1]), float(shares[2])))
    mean_x = np.array([per_kind[u][2].mean if per_kind[u][2].defined else np.nan for u in range(len(per_kind))])[inverse]
    mean_x = mean_x[col_of]
    cost = np.where(np.isnan(mean_x), np.nan, accesses * mean_x)
    total = np.nansum(cost)
    share = np.zeros_like(cost)
    if total > 0:
        np.divide(cost, total, out=share, where=np.isfinite(cost))
    stats = []
    rpa_all = np.asarray(requests_per_access, dtype=np.float64)
    spr_all = np.asarray(sectors_per_request, dtype=np.float64)
    if ideal_sectors is None:
        ideal_sectors = np.array([ideal_sectors_of(o.bytes, LANES) for o in ops])
    h1_t, h2_t, x_t = list(h1.T), list(h2.T), list(x.T)
    columns = zip((h1_t[c] for c in col_of), (h2_t[c] for c in col_of), (x_t[c] for c in col_of),
                  inverse[col_of].tolist(), np.asarray(accesses).tolist(), rpa_all.tolist(),
                  spr_all.tolist(), (rpa_all * spr_all).tolist(), np.asarray(ideal_sectors, dtype=np.float64).tolist(),
                  cost.tolist(), share.tolist())
    for j, (o, (c1, c2, cx, u, acc, rpa, spr, spa, ideal, c, cs)) in enumerate(zip(ops, columns)):
        samples[f"op{j}.h1"], samples[f"op{j}.h2"], samples[f"op{j}.x"] = c1, c2, cx
        e_h1, e_h2, e_x, e_tm, l1_share, l2_share, dram_share = per_kind[u]
        stats.append(OpStats(op=o, warp_accesses=int(acc), requests_per_access=rpa, sectors_per_request=spr,
                             sectors_per_access=spa, ideal_sectors=ideal,
                             h1=e_h1, h2=e_h2, x=e_x, tm=e_tm, cost=c, cost_share=cs,
                             l1_share=l1_share, l2_share=l2_share, dram_share=dram_share, passes=shared.get(j)))
    sm = np.mean([np.asarray(r.sm_requests, dtype=np.float64) for r in results], axis=0) if T else np.zeros(arch.sm_count)
    return Analysis(trials=T, planned=planned, md=md, arch=arch.name, ops=tuple(stats), headline=headline,
                    samples=samples, tm=estimate(trial_tm, 0.0), dram_hist=batch_histogram(results),
                    convergence={k: running_std(samples[k]) for k in HEADLINES},
                    sm_requests=sm, elapsed=elapsed, requests_per_second=trial_rate(results))
