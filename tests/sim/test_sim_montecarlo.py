"""The Monte Carlo driver: determinism across threads, streaming, early stop, cancellation."""

from __future__ import annotations

import math
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from tests.support.sim_runs import contended_trace
from tests.support.sim_traces import FULL, small_arch, trace_of
from tuiprof.errors import UsageError
from tuiprof.sim.montecarlo import Convergence, MonteCarlo
from tuiprof.sim.rng import trial_seed

FIELDS = ("l1_requests", "l1_read_hits", "l1_read_accesses", "l1_write_accesses", "l2_read_hits", "l2_read_accesses",
          "l2_write_hits", "l2_write_accesses", "dram_reads", "dram_writes", "dram_batch_latencies", "sm_requests")


ARCH = dict(sm_count=4, l1__size="2KiB", l1__assoc=4, l2__size="16KiB", l2__assoc=8)


def same(a, b) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in FIELDS) and np.array_equal(
        a.dram_latency, b.dram_latency, equal_nan=True)


@pytest.fixture(scope="module")
def trace():
    return contended_trace()


def test_same_seed_same_results_with_one_or_two_threads(trace) -> None:
    arch = small_arch(**ARCH)
    one = MonteCarlo(trace, arch, trials=12, seed=42, threads=1).run()
    two = MonteCarlo(trace, arch, trials=12, seed=42, threads=2).run()
    assert [r.index for r in one] == [r.index for r in two] == list(range(12))
    assert all(same(a, b) for a, b in zip(one, two))
    assert [r.seed for r in one] == [trial_seed(42, i) for i in range(12)]


def test_different_seeds_and_trials_differ(trace) -> None:
    arch = small_arch(**ARCH)
    a = MonteCarlo(trace, arch, trials=6, seed=1, threads=2).run()
    b = MonteCarlo(trace, arch, trials=6, seed=2, threads=2).run()
    assert not all(same(x, y) for x, y in zip(a, b))
    assert len({r.l2_read_hits.tobytes() for r in a}) > 1
    assert len({r.seed for r in a + b}) == 12


def test_streamed_set_equals_the_run(trace) -> None:
    arch = small_arch(**ARCH)
    mc = MonteCarlo(trace, arch, trials=10, seed=5, threads=2)
    streamed = list(mc.iter_trials())
    assert sorted(r.index for r in streamed) == list(range(10))
    seen: list[int] = []
    ran = mc.run(on_trial=lambda r: seen.append(r.index))
    assert sorted(seen) == list(range(10)) and mc.stop_reason == "completed"
    assert all(same(a, b) for a, b in zip(sorted(streamed, key=lambda r: r.index), ran))


def test_trial_to_trial_spread_is_stable_and_its_standard_error_shrinks(trace) -> None:
    arch = small_arch(**ARCH)
    res = MonteCarlo(trace, arch, trials=80, seed=9, threads=2).run()
    h = np.array([r.l2_read_hit_ratio for r in res])
    assert h.std() > 0
    s_small, s_large = h[:20].std(ddof=1), h.std(ddof=1)
    assert 0.4 < s_large / s_small < 2.5  # the spread is a property of the model, not of n
    se_small, se_large = s_small / np.sqrt(20), s_large / np.sqrt(80)
    assert se_large < se_small
    # Convergence reproduces the textbook half-width: Student's t with 79 df (1.9905, a t table).
    conv = Convergence()
    for r in res:
        conv.add(r)
    assert conv.half_width("l2_read_hit_ratio") == pytest.approx(1.9905 * s_large / np.sqrt(80), rel=1e-4)
    assert np.isnan(conv.half_width("l2_write_hit_ratio"))  # no stores: ignored


def test_convergence_stops_on_students_t_not_on_the_normal_quantile() -> None:
    # 20 trials whose L1 read ratio has std s: the half-width is 2.093 s / sqrt(20). A tolerance
    # between the normal (1.96) and Student's widths does not stop the run; one above both does.
    x = np.random.default_rng(5).normal(0.7, 0.02, 20)
    conv = Convergence()
    for v in x:
        conv.add(SimpleNamespace(l1_read_hit_ratio=float(v), l2_read_hit_ratio=math.nan,
                                 l2_write_hit_ratio=math.nan))
    se = float(np.std(x, ddof=1)) / np.sqrt(20)
    assert conv.half_width("l1_read_hit_ratio") == pytest.approx(2.093 * se, rel=2e-4)
    assert not conv.converged(2.0 * se) and conv.converged(2.1 * se)


def test_early_stop_is_a_deterministic_prefix(trace) -> None:
    arch = small_arch(**ARCH)
    full = MonteCarlo(trace, arch, trials=30, seed=3, threads=1).run()
    loose = MonteCarlo(trace, arch, trials=30, seed=3, threads=2, tolerance=0.5, min_trials=20)
    got = loose.run()
    assert loose.stop_reason == "converged"
    assert [r.index for r in got] == list(range(20))
    assert all(same(a, b) for a, b in zip(got, full))
    tight = MonteCarlo(trace, arch, trials=25, seed=3, threads=2, tolerance=1e-9, min_trials=20)
    assert len(tight.run()) == 25 and tight.stop_reason == "completed"


def test_early_stop_point_is_where_the_prefix_converges(trace) -> None:
    arch = small_arch(**ARCH)
    full = MonteCarlo(trace, arch, trials=60, seed=4, threads=2).run()
    conv = Convergence()
    widths = []
    for r in full:
        conv.add(r)
        widths.append(max(conv.half_width(k) for k in ("l1_read_hit_ratio", "l2_read_hit_ratio")))
    tol = float(np.median(widths[24:]))  # somewhere after min_trials
    expected = next(n for n in range(10, 61) if widths[n - 1] < tol)
    mc = MonteCarlo(trace, arch, trials=60, seed=4, threads=2, tolerance=tol, min_trials=10)
    got = mc.run()
    assert len(got) == expected


def test_cancel_stops_between_trials(trace) -> None:
    arch = small_arch(**ARCH)
    mc = MonteCarlo(trace, arch, trials=200, seed=8, threads=2)
    got = mc.run(on_trial=lambda r: mc.cancel())
    assert mc.stop_reason == "cancelled" and mc.cancelled
    assert 1 <= len(got) <= 2


def test_cancel_from_another_thread(trace) -> None:
    arch = small_arch(**ARCH)
    mc = MonteCarlo(trace, arch, trials=10_000, seed=8, threads=2)
    first = threading.Event()
    results: list = []

    def consume() -> None:
        for r in mc.iter_trials():
            results.append(r)
            first.set()

    worker = threading.Thread(target=consume)
    worker.start()
    assert first.wait(60)
    mc.cancel()
    worker.join(60)
    assert not worker.is_alive() and mc.stop_reason == "cancelled" and len(results) < 10_000


def test_preparation_is_shared_across_mds_and_archs(trace) -> None:
    arch = small_arch(**ARCH)
    mc = MonteCarlo(trace, arch, trials=2, seed=1, threads=1)
    assert mc.md == 2  # the launch's CTAs per SM
    m1 = mc.with_md(1)
    assert m1.prepared is mc.prepared and m1.md == 1
    bigger = mc.with_arch(small_arch(**dict(ARCH, l2__size="64KiB")))
    assert bigger.prepared is mc.prepared
    other = mc.with_arch(small_arch(**dict(ARCH, sm_count=2)))
    assert other.prepared is not mc.prepared
    assert m1.run()[0].md == 1


def test_md_defaults_to_occupancy_when_the_trace_does_not_say() -> None:
    t = trace_of([[(0, np.arange(32, dtype=np.uint64) * 4, FULL)]], ctas_per_sm=0)
    arch = small_arch()
    from tuiprof.arch.occupancy import occupancy

    assert MonteCarlo(t, arch, trials=1).md == occupancy(arch, 32, 16).ctas_per_sm


@pytest.mark.parametrize("kw", [dict(trials=0), dict(trials=1, threads=0), dict(trials=1, tolerance=0.0),
                                dict(trials=1, min_trials=1), dict(trials=1, md=0)])
def test_bad_settings_are_usage_errors(trace, kw) -> None:
    with pytest.raises(UsageError):
        MonteCarlo(trace, small_arch(**ARCH), **kw)


def test_a_pool_of_runs_gives_each_run_what_it_gives_alone(trace) -> None:
    from tuiprof.sim.montecarlo import TrialPool

    arch = small_arch(**ARCH)

    def runs():
        main = MonteCarlo(trace, arch, trials=12, seed=6, md=2, tolerance=0.05, min_trials=4)
        return [main, MonteCarlo(trace, arch, trials=5, seed=6, md=1, prepared=main.prepared),
                MonteCarlo(trace, arch, trials=9, seed=6, md=1, tolerance=0.5, min_trials=3, prepared=main.prepared)]

    alone = [(mc.run(), mc.stop_reason) for mc in runs()]
    for threads in (1, 3):
        rs = runs()
        got: dict[int, list] = {id(mc): [] for mc in rs}
        ended = []
        for ev in TrialPool(rs, threads).iter_events():
            if ev.result is None:
                ended.append(ev.run)
            else:
                got[id(ev.run)].append(ev.result)
        assert sorted(map(id, ended)) == sorted(map(id, rs))
        for mc, (results, reason) in zip(rs, alone):
            mine = sorted(got[id(mc)], key=lambda r: r.index)
            assert [r.index for r in mine] == [r.index for r in results] and mc.stop_reason == reason
            assert all(same(a, b) for a, b in zip(mine, results))
    assert [reason for _, reason in alone] == ["converged", "completed", "converged"]


def test_a_pool_serves_the_first_run_first_then_the_others_evenly(trace) -> None:
    from tuiprof.sim.montecarlo import TrialPool

    arch = small_arch(**ARCH)
    main = MonteCarlo(trace, arch, trials=4, seed=2, md=2)
    a = MonteCarlo(trace, arch, trials=3, seed=2, md=1, prepared=main.prepared)
    b = MonteCarlo(trace, arch, trials=2, seed=2, md=2, prepared=main.prepared)
    names = {id(main): "main", id(a): "a", id(b): "b"}
    order = [(names[id(ev.run)], ev.result.index if ev.result is not None else "end")
             for ev in TrialPool([main, a, b], 1).iter_events()]
    assert order == [("main", 0), ("main", 1), ("main", 2), ("main", 3), ("main", "end"),
                     ("a", 0), ("b", 0), ("a", 1), ("b", 1), ("b", "end"), ("a", 2), ("a", "end")]


def test_cancelling_a_pool_ends_every_unfinished_run(trace) -> None:
    from tuiprof.sim.montecarlo import TrialPool

    arch = small_arch(**ARCH)
    main = MonteCarlo(trace, arch, trials=50, seed=2)
    other = MonteCarlo(trace, arch, trials=50, seed=2, md=1, prepared=main.prepared)
    pool = TrialPool([main, other], 2)
    seen = 0
    for _ev in pool.iter_events():
        seen += 1
        pool.cancel()
    assert seen == 1 and pool.cancelled
    assert main.stop_reason == other.stop_reason == "cancelled"


def test_a_pool_runs_the_sweep_beside_the_main_runs_last_trials(trace) -> None:
    # Past its minimum, a run that stops early keeps one trial in flight; free workers go to the
    # other runs (the fewest started, guesses last) and come back to it only when nothing else can start.
    from tuiprof.sim.montecarlo import TrialPool, _Progress

    arch = small_arch(**ARCH)
    main = MonteCarlo(trace, arch, trials=40, seed=2, md=2, tolerance=0.01, min_trials=4)
    a = MonteCarlo(trace, arch, trials=10, seed=2, md=1, tolerance=0.01, min_trials=2, prepared=main.prepared)
    b = MonteCarlo(trace, arch, trials=10, seed=2, md=3, tolerance=0.01, min_trials=2, prepared=main.prepared)
    pool = TrialPool([main, a, b], 2)
    pm, pa, pb = (_Progress(mc) for mc in (main, a, b))
    progress = [pm, pa, pb]
    pm.started, pm.in_flight = 3, 2
    assert pool._next(progress) is pm  # below its minimum: the main run first
    pm.started = 4
    assert pool._next(progress) is pa  # its minimum started, one in flight: the sweep
    pa.started = pa.in_flight = 2
    assert pool._next(progress) is pb
    pb.started, pb.in_flight = 3, 1
    assert pool._next(progress) is pa  # both sweep runs would guess: the fewest started
    pm.in_flight = 0
    assert pool._next(progress) is pm  # nothing of the main run in flight: it comes first again
    pm.in_flight = 1
    pa.finished = pb.finished = True
    assert pool._next(progress) is pm  # nothing else to start: a guess beats an idle worker
    unbounded = _Progress(MonteCarlo(trace, arch, trials=40, seed=2, md=2))
    unbounded.started, unbounded.in_flight = 30, 2
    assert not unbounded.speculative()  # without early stop every trial counts


def test_a_pool_holds_a_run_at_its_budget_raises_it_and_settles_it(trace) -> None:
    # The MD sweep's adaptive trials: a run starts no trial past its budget until its owner raises
    # it, and ends "settled" with the trials it has, which are those it gives alone.
    from tuiprof.sim.montecarlo import TrialPool

    arch = small_arch(**ARCH)
    main = MonteCarlo(trace, arch, trials=3, seed=2, md=2)
    held = MonteCarlo(trace, arch, trials=8, seed=2, md=1, prepared=main.prepared)
    held.budget = 2
    pool = TrialPool([main, held], 2)
    got = []
    for ev in pool.iter_events():
        if ev.run is held and ev.result is not None:
            got.append(ev.result)
            assert len(got) <= 2 or held.budget == 4
            if len(got) == 2:
                pool.set_budget(held, 4)
            elif len(got) == 4:
                pool.settle(held)
    assert main.stop_reason == "completed" and held.stop_reason == "settled"
    got.sort(key=lambda r: r.index)
    alone = MonteCarlo(trace, arch, trials=4, seed=2, md=1).run()
    assert [r.index for r in got] == [0, 1, 2, 3] and all(same(a, b) for a, b in zip(got, alone))
