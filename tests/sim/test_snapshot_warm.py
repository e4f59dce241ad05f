"""Warm-up CTAs (issue 24, item 3): a snapshot may record the CTAs just before its own, which are
replayed to warm the caches (as the hardware ran them first) and not counted. Oracles: a
hand-computed hit, the .tptrace round trip, and a whole-grid recording of a small matrix
product, whose hit ratios a warm snapshot from the middle of the grid must approach far better
than a snapshot from a cold start."""

from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.support.factories import make_trace
from tests.support.sim_traces import lanes, small_arch
from tuiprof.errors import TraceError
from tuiprof.sim.prepared import prepare
from tuiprof.sim.reference import reference_trial
from tuiprof.sim.trial import run_trial
from tuiprof.trace.data import Snapshot, Trace

X = 0x10000


def with_warm(t: Trace, warm: int) -> Trace:
    return dataclasses.replace(t, snapshot=dataclasses.replace(t.snapshot, warm=warm))


def cta_slice(t: Trace, first: int, n: int, warm: int) -> Trace:
    """The trace a recorder makes of CTAs ``first - warm .. first + n - 1`` of the whole-grid
    trace `t` (the first `warm` only warming the caches): each CTA's accesses are its own,
    whichever others are recorded, so slicing the whole grid is what recording those CTAs gives."""
    lo, hi = first - warm, first + n
    keep = (t.warp_cta >= lo) & (t.warp_cta < hi)
    warps = np.flatnonzero(keep)
    lengths = np.diff(t.warp_offsets)[warps]
    idx = np.concatenate([np.arange(t.warp_offsets[w], t.warp_offsets[w + 1]) for w in warps])
    offsets = np.zeros(warps.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    snap = Snapshot(cta_ids=t.snapshot.cta_ids[lo:hi].copy(), rule=f"CTAs {lo}..{hi - 1}", warm=warm)
    return dataclasses.replace(t, snapshot=snap, warp_offsets=offsets,
                               warp_cta=(t.warp_cta[warps] - lo).astype(np.int32), warp_index=t.warp_index[warps],
                               op=t.op[idx], mask=t.mask[idx], addr=t.addr[idx])


def test_a_warm_up_cta_fills_the_cache_and_is_not_counted() -> None:
    """Hand-computed, one SM: CTAs 0 and 1 each read line X whole (4 sectors). Both counted: 8 L1
    read sectors, 4 hits, 4 L2 reads (all misses). CTA 0 as warm-up: it runs before CTA 1 even
    when both fit on the SM at once (MD 2), so CTA 1's 4 sectors all hit and reach no L2; the
    product and the reference kernel alike, every seed."""
    arch = small_arch()
    t = make_trace([lanes(X), lanes(X)], warps=[0, 1], n_ctas=2)
    for warm, (ra, rh, l2a) in ((0, (8, 4, 4)), (1, (4, 4, 0))):
        p = prepare(with_warm(t, warm), arch)
        assert p.op_stats().accesses.tolist() == [2 - warm]  # the counted CTAs' accesses only
        assert p.split == warm
        for md in (1, 2):
            for seed in (3, 4, 5):
                for r in (run_trial(p, arch, md, seed), reference_trial(p, arch, md, seed)):
                    assert (int(r.l1_read_accesses.sum()), int(r.l1_read_hits.sum()),
                            int(r.l2_read_accesses.sum())) == (ra, rh, l2a), (warm, md, seed)


def test_the_warm_up_runs_first_on_every_sm_and_in_the_merged_stream() -> None:
    """Random traces on 3 SMs with a warm-up of 4 CTAs (measured SMs that load some SMs with more
    warm-up than others): every cached access issued once, each warp in program order, each SM's
    warm-up accesses before its counted ones, every warm-up access of the merged stream before
    any counted one; product and reference kernels agree trial for trial."""
    from tests.support.sim_runs import differences
    from tuiprof.sim.rng import rng_new
    from tuiprof.sim.schedule import order_accesses
    from tuiprof.trace.data import CtaRecords

    rng = np.random.default_rng(7)
    n_ctas, arch = 10, small_arch(sm_count=3)
    for case in range(4):
        warps = list(rng.integers(0, n_ctas, size=120))
        addr = [lanes(0x10000 + 128 * int(rng.integers(0, 64))) for _ in warps]
        sm = rng.integers(0, 3, size=n_ctas) if case % 2 else None
        t = make_trace(addr, warps=warps, n_ctas=n_ctas,
                       ctas=CtaRecords(sm=sm.astype(np.int64)) if sm is not None else None)
        t = with_warm(t, 4)
        p = prepare(t, arch)
        for md in (1, 2):
            order, lab = order_accesses(rng_new(case), 3, md, p.seq_epoch, p.warp_seq_off, p.warp_cta,
                                        p.cta_warp_off, p.cta_warps, p.sm_seq_off, p.seq_off, p.acc_op, p.op_cached,
                                        p.sm_acc_off, p.cta_acc, p.split)
            assert np.array_equal(np.sort(order), np.arange(t.n_accesses))
            warm_acc = np.repeat(t.warp_cta < 4, np.diff(t.warp_offsets))
            seen = np.zeros(3, dtype=np.int64)
            stream = np.empty(lab.size, dtype=np.int64)
            for g, s in enumerate(lab):
                stream[g] = order[p.sm_acc_off[s] + seen[s]]
                seen[s] += 1
            flags = warm_acc[stream]
            assert not np.any(flags[np.argmin(flags):]) if not flags.all() else True  # warm-up first
            acc_warp = np.repeat(np.arange(t.n_warps), np.diff(t.warp_offsets))
            for w in range(t.n_warps):
                mine = stream[acc_warp[stream] == w]
                assert np.all(np.diff(mine) > 0)
            assert differences(run_trial(p, arch, md, case), reference_trial(p, arch, md, case)) == []



def test_per_op_counts_are_the_counted_ctas_as_if_recorded_cold() -> None:
    """Oracle: a warm snapshot's per-op figures (warp accesses, L1 requests and sectors, requests
    per SM, the report's per-op warp accesses and lanes, shared-memory passes) equal those of its
    counted CTAs recorded alone and cold (the slice of the same accesses), and the warp accesses
    equal a NumPy count over the trace's warps of CTAs >= warm. Random strided and scattered
    addresses, 4 ops (one shared), 12 CTAs of which 6 warm up, on 3 SMs (6 is a multiple of 3, so
    each counted CTA keeps its SM)."""
    from tuiprof.model.shared import SHARED_BANK_WIDTH, shared_op_stats
    from tuiprof.report import trace_section
    from tuiprof.trace.data import StaticOp

    rng = np.random.default_rng(24)
    n_ctas, warm, arch = 12, 6, small_arch(sm_count=3)
    warps = sorted(int(w) for w in rng.integers(0, n_ctas, size=300))
    rows = [lanes(0x40000 + 128 * int(rng.integers(0, 32)), stride=int(rng.choice([4, 8, 132]))) for _ in warps]
    ops = [int(x) for x in rng.integers(0, 4, size=len(warps))]
    masks = [int(x) for x in rng.integers(1, 2**32, size=len(warps), dtype=np.uint64)]
    t = make_trace(rows, warps=warps, ops=ops, masks=masks, n_ctas=n_ctas, kinds=("load", "store", "load", "load"))
    t = dataclasses.replace(t, ops=tuple(dataclasses.replace(o, space="shared") if o.id == 3 else o for o in t.ops))
    assert isinstance(t.ops[3], StaticOp) and not t.ops[3].is_cached
    warm_t = with_warm(t, warm)
    cold = cta_slice(t, warm, n_ctas - warm, 0)
    pw, pc = prepare(warm_t, arch), prepare(cold, arch)
    a, b = pw.op_stats(), pc.op_stats()
    by_numpy = np.bincount(t.op[np.repeat(t.warp_cta >= warm, np.diff(t.warp_offsets))], minlength=4)
    assert a.accesses.tolist() == b.accesses.tolist() == by_numpy.tolist()
    assert a.requests.tolist() == b.requests.tolist() and a.sectors.tolist() == b.sectors.tolist()
    assert np.allclose(a.requests_per_access, b.requests_per_access, equal_nan=True)
    assert np.allclose(a.sectors_per_request, b.sectors_per_request, equal_nan=True)
    assert pw.sm_requests.tolist() == pc.sm_requests.tolist()
    assert prepare(t, arch).op_stats().accesses.tolist() == np.bincount(t.op, minlength=4).tolist()  # cold: all
    sw, sc = trace_section(warm_t), trace_section(cold)
    assert [(o["warp_accesses"], o["mean_active_lanes"]) for o in sw["ops"]] == \
        [(o["warp_accesses"], o["mean_active_lanes"]) for o in sc["ops"]]
    pass_w, pass_c = (shared_op_stats(x, 32, SHARED_BANK_WIDTH, 30.0) for x in (warm_t, cold))
    assert pass_w == pass_c and pass_w[3].warp_accesses == by_numpy[3]



def test_dram_traffic_is_the_counted_ctas() -> None:
    """Hand-computed, one SM, a write-back L2 of 32 sets x 8 ways of 128 B lines: warm-up CTA 0
    stores 8 whole lines of set 0 (32 dirty sectors), counted CTA 1 stores 8 other lines of set
    0, evicting all of CTA 0's (32 write-backs while CTA 1 runs) and leaving its own 32 dirty
    sectors. The counted CTA's DRAM write traffic is its own 32 sectors: write-backs made since
    it began (32) plus sectors owed beyond those owed when it began (32 - 32 = 0), as CTA 1
    recorded alone and cold gives (0 + 32). The DRAM batches reported are those of CTA 1's
    write-backs (the warm-up moves nothing to DRAM: its stores only dirty the L2). Product and
    reference kernels alike, every MD and seed."""
    from tests.support.sim_runs import differences

    arch = small_arch(l2__write_policy="write-back")
    line_of_set0 = [0x100000 + k * 32 * 128 for k in range(16)]
    rows = [lanes(a) for a in line_of_set0]
    t = make_trace(rows, warps=[0] * 8 + [1] * 8, n_ctas=2, kinds=("store",))
    warm = with_warm(t, 1)
    cold = cta_slice(t, 1, 1, 0)
    pw, pc = prepare(warm, arch), prepare(cold, arch)
    assert pw.warm_accesses == 8 and pc.warm_accesses == 0
    for md in (1, 2):
        for seed in (1, 2):
            w, c = run_trial(pw, arch, md, seed), run_trial(pc, arch, md, seed)
            assert differences(w, reference_trial(pw, arch, md, seed)) == []
            assert (w.dram_writebacks, w.dram_writebacks_owed) == (32, 0), (md, seed)
            assert (c.dram_writebacks, c.dram_writebacks_owed) == (0, 32)
            assert int(w.l2_write_accesses.sum()) == int(c.l2_write_accesses.sum()) == 32
            assert c.dram_batch_latencies.size == 0 < w.dram_batch_latencies.size  # CTA 1's write-backs only
    full = run_trial(prepare(t, arch), arch, 1, 1)  # both counted: 64 dirty sectors, 32 evicted
    assert (full.dram_writebacks, full.dram_writebacks_owed) == (32, 32)


def test_warm_up_survives_the_file_and_old_files_have_none(tmp_path: Path) -> None:
    from tuiprof.trace.io import load_trace, save_trace

    t = make_trace([lanes(X), lanes(X), lanes(X)], warps=[0, 1, 2], n_ctas=3)
    assert load_trace(save_trace(t, tmp_path / "cold.tptrace")).snapshot.warm == 0
    with zipfile.ZipFile(tmp_path / "cold.tptrace") as z:
        assert "snapshot_warm" not in json.loads(z.read("tptrace.json"))  # old readers see the old header
    assert load_trace(save_trace(with_warm(t, 2), tmp_path / "warm.tptrace")).snapshot.warm == 2
    with pytest.raises(TraceError, match="warm-up CTAs must be fewer"):
        with_warm(t, 3)


def test_the_rule_records_the_ctas_before_the_snapshot() -> None:
    from tuiprof.arch import load_arch
    from tuiprof.trace.data import Launch
    from tuiprof.trace.snapshot import choose_snapshot

    launch = Launch("k", (64, 64, 1), (16, 16, 1), 32, ctas_per_sm=8)
    s = choose_snapshot(launch, load_arch("v100"), ctas=128, start=128, warm=128)
    assert (s.cta_ids[0], s.n_ctas, s.warm, s.counted_ctas) == (0, 256, 128, 128)
    assert "128 CTAs from CTA 0 that warm the caches" in s.rule
    capped = choose_snapshot(launch, load_arch("v100"), ctas=128, start=50, warm=128)
    assert (capped.cta_ids[0], capped.warm) == (0, 50)
    assert choose_snapshot(launch, load_arch("v100"), ctas=128).warm == 0



def test_the_default_snapshot_is_warm() -> None:
    """The command line's default (start and warm None): one resident set (SMs x CTAs/SM) before
    the counted CTAs, the snapshot starting at CTA 0; bounded by the room the grid leaves after
    the whole snapshot; none when the snapshot is the whole grid; warm 0 is the cold snapshot
    from CTA 0; an explicit start takes the resident set before it. Every choice lies inside
    `snapshot_span`, what a whole program's counting run counts before the launch is known."""
    from tuiprof.arch import load_arch
    from tuiprof.cli.main import build_parser
    from tuiprof.cli.options import collect_options
    from tuiprof.trace.data import Launch
    from tuiprof.trace.snapshot import choose_snapshot, snapshot_span

    v100 = load_arch("v100")  # 80 SMs
    resident, want = 80 * 8, 4 * 80 * 8

    def launch(grid: int) -> Launch:
        return Launch("k", (grid, 1, 1), (256, 1, 1), 32, ctas_per_sm=8)

    cases = [  # grid, start, warm -> first CTA, warm-up, counted
        (4096, None, None, 0, resident, want),
        (want + 200, None, None, 0, 200, want),
        (want, None, None, 0, 0, want),
        (100, None, None, 0, 0, 100),
        (4096, None, 0, 0, 0, want),
        (4096, None, 100, 0, 100, want),
        (4096, 1000, None, 1000 - resident, resident, want),
        (4096, 300, None, 0, 300, want),
        (4096, 0, None, 0, 0, want),
    ]
    for grid, start, warm, first, w, counted in cases:
        s = choose_snapshot(launch(grid), v100, start=start, warm=warm)
        assert (int(s.cta_ids[0]), s.warm, s.counted_ctas) == (first, w, counted), (grid, start, warm)
        assert np.array_equal(s.cta_ids, np.arange(first, first + w + counted))
        assert ("the default warm-up" in s.rule) == (warm is None and w > 0)
        lo, hi = snapshot_span(v100, None, start, warm)
        assert lo <= s.cta_ids[0] and s.cta_ids[-1] < hi, (grid, start, warm)
    args = build_parser().parse_args(["record", "k.cu", "-o", "k.tptrace"])
    opts = collect_options(args)
    assert (opts.snapshot_start, opts.snapshot_warm) == (None, None)
    cold = collect_options(build_parser().parse_args(["record", "k.cu", "-o", "k.tptrace", "--snapshot-warm", "0"]))
    assert (cold.snapshot_start, cold.snapshot_warm) == (None, 0)


SMALL_MATMUL = '''
import numpy as np
ARCH = "h100"
N, TILE = 256, 16

def inputs():
    rng = np.random.default_rng(16)
    return {"A": rng.integers(-2, 3, (N, N)).astype(np.float32), "B": rng.integers(-2, 3, (N, N)).astype(np.float32)}

def setup(dev):
    buf = {name: dev.to_device(a) for name, a in inputs().items()}
    C = dev.empty((N, N), np.float32)
    dev.launch("matmul16", (N // TILE, N // TILE, 1), (TILE, TILE, 1), (C, buf["A"], buf["B"], np.int32(N), np.int32(N)))
    return {"C": dev.from_device(C)}
'''


@pytest.mark.slow
def test_a_warm_snapshot_approaches_the_whole_grid(tmp_path: Path) -> None:
    """matmul16 at N = 256 (16 x 16 CTAs), recorded whole-grid by the emulator, on the H100. A
    snapshot of 2 grid rows from a cold start reads B cold once per 2 rows (the whole kernel once
    per 16): its L2 read hit ratio lies far below the whole grid's. The same 2 rows from the middle
    of the grid after 2 rows of warm-up lie within 4 points of it (the whole grid's own cold start
    is what remains). The emulator records --snapshot-start/--snapshot-warm as the slice of the
    whole grid."""
    from tests.support.ptx_support import DEMO_DIR
    from tuiprof.collect.options import CollectOptions
    from tuiprof.collect.pipeline import collect_trace
    from tuiprof.session import RunConfig, Session

    script = tmp_path / "small_launch.py"
    script.write_text(SMALL_MATMUL)

    def record(**options: object) -> Trace:
        return collect_trace(DEMO_DIR / "matmul.cu", RunConfig(collect=CollectOptions(launch=script, **options)))

    def l2_read(t: Trace) -> float:
        a = Session(t, RunConfig(arch="h100", trials=8, sweep=False)).run()
        return float(a.headline["l2_read"].mean)

    whole = record(snapshot=256)
    assert whole.snapshot.n_ctas == 256 and whole.snapshot.warm == 0
    warm = record(snapshot=32, snapshot_start=128, snapshot_warm=32)
    sliced = cta_slice(whole, 128, 32, 32)
    assert warm.snapshot.warm == 32 and np.array_equal(warm.snapshot.cta_ids, sliced.snapshot.cta_ids)
    assert np.array_equal(warm.addr, sliced.addr) and np.array_equal(warm.warp_cta, sliced.warp_cta)
    truth, cold, steady = l2_read(whole), l2_read(cta_slice(whole, 0, 32, 0)), l2_read(warm)
    assert truth - cold > 0.1, (truth, cold)
    assert abs(steady - truth) < 0.04, (truth, steady)
