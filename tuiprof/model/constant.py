"""Constant memory as Nsight Compute counts it: constant-cache requests per warp access.

Constant memory is read through the SM's constant cache, which serves one address per cycle to
every lane that asks for it: a warp whose active lanes all read one address is one request (a
broadcast), one whose lanes read k distinct addresses is k requests, served one after another
(CUDA C Programming Guide, "Constant Memory": "a request is split into as many separate requests
as there are different memory addresses in the initial request"). Like shared memory it is no
part of the L1/L2 model: a constant op's X is the constant cache's hit latency plus one cycle per
extra request. The constant cache sits beside the L1 at the same depth; tuiprof takes the Arch's
L1 hit latency for it (not measured apart), and assumes its working set fits (64 KiB of constant
memory against a few KiB of cache per SM: a table read at random may miss there, which this does
not model).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tuiprof.model.shared import PassStats, pass_stats, space_rows
from tuiprof.trace.packed import lane_addresses

if TYPE_CHECKING:
    from tuiprof.trace.data import Trace


def distinct_addresses(addr: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Distinct addresses among the active lanes of each warp access (``addr`` [R, 32] and
    ``mask`` [R]), int64 [R]."""
    if addr.shape[0] == 0:
        return np.zeros(0, np.int64)
    active = ((mask[:, None] >> np.arange(32, dtype=np.uint32)) & np.uint32(1)).astype(bool)
    a = np.where(active, addr, np.uint64(np.iinfo(np.uint64).max))
    a.sort(axis=1)
    changes = (a[:, 1:] != a[:, :-1]) & (a[:, 1:] != np.uint64(np.iinfo(np.uint64).max))
    return (active.any(axis=1).astype(np.int64) + changes.sum(axis=1)).astype(np.int64)


def const_op_stats(trace: Trace, latency: float) -> dict[int, PassStats]:
    """`PassStats` of every constant-memory op of `trace`: constant-cache requests per warp access
    (distinct addresses), ideal 1, with a broadcast's latency of ``latency`` cycles."""
    ids, rows = space_rows(trace, "const")
    if ids.size == 0:
        return {}
    actual = distinct_addresses(lane_addresses(trace, rows), trace.mask[rows])
    return pass_stats("const", ids, trace.op[rows], actual, np.ones_like(actual), latency)
