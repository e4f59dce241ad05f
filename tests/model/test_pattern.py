"""What the drill-down, the source pane and the report say about one op (`tuiprof.model.pattern`):
the address pattern of hand-built traces, sectors per request counted as Nsight Compute counts
them (checked against a count of distinct sectors done here with NumPy), the reason word, the
advice (right for gathers, stores, streaming loads and the MD decision), the ranking of loads
and stores apart, and the linear running std."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from tests.support.factories import make_trace
from tuiprof.model.advice import advice, hot_reason
from tuiprof.model.analysis import Analysis, OpStats, running_std
from tuiprof.model.latency import estimate
from tuiprof.model.pattern import SAMPLE, address_pattern, address_patterns, ideal_sectors, ideal_sectors_per_op
from tuiprof.trace.data import LANES, StaticOp

LANE = np.arange(LANES, dtype=np.uint64)


def op(kind: str = "load", op_id: int = 0, nbytes: int = 4) -> StaticOp:
    return StaticOp(id=op_id, kernel="k", kind=kind, space="global", bytes=nbytes, file="k.cu", line=2, label="a[i]")


def stats(o: StaticOp, *, h1: float = 0.1, h2: float = 0.5, x: float = 500.0, spa: float = 4.0, ideal: float = 4.0,
          dram_share: float = 0.6, tm: float = 400.0, cost: float = 1000.0) -> OpStats:
    """An op's figures set by hand (three identical trials each)."""
    e = lambda v: estimate(np.array([v, v, v]))  # noqa: E731
    return OpStats(op=o, warp_accesses=100, requests_per_access=1.0, sectors_per_request=spa, sectors_per_access=spa,
                   ideal_sectors=ideal, h1=e(h1), h2=e(h2), x=e(x), tm=e(tm), cost=cost, cost_share=0.5,
                   l1_share=(1 - dram_share) / 2, l2_share=(1 - dram_share) / 2, dram_share=dram_share)


# --- Nsight Compute's sectors per request ----------------------------------------------------------

def test_ideal_sectors_by_hand() -> None:
    assert ideal_sectors(4, 32) == 4      # 128 B: 4 sectors of 32 B
    assert ideal_sectors(8, 32) == 8
    assert ideal_sectors(16, 32) == 16
    assert ideal_sectors(4, 12) == 2      # 48 B: 2 sectors
    assert ideal_sectors(1, 1) == 1


@pytest.mark.parametrize("demo", ["transpose-naive", "spmv-u"])
def test_sectors_per_request_is_ncus_count(demo: str) -> None:
    """Per op: the mean number of distinct 32 B sectors a warp access touches, counted here from the
    trace's lane addresses (Nsight Compute's l1tex sectors / requests, a request per instruction)."""
    from tests.support.fixed_analysis import fixed

    session, analysis = fixed(demo)
    t = session.trace
    lanes = ((t.mask[:, None] >> np.arange(LANES, dtype=np.uint32)) & 1).astype(bool)
    sectors = np.where(lanes, (t.addr // np.uint64(32)).astype(np.int64), -1)
    srt = np.sort(sectors, axis=1)
    distinct = ((srt[:, 1:] != srt[:, :-1]) & (srt[:, 1:] >= 0)).sum(axis=1) + (srt[:, 0] >= 0)
    for s in analysis.ops:
        mine = distinct[t.op == s.op.id]
        assert s.sectors_per_access == pytest.approx(mine.mean(), rel=1e-9), s.op.label
    if demo == "transpose-naive":  # the coalesced load at the ideal, the strided store at the worst
        load, store = analysis.ops[0], analysis.ops[1]
        assert (load.sectors_per_access, load.ideal_sectors) == (4.0, 4.0)
        assert (store.sectors_per_access, store.ideal_sectors) == (32.0, 4.0)


def test_ideal_follows_the_active_lanes() -> None:
    rows = [LANE * 4, LANE * 4]
    t = make_trace(rows, masks=[0xFFFFFFFF, 0x00000FFF], ops=[0, 1])
    assert list(ideal_sectors_per_op(t)) == [4.0, 2.0]


# --- address pattern -----------------------------------------------------------------------------

def test_sampled_walk_shows_only_the_real_stride() -> None:
    """Each lane walks 4 B per access; more accesses than SAMPLE, so the pattern samples. Whole
    warps are kept, so the walk is +4 B and nothing else (evenly spaced rows made strides such as
    +8 B that no lane takes)."""
    warps, per_warp = 130, 1000
    assert warps * per_warp > max(SAMPLE, 100_000)  # beyond the sample of the drill-down before, too
    base = np.arange(warps, dtype=np.uint64)[:, None, None] * np.uint64(1 << 20) + LANE * np.uint64(4096)
    rows = (base + np.arange(per_warp, dtype=np.uint64)[None, :, None] * np.uint64(4)).reshape(-1, LANES)
    ws = np.repeat(np.arange(warps), per_warp).tolist()
    p = address_pattern(make_trace(rows, warps=ws), 0, 128)
    assert p.examined < p.warp_accesses
    assert p.thread_strides == ((4, 1.0),)
    assert p.lane_strides == ((4096, 1.0),) and not p.gather


def test_gather_is_recognised_and_not_told_to_use_structure_of_arrays() -> None:
    rng = np.random.default_rng(1)
    rows = [rng.integers(0, 1 << 16, LANES).astype(np.uint64) * np.uint64(4) for _ in range(64)]
    t = make_trace(rows)
    p = address_pattern(t, 0, 128)
    assert p.gather and p.regular_share < 0.5
    s = stats(op(), spa=30.0)
    assert hot_reason(s, p, 400.0) == "gather"
    tips = " ".join(advice(s, p, 400.0))
    assert "gather" in tips and "structure of arrays" not in tips


def test_strided_store_is_uncoalesced_and_told_to_write() -> None:
    rows = [LANE * np.uint64(4096) + np.uint64(4 * k) for k in range(16)]
    t = make_trace(rows, kinds=("store",))
    p = address_pattern(t, 0, 128)
    s = stats(op("store"), spa=32.0, h1=math.nan)
    assert hot_reason(s, p, 400.0) == "uncoalesced 8x"
    tips = advice(s, p, 400.0)
    assert any("consecutive lanes write consecutive addresses" in x for x in tips)
    assert not any(" read" in x for x in tips), tips


def test_streaming_load_is_never_told_to_lower_the_md() -> None:
    """A load that never touches a line twice: no cache size and no MD helps; the same box must
    not also tell the user to lower the MD."""
    rows = [LANE * np.uint64(4) + np.uint64(128 * k) for k in range(64)]
    p = address_pattern(make_trace(rows), 0, 128)
    assert p.reuse == 0.0
    s = stats(op(), h1=0.02, h2=0.05, dram_share=0.9)
    assert hot_reason(s, p, 400.0) == "streaming"
    tips = " ".join(advice(s, p, 400.0))
    assert "no cache size" in tips and "MD" in tips
    assert "fewer CTAs" not in tips and "lower" not in tips.lower().replace("no cache size and no md helps", "")


def test_a_load_other_ctas_reuse_through_the_l2_is_not_streaming() -> None:
    """Issue 20 part 5: matmul-tile16's ``B[(t + ty) * n + col]`` reads each of its sectors once,
    yet half of them hit the L2 (other CTAs read them first): reuse across CTAs, so a cache and
    the schedule do matter, and neither "streaming" nor "no cache size helps" may be said."""
    rows = [LANE * np.uint64(4) + np.uint64(128 * k) for k in range(64)]
    p = address_pattern(make_trace(rows), 0, 128)
    s = stats(op(), h1=0.0, h2=0.5, dram_share=0.77)
    assert hot_reason(s, p, 400.0) != "streaming"
    assert not any("no cache size" in t for t in advice(s, p, 400.0))


def test_reuse_counts_the_l1_fill_unit_not_the_line() -> None:
    """A warp that comes back to its line for another sector reuses nothing on a sectored L1
    (each access fetches only its own sectors): no "thrash" for a load with no data reuse."""
    rows = [LANE * np.uint64(0) + np.uint64(32 * (k % 4) + 512 * (k // 4)) for k in range(64)]  # 4 sectors per line
    whole_lines = address_pattern(make_trace(rows), 0, 128)
    sectors = address_pattern(make_trace(rows), 0, 128, 32)
    assert whole_lines.reuse > 0.7 and sectors.reuse == 0.0
    s = stats(op(), h1=0.0, h2=0.0, dram_share=0.9)
    assert hot_reason(s, whole_lines, 400.0) == "thrash" and hot_reason(s, sectors, 400.0) == "streaming"


def test_thrash_advice_follows_the_md_decision() -> None:
    rows = [LANE * 4 for _ in range(64)]          # the warp comes back to the same line
    p = address_pattern(make_trace(rows), 0, 128)
    assert p.reuse > 0.9
    s = stats(op(), h1=0.1, spa=4.0)
    assert hot_reason(s, p, 400.0) == "thrash"

    class Decision:  # what advice reads of an MdDecision
        def __init__(self, rec: int, default: int) -> None:
            self.recommended_md, self.default_md = rec, default

    lower = " ".join(advice(s, p, 400.0, Decision(2, 8)))
    keep = " ".join(advice(s, p, 400.0, Decision(8, 8)))
    assert "MD 2 instead of 8" in lower
    assert "would not pay" in keep and "instead of" not in keep


def test_camping_from_the_ops_dram_latency() -> None:
    p = address_pattern(make_trace([LANE * 4 for _ in range(8)]), 0, 128)
    late = stats(op(), h1=0.4, tm=900.0, dram_share=0.5)
    assert hot_reason(replace(late, sectors_per_access=4.0), replace(p, reuse=0.1), 600.0) == "camping"
    assert hot_reason(late, replace(p, reuse=0.1), 850.0) == ""


def test_patterns_of_every_op_equal_one_at_a_time() -> None:
    rng = np.random.default_rng(3)
    rows = rng.integers(0, 1 << 20, (300, LANES)).astype(np.uint64) * np.uint64(4)
    t = make_trace(rows, ops=list(rng.integers(0, 3, 300)), warps=list(rng.integers(0, 4, 300)))
    every = address_patterns(t, 128)
    for o in t.ops:
        assert every[o.id] == address_pattern(t, o.id, 128)


# --- ranking, running std ----------------------------------------------------------------------------

def test_loads_and_stores_are_ranked_apart() -> None:
    ops = [op("store", 0), op("load", 1), op("load", 2), op("atomic", 3), op("load", 4)]
    costs = [900.0, 100.0, 500.0, 50.0, math.nan]
    a = Analysis(trials=1, planned=1, md=1, arch="x", ops=tuple(stats(o, cost=c) for o, c in zip(ops, costs)),
                 headline={}, samples={}, tm=estimate(np.array([1.0])), dram_hist=(np.zeros(0), np.zeros(1)),
                 convergence={}, sm_requests=np.zeros(1), elapsed=0.0, requests_per_second=0.0)
    assert a.ranks() == {0: "w1", 2: "#1", 1: "#2", 3: "w2"}


def test_running_std_is_the_std_of_every_prefix() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(700.0, 0.3, 500)
    x[[0, 3, 200]] = np.nan
    want = [np.nanstd(x[:n], ddof=1) if np.isfinite(x[:n]).sum() > 1 else np.nan for n in range(2, x.size + 1)]
    np.testing.assert_allclose(running_std(x), want, rtol=1e-9)
    assert running_std(np.array([1.0])).size == 0
