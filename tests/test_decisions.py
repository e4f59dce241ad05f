"""The decision models wired into a run: the MD sweep through the simulator (paper 002), the
inputs the trace gives MWP/CWP (paper 004), the bottleneck (paper 001) and SM utilisation
(paper 003), and their report sections."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.factories import make_trace
from tuiprof.arch.presets import load_arch
from tuiprof.model.decisions import coalescing_split, gain_interval, sm_model, working_set_lines
from tuiprof.model.md import MdSample, predict_simulated
from tuiprof.model.mwp_cwp import NOT_ENOUGH_WARPS
from tuiprof.report import decisions_section
from tuiprof.session import Finished, RunConfig, Session, SweepProgress
from tuiprof.sim.prepared import prepare
from tuiprof.trace.model import CtaRecords

LINE = 128
ONE_SM = {"sm_count": "1"}


def thrash_trace(ctas: int = 16, lines: int = 64, passes: int = 4, insts: int | None = None):
    """One warp per CTA; each CTA reads its own `lines` 128 B lines `passes` times, one
    coalesced line per warp access, every access its own bulk sequence (a loop back-edge)."""
    lane = np.arange(32, dtype=np.uint64) * 4
    rows, warps = [], []
    for c in range(ctas):
        base = 0x10000000 + c * lines * LINE
        for _ in range(passes):
            for k in range(lines):
                rows.append(base + k * LINE + lane)
                warps.append(c)
    records = CtaRecords(insts=np.full(ctas, int(insts), dtype=np.int64)) if insts is not None else None
    return make_trace(rows, warps=warps, starts=(True,), n_ctas=ctas, ctas=records)


def run(trace, **config) -> tuple[object, list]:
    events: list = []
    cfg = dict(arch="gtx480", overrides=ONE_SM, trials=8, seed=1, threads=2)
    cfg.update(config)
    analysis = Session(trace, RunConfig(**cfg)).run(events.append)
    return analysis, events


def test_working_set_is_distinct_lines_per_cta() -> None:
    lane = np.arange(32, dtype=np.uint64) * 4
    # CTA 0 touches lines 0 and 1 (line 0 twice); CTA 1 touches lines 1, 2, 3: (2 + 3) / 2.
    rows = [0 * LINE + lane, 1 * LINE + lane, 0 * LINE + lane, 1 * LINE + lane, 2 * LINE + lane, 3 * LINE + lane]
    t = make_trace(rows, warps=[0, 0, 0, 1, 1, 1], n_ctas=2)
    co = prepare(t, load_arch("tesla-c2050")).coalesced
    assert working_set_lines(t, co.req_off, co.req_line) == pytest.approx(2.5)


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
    t = thrash_trace(ctas=4, lines=8, passes=2)
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
    """Paper 002's motivating case on its GTX480 (no L2, Table 8): 64 reused lines per CTA, a
    128-line L1 (32 sets x 4 ways x 128 B, two lines of a CTA per set): two CTAs fit, three
    evict each other's lines (LRU, cyclic) before their reuse."""
    analysis, events = run(thrash_trace())
    d = analysis.decisions
    sweep = [e for e in events if isinstance(e, SweepProgress)]
    assert isinstance(events[-1], Finished)
    assert {e.md for e in sweep} == set(range(1, 8))           # MD 8 is the main run itself
    assert sweep[0].mds == tuple(range(1, 9))
    assert [s.md for s in d.md_samples] == list(range(1, 9))
    first = d.md_samples[0].dram_reads_per_cta          # only the first pass misses
    assert d.md_samples[1].dram_reads_per_cta == pytest.approx(first, rel=0.05)
    assert d.md_samples[-1].dram_reads_per_cta == pytest.approx(4 * first, rel=0.05)   # every pass
    # 1 miss in 4 passes, plus the few the random alignment point adds (paper 000 3.2.1: an SM
    # may start inside a CTA, whose head then runs last, after other CTAs evicted its lines).
    assert 0.25 <= d.md_samples[0].miss_rate < 0.3
    m = d.md
    assert m.default_md == 8 and m.simulated is not None
    assert m.recommended_md in (1, 2) and m.gain > 0.5
    assert m.dynamic_shared and m.dynamic_shared > 0
    assert "limit to" in m.advice


def test_compute_bound_kernel_keeps_the_maximum() -> None:
    analysis, _ = run(thrash_trace(insts=10**6))
    m = analysis.decisions.md
    assert m.headline_prediction.compute_bound
    assert m.recommended_md == m.default_md == 8


def test_no_l1_arch_has_no_md_decision() -> None:
    t = thrash_trace(ctas=4, lines=8, passes=2)
    analysis, _ = run(t, arch="gtx285", trials=2)
    assert analysis.decisions.md is None
    assert "no L1" in analysis.decisions.md_note


def test_decisions_report_sections() -> None:
    analysis, _ = run(thrash_trace())
    sec = json.loads(json.dumps(decisions_section(analysis.decisions)))
    assert sec["md"]["recommended_md"] == analysis.decisions.md.recommended_md
    assert [r["md"] for r in sec["md"]["rows"]] == list(range(1, 9))
    assert all(r["simulated"] is not None for r in sec["md"]["rows"])
    # 8 CTAs of one warp: N = 8 warps, and both MWP and CWP reach N (paper 004, case 1).
    assert sec["mwp_cwp"]["n"] == 8 and sec["mwp_cwp"]["case"] == NOT_ENOUGH_WARPS
    b = sec["bottleneck"]
    # Global memory time = DRAM bytes (all reads here: 32 B transactions) over the bandwidth.
    reads = analysis.decisions.md_samples[-1].dram_reads_per_cta * 16
    gbs = b["throughputs"]["global_gbs"]
    assert b["times_s"]["global memory"] == pytest.approx(reads * 32 / (gbs * 1e9), rel=1e-3)
    assert b["times_s"]["shared memory"] == 0
    assert b["bottleneck"] == max(b["times_s"], key=b["times_s"].get)
    assert sec["sm_utilisation"]["source"] == "modeled"
    assert sec["advice"][0].startswith("limit to")


def test_gain_interval_collapses_without_spread_and_brackets_the_gain() -> None:
    # Identical trials at every MD: every bootstrap round gives the same prediction.
    flat = [np.array([[0.25, 256.0, 300.0]] * 4), np.array([[0.25, 256.0, 300.0]] * 4),
            np.array([[0.9, 1024.0, 300.0]] * 4)]
    point = predict_simulated([MdSample(i + 1, *t[0]) for i, t in enumerate(flat)], 64, 128).gain(2, 3)
    lo, hi = gain_interval(flat, 2, 3, 64, 128)
    assert lo == pytest.approx(point) and hi == pytest.approx(point)
    # Through a run: the recommended MD's interval holds its point gain and stays above zero.
    analysis, _ = run(thrash_trace())
    d = analysis.decisions
    assert d.gain_interval is not None
    assert d.gain_interval[0] <= d.md.gain <= d.gain_interval[1] and d.gain_interval[0] > 0
