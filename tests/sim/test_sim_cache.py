"""The cache stages against pycachesim: same line-address streams, same geometry, same hits.

pycachesim (``cachesim``) is an independent set-associative LRU/FIFO simulator. The reference
kernel's cache (`new_cache`, the hash chains of `tuiprof.sim.cache`) is checked alone, and the
product kernel (`tuiprof.sim.replay`: scanned sets, hashed sets above 128 ways, ``way_of`` L2)
inside whole trials, where one SM runs one warp whose accesses form one bulk sequence, so the
order of the stream is fixed. test_sim_replay.py checks the two kernels against each other.
"""

from __future__ import annotations

import numpy as np
import pytest
from cachesim import Cache

from tests.support.sim_oracles import pycachesim_hits
from tests.support.sim_traces import FULL, LANE0, lanes, one_lane, small_arch, trace_of
from tuiprof.sim.cache import Replacement, new_cache
from tuiprof.sim.prepared import prepare
from tuiprof.sim.trial import run_trial


def streams(seed: int, n: int = 6000) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "uniform": rng.integers(0, 700, n),
        "hot-cold": np.where(rng.random(n) < 0.8, rng.integers(0, 60, n), rng.integers(0, 5000, n)),
        "cyclic": np.tile(np.arange(300), n // 300),
        "strided": (np.arange(n) * 8) % 2048,
    }


@pytest.mark.parametrize("sets,ways", [(1, 1), (1, 16), (4, 4), (8, 64), (64, 8), (2, 64), (16, 2)])
@pytest.mark.parametrize("policy", ["LRU", "FIFO"])
def test_kernel_matches_pycachesim(sets: int, ways: int, policy: str) -> None:
    for name, lines in streams(sets * 100 + ways).items():
        cache = new_cache(sets, ways, lru=policy == "LRU")
        hits = cache.run(lines)
        assert int(hits.sum()) == pycachesim_hits(lines, sets, ways, 128, policy), name


def test_kernel_partitions_are_an_interleaved_split_of_the_sets() -> None:
    # 6 partitions of 8 sets: line l -> partition l % 6, set (l // 6) % 8, i.e. a 48-set cache.
    lines = streams(5)["uniform"]
    cache = new_cache(8, 4, partitions=6)
    assert int(cache.run(lines).sum()) == pycachesim_hits(lines, 48, 4, 32)


def test_kernel_reports_hits_in_stream_order() -> None:
    cache = new_cache(1, 2)
    # 2-way LRU: 1 2 | 1 hits | 3 evicts 2 | 1 hits | 2 evicts 3.
    assert list(cache.run(np.array([1, 2, 1, 3, 1, 2]))) == [False, False, True, False, True, False]
    assert cache.find(1) >= 0 and cache.find(2) >= 0 and cache.find(3) < 0


def test_huge_line_ids_hash_and_compare_in_full() -> None:
    big = np.array([2**58 + 5, 5, 2**58 + 5, 2**40 + 5, 5], dtype=np.int64)
    assert list(new_cache(1, 4).run(big)) == [False, False, True, False, True]


def _single_warp_trace(addrs, mask=LANE0, bytes_per_lane=4):
    from tests.support.sim_traces import op

    return trace_of([[(0, a, mask) for a in addrs]], ops=(op(nbytes=bytes_per_lane),))


@pytest.mark.parametrize("sets,ways", [(8, 4), (2, 64), (32, 1), (1, 256), (2, 160)])
def test_trial_l1_alone_matches_pycachesim(sets: int, ways: int) -> None:
    lines = streams(sets + ways, 3000)["hot-cold"] % 400
    arch = small_arch(l1__size=sets * ways * 128, l1__assoc=ways, l1__sector=128, l2__size=0)
    t = _single_warp_trace([one_lane(int(x) * 128 + 4) for x in lines])
    r = run_trial(prepare(t, arch), None, 1, 11)
    expected = pycachesim_hits(lines, sets, ways, 128)
    assert r.l1_read_accesses[0] == len(lines)  # unsectored: one per line
    assert r.l1_read_hits[0] == expected
    # An absent L2 passes every L1 miss, a whole 128 B line (the L1 sector), to DRAM: 4 x 32 B.
    assert r.l2_read_hits[0] == 0 and r.dram_reads[0] == 4 * (len(lines) - expected)


def test_trial_sectored_l1_counts_four_sectors_per_full_line() -> None:
    lines = streams(9, 2000)["uniform"] % 100
    arch = small_arch(l1__size="2KiB", l1__assoc=4, l2__size=0)  # 4 sets of 4 ways
    t = _single_warp_trace([lanes(int(x) * 128, 4) for x in lines], mask=FULL)
    r = run_trial(prepare(t, arch), None, 1, 0)
    assert r.l1_read_accesses[0] == 4 * len(lines)
    assert r.l1_read_hits[0] == 4 * pycachesim_hits(lines, 4, 4, 128)


@pytest.mark.parametrize("parts,sets,ways", [(1, 32, 8), (6, 4, 16), (2, 64, 2)])
def test_trial_l2_alone_matches_pycachesim(parts: int, sets: int, ways: int) -> None:
    lines = streams(parts * sets + ways, 4000)["hot-cold"] % 3000
    arch = small_arch(l1__size=0, l2__size=parts * sets * ways * 32, l2__line=32, l2__sector=32, l2__assoc=ways,
                      l2__partitions=parts)
    t = _single_warp_trace([one_lane(int(x) * 32) for x in lines])
    r = run_trial(prepare(t, arch), None, 1, 5)
    expected = pycachesim_hits(lines, parts * sets, ways, 32)
    assert r.l1_read_hits[0] == 0 and r.l2_read_accesses[0] == len(lines)
    assert r.l2_read_hits[0] == expected
    assert r.dram_reads[0] == len(lines) - expected


def test_trial_fifo_l2_matches_pycachesim() -> None:
    lines = streams(21, 3000)["hot-cold"] % 2000
    arch = small_arch(l1__size=0, l2__size=16 * 8 * 32, l2__line=32, l2__sector=32, l2__assoc=8, l2__replacement="fifo")
    t = _single_warp_trace([one_lane(int(x) * 32) for x in lines])
    r = run_trial(prepare(t, arch), None, 1, 5)
    assert r.l2_read_hits[0] == pycachesim_hits(lines, 16, 8, 32, "FIFO")


def test_popcount_counts_the_low_32_bits_of_any_integer() -> None:
    from tuiprof.jit import njit, popcount
    from tuiprof.trace.data import popcount32

    @njit
    def counts(xs, ys):
        out = np.empty(xs.shape[0] * 2, dtype=np.int64)
        for i in range(xs.shape[0]):
            out[2 * i] = popcount(xs[i])
            out[2 * i + 1] = popcount(ys[i])
        return out

    rng = np.random.default_rng(3)
    ys = rng.integers(0, 2**32, 500, dtype=np.uint64).astype(np.uint32)
    ys[:3] = (0, 1, 0xFFFFFFFF)
    xs = ys.astype(np.int64) | (rng.integers(0, 2**31, 500, dtype=np.int64) << 32)  # high bits ignored
    xs[3] = -1
    expected = popcount32(ys).astype(np.int64)
    expected[3] = 32
    got = counts(xs, ys)
    assert list(got[0::2]) == list(expected)
    assert list(got[1::2]) == list(popcount32(ys))


def test_store_evict_makes_the_way_the_next_victim() -> None:
    # 1 set, 4 ways: A B C D resident; invalidating B must leave A C D resident when E comes in.
    from tuiprof.jit import njit
    from tuiprof.sim.cache import cache_alloc, cache_find, cache_invalidate, cache_load_line

    @njit
    def scenario():
        meta, htab, hshift = cache_alloc(1, 4, 1)
        for x in (10, 11, 12, 13):
            cache_load_line(meta, htab, hshift, 1, 1, True, x)
        cache_invalidate(meta, htab, 0, hshift, meta.shape[0] - 1, cache_find(meta, htab, 0, hshift, 11))
        cache_load_line(meta, htab, hshift, 1, 1, True, 14)
        out = np.empty(5, dtype=np.int64)
        for i, x in enumerate((10, 11, 12, 13, 14)):
            out[i] = cache_find(meta, htab, 0, hshift, x) >= 0
        return out

    assert list(scenario()) == [1, 0, 1, 1, 1]


# --------------------------------------------------------------------------- MRU and random

@pytest.mark.parametrize("sets,ways", [(1, 1), (1, 16), (4, 4), (8, 64), (64, 8), (16, 2)])
def test_mru_matches_pycachesim(sets: int, ways: int) -> None:
    """pycachesim's MRU: a hit moves the line to the front, a fill replaces the back and stays
    there, so the most recently filled line goes next unless it is hit first."""
    for name, lines in streams(sets * 100 + ways).items():
        hits = new_cache(sets, ways, policy=Replacement.MRU).run(lines)
        assert int(hits.sum()) == pycachesim_hits(lines, sets, ways, 128, "MRU"), name


@pytest.mark.parametrize("sets,ways", [(1, 16), (4, 4), (64, 8), (8, 64)])
def test_random_matches_pycachesim_in_distribution(sets: int, ways: int) -> None:
    """Random replacement (pycachesim's RR: any way of the set, valid or not) draws from C's
    rand() there and from Numba's generator here, so the hit counts agree in distribution: the
    mean of 8 seeds lies within 4 standard deviations of pycachesim's one run (LRU or FIFO in
    its place would miss by hundreds on the 8 x 64 cyclic stream: 0 hits against ~5,500)."""
    for name, lines in streams(sets * 100 + ways).items():
        ours = np.array([new_cache(sets, ways, policy=Replacement.RANDOM, seed=s).run(lines).sum() for s in range(8)])
        theirs = pycachesim_hits(lines, sets, ways, 128, "RR")
        assert abs(ours.mean() - theirs) <= 4 * max(float(ours.std(ddof=1)), 1.0), (name, ours, theirs)


@pytest.mark.parametrize("level,sets,ways", [("l1", 8, 4), ("l1", 1, 256), ("l2", 16, 8)])
def test_trial_mru_matches_pycachesim(level: str, sets: int, ways: int) -> None:
    """The replay kernel's MRU (a scanned L1, a hashed 256-way L1, the L2's ``way_of`` sets) hit for
    hit as pycachesim's, inside a whole trial (the other level absent)."""
    lines = streams(sets * 7 + ways, 3000)["hot-cold"] % 1500
    if level == "l1":
        arch = small_arch(l1__size=sets * ways * 128, l1__assoc=ways, l1__sector=128, l1__replacement="mru", l2__size=0)
        t = _single_warp_trace([one_lane(int(x) * 128 + 4) for x in lines])
        line = 128
    else:
        arch = small_arch(l1__size=0, l2__size=sets * ways * 32, l2__line=32, l2__sector=32, l2__assoc=ways,
                          l2__replacement="mru")
        t = _single_warp_trace([one_lane(int(x) * 32) for x in lines])
        line = 32
    r = run_trial(prepare(t, arch), None, 1, 5)
    hits = r.l1_read_hits[0] if level == "l1" else r.l2_read_hits[0]
    assert hits == pycachesim_hits(lines, sets, ways, line, "MRU")
    assert hits != pycachesim_hits(lines, sets, ways, line, "LRU")  # the policy reached the kernel


@pytest.mark.parametrize("level", ["l1", "l2"])
def test_trial_random_matches_pycachesim_in_distribution(level: str) -> None:
    """The replay kernel's RANDOM (a way drawn from the trial's seed) against pycachesim's RR, as
    `test_random_matches_pycachesim_in_distribution`: the mean of 8 seeds within 4 standard
    deviations of pycachesim's run, on a cyclic stream where LRU and FIFO never hit."""
    lines = np.tile(np.arange(40), 40)  # 40 lines through 4 sets of 8 ways: LRU and FIFO never hit
    if level == "l1":
        arch = small_arch(l1__size=4 * 8 * 128, l1__assoc=8, l1__sector=128, l1__replacement="random", l2__size=0)
        t = _single_warp_trace([one_lane(int(x) * 128 + 4) for x in lines])
        line = 128
    else:
        arch = small_arch(l1__size=0, l2__size=4 * 8 * 32, l2__line=32, l2__sector=32, l2__assoc=8,
                          l2__replacement="random")
        t = _single_warp_trace([one_lane(int(x) * 32) for x in lines])
        line = 32
    p = prepare(t, arch)
    runs = [run_trial(p, None, 1, s) for s in range(8)]
    ours = np.array([r.l1_read_hits[0] if level == "l1" else r.l2_read_hits[0] for r in runs])
    theirs = pycachesim_hits(lines, 4, 8, line, "RR")
    assert pycachesim_hits(lines, 4, 8, line, "LRU") == 0 and theirs > 200
    assert abs(ours.mean() - theirs) <= 4 * max(float(ours.std(ddof=1)), 1.0), (ours, theirs)
    assert len(set(ours.tolist())) > 1  # the seed draws the victims


def test_random_replacement_is_reproducible_by_seed() -> None:
    lines = streams(7)["hot-cold"]
    one = new_cache(4, 4, policy=Replacement.RANDOM, seed=3).run(lines)
    assert (one == new_cache(4, 4, policy=Replacement.RANDOM, seed=3).run(lines)).all()
    assert not (one == new_cache(4, 4, policy=Replacement.RANDOM, seed=4).run(lines)).all()


def test_replacement_numbering_is_pycachesims() -> None:
    """The Arch's replacement names pack into the trial parameters as these numbers."""
    assert {p.name: int(p) for p in Replacement} == {"FIFO": 0, "LRU": 1, "MRU": 2, "RANDOM": 3}
    assert Cache.replacement_policy_enum == {"FIFO": 0, "LRU": 1, "MRU": 2, "RR": 3}


def test_every_replacement_policy_loads_and_packs_as_pycachesim_numbers_it() -> None:
    from tuiprof.arch import load_arch
    from tuiprof.sim.prepared import P_L1_LRU, P_L2_LRU, pack_arch

    for number, name in ((0, "fifo"), (1, "lru"), (2, "mru"), (3, "random")):
        a = load_arch("v100", {"l1.replacement": name, "l2.replacement": name})
        assert a.l1.replacement == a.l2.replacement == name
        p = pack_arch(a)
        assert p[P_L1_LRU] == p[P_L2_LRU] == number
