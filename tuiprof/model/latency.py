"""Expected latency of each static memory op (Baghsorkhi12 sec. 6.1).

    X = H1 t1 + (1 - H1) [H2 t2 + (1 - H2) Tm]

H1 and H2 are the op's L1 and L2 hit ratios in one trial, t1 and t2 the hit latencies of the
Arch, Tm the trial's DRAM latency. Since H1, H2 and Tm change from trial to trial, X is a random
variable; its mean over trials is the expected latency of the op.

Every quantity observed once per trial is an `Estimate` with two uncertainties, named apart:

- the *spread of trials*, mean +- 1.96 std: where one trial, i.e. one run of the hardware as the
  model sees it, falls 95% of the time (Baghsorkhi12 sec. 5.2's E +- 2 sigma);
- the *confidence interval* of the estimate, mean +- t std / sqrt(n), t Student's 97.5% quantile
  with n - 1 degrees of freedom (2.093 at 20 trials, 1.96 in the limit; `tuiprof.stats.t975`):
  where the mean itself is, 95% of the time; it narrows as trials are added, and it is what
  early stop watches.

Both cover only the model's randomness (warp and SM scheduling, the merge order of the SM queues,
DRAM batching), never the error of the model's assumptions (Baghsorkhi12 sec. 5.4 measures that
against hardware counters: a few points of hit ratio).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tuiprof.arch.spec import Arch
from tuiprof.stats import t975
from tuiprof.trace.data import StaticOp

if TYPE_CHECKING:
    from tuiprof.sim.results import TrialResult

Z95 = 1.96
"""The normal 97.5% quantile of the spread of trials (where one trial falls), not of the CI."""


def expected_latency(h1: np.ndarray, h2: np.ndarray, t1: float, t2: float, tm: np.ndarray) -> np.ndarray:
    """X per element (Baghsorkhi12 sec. 6.1). NaN hit ratios (no accesses) propagate as NaN."""
    return h1 * t1 + (1.0 - h1) * (h2 * t2 + (1.0 - h2) * tm)


def ratio(hits: np.ndarray, accesses: np.ndarray) -> np.ndarray:
    """hits / accesses, NaN where there were no accesses."""
    hits = np.asarray(hits, dtype=np.float64)
    accesses = np.asarray(accesses, dtype=np.float64)
    out = np.full(np.broadcast(hits, accesses).shape, np.nan)
    np.divide(hits, accesses, out=out, where=accesses > 0)
    return out


@dataclass(frozen=True)
class Estimate:
    """A quantity observed once per trial: its mean, the spread of the trials and the confidence
    interval of the mean (see the module docstring); both only cover the model's randomness."""

    mean: float
    std: float
    spread_lo: float
    spread_hi: float
    """Spread of trials: mean +- 1.96 std (clipped to the quantity's range), where one trial falls."""
    ci_lo: float
    ci_hi: float
    """95% confidence interval of the estimate: mean +- t975(n - 1) std / sqrt(n), where the mean is."""
    stderr: float
    """Standard error of the mean (std / sqrt(n))."""
    n: int

    @property
    def defined(self) -> bool:
        return self.n > 0

    def to_dict(self, digits: int = 4) -> dict[str, float | int | None]:
        def r(x: float) -> float | None:
            return None if np.isnan(x) else round(float(x), digits)
        return {"mean": r(self.mean), "std": r(self.std), "spread_lo": r(self.spread_lo),
                "spread_hi": r(self.spread_hi), "ci_lo": r(self.ci_lo), "ci_hi": r(self.ci_hi),
                "stderr": r(self.stderr), "n": self.n}


def estimate(samples: np.ndarray, lo: float = -np.inf, hi: float = np.inf) -> Estimate:
    """Mean, std (sample, ddof=1), the spread of trials mean +- 1.96 std and the confidence
    interval mean +- t975(n - 1) std / sqrt(n), both clipped to [lo, hi], ignoring NaN trials."""
    x = np.asarray(samples, dtype=np.float64)
    x = x[~np.isnan(x)]
    n = int(x.size)
    if n == 0:
        return Estimate(np.nan, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan, 0)
    mean = float(x.mean())
    std = float(x.std(ddof=1)) if n > 1 else 0.0
    se = std / float(np.sqrt(n))
    half = t975(n - 1) * se if n > 1 else 0.0
    return Estimate(mean, std, max(lo, mean - Z95 * std), min(hi, mean + Z95 * std),
                    max(lo, mean - half), min(hi, mean + half), se, n)


def estimate_columns(samples: np.ndarray, lo: float = -np.inf, hi: float = np.inf) -> list[Estimate]:
    """`estimate` of each column of a [trials, k] array."""
    return [estimate(samples[:, j], lo, hi) for j in range(samples.shape[1])]


def stack_counter(results: Sequence[TrialResult], name: str, n_ops: int, cols: np.ndarray | None = None) -> np.ndarray:
    """Counter `name` of every trial as a float array [trials, ops], or [trials, len(cols)] for
    the ops `cols` only. A result that keeps only the accessed ops' columns (`TrialResult.op_ids`)
    gives 0 (NaN for ``dram_latency``) for the others."""
    want = np.arange(n_ops) if cols is None else np.asarray(cols, dtype=np.int64)
    fill = np.nan if name == "dram_latency" else 0.0
    out = np.full((len(results), want.size), fill)
    for i, r in enumerate(results):
        a = getattr(r, name)
        ids = getattr(r, "op_ids", None)
        if ids is None:
            out[i] = a[want]
        elif ids.size:
            pos = np.minimum(np.searchsorted(ids, want), ids.size - 1)
            hit = ids[pos] == want
            out[i, hit] = a[pos[hit]]
    return out


@dataclass(frozen=True)
class OpLatency:
    """Per trial and op (arrays [trials, ops]): the hit ratios and the latency equation's terms."""

    h1: np.ndarray
    h2: np.ndarray
    """H2 as reported (NaN where the op reached no L2)."""
    h2_for_x: np.ndarray
    """H2 as it enters X: 0 for an op whose every sector hit L1 (it never reached L2)."""
    x: np.ndarray
    tm: np.ndarray
    """The op's DRAM latency in the trial, the trial's mean Tm where the op read no DRAM."""


def op_latency(results: Sequence[TrialResult], ops: Sequence[StaticOp], arch: Arch, cols: np.ndarray | None = None) -> OpLatency:
    """H1, H2, Tm and X = H1 t1 + (1-H1)(H2 t2 + (1-H2) Tm) of every op in every trial (paper
    000 sec. 6.1), or of the ops `cols` only. Loads: H1 and H2 over read sectors; stores and
    atomics go straight to L2 (write-through): H1 = 0 and H2 is the L2 write hit ratio."""
    def stack(name: str) -> np.ndarray:
        return stack_counter(results, name, len(ops), cols)

    picked = ops if cols is None else [ops[int(i)] for i in cols]
    is_load = np.array([o.kind == "load" for o in picked], dtype=bool)
    l1h, l1a = stack("l1_read_hits"), stack("l1_read_accesses")
    l2rh, l2ra = stack("l2_read_hits"), stack("l2_read_accesses")
    l2wh, l2wa = stack("l2_write_hits"), stack("l2_write_accesses")
    trial_tm = np.array([r.mean_dram_latency for r in results], dtype=np.float64)
    op_tm = stack("dram_latency")
    tm = np.where(np.isnan(op_tm), trial_tm[:, None], op_tm)
    h1 = np.where(is_load, ratio(l1h, l1a), 0.0)
    if not arch.l1.enabled:
        h1 = np.where(is_load, 0.0, h1)
    h2 = np.where(is_load, ratio(l2rh, l2ra), ratio(l2wh, l2wa))
    h2_for_x = np.where(np.isnan(h2) & (h1 == 1.0), 0.0, h2)
    if not arch.l2.enabled:
        h2 = h2_for_x = np.zeros_like(h2)
    x = expected_latency(h1, h2_for_x, float(arch.l1.hit_latency), float(arch.l2.hit_latency), tm)
    return OpLatency(h1, h2, h2_for_x, x, tm)


def memory_latency(x: np.ndarray, ops: Sequence[StaticOp], accesses: np.ndarray) -> np.ndarray:
    """Per trial, the access-weighted mean expected latency X of the global (cached) loads: the
    Mem_LD of MWP/CWP (HongKim09). NaN in a trial where no load has a defined X."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    keep = np.array([o.kind == "load" and o.is_cached for o in ops], dtype=bool)
    w = np.where(keep, np.asarray(accesses, dtype=np.float64), 0.0)
    ok = np.isfinite(x) & (w > 0)
    den = np.where(ok, w, 0.0).sum(axis=1)
    num = np.where(ok, x * w, 0.0).sum(axis=1)
    out = np.full(x.shape[0], np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out
