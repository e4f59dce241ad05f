"""Fixed analysis data for the UI's pictures: trial results made up from a seeded generator (not
simulated), turned into an Analysis by the same code a run uses (`Session.analysis_of`). A
change of layout then shows in a snapshot on its own, never hidden among numbers that moved
because the simulator changed."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from tuiprof.session import RunConfig, Session
from tuiprof.sim.results import TrialResult

CONFIG = RunConfig(trials=8, seed=0, sweep_trials=4)
TRIALS = 8

_CACHE: dict[str, tuple[Session, object]] = {}


def made_up_trial(session: Session, md: int, index: int, rng: np.random.Generator) -> TrialResult:
    """One trial at `md` with per-op hit ratios that fall as MD rises (more CTAs share an L1)
    and wobble a little from trial to trial: plausible, fixed, and nothing the simulator made."""
    trace, arch = session.trace, session.arch
    n = len(trace.ops)
    accesses = trace.accesses_per_op().astype(np.int64)
    load = np.array([o.kind == "load" for o in trace.ops])
    cached = np.array([o.is_cached for o in trace.ops])
    base = np.array([(0.15 + 0.7 * ((o.id * 37) % 11) / 10) for o in trace.ops])
    h1 = np.clip(base / (1 + 0.6 * (md - 1)) + rng.normal(0, 0.01, n), 0, 1)
    h2 = np.clip((0.3 + 0.5 * ((np.arange(n) * 13) % 7) / 6) / (1 + 0.5 * (md - 1)) + rng.normal(0, 0.01, n), 0, 1)
    req = accesses * np.where(cached, 4, 0)
    reads = np.where(load, req, 0)
    writes = np.where(load, 0, req)
    l1h = np.round(reads * h1).astype(np.int64) if arch.l1.enabled else np.zeros(n, np.int64)
    l2ra = reads - l1h
    if not arch.l2.enabled:  # as the simulator counts it: every access misses an absent L2
        h2 = np.zeros(n)
    l2rh = np.round(l2ra * h2).astype(np.int64)
    l2wh = np.round(writes * h2).astype(np.int64)
    dram_r = l2ra - l2rh
    lat = 300.0 + 150.0 * md + rng.normal(0, 5.0, n)
    batches = (300 + 150 * md + rng.integers(0, 60, 64)).astype(np.int64)
    sm = rng.integers(900, 1100, arch.sm_count).astype(np.int64)
    return TrialResult(index=index, seed=index, md=md, l1_requests=req, l1_read_hits=l1h, l1_read_accesses=reads,
                       l1_write_accesses=writes, l2_read_hits=l2rh, l2_read_accesses=l2ra, l2_write_hits=l2wh,
                       l2_write_accesses=writes, dram_reads=dram_r, dram_writes=writes - l2wh,
                       l2_lookup_hits=l2rh, l2_lookups=l2ra,  # one L2: a lookup per read sector
                       dram_latency=np.where(dram_r > 0, lat, np.nan), dram_batch_latencies=batches,
                       dram_writebacks=int(rng.integers(0, 50)), dram_writebacks_owed=0, sm_requests=sm, elapsed=0.25)


def fixed(demo: str, arch: str | None = None, md: int | None = None) -> tuple[Session, object]:
    """A Session of `demo` (on `arch`, default the trace's; at MD `md`, default the occupancy
    limit) and its fixed Analysis (made once per test process)."""
    key = f"{demo}:{arch}@{md}"
    if key not in _CACHE:
        session = Session.open(demo, replace(CONFIG, arch=arch, md=md))
        rng = np.random.default_rng(2024)
        main = [made_up_trial(session, session.md, i, rng) for i in range(TRIALS)]
        per_md = {m: [made_up_trial(session, m, i, rng) for i in range(session.sweep_trial_count())]
                  for m in session.sweep_mds() if m != session.md}
        _CACHE[key] = (session, session.analysis_of(main, per_md, elapsed=1.5))
    return _CACHE[key]


def fixed_app(demo: str, arch: str | None = None, **kwargs: object):
    """The app showing `demo`'s fixed analysis (on `arch`), without timings."""
    from tuiprof.tui.app import TuiprofApp

    session, analysis = fixed(demo, arch)
    return TuiprofApp(session=session, analysis=analysis, show_timing=False, **kwargs)
