"""One trial on hand-built traces whose hit and miss counts follow from arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.sim_traces import FULL, LANE0, arch_with, lanes, one_lane, op, small_arch, trace_of
from tuiprof.arch import load_arch
from tuiprof.sim.prepared import pack_arch, prepare
from tuiprof.sim.results import TrialResult
from tuiprof.sim.trial import run_trial

LINE = 128


def run(trace, arch, md=1, seed=1) -> TrialResult:
    return run_trial(prepare(trace, arch), arch, md, seed)


def stream(lines, passes=1):
    """One warp loading whole 128 B lines (32 floats) of `lines`, `passes` times, in order."""
    return [(0, lanes(int(x) * LINE, 4), FULL) for _ in range(passes) for x in lines]


def test_a_stream_touched_once_misses_everywhere() -> None:
    n = 100
    r = run(trace_of([stream(range(1000, 1000 + n))]), small_arch())
    assert list(r.l1_requests) == [n]
    assert (r.l1_read_accesses[0], r.l1_read_hits[0]) == (4 * n, 0)
    assert (r.l2_read_accesses[0], r.l2_read_hits[0]) == (4 * n, 0)
    assert (r.dram_reads[0], r.dram_writes[0], r.dram_writebacks) == (4 * n, 0, 0)
    assert r.l1_read_hit_ratio == 0 and r.l2_read_hit_ratio == 0
    assert np.isnan(r.l2_write_hit_ratio)


def test_a_working_set_that_fits_l1_hits_on_every_later_pass() -> None:
    lines, passes = range(16), 5  # 16 lines: two per set of the 8-set, 4-way L1
    r = run(trace_of([stream(lines, passes)]), small_arch())
    assert r.l1_read_accesses[0] == 4 * 16 * passes
    assert r.l1_read_hits[0] == 4 * 16 * (passes - 1)
    assert r.l2_read_accesses[0] == 4 * 16 and r.l2_read_hits[0] == 0
    assert r.dram_reads[0] == 4 * 16


def test_a_cyclic_stream_of_twice_the_l1_never_hits_it_but_hits_l2() -> None:
    lines, passes = range(64), 4  # the L1 holds 32 lines, the L2 256
    r = run(trace_of([stream(lines, passes)]), small_arch())
    assert r.l1_read_hits[0] == 0
    assert r.l2_read_accesses[0] == 4 * 64 * passes
    assert r.l2_read_hits[0] == 4 * 64 * (passes - 1)
    assert r.dram_reads[0] == 4 * 64


def test_fifo_and_lru_differ_where_they_should() -> None:
    # 1-set, 2-way L1: A B A C A. LRU keeps A (3rd, 5th hit); FIFO evicts A at C (3rd hit only).
    seq = [0, 8, 0, 16, 0]  # lines 0, 8, 16 share the single set
    for policy, hits in (("lru", 2), ("fifo", 1)):
        arch = small_arch(l1__size=256, l1__assoc=2, l1__replacement=policy)
        r = run(trace_of([stream(seq)]), arch)
        assert r.l1_read_hits[0] == 4 * hits, policy


def test_mru_evicts_the_most_recent_fill_unless_a_hit_moved_it() -> None:
    # 1-set, 2-way cache, lines A=0, B=8, C=16: A A B A C B A. MRU (pycachesim's): a fill takes
    # the back and stays there; a hit moves its line to the front. A miss [-, A]; A hit [A, -];
    # B miss into the invalid back [A, B]; A hit; C miss evicts B, the back [A, C]; B miss evicts
    # C [A, B]; A hit: 3 hits. LRU: C evicts B, B evicts A, A misses: 2. FIFO (hits move nothing):
    # C evicts A, the first filled; B hits; A misses: 3 (with the first A hit and the second).
    seq = [0, 0, 8, 0, 16, 8, 0]
    for level in ("l1", "l2"):
        for policy, hits in (("mru", 3), ("lru", 2), ("fifo", 3)):
            if level == "l1":
                arch = small_arch(l1__size=256, l1__assoc=2, l1__replacement=policy)
            else:
                arch = small_arch(l1__size=0, l2__size=256, l2__assoc=2, l2__replacement=policy)
            r = run(trace_of([stream(seq)]), arch)
            got = r.l1_read_hits[0] if level == "l1" else r.l2_read_hits[0]
            assert got == 4 * hits, (level, policy)


def test_mru_on_a_cycle_keeps_only_the_line_a_hit_saved() -> None:
    # 1-set, 2-way L1, A B A B A: under MRU each fill evicts the previous fill (the back) and the
    # invalid front way is never reached: no hit at all, where LRU hits on every line from the third.
    seq = [0, 8, 0, 8, 0]
    for policy, hits in (("mru", 0), ("lru", 3)):
        r = run(trace_of([stream(seq)]), small_arch(l1__size=256, l1__assoc=2, l1__replacement=policy))
        assert r.l1_read_hits[0] == 4 * hits, policy


def test_random_replacement_follows_the_trial_seed() -> None:
    # A cyclic stream of 12 lines through a 1-set, 8-way L1: RANDOM hits some (LRU and FIFO none),
    # the same seed the same trial, another seed other victims.
    seq = list(range(0, 12 * 8, 8)) * 6
    arch = small_arch(l1__size=1024, l1__assoc=8, l1__replacement="random")
    t = trace_of([stream(seq)])
    hits = [int(run(t, arch, seed=s).l1_read_hits[0]) for s in range(6)]
    assert all(0 < h < 4 * len(seq) for h in hits)
    assert hits[0] == int(run(t, arch, seed=0).l1_read_hits[0])
    assert len(set(hits)) > 1
    assert run(t, small_arch(l1__size=1024, l1__assoc=8, l1__replacement="lru")).l1_read_hits[0] == 0


def test_random_gathers_hit_l2_in_proportion_to_its_size() -> None:
    # Independent uniform references to N lines through an LRU cache of C lines hit with
    # probability C / N. L1 off; 32 B L2 lines so that each lane is a whole line.
    rng = np.random.default_rng(0)
    n_lines, cap = 32768, 2048  # 1 MiB array, 64 KiB L2
    arch = small_arch(sm_count=4, l1__size=0, l2__size=cap * 32, l2__line=32, l2__sector=32, l2__assoc=16,
                      l2__partitions=2)
    warps = []
    for _ in range(8):
        idx = rng.integers(0, n_lines * 8, size=(400, 32))  # float index
        warps.append([(0, np.uint64(0x4000000) + row.astype(np.uint64) * np.uint64(4), FULL) for row in idx])
    r = run(trace_of(warps, warps_per_cta=1), arch)
    assert r.l2_read_hit_ratio == pytest.approx(cap / n_lines, abs=0.008)
    assert r.dram_reads[0] == r.l2_read_accesses[0] - r.l2_read_hits[0]


def test_sectored_caches_fetch_only_missing_sectors() -> None:
    # Warp 1: sector 0 of line 7; then all four sectors: 1 hit, 3 misses in L1 and in L2.
    t = trace_of([[(0, one_lane(7 * LINE), LANE0), (0, lanes(7 * LINE, 4), FULL)]])
    r = run(t, small_arch())
    assert (r.l1_read_accesses[0], r.l1_read_hits[0]) == (5, 1)
    assert (r.l2_read_accesses[0], r.l2_read_hits[0]) == (4, 0)
    assert r.dram_reads[0] == 4


def test_fermi_l1_miss_reads_four_l2_lines() -> None:
    # Tesla C2050 (Baghsorkhi12 sec. 2.1): unsectored 128 B L1 lines, 32 B L2 lines.
    arch = load_arch("tesla-c2050").with_overrides({"sm_count": "1"})
    t = trace_of([[(0, one_lane(0x10000), LANE0), (0, one_lane(0x10000 + 64), LANE0)]])
    r = run(t, arch)
    assert (r.l1_read_accesses[0], r.l1_read_hits[0]) == (2, 1)  # one per line: unsectored
    assert (r.l2_read_accesses[0], r.l2_read_hits[0]) == (4, 0)
    assert r.dram_reads[0] == 4


STORE, LOAD = 1, 0
OPS = (op("load"), op("store"))


def _load_store_load(policy: str) -> TrialResult:
    a = lanes(5 * LINE, 4)
    t = trace_of([[(LOAD, a, FULL), (STORE, a, FULL), (LOAD, a, FULL)]], ops=OPS)
    return run(t, small_arch(l1__store_policy=policy))


def test_write_evict_drops_the_line_from_l1() -> None:
    r = _load_store_load("write-evict")
    assert r.l1_read_hits[LOAD] == 0 and r.l1_write_accesses[STORE] == 4
    assert r.l2_read_hits[LOAD] == 4  # the reload finds it in L2


def test_write_no_allocate_leaves_l1_as_it_was() -> None:
    r = _load_store_load("write-no-allocate")
    assert r.l1_read_hits[LOAD] == 4
    t = trace_of([[(STORE, lanes(9 * LINE, 4), FULL), (LOAD, lanes(9 * LINE, 4), FULL)]], ops=OPS)
    r = run(t, small_arch(l1__store_policy="write-no-allocate"))
    assert r.l1_read_hits[LOAD] == 0


def test_write_allocate_makes_the_stored_sectors_valid() -> None:
    # 16 lanes store sectors 0-1 of line 9, then 32 lanes load all four: 2 L1 hits.
    t = trace_of([[(STORE, lanes(9 * LINE, 4), 0xFFFF), (LOAD, lanes(9 * LINE, 4), FULL)]], ops=OPS)
    r = run(t, small_arch(l1__store_policy="write-allocate"))
    assert r.l1_write_accesses[STORE] == 2
    assert (r.l1_read_accesses[LOAD], r.l1_read_hits[LOAD]) == (4, 2)


def test_stores_always_reach_l2_and_follow_write_through_on_a_miss() -> None:
    # L1 off, write-through L2 (Baghsorkhi12 2.1). Store a whole sector of an absent line: miss,
    # written through to DRAM, the sector becomes valid. Store again: hit (dirty). Load: hit.
    # Then evict it: one write-back per dirty sector.
    arch = small_arch(l1__size=0, l2__size=4 * 128, l2__assoc=4)  # 1 set of 4 lines
    x = lanes(3 * LINE, 4)
    evict = [(LOAD, one_lane(k * LINE), LANE0) for k in (10, 11, 12, 13)]
    sector = 0xFF  # 8 lanes of 4 B: the line's first 32 B sector
    t = trace_of([[(STORE, x, sector), (STORE, x, sector), (LOAD, x, LANE0)] + evict], ops=OPS)
    r = run(t, arch)
    assert (r.l2_write_accesses[STORE], r.l2_write_hits[STORE]) == (2, 1)
    assert r.dram_writes[STORE] == 1
    assert (r.l2_read_accesses[LOAD], r.l2_read_hits[LOAD]) == (5, 1)
    assert r.dram_writebacks == 1
    assert r.l2_write_hit_ratio == 0.5


def test_a_store_hits_l2_only_where_the_sector_is_valid() -> None:
    arch = small_arch(l1__size=0)
    # Load sector 0 of line 4, then store sectors 0-3: 1 write hit, 3 write misses.
    t = trace_of([[(LOAD, one_lane(4 * LINE), LANE0), (STORE, lanes(4 * LINE, 4), FULL)]], ops=OPS)
    r = run(t, arch)
    assert (r.l2_write_accesses[STORE], r.l2_write_hits[STORE], r.dram_writes[STORE]) == (4, 1, 3)


def test_atomics_count_as_writes() -> None:
    t = trace_of([[(0, lanes(0, 4), FULL)]], ops=(op("atomic"),))
    r = run(t, small_arch())
    assert r.l1_write_accesses[0] == 4 and r.l1_read_accesses[0] == 0 and r.l2_write_accesses[0] == 4


def test_shared_memory_ops_skip_the_hierarchy() -> None:
    t = trace_of([[(0, lanes(0x100), FULL), (1, lanes(0x100), FULL)]], ops=(op(space="shared"), op()))
    r = run(t, small_arch())
    assert list(r.l1_requests) == [0, 1] and list(r.l1_read_accesses) == [0, 4]


def test_local_memory_is_cached() -> None:
    t = trace_of([stream([3, 3])], ops=(op(space="local"),))
    assert run(t, small_arch()).l1_read_hits[0] == 4


@pytest.mark.parametrize("preset", ["gtx285", "gtx480"])
def test_absent_levels_pass_everything_through(preset: str) -> None:
    arch = load_arch(preset)
    t = trace_of([stream([1, 2, 1, 2])])
    r = run(t, arch)
    if not arch.l1.enabled:
        assert r.l1_read_hits[0] == 0
    assert r.l2_read_hits[0] == 0 and r.l2_read_accesses[0] > 0
    assert r.dram_reads[0] > 0 and r.l1_read_accesses[0] > 0


def test_dram_batches_and_latency_bounds() -> None:
    arch = small_arch(sm_count=4)
    warps = [stream(range(1000 * w, 1000 * w + 200)) for w in range(8)]
    r = run(trace_of(warps), arch)
    d = arch.dram
    n = int(r.dram_reads.sum())
    b = r.dram_batch_latencies
    assert b.dtype == np.int32  # cycles: narrowed, as a result is kept through the analysis
    # Each batch holds 4 groups of 1..32 requests: 4..128 requests, all but maybe the last.
    assert n / 128 <= b.size <= n / 4 + 1
    assert b.min() >= d.base_latency + d.row_hit_cycles
    assert b.max() <= d.base_latency + max(128 * d.row_miss_cycles, 128 * d.burst_cycles)
    assert d.base_latency <= r.mean_dram_latency <= b.max()
    assert r.dram_latency[0] == pytest.approx(r.mean_dram_latency)
    values, counts = r.dram_batch_counts  # tallied where the trial ran: what the analysis pools
    assert values.tolist() == np.unique(b).tolist() and counts.tolist() == [int(np.sum(b == v)) for v in values]


def test_dram_bank_conflicts_cost_more_than_spread_requests() -> None:
    # Same number of DRAM reads: consecutive 32 B transactions (open rows, all channels) versus
    # one transaction per row of a single bank of one channel (a row miss each).
    arch = small_arch(sm_count=1, l1__size=0, l2__size=0, dram__channels=4, dram__banks=4, dram__interleave=256,
                      dram__row_size=1024)
    spread = [(0, lanes(0x100000, 4), FULL)] * 1 + [(0, lanes(0x100000 + LINE * k, 4), FULL) for k in range(1, 64)]
    stride = 4 * 1024 * 4  # channels * row * banks: same channel, same bank, next row
    conflict = [(0, one_lane(0x100000 + stride * k), LANE0) for k in range(256)]
    fast = run(trace_of([spread]), arch, seed=3)
    slow = run(trace_of([conflict]), arch, seed=3)
    assert fast.dram_reads[0] == slow.dram_reads[0] == 256
    assert slow.mean_dram_latency > fast.mean_dram_latency + 5 * arch.dram.row_miss_cycles


def test_counts_do_not_depend_on_the_seed_but_hits_may() -> None:
    arch = small_arch(sm_count=2, l1__size="1KiB", l1__assoc=2, l2__size="4KiB", l2__assoc=4)
    rng = np.random.default_rng(1)
    warps = [[(0, np.uint64(0x1000) + rng.integers(0, 4096, 32).astype(np.uint64) * np.uint64(4), FULL)
              for _ in range(30)] for _ in range(8)]
    t = trace_of(warps, warps_per_cta=2)
    p = prepare(t, arch)
    a, b = run_trial(p, arch, 2, 1), run_trial(p, arch, 2, 2)
    assert np.array_equal(a.l1_requests, b.l1_requests)
    assert np.array_equal(a.l1_read_accesses, b.l1_read_accesses)
    assert list(a.sm_requests) == list(b.sm_requests) == list(p.sm_requests)
    c = run_trial(p, arch, 2, 1)
    assert np.array_equal(a.l2_read_hits, c.l2_read_hits)
    assert np.array_equal(a.dram_batch_latencies, c.dram_batch_latencies)
    assert any(not np.array_equal(run_trial(p, arch, 2, s).l2_read_hits, a.l2_read_hits) for s in range(3, 10))


def test_md_bounds_the_resident_ctas() -> None:
    # Two one-warp CTAs on one SM read disjoint 24-line sets twice; the 8-set, 4-way L1 holds 3
    # lines of each set per CTA. MD 1 runs them back to back: every second pass hits. MD 2
    # interleaves them from the round the delayed one joins (uniform over the first CTA's 48
    # sequences): while both run, 6 lines per set cycle through 4 ways and LRU thrashes, so the
    # more they overlap, the fewer hits.
    arch = small_arch()
    t = trace_of([stream(range(0, 24), 2), stream(range(100, 124), 2)], ops=(op(starts=True),))
    p = prepare(t, arch)
    md1 = [run_trial(p, arch, 1, s).l1_read_hits[0] for s in range(20)]
    md2 = [run_trial(p, arch, 2, s).l1_read_hits[0] for s in range(20)]
    assert md1 == [4 * 48] * 20
    assert min(md2) < 4 * 8 and np.mean(md2) < 0.5 * 4 * 48


def test_incompatible_arch_is_refused() -> None:
    t = trace_of([stream([1])])
    p = prepare(t, small_arch())
    with pytest.raises(ValueError, match="L1 line size or SM count"):
        run_trial(p, small_arch(sm_count=2), 1, 0)
    with pytest.raises(ValueError, match="L1 line size or SM count"):
        run_trial(p, pack_arch(small_arch(l1__line=256)), 1, 0)
    with pytest.raises(ValueError, match="MD"):
        run_trial(p, None, 0, 0)
    # Other settings may change on the same preparation.
    assert run_trial(p, small_arch(l2__size="64KiB"), 1, 0).l1_requests[0] == 1


def test_every_preset_runs() -> None:
    rng = np.random.default_rng(2)
    warps = [[(k % 2, np.uint64(0x7F0000000000) + rng.integers(0, 1 << 16, 32).astype(np.uint64) * np.uint64(4),
               FULL) for k in range(20)] for _ in range(4)]
    t = trace_of(warps, ops=OPS, warps_per_cta=2)
    for name in ("tesla-c2050", "gtx480", "gtx285", "v100", "a100", "h100"):
        arch = arch_with(name)
        r = run(t, arch, md=2)
        assert r.l1_requests.sum() == prepare(t, arch).coalesced.n_requests
        assert r.sm_requests.shape == (arch.sm_count,)
        assert 0 <= r.l2_read_hit_ratio <= 1 and r.dram_batch_latencies.size > 0
        assert r.elapsed > 0


def test_batch_latencies_narrow_to_int32_only_when_every_value_fits() -> None:
    from tuiprof.sim.trial import narrow_latencies

    fits = np.array([0, 7, 2**31 - 1, -2**31], dtype=np.int64)
    n = narrow_latencies(fits)
    assert n.dtype == np.int32 and n.tolist() == fits.tolist()
    for big in (2**31, -2**31 - 1):
        wide = np.array([5, big], dtype=np.int64)
        kept = narrow_latencies(wide)
        assert kept.dtype == np.int64 and kept.tolist() == [5, big]
    assert narrow_latencies(np.zeros(0, dtype=np.int64)).size == 0
