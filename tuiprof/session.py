"""One profiling run: a trace (file or demo) and a configuration, resolved into what the
simulator needs. The Monte Carlo run itself and its events build on this."""

from __future__ import annotations

import dataclasses
import itertools
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from tuiprof.arch.model import Arch
from tuiprof.arch.occupancy import Occupancy, occupancy
from tuiprof.collect.options import CollectOptions
from tuiprof.errors import TuiprofError, UsageError
from tuiprof.sim.budget import check_run_memory
from tuiprof.trace.model import Trace


DEFAULT_TOLERANCE = 0.002
SWEEP_MIN_TRIALS = 8


@dataclass(frozen=True)
class RunConfig:
    """What the user asked for: GPU model, what-if overrides, trials, seed, MD."""

    arch: str | None = None
    """Preset name or TOML path; None = the arch the trace was made for."""
    overrides: Mapping[str, str] = field(default_factory=dict)
    trials: int = 64
    seed: int = 0
    md: int | None = None
    """Resident CTAs per SM; None = the occupancy limit."""
    tolerance: float | None = DEFAULT_TOLERANCE
    """Stop early once every headline hit ratio's 95% interval half-width is below this (a
    ratio: 0.002 = 0.2 percentage points), after at least 20 trials (paper 000 Fig. 7; the MD
    sweep after 8); None runs every trial."""
    threads: int | None = None
    sweep: bool = True
    """Run the MD sweep (paper 002) after the main run, for the MD decision."""
    sweep_trials: int | None = None
    """Trials per MD in the sweep; None = a quarter of `trials` (at least 8)."""
    collect: CollectOptions = field(default_factory=CollectOptions)
    """How a `.cu` target is compiled, launched and recorded (unused for a recorded trace)."""


def resolve_arch(trace: Trace, config: RunConfig) -> Arch:
    """The Arch to simulate: the requested one (or the trace's preset), with overrides applied."""
    from tuiprof.arch.presets import load_arch, preset_arch

    if config.arch:
        return load_arch(config.arch, config.overrides)
    return preset_arch(trace.provenance.arch, config.overrides)


def kernel_occupancy(trace: Trace, arch: Arch) -> Occupancy:
    L = trace.launch
    return occupancy(arch, L.threads_per_cta, L.registers_per_thread, L.static_shared, L.dynamic_shared)


def resolve_md(trace: Trace, arch: Arch, config: RunConfig) -> int:
    """MD to simulate: the requested one, checked against what the occupancy allows."""
    limit = kernel_occupancy(trace, arch).ctas_per_sm
    if config.md is None:
        return limit
    if config.md > limit:
        raise UsageError(f"--md {config.md} exceeds the {limit} CTAs per SM that {arch.name} can hold for this kernel",
                         f"choose --md between 1 and {limit}")
    return config.md


# --- events -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TrialDone:
    """One Monte Carlo trial landed."""

    result: Any
    done: int
    planned: int


@dataclass(frozen=True)
class AnalysisUpdated:
    """The analysis over the trials so far (throttled to about 10 per second)."""

    analysis: Any


@dataclass(frozen=True)
class SweepProgress:
    """The MD sweep (after the main run): `done` of `planned` trials at MD `md`; `mds` are all the
    MDs the sweep simulates, in order."""

    md: int
    done: int
    planned: int
    mds: tuple[int, ...]


@dataclass(frozen=True)
class Finished:
    analysis: Any


@dataclass(frozen=True)
class Cancelled:
    analysis: Any | None


@dataclass(frozen=True)
class Failed:
    error: TuiprofError


Event = TrialDone | AnalysisUpdated | SweepProgress | Finished | Cancelled | Failed
UPDATE_INTERVAL = 0.1


class Session:
    """One profiling run of a trace under a RunConfig, reported as events.

    Resolution (arch, overrides, MD) happens in the constructor so that a bad configuration fails
    before any work starts. `run` blocks, emitting events to `on_event` from the calling thread or
    the simulator's worker threads; `cancel` may be called from any thread.

    `prepared` is the packing of the same trace by an earlier session (`Session.prepared`): a
    rerun reuses it when the Arch allows (same L1 line and SM count) instead of packing the trace
    again, so a rerun neither waits for nor holds a second copy.
    """

    def __init__(self, trace: Trace, config: RunConfig, path: Path | None = None, *,
                 prepared: Any = None) -> None:
        self.trace = trace
        self.config = config
        self.path = path
        self.arch = resolve_arch(trace, config)
        self.occupancy = kernel_occupancy(trace, self.arch)
        self.md = resolve_md(trace, self.arch, config)
        check_run_memory(self.arch, trace.n_accesses, os.cpu_count() or 1)
        self._lock = threading.Lock()
        self._cancelled = False
        self._mc: Any = None
        self._listening = True
        """Someone receives this run's events (intermediate analyses are made only then)."""
        self.prepared: Any = prepared
        """The trace packed for the simulator (a `tuiprof.sim.prepared.Prepared`), once run."""
        self.analysis: Any = None
        self.stop_reason: str | None = None
        """After the main run: "completed", "converged" or "cancelled"."""

    @classmethod
    def open(cls, target: str | Path, config: RunConfig) -> "Session":
        """A session on a .tptrace path, a demo name, or a CUDA source (compiled, run in the
        emulator under its launch script, and recorded first)."""
        if Path(target).suffix == ".cu":
            from tuiprof.collect.pipeline import collect_trace

            source = Path(target)
            return cls(collect_trace(source, config), config, source)
        from tuiprof.trace.demos import load, resolve_target

        path = resolve_target(str(target))
        return cls(load(path), config, path)

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            if self._mc is not None:
                self._mc.cancel()

    def release(self) -> None:
        """Drop what only a run in progress needs (its Monte Carlo driver and trial pool
        bookkeeping); the trace, the preparation and the analysis stay."""
        with self._lock:
            self._mc = None

    def run(self, on_event: Callable[[Event], None] | None = None) -> Any:
        """Run the trials; return the final Analysis (None if cancelled before any trial)."""
        emit = on_event or (lambda e: None)
        self._listening = on_event is not None
        try:
            return self._run(emit)
        except TuiprofError as exc:
            emit(Failed(exc))
            raise
        except Exception as exc:  # a Numba compile failure or a bug: still one clear message
            err = TuiprofError(f"simulation failed: {type(exc).__name__}: {exc}",
                               "this is a tuiprof bug; please report it with the trace")
            emit(Failed(err))
            raise err from exc

    def _run(self, emit: Callable[[Event], None]) -> Any:
        from tuiprof.sim.montecarlo import MonteCarlo

        cfg = self.config
        if self._cancelled:  # cancelled before it started: do not even pack the trace
            emit(Cancelled(None))
            return None
        mc = MonteCarlo(self.trace, self.arch, trials=cfg.trials, seed=cfg.seed, md=self.md,
                        threads=cfg.threads, tolerance=cfg.tolerance, prepared=self.prepared)
        self.prepared = mc.prepared
        results = self._trials(mc, emit)
        analysis = self._analyse(mc, results)
        if analysis is not None:
            from tuiprof.model.decisions import decisions

            base = decisions(self.trace, self.arch, self.md, analysis, results)
            analysis = dataclasses.replace(analysis, decisions=base)
            if not self._cancelled:
                emit(AnalysisUpdated(analysis))
                analysis = self._sweep(mc, results, analysis, emit)
        self.analysis = analysis
        emit(Cancelled(analysis) if self._cancelled else Finished(analysis))
        return analysis

    def _stream(self, mc: Any, on_result: Callable[[Any], None]) -> list[Any]:
        """Run `mc` as this session's current run, handing each landed trial to `on_result`;
        the results in trial order ([] when cancelled before it starts)."""
        with self._lock:
            self._mc = mc
            if self._cancelled:
                return []

        def on_trial(result: Any) -> None:
            if self._cancelled:  # a cancel that raced the start of the run
                mc.cancel()
                return
            on_result(result)

        return mc.run(on_trial)

    def _trials(self, mc: Any, emit: Callable[[Event], None]) -> list[Any]:
        """The main run's trials, streamed as TrialDone and throttled AnalysisUpdated events.

        Intermediate analyses are made only for a listener, and at most one per UPDATE_INTERVAL
        or per four times what the last one took (a trace with a huge op table analyses slowly:
        the updates must not cost more than the trials)."""
        landed: list[Any] = []
        self._t0 = time.perf_counter()
        self._op_stats = mc.op_stats()  # trial-invariant: once per run, not per update
        last, cost = [0.0], [0.0]

        def on_result(result: Any) -> None:
            landed.append(result)
            emit(TrialDone(result, len(landed), mc.trials))
            now = time.perf_counter()
            if self._listening and now - last[0] >= max(UPDATE_INTERVAL, 4 * cost[0]):
                analysis = self._analyse(mc, sorted(landed, key=lambda r: r.index))
                last[0] = time.perf_counter()
                cost[0] = last[0] - now
                emit(AnalysisUpdated(analysis))

        self._stream(mc, on_result)
        self.stop_reason = mc.stop_reason
        return sorted(landed, key=lambda r: r.index)

    def _analyse(self, mc: Any, results: list[Any]) -> Any:
        from tuiprof.model.analysis import analyse

        if not results:
            return None
        stats = self._op_stats
        return analyse(self.trace.ops, self.arch, self.md, results, mc.trials, stats.accesses,
                       stats.requests_per_access, stats.sectors_per_request, time.perf_counter() - self._t0)

    def sweep_mds(self) -> tuple[int, ...]:
        """MDs the sweep simulates: 1 .. the occupancy limit (paper 002 sec. 5.2)."""
        return tuple(range(1, self.occupancy.ctas_per_sm + 1))

    def sweep_trial_count(self) -> int:
        cfg = self.config
        return cfg.sweep_trials or min(cfg.trials, max(8, cfg.trials // 4))

    def _sweep(self, mc: Any, results: list[Any], analysis: Any, emit: Callable[[Event], None]) -> Any:
        """Paper 002's MD sweep: simulate the snapshot at every MD (reusing the main run for its
        own MD and its preparation for the others), then decide."""
        from tuiprof.model.decisions import gain_interval, md_sample, trial_table, working_set_lines
        from tuiprof.model.md import decide_md
        from tuiprof.sim.montecarlo import MonteCarlo

        def with_decisions(**changes: Any) -> Any:
            return dataclasses.replace(analysis, decisions=dataclasses.replace(analysis.decisions, **changes))

        if not self.config.sweep:
            return with_decisions(md_note="MD sweep not run")
        if not self.arch.l1.enabled:
            return with_decisions(md_note=f"{self.arch.name} has no L1: paper 002's MD decision is about L1 contention")
        mds, n = self.sweep_mds(), self.sweep_trial_count()
        t0 = time.perf_counter()
        samples, tables, ran = [], [], [0]
        for m in mds:
            runs = results
            if m != self.md:
                sub = MonteCarlo(self.trace, self.arch, trials=n, seed=self.config.seed, md=m,
                                 threads=self.config.threads, tolerance=self.config.tolerance,
                                 min_trials=max(2, min(n, SWEEP_MIN_TRIALS)), prepared=mc.prepared)
                done = itertools.count(1)
                runs = self._stream(sub, lambda _, m=m: emit(SweepProgress(m, next(done), n, mds)))
                ran.append(len(runs))
            if self._cancelled:
                return with_decisions(md_samples=tuple(samples), md_note="MD sweep cancelled")
            samples.append(md_sample(m, runs, self.trace))
            tables.append(trial_table(runs, self.trace))
        swept = dict(md_samples=tuple(samples), sweep_trials=max(ran), sweep_elapsed=time.perf_counter() - t0)
        co, L = mc.prepared.coalesced, self.trace.launch
        ws = working_set_lines(self.trace, co.req_off, co.req_line) or samples[0].dram_reads_per_cta
        try:
            decision = decide_md(self.arch, samples, threads_per_cta=L.threads_per_cta,
                                 registers_per_thread=L.registers_per_thread, shared_per_cta=L.static_shared,
                                 dynamic_shared=L.dynamic_shared, working_set_lines=ws)
        except UsageError as exc:  # nothing cached: no L1 working set to contend for
            return with_decisions(md_note=exc.message, **swept)
        interval = None
        if decision.simulated is not None and decision.recommended_md != decision.default_md:
            interval = gain_interval(tables, decision.recommended_md, decision.default_md, ws,
                                     self.arch.l1.size / self.arch.l1.line, seed=self.config.seed)
        return with_decisions(md=decision, gain_interval=interval, **swept)
