"""The kernel-wide hit ratios count what Nsight Compute's metrics count (docs/memory-system.md,
section 4): the L1 read figure global loads only (``..._mem_global_op_ld_hit_rate``: a local
load is ``mem_local``), the L2 write figure stores only (``lts__t_sector_op_write_hit_rate``:
atomics are ``op_atom``). A hand-computed case on the h100 preset, one SM."""

from __future__ import annotations

import numpy as np

from tests.support.sim_traces import FULL, LANE0, lanes, one_lane, op, trace_of
from tuiprof.config import RunConfig
from tuiprof.model.analysis import ncu_columns
from tuiprof.session import Session

LINE = 128
GLOBAL_LOAD, LOCAL_LOAD, STORE, ATOMIC = range(4)
OPS = (op("load"), op("load", space="local"), op("store"), op("atomic"))


def test_local_loads_and_atomics_stay_out_of_the_headline_figures() -> None:
    # Global load of line 5 twice: 4 sector misses, then 4 L1 hits (4 / 8). Local load of
    # line 9 once: 4 misses (counted, it would make the L1 figure 4 / 12). A whole-line store
    # to line 20: 4 L2 write hits (write-back). An atomic on one lane of line 30: a write-through
    # miss in L2 (counted, it would make the L2 write figure 4 / 5).
    t = trace_of([[(GLOBAL_LOAD, lanes(5 * LINE), FULL), (GLOBAL_LOAD, lanes(5 * LINE), FULL),
                   (LOCAL_LOAD, lanes(9 * LINE), FULL), (STORE, lanes(20 * LINE), FULL),
                   (ATOMIC, one_lane(30 * LINE), LANE0)]], ops=OPS)
    a = Session(t, RunConfig(arch="h100", overrides={"sm_count": "1"}, trials=2, sweep=False)).run()
    assert a is not None
    assert a.headline["l1_read"].mean == 0.5
    assert a.headline["l2_write"].mean == 1.0
    assert a.headline["l2_read"].mean == 0.0  # every L2 read sector (global and local) misses once


def test_ncu_columns() -> None:
    from tuiprof.trace.data import StaticOp

    ops = [StaticOp(id=i, kernel="k", kind=k, space=s, bytes=4, file="k.cu", line=1)  # type: ignore[arg-type]
           for i, (k, s) in enumerate([("load", "global"), ("load", "local"), ("load", "texture"),
                                       ("store", "global"), ("atomic", "global"), ("store", "local")])]
    l1, l2w = ncu_columns(ops)
    assert np.array_equal(l1, [True, False, False, False, False, False])
    assert np.array_equal(l2w, [False, False, False, True, False, True])
