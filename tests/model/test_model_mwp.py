"""The MWP/CWP model of Hong & Kim (HongKim09's slides) on inputs worked by hand."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuiprof.arch import load_arch
from tuiprof.model.mwp_cwp import (
    COMPUTE_BOUND,
    INSTS_PER_MEM_INST,
    MEMORY_BOUND,
    NOT_ENOUGH_WARPS,
    dram_bandwidth_gbs,
    insts_per_warp,
    mwp_cwp,
    mwp_cwp_for_arch,
)

# A machine for hand arithmetic: 1 GHz, 10 active SMs, 128 B per warp load, 100 blocks.
BASE = dict(freq_ghz=1.0, active_sms=10, blocks=100, load_bytes_per_warp=128.0, issue_cycles=4.0,
            departure_del_coal=4.0, departure_del_uncoal=10.0, uncoal_per_mw=1.0)


def test_memory_bound_case_by_hand() -> None:
    # N = 16 warps (2 blocks of 256 threads), 4 coalesced memory insts and 40 insts per warp,
    # Mem_LD = 400, 32 GB/s.
    # Mem_L = Mem_L_Coal = 400; Departure_delay = 4; MWP_Without_BW_full = 400 / 4 = 100
    # BW_per_warp = 1 GHz x 128 B / 400 = 0.32 GB/s; MWP_peak_BW = 32 / (0.32 x 10) = 10
    # MWP = MIN(100, 10, 16) = 10 (bandwidth)
    # Mem_cycles = 400 x 4 = 1600; Comp_cycles = 4 x 40 = 160; CWP_full = 1760 / 160 = 11; CWP = 11
    # CWP >= MWP: Exec = (1600 x 16 / 10 + 160 / 4 x (10 - 1)) x #Rep, #Rep = 100 / (2 x 10) = 5
    #             = (2560 + 360) x 5 = 14600
    # CPI = 14600 / (40 x 256 / 32 x 100 / 10) = 14600 / 3200 = 4.5625
    r = mwp_cwp(warps_per_sm=16, coal_mem_insts=4, uncoal_mem_insts=0, total_insts=40, mem_ld=400,
                mem_bandwidth_gbs=32.0, threads_per_block=256, **BASE)
    assert (r.mem_l, r.departure_delay, r.mwp_without_bw_full) == (400, 4, 100)
    assert r.bw_per_warp == pytest.approx(0.32) and r.mwp_peak_bw == pytest.approx(10.0)
    assert r.mwp == pytest.approx(10.0) and r.mwp_limiter == "bandwidth"
    assert (r.mem_cycles, r.comp_cycles, r.cwp_full, r.cwp, r.comp_p, r.rep) == (1600, 160, 11, 11, 40, 5)
    assert r.case == MEMORY_BOUND
    assert r.exec_cycles_app == pytest.approx(14600.0)
    assert r.cpi == pytest.approx(4.5625)


def test_computation_bound_case_by_hand() -> None:
    # Same, 300 insts per warp and ample bandwidth (1000 GB/s):
    # MWP_peak_BW = 1000 / 3.2 = 312.5; MWP = MIN(100, 312.5, 16) = 16 (the warps)
    # Comp_cycles = 1200 <= Mem_cycles = 1600; CWP_full = 2800 / 1200 = 2.333; CWP = 2.333
    # MWP > CWP: Exec = (Mem_L + Comp_cycles x N) x #Rep = (400 + 1200 x 16) x 5 = 98000
    # CPI = 98000 / (300 x 8 x 10) = 4.0833
    r = mwp_cwp(warps_per_sm=16, coal_mem_insts=4, uncoal_mem_insts=0, total_insts=300, mem_ld=400,
                mem_bandwidth_gbs=1000.0, threads_per_block=256, **BASE)
    assert r.mwp == 16 and r.mwp_limiter == "warps"
    assert r.cwp == pytest.approx(2800 / 1200)
    assert r.case == COMPUTE_BOUND
    assert r.exec_cycles_app == pytest.approx(98000.0)
    assert r.cpi == pytest.approx(98000 / 24000)


def test_not_enough_warps_case_by_hand() -> None:
    # N = 2 (one block of 64 threads per SM), otherwise the memory-bound inputs:
    # MWP = MIN(100, 10, 2) = 2 = N; CWP = MIN(11, 2) = 2 = N: not enough warps.
    # #Rep = 100 / (1 x 10) = 10
    # Exec = (Mem_cycles + Comp_cycles + Comp_cycles / #Mem_insts x (MWP - 1)) x #Rep
    #      = (1600 + 160 + 40 x 1) x 10 = 18000;  CPI = 18000 / (40 x 2 x 10) = 22.5
    r = mwp_cwp(warps_per_sm=2, coal_mem_insts=4, uncoal_mem_insts=0, total_insts=40, mem_ld=400,
                mem_bandwidth_gbs=32.0, threads_per_block=64, **BASE)
    assert (r.mwp, r.cwp, r.rep) == (2, 2, 10)
    assert r.case == NOT_ENOUGH_WARPS and r.mwp_limiter == "warps"
    assert r.exec_cycles_app == pytest.approx(18000.0)
    assert r.cpi == pytest.approx(22.5)


def test_uncoalesced_latency_and_departure_by_hand() -> None:
    # 1 coalesced + 3 uncoalesced insts of 4 transactions each; Mem_LD = 400, delays 4 / 10:
    # Mem_L_Uncoal = 400 + (4 - 1) x 10 = 430; Mem_L_Coal = 400; weights 3/4 and 1/4
    # Mem_L = 430 x 0.75 + 400 x 0.25 = 422.5
    # Departure_delay = (10 x 4) x 0.75 + 4 x 0.25 = 31; MWP_Without_BW_full = 422.5 / 31 = 13.629
    # Mem_cycles = 430 x 3 + 400 x 1 = 1690
    r = mwp_cwp(warps_per_sm=32, coal_mem_insts=1, uncoal_mem_insts=3, total_insts=40, mem_ld=400,
                mem_bandwidth_gbs=1e6, threads_per_block=256,
                **{**BASE, "uncoal_per_mw": 4.0})
    assert (r.mem_l_uncoal, r.mem_l_coal, r.weight_uncoal, r.weight_coal) == (430, 400, 0.75, 0.25)
    assert r.mem_l == pytest.approx(422.5) and r.departure_delay == pytest.approx(31.0)
    assert r.mwp_without_bw_full == pytest.approx(422.5 / 31) and r.mwp_without_bw == pytest.approx(422.5 / 31)
    assert r.mwp == pytest.approx(422.5 / 31) and r.mwp_limiter == "latency"
    assert r.mem_cycles == pytest.approx(1690.0)


# --- Case boundaries ---------------------------------------------------------------------------

LAT_BOUND = dict(BASE, departure_del_coal=45.0)   # MWP = Mem_L / 45 = 450 / 45 = 10 (latency)


def _at(total_insts: float, n: float = 16) -> object:
    return mwp_cwp(warps_per_sm=n, coal_mem_insts=4, uncoal_mem_insts=0, total_insts=total_insts,
                   mem_ld=450, mem_bandwidth_gbs=1e6, threads_per_block=256, **LAT_BOUND)


def test_boundary_mwp_equals_cwp_is_memory_bound() -> None:
    # Mem_cycles = 450 x 4 = 1800; 50 insts -> Comp_cycles = 200; CWP_full = 2000 / 200 = 10 = MWP.
    # CWP >= MWP holds with equality: memory bound, Exec = (1800 x 16 / 10 + 50 x 9) x 5 = 16650.
    r = _at(50)
    assert r.mwp == 10 and r.cwp == 10 and r.case == MEMORY_BOUND
    assert r.exec_cycles_app == pytest.approx(16650.0)
    # Slightly more computation: CWP = 2002 / 202 = 9.91 < MWP = 10, Comp 202 <= Mem 1800:
    # computation bound, Exec = (450 + 202 x 16) x 5 = 18410.
    r2 = _at(50.5)
    assert r2.cwp < r2.mwp and r2.case == COMPUTE_BOUND
    assert r2.exec_cycles_app == pytest.approx(18410.0)


def test_boundary_not_enough_warps_needs_both_at_n() -> None:
    # N = 10 = MWP (latency bound 10 too) and CWP = MIN(10, 10) = 10: not enough warps.
    assert _at(50, n=10).case == NOT_ENOUGH_WARPS
    # N = 8: MWP = 8 = N but CWP = MIN(2000 / 200 = 10, 8) = 8 = N as well: not enough warps;
    # with 400 insts, CWP_full = 3400 / 1600 = 2.125 < N: MWP = N alone is not case 3; Comp 1600 <=
    # Mem 1800 and MWP 8 > CWP: computation bound.
    assert _at(50, n=8).case == NOT_ENOUGH_WARPS
    r = _at(400, n=8)
    assert r.mwp == 8 and r.cwp == pytest.approx(2.125) and r.case == COMPUTE_BOUND


def test_boundary_comp_over_mem_takes_the_memory_formula() -> None:
    # The slides' last rule routes Comp_cycles > Mem_cycles to the CWP >= MWP formula even when
    # MWP > CWP: 500 insts -> Comp 2000 > Mem 1800, CWP = 3800 / 2000 = 1.9 < MWP = 10.
    # Exec = (1800 x 16 / 10 + 2000 / 4 x 9) x 5 = (2880 + 4500) x 5 = 36900.
    r = _at(500)
    assert r.cwp < r.mwp and r.comp_cycles > r.mem_cycles
    assert r.case == MEMORY_BOUND and r.exec_cycles_app == pytest.approx(36900.0)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 64), coal=st.one_of(st.just(0.0), st.floats(0.01, 50)),
       uncoal=st.one_of(st.just(0.0), st.floats(0.01, 50)), insts=st.floats(1, 5000),
       mem_ld=st.floats(1, 2000), per_mw=st.floats(1, 32), bw=st.floats(0.1, 5000),
       sms=st.integers(1, 132))
def test_mwp_and_cwp_never_exceed_n(n: int, coal: float, uncoal: float, insts: float, mem_ld: float,
                                    per_mw: float, bw: float, sms: int) -> None:
    r = mwp_cwp(warps_per_sm=n, coal_mem_insts=coal, uncoal_mem_insts=uncoal, total_insts=insts,
                mem_ld=mem_ld, uncoal_per_mw=per_mw, freq_ghz=1.4, mem_bandwidth_gbs=bw,
                active_sms=sms, blocks=1000, threads_per_block=32)
    assert 1 <= r.mwp <= n and r.mwp_without_bw <= n
    assert r.mwp == max(1.0, min(r.mwp_without_bw, r.mwp_peak_bw))
    assert r.cwp <= n
    assert r.exec_cycles_app > 0 and math.isfinite(r.cpi)


def test_occupancy_helps_only_until_mwp_saturates() -> None:
    # The slides' "Increasing occupancy vs. MWP": 600 one-warp blocks on 30 SMs, Mem_L = 400,
    # 4 coalesced loads and 40 insts per warp; 76.8 GB/s caps MWP at 76.8 / (0.32 x 30) = 8.
    # N <= 8 (case 3): Exec = (1760 + 40 (N - 1)) x 20 / N: 35200 at N = 1, 5100 at N = 8 (6.9x).
    # N > 8 (MWP = 8): the memory term Mem_cycles x N / MWP x #Rep = 1600 x N / 8 x 20 / N = 4000 is
    # constant; only Comp_p (MWP - 1) x #Rep = 5600 / N shrinks: 4622 at N = 9, 4175 at N = 32.
    def exec_at(n: int) -> float:
        r = mwp_cwp(warps_per_sm=n, coal_mem_insts=4, uncoal_mem_insts=0, total_insts=40, mem_ld=400,
                    mem_bandwidth_gbs=76.8, threads_per_block=32, **{**BASE, "active_sms": 30, "blocks": 600})
        assert r.mwp == pytest.approx(min(n, 8))
        return r.exec_cycles_app

    t = {n: exec_at(n) for n in range(1, 33)}
    assert t[1] == pytest.approx(35200) and t[8] == pytest.approx(5100)
    assert t[9] == pytest.approx(4000 + 5600 / 9) and t[32] == pytest.approx(4175)
    assert all(t[n + 1] < t[n] for n in range(1, 8))
    assert t[1] / t[8] > 6.5                          # up to saturation: ~linear gains
    assert t[9] / t[32] < 1.11                        # past it: 3.6x the warps, < 11% faster


def test_for_arch_and_instruction_source() -> None:
    gtx480 = load_arch("gtx480")
    # The explicit, sourced figure (Yen14 Table 8: 12 x 8 B x 924 MHz = 88.7 GB/s), not the
    # DRAM model's 12 channels x 32 B / 6 cycles x 1.4 GHz = 89.6 GB/s.
    assert dram_bandwidth_gbs(gtx480) == pytest.approx(88.7)
    # Measured per-CTA dynamic warp instructions: mean 1200 over 6 warps = 200 per warp.
    assert insts_per_warp([1000, 1400], 6, 10) == (200.0, "measured")
    assert insts_per_warp(None, 6, 10) == (pytest.approx(10 * INSTS_PER_MEM_INST), "estimated")
    r = mwp_cwp_for_arch(gtx480, ctas_per_sm=8, threads_per_block=192, blocks=480, coal_mem_insts=10,
                         uncoal_mem_insts=0, uncoal_per_mw=1, mem_ld=350, cta_insts=[1200, 1200])
    assert r.n == 48 and r.insts_source == "measured" and r.comp_cycles == 4 * 200
    # 480 blocks / (8 per SM x 15 SMs) = 4 rounds.
    assert r.rep == 4
    assert r.bw_per_warp == pytest.approx(1.4 * 128 / 350)
