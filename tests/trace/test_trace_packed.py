"""A loaded trace keeps its shared-memory lane addresses packed (issue 23 item 5): decoded on
demand they are the addresses saved, and every figure read from them (bank-conflict wavefronts,
coalescing, the address pattern, the trace digest) is what the full uint64 [R, 32] array gives."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from tests.support.factories import random_trace, with_shared
from tuiprof.errors import TraceError
from tuiprof.trace.data import LANES, PackedLanes, Trace
from tuiprof.trace.io import load_trace, save_trace
from tuiprof.trace.packed import lane_addresses

FIXTURE_DEMO = Path(__file__).resolve().parents[2] / "demo_traces" / "transpose-tiled.tptrace"


def dense(t: Trace) -> Trace:
    """The same trace with every access's addresses in one uint64 [R, 32] array (the old way)."""
    return dataclasses.replace(t, addr=np.ascontiguousarray(lane_addresses(t)), packed=None)


def numpy_wavefronts(addr: np.ndarray, mask: np.ndarray, nbytes: int, banks: int, width: int = 4) -> np.ndarray:
    """Oracle, NumPy only: wavefronts of each warp access (rows of `addr`) with lanes of `nbytes`
    bytes: lanes are served in phases of ``banks * width`` bytes; in a phase, the wavefronts are
    the most distinct words any one bank holds; a phase with no active lane takes none."""
    n = addr.shape[0]
    per_lane = max(1, -(-nbytes // width))
    lanes_per_phase = max(1, min(LANES, banks * width // nbytes))
    lane = np.arange(LANES)
    active = ((mask[:, None].astype(np.int64) >> lane) & 1).astype(bool)
    acc, ln = np.nonzero(active)
    word0 = (addr[acc, ln] // np.uint64(width)).astype(np.int64)
    acc = np.repeat(acc, per_lane)
    phase = np.repeat(ln // lanes_per_phase, per_lane)
    word = np.repeat(word0, per_lane) + np.tile(np.arange(per_lane), word0.size)
    bank = word % banks
    cells = np.unique(np.stack([acc, phase, bank, word], axis=1), axis=0)  # distinct words per bank
    per_bank, counts = np.unique(cells[:, :3], axis=0, return_counts=True)
    out = np.zeros(n, dtype=np.int64)
    if per_bank.size:
        phases, inverse = np.unique(per_bank[:, :2], axis=0, return_inverse=True)
        deepest = np.zeros(phases.shape[0], dtype=np.int64)
        np.maximum.at(deepest, inverse.reshape(-1), counts)
        np.add.at(out, phases[:, 0], deepest)
    return out


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decode 7 accesses at a time, so that small traces cross many chunk boundaries."""
    monkeypatch.setattr("tuiprof.trace.packed.CHUNK", 7)


@pytest.mark.parametrize("compression", ["deflate", "lzma"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_packed_addresses_decode_to_the_saved_ones(tmp_path: Path, small_chunks: None, seed: int,
                                                   compression: str) -> None:
    t = with_shared(random_trace(seed, n=157, n_warps=6, n_ops=5), {1, 3})
    u = load_trace(save_trace(t, tmp_path / "t.tptrace", compression=compression))
    assert u.packed is not None and u.packed.rows.size == np.isin(t.op, [1, 3]).sum()
    assert len(u.packed.bases) > 1  # several chunks
    assert u.addr.shape == (t.n_accesses - u.packed.rows.size, LANES)
    assert np.array_equal(lane_addresses(u), t.addr)
    rows = np.random.default_rng(seed).permutation(t.n_accesses)[:40]  # any rows, in any order
    assert np.array_equal(lane_addresses(u, rows), t.addr[rows])


def test_a_trace_without_shared_accesses_loads_unpacked(tmp_path: Path) -> None:
    t = random_trace(5, n=50)
    u = load_trace(save_trace(t, tmp_path / "t.tptrace"))
    assert u.packed is None and np.array_equal(u.addr, t.addr)


@pytest.mark.parametrize("banks", [32, 16])
@pytest.mark.parametrize("nbytes", [4, 8, 16])
def test_packed_wavefronts_equal_numpy_from_full_addresses(tmp_path: Path, small_chunks: None, banks: int,
                                                           nbytes: int) -> None:
    """Per-op wavefront counts, computed chunk by chunk from the packed lanes, against the NumPy
    oracle over the full lane addresses (shared-window offsets: tile rows, columns, padding)."""
    from tuiprof.model.shared import shared_op_stats

    rng = np.random.default_rng(nbytes * banks)
    n = 120
    stride = rng.choice([1, 2, 8, 32, 33], size=n).astype(np.uint64)
    addr = (rng.integers(0, 64, size=(n, 1)).astype(np.uint64) * 4
            + np.arange(LANES, dtype=np.uint64) * stride[:, None] * np.uint64(nbytes))
    t = random_trace(7, n=n, n_warps=4, n_ops=3)
    active = ((t.mask[:, None] >> np.arange(LANES, dtype=np.uint32)) & 1).astype(bool)
    t = with_shared(dataclasses.replace(t, addr=np.where(active, addr, 0).astype(np.uint64)), {0, 2}, nbytes)
    u = load_trace(save_trace(t, tmp_path / "t.tptrace"))
    assert u.packed is not None
    got = shared_op_stats(u, banks, 4, 20.0)
    assert set(got) == {0, 2}
    for op_id, st in got.items():
        rows = np.flatnonzero(t.op == op_id)
        want = numpy_wavefronts(t.addr[rows], t.mask[rows], nbytes, banks)
        assert st.warp_accesses == rows.size
        assert st.passes == pytest.approx(want.mean(), rel=1e-12) and st.worst == want.max()
    assert got == shared_op_stats(dense(u), banks, 4, 20.0)


def test_transpose_tiled_demo_figures_equal_the_full_addresses_ones() -> None:
    """On a shipped demo (a 32 x 33 padded tile, production CUDA): bank conflicts, coalescing,
    address patterns and the digest from the packed trace equal those of its full addresses."""
    from tuiprof.compare.cache import trace_digest
    from tuiprof.model.pattern import address_patterns
    from tuiprof.model.shared import shared_op_stats
    from tuiprof.sim.coalesce import coalesce_trace

    u = load_trace(FIXTURE_DEMO)
    assert u.packed is not None
    d = dense(u)
    assert shared_op_stats(u, 32, 4, 30.0) == shared_op_stats(d, 32, 4, 30.0)
    a, b = coalesce_trace(u, 128), coalesce_trace(d, 128)
    for f in dataclasses.fields(a):
        assert np.array_equal(getattr(a, f.name), getattr(b, f.name)), f.name
    pa, pb = address_patterns(u, 128, 32), address_patterns(d, 128, 32)
    assert pa.keys() == pb.keys()
    for k in pa:
        assert repr(pa[k]) == repr(pb[k]), k
    assert trace_digest(u) == trace_digest(d)


def test_a_packed_trace_saves_what_it_loaded(tmp_path: Path) -> None:
    t = with_shared(random_trace(11, n=90, n_ops=4), {0})
    u = load_trace(save_trace(t, tmp_path / "a.tptrace"))
    v = load_trace(save_trace(u, tmp_path / "b.tptrace"))
    assert np.array_equal(lane_addresses(v), t.addr)


def test_inconsistent_packing_is_refused() -> None:
    t = with_shared(random_trace(3, n=40, n_ops=2), {1})
    rows = np.flatnonzero(t.op == 1).astype(np.int64)
    half = rows[: rows.size // 2]
    keep = np.ones(t.n_accesses, dtype=bool)
    keep[half] = False
    bad = PackedLanes(rows=half, starts=(0, half.size), bases=(np.zeros(half.size, np.int8),),
                      steps=(np.zeros(half.size, np.int8),), odd=(np.zeros(0, np.int32),),
                      lanes=(np.zeros((0, LANES), np.int8),), unit=4)
    with pytest.raises(TraceError, match="packed and unpacked"):
        dataclasses.replace(t, addr=t.addr[keep], packed=bad)
    with pytest.raises(TraceError, match="disagree in shape"):
        dataclasses.replace(t, packed=bad)


@pytest.mark.parametrize("banks", [16, 32])
@pytest.mark.parametrize("nbytes", [4, 8, 16])
def test_structured_phases_wavefronts_equal_numpy(banks: int, nbytes: int) -> None:
    """Strides (conflict-free, 2-way, 32-way, padded), broadcasts and near-broadcasts under random
    masks: the kernel's one-wavefront shortcut and its counting path against the NumPy oracle."""
    from tuiprof.model.wavefronts import wavefronts

    rng = np.random.default_rng(banks * 100 + nbytes)
    n = 600
    lane = np.arange(LANES, dtype=np.uint64)
    stride = rng.choice([0, 1, 2, 3, 32, 33], size=n).astype(np.uint64)  # in elements
    addr = 0x1000 + rng.integers(0, 64, size=(n, 1)).astype(np.uint64) * np.uint64(nbytes) \
        + lane * stride[:, None] * np.uint64(nbytes)
    near = rng.random(n) < 0.2  # a broadcast but for one lane
    addr[near, rng.integers(0, LANES, size=int(near.sum()))] += np.uint64(banks * 4)
    mask = rng.integers(1, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    mask[: n // 3] = 0xFFFFFFFF
    actual, ideal, worst = wavefronts(addr, mask, np.zeros(n, np.int32), np.array([nbytes], np.int64),
                                      np.arange(n, dtype=np.int64), banks, 4)
    want = numpy_wavefronts(addr, mask, nbytes, banks)
    assert np.array_equal(actual, want)
    assert (actual == ideal).any() and (actual > ideal).any() and worst.max() >= 2


def test_packed_shared_stats_leave_the_warm_up_ctas_out(tmp_path: Path) -> None:
    """A snapshot's warm-up CTAs are replayed, never counted: the packed path counts the same
    shared accesses as the full addresses do (it used to count the warm-up CTAs' too, doubling
    matmul-tile16's shared requests)."""
    from tuiprof.model.shared import shared_op_stats

    t = with_shared(random_trace(9, n=300, n_warps=6, n_ops=4), {1, 2})  # one warp per CTA: 6 CTAs
    t = dataclasses.replace(t, snapshot=dataclasses.replace(t.snapshot, warm=2))
    u = load_trace(save_trace(t, tmp_path / "t.tptrace"))
    assert u.packed is not None
    got, want = shared_op_stats(u, 32, 4, 30.0), shared_op_stats(dense(u), 32, 4, 30.0)
    assert got == want
    warp = np.searchsorted(t.warp_offsets, np.arange(t.n_accesses), side="right") - 1
    counted = t.warp_cta[warp] >= 2
    for op in (1, 2):
        rows = np.flatnonzero((t.op == op) & counted)
        assert got[op].warp_accesses == rows.size
        assert got[op].total == numpy_wavefronts(t.addr[rows], t.mask[rows], 4, 32).sum()
