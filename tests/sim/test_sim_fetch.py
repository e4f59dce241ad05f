"""The L2's fetch granularity from DRAM (``l2.fetch_granularity``; CUDA runtime API,
``cudaLimitMaxL2FetchGranularity``: "a value between 0 and 128 that indicates the maximum fetch
granularity of L2 (in Bytes)"; docs/memory-system.md): hand-computed cases on the h100 preset,
each run on the product kernel and on the reference oracle, which must agree counter for counter.

A read sector miss fills the aligned block of the granularity around it: its other sectors become
valid (each a DRAM read charged to the load) unless already valid, and a later read of one hits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.support.sim_runs import differences
from tests.support.sim_traces import FULL, LANE0, arch_with, lanes, one_lane, op, trace_of
from tuiprof.arch import Arch
from tuiprof.errors import ArchError
from tuiprof.sim.prepared import prepare
from tuiprof.sim.reference import reference_trial
from tuiprof.sim.results import TrialResult
from tuiprof.sim.trial import run_trial

LINE, SECTOR_B = 128, 32
LOAD, STORE = 0, 1
OPS = (op("load"), op("store"))
SECTOR = 0xFF
"""8 lanes of 4 B from the address given: one whole 32 B sector."""


def h100(fetch: int, **settings: object) -> Arch:
    """The h100 preset on one SM with the given fetch granularity (0: one sector)."""
    return arch_with("h100", sm_count=1, l2__fetch_granularity=fetch, **settings)


def both(trace, arch: Arch) -> TrialResult:
    """One trial on the product kernel, checked identical to the reference oracle's."""
    p = prepare(trace, arch)
    fast, ref = run_trial(p, arch, 1, 3), reference_trial(p, arch, 1, 3)
    assert differences(fast, ref) == []
    return fast


def sector_loads(*sectors: int, line: int = 5) -> list[tuple[int, np.ndarray, int]]:
    """One 4 B load (lane 0) per sector of `line`, in order: one op per sector (op k = sector k)."""
    return [(k, one_lane(line * LINE + s * SECTOR_B), LANE0) for k, s in enumerate(sectors)]


@pytest.mark.parametrize("fetch,dram,l2_hits", [
    # sectors 0, 1, 2, 3 of one line read in turn, each its own op
    (0, [1, 1, 1, 1], [0, 0, 0, 0]),     # one sector per miss: every read misses
    (32, [1, 1, 1, 1], [0, 0, 0, 0]),    # 32 B is one sector: the same
    (64, [2, 0, 2, 0], [0, 1, 0, 1]),    # sector 0's miss brings 1; sector 2's brings 3
    (128, [4, 0, 0, 0], [0, 1, 1, 1]),   # the first miss brings the whole line
])
def test_a_miss_fills_its_aligned_fetch_block(fetch: int, dram: list[int], l2_hits: list[int]) -> None:
    t = trace_of([sector_loads(0, 1, 2, 3)], ops=(op(),) * 4)
    r = both(t, h100(fetch))
    assert list(r.l2_read_accesses) == [1, 1, 1, 1]
    assert list(r.l2_read_hits) == l2_hits
    assert list(r.dram_reads) == dram
    assert list(r.l1_read_hits) == [0, 0, 0, 0]  # the L1 still fills only the sectors it asked for


def test_the_fetch_block_is_aligned_not_centred() -> None:
    # 64 B: a miss on sector 1 brings sector 0 (its block's other half), not sector 2.
    t = trace_of([sector_loads(1, 0, 2)], ops=(op(),) * 3)
    r = both(t, h100(64))
    assert list(r.l2_read_hits) == [0, 1, 0] and list(r.dram_reads) == [2, 0, 2]


def test_two_misses_in_one_request_fill_each_block_once() -> None:
    # One request for sectors 0 and 3 (lanes 0 and 24): 64 B blocks {0,1} and {2,3} are filled,
    # four DRAM reads, two L2 read accesses, both misses; then sectors 1 and 2 hit.
    t = trace_of([[(0, lanes(5 * LINE), 1 | 1 << 24)] + [(1, one_lane(5 * LINE + s * SECTOR_B), LANE0)
                                                         for s in (1, 2)]], ops=(op(),) * 2)
    r = both(t, h100(64))
    assert (r.l2_read_accesses[0], r.l2_read_hits[0], r.dram_reads[0]) == (2, 0, 4)
    assert (r.l2_read_accesses[1], r.l2_read_hits[1], r.dram_reads[1]) == (2, 2, 0)


def test_a_valid_neighbour_is_not_fetched_again() -> None:
    # A whole-sector store makes sector 1 valid and dirty (write-back L2, no fetch); the load of
    # sector 0 then fetches sector 0 alone, and the dirty sector is still owed to DRAM.
    t = trace_of([[(STORE, lanes(5 * LINE + SECTOR_B), SECTOR), (LOAD, one_lane(5 * LINE), LANE0)]], ops=OPS)
    r = both(t, h100(64))
    assert (r.dram_reads[LOAD], r.dram_reads[STORE], r.l2_read_hits[LOAD]) == (1, 0, 0)
    assert r.dram_writebacks_owed == 1


def test_a_partly_written_neighbour_is_filled_and_stays_dirty() -> None:
    # A 4 B store leaves sector 1 dirty but unreadable; the 64 B fill of sector 0's miss merges
    # it (two DRAM reads), so the next load of sector 1 hits; the store is still owed to DRAM.
    t = trace_of([[(STORE, one_lane(5 * LINE + SECTOR_B), LANE0), (LOAD, one_lane(5 * LINE), LANE0),
                   (LOAD, one_lane(5 * LINE + SECTOR_B + 4), LANE0)]], ops=OPS)
    r = both(t, h100(64))
    assert (r.dram_reads[LOAD], r.l2_read_accesses[LOAD], r.l2_read_hits[LOAD]) == (2, 2, 1)
    assert r.dram_writebacks_owed == 1


def test_stores_are_not_widened() -> None:
    # A write-back store miss allocates without a fetch, whatever the granularity.
    t = trace_of([[(STORE, lanes(5 * LINE), FULL)]], ops=OPS)
    for fetch in (32, 128):
        r = both(t, h100(fetch))
        assert int(r.dram_reads.sum()) == 0 and r.l2_write_hits[STORE] == 4


@pytest.mark.parametrize("value", ["48", "256", "16"])
def test_a_granularity_outside_sector_to_line_is_refused(value: str) -> None:
    with pytest.raises(ArchError, match="fetch_granularity"):
        arch_with("h100", l2__fetch_granularity=value)


def test_the_h100_fills_64_bytes_and_the_unmeasured_presets_one_sector() -> None:
    # The default is undocumented; the GPU script read 64 B on an H100 (measured.json), and the
    # presets of GPUs not measured keep one-sector fills.
    import json

    from tuiprof.arch import load_arch

    measured = json.loads((Path(__file__).resolve().parents[2] / "demo_traces" / "measured.json").read_text())
    assert measured["NVIDIA H100 80GB HBM3"]["l2_fetch_granularity"]["queried"]["default"] == 64
    assert load_arch("h100").l2.fetch == 64
    for name in ("v100", "a100", "tesla-c2050"):
        a = load_arch(name)
        assert a.l2.fetch == a.l2.sector
