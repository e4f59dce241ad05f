"""`Session`: one run as events (trial done, analysis updated, sweep progress, finished,
cancelled, failed), consumed by the report and the UI."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from tests.support.factories import make_trace
from tuiprof.errors import TuiprofError, UsageError
from tuiprof.session import AnalysisUpdated, Cancelled, Failed, Finished, RunConfig, Session, SweepProgress, TrialDone


def trace():
    lane = np.arange(32, dtype=np.uint64) * 4
    rows = [0x10000000 + (k % 40) * 128 + lane for k in range(400)]
    return make_trace(rows, warps=[k % 8 for k in range(400)], starts=(True,), n_ctas=8)


def config(**kw) -> RunConfig:
    base = dict(arch="gtx480", overrides={"sm_count": "2"}, trials=6, seed=4, threads=2, sweep_trials=2)
    base.update(kw)
    return RunConfig(**base)


def test_events_of_a_run_in_order() -> None:
    events: list = []
    s = Session(trace(), config())
    analysis = s.run(events.append)
    kinds = [type(e) for e in events]
    done = [e for e in events if isinstance(e, TrialDone)]
    assert [e.done for e in done] == list(range(1, 7)) and all(e.planned == 6 for e in done)
    assert sorted(e.result.index for e in done) == list(range(6))
    assert AnalysisUpdated in kinds and SweepProgress in kinds
    # The main run's trials all come before the sweep, and Finished comes last, once.
    assert max(i for i, k in enumerate(kinds) if k is TrialDone) < kinds.index(SweepProgress)
    assert kinds[-1] is Finished and kinds.count(Finished) == 1
    assert events[-1].analysis is analysis is s.analysis
    assert analysis.trials == 6 and analysis.decisions.md is not None
    # The update just before the sweep already carries the other models, not yet the MD decision.
    before = [e for e in events[:kinds.index(SweepProgress)] if isinstance(e, AnalysisUpdated)][-1]
    assert before.analysis.decisions is not None and before.analysis.decisions.md is None


def test_cancel_from_another_thread_emits_cancelled() -> None:
    events: list = []
    s = Session(trace(), config(trials=400, threads=1))

    def on_event(e) -> None:
        events.append(e)
        if isinstance(e, TrialDone) and e.done == 3:
            threading.Thread(target=s.cancel).start()

    analysis = s.run(on_event)
    assert isinstance(events[-1], Cancelled)
    assert analysis is not None and 3 <= analysis.trials < 400
    assert not any(isinstance(e, SweepProgress) for e in events)


def test_cancel_before_run_gives_no_analysis() -> None:
    events: list = []
    s = Session(trace(), config())
    s.cancel()
    assert s.run(events.append) is None
    assert [type(e) for e in events] == [Cancelled] and events[0].analysis is None


def test_a_crash_in_the_simulator_is_one_clear_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    import tuiprof.sim.montecarlo as mc

    def boom(self, index):
        raise RuntimeError("Failed in nopython mode pipeline")

    monkeypatch.setattr(mc.MonteCarlo, "run_one", boom)
    events: list = []
    with pytest.raises(TuiprofError) as info:
        Session(trace(), config()).run(events.append)
    assert isinstance(events[-1], Failed) and events[-1].error is info.value
    assert "simulation failed" in info.value.message and "nopython" in info.value.message


def test_impossible_md_fails_before_any_work() -> None:
    with pytest.raises(UsageError, match="exceeds"):
        Session(trace(), config(md=99))


def _kinds_and_events(cfg: RunConfig) -> tuple[list, Session, object]:
    events: list = []
    s = Session(trace(), cfg)
    analysis = s.run(events.append)
    return events, s, analysis


def test_the_first_histogram_comes_with_the_first_trial() -> None:
    events, _, _ = _kinds_and_events(config())
    first = next(i for i, e in enumerate(events) if isinstance(e, TrialDone))
    assert isinstance(events[first + 1], AnalysisUpdated) and events[first + 1].analysis.trials == 1


def test_the_md_decision_shows_once_every_md_has_its_minimum_and_is_refined() -> None:
    # 10 trials per MD, no early stop: the minimum is 8 (SWEEP_MIN_TRIALS), so a first decision
    # comes at 8 trials of every MD simulated, and later ones as each MD's run ends.
    events, s, analysis = _kinds_and_events(config(sweep_trials=10, tolerance=None))
    sweep_mds = [m for m, rep in s.md_groups().items() if m == rep != s.md]
    decided = [i for i, e in enumerate(events) if isinstance(e, AnalysisUpdated) and e.analysis.decisions is not None
               and e.analysis.decisions.md is not None]
    assert decided, "no MD decision before Finished"
    first = decided[0]
    done_before = {m: max((e.done for e in events[:first] if isinstance(e, SweepProgress) and e.md == m), default=0)
                   for m in sweep_mds}
    assert all(8 <= d for d in done_before.values()) and min(done_before.values()) < 10
    assert any(isinstance(e, SweepProgress) for e in events[first:])  # refined as more land
    assert "so far" in events[first].analysis.decisions.md_note
    final = analysis.decisions
    assert isinstance(events[-1], Finished) and final.md is not None and final.md_note == ""
    assert final.sweep_trials == 10 and [x.md for x in final.md_samples] == list(s.sweep_mds())


def test_sweep_results_do_not_depend_on_the_thread_count() -> None:
    from tuiprof.model.decisions import md_sample, trial_table
    from tuiprof.sim.montecarlo import MonteCarlo

    runs = {}
    for threads in (1, 3):
        _, s, a = _kinds_and_events(config(threads=threads, sweep_trials=9, trials=24, tolerance=0.02))
        runs[threads] = (s, a)
    (s1, a1), (_, a3) = runs[1], runs[3]
    assert a1.trials == a3.trials and a1.decisions.md_samples == a3.decisions.md_samples
    assert a1.decisions.md.recommended_md == a3.decisions.md.recommended_md
    assert a1.decisions.sweep_trials == a3.decisions.sweep_trials
    # Each MD's sample is what that MD's run gives alone.
    md = next(m for m in s1.sweep_mds() if m != s1.md)
    mc = MonteCarlo(s1.trace, s1.arch, trials=9, seed=4, md=md, threads=1, tolerance=0.02, min_trials=8)
    table = trial_table(mc.run(), s1.trace, s1.arch, mc.op_stats().accesses)
    assert a1.decisions.md_samples[md - 1] == md_sample(md, table, s1.trace)


def count_mds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The MD of every trial run from now on."""
    from tuiprof.sim.montecarlo import MonteCarlo

    ran: list[int] = []
    real = MonteCarlo.run_one

    def counted(self: MonteCarlo, index: int):
        ran.append(self.md)
        return real(self, index)

    monkeypatch.setattr(MonteCarlo, "run_one", counted)
    return ran


def test_sweep_runs_are_cached_across_reruns(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rerun at another MD simulates only what changed: the MDs the sweep ran before come from
    the SweepCache, and give what a fresh run gives (same seed, same trials)."""
    first = Session(trace(), config())
    first.run()
    ran = count_mds(monkeypatch)
    second = Session(first.trace, config(md=1), previous=first)
    assert second.prepared is first.prepared and second.sweep_cache is first.sweep_cache
    second.run()
    assert set(ran) == {1, first.md}, ran            # MD 1 is the main run now; the old main MD was never swept
    monkeypatch.undo()
    fresh = Session(first.trace, config(md=1))
    fresh.run()
    assert second.analysis.decisions.md_samples == fresh.analysis.decisions.md_samples
    assert second.analysis.decisions.md.recommended_md == fresh.analysis.decisions.md.recommended_md
    other = Session(first.trace, config(md=1, seed=5), previous=first)
    ran = count_mds(monkeypatch)
    other.run()
    assert set(ran) == set(other.md_groups().values())  # another seed: nothing comes from the cache


def test_a_run_cancelled_before_its_sweep_says_so() -> None:
    """Cancelled during the main run: the MD pane's note says the sweep did not run (before, it
    was empty, and the UI waited for the sweep forever)."""
    events: list = []
    s = Session(trace(), config(trials=4096, tolerance=None))

    def stop_after_two(e) -> None:
        events.append(e)
        if isinstance(e, TrialDone) and e.done == 2:
            s.cancel()

    analysis = s.run(stop_after_two)
    assert isinstance(events[-1], Cancelled) and analysis is not None
    assert analysis.decisions.md is None and analysis.decisions.md_note == "run cancelled before the MD sweep"


def test_the_sweep_simulates_only_the_mds_the_grid_can_fill(monkeypatch: pytest.MonkeyPatch) -> None:
    # 8 snapshot CTAs on 2 SMs: no SM ever holds more than 4, so MDs 4..8 schedule alike and, with
    # one L1 for all (gtx480: no carve-out), give the same trials as the main run at MD 8.
    from tuiprof.sim.prepared import prepare
    from tuiprof.sim.trial import run_trial

    s = Session(trace(), config())
    assert s.md == 8 and s.md_groups() == {1: 1, 2: 2, 3: 3, 4: 8, 5: 8, 6: 8, 7: 8, 8: 8}
    prepared = prepare(s.trace, s.arch)
    a, b = run_trial(prepared, s.arch, 4, 11), run_trial(prepared, s.arch, 7, 11)
    assert np.array_equal(a.l1_read_hits, b.l1_read_hits) and np.array_equal(a.dram_batch_latencies,
                                                                             b.dram_batch_latencies)
    ran = count_mds(monkeypatch)
    analysis = s.run()
    assert set(ran) == {1, 2, 3, 8}
    samples = {x.md: x for x in analysis.decisions.md_samples}
    assert sorted(samples) == list(range(1, 9))
    assert all(samples[m].miss_rate == samples[8].miss_rate for m in range(4, 8))


def test_the_adaptive_sweep_gives_the_decision_of_the_full_sweep_with_fewer_trials() -> None:
    # Without --sweep-trials every simulated MD runs SWEEP_FIRST_TRIALS, and only those that can
    # still become the recommendation run more (paired by seed with the default): the same decision.
    from tuiprof.session import SWEEP_FIRST_TRIALS

    full = Session(trace(), config(trials=32, sweep_trials=8, tolerance=None))
    full.run()
    runs = {}
    for threads in (1, 3):
        s = Session(trace(), config(trials=32, sweep_trials=None, tolerance=None, threads=threads))
        assert s.sweep_adaptive and s.sweep_trial_count() == 8
        runs[threads] = s.run()
    a, b = runs[1].decisions, runs[3].decisions
    assert a.md_samples == b.md_samples and a.md.recommended_md == b.md.recommended_md  # whatever the threads
    assert a.md.recommended_md == full.analysis.decisions.md.recommended_md
    assert SWEEP_FIRST_TRIALS <= a.sweep_trials < full.analysis.decisions.sweep_trials == 8
