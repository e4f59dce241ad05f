"""Reruns release their memory (issue 9, item 9): a finished or cancelled run leaves no Session,
trial results or prepared trace behind, reruns share one packing of the trace, and a cancelled
run's trials in flight never pile up under the next run's."""

from __future__ import annotations

import dataclasses
import gc
import os
import threading
import time
import tracemalloc
import weakref
from pathlib import Path

import pytest

from tests.support.tui_support import DEMO, wait_for
from tuiprof.session import Cancelled, RunConfig, Session
from tuiprof.sim import montecarlo
from tuiprof.sim.montecarlo import MonteCarlo

CONFIG = RunConfig(trials=64, seed=0, sweep_trials=2)


def rss_mb() -> float:
    """Resident memory of this process (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def collected(refs: list[weakref.ref]) -> bool:
    gc.collect()
    return all(r() is None for r in refs)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
async def test_reruns_cancelled_mid_run_are_all_collected() -> None:
    """Twelve reruns, each pressed while the previous run's trials stream in: every old Session
    is collected once its trials in flight end, and memory stays flat after the second."""
    pytest.importorskip("textual")
    from tuiprof.tui.app import TuiprofApp

    # Enough trials that each run is still streaming when the next r comes (a trial of the demo
    # takes milliseconds with the fast replay kernel).
    long_runs = dataclasses.replace(CONFIG, trials=100_000, tolerance=None)
    app = TuiprofApp(DEMO, long_runs, show_timing=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.phase == "running" and app.trials_done >= 1, 180)
        refs: list[weakref.ref] = []
        sizes: list[float] = []
        for i in range(12):
            refs.append(weakref.ref(app.session))
            await pilot.press("r")
            await wait_for(pilot, lambda: app.phase == "running" and app.trials_done >= 1, 180)
            if i in (1, 11):
                gc.collect()
                sizes.append(rss_mb())
        current = app.session
        app.action_cancel_run()
        await wait_for(pilot, lambda: app.phase == "cancelled", 60)
        refs = [r for r in refs if r() is not current]
        await wait_for(pilot, lambda: collected(refs), 60)
        assert sizes[1] - sizes[0] < 64, f"RSS grew {sizes[1] - sizes[0]:.0f} MB over 10 reruns"


def test_sessions_share_one_packing_and_are_collected() -> None:
    first = Session.open(DEMO, dataclasses.replace(CONFIG, trials=2, sweep=False))
    first.run()
    prepared = first.prepared
    assert prepared is not None
    prev, refs = first, []
    tracemalloc.start()
    try:
        for i in range(6):
            s = Session(prev.trace, dataclasses.replace(prev.config, seed=i + 1), prev.path, prepared=prev.prepared)
            s.run()
            assert s.prepared is prepared                       # reused, not packed again
            refs.append(weakref.ref(prev))
            prev = s
            if i == 1:
                gc.collect()
                base = tracemalloc.get_traced_memory()[0]
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    del first, s
    assert collected(refs[1:])
    assert grown < 4 << 20, f"{grown / 2**20:.1f} MiB more after 4 more runs"


def test_a_session_cancelled_before_it_runs_packs_nothing() -> None:
    session = Session.open(DEMO, CONFIG)
    session.cancel()
    events: list[object] = []
    assert session.run(events.append) is None
    assert events == [Cancelled(None)] and session.prepared is None


def test_cancelled_trials_in_flight_keep_their_slots() -> None:
    """The next run's trials wait for a cancelled run's trials in flight: never more trials at
    once than cores, however quickly runs are cancelled and restarted."""
    session = Session.open(DEMO, CONFIG)
    cores = os.cpu_count() or 1
    hold = threading.Event()
    lock = threading.Lock()
    running = [0, 0]  # now, most at once
    real = MonteCarlo.run_one

    def counted(self: MonteCarlo, index: int):
        with lock:
            running[0] += 1
            running[1] = max(running[1], running[0])
        try:
            if self.seed == 1:
                hold.wait(5)                                    # the first run's trials are slow
            return real(self, index)
        finally:
            with lock:
                running[0] -= 1

    first = MonteCarlo(session.trace, session.arch, trials=50, seed=1, threads=cores)
    second = MonteCarlo(session.trace, session.arch, trials=cores, seed=2, threads=cores, prepared=first.prepared)
    MonteCarlo.run_one = counted  # type: ignore[method-assign]
    try:
        t = threading.Thread(target=first.run)
        t.start()
        t0 = time.monotonic()
        while running[0] < cores and time.monotonic() - t0 < 30:
            time.sleep(0.01)
        first.cancel()
        t.join(2)
        assert not t.is_alive()                                 # cancel returns without the trials in flight
        releaser = threading.Timer(1.0, hold.set)
        releaser.start()
        second.run()
        releaser.join()
    finally:
        MonteCarlo.run_one = real  # type: ignore[method-assign]
        hold.set()
    assert running[1] <= cores, f"{running[1]} trials at once on {cores} cores"
    assert montecarlo.TRIAL_SLOTS.acquire(blocking=False)      # every slot was given back
    montecarlo.TRIAL_SLOTS.release()
