"""The simulator tests' builders (tests/support/sim_traces.py) build what they say."""

from __future__ import annotations

from tests.support.sim_traces import lanes, small_arch, trace_of


def test_trace_of_masks_inactive_lanes() -> None:
    t = trace_of([[(0, lanes(0x1000), 0b101)]])
    assert t.addr[0, 0] == 0x1000 and t.addr[0, 1] == 0 and t.addr[0, 2] == 0x1008
    assert t.n_warps == 1 and t.launch.ctas_per_sm == 1


def test_small_arch_geometry() -> None:
    a = small_arch()
    assert (a.sm_count, a.l1.sets, a.l2.sets, a.l2.partitions) == (1, 8, 32, 1)
