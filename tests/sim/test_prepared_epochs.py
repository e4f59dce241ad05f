"""Barrier intervals (`tuiprof.sim.prepared._epochs`) by their pair table and by np.isin, the
path for op tables too large for the table: the same hand-computed intervals."""

from __future__ import annotations

import dataclasses

import pytest

from tests.support.sim_traces import lanes, op, trace_of


@pytest.mark.parametrize("table", [True, False], ids=["pair table", "isin"])
def test_barrier_intervals_by_either_path(monkeypatch: pytest.MonkeyPatch, table: bool) -> None:
    from tuiprof.arch import load_arch
    from tuiprof.sim import prepared

    if not table:
        monkeypatch.setattr(prepared, "_PAIR_TABLE", 0)
    # op 2 follows op 1 across a barrier on every path; op 0 follows op 2 across another.
    kinds = (op("load", starts=True), op("load"), op("load", starts=True))
    warps = [[(0, lanes(0), 0xFFFFFFFF), (1, lanes(128), 0xFFFFFFFF), (2, lanes(256), 0xFFFFFFFF),
              (0, lanes(384), 0xFFFFFFFF), (2, lanes(512), 0xFFFFFFFF), (1, lanes(640), 0xFFFFFFFF)]] * 3
    t = trace_of(warps, ops=kinds, warps_per_cta=3)
    after = ((2,), (), (1,))
    t = dataclasses.replace(t, ops=tuple(dataclasses.replace(o, barrier_after=a) for o, a in zip(t.ops, after)))
    p = prepared.prepare(t, load_arch("v100"))
    # sequences per warp: [op0 op1] [op2] [op0] [op2 op1]: op2 after op1 crosses, op0 after op2
    # crosses, op2 after op0 does not, op1 after op2 does not: intervals 0, 1, 2, 2
    assert p.seq_epoch.tolist() == [0, 1, 2, 2] * 3
