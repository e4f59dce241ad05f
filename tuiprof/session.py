"""One profiling run: a trace (file or demo) and a configuration, resolved into what the
simulator needs. The Monte Carlo run itself and its events build on this."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from tuiprof.arch.occupancy import Occupancy, carveout, carveout_arch, occupancy
from tuiprof.arch.spec import Arch
from tuiprof.config import DEFAULT_TOLERANCE as DEFAULT_TOLERANCE  # re-exported: the run's defaults
from tuiprof.config import RunConfig as RunConfig
from tuiprof.errors import TuiprofError, UsageError
from tuiprof.progress import Phase, Progress, ignore
from tuiprof.sim.budget import check_run_memory
from tuiprof.trace.data import Trace

if TYPE_CHECKING:
    import numpy as np

    from tuiprof.model.analysis import Analysis
    from tuiprof.model.decisions import Decisions
    from tuiprof.model.md import MdSample
    from tuiprof.model.pattern import AddressPattern
    from tuiprof.sim.montecarlo import MonteCarlo, TrialPool
    from tuiprof.sim.prepared import Prepared
    from tuiprof.sim.results import TrialResult


MIN_TRIALS = 20
"""Trials the main run makes before a tolerance may stop it (Baghsorkhi12 Fig. 7)."""
SWEEP_MIN_TRIALS = 8
SWEEP_FIRST_TRIALS = 4
"""Trials of every MD at the adaptive sweep's first checkpoint (`Session.sweep_adaptive`); the
MDs that can still change the decision then double theirs, checkpoint by checkpoint."""
_PATTERNS_LOCK = threading.Lock()
"""Held while a session looks up or computes its trace's address patterns (shared by reruns)."""


def resolve_arch(trace: Trace, config: RunConfig) -> Arch:
    """The Arch to simulate: the requested one (or the trace's preset), with overrides applied."""
    return arch_for(trace.provenance.arch, config)


def arch_for(trace_arch: str, config: RunConfig) -> Arch:
    """`resolve_arch` for a trace made for preset `trace_arch` (known from a trace file's header
    alone, without loading its arrays)."""
    from tuiprof.arch.presets import load_arch, preset_arch

    if config.arch:
        return load_arch(config.arch, config.overrides)
    return preset_arch(trace_arch, config.overrides)


def input_files(target: str | Path, config: RunConfig) -> list[Path]:
    """The files a run of `target` under `config` reads, which no output may replace: the trace
    (or CUDA source, and every source of a whole program's nvcc command line), the launch script
    (given, or the one found beside the source) and an arch TOML file."""
    from tuiprof.arch.presets import preset_names
    from tuiprof.collect.options import KERNEL_FILE_SUFFIXES
    from tuiprof.collect.script import find_launch_script
    from tuiprof.demos import resolve_target

    path = Path(target)
    kernel_file = path.suffix in KERNEL_FILE_SUFFIXES
    files = [path] if kernel_file else [resolve_target(str(target))]
    files += [Path(a) for a in config.collect.compile_command if a.endswith(".cu")]
    script = config.collect.launch or (find_launch_script(path) if kernel_file else None)
    if script is not None:
        files.append(script)
    if config.arch and config.arch not in preset_names() and config.arch != "calibrated":
        files.append(Path(config.arch))
    return files


L1_SETTINGS = ("l1.size", "l1.assoc")
"""What-if settings that fix the L1: with either, the shared-memory carve-out does not size it."""


def _has_prefix(results: list["TrialResult"], n: int) -> bool:
    """Whether trials 0 .. n-1 are all among `results`."""
    return len({r.index for r in results if r.index < n}) >= n


def _budget(run: "MonteCarlo") -> int:
    """The trials a sweep run is to make now: its adaptive budget, else all it plans."""
    return min(run.budget or run.trials, run.trials)


def _sweep_planned(sweep: Mapping[int, "MonteCarlo"], per_md: Mapping[int, list["TrialResult"]]) -> int:
    """The sweep's trials planned now: an ended run's landed trials, a running one's budget."""
    return sum(len(per_md[m]) if run.stop_reason else _budget(run) for m, run in sweep.items())


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

    result: "TrialResult"
    done: int
    planned: int


@dataclass(frozen=True)
class AnalysisUpdated:
    """The analysis over the trials so far: during the main run (the first trial at once, then
    about 10 per second), when it ends (with the models that need no sweep), and with the MD
    decision so far once every MD has its minimum trials and again as each MD's run ends
    (``decisions.md_note`` says it may still change)."""

    analysis: "Analysis"


@dataclass(frozen=True)
class SweepProgress:
    """The MD sweep: `done` of `planned` trials at MD `md`; `mds` are all the MDs the sweep
    simulates, in order; `sweep_done` of `sweep_planned` trials of the whole sweep still to
    simulate (its cached MDs left out; a run that stops early no longer counts what it will not
    run). Sent once the main run has ended (progress that lands earlier waits for it), MD by MD as
    their trials land."""

    md: int
    done: int
    planned: int
    mds: tuple[int, ...]
    sweep_done: int = 0
    sweep_planned: int = 0


@dataclass(frozen=True)
class Finished:
    analysis: "Analysis"


@dataclass(frozen=True)
class Cancelled:
    analysis: "Analysis | None"


@dataclass(frozen=True)
class Failed:
    error: TuiprofError


Event = TrialDone | AnalysisUpdated | SweepProgress | Finished | Cancelled | Failed
UPDATE_INTERVAL = 0.1


class SweepCache:
    """The MD sweep's finished runs, shared by the sessions of one trace: a run at one MD under
    the same Arch, seed, trial count, tolerance and minimum gives the same trials ("same seed, same
    results"), so a rerun that changes nothing the sweep depends on (the simulated MD, the arch
    back to an earlier one) takes it from here instead of simulating it again."""

    LIMIT = 64
    """Runs kept (the oldest go first)."""

    def __init__(self) -> None:
        self._runs: dict[tuple[object, ...], tuple[list["TrialResult"], str]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(run: "MonteCarlo", adaptive: bool) -> tuple[object, ...]:
        return (run.arch, run.md, run.trials, run.seed, run.tolerance, run.min_trials, adaptive)

    def get(self, key: tuple[object, ...]) -> tuple[list["TrialResult"], str] | None:
        with self._lock:
            return self._runs.get(key)

    def put(self, key: tuple[object, ...], results: list["TrialResult"], stop_reason: str) -> None:
        with self._lock:
            self._runs.pop(key, None)
            self._runs[key] = (list(results), stop_reason)
            while len(self._runs) > self.LIMIT:
                self._runs.pop(next(iter(self._runs)))


class Session:
    """One profiling run of a trace under a RunConfig, reported as events.

    Resolution (arch, overrides, MD) happens in the constructor so that a bad configuration fails
    before any work starts. `run` blocks, emitting events to `on_event` from the calling thread
    (the simulator's worker threads only run trials); `cancel` may be called from any thread.

    `previous` is an earlier session of the same trace (a rerun): this one reuses its packing of
    the trace when the Arch allows (same L1 line and SM count) instead of packing it again, so a
    rerun neither waits for nor holds a second copy; its address patterns; and its MD sweep's
    finished runs (`SweepCache`). `prepared` passes a packing alone.
    """

    def __init__(self, trace: Trace, config: RunConfig, path: Path | None = None, *,
                 prepared: "Prepared | None" = None, previous: "Session | None" = None) -> None:
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
        cores = os.cpu_count() or 1  # trials run at once: at most one per core (sim.montecarlo.TRIAL_SLOTS)
        check_run_memory(self.arch, trace, min(config.threads or cores, cores))
        self._lock = threading.Lock()
        self._cancelled = False
        self._mc: "TrialPool | None" = None
        self._listening = True
        """Someone receives this run's events (intermediate analyses are made only then)."""
        same = previous is not None and previous.trace is trace
        self.prepared: "Prepared | None" = (prepared if prepared is not None
                                            else (previous.prepared if same else None))  # type: ignore[union-attr]
        """The trace packed for the simulator, once run."""
        self.sweep_cache: SweepCache = previous.sweep_cache if same else SweepCache()  # type: ignore[union-attr]
        self._patterns: dict[tuple[int, int], dict[int, "AddressPattern"]] = (
            previous._patterns if same else {})  # type: ignore[union-attr]  # same: previous is not None
        self.analysis: "Analysis | None" = None
        self.stop_reason: str | None = None
        """After the main run: "completed", "converged" or "cancelled"."""

    @classmethod
    def open(cls, target: str | Path, config: RunConfig, progress: Progress = ignore) -> "Session":
        """A session on a .tptrace path, a demo name, or a CUDA source (recorded first: a kernel
        file under its launch script, on the GPU or in the emulator; a whole program on the GPU;
        `tuiprof.collect.pipeline.collect_trace`); `progress` hears each phase as it starts."""
        from tuiprof.collect.options import KERNEL_FILE_SUFFIXES

        if Path(target).suffix in KERNEL_FILE_SUFFIXES:
            from tuiprof.collect.pipeline import collect_trace

            source = Path(target)
            return cls(collect_trace(source, config, progress), config, source)
        from tuiprof.demos import load, resolve_target

        path = resolve_target(str(target))
        progress(Phase(f"loading {path.name}"))
        return cls(load(path), config, path)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

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

    def patterns(self) -> dict[int, "AddressPattern"]:
        """Every op's address pattern in this Arch's L1 lines and fill units (computed once per
        line and fill size and trace; a second of NumPy on a large trace, so callers off the UI
        thread)."""
        from tuiprof.model.pattern import address_patterns

        line = self.arch.l1.line
        fill = min(self.arch.l1.sector, line) if self.arch.l1.enabled else line
        with _PATTERNS_LOCK:  # the app and an open drill-down may ask at once: compute once
            found = self._patterns.get((line, fill))
            if found is None:
                found = self._patterns[(line, fill)] = address_patterns(self.trace, line, fill)
        return found

    def compiles(self, arch: Arch | None = None) -> bool:
        """Whether the first trial on `arch` (default: the main run's) will compile the simulator's
        kernel for its family of cache and DRAM geometries: neither loaded in this process nor in
        the on-disk kernel cache. Imports Numba: call it off the UI thread."""
        from tuiprof.sim.prepared import pack_arch
        from tuiprof.sim.replay import Geometry, replay_cached

        return not replay_cached(Geometry.of(pack_arch(arch or self.arch)).family)

    def run(self, on_event: Callable[[Event], None] | None = None) -> "Analysis | None":
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

    def _run(self, emit: Callable[[Event], None]) -> "Analysis | None":
        """The main run and the MD sweep's runs on one pool of workers (the sweep's trials run
        beside the main run's last ones, see `TrialPool`), reported as events: the main run's
        trials with throttled analyses; when it ends, its analysis and models; then the sweep's
        progress, a first MD decision as soon as every MD has its minimum trials, refined as
        each MD's run ends; Finished with the final decision. Each run's results are those it
        gives alone, whatever the thread count; sweep runs found in the `SweepCache` are not
        simulated again."""
        from tuiprof.sim.montecarlo import MonteCarlo, TrialPool

        cfg = self.config
        if self._cancelled:  # cancelled before it started: do not even pack the trace
            emit(Cancelled(None))
            return None
        mc = MonteCarlo(self.trace, self.arch, trials=cfg.trials, seed=cfg.seed, md=self.md,
                        threads=cfg.threads, tolerance=cfg.tolerance, min_trials=MIN_TRIALS, prepared=self.prepared)
        self._t0 = time.perf_counter()
        self._prepare(mc)
        sweep, self._sweep_note = self._sweep_runs(mc)
        adaptive = self.sweep_adaptive
        keys = {m: SweepCache.key(run, adaptive) for m, run in sweep.items()}
        per_md: dict[int, list["TrialResult"]] = {}
        for m, key in keys.items():
            found = self.sweep_cache.get(key)
            if found is not None:
                per_md[m] = list(found[0])
                del sweep[m]
        per_md.update({m: [] for m in sweep})
        self._checkpoint = SWEEP_FIRST_TRIALS if adaptive and sweep else 0
        for run in sweep.values():
            run.budget = min(SWEEP_FIRST_TRIALS, run.trials) if adaptive else None
        pool = TrialPool([mc, *sweep.values()], mc.threads)
        with self._lock:
            self._mc = pool
            if self._cancelled:
                emit(Cancelled(None))
                return None
        main: list["TrialResult"] = []
        queued: list[SweepProgress] = []  # sweep progress that lands before the main run ends
        analysis: "Analysis | None" = None
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
                    update = self._analyse(sorted(main, key=lambda r: r.index))
                    last = time.perf_counter()
                    cost = last - now
                    if update is not None:
                        emit(AnalysisUpdated(update))
            elif ev.run is mc:  # the main run ended
                main_done = True
                self.stop_reason = mc.stop_reason
                self._t_main = time.perf_counter()
                analysis = self._with_models(main)
                if analysis is not None:
                    emit(AnalysisUpdated(analysis))
                for progress in queued:
                    emit(progress)
            elif ev.result is not None:
                m = ev.run.md
                per_md[m].append(ev.result)
                progress = SweepProgress(m, len(per_md[m]), _budget(ev.run), self.sweep_mds(),
                                         sum(len(per_md[k]) for k in sweep), _sweep_planned(sweep, per_md))
                if main_done:
                    emit(progress)
                else:
                    queued.append(progress)
            elif ev.run.stop_reason in ("completed", "converged", "settled"):  # a sweep run ended: keep it
                self.sweep_cache.put(keys[ev.run.md], sorted(per_md[ev.run.md], key=lambda r: r.index),
                                     ev.run.stop_reason)
            if self._checkpoint:
                self._advance_sweep(pool, sweep, per_md, main, main_done)
            if (self._listening and main_done and sweep and (ev.result is None or not decided)
                    and self._has_minimum(sweep, per_md)):
                decided = True  # first when every MD has its minimum, then again as each MD ends
                if not all(run.stop_reason for run in sweep.values()):
                    update = self._with_md(analysis, main, per_md, final=False)
                    if update is not None:
                        emit(AnalysisUpdated(update))
        if not self._cancelled and not pool.cancelled and analysis is not None:
            self.analysis = self._with_md(analysis, main, per_md, final=True)
            emit(Finished(self.analysis))  # type: ignore[arg-type]  # _with_md keeps an Analysis
            return self.analysis
        if not main_done:
            self.stop_reason = mc.stop_reason
            analysis = self._with_models(main)
            if analysis is not None and analysis.decisions is not None:
                analysis = self._with_note(analysis, "run cancelled before the MD sweep")
        elif per_md and analysis is not None:
            analysis = self._with_note(analysis, "MD sweep cancelled", self._samples(main, per_md, landed_only=True))
        self.analysis = analysis
        emit(Cancelled(analysis))
        return analysis

    def _prepare(self, mc: "MonteCarlo") -> None:
        """What every analysis of this run reads and no trial changes (once per run)."""
        from tuiprof.model.constant import const_op_stats
        from tuiprof.model.pattern import SECTOR, ideal_sectors_per_op
        from tuiprof.model.shared import SHARED_BANK_WIDTH, shared_op_stats

        self._op_stats = mc.op_stats()
        self._ideal = ideal_sectors_per_op(self.trace, SECTOR)
        self._passes = {**shared_op_stats(self.trace, self.arch.shared_banks, SHARED_BANK_WIDTH, self.arch.shared_latency),
                        **const_op_stats(self.trace, self.arch.l1.hit_latency)}
        self.prepared = mc.prepared
        self._working_set: float | None = None
        self._planned = mc.trials

    def analysis_of(self, main: list["TrialResult"], per_md: dict[int, list["TrialResult"]],
                    elapsed: float = 0.0) -> "Analysis | None":
        """The final analysis `run` would give for these trials: `main` at this session's MD,
        `per_md` the sweep's at the other MDs (the MD decision needs every MD of `sweep_mds`).
        For tests and pictures that must show fixed data whatever the simulator computes."""
        from tuiprof.sim.montecarlo import MonteCarlo

        self._prepare(MonteCarlo(self.trace, self.arch, trials=self.config.trials, seed=self.config.seed,
                                 md=self.md, threads=1, prepared=self.prepared))
        self._sweep_note = "" if self.config.sweep else "MD sweep not run"
        self._t0 = time.perf_counter() - elapsed
        self._t_main = time.perf_counter()
        self.stop_reason = "completed"
        self.analysis = self._with_md(self._with_models(main), main, per_md, final=True)
        if self.analysis is not None:
            self.analysis = dataclasses.replace(self.analysis, elapsed=elapsed)
        return self.analysis

    def _with_models(self, results: list["TrialResult"]) -> "Analysis | None":
        """The analysis of the main run's `results` with the models that need no sweep."""
        from tuiprof.model.decisions import decisions

        ordered = sorted(results, key=lambda r: r.index)
        analysis = self._analyse(ordered)
        if analysis is None:
            return None
        stats = self._op_stats
        return dataclasses.replace(analysis, decisions=decisions(self.trace, self.arch, self.md, ordered,
                                                                 stats.accesses, stats.requests_per_access,
                                                                 sum(st.total for st in self._passes.values()
                                                                     if st.space == "shared")))

    @staticmethod
    def _with_note(analysis: "Analysis", note: str, samples: tuple["MdSample", ...] = ()) -> "Analysis":
        return dataclasses.replace(analysis, decisions=dataclasses.replace(cast("Decisions", analysis.decisions), md_note=note,
                                                                           md_samples=samples))

    def _has_minimum(self, sweep: dict[int, "MonteCarlo"], per_md: dict[int, list["TrialResult"]]) -> bool:
        """Every sweep MD has streamed its minimum trials (or its first checkpoint's, or all it will)."""
        return all(len(per_md[m]) >= min(run.min_trials, run.budget or run.trials) or run.stop_reason
                   for m, run in sweep.items())

    def _advance_sweep(self, pool: "TrialPool", sweep: dict[int, "MonteCarlo"], per_md: dict[int, list["TrialResult"]],
                       main: list["TrialResult"], main_done: bool) -> None:
        """The adaptive sweep's checkpoint (`sweep_adaptive`), once every MD held at its budget
        has all its trials and the main run its first checkpoint's: the MDs that can still change
        the decision (`tuiprof.model.md.undecided_mds`, on the trials both MDs ran, paired by
        seed) double their trials, the sweep ends when none can. Decided on each MD's first
        trials in index order, so the result set does not depend on thread timing."""
        from tuiprof.model.decisions import TRAFFIC, kernel_shape
        from tuiprof.model.md import undecided_mds
        from tuiprof.model.timing import paired_gain_interval, trial_times

        k = self._checkpoint
        held = {m: run for m, run in sweep.items() if run.stop_reason is None}
        if not held:
            self._checkpoint = 0
            return
        if not all(_has_prefix(per_md[m], _budget(run)) for m, run in held.items()):
            return
        if not (main_done or _has_prefix(main, k)):
            return
        first = [r for r in main if r.index < k]
        stats = self._op_stats
        shape = kernel_shape(self.trace, self.arch, stats.accesses, stats.requests_per_access)
        times = {m: trial_times(self.arch, shape, t[:, TRAFFIC], m) for m, t in self._tables(first, per_md).items()}
        groups = self.md_groups()
        default = self.occupancy.ctas_per_sm
        open_mds = undecided_mds(list(times), default, lambda a, b: paired_gain_interval(times[a], times[b]))
        grow = [held[groups[m]] for m in open_mds if groups[m] in held]
        grow = [run for run in dict.fromkeys(grow) if (run.budget or run.trials) < run.trials]
        if grow:
            self._checkpoint = 2 * k
            for run in grow:
                pool.set_budget(run, min(2 * k, run.trials))
        else:
            self._checkpoint = 0
            for run in held.values():
                pool.settle(run)

    def _samples(self, main: list["TrialResult"], per_md: dict[int, list["TrialResult"]],
                 landed_only: bool = False) -> tuple["MdSample", ...]:
        """Yen14's per-MD statistics (`md_sample`), MD by MD (`landed_only`: of the MDs with
        trials)."""
        from tuiprof.model.decisions import md_sample

        tables = self._tables(main, per_md)
        return tuple(md_sample(m, tables[m], self.trace) for m in self.sweep_mds() if m in tables or not landed_only)

    def _tables(self, main: list["TrialResult"], per_md: dict[int, list["TrialResult"]]) -> dict[int, "np.ndarray"]:
        """`trial_table` of each MD's trials landed so far, in trial order (MDs with trials only;
        an MD the sweep does not simulate has the trials of the MD it equals, `md_groups`)."""
        from tuiprof.model.decisions import trial_table

        runs = {**per_md, self.md: main}
        tables = {m: trial_table(sorted(runs[m], key=lambda r: r.index), self.trace, self.arch, self._op_stats.accesses)
                  for m in set(self.md_groups().values()) if runs.get(m)}
        return {m: tables[rep] for m, rep in self.md_groups().items() if rep in tables}

    def _sweep_runs(self, mc: "MonteCarlo") -> tuple[dict[int, "MonteCarlo"], str]:
        """The sweep's runs (Yen14: MD = 1 .. the occupancy limit, the main run's MD reusing
        the main run), sharing the main run's preparation; or none and why."""
        if not self.config.sweep:
            return {}, "MD sweep not run"
        if not self.arch.l1.enabled:
            return {}, f"{self.arch.name} has no L1: Yen14's MD decision is about L1 contention"
        from tuiprof.sim.montecarlo import MonteCarlo

        cfg, n = self.config, self.sweep_trial_count()
        tolerance = cfg.tolerance if cfg.sweep_tolerance == "same" else cfg.sweep_tolerance
        return {m: MonteCarlo(self.trace, self.arch_at(m), trials=n, seed=cfg.seed, md=m, threads=cfg.threads,
                              tolerance=tolerance, min_trials=max(2, min(n, SWEEP_MIN_TRIALS)),
                              prepared=mc.prepared)
                for m in sorted(set(self.md_groups().values())) if m != self.md}, ""

    def _with_md(self, analysis: "Analysis | None", main: list["TrialResult"], per_md: dict[int, list["TrialResult"]], *,
                 final: bool) -> "Analysis | None":
        """`analysis` with Yen14's MD decision from the trials landed so far at every MD
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
        sweep_trials = max([len(v) for v in per_md.values()], default=0)
        sweep_elapsed = time.perf_counter() - self._t_main
        if self._working_set is None:
            self._working_set = self.prepared.working_set_lines()  # type: ignore[union-attr]  # prepared by the run
        ws = self._working_set or samples[0].dram_reads_per_cta
        L, stats = self.trace.launch, self._op_stats
        d = cast("Decisions", analysis.decisions)  # the main run made them
        shape = kernel_shape(self.trace, self.arch, stats.accesses, stats.requests_per_access)
        timing = predict_timing(self.arch, shape, [mean_traffic(t) for t in tables])
        try:
            decision = decide_md(self.arch, samples, threads_per_cta=L.threads_per_cta,
                                 registers_per_thread=L.registers_per_thread, shared_per_cta=L.static_shared,
                                 dynamic_shared=L.dynamic_shared, working_set_lines=ws, timing=timing,
                                 range_of=lambda md, over: gain_range(self.arch, shape, tables, md, over,
                                                                      seed=self.config.seed))
        except UsageError as exc:  # nothing cached: no L1 working set to contend for
            return dataclasses.replace(analysis, decisions=dataclasses.replace(d, md_note=exc.message, md_samples=samples, sweep_trials=sweep_trials,
                                                                               sweep_elapsed=sweep_elapsed))
        note = "" if final else "MD decision so far: the sweep is still running"
        return dataclasses.replace(analysis, decisions=dataclasses.replace(d, md=decision, md_note=note, md_samples=samples,
                                                                           sweep_trials=sweep_trials, sweep_elapsed=sweep_elapsed))

    def _analyse(self, results: list["TrialResult"]) -> "Analysis | None":
        from tuiprof.model.analysis import analyse

        if not results:
            return None
        stats = self._op_stats
        return analyse(self.trace.ops, self.arch, self.md, results, self._planned, stats.accesses,
                       stats.requests_per_access, stats.sectors_per_request, time.perf_counter() - self._t0,
                       self._ideal, self._passes)

    def sweep_mds(self) -> tuple[int, ...]:
        """MDs the sweep covers: 1 .. the occupancy limit (Yen14 sec. 5.2)."""
        return tuple(range(1, self.occupancy.ctas_per_sm + 1))

    def md_groups(self) -> dict[int, int]:
        """For each MD of `sweep_mds`, the MD whose trials it shares: itself, or an MD that gives the
        same trials. Snapshot CTA k runs on SM ``k % sm_count``, so no SM ever holds more than
        ``fill`` = ceil(snapshot CTAs / SMs) of them: every MD from `fill` up schedules alike, and
        two such MDs with the same simulated GPU (the L1 beside their carve-outs) give identical
        trials, which the sweep simulates once (at the main run's MD when it is one of them, else
        at the largest)."""
        fill = -(-self.trace.snapshot.n_ctas // max(self.requested_arch.sm_count, 1))
        reps: dict[tuple[int, Arch], int] = {}
        out = {}
        for m in sorted(self.sweep_mds(), key=lambda m: (m != self.md, -m)):
            out[m] = reps.setdefault((min(m, fill), self.arch_at(m)), m)
        return dict(sorted(out.items()))

    @property
    def sweep_adaptive(self) -> bool:
        """Whether the sweep's trials per MD adapt to how close the decision is (by default, when
        no ``sweep_trials`` is given): every MD runs `SWEEP_FIRST_TRIALS`, then only the MDs that can
        still become the recommendation (their gain over the default not surely below
        `tuiprof.model.md.MIN_GAIN`, no MD surely faster: paired on the trials' common seeds)
        double theirs, up to `sweep_trial_count`."""
        return self.config.adaptive_sweep

    def sweep_trial_count(self) -> int:
        cfg = self.config
        return cfg.sweep_trials or min(cfg.trials, max(8, cfg.trials // 4))
