"""The Monte Carlo driver: many independent trials on a thread pool, streamed as they land.

Trial i runs with its own seed, derived from (seed, i) alone (`tuiprof.sim.rng.trial_seed`), so
a run gives the same set of results whatever the thread count or completion order. The trial
kernel releases the GIL, so threads run trials truly in parallel.

Early stop (paper 000 Fig. 7): with a `tolerance`, the run stops at the first prefix of
``n >= min_trials`` trials (in index order) where the 95% interval half-width
``1.96 * std / sqrt(n)`` of every headline hit ratio (L1 read, L2 read, L2 write; ratios a
trial leaves undefined are ignored) is below the tolerance. Testing prefixes in index order,
not in completion order, keeps the stopping point, and so the result set, independent of
thread timing. A trial is streamed once it is certain to belong to the set.
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Callable, Iterator

from tuiprof.arch.model import Arch
from tuiprof.errors import UsageError
from tuiprof.sim.prepared import OpCoalescing, Prepared, default_md, pack_arch, prepare
from tuiprof.sim.results import TrialResult
from tuiprof.sim.rng import trial_seed
from tuiprof.sim.trial import run_trial
from tuiprof.trace.model import Trace

HEADLINE = ("l1_read_hit_ratio", "l2_read_hit_ratio", "l2_write_hit_ratio")
Z95 = 1.96
CANCEL_POLL = 0.05
"""Seconds between checks for a cancel while waiting for trials: a cancelled run returns at once
instead of after the trial in flight (seconds on a large trace)."""
TRIAL_SLOTS = threading.BoundedSemaphore(os.cpu_count() or 1)
"""Trials running at once in this process, whatever run they belong to. A trial cannot be
interrupted, so the trials in flight of a cancelled run finish in the background; they keep
their slots until then, so that a rerun waits for them instead of piling its own trials (and
their working memory) on top, however often the user reruns."""


class _Dropped(Exception):
    """A trial of a cancelled run that had not started when its slot came free."""


class Convergence:
    """Running mean and variance (Welford) of each headline ratio over trials added in order."""

    def __init__(self) -> None:
        self.n = {k: 0 for k in HEADLINE}
        self._mean = {k: 0.0 for k in HEADLINE}
        self._m2 = {k: 0.0 for k in HEADLINE}

    def add(self, result: TrialResult) -> None:
        for k in HEADLINE:
            x = getattr(result, k)
            if math.isnan(x):
                continue
            self.n[k] += 1
            d = x - self._mean[k]
            self._mean[k] += d / self.n[k]
            self._m2[k] += d * (x - self._mean[k])

    def half_width(self, key: str) -> float:
        """95% interval half-width of the mean of `key` (nan with fewer than two values)."""
        n = self.n[key]
        if n < 2:
            return float("nan")
        return Z95 * math.sqrt(self._m2[key] / (n - 1)) / math.sqrt(n)

    def converged(self, tolerance: float) -> bool:
        """Every ratio defined in at least two trials has a half-width below `tolerance`."""
        widths = [self.half_width(k) for k in HEADLINE if self.n[k] >= 2]
        return all(w < tolerance for w in widths)


class MonteCarlo:
    """Up to `trials` trials of `trace` on `arch` with MD `md` (default: the launch's CTAs per SM,
    or the occupancy limit), on `threads` worker threads (default: all CPUs).

    Preparation (coalescing, packing) happens here, once; `with_md` and `with_arch` reuse it.
    """

    def __init__(self, trace: Trace | None, arch: Arch, *, trials: int, seed: int = 0, md: int | None = None,
                 threads: int | None = None, tolerance: float | None = None, min_trials: int = 20,
                 prepared: Prepared | None = None) -> None:
        if trials < 1:
            raise UsageError(f"the trial count must be at least 1, got {trials}")
        if threads is not None and threads < 1:
            raise UsageError(f"the thread count must be at least 1, got {threads}")
        if tolerance is not None and not tolerance > 0:
            raise UsageError(f"the tolerance must be positive, got {tolerance}")
        if min_trials < 2:
            raise UsageError(f"the minimum trial count must be at least 2, got {min_trials}")
        if md is not None and md < 1:
            raise UsageError(f"MD (CTAs per SM) must be at least 1, got {md}")
        if prepared is None or not prepared.compatible(arch):
            if trace is None:
                raise ValueError("a trace is needed when no compatible preparation is given")
            prepared = prepare(trace, arch)
        self.trace = trace
        self.arch = arch
        self.prepared = prepared
        self.trials = trials
        self.seed = seed
        self.md = md if md is not None else default_md(trace, arch) if trace is not None else 1
        self.threads = threads or os.cpu_count() or 1
        self.tolerance = tolerance
        self.min_trials = min_trials
        self.params = pack_arch(arch)
        self._cancel = threading.Event()
        self.stop_reason: str | None = None
        """After a run: "completed", "converged" or "cancelled"."""
        self.convergence = Convergence()
        """Statistics of the trials of the last run, in index order, up to the stopping point."""

    def with_md(self, md: int) -> "MonteCarlo":
        """The same run at another MD, sharing this one's preparation."""
        return MonteCarlo(self.trace, self.arch, trials=self.trials, seed=self.seed, md=md, threads=self.threads,
                          tolerance=self.tolerance, min_trials=self.min_trials, prepared=self.prepared)

    def with_arch(self, arch: Arch) -> "MonteCarlo":
        """The same run on another Arch; the preparation is reused when the L1 line size and the
        SM count agree."""
        return MonteCarlo(self.trace, arch, trials=self.trials, seed=self.seed, md=self.md, threads=self.threads,
                          tolerance=self.tolerance, min_trials=self.min_trials, prepared=self.prepared)

    def cancel(self) -> None:
        """Stop the run between trials (thread-safe). Trials in flight finish in the background
        and are dropped; nothing more is streamed."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def op_stats(self) -> OpCoalescing:
        """Per-op warp accesses, requests per access and sectors per request (trial-invariant)."""
        return self.prepared.op_stats()

    def seed_of(self, index: int) -> int:
        """The seed of trial `index`."""
        return trial_seed(self.seed, index)

    def run_one(self, index: int) -> TrialResult:
        """Trial `index`, in the calling thread."""
        return run_trial(self.prepared, self.params, self.md, self.seed_of(index), index=index)

    def _pooled(self, index: int) -> TrialResult:
        """Trial `index` on a pool thread, once a `TRIAL_SLOTS` slot is free."""
        with TRIAL_SLOTS:
            if self._cancel.is_set():
                raise _Dropped(index)
            return self.run_one(index)

    def run(self, on_trial: Callable[[TrialResult], None] | None = None) -> list[TrialResult]:
        """Run to the end (all trials, convergence or cancellation); results by trial index.
        `on_trial` is called in this thread with each result as it is streamed."""
        out = []
        for result in self.iter_trials():
            if on_trial is not None:
                on_trial(result)
            out.append(result)
        out.sort(key=lambda r: r.index)
        return out

    def iter_trials(self) -> Iterator[TrialResult]:
        """Yield results as they land (not necessarily in index order)."""
        self._cancel.clear()
        self.stop_reason = None
        self.convergence = conv = Convergence()
        tol = self.tolerance
        landed: dict[int, TrialResult] = {}
        streamed: set[int] = set()
        pending: dict[Future[TrialResult], int] = {}
        frontier = 0  # trials 0 .. frontier-1 have landed and are in `conv`
        stop_at: int | None = None
        next_index = 0
        pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="tuiprof-trial")

        def certain(i: int) -> bool:
            if tol is None or i < self.min_trials:
                return True
            return frontier >= i and (stop_at is None or i < stop_at)

        try:
            while True:
                while (len(pending) < self.threads and next_index < self.trials and stop_at is None
                       and not self._cancel.is_set()):
                    pending[pool.submit(self._pooled, next_index)] = next_index
                    next_index += 1
                if not pending or self._cancel.is_set():
                    break
                done, _ = wait(pending, timeout=CANCEL_POLL, return_when=FIRST_COMPLETED)
                for fut in done:
                    i = pending.pop(fut)
                    if not isinstance(fut.exception(), _Dropped):  # dropped only once cancelled
                        landed[i] = fut.result()
                if self._cancel.is_set():
                    break
                while stop_at is None and frontier in landed:
                    conv.add(landed[frontier])
                    frontier += 1
                    if tol is not None and frontier >= self.min_trials and conv.converged(tol):
                        stop_at = frontier
                for i in sorted(landed):
                    if i not in streamed and certain(i) and not self._cancel.is_set():
                        streamed.add(i)
                        yield landed[i]
                if stop_at is not None and all(i in streamed for i in range(stop_at)):
                    break
            if self._cancel.is_set():
                self.stop_reason = "cancelled"
            elif stop_at is not None and stop_at < self.trials:
                self.stop_reason = "converged"
            else:
                self.stop_reason = "completed"
        finally:
            for fut in pending:
                fut.cancel()
            pool.shutdown(wait=False, cancel_futures=True)
