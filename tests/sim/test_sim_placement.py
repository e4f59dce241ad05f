"""Where snapshot CTAs run (issue 24, item 5): on the SM a GPU recording measured for each CTA, in
the order that SM ran them, when the trace carries measured SM ids (`tuiprof.sim.prepared.
measured_placement`); the model's ``k mod sm_count`` otherwise. Oracles: hand-computed hits of
CTAs that share lines on one SM's L1, and NumPy counts of the measured SM ids."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from tests.support.factories import make_trace
from tests.support.sim_traces import lanes, small_arch
from tuiprof.sim.prepared import measured_placement, prepare, snapshot_sms
from tuiprof.sim.reference import reference_trial
from tuiprof.sim.trial import run_trial
from tuiprof.trace.data import CtaRecords

X, Y = 0x10000, 0x20000


def two_pairs(sm: list[int] | None, start: list[int] | None = None):
    """Four CTAs of one warp each: CTAs 0 and 1 read line X whole (4 sectors), CTAs 2 and 3 line Y."""
    ctas = CtaRecords(sm=np.array(sm, dtype=np.int64),
                      start=np.array(start, dtype=np.int64) if start is not None else None) if sm else None
    return make_trace([lanes(X), lanes(X), lanes(Y), lanes(Y)], warps=[0, 1, 2, 3], n_ctas=4, ctas=ctas)


def test_ctas_that_share_lines_on_one_sm_hit_in_its_l1() -> None:
    """Hand-computed: with the model's placement on 2 SMs (CTAs 0, 2 on SM 0; 1, 3 on SM 1) each SM
    reads X once and Y once: no L1 hit, and the L2 sees each line twice (4 of 8 read sectors hit
    per line). Measured SMs [1, 1, 0, 0] (a TPC pair each, as the H100 hands them out) put the two
    readers of a line on one SM: 8 of 16 L1 read sectors hit, and the L2 sees each line once (no
    hit). Every trial, at MD 1 and 2, in the product kernel and the reference kernel alike."""
    arch = small_arch(sm_count=2)
    for sm, l1_hits, l2_hits in ((None, 0, 8), ([1, 1, 0, 0], 8, 0)):
        p = prepare(two_pairs(sm), arch)
        for md in (1, 2):
            for seed in (0, 5, 9):
                for r in (run_trial(p, arch, md, seed), reference_trial(p, arch, md, seed)):
                    assert int(r.l1_read_accesses.sum()) == 16
                    assert int(r.l1_read_hits.sum()) == l1_hits, (sm, md, seed)
                    assert int(r.l2_read_hits.sum()) == l2_hits, (sm, md, seed)


def test_each_sm_runs_its_ctas_in_measured_start_order() -> None:
    """Rank on an SM follows the measured start, then the CTA id; prepare numbers CTAs so that
    CTA k runs on SM ``k % sm_count`` in that order."""
    t = two_pairs([0, 1, 0, 0], start=[30, 5, 10, 10])
    sm, rank = measured_placement(t, 2)
    assert sm.tolist() == [0, 1, 0, 0] and rank.tolist() == [2, 0, 0, 1]
    p = prepare(t, small_arch(sm_count=2))
    assert p.warp_cta.tolist() == [4, 1, 0, 2]  # SM + rank * 2: CTA 2 first on SM 0, then 3, then 0
    assert p.sm_requests.tolist() == [3, 1]


def test_the_model_places_ctas_when_the_trace_has_no_or_foreign_sm_ids() -> None:
    """No SM ids, or ids past the arch's SMs (an H100 trace simulated as a smaller GPU): k mod n."""
    arch = small_arch(sm_count=2)
    assert measured_placement(two_pairs(None), 2) is None
    assert measured_placement(two_pairs([0, 1, 2, 3]), 2) is None
    plain = prepare(two_pairs(None), arch)
    foreign = prepare(two_pairs([0, 1, 2, 3]), arch)
    assert foreign.warp_cta.tolist() == plain.warp_cta.tolist() == [0, 1, 2, 3]


def test_the_h100_stencil_recording_runs_on_its_measured_sms() -> None:
    """stencil7 recorded on an H100: the L1 requests per SM are those of the CTAs its %smid put
    there (NumPy over the trace's own records), not those of ``k mod 132``."""
    from tests.support.ptx_support import DEMO_DIR
    from tuiprof.arch import load_arch
    from tuiprof.sim.coalesce import coalesce_trace
    from tuiprof.trace.io import load_trace

    t = load_trace(DEMO_DIR / "gpu" / "stencil7-h100.tptrace")
    arch = load_arch("h100")
    co = coalesce_trace(t, arch.l1.line)
    per_warp = co.req_off[t.warp_offsets[1:]] - co.req_off[t.warp_offsets[:-1]]
    sm_of_warp = t.ctas.sm[t.snapshot.cta_ids[t.warp_cta]]
    expected = np.bincount(sm_of_warp, weights=per_warp, minlength=arch.sm_count).astype(np.int64)
    p = prepare(t, arch)
    assert p.sm_requests.tolist() == expected.tolist()
    round_robin = np.bincount(t.warp_cta % arch.sm_count, weights=per_warp, minlength=arch.sm_count)
    assert not np.array_equal(expected, round_robin)


def test_a_snapshot_of_a_one_wave_grid_runs_at_the_grids_depth() -> None:
    """6 CTAs of a 12-CTA grid on 4 SMs: the GPU runs the grid in one wave, 3 CTAs an SM, so the
    snapshot fills 2 SMs to that depth (CTA k on SM k % 2), not 4 SMs to 1.5 (spmv-u's Fermi-sized
    snapshot on the H100: its L1 read prediction 74% against ncu's 49%, 46% packed). The whole grid,
    and a grid of full waves (where an SM's CTAs are a wave apart), keep every SM."""
    t = make_trace([lanes(X + 0x1000 * k) for k in range(6)], warps=list(range(6)), n_ctas=6)
    arch = small_arch(sm_count=4)
    assert snapshot_sms(t, arch) == 4  # the whole grid
    part = replace(t, launch=replace(t.launch, grid=(12, 1, 1)))
    assert snapshot_sms(part, arch) == 2
    assert prepare(part, arch).sm_requests.tolist() == [3, 3, 0, 0]
    assert prepare(t, arch).sm_requests.tolist() == [2, 2, 1, 1]
    assert snapshot_sms(replace(t, launch=replace(t.launch, grid=(4096, 1, 1))), arch) == 4
    for r in (run_trial(prepare(part, arch), arch, 3, 1), reference_trial(prepare(part, arch), arch, 3, 1)):
        assert r.sm_requests.tolist() == [3, 3, 0, 0] and int(r.l1_read_accesses.sum()) == 24
