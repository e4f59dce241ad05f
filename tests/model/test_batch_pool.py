"""The DRAM batch latency distribution pooled over trials (Baghsorkhi12 Fig. 3) from each trial's
tally: the same histogram as NumPy's of every batch pooled, without the analysis touching the
batches themselves (issue 25 item 4: pooling 2048 trials' raw batches held the GIL for seconds,
and the keys waited for it)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.support.fixed_analysis import made_up_trial
from tuiprof.model.analysis import analyse, batch_histogram
from tuiprof.session import RunConfig, Session
from tuiprof.sim.results import TrialResult, latency_counts


def numpy_histogram(batches: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The oracle: NumPy's histogram of every batch latency pooled (up to 16 bins, one per
    distinct latency when there are fewer)."""
    pooled = np.concatenate(batches).astype(np.float64) if batches else np.zeros(0)
    if not pooled.size:
        return np.zeros(0, np.int64), np.zeros(1)
    return np.histogram(pooled, bins=np.histogram_bin_edges(pooled, bins=min(16, np.unique(pooled).size)))


def test_latency_counts_by_hand() -> None:
    v, c = latency_counts(np.array([700, 650, 700, 700], dtype=np.int64))
    assert v.tolist() == [650, 700] and c.tolist() == [1, 3]
    v, c = latency_counts(np.array([5, 10**12, 5], dtype=np.int64))  # a span too wide to count by slot
    assert v.tolist() == [5, 10**12] and c.tolist() == [2, 1]
    v, c = latency_counts(np.array([700, 650, 700], dtype=np.int64), np.array([2, 5, 1], dtype=np.int64))
    assert v.tolist() == [650, 700] and c.tolist() == [5, 3] and c.dtype == np.int64
    v, c = latency_counts(np.zeros(0, np.int64))
    assert v.size == c.size == 0


@pytest.mark.parametrize("span", [1, 7, 300, 10**9])
def test_pooled_histogram_is_numpys_of_every_batch(span: int) -> None:
    rng = np.random.default_rng(span)
    session = Session.open("stencil7", RunConfig(trials=8))
    for case in range(20):
        batches = [(600 + rng.integers(0, span, int(rng.integers(0, 200)))).astype(np.int64)
                   for _ in range(int(rng.integers(1, 6)))]
        results = [replace(made_up_trial(session, session.md, i, rng), dram_batch_latencies=b,
                           dram_batch_counts=latency_counts(b) if i % 2 else None)  # tallied or not
                   for i, b in enumerate(batches)]
        counts, edges = batch_histogram(results)
        want_counts, want_edges = numpy_histogram(batches)
        assert counts.dtype == np.int64 and counts.tolist() == want_counts.tolist(), case
        assert np.array_equal(edges, want_edges), case


class Watched(TrialResult):
    """A trial result that records every read of its raw DRAM batches."""

    reads: list[int] = []

    def __getattribute__(self, name: str) -> object:
        if name == "dram_batch_latencies":
            Watched.reads.append(object.__getattribute__(self, "index"))
        return object.__getattribute__(self, name)


def test_the_analysis_pools_tallies_not_raw_batches() -> None:
    """Each trial's batches are tallied once, where it ran; the analysis, made again and again
    while a run streams in, never reads them (they are tens of thousands per trial)."""
    rng = np.random.default_rng(3)
    session = Session.open("stencil7", RunConfig(trials=8))
    trace = session.trace
    results = []
    for i in range(6):
        r = made_up_trial(session, session.md, i, rng)
        fields = {k: getattr(r, k) for k in r.__dataclass_fields__}
        fields["dram_batch_counts"] = latency_counts(r.dram_batch_latencies)
        results.append(Watched(**fields))
    raw = [object.__getattribute__(r, "dram_batch_latencies") for r in results]
    Watched.reads.clear()
    n = len(trace.ops)
    a = analyse(trace.ops, session.arch, session.md, results, 8, trace.accesses_per_op(), np.ones(n), np.ones(n), 1.0)
    assert Watched.reads == []
    want_counts, want_edges = numpy_histogram(raw)
    assert a.dram_hist[0].tolist() == want_counts.tolist() and np.array_equal(a.dram_hist[1], want_edges)
