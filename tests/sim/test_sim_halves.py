"""The L2's two partitions (``l2.halves = 2``: NVIDIA A100 whitepaper, "A100 L2 Cache"; measured on an
H100 with ncu, docs/memory-system.md section 2): hand-computed cases, each run on the product kernel
and on the reference oracle, which must agree counter for counter.

One SM reads through half 0 (the lower half of the SM numbers). A line homed in half 0 is looked up
once; a line homed in half 1 that misses half 0 is looked up again at home (both lookups are in
``l2_lookups``, as ncu counts them), and half 0 keeps a copy. Stores go home and drop the other
half's copy. Which half a line is homed in comes from `home_half`, computed here beside each case."""

from __future__ import annotations

from collections import Counter

import numpy as np

from tests.support.sim_runs import differences
from tests.support.sim_traces import LANE0, arch_with, lanes, one_lane, op, trace_of
from tuiprof.arch import Arch
from tuiprof.sim.addressing import home_half
from tuiprof.sim.prepared import prepare
from tuiprof.sim.reference import reference_trial
from tuiprof.sim.results import TrialResult
from tuiprof.sim.trial import run_trial

LINE, SECTOR_B = 128, 32
SECTOR = 0xFF
"""8 lanes of 4 B: one whole 32 B sector."""


SMALL = {"l2__size": "4KiB", "l2__assoc": 4, "l2__partitions": 1, "address_hash": "linear"}
"""An L2 of 32 lines, 8 linear sets of 4 ways (4 sets a half): one compiled kernel family for the cases."""


def h100(**settings: object) -> Arch:
    """The h100 preset (two halves) on one SM with `SMALL`'s L2, no L1 (every read reaches the L2),
    one-sector fills unless `settings` say otherwise."""
    return arch_with("h100", **{"sm_count": 1, "l1__size": 0, "l2__fetch_granularity": 0, **SMALL, **settings})


def both(trace, arch: Arch) -> TrialResult:
    p = prepare(trace, arch)
    fast, ref = run_trial(p, arch, 1, 3), reference_trial(p, arch, 1, 3)
    assert differences(fast, ref) == []
    return fast


def homed(half: int, start: int = 1000) -> int:
    """The first L2 line number from `start` homed in `half`."""
    line = start
    while home_half(line) != half:
        line += 1
    return line


def reads(line: int, *sectors: int) -> list[tuple[int, np.ndarray, int]]:
    """One 4 B load per sector of `line`, op k reading the k-th."""
    return [(k, one_lane(line * LINE + s * SECTOR_B), LANE0) for k, s in enumerate(sectors)]


def counters(r: TrialResult) -> dict[str, list[int]]:
    return {k: [int(x) for x in getattr(r, k)] for k in
            ("l2_read_accesses", "l2_read_hits", "l2_lookups", "l2_lookup_hits", "dram_reads")}


def test_the_home_hash_splits_runs_and_strides_evenly() -> None:
    # Measured on an H100: every all-miss kernel sends exactly half its near misses to the far half.
    for stride in (1, 2, 3, 4, 8, 32, 1024):
        share = np.mean([home_half(k * stride) for k in range(4096)])
        assert abs(share - 0.5) < 0.01, stride


def test_a_near_line_is_looked_up_once() -> None:
    r = both(trace_of([reads(homed(0), 0, 0)], ops=(op(),) * 2), h100())
    assert counters(r) == {"l2_read_accesses": [1, 1], "l2_read_hits": [0, 1], "l2_lookups": [1, 1],
                           "l2_lookup_hits": [0, 1], "dram_reads": [1, 0]}


def test_a_far_line_is_looked_up_twice_then_hits_its_near_copy() -> None:
    # miss near, miss at home (DRAM); then the copy near the SM hits
    r = both(trace_of([reads(homed(1), 0, 0)], ops=(op(),) * 2), h100())
    assert counters(r) == {"l2_read_accesses": [1, 1], "l2_read_hits": [0, 1], "l2_lookups": [2, 1],
                           "l2_lookup_hits": [0, 1], "dram_reads": [1, 0]}


def test_a_far_lookup_covers_the_fetch_block() -> None:
    # 64 B fills: the far lookup is of the block (2 sectors, both missing); the neighbour then hits near
    r = both(trace_of([reads(homed(1), 0, 1)], ops=(op(),) * 2), h100(l2__fetch_granularity=64))
    assert counters(r) == {"l2_read_accesses": [1, 1], "l2_read_hits": [0, 1], "l2_lookups": [3, 1],
                           "l2_lookup_hits": [0, 1], "dram_reads": [2, 0]}


def test_a_store_goes_home_and_drops_the_near_copy() -> None:
    # read (copy near, line at home), store a whole sector (home; the copy is dropped), read again:
    # a near miss served at home (a far hit), no DRAM
    line = homed(1)
    t = trace_of([[(0, one_lane(line * LINE), LANE0), (1, lanes(line * LINE), SECTOR),
                   (2, one_lane(line * LINE), LANE0)]], ops=(op(), op("store"), op()))
    r = both(t, h100())
    assert counters(r) == {"l2_read_accesses": [1, 0, 1], "l2_read_hits": [0, 0, 1], "l2_lookups": [2, 0, 2],
                           "l2_lookup_hits": [0, 0, 1], "dram_reads": [1, 0, 0]}
    assert (r.l2_write_accesses[1], r.l2_write_hits[1]) == (1, 1)


def test_each_half_holds_half_the_l2() -> None:
    # One SM reads 24 lines twice through an L2 of 32 lines (8 sets of 4 ways, linear): one shared
    # L2 holds them all; with two halves, half 0 must hold all 24 (its copies of far lines too) in
    # 16 slots, 6 per set (lines 2k and 2k+1 of every 8 share a half's set): a cyclic reread hits
    # none there, as the H100's 50 MiB pointer chase never hit its near partition. Each far line
    # hits at home where at most 4 far lines share its set.
    first, n = 4096, 24
    lines = range(first, first + n)
    t = trace_of([[(p, one_lane(line * LINE), LANE0) for p in (0, 1) for line in lines]], ops=(op(), op()))
    one = both(t, h100(l2__halves=1))
    assert (one.l2_read_hits[1], one.l2_lookups[1], one.dram_reads[1]) == (n, n, 0)
    far = [line for line in lines if home_half(line) == 1]
    per_set = Counter((line % 8) >> 1 for line in far)
    far_hits = sum(1 for line in far if per_set[(line % 8) >> 1] <= 4)
    r = both(t, h100())
    assert 8 <= len(far) <= 16
    assert counters(r) == {"l2_read_accesses": [n, n], "l2_read_hits": [0, far_hits],
                           "l2_lookups": [n + len(far)] * 2, "l2_lookup_hits": [0, far_hits],
                           "dram_reads": [n, n - far_hits]}
