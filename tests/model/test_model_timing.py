"""The timing model (MWP/CWP of HongKim09 on simulated latency and bytes, floored by DRAM and L2
bandwidth): hand-computed cases, its agreement with Zhang11's global memory time, Yen14's
Table 4, and the gain's range."""

from __future__ import annotations

import numpy as np
import pytest

from tuiprof.arch import load_arch
from tuiprof.model.mwp_cwp import MEMORY_BOUND, NOT_ENOUGH_WARPS
from tuiprof.model.timing import (
    DEPARTURE_RANGE,
    DRAM_BOUND,
    L2_BANDWIDTH_RANGE,
    L2_BOUND,
    MWP_BOUND,
    KernelShape,
    Traffic,
    constants,
    gain_range,
    kernel_time,
    mean_traffic,
    predict_timing,
)

GTX480 = load_arch("gtx480")   # no L2 (Yen14 Table 8), DRAM 88.7 GB/s, 15 SMs at 1.4 GHz, 1-cycle issue

# 300 CTAs of 2 warps, 30 in the snapshot (x 10 for the grid), 4 coalesced memory instructions and
# 40 instructions per warp.
SHAPE = KernelShape(threads_per_cta=64, grid_ctas=300, snapshot_ctas=30, snapshot_warps=60, coal_mem_insts=4.0,
                    uncoal_mem_insts=0.0, uncoal_per_mw=1.0, cta_insts=np.full(300, 80))
# Every memory instruction moves 4 sectors (128 B) from DRAM: 60 warps x 4 x 4 = 960 transactions.
TRAFFIC = Traffic(mem_ld=400.0, dram_transactions=960.0, l2_sectors=0.0)


def test_not_enough_warps_by_hand() -> None:
    # MD 4: N = 8 warps, #Rep = 300 / (4 x 15) = 5. Mem_L 400, departure 30.3: MWP_Without_BW 13.2;
    # BW_per_warp = 1.4 x 128 / 400 = 0.448 GB/s, MWP_peak_BW = 88.7 / (0.448 x 15) = 13.2; MWP = N = 8.
    # Comp 40, Mem 1600: CWP = min(41, 8) = 8 -> not enough warps:
    # Exec = (1600 + 40 + 10 x 7) x 5 = 8550 cycles = 6.107 us at 1.4 GHz.
    # DRAM floor: 960 x 32 B x 10 = 307200 B / 88.7 GB/s = 3.463 us; no L2.
    k = kernel_time(GTX480, SHAPE, TRAFFIC, 4)
    assert k.mwp.case == NOT_ENOUGH_WARPS and k.mwp.mwp == 8 and k.mwp.rep == 5
    assert k.mwp.exec_cycles_app == pytest.approx(8550)
    assert k.mwp_s == pytest.approx(8550 / 1.4e9)
    assert k.dram_bytes == 307200 and k.dram_floor_s == pytest.approx(307200 / 88.7e9)
    assert k.l2_floor_s == 0 and k.time_s == k.mwp_s and k.bound == MWP_BOUND
    # The bytes one memory instruction moves are the simulated 4 sectors, not 32 lanes x 4 B by chance:
    assert k.load_bytes_per_warp == pytest.approx(128.0) and k.bandwidth_level == "DRAM"


def test_bandwidth_bound_mwp_agrees_with_the_dram_floor() -> None:
    # MD 8: N = 16, #Rep = 2.5, MWP = MWP_peak_BW = 13.199 < CWP = 16 -> memory bound:
    # Exec = (1600 x 16 / 13.199 + 10 x 12.199) x 2.5 = 5153.8 cycles = 3.681 us; its memory part,
    # 1600 x 16 / 13.199 x 2.5 = 4849 cycles = 3.463 us, is exactly the DRAM floor (bytes / bandwidth).
    k = kernel_time(GTX480, SHAPE, TRAFFIC, 8)
    w = k.mwp
    assert w.case == MEMORY_BOUND and w.mwp_limiter == "bandwidth" and w.mwp == pytest.approx(13.199, abs=1e-3)
    assert w.exec_cycles_app == pytest.approx(5153.8, abs=0.5)
    memory_part = w.mem_cycles * w.n / w.mwp * w.rep / 1.4e9
    assert memory_part == pytest.approx(k.dram_floor_s, rel=1e-9)
    assert k.time_s == pytest.approx(3.681e-6, rel=1e-3) and k.time_s >= k.dram_floor_s


def test_the_binding_floor_is_the_time() -> None:
    # 100x the DRAM traffic (12.8 KB per memory instruction) with the same latency: MWP_peak_BW =
    # 88.7 / (1.4 x 12800 / 400 x 15) = 0.13 is held at 1 (a warp's own request is in flight), so
    # MWP/CWP says (1600 x 16 / 1) x 2.5 = 64000 cycles = 45.7 us while the bytes need 346 us:
    # the DRAM floor is the time.
    k = kernel_time(GTX480, SHAPE, Traffic(400.0, 96000.0, 0.0), 8)
    assert k.mwp.mwp == 1 and k.mwp_s == pytest.approx(64000 / 1.4e9)
    assert k.bound == DRAM_BOUND and k.time_s == k.dram_floor_s == pytest.approx(30720000 / 88.7e9)
    # On a V100 (L2 2800 GB/s, DRAM 900 GB/s): L2 traffic 4x above DRAM's 3.1x bandwidth ratio binds L2.
    v100 = load_arch("v100")
    k = kernel_time(v100, SHAPE, Traffic(400.0, 960.0, 4 * 3840.0), 8)
    assert k.l2_bytes == 4 * 3840 * 32 * 10 and k.l2_floor_s == pytest.approx(k.l2_bytes / 2800e9)
    assert k.l2_floor_s > k.dram_floor_s and k.bandwidth_level == "L2"
    assert k.load_bytes_per_warp == pytest.approx(k.l2_bytes / 2400)


def test_paper002_table4_vector_addition() -> None:
    """Yen14 Table 4: vector addition (320 CTAs of 2 warps; 2 loads and a store per thread;
    caches off) at MD 1..7 CTAs takes normalised cycles 1, 0.51, 0.34, 0.26, 0.21, 0.18, 0.15 with a
    flat DRAM latency of 264..271 cycles: the timing model gives the same ~1/MD curve. Table 4's
    absolute 197157 cycles at MD 1 (616 per CTA) say one CTA ran at a time on one SM: sm_count 1,
    whose whole DRAM bandwidth share gives a 128 B request every 128 / (88.7 / 1.4) = 2.0 cycles."""
    one_sm = GTX480.with_overrides({"sm_count": "1", "departure_del_coal": "2.0"})
    shape = KernelShape(threads_per_cta=64, grid_ctas=320, snapshot_ctas=320, snapshot_warps=640, coal_mem_insts=3.0,
                        uncoal_mem_insts=0.0, uncoal_per_mw=1.0, cta_insts=np.full(320, 38))   # the vecadd demo's 38
    latency = [264, 269, 267, 269, 268, 271, 270]
    dram = (1280 + 640) * 128 / 32            # Table 4's 1280 line reads and the 640 stored lines, in 32 B
    timing = predict_timing(one_sm, shape, [Traffic(lat, dram, 0.0) for lat in latency])
    norm = [timing.time(md).time_s / timing.time(1).time_s for md in range(1, 8)]
    assert norm == pytest.approx([1, 0.51, 0.34, 0.26, 0.21, 0.18, 0.15], abs=0.02)
    # By hand at MD 1: N = 2 = MWP = CWP, not enough warps: Mem_cycles 3 x 264 = 792, Comp 19
    # (1-cycle issue), Comp_p 19 / 3; Exec = (792 + 19 + 19 / 3 x (2 - 1)) x 320 CTAs in turn
    # = 261547 cycles, 1.33x Table 4's 197157 (MWP/CWP serialises a warp's three accesses).
    assert timing.time(1).mwp.exec_cycles_app == pytest.approx((792 + 19 + 19 / 3) * 320)
    assert timing.best_md == 7


def test_gain_range_spans_the_uncertain_constants() -> None:
    # Identical trials: the bootstrap adds nothing, the range is the gain's extremes over the 3 x 3
    # settings of the departure delays and the L2 bandwidth.
    v100 = load_arch("v100")
    shape = KernelShape(threads_per_cta=256, grid_ctas=800, snapshot_ctas=80, snapshot_warps=640, coal_mem_insts=2.0,
                        uncoal_mem_insts=6.0, uncoal_per_mw=16.0, cta_insts=np.full(800, 2400))
    rows = {1: [250.0, 4000.0, 60000.0], 2: [420.0, 9000.0, 70000.0]}
    tables = [np.array([rows[m]] * 6) for m in (1, 2)]
    lo, hi = gain_range(v100, shape, tables, 1, 2)
    gains = []
    for dep in (DEPARTURE_RANGE[0], 1.0, DEPARTURE_RANGE[1]):
        for l2 in (L2_BANDWIDTH_RANGE[0], 1.0, L2_BANDWIDTH_RANGE[1]):
            c = constants(v100, dep, l2)
            t1 = kernel_time(v100, shape, Traffic(*rows[1]), 1, c).time_s
            t2 = kernel_time(v100, shape, Traffic(*rows[2]), 2, c).time_s
            gains.append(t2 / t1 - 1)
    assert lo == pytest.approx(min(gains)) and hi == pytest.approx(max(gains))
    nominal = predict_timing(v100, shape, [mean_traffic(t) for t in tables]).gain(1, 2)
    assert lo <= nominal <= hi and hi > lo
    # Trial spread widens it: MD 1's Mem_LD varying +-20% between trials.
    noisy = [tables[0] * np.array([[0.8, 1, 1], [1.2, 1, 1]] * 3), tables[1]]
    nlo, nhi = gain_range(v100, shape, noisy, 1, 2)
    assert nlo < lo and nhi > hi


def test_l2_less_arch_has_no_l2_floor() -> None:
    assert constants(GTX480).l2_gbs == 0.0
    k = kernel_time(GTX480, SHAPE, Traffic(400.0, 960.0, 1e9), 4)
    assert k.l2_bytes == 0 and k.l2_floor_s == 0 and k.bound != L2_BOUND


def test_paired_trials_narrow_the_gain_when_the_mds_share_their_randomness() -> None:
    # Trial i of every MD runs with the same seed, so MDs' latencies move together: resampled in
    # pairs their gain is much surer than with the pairs broken (as if the MDs' seeds differed).
    from tuiprof.model.timing import paired_gain_interval, paired_resample, trial_times

    rng = np.random.default_rng(3)
    shared = rng.normal(0, 60, 16)  # what the seed does to both MDs
    tab = {m: np.column_stack([400 + 20 * m + shared + rng.normal(0, 5, 16), np.full(16, 960.0), np.zeros(16)])
           for m in (1, 2)}
    ia, ib = paired_resample(np.random.default_rng(0), 16, 10)
    assert np.array_equal(ia[:10], ib) and len(ia) == 16 and ia[10:].min() >= 10
    tables = [tab[1], tab[2]]
    lo, hi = gain_range(GTX480, SHAPE, tables, 1, 2)
    broken = [tab[1], tab[2][np.random.default_rng(1).permutation(16)]]
    lo_b, hi_b = gain_range(GTX480, SHAPE, broken, 1, 2)
    assert hi - lo < 0.5 * (hi_b - lo_b)
    t1, t2 = trial_times(GTX480, SHAPE, tab[1], 1), trial_times(GTX480, SHAPE, tab[2], 2)
    p_lo, p_hi = paired_gain_interval(t1, t2)
    assert p_lo < float(np.mean(t2 / t1 - 1)) < p_hi and p_hi - p_lo < 0.5 * np.ptp(t2 / t1)
    assert paired_gain_interval(t1[:1], t2[:1]) == (-np.inf, np.inf)


def test_paired_gain_interval_is_students_t_on_the_pairs() -> None:
    # 41 pairs (40 df: t = 2.021 in a printed table, past the old table's 1.96 fallback) and 5 (t = 2.776).
    from tuiprof.model.timing import paired_gain_interval

    rng = np.random.default_rng(11)
    for n, t in ((41, 2.021), (5, 2.776)):
        t_md = rng.uniform(1e-3, 2e-3, n)
        t_over = t_md * rng.normal(0.9, 0.05, n)
        g = t_over / t_md - 1.0
        half = t * float(np.std(g, ddof=1)) / np.sqrt(n)
        lo, hi = paired_gain_interval(t_md, t_over)
        assert lo == pytest.approx(float(np.mean(g)) - half, abs=5e-4 * half)
        assert hi == pytest.approx(float(np.mean(g)) + half, abs=5e-4 * half)
