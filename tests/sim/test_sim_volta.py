"""Volta, Ampere and Hopper cache semantics (issue 14 part 2): each rule against a hand-computed
case on the v100, a100 and h100 presets and on the tesla-c2050 (Baghsorkhi12's Fermi rules), the
write-back L2 against pycachesim, and the carve-out L1 a session simulates.

The presets are shrunk only where a case needs an eviction (one L2 set of two ways, one SM); their
store policies, address hashes and DRAM timings stay the presets' own."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from cachesim import Cache, CacheSimulator, MainMemory

from tests.support.sim_traces import FULL, LANE0, arch_with, lanes, one_lane, op, small_arch, trace_of
from tuiprof.arch import Arch, load_arch
from tuiprof.arch.occupancy import carveout, carveout_arch
from tuiprof.sim.prepared import default_md, prepare
from tuiprof.sim.results import TrialResult
from tuiprof.sim.trial import run_trial

LINE = 128
LOAD, STORE, ATOMIC = 0, 1, 2
OPS = (op("load"), op("store"), op("atomic"))
SECTOR = 0xFF
"""8 lanes of 4 B from a line's start: its whole first 32 B sector."""
VOLTA_AND_LATER = ("v100", "a100", "h100")


def run(trace, arch: Arch, md: int = 1, seed: int = 1) -> TrialResult:
    return run_trial(prepare(trace, arch), arch, md, seed)


def tiny_l2(preset: str, **settings: object) -> Arch:
    """`preset` on one SM with an L2 of one set of two lines (any three lines conflict): one shared
    L2, not two halves (which need an even number of sets; tests/sim/test_sim_halves.py)."""
    l2_line = load_arch(preset).l2.line
    return arch_with(preset, **{"sm_count": 1, "l2__partitions": 1, "l2__assoc": 2, "l2__size": 2 * l2_line,
                                "l2__halves": 1, **settings})


def two_stores_then_eviction(arch: Arch) -> TrialResult:
    """Store sector 0 of line 3 twice, then load lines 10 and 11 whole: line 3 is evicted."""
    a = lanes(3 * LINE, 4)
    t = trace_of([[(STORE, a, SECTOR), (STORE, a, SECTOR), (LOAD, lanes(10 * LINE, 4), FULL),
                   (LOAD, lanes(11 * LINE, 4), FULL)]], ops=OPS)
    return run(t, arch)


@pytest.mark.parametrize("preset", VOLTA_AND_LATER)
def test_write_back_two_stores_to_one_sector_then_an_eviction_write_dram_once(preset: str) -> None:
    r = two_stores_then_eviction(tiny_l2(preset))
    # Both stores complete in L2 (allocated dirty, no fetch, no write-through); the eviction
    # writes the one dirty sector back.
    assert (r.l2_write_accesses[STORE], r.l2_write_hits[STORE]) == (2, 2)
    assert r.dram_writes[STORE] == 0 and r.dram_writebacks == 1 and r.dram_writebacks_owed == 0
    assert r.dram_reads[STORE] == 0 and r.dram_reads[LOAD] == 8  # the two loaded lines only
    assert r.l2_write_hit_ratio == 1.0


def test_write_through_two_stores_to_one_sector_then_an_eviction_write_dram_twice() -> None:
    # tesla-c2050 (Baghsorkhi12 2.1): the first store misses and writes DRAM, its 32 B L2 line
    # becomes valid; the second hits (dirty); the eviction writes it back: 2 DRAM writes.
    r = two_stores_then_eviction(tiny_l2("tesla-c2050"))
    assert (r.l2_write_accesses[STORE], r.l2_write_hits[STORE]) == (2, 1)
    assert r.dram_writes[STORE] + r.dram_writebacks == 2 and r.dram_writebacks == 1


@pytest.mark.parametrize("preset", VOLTA_AND_LATER + ("tesla-c2050",))
def test_dirty_sectors_left_in_l2_are_owed_to_dram(preset: str) -> None:
    # Two whole-sector stores to line 3 and one to line 4, no eviction: what the L2 holds dirty
    # at the end reaches DRAM after the snapshot.
    t = trace_of([[(STORE, lanes(3 * LINE, 4), SECTOR), (STORE, lanes(3 * LINE, 4), SECTOR),
                   (STORE, lanes(4 * LINE, 4), SECTOR)]], ops=OPS)
    r = run(t, arch_with(preset, sm_count=1))
    write_back = load_arch(preset).l2.write_policy == "write-back"
    assert r.dram_writebacks == 0
    # Write-back: both sectors dirty. Write-through: line 3's second store hit (dirty); line 4's
    # only store missed and went to DRAM, leaving its sector clean.
    assert (r.dram_writebacks_owed, r.dram_writes[STORE]) == ((2, 0) if write_back else (1, 2))


@pytest.mark.parametrize("preset", VOLTA_AND_LATER + ("tesla-c2050",))
@pytest.mark.parametrize("store_mask,written", [(LANE0, 0), (SECTOR, 1)])
def test_a_load_never_hits_bytes_that_were_not_fetched(preset: str, store_mask: int, written: int) -> None:
    # A 4 B store (LANE0) or a whole-sector store (SECTOR) to line 5, then a 128 B load of the
    # line: the line's 4 sectors come from DRAM once each, except a sector the store wrote
    # entirely. Write-back (Volta+): the partly written sector stays unreadable, the load fetches
    # it. Write-through (Fermi, Baghsorkhi12 2.1): the store's miss "brings the cache block to the
    # cache", a DRAM read charged to the store, and the load hits it in L2.
    a = lanes(5 * LINE, 4)
    t = trace_of([[(STORE, a, store_mask), (LOAD, a, FULL)]], ops=OPS)
    arch = arch_with(preset, sm_count=1)
    r = run(t, arch)
    assert r.dram_reads[LOAD] + r.dram_reads[STORE] == 4 - written
    write_back = arch.l2.write_policy == "write-back"
    assert r.dram_writes[STORE] == (0 if write_back else 1)
    assert r.dram_reads[STORE] == (0 if write_back else 1 - written)
    if write_back:  # Volta+: the write-allocate L1 holds only a sector written entirely
        assert (r.l1_read_accesses[LOAD], r.l1_read_hits[LOAD]) == (4, written)
        assert (r.l2_read_accesses[LOAD], r.l2_read_hits[LOAD]) == (4 - written, 0)
    else:  # Fermi's L1 evicts the stored line; the L2 holds the stored sector, fetched or written
        assert (r.l1_read_accesses[LOAD], r.l1_read_hits[LOAD]) == (1, 0)
        assert (r.l2_read_accesses[LOAD], r.l2_read_hits[LOAD]) == (4, 1)


@pytest.mark.parametrize("preset", VOLTA_AND_LATER)
def test_a_partly_written_sector_stays_dirty_when_a_load_fetches_it(preset: str) -> None:
    # 4 B store to line 3, a load of the line fetches its 4 sectors, then lines 10 and 11 evict
    # it: the stored sector is written back (the fetch did not clean it).
    a = lanes(3 * LINE, 4)
    t = trace_of([[(STORE, a, LANE0), (LOAD, a, FULL), (LOAD, lanes(10 * LINE, 4), FULL),
                   (LOAD, lanes(11 * LINE, 4), FULL)]], ops=OPS)
    r = run(t, tiny_l2(preset, l1__size=0))
    assert r.dram_reads[LOAD] == 12 and r.dram_writes[STORE] == 0 and r.dram_writebacks == 1


@pytest.mark.parametrize("preset", VOLTA_AND_LATER)
def test_atomics_keep_the_write_through_rule_on_a_write_back_l2(preset: str) -> None:
    # Two whole-sector atomics to line 3, then its eviction: the first misses and goes on to
    # DRAM, the second hits the now valid sector, the eviction writes it back.
    a = lanes(3 * LINE, 4)
    t = trace_of([[(ATOMIC, a, SECTOR), (ATOMIC, a, SECTOR), (LOAD, lanes(10 * LINE, 4), FULL),
                   (LOAD, lanes(11 * LINE, 4), FULL)]], ops=OPS)
    r = run(t, tiny_l2(preset))
    assert (r.l2_write_accesses[ATOMIC], r.l2_write_hits[ATOMIC]) == (2, 1)
    assert r.dram_writes[ATOMIC] == 1 and r.dram_writebacks == 1


# --- the write-back L2 against pycachesim ------------------------------------------------------

def pycachesim_write_back(kinds: np.ndarray, lines: np.ndarray, sets: int, ways: int) -> tuple[int, int]:
    """(load hits, dirty lines written back) of pycachesim's write-back, write-allocate cache.
    Its store miss fetches the line, ours does not; on streams whose stores all miss (each to a
    line never accessed before) the two agree on everything else: a store allocates the line
    dirty as the most recent, a load hits a resident line, a dirty victim is written back."""
    mem = MainMemory()
    cache = Cache("L2", sets, ways, LINE, "LRU", write_back=True, write_allocate=True)
    mem.load_to(cache)
    mem.store_from(cache)
    sim = CacheSimulator(cache, mem)
    for kind, line in zip(kinds, lines):
        (sim.store if kind == STORE else sim.load)(int(line) * LINE, length=LINE)
    return int(cache.stats()["HIT_count"]), int(mem.stats()["STORE_count"])


@pytest.mark.parametrize("sets,ways", [(1, 8), (4, 4), (6, 2), (32, 8)])
def test_write_back_l2_alone_matches_pycachesim(sets: int, ways: int) -> None:
    # Whole-line accesses, L1 off, one L2 slice with linear sets (6: any set count). Stores go
    # to fresh lines (never accessed before), loads to lines stored earlier or to a hot range.
    rng = np.random.default_rng(sets * 10 + ways)
    kinds, lines, fresh = [], [], 10**6
    for _ in range(3000):
        if rng.random() < 0.3:
            kinds.append(STORE)
            lines.append(fresh)
            fresh += int(rng.integers(1, 3))
        else:
            kinds.append(LOAD)
            stored = [x for k, x in zip(kinds, lines) if k == STORE][-4 * sets * ways:]
            lines.append(int(rng.choice(stored)) if stored and rng.random() < 0.5
                         else int(rng.integers(0, 3 * sets * ways)))
    k, x = np.array(kinds), np.array(lines)
    arch = small_arch(l1__size=0, l2__size=sets * ways * LINE, l2__assoc=ways, l2__write_policy="write-back")
    r = run(trace_of([[(int(a), lanes(int(b) * LINE, 4), FULL) for a, b in zip(k, x)]], ops=OPS), arch)
    hits, written_back = pycachesim_write_back(k, x, sets, ways)
    loads = int((k == LOAD).sum())
    assert 0 < hits < loads and written_back > 0
    assert r.l2_read_hits[LOAD] == 4 * hits and r.dram_reads[LOAD] == 4 * (loads - hits)
    assert r.dram_writebacks == 4 * written_back and r.dram_writes[STORE] == 0 and r.dram_reads[STORE] == 0
    assert r.l2_write_hits[STORE] == r.l2_write_accesses[STORE] == 4 * int((k == STORE).sum())


# --- the address hash ----------------------------------------------------------------------------

def gf2_mod(a: int, p: int) -> int:
    k = p.bit_length() - 1
    while a.bit_length() > k:
        a ^= p << (a.bit_length() - 1 - k)
    return a


def test_the_xor_hash_is_ipoly_and_keeps_the_linear_interleave_per_block() -> None:
    # Python integers as GF(2) polynomials, independent of the kernels' byte tables.
    from tuiprof.sim.addressing import hash_polynomial, is_irreducible, polynomial, target, xor_table

    def brute_irreducible(p: int) -> bool:
        k = p.bit_length() - 1
        return all(gf2_mod(p, d) != 0 for d in range(2, 1 << (k // 2 + 1)) if d.bit_length() - 1 <= k // 2)

    assert all(is_irreducible(p) == brute_irreducible(p) for p in range(2, 1 << 11))
    assert [polynomial(k) for k in (1, 2, 3, 5)] == [0b11, 0b111, 0b1011, 0b100101]
    rng = np.random.default_rng(0)
    for n in (32, 40, 80, 2048, 20480, 25600, 6, 7):
        tab, p = xor_table(n, hash_polynomial(n)), hash_polynomial(n)
        k = (n & -n).bit_length() - 1
        for x in [0, 1, n - 1, n, 2**64 - 1, *map(int, rng.integers(0, 2**63, 50))]:
            q, r = divmod(x, n)
            expect = r ^ (gf2_mod(q << k, p) if k else 0)
            assert target(np.uint64(x), n, True, tab) == (q, expect) and expect < n
            assert target(np.uint64(x), n, False, tab) == (q, r)
        if n == 32:  # a power of two: the whole unit is reduced, x mod P (Rau's IPOLY)
            assert all(target(np.uint64(x), n, True, tab)[1] == gf2_mod(x, p) for x in range(5000))
        block = n * int(rng.integers(0, 10**6))
        assert sorted(target(np.uint64(block + i), n, True, tab)[1] for i in range(n)) == list(range(n))


@pytest.mark.parametrize("n", [32, 40, 80, 2048, 20480, 25600])  # v100/a100/h100 channels and L2 sets
def test_power_of_two_strides_spread_over_every_target(n: int) -> None:
    from tuiprof.sim.addressing import hash_polynomial, target, xor_table

    tab = xor_table(n, hash_polynomial(n))
    for s in range(0, 17):
        hashed = {target(np.uint64(i << s), n, True, tab)[1] for i in range(n)}
        linear = {(i << s) % n for i in range(n)}
        assert len(hashed) == n
        assert len(linear) == n // np.gcd(n, 1 << s)  # 1 target from 2^s = n on, when n is a power of two


def dram_latency_of_one_batch(addresses: list[int], arch: Arch) -> int:
    """Baghsorkhi12 3.2.3's batch cost, written out for one batch of 32 B reads on fresh banks:
    base + max(busiest bank's row misses and hits, busiest channel's requests x burst)."""
    from tuiprof.sim.addressing import hash_polynomial

    d = arch.dram
    busy: dict[tuple[int, int], int] = {}
    rows: dict[tuple[int, int], int] = {}
    per_channel: dict[int, int] = {}
    for a in addresses:
        q, ch = divmod(a // d.interleave, d.channels)
        if arch.address_hash == "xor":
            k = (d.channels & -d.channels).bit_length() - 1
            ch ^= gf2_mod(q << k, hash_polynomial(d.channels)) if k else 0
        local = (q * d.interleave + a % d.interleave) // d.row_size
        bank, row = (ch, local % d.banks), local // d.banks
        busy[bank] = busy.get(bank, 0) + (d.row_hit_cycles if rows.get(bank) == row else d.row_miss_cycles)
        rows[bank] = row
        per_channel[ch] = per_channel.get(ch, 0) + 1
    return d.base_latency + max(max(busy.values()), max(per_channel.values()) * d.burst_cycles)


@pytest.mark.parametrize("preset", VOLTA_AND_LATER)
def test_a_power_of_two_stride_spreads_over_the_dram_channels(preset: str) -> None:
    # 32 one-lane loads 8 KiB apart (one 256 B interleave unit in 32): cold everywhere, 32 DRAM
    # reads in one batch (the batch target is at least one request per SM, 80+). Bursts of 10
    # cycles make a camped channel visible.
    base = 0x10000000
    addresses = [base + i * 8192 for i in range(32)]
    t = trace_of([[(LOAD, one_lane(a), LANE0) for a in addresses]], ops=OPS)
    tm = {}
    for hash_ in ("linear", "xor"):
        arch = arch_with(preset, address_hash=hash_, dram__burst_cycles=10, l2__fetch_granularity=0)  # a sector a miss
        r = run(t, arch)
        assert r.dram_reads[LOAD] == 32 and r.dram_batch_latencies.size == 1
        tm[hash_] = r.mean_dram_latency
        assert tm[hash_] == dram_latency_of_one_batch(addresses, arch)
    if preset == "v100":  # by hand: linear, all 32 on one channel (320 cycles of bursts); xor,
        d = load_arch("v100").dram  # 32 channels, one row miss each
        assert tm == {"linear": d.base_latency + 32 * 10, "xor": d.base_latency + d.row_miss_cycles}
    assert tm["xor"] < tm["linear"]


@pytest.mark.parametrize("preset,l2_line,stride_lines,n_lines", [
    ("v100", 128, 2048, 30),          # 64 slices x 32 sets, 24 ways
    ("tesla-c2050", 32, 384, 70),     # 6 slices x 64 sets of 32 B lines, 64 ways
])
def test_a_power_of_two_stride_of_lines_spreads_over_the_l2_sets(preset: str, l2_line: int, stride_lines: int,
                                                                  n_lines: int) -> None:
    # L1 off. n_lines lines one set count apart, loaded twice: linearly they all fall in one set
    # of fewer ways (LRU: the second pass misses every time); hashed, each has a set of its own.
    addresses = [i * stride_lines * l2_line for i in range(n_lines)]
    t = trace_of([[(LOAD, one_lane(0x40000000 + a), LANE0) for a in addresses * 2]], ops=OPS)
    for hash_, hits in (("linear", 0), ("xor", n_lines)):
        r = run(t, arch_with(preset, sm_count=1, l1__size=0, address_hash=hash_))
        assert r.l2_read_accesses[LOAD] == 2 * n_lines and r.l2_read_hits[LOAD] == hits


# --- the carve-out ----------------------------------------------------------------------------

@pytest.mark.parametrize("preset,shared,carve,l1_kib,ways", [
    ("v100", 0, 0, 128, 256),
    ("v100", 8192, 8192, 120, 240),
    ("v100", 8193, 16384, 112, 224),
    ("v100", 8 * 4224, 65536, 64, 128),       # transpose-tiled's 8 CTAs of a 32 x 33 float tile
    ("v100", 200_000, 98304, 32, 64),         # more than any step: the largest
    ("a100", 100 * 1024, 100 * 1024, 92, 184),
    ("h100", 228 * 1024, 228 * 1024, 28, 56),
    ("h100", 0, 0, 217, 434),                 # the measured L1 caps what the carve-out leaves (256 KiB here)
    ("h100", 8192, 8192, 217, 434),           # 248 KiB left, capped at the 217 measured
    ("h100", 40 * 1024, 64 * 1024, 192, 384),  # below the cap: the carve-out rule
])
def test_the_l1_is_what_the_carve_out_leaves(preset: str, shared: int, carve: int, l1_kib: int, ways: int) -> None:
    a = load_arch(preset)
    assert carveout(a, shared) == carve
    b = carveout_arch(a, shared)
    assert (b.l1.size, b.l1.assoc, b.l1.sets) == (l1_kib << 10, ways, a.l1.sets)
    assert b.l2 == a.l2 and b.name == a.name


@pytest.mark.parametrize("preset", ["tesla-c2050", "gtx480", "gtx285"])
def test_before_volta_the_l1_is_the_presets_split(preset: str) -> None:
    a = load_arch(preset)
    assert carveout(a, 40_000) is None and carveout_arch(a, 40_000) is a


def test_a_session_simulates_the_carve_out_l1_unless_the_l1_is_set() -> None:
    from tuiprof.demos import resolve_target
    from tuiprof.report import build_report
    from tuiprof.session import RunConfig, Session
    from tuiprof.trace.io import load_trace

    t = load_trace(resolve_target("transpose-tiled"))
    s = Session(t, RunConfig(arch="v100"))
    per_cta = s.occupancy.shared_per_cta
    assert (t.launch.static_shared, per_cta, s.md) == (4224, 4352, 8)  # 33 x 32 floats, rounded to 256 B
    assert (s.arch.l1.size, s.shared_carveout) == (64 << 10, 64 << 10)  # 34,816 B per SM: the 64 KB step
    assert s.requested_arch.l1.size == 128 << 10
    assert [s.arch_at(m).l1.size >> 10 for m in (1, 2, 4, 8)] == [120, 112, 96, 64]
    for over in ({"l1.size": "128KiB"}, {"l1.assoc": "256"}):
        fixed = Session(t, RunConfig(arch="v100", overrides=over))
        assert fixed.arch.l1.size == 128 << 10 and fixed.shared_carveout is None
    assert Session(t, RunConfig(arch="tesla-c2050")).arch.l1.size == 16 << 10
    doc = build_report(resolve_target("transpose-tiled"), RunConfig(arch="v100", trials=1, sweep=False, tolerance=None))
    assert (doc["arch"]["l1"]["size"], doc["arch"]["l1"]["assoc"], doc["arch"]["shared_carveout"]) == (65536, 128, 65536)


def test_the_sweep_simulates_each_md_with_its_own_l1() -> None:
    from tuiprof.demos import resolve_target
    from tuiprof.session import RunConfig, Session
    from tuiprof.trace.io import load_trace

    t = load_trace(resolve_target("transpose-tiled"))
    s = Session(t, RunConfig(arch="v100", trials=2, sweep_trials=2))
    runs, note = s._sweep_runs(SimpleNamespace(prepared=prepare(t, s.arch)))
    assert note == "" and {m: r.arch.l1.size >> 10 for m, r in runs.items()} == {1: 120, 2: 112, 3: 112, 4: 96, 5: 96,
                                                                                  6: 96, 7: 96}


def test_the_readme_what_if_runs_on_the_tesla_c2050() -> None:
    # --set l1.size=48KiB: 6 sets of 64 ways (modulo indexing), against pycachesim's 6 sets.
    from tests.support.sim_oracles import pycachesim_hits

    arch = arch_with("tesla-c2050", sm_count=1, l1__size="48KiB", l2__size=0)
    assert arch.l1.sets == 6
    rng = np.random.default_rng(2)
    lines = np.where(rng.random(4000) < 0.8, rng.integers(0, 500, 4000), rng.integers(0, 5000, 4000))
    t = trace_of([[(LOAD, one_lane(int(x) * LINE), LANE0) for x in lines]], ops=OPS)
    r = run(t, arch)
    assert r.l1_read_hits[LOAD] == pycachesim_hits(lines, 6, 64, LINE)


def test_transpose_naive_on_v100_stores_complete_in_l2() -> None:
    # The case (93,056 write-throughs plus 82,395 write-backs for 81,920 sectors stored):
    # on a write-back L2 no store writes through, dirty sectors reach DRAM only when evicted,
    # and every store is an L2 hit.
    from tuiprof.demos import resolve_target
    from tuiprof.trace.io import load_trace

    t = load_trace(resolve_target("transpose-naive"))
    arch = load_arch("v100")
    r = run(t, arch, md=default_md(t, arch))
    stores = [o.id for o in t.ops if o.kind == "store"]
    assert r.dram_writes.sum() == 0
    assert r.dram_writebacks + r.dram_writebacks_owed >= 81_920  # every stored sector reaches DRAM
    assert r.l2_write_hits[stores].sum() == r.l2_write_accesses[stores].sum() > 0
