"""The Monte Carlo driver: many independent trials on a thread pool, streamed as they land.

Trial i runs with its own seed, derived from (seed, i) alone (`tuiprof.sim.rng.trial_seed`), so
a run gives the same set of results whatever the thread count or completion order. The trial
kernel releases the GIL, so threads run trials truly in parallel.

Early stop (Baghsorkhi12 Fig. 7): with a `tolerance`, the run stops at the first prefix of
``n >= min_trials`` trials (in index order) where the 95% confidence interval half-width
``t975(n - 1) * std / sqrt(n)`` (Student's t, `tuiprof.stats`) of every headline hit ratio
(L1 read, L2 read, L2 write; ratios a trial leaves undefined are ignored) is below the tolerance.
Testing prefixes in index order, not in completion order, keeps the stopping point, and so the
result set, independent of thread timing. A trial is streamed once it is certain to belong to the set.

Several runs (the main run and the MD sweep's runs) share one pool of workers (`TrialPool`), so
that no core idles where one run ends and the next begins: the first run has every free worker
while it has trials to start, then the others share them, fewest trials started first. Each run
keeps its own seeds and its own early stop, so its results are those it gives alone. The pool's
owner may also hold a run at a trial budget below its trial count, raise it, or settle the run
where it stands (the MD sweep's adaptive trials, `tuiprof.session`).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from tuiprof.arch.spec import Arch
from tuiprof.errors import UsageError
from tuiprof.sim.prepared import OpCoalescing, Prepared, default_md, pack_arch, prepare
from tuiprof.sim.results import TrialResult
from tuiprof.sim.rng import trial_seed
from tuiprof.sim.trial import run_trial
from tuiprof.stats import ci_half_width
from tuiprof.trace.data import Trace

HEADLINE = ("l1_read_hit_ratio", "l2_read_hit_ratio", "l2_write_hit_ratio")
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
        """95% confidence interval half-width of the mean of `key`, t975(n - 1) std / sqrt(n) (nan with
        fewer than two values)."""
        n = self.n[key]
        if n < 2:
            return float("nan")
        return ci_half_width(math.sqrt(self._m2[key] / (n - 1)), n)

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
        """After a run: "completed", "converged", "settled" (ended by its pool's owner) or "cancelled"."""
        self.convergence = Convergence()
        """Statistics of the trials of the last run, in index order, up to the stopping point."""
        self.budget: int | None = None
        """In a `TrialPool`: trials it may start so far (None: all); see `TrialPool.set_budget`."""

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
        for event in TrialPool([self], self.threads, cancel=self._cancel).iter_events():
            if event.result is not None:
                yield event.result


@dataclass(frozen=True)
class PoolEvent:
    """What a `TrialPool` reports: a trial of `run` streamed (`result`), or `run` finished
    (`result` None; its ``stop_reason`` and ``convergence`` are then final)."""

    run: MonteCarlo
    result: TrialResult | None


class _Progress:
    """One run's state inside a pool: trials started and landed, the convergence of the prefix
    that landed in index order, the stopping point once known, what has been streamed."""

    def __init__(self, mc: MonteCarlo) -> None:
        self.mc = mc
        self.landed: dict[int, TrialResult] = {}
        self.streamed: set[int] = set()
        self.conv = Convergence()
        self.frontier = 0  # trials 0 .. frontier-1 have landed and are in `conv`
        self.stop_at: int | None = None
        self.started = 0
        self.in_flight = 0
        self.finished = False
        self.settled = False

    def can_start(self) -> bool:
        limit = self.mc.trials if self.mc.budget is None else min(self.mc.budget, self.mc.trials)
        return not self.finished and not self.settled and self.stop_at is None and self.started < limit

    def speculative(self) -> bool:
        """Whether another trial now would be a guess: the run stops early, has started its
        minimum, and has a trial in flight that may be the one at which it converges."""
        return self.mc.tolerance is not None and self.started >= self.mc.min_trials and self.in_flight > 0

    def certain(self, i: int) -> bool:
        """Whether landed trial `i` belongs to the run's result set whatever lands later."""
        mc = self.mc
        if mc.tolerance is None or i < mc.min_trials:
            return True
        return self.frontier >= i and (self.stop_at is None or i < self.stop_at)

    def land(self, i: int, result: TrialResult) -> list[TrialResult]:
        """Record trial `i`; the results that may be streamed now, in index order."""
        mc = self.mc
        self.in_flight -= 1
        self.landed[i] = result
        while self.stop_at is None and self.frontier in self.landed:
            self.conv.add(self.landed[self.frontier])
            self.frontier += 1
            if mc.tolerance is not None and self.frontier >= mc.min_trials and self.conv.converged(mc.tolerance):
                self.stop_at = self.frontier
        out = []
        for k in sorted(self.landed):
            if k not in self.streamed and self.certain(k):
                self.streamed.add(k)
                out.append(self.landed[k])
        return out

    def complete(self) -> bool:
        """Every trial of the result set has been streamed."""
        if self.settled:
            return self.in_flight == 0 and all(i in self.streamed for i in self.landed)
        if self.stop_at is not None:
            return all(i in self.streamed for i in range(self.stop_at))
        return self.started == self.mc.trials and self.in_flight == 0 and len(self.streamed) == self.mc.trials


class TrialPool:
    """Several Monte Carlo runs on one pool of `threads` worker threads (default: all CPUs),
    streamed as they land.

    A free worker starts the next trial of the first run while it has trials to start, else of
    the run (among the others) that has started the fewest; so a sweep of runs after a main run
    starts as soon as the main run has started its last trial, and all its runs reach their
    minimum trial counts about together. Past its minimum, a run that stops early keeps one trial
    in flight while the others can use a worker (a second would be a guess, dropped if the first
    converges): the sweep runs beside the main run's last trials. Each run's results, stopping
    point and stop reason are those it gives alone (seeds per trial index, early stop on
    index-order prefixes).
    """

    def __init__(self, runs: Sequence[MonteCarlo], threads: int | None = None, *,
                 cancel: threading.Event | None = None) -> None:
        if not runs:
            raise ValueError("a pool needs at least one run")
        if threads is not None and threads < 1:
            raise UsageError(f"the thread count must be at least 1, got {threads}")
        self.runs = list(runs)
        self.threads = threads or os.cpu_count() or 1
        self._cancel = cancel or threading.Event()
        self._settle: set[int] = set()

    def cancel(self) -> None:
        """Stop every run between trials (thread-safe); trials in flight finish in the background
        and are dropped."""
        self._cancel.set()

    def set_budget(self, run: MonteCarlo, budget: int | None) -> None:
        """Let `run` start trials up to `budget` (None: all its trials). Call it from the thread that
        iterates `iter_events`, while handling an event: the pool goes on with it when the event
        returns (a pool whose runs all wait at their budgets ends once their events are handled)."""
        run.budget = budget

    def settle(self, run: MonteCarlo) -> None:
        """End `run` with the trials it has (stop reason "settled") once those in flight land; the
        same thread and moment as `set_budget`."""
        self._settle.add(id(run))

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def _next(self, progress: list[_Progress]) -> _Progress | None:
        first = progress[0]
        if first.can_start() and not first.speculative():
            return first
        rest = [p for p in progress[1:] if p.can_start()]
        if rest:
            return min(rest, key=lambda p: (p.speculative(), p.started))
        return first if first.can_start() else None

    def _pooled(self, mc: "MonteCarlo", index: int) -> TrialResult:
        """Trial `index` of `mc` on a pool thread, once a `TRIAL_SLOTS` slot is free."""
        with TRIAL_SLOTS:
            if self._cancel.is_set():
                raise _Dropped(index)
            return mc.run_one(index)

    def iter_events(self) -> Iterator[PoolEvent]:
        """Yield each run's trials as they are streamed and each run's end, until every run has
        finished or the pool is cancelled (then every unfinished run ends "cancelled")."""
        progress = [_Progress(mc) for mc in self.runs]
        for p in progress:
            p.mc.stop_reason = None
            p.mc.convergence = p.conv
        pending: dict[Future[TrialResult], tuple[_Progress, int]] = {}
        pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="tuiprof-trial")
        try:
            while True:
                for p in progress:  # runs that ended with the last trials, or were settled by the owner
                    p.settled = p.settled or id(p.mc) in self._settle
                    if not p.finished and not self._cancel.is_set() and p.complete():
                        p.finished = True
                        stopped_early = p.stop_at is not None and p.stop_at < p.mc.trials
                        p.mc.stop_reason = "settled" if p.settled else "converged" if stopped_early else "completed"
                        yield PoolEvent(p.mc, None)
                while len(pending) < self.threads and not self._cancel.is_set():
                    p = self._next(progress)  # type: ignore[assignment]  # None is tested next
                    if p is None:
                        break
                    pending[pool.submit(self._pooled, p.mc, p.started)] = (p, p.started)
                    p.started += 1
                    p.in_flight += 1
                if not pending and not self._cancel.is_set() and any(not p.finished and p.complete() for p in progress):
                    continue  # a run to end first
                if not pending or self._cancel.is_set() or all(p.finished for p in progress):
                    break  # trials of finished runs still in flight are dropped
                done, _ = wait(pending, timeout=CANCEL_POLL, return_when=FIRST_COMPLETED)
                for fut in sorted(done, key=lambda f: (progress.index(pending[f][0]), pending[f][1])):
                    p, i = pending.pop(fut)
                    if isinstance(fut.exception(), _Dropped):  # dropped only once cancelled
                        p.in_flight -= 1
                        continue
                    result = fut.result()
                    if p.finished or self._cancel.is_set():
                        p.in_flight -= 1
                        continue
                    for r in p.land(i, result):
                        if self._cancel.is_set():
                            break
                        yield PoolEvent(p.mc, r)
            if self._cancel.is_set():
                for p in progress:
                    if not p.finished:
                        p.finished = True
                        p.mc.stop_reason = "cancelled"
        finally:
            for fut in pending:
                fut.cancel()
            pool.shutdown(wait=False, cancel_futures=True)
