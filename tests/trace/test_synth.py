"""Synthetic workloads checked against independent truth: addresses recomputed here from each
kernel's indexing, data flow through shared memory followed lane by lane, matrix nonzeros
counted from the CSR pattern. Small sizes throughout; one smoke test builds the smallest demo."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tests.support.ptx_support import compile_ptx, needs_compiler
from tuiprof.errors import UsageError
from tuiprof.trace import synth
from tuiprof.trace.data import LANES, Trace

ROOT = Path(__file__).resolve().parents[2]
LANE = np.arange(LANES, dtype=np.int64)
SPMV = dict(n_rows=1000, n_cols=512, mean_nnz=8, seed=7, ctas=4)
"""4 CTAs of 256 threads cover the 1000 rows: the last warp is partly out of range."""


# ---- helpers: decode a trace into per-access views ----------------------------------------

def active(t: Trace) -> np.ndarray:
    return ((t.mask[:, None] >> LANE.astype(np.uint32)) & 1).astype(bool)


def access_warp(t: Trace) -> np.ndarray:
    return np.repeat(np.arange(t.n_warps), np.diff(t.warp_offsets))


def thread_id(t: Trace) -> np.ndarray:
    """Linear thread id within its CTA of every lane of every access, [R, 32]."""
    w = access_warp(t)
    return t.warp_index[w].astype(np.int64)[:, None] * LANES + LANE


def cta_of(t: Trace) -> np.ndarray:
    """Linear CTA id of every access, [R, 1]."""
    return t.snapshot.cta_ids[t.warp_cta[access_warp(t)]][:, None]


def op_id(t: Trace, label: str, occurrence: int = 0) -> int:
    return [o.id for o in t.ops if o.label == label][occurrence]


def elems(t: Trace, array: str, rows: np.ndarray, size: int = 4) -> np.ndarray:
    """Element indices of `array` addressed by the access rows (all lanes)."""
    base = np.uint64(t.provenance.generator["arrays"][array])
    return ((t.addr[rows] - base) // np.uint64(size)).astype(np.int64)


def per_warp_ops(t: Trace, w: int) -> list[int]:
    return t.op[t.warp_offsets[w]:t.warp_offsets[w + 1]].tolist()


# ---- helpers --------------------------------------------------------------------------------

def test_allocate_is_aligned_and_disjoint() -> None:
    bases = synth.allocate({"a": 10, "b": (5 << 20) + 3, "c": 1})
    assert bases["a"] == synth.ARRAY_BASE
    assert all(b % 256 == 0 and b % synth.ARRAY_ALIGN == 0 for b in bases.values())
    assert bases["b"] >= bases["a"] + 10 + synth.ARRAY_ALIGN
    assert bases["c"] >= bases["b"] + (5 << 20) + 3 + synth.ARRAY_ALIGN


@settings(max_examples=40, deadline=None)
@given(arrays(np.int64, st.tuples(st.integers(1, 5), st.just(LANES)), elements=st.integers(0, 6)))
def test_loop_runs_each_lane_its_trip_count(trips: np.ndarray) -> None:
    warp, k, act = synth.loop(trips)
    assert np.array_equal(np.bincount(warp, minlength=trips.shape[0]), trips.max(axis=1))
    lanes_done = np.zeros_like(trips)
    np.add.at(lanes_done, warp, act.astype(np.int64))
    assert np.array_equal(lanes_done, trips)
    assert np.all(np.diff(warp) >= 0)


def test_mask_bits() -> None:
    act = np.zeros((3, LANES), bool)
    act[0, 0] = act[1, 31] = True
    act[2] = True
    assert synth.mask_bits(act).tolist() == [1, 1 << 31, 0xFFFFFFFF]


# ---- vecadd (Yen14, Table 3) --------------------------------------------------------------

def test_vecadd_lane_addresses() -> None:
    t = synth.vecadd(n=640, block=64)
    gid = cta_of(t) * 64 + thread_id(t)
    for name in ("A", "B", "C"):
        rows = t.op == op_id(t, f"{name}[id]")
        assert rows.sum() == 640 // 32
        assert np.array_equal(elems(t, name, rows), gid[rows])
    assert np.all(t.mask == 0xFFFFFFFF)
    assert all(per_warp_ops(t, w) == [0, 1, 2] for w in range(t.n_warps))
    assert [o.kind for o in t.ops] == ["load", "load", "store"]


def test_vecadd_demo_smoke() -> None:
    t = synth.build_demo("vecadd")
    assert t.provenance.backend == "synthetic" and t.provenance.arch == "gtx480"
    assert t.launch.block == (64, 1, 1) and t.launch.grid == (320, 1, 1)
    assert t.snapshot.n_ctas == 320 and "whole grid" in t.snapshot.rule
    assert t.n_accesses == 320 * 2 * 3
    assert t.ctas.accesses is not None and np.all(t.ctas.accesses == 6)
    assert t.ctas.insts is not None and np.all(t.ctas.insts == 2 * synth.VecAdd.INSTS)
    assert synth.DEMOS["vecadd"]().n_accesses == t.n_accesses


def test_demo_names() -> None:
    assert list(synth.DEMOS) == ["vecadd", "spmv-u", "spmv-b", "spmv-u128", "spmv-b128",
                                 "spmv-vec-u", "spmv-vec-b", "spmv-vec-u128", "spmv-vec-b128",
                                 "transpose-naive", "transpose-tiled", "matmul16", "stencil7"]
    assert all(spec.name == name for name, spec in synth.DEMOS.items())
    with pytest.raises(UsageError, match="unknown demo"):
        synth.build_demo("nope")


# ---- SpMV matrices (Baghsorkhi12 sec. 6.2) -------------------------------------------------------

@pytest.mark.parametrize("dist", ["random", "block"])
def test_csr_pattern_rows(dist: str) -> None:
    m = synth.csr_pattern(dist, 700, 256, 8, seed=3)
    lengths = m.row_len
    assert lengths.min() >= 4 and lengths.max() <= 12
    assert m.col_ind.shape[0] == m.row_ptr[-1]
    for r in range(700):
        cols = m.col_ind[m.row_ptr[r]:m.row_ptr[r + 1]]
        assert np.all(np.diff(cols) > 0)  # sorted, distinct
        if dist == "random":
            assert cols.min() >= 0 and cols.max() < 256
        else:
            lo = (r // 16 * 16) % 256  # block width 2 x mean
            assert cols.min() >= lo and cols.max() < lo + 16


def test_csr_pattern_prefix_is_stable() -> None:
    small = synth.csr_pattern("random", 3000, 512, 8, seed=5, known_rows=300)
    full = synth.csr_pattern("random", 3000, 512, 8, seed=5)
    assert np.array_equal(small.row_ptr, full.row_ptr)
    n = small.col_ind.shape[0]
    assert n >= small.row_ptr[300] and np.array_equal(small.col_ind, full.col_ind[:n])
    with pytest.raises(IndexError):
        small.columns(np.array([full.col_ind.shape[0] - 1]))


# ---- scalar SpMV (Listing 2) ------------------------------------------------------------------

def _row_of(t: Trace) -> np.ndarray:
    return cta_of(t) * 256 + thread_id(t)


def _per_row(t: Trace, ops: list[int], array: str) -> tuple[np.ndarray, np.ndarray]:
    """(row, element) of every active lane of the accesses of `ops`, in program order per row."""
    rows = np.isin(t.op, ops)
    act = active(t)[rows]
    row = _row_of(t)[rows][act]
    el = elems(t, array, rows)[act]
    order = np.argsort(row, kind="stable")
    return row[order], el[order]


def test_spmv_scalar_matches_the_matrix() -> None:
    t = synth.spmv(**SPMV)
    m = synth.csr_pattern("random", 1000, 512, 8, seed=7)
    nnz = int(m.row_ptr[-1])
    # y[ind]: one lane-access per nonzero, at y + 4 * column, columns of each row in order
    row, col = _per_row(t, [op_id(t, "y[ind]")], "y")
    assert row.shape[0] == nnz
    assert np.array_equal(row, np.repeat(np.arange(1000), m.row_len))
    assert np.array_equal(col, m.col_ind)
    # indices[j] and val[j]: j = rowIndices[r] .. rowIndices[r+1]-1, lane by lane
    for label, array in (("indices[j]", "indices"), ("val[j]", "val")):
        row, j = _per_row(t, [op_id(t, label)], array)
        assert np.array_equal(j, np.arange(nnz)) and np.array_equal(row, np.repeat(np.arange(1000), m.row_len))
    # bounds loads and the store: exactly the rows < numRows
    for label, array, off in (("rowIndices[myi]", "rowIndices", 0), ("rowIndices[myi + 1]", "rowIndices", 1),
                              ("x[myi]", "x", 0)):
        row, el = _per_row(t, [op_id(t, label)], array)
        assert np.array_equal(row, np.arange(1000)) and np.array_equal(el, np.arange(1000) + off)


def test_spmv_scalar_warp_streams() -> None:
    t = synth.spmv(**SPMV)
    m = synth.csr_pattern("random", 1000, 512, 8, seed=7)
    lengths = np.concatenate([m.row_len, np.zeros(24, np.int64)]).reshape(-1, 32)
    for w in range(t.n_warps):
        iters = int(lengths[w].max())
        assert per_warp_ops(t, w) == [0, 1] + [2, 3, 4] * iters + [5]
        loop = slice(t.warp_offsets[w] + 2, t.warp_offsets[w] + 2 + 3 * iters, 3)
        lanes = active(t)[loop]
        assert np.array_equal(lanes.sum(axis=0), lengths[w])  # mask matches row lengths
    starts = {o.label: o.starts_sequence for o in t.ops}
    assert starts == {"rowIndices[myi]": True, "rowIndices[myi + 1]": False, "indices[j]": True,
                      "val[j]": False, "y[ind]": True, "x[myi]": False}


def test_spmv_whole_grid_counts() -> None:
    """Per-CTA accesses beyond the snapshot follow from the row lengths alone."""
    t = synth.spmv(**{**SPMV, "n_rows": 3000, "ctas": 2})
    m = synth.csr_pattern("random", 3000, 512, 8, seed=7)
    lengths = np.concatenate([m.row_len, np.zeros(12 * 256 - 3000, np.int64)]).reshape(-1, 32)
    in_range = (np.arange(12 * 256) < 3000).reshape(-1, 32).any(axis=1)
    per_warp = np.where(in_range, 3 + 3 * lengths.max(axis=1), 0)
    assert t.launch.grid_ctas == 12 and t.snapshot.n_ctas == 2
    assert np.array_equal(t.ctas.accesses, per_warp.reshape(12, 8).sum(axis=1))
    assert np.all(t.ctas.insts > 0)


def test_spmv_snapshot_follows_the_paper() -> None:
    """4 x the threads resident on the 14 SMs of the Tesla C2050 (Baghsorkhi12 sec. 3.1, 5.3)."""
    t = synth.spmv(mean_nnz=4, n_rows=90_000, n_cols=256)
    md = t.launch.ctas_per_sm
    assert md == 6  # 20 registers, 256 threads: warp-limited on Fermi
    assert t.snapshot.n_ctas == 4 * 14 * md and np.array_equal(t.snapshot.cta_ids, np.arange(4 * 14 * md))
    assert "4 x" in t.snapshot.rule and "tesla-c2050" in t.snapshot.rule


# ---- vectorized SpMV (Listing 3) --------------------------------------------------------------

Y_VEC = ["y[ind]", "y[ind.x]", "y[ind.y]", "y[ind.z]", "y[ind.w]"]


def test_spmv_vector_reads_the_same_y_as_scalar() -> None:
    for dist in ("random", "block"):
        s = synth.spmv(dist, **{k: v for k, v in SPMV.items()})
        v = synth.spmv(dist, vectorized=True, **SPMV)
        y_ops = [o.id for o in v.ops if o.label in Y_VEC]
        assert len(y_ops) == 6  # prologue, four in the main loop, epilogue
        rs, cs = _per_row(s, [op_id(s, "y[ind]")], "y")
        rv, cv = _per_row(v, y_ops, "y")
        a, b = np.lexsort((cs, rs)), np.lexsort((cv, rv))
        assert np.array_equal(rs[a], rv[b]) and np.array_equal(cs[a], cv[b])


def test_spmv_vector_loads() -> None:
    v = synth.spmv(vectorized=True, **SPMV)
    m = synth.csr_pattern("random", 1000, 512, 8, seed=7)
    ind4, val4 = op_id(v, "indices4[j / 4]"), op_id(v, "val4[j / 4]")
    assert v.ops[ind4].bytes == 16 and v.ops[val4].bytes == 16
    rows = np.flatnonzero(v.op == ind4)
    act = active(v)[rows]
    j = elems(v, "indices", rows)
    assert np.all(j[act] % 4 == 0)
    assert np.array_equal(elems(v, "val", rows + 1)[act], j[act])  # float4 val[j / 4] at the same j
    # y[ind.c] uses component c of the uint4 just loaded, lane by lane
    for c, label in enumerate(Y_VEC[1:]):
        assert np.all(v.op[rows + 2 + c] == op_id(v, label)) and np.array_equal(v.mask[rows + 2 + c], v.mask[rows])
        assert np.array_equal(elems(v, "y", rows + 2 + c)[act], m.col_ind[j[act] + c])
    # at most 3 prologue and 3 epilogue steps per row; every nonzero read once through indices
    for label, occ in (("indices[j]", 0), ("indices[j]", 1)):
        row, _ = _per_row(v, [op_id(v, label, occ)], "indices")
        assert np.bincount(row).max() <= 3
    _, j_all = _per_row(v, [op_id(v, "indices[j]", 0), op_id(v, "indices[j]", 1)], "indices")
    scalar_j = np.concatenate([j_all, (j[act][:, None] + np.arange(4)).ravel()])
    assert np.array_equal(np.sort(scalar_j), np.arange(int(m.row_ptr[-1])))


# ---- transpose --------------------------------------------------------------------------------

N_T = 64


def _pairs(t: Trace, first: str, second: str, a1: str, a2: str) -> tuple[np.ndarray, np.ndarray]:
    """Elements of op `first` and of the op right after it in the warp, lane by lane."""
    rows = np.flatnonzero(t.op == op_id(t, first))
    assert np.all(t.op[rows + 1] == op_id(t, second)) and np.array_equal(t.mask[rows], t.mask[rows + 1])
    return elems(t, a1, rows), elems(t, a2, rows + 1)


def test_transpose_naive_moves_each_element_to_its_transpose() -> None:
    t = synth.transpose(False, n=N_T)
    src, dst = _pairs(t, "idata[(y + j) * width + x]", "odata[x * width + (y + j)]", "idata", "odata")
    assert np.array_equal(np.sort(src.ravel()), np.arange(N_T * N_T))
    assert np.array_equal(dst, (src % N_T) * N_T + src // N_T)


def test_transpose_tiled_moves_each_element_through_shared_memory() -> None:
    t = synth.transpose(True, n=N_T)
    assert t.launch.static_shared == 32 * 33 * 4
    cta = cta_of(t)[:, 0]
    st_rows = np.flatnonzero(t.op == op_id(t, "tile[threadIdx.y + j][threadIdx.x]"))
    assert np.all(t.op[st_rows - 1] == op_id(t, "idata[(y + j) * width + x]"))
    src = elems(t, "idata", st_rows - 1)
    slot = (t.addr[st_rows] // np.uint64(4)).astype(np.int64)
    tile = np.full((t.launch.grid_ctas, 33 * 32), -1)
    tile[np.repeat(cta[st_rows], LANES), slot.ravel()] = src.ravel()
    ld_rows = np.flatnonzero(t.op == op_id(t, "tile[threadIdx.x][threadIdx.y + j]"))
    assert np.all(t.op[ld_rows + 1] == op_id(t, "odata[(y + j) * width + x]"))
    got = tile[np.repeat(cta[ld_rows], LANES), (t.addr[ld_rows] // np.uint64(4)).astype(np.int64).ravel()]
    dst = elems(t, "odata", ld_rows + 1).ravel()
    assert np.all(got >= 0) and np.array_equal(dst, (got % N_T) * N_T + got // N_T)
    # the +1 padding: the 32 lanes of every shared access hit 32 different banks
    for rows in (st_rows, ld_rows):
        banks = np.sort((t.addr[rows] // np.uint64(4)) % np.uint64(32), axis=1)
        assert np.all(banks == np.arange(32, dtype=np.uint64))
    assert [o.space for o in t.ops] == ["global", "shared", "shared", "global"]
    assert [o.starts_sequence for o in t.ops] == [True, False, True, False]


def test_transposes_touch_the_same_global_data() -> None:
    naive, tiled = synth.transpose(False, n=N_T), synth.transpose(True, n=N_T)

    def footprint(t: Trace, kind: str) -> np.ndarray:
        ids = [o.id for o in t.ops if o.kind == kind and o.space == "global"]
        rows = np.isin(t.op, ids)
        return np.sort(t.addr[rows][active(t)[rows]])

    for kind in ("load", "store"):
        a, b = footprint(naive, kind), footprint(tiled, kind)
        assert a.shape[0] == N_T * N_T and np.array_equal(a, b)


# ---- matmul -----------------------------------------------------------------------------------

def test_matmul_tiles() -> None:
    n, bs = 64, 16
    t = synth.matmul16(n=n)
    tiles = n // bs
    ops = {o.label: o.id for o in t.ops}
    expect = ([ops["A[a + wA * ty + tx]"], ops["As[ty][tx]"], ops["B[b + wB * ty + tx]"], ops["Bs[ty][tx]"]]
              + [ops["Bs[k][tx]"], ops["As[ty][k]"]] * bs) * tiles + [ops["C[c + wB * ty + tx]"]]
    per_tile = 4 + 2 * bs
    for w in range(t.n_warps):
        assert per_warp_ops(t, w) == expect
        cta = int(t.snapshot.cta_ids[t.warp_cta[w]])
        bx, by = cta % tiles, cta // tiles
        tid = int(t.warp_index[w]) * LANES + LANE
        tx, ty = tid % bs, tid // bs
        acc = t.addr[t.warp_offsets[w]:t.warp_offsets[w + 1]]
        arrays = t.provenance.generator["arrays"]
        for k_tile in range(tiles):
            a = acc[k_tile * per_tile]
            b = acc[k_tile * per_tile + 2]
            assert np.array_equal(a, arrays["A"] + 4 * ((by * bs + ty) * n + k_tile * bs + tx))
            assert np.array_equal(b, arrays["B"] + 4 * ((k_tile * bs + ty) * n + bx * bs + tx))
            for k in range(bs):
                assert np.array_equal(acc[k_tile * per_tile + 4 + 2 * k], 4 * bs * bs + 4 * (k * bs + tx))
                assert np.array_equal(acc[k_tile * per_tile + 5 + 2 * k], 4 * (ty * bs + k))
        assert np.array_equal(acc[-1], arrays["C"] + 4 * ((by * bs + ty) * n + bx * bs + tx))
    # without shared accesses: the same global stream
    g = synth.matmul16(n=n, record_shared=False)
    glob = np.isin(t.op, [o.id for o in t.ops if o.space == "global"])
    assert np.array_equal(g.addr, t.addr[glob]) and np.array_equal(g.op, t.op[glob])


# ---- stencil ----------------------------------------------------------------------------------

def test_stencil_reads_the_seven_neighbours() -> None:
    nx, ny, nz = 64, 16, 6
    t = synth.stencil7(nx, ny, nz)
    out = np.flatnonzero(t.op == op_id(t, "out[idx]"))
    act = active(t)[out]
    idx = elems(t, "out", out)[act]
    i, j, k = idx % nx, idx // nx % ny, idx // (nx * ny)
    interior = np.array([(a, b, c) for c in range(1, nz - 1) for b in range(1, ny - 1) for a in range(1, nx - 1)])
    assert np.array_equal(np.sort(idx), np.sort(interior[:, 0] + nx * (interior[:, 1] + ny * interior[:, 2])))
    assert np.all((i > 0) & (i < nx - 1) & (j > 0) & (j < ny - 1) & (k > 0) & (k < nz - 1))
    offsets = [-nx, -nx * ny, -1, 1, nx, nx * ny, 0]  # PTX order
    for back, off in zip(range(7, 0, -1), offsets):
        assert np.array_equal(t.mask[out - back], t.mask[out])
        assert np.array_equal(elems(t, "in", out - back)[act], idx + off)
    assert t.n_accesses == 8 * out.shape[0]


# ---- every kernel: source lines, per-CTA records ----------------------------------------------

SMALL = {
    "vecadd": lambda: synth.vecadd(n=256),
    "spmv": lambda: synth.spmv(**SPMV),
    "spmv-vec": lambda: synth.spmv(vectorized=True, **SPMV),
    "transpose-naive": lambda: synth.transpose(False, n=N_T),
    "transpose-tiled": lambda: synth.transpose(True, n=N_T),
    "matmul": lambda: synth.matmul16(n=32),
    "stencil": lambda: synth.stencil7(64, 16, 4),
}


@pytest.fixture(scope="module", params=sorted(SMALL))
def small(request: pytest.FixtureRequest) -> Trace:
    return SMALL[request.param]()


def test_ops_point_at_their_source_lines(small: Trace) -> None:
    assert len(small.sources) == 1
    src = small.sources[0]
    assert src.text == (ROOT / "demo_traces" / src.name).read_text()
    lines = src.text.splitlines()
    for o in small.ops:
        assert o.file == src.name and o.kernel == small.launch.kernel
        assert lines[o.line - 1][o.column - 1:].startswith(o.label), (o.label, o.line)
        assert o.bytes in (4, 16)


def test_cta_records_agree_with_the_trace(small: Trace) -> None:
    per_cta = np.bincount(small.warp_cta[access_warp(small)], minlength=small.snapshot.n_ctas)
    assert np.array_equal(small.ctas.accesses[small.snapshot.cta_ids], per_cta)
    assert small.ctas.insts.shape == (small.launch.grid_ctas,) and np.all(small.ctas.insts > 0)
    assert np.all(small.ctas.insts >= small.ctas.accesses)
    gen = small.provenance.generator
    assert all(b % 256 == 0 for b in gen["arrays"].values())


def test_builds_are_deterministic() -> None:
    a, b = synth.spmv("block", **SPMV), synth.spmv("block", **SPMV)
    assert np.array_equal(a.addr, b.addr) and np.array_equal(a.mask, b.mask) and np.array_equal(a.op, b.op)


@needs_compiler
@pytest.mark.parametrize("name", ["vecadd.cu", "spmv.cu", "transpose.cu", "matmul.cu", "stencil.cu"])
def test_demo_sources_compile(name: str, tmp_path: Path) -> None:
    assert ".entry" in compile_ptx(ROOT / "demo_traces" / name, 75, tmp_path / "k.ptx")
