"""Runs shared by the decision tests and the UI's MD pane test: one GTX480 SM (`ONE_SM`, or
`THIN` with a third of its DRAM share), a trace whose CTAs thrash their own lines
(`thrash_trace`), and a whole Session run to its analysis and events (`run`)."""

from __future__ import annotations

import numpy as np

from tests.support.factories import make_trace
from tuiprof.session import RunConfig, Session
from tuiprof.trace.data import CtaRecords

LINE = 128
ONE_SM = {"sm_count": "1", "dram.bandwidth_gbs": "5.91"}
"""One GTX480 SM with its share of the DRAM bandwidth (88.7 GB/s / 15 SMs; its departure delays are
derived from that share)."""
THIN = {"sm_count": "1", "dram.bandwidth_gbs": "1.97"}
"""One GTX480 SM left a third of that share (other kernels' traffic, or 45 SMs' worth of demand)."""


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
