"""Aggregating Monte Carlo trials into an Analysis: per-op and kernel-wide estimates.

Per op (paper 000 sec. 6.1): H1, H2 and X with mean, std and 95% interval over trials; its
dynamic warp accesses, coalescing (sectors per request, requests per warp access) and cost
(accesses x mean X) with its share of the kernel's total. Kernel-wide: L1 read, L2 read and L2
write hit ratios (paper 000 Figs. 5-6), the DRAM batch latency distribution (Fig. 3), and the
convergence of the standard deviation with the number of trials (Fig. 7).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from tuiprof.arch.model import Arch
from tuiprof.model.decisions import Decisions
from tuiprof.model.latency import Estimate, estimate, expected_latency, ratio
from tuiprof.trace.model import StaticOp

HEADLINES = ("l1_read", "l2_read", "l2_write")


@dataclass(frozen=True)
class OpStats:
    """One static memory op's prediction."""

    op: StaticOp
    warp_accesses: int
    requests_per_access: float
    sectors_per_request: float
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
    """Per-trial values of each headline ratio and of each op's h1/h2/x (keys 'op3.x')."""
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


def _running_std(x: np.ndarray) -> np.ndarray:
    out = np.full(max(0, x.size - 1), np.nan)
    for n in range(2, x.size + 1):
        v = x[:n]
        v = v[~np.isnan(v)]
        out[n - 2] = v.std(ddof=1) if v.size > 1 else np.nan
    return out


def analyse(ops: Sequence[StaticOp], arch: Arch, md: int, results: Sequence, planned: int,
            accesses: np.ndarray, requests_per_access: np.ndarray, sectors_per_request: np.ndarray,
            elapsed: float) -> Analysis:
    """Aggregate TrialResults (in trial order) into an Analysis."""
    n_ops = len(ops)
    T = len(results)

    def stack(name: str) -> np.ndarray:
        return np.array([getattr(r, name) for r in results], dtype=np.float64).reshape(T, n_ops)

    is_load = np.array([o.kind == "load" for o in ops])
    l1h, l1a = stack("l1_read_hits"), stack("l1_read_accesses")
    l2rh, l2ra = stack("l2_read_hits"), stack("l2_read_accesses")
    l2wh, l2wa = stack("l2_write_hits"), stack("l2_write_accesses")
    trial_tm = np.array([r.mean_dram_latency for r in results], dtype=np.float64)
    op_tm = stack("dram_latency")
    tm = np.where(np.isnan(op_tm), trial_tm[:, None], op_tm)
    t1, t2 = float(arch.l1.hit_latency), float(arch.l2.hit_latency)

    # Loads: H1 and H2 over read sectors. Stores and atomics go straight to L2 (write-through):
    # H1 = 0 and H2 is the L2 write hit ratio.
    h1 = np.where(is_load, ratio(l1h, l1a), 0.0)
    h1 = np.where(is_load & ~arch.l1.enabled, 0.0, h1)
    h2 = np.where(is_load, ratio(l2rh, l2ra), ratio(l2wh, l2wa))
    # An op whose every sector hit L1 never reached L2: its H2 does not enter X.
    h2_for_x = np.where(np.isnan(h2) & (h1 == 1.0), 0.0, h2)
    if not arch.l2.enabled:
        h2 = h2_for_x = np.zeros_like(h2)
    x = expected_latency(h1, h2_for_x, t1, t2, tm)
    tm_for_shares = np.where(np.isnan(tm), 0.0, tm)

    samples: dict[str, np.ndarray] = {
        "l1_read": ratio(l1h[:, is_load].sum(axis=1), l1a[:, is_load].sum(axis=1)) if arch.l1.enabled else np.full(T, np.nan),
        "l2_read": ratio(l2rh.sum(axis=1), l2ra.sum(axis=1)) if arch.l2.enabled else np.full(T, np.nan),
        "l2_write": ratio(l2wh.sum(axis=1), l2wa.sum(axis=1)) if arch.l2.enabled else np.full(T, np.nan),
    }
    headline = {k: estimate(v, 0.0, 1.0) for k, v in samples.items()}
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
    cost = np.where(np.isnan(mean_x), np.nan, accesses * mean_x)
    total = np.nansum(cost)
    share = np.zeros_like(cost)
    if total > 0:
        np.divide(cost, total, out=share, where=np.isfinite(cost))
    stats = []
    columns = zip(h1.T, h2.T, x.T, inverse.tolist(), np.asarray(accesses).tolist(),
                  np.asarray(requests_per_access, dtype=np.float64).tolist(),
                  np.asarray(sectors_per_request, dtype=np.float64).tolist(), cost.tolist(), share.tolist())
    for j, (o, (c1, c2, cx, u, acc, rpa, spr, c, cs)) in enumerate(zip(ops, columns)):
        samples[f"op{j}.h1"], samples[f"op{j}.h2"], samples[f"op{j}.x"] = c1, c2, cx
        e_h1, e_h2, e_x, e_tm, l1_share, l2_share, dram_share = per_kind[u]
        stats.append(OpStats(op=o, warp_accesses=int(acc), requests_per_access=rpa, sectors_per_request=spr,
                             h1=e_h1, h2=e_h2, x=e_x, tm=e_tm, cost=c, cost_share=cs,
                             l1_share=l1_share, l2_share=l2_share, dram_share=dram_share))
    lat = np.concatenate([np.asarray(r.dram_batch_latencies, dtype=np.float64) for r in results]) if T else np.zeros(0)
    if lat.size:
        edges = np.histogram_bin_edges(lat, bins=min(16, max(1, int(np.unique(lat).size))))
        counts, edges = np.histogram(lat, bins=edges)
    else:
        counts, edges = np.zeros(0, np.int64), np.zeros(1)
    sm = np.mean([np.asarray(r.sm_requests, dtype=np.float64) for r in results], axis=0) if T else np.zeros(arch.sm_count)
    reqs = float(sum(int(np.sum(r.l1_requests)) for r in results))
    busy = float(sum(r.elapsed for r in results))
    return Analysis(trials=T, planned=planned, md=md, arch=arch.name, ops=tuple(stats), headline=headline,
                    samples=samples, tm=estimate(trial_tm, 0.0), dram_hist=(counts, edges),
                    convergence={k: _running_std(v) for k, v in samples.items() if k in HEADLINES},
                    sm_requests=sm, elapsed=elapsed, requests_per_second=reqs / busy if busy > 0 else 0.0)
