"""One profiling run: a trace (file or demo) and a configuration, resolved into what the
simulator needs. The Monte Carlo run itself and its events build on this."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from tuiprof.arch.model import Arch
from tuiprof.arch.occupancy import Occupancy, carveout, carveout_arch, occupancy
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
    """Stop early once every headline hit ratio's 95% confidence interval (of the mean: 1.96 std /
    sqrt(n)) has a half-width below this (a ratio: 0.002 = 0.2 percentage points), after at least 20 trials (paper 000 Fig. 7; the MD
    sweep after 8); None runs every trial."""
    threads: int | None = None
    sweep: bool = True
    """Run the MD sweep (paper 002) for the MD decision: its trials share the main run's workers
    from the main run's last trials on."""
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


L1_SETTINGS = ("l1.size", "l1.assoc")
"""What-if settings that fix the L1: with either, the shared-memory carve-out does not size it."""


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
    """The analysis over the trials so far: during the main run (the first trial at once, then
    about 10 per second), when it ends (with the models that need no sweep), and with the MD
    decision so far once every MD has its minimum trials and again as each MD's run ends
    (``decisions.md_note`` says it may still change)."""

    analysis: Any


@dataclass(frozen=True)
class SweepProgress:
    """The MD sweep: `done` of `planned` trials at MD `md`; `mds` are all the MDs the sweep
    simulates, in order. Sent once the main run has ended (progress that lands earlier waits for
    it), MD by MD as their trials land."""

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
    before any work starts. `run` blocks, emitting events to `on_event` from the calling thread
    (the simulator's worker threads only run trials); `cancel` may be called from any thread.

    `prepared` is the packing of the same trace by an earlier session (`Session.prepared`): a
    rerun reuses it when the Arch allows (same L1 line and SM count) instead of packing the trace
    again, so a rerun neither waits for nor holds a second copy.
    """

    def __init__(self, trace: Trace, config: RunConfig, path: Path | None = None, *,
                 prepared: Any = None) -> None:
        self.trace = trace
        self.config = config
        self.path = path
        self.requested_arch = resolve_arch(trace, config)
        """The GPU asked for (preset or file, with the what-if overrides)."""
        self.occupancy = kernel_occupancy(trace, self.requested_arch)
        self.md = resolve_md(trace, self.requested_arch, config)
        self.arch = self.arch_at(self.md)
        """The GPU simulated at the main run's MD: `requested_arch` with the L1 its shared-memory
        carve-out leaves (Volta and later, `tuiprof.arch.occupancy.carveout_arch`)."""
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

    def arch_at(self, md: int) -> Arch:
        """The GPU simulated at MD `md`: on Volta and later the driver sizes the L1 beside the
        kernel's shared memory, `md` CTAs of it per SM; an explicit ``l1.size`` or ``l1.assoc``
        in the what-if overrides keeps the L1 as set."""
        if self._l1_fixed:
            return self.requested_arch
        return carveout_arch(self.requested_arch, md * self.occupancy.shared_per_cta)

    @property
    def shared_carveout(self) -> int | None:
        """The shared-memory carve-out (bytes) beside the simulated L1 at the main MD; None when
        the L1 is the Arch's own (before Volta, or fixed by a what-if)."""
        if self._l1_fixed:
            return None
        return carveout(self.requested_arch, self.md * self.occupancy.shared_per_cta)

    @property
    def _l1_fixed(self) -> bool:
        return any(k in self.config.overrides for k in L1_SETTINGS)

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
        """The main run and the MD sweep's runs on one pool of workers (the sweep's trials start
        as soon as the main run has started its last one), reported as events: the main run's
        trials with throttled analyses; when it ends, its analysis and models; then the sweep's
        progress, a first MD decision as soon as every MD has its minimum trials, refined as
        each MD's run ends; Finished with the final decision. Each run's results are those it
        gives alone, whatever the thread count."""
        from tuiprof.sim.montecarlo import MonteCarlo, TrialPool

        cfg = self.config
        if self._cancelled:  # cancelled before it started: do not even pack the trace
            emit(Cancelled(None))
            return None
        mc = MonteCarlo(self.trace, self.arch, trials=cfg.trials, seed=cfg.seed, md=self.md,
                        threads=cfg.threads, tolerance=cfg.tolerance, prepared=self.prepared)
        self._t0 = time.perf_counter()
        self._op_stats = mc.op_stats()  # trial-invariant: once per run, not per update
        self.prepared = mc.prepared
        self._working_set: float | None = None
        sweep, self._sweep_note = self._sweep_runs(mc)
        pool = TrialPool([mc, *sweep.values()], mc.threads)
        with self._lock:
            self._mc = pool
            if self._cancelled:
                emit(Cancelled(None))
                return None
        main: list[Any] = []
        per_md: dict[int, list[Any]] = {m: [] for m in sweep}
        queued: list[SweepProgress] = []  # sweep progress that lands before the main run ends
        analysis: Any = None
        main_done = decided = False
        last, cost = 0.0, 0.0
        for ev in pool.iter_events():
            if self._cancelled:  # a cancel that raced the start of the run
                pool.cancel()
                break
            if ev.run is mc and ev.result is not None:
                main.append(ev.result)
                emit(TrialDone(ev.result, len(main), mc.trials))
                now = time.perf_counter()
                # Intermediate analyses only for a listener, at most one per UPDATE_INTERVAL or per
                # four times what the last one took (a huge op table must not cost more than the trials).
                if self._listening and now - last >= max(UPDATE_INTERVAL, 4 * cost):
                    update = self._analyse(mc, sorted(main, key=lambda r: r.index))
                    last = time.perf_counter()
                    cost = last - now
                    emit(AnalysisUpdated(update))
            elif ev.run is mc:  # the main run ended
                main_done = True
                self.stop_reason = mc.stop_reason
                self._t_main = time.perf_counter()
                analysis = self._with_models(mc, main)
                emit(AnalysisUpdated(analysis))
                for progress in queued:
                    emit(progress)
            elif ev.result is not None:
                m = ev.run.md
                per_md[m].append(ev.result)
                progress = SweepProgress(m, len(per_md[m]), ev.run.trials, self.sweep_mds())
                if main_done:
                    emit(progress)
                else:
                    queued.append(progress)
            if (self._listening and main_done and sweep and (ev.result is None or not decided)
                    and self._has_minimum(sweep, per_md)):
                decided = True  # first when every MD has its minimum, then again as each MD ends
                if not all(run.stop_reason for run in sweep.values()):
                    emit(AnalysisUpdated(self._with_md(analysis, main, per_md, final=False)))
        if not self._cancelled and not pool.cancelled:
            self.analysis = self._with_md(analysis, main, per_md, final=True)
            emit(Finished(self.analysis))
            return self.analysis
        if not main_done:
            self.stop_reason = mc.stop_reason
            analysis = self._with_models(mc, main)
        elif sweep:
            analysis = self._with_note(analysis, "MD sweep cancelled", self._samples(main, per_md, landed_only=True))
        self.analysis = analysis
        emit(Cancelled(analysis))
        return analysis

    def _with_models(self, mc: Any, results: list[Any]) -> Any:
        """The analysis of the main run's `results` with the models that need no sweep."""
        from tuiprof.model.decisions import decisions

        ordered = sorted(results, key=lambda r: r.index)
        analysis = self._analyse(mc, ordered)
        if analysis is None:
            return None
        stats = self._op_stats
        return dataclasses.replace(analysis, decisions=decisions(self.trace, self.arch, self.md, ordered,
                                                                 stats.accesses, stats.requests_per_access))

    @staticmethod
    def _with_note(analysis: Any, note: str, samples: tuple[Any, ...] = ()) -> Any:
        return dataclasses.replace(analysis, decisions=dataclasses.replace(analysis.decisions, md_note=note,
                                                                           md_samples=samples))

    def _has_minimum(self, sweep: dict[int, Any], per_md: dict[int, list[Any]]) -> bool:
        """Every sweep MD has streamed its minimum trials (or all it will)."""
        return all(len(per_md[m]) >= run.min_trials or run.stop_reason for m, run in sweep.items())

    def _samples(self, main: list[Any], per_md: dict[int, list[Any]], landed_only: bool = False) -> tuple[Any, ...]:
        """Paper 002's per-MD statistics (`md_sample`), MD by MD (`landed_only`: of the MDs with
        trials)."""
        from tuiprof.model.decisions import md_sample

        tables = self._tables(main, per_md)
        return tuple(md_sample(m, tables[m], self.trace) for m in self.sweep_mds() if m in tables or not landed_only)

    def _tables(self, main: list[Any], per_md: dict[int, list[Any]]) -> dict[int, Any]:
        """`trial_table` of each MD's trials landed so far, in trial order (MDs with trials only)."""
        from tuiprof.model.decisions import trial_table

        runs = {**per_md, self.md: main}
        return {m: trial_table(sorted(runs[m], key=lambda r: r.index), self.trace, self.arch, self._op_stats.accesses)
                for m in self.sweep_mds() if runs.get(m)}

    def _sweep_runs(self, mc: Any) -> tuple[dict[int, Any], str]:
        """The sweep's runs (paper 002: MD = 1 .. the occupancy limit, the main run's MD reusing
        the main run), sharing the main run's preparation; or none and why."""
        if not self.config.sweep:
            return {}, "MD sweep not run"
        if not self.arch.l1.enabled:
            return {}, f"{self.arch.name} has no L1: paper 002's MD decision is about L1 contention"
        from tuiprof.sim.montecarlo import MonteCarlo

        cfg, n = self.config, self.sweep_trial_count()
        return {m: MonteCarlo(self.trace, self.arch_at(m), trials=n, seed=cfg.seed, md=m, threads=cfg.threads,
                              tolerance=cfg.tolerance, min_trials=max(2, min(n, SWEEP_MIN_TRIALS)),
                              prepared=mc.prepared)
                for m in self.sweep_mds() if m != self.md}, ""

    def _with_md(self, analysis: Any, main: list[Any], per_md: dict[int, list[Any]], *, final: bool) -> Any:
        """`analysis` with paper 002's MD decision from the trials landed so far at every MD
        (`final`: each run's whole result set), or with the reason there is none."""
        from tuiprof.model.decisions import TRAFFIC, kernel_shape
        from tuiprof.model.md import decide_md
        from tuiprof.model.timing import gain_range, mean_traffic, predict_timing

        if analysis is None:
            return None
        if self._sweep_note:
            return self._with_note(analysis, self._sweep_note)
        samples = self._samples(main, per_md)
        tables = [t[:, TRAFFIC] for t in self._tables(main, per_md).values()]
        swept = dict(md_samples=samples, sweep_trials=max([len(v) for v in per_md.values()], default=0),
                     sweep_elapsed=time.perf_counter() - self._t_main)
        if self._working_set is None:
            self._working_set = self.prepared.working_set_lines()
        ws = self._working_set or samples[0].dram_reads_per_cta
        L, stats = self.trace.launch, self._op_stats
        d = analysis.decisions
        shape = kernel_shape(self.trace, self.arch, stats.accesses, stats.requests_per_access)
        timing = predict_timing(self.arch, shape, [mean_traffic(t) for t in tables])
        try:
            decision = decide_md(self.arch, samples, threads_per_cta=L.threads_per_cta,
                                 registers_per_thread=L.registers_per_thread, shared_per_cta=L.static_shared,
                                 dynamic_shared=L.dynamic_shared, working_set_lines=ws, timing=timing)
        except UsageError as exc:  # nothing cached: no L1 working set to contend for
            return dataclasses.replace(analysis, decisions=dataclasses.replace(d, md_note=exc.message, **swept))
        if decision.recommended_md != decision.default_md:
            decision = dataclasses.replace(decision, gain_range=gain_range(
                self.arch, shape, tables, decision.recommended_md, decision.default_md, seed=self.config.seed))
        note = "" if final else "MD decision so far: the sweep is still running"
        return dataclasses.replace(analysis, decisions=dataclasses.replace(d, md=decision, md_note=note, **swept))

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
