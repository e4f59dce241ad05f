"""The decision models wired into a run: the MD sweep through the simulator (the timing model and
Yen14's thesis rules), the inputs the trace and the trials give the timing model (MWP/CWP,
HongKim09), the bottleneck (Zhang11) and SM utilisation (Farooqui11), and their report sections."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.support.decision_runs import LINE, ONE_SM, THIN, run, thrash_trace
from tests.support.factories import make_trace
from tuiprof.arch.presets import load_arch
from tuiprof.model.decisions import (
    DRAM_TX,
    L2_SECTORS,
    MEM_LD,
    coalescing_split,
    md_sample,
    sm_model,
    trial_table,
    working_set_lines,
)
from tuiprof.model.latency import memory_latency
from tuiprof.model.mwp_cwp import MEMORY_BOUND
from tuiprof.model.timing import ISSUE_BOUND, TIMING
from tuiprof.report import decisions_section
from tuiprof.session import Finished, RunConfig, SweepProgress
from tuiprof.sim.prepared import prepare


def test_working_set_is_distinct_lines_per_cta() -> None:
    lane = np.arange(32, dtype=np.uint64) * 4
    # CTA 0 touches lines 0 and 1 (line 0 twice); CTA 1 touches lines 1, 2, 3: (2 + 3) / 2.
    rows = [0 * LINE + lane, 1 * LINE + lane, 0 * LINE + lane, 1 * LINE + lane, 2 * LINE + lane, 3 * LINE + lane]
    t = make_trace(rows, warps=[0, 0, 0, 1, 1, 1], n_ctas=2)
    co = prepare(t, load_arch("tesla-c2050")).coalesced
    assert working_set_lines(t, co.req_off, co.request_lines()) == pytest.approx(2.5)


def test_coalescing_split_by_hand() -> None:
    arch = load_arch("tesla-c2050")
    lane = np.arange(32, dtype=np.uint64)
    # op 0: stride 4 B, one 128 B line per warp access (coalesced); op 1: stride 128 B, 32 lines.
    rows = [lane * 4, lane * 128, lane * 4, lane * 128]
    t = make_trace(rows, ops=[0, 1, 0, 1], warps=[0, 0, 1, 1], n_ctas=2, block=32)
    prep = prepare(t, arch)
    stats = prep.op_stats()
    coal, uncoal, per_mw, load_bytes = coalescing_split(t, arch, stats.accesses, stats.requests_per_access)
    assert (coal, uncoal, per_mw, load_bytes) == (1.0, 1.0, 32.0, 128.0)


def test_md_sample_from_trials() -> None:
    """Yen14's per-MD inputs from a trial table made by hand (before, this test ran with the
    sweep off and checked only that there was no sample at all): the miss rate and DRAM reads per
    CTA averaged over trials, Tm over the trials that have one, the snapshot's CTAs and warp
    instructions."""
    t = thrash_trace(ctas=4, lines=8, passes=2, insts=100)
    table = np.array([[0.25, 10.0, 400.0, 0, 0, 0, 0.5],
                      [0.75, 30.0, np.nan, 0, 0, 0, np.nan],
                      [0.50, 20.0, 500.0, 0, 0, 0, 0.7]])
    s = md_sample(3, table, t)
    assert (s.md, s.miss_rate, s.dram_reads_per_cta, s.mf_latency) == (3, 0.5, 20.0, 450.0)
    assert s.l2_hit_rate == pytest.approx(0.6)            # over the trials that read the L2
    assert (s.cta_count, s.warp_insts) == (4, 400.0)
    empty = md_sample(1, np.zeros((0, 7)), t)
    assert (empty.miss_rate, empty.dram_reads_per_cta, empty.mf_latency) == (0.0, 0.0, 0.0)
    analysis, _ = run(t, sweep=False, trials=2)
    assert analysis.decisions.md is None and analysis.decisions.md_note == "MD sweep not run"


def test_sm_model_without_records_repeats_the_snapshot_over_the_grid() -> None:
    lane = np.arange(32, dtype=np.uint64) * 4
    # 2 snapshot CTAs (3 and 1 accesses), grid of 4: costs 3, 1, 3, 1 on 2 SMs with MD 1.
    t = make_trace([lane] * 4, warps=[0, 0, 0, 1], n_ctas=2)
    t = type(t)(**{**t.__dict__, "launch": type(t.launch)(**{**t.launch.__dict__, "grid": (4, 1, 1)})})
    u = sm_model(t, load_arch("tesla-c2050").with_overrides({"sm_count": "2"}), md=1)
    assert u.source == "modeled"
    assert list(u.ctas) == [2, 2]
    assert u.imbalance == pytest.approx(1.0)


def test_sweep_streams_every_md_and_recommends_below_the_thrashing_point() -> None:
    """Yen14's motivating case on its GTX480 (no L2, Table 8): 64 reused lines per CTA, a
    128-line L1 (32 sets x 4 ways x 128 B, two lines of a CTA per set): two CTAs fit, three
    evict each other's lines (LRU, cyclic) before their reuse. With a thin DRAM share, MD 8's 4x
    DRAM traffic binds (128 B per access at 1.97 / 1.4 = 1.4 B per cycle: ~90 cycles per access,
    against MD 2's Mem_LD ~100 cycles over 2 warps, ~50): the timing model limits the MD."""
    analysis, events = run(thrash_trace(), overrides=THIN)
    d = analysis.decisions
    sweep = [e for e in events if isinstance(e, SweepProgress)]
    assert isinstance(events[-1], Finished)
    assert {e.md for e in sweep} == set(range(1, 8))           # MD 8 is the main run itself
    assert sweep[0].mds == tuple(range(1, 9))
    assert [s.md for s in d.md_samples] == list(range(1, 9))
    first = d.md_samples[0].dram_reads_per_cta          # only the first pass misses
    # MD 2's two CTAs fit, but warps run at different rates (`tuiprof.sim.schedule`): a fast
    # CTA's lines, fresh when it finishes, can outlive a slow one's under LRU. MD 3 thrashes.
    assert first <= d.md_samples[1].dram_reads_per_cta < 1.3 * first
    assert d.md_samples[2].dram_reads_per_cta > 3 * first
    # Every pass misses: 4 passes x 64 lines x 4 DRAM transactions of 32 B.
    assert d.md_samples[-1].dram_reads_per_cta == pytest.approx(4 * 64 * 4, rel=0.05)
    # 1 miss in 4 passes, plus the few the random alignment point adds (Baghsorkhi12 3.2.1: an SM
    # may start inside a CTA, whose head then runs last, after other CTAs evicted its lines).
    assert 0.25 <= d.md_samples[0].miss_rate < 0.3
    m = d.md
    assert m.default_md == 8 and m.timing is not None and m.headline == TIMING
    t2, t8 = m.timing.time(2), m.timing.time(8)
    assert t8.mwp.mem_l_coal > 2 * t2.mwp.mem_l_coal and t8.dram_bytes > 3 * t2.dram_bytes
    assert t8.dram_floor_s > t2.time_s                   # MD 8's bytes alone take longer than MD 2
    assert m.recommended_md == 2 and m.gain > 0.3
    assert m.gain == pytest.approx(t8.time_s / t2.time_s - 1)
    assert m.dynamic_shared and m.dynamic_shared > 0
    assert "limit to 2 CTAs/SM" in m.advice


def test_latency_hiding_outweighs_lost_reuse_without_bandwidth_pressure() -> None:
    """The same kernel with the SM's full share: MD 8's misses (Mem_LD ~300 over 8 warps, ~38 cycles
    per access) beat MD 2's hits (~100 over 2 warps, ~50) and its DRAM traffic fits the share (128 B
    at 4.2 B per cycle, 30 cycles): keep MD 8. The thesis rules, which model no latency hiding, pick
    MD 2: the decision says it is low confidence."""
    analysis, _ = run(thrash_trace())
    m = analysis.decisions.md
    assert m.recommended_md == m.default_md == 8 and m.gain == 0
    assert m.thesis_md == 2 and m.thesis_gain > 1.0 and m.low_confidence
    assert "low confidence" in m.advice


def test_compute_bound_kernel_keeps_the_maximum() -> None:
    """10^6 warp instructions per one-warp CTA: compute dominates, both the thesis' test (DRAM reads
    per warp instruction far below 0.05) and the timing model keep MD 8: from MD 2 on, the 16 CTAs'
    16 x 10^6 instructions at one per cycle (11.4 ms at 1.4 GHz) bound every MD, even with the thin
    DRAM share; MD 1 (one warp) adds its memory waits."""
    analysis, _ = run(thrash_trace(insts=10**6), overrides=THIN)
    m = analysis.decisions.md
    assert m.thesis.compute_bound and m.thesis_md == 8
    for k in m.timing.times[1:]:
        assert k.bound == ISSUE_BOUND and k.time_s == pytest.approx(16e6 / 1.4e9)
    assert m.recommended_md == m.default_md == 8 and not m.low_confidence


def test_no_l1_arch_has_no_md_decision() -> None:
    t = thrash_trace(ctas=4, lines=8, passes=2)
    analysis, _ = run(t, arch="gtx285", trials=2)
    assert analysis.decisions.md is None
    assert "no L1" in analysis.decisions.md_note


def test_decisions_report_sections() -> None:
    analysis, _ = run(thrash_trace(), overrides=THIN)
    sec = json.loads(json.dumps(decisions_section(analysis.decisions)))
    assert sec["md"]["recommended_md"] == analysis.decisions.md.recommended_md
    assert [r["md"] for r in sec["md"]["rows"]] == list(range(1, 9))
    assert all(r["simulated"] is not None for r in sec["md"]["rows"])
    # 8 CTAs of one warp: N = 8 warps; nearly every access misses and moves 128 B from DRAM (a few
    # hit while a delayed CTA has not joined yet and fewer CTAs share the L1), so MWP is
    # MWP_peak_BW = 1.97 / (1.4 x 128 / Mem_L) (HongKim09) < N: memory bound, limited by bandwidth.
    w, t = sec["mwp_cwp"], sec["timing"]
    assert w["n"] == 8 and w["case"] == MEMORY_BOUND and w["mwp_limiter"] == "bandwidth"
    assert t["bandwidth_level"] == "DRAM" and t["load_bytes_per_warp"] == pytest.approx(128, rel=0.05)
    assert w["mwp"] == pytest.approx(1.97 / (1.4 * t["load_bytes_per_warp"] / w["mem_l"]), rel=1e-3)
    assert t["dram_floor_s"] == pytest.approx(sec["bottleneck"]["times_s"]["global memory"], rel=1e-6)
    b = sec["bottleneck"]
    # Global memory time = DRAM bytes (all reads here: 32 B transactions) over the bandwidth.
    reads = analysis.decisions.md_samples[-1].dram_reads_per_cta * 16
    gbs = b["throughputs"]["global_gbs"]
    assert b["times_s"]["global memory"] == pytest.approx(reads * 32 / (gbs * 1e9), rel=1e-3)
    assert b["times_s"]["shared memory"] == 0
    assert b["bottleneck"] == max(b["times_s"], key=b["times_s"].get)
    assert sec["sm_utilisation"]["source"] == "modeled"
    assert sec["advice"][0].startswith("limit to")


def test_gain_range_brackets_the_gain() -> None:
    analysis, _ = run(thrash_trace(), overrides=THIN)
    m = analysis.decisions.md
    assert m.gain_range is not None
    assert m.gain_range[0] <= m.gain <= m.gain_range[1] and m.gain_range[0] > 0
    assert m.gain_label.startswith(f"{m.gain:+.0%} [")


def test_trial_table_by_hand() -> None:
    """Per trial: the thesis' inputs and the timing model's, from the counters: 4 one-warp CTAs each
    read 8 lines once, twice over: the first pass misses (8 lines x 4 sectors... on gtx480, 128 B
    unsectored L1 lines and no L2), the second hits."""
    t = thrash_trace(ctas=4, lines=8, passes=2)
    analysis, _ = run(t, sweep=False, trials=3)
    arch = load_arch("gtx480").with_overrides(ONE_SM)
    from tuiprof.session import Session
    s = Session(t, RunConfig(arch="gtx480", overrides=ONE_SM, trials=3, seed=1, threads=2, sweep=False))
    results = []
    s.run(lambda e: results.append(e.result) if hasattr(e, "result") and hasattr(e.result, "l1_read_hits") else None)
    table = trial_table(sorted(results, key=lambda r: r.index), t, arch, s._op_stats.accesses)
    assert table.shape == (3, 7)
    for row, r in zip(table, sorted(results, key=lambda r: r.index)):
        assert row[DRAM_TX] == np.sum(r.dram_reads) + np.sum(r.dram_writes) + r.dram_writebacks + r.dram_writebacks_owed
        assert row[L2_SECTORS] == np.sum(r.l2_read_accesses) + np.sum(r.l2_write_accesses)
    # Mem_LD is the access-weighted X of the loads: one op here, so its X in each trial.
    x = np.array([analysis.samples["op0.x"]]).T
    assert memory_latency(x.T.reshape(-1, 1), t.ops, np.array([64.0]))[0] == pytest.approx(x[0, 0])
    assert table[:, MEM_LD] == pytest.approx(analysis.samples["op0.x"])


def test_bottleneck_and_timing_model_agree_on_the_same_run() -> None:
    """Zhang11's global memory time and the timing model's DRAM floor are the same bytes over the
    same bandwidth, and the timing model's kernel time is never below the bottleneck's."""
    analysis, _ = run(thrash_trace(), sweep=False)
    d = analysis.decisions
    assert d.time.dram_floor_s == pytest.approx(d.bottleneck.times["global memory"], rel=1e-12)
    assert d.time.time_s >= d.bottleneck.time * (1 - 1e-12)
    assert d.mwp is d.time.mwp


def test_dram_reads_per_cta_by_hand_with_an_l2() -> None:
    """The MD table's "sim DRAM/CTA" in its unit at every MD (issue 27 asked whether a 10x jump
    from MD 1 to MD 2 on spmv-u was a units defect: it is the L2 read hit ratio falling, 90% to
    46%, as more warps share the L2). By hand: 8 one-warp CTAs each read their own 16 lines of
    128 B twice on one Tesla C2050 SM; the 768 KiB L2 holds all 128 lines, so only first touches
    miss it: 16 lines x 4 DRAM transactions of 32 B = 64 reads per CTA at every MD, whatever the
    L1 keeps; and it is the L2's read misses over the snapshot's CTAs. The L2 sees 4 sectors per
    L1 line miss (32 reads per CTA x the miss rate), 64 of them first touches: its hit ratio is
    1 - 0.5 / miss rate (0 at MD 1, where the L1 keeps the second pass)."""
    t = thrash_trace(ctas=8, lines=16, passes=2)
    analysis, _ = run(t, arch="tesla-c2050", overrides={"sm_count": "1"}, trials=2, sweep_trials=2)
    samples = analysis.decisions.md_samples
    assert [s.md for s in samples] == list(range(1, 9))
    for s in samples:
        assert s.dram_reads_per_cta == 64
        assert s.l2_hit_rate == pytest.approx(1 - 0.5 / s.miss_rate, abs=0.02)
    assert samples[0].miss_rate == 0.5 and samples[0].l2_hit_rate == 0
    rows = decisions_section(analysis.decisions)["md"]["rows"]
    assert all(r["simulated"]["dram_reads_per_cta"] == 64 for r in rows)
    assert [r["simulated"]["l2_read_hit_ratio"] for r in rows] == [pytest.approx(s.l2_hit_rate, abs=1e-4) for s in samples]
