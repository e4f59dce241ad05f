"""The models, one class per kernel of ``demo_traces/*.cu``: vecadd, the scalar and vectorized
CSR SpMV (Baghsorkhi12 sec. 6.2), the naive and tiled transposes, the 16x16 tiled matmul and the
7-point stencil."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from tuiprof.trace.synth.build import Kernel, OpSpec, Sink, Warps, allocate, lane_addr, loop, seq_key

# ---------------------------------------------------------------------------------------------
# vecadd: Yen14, Table 3

class VecAdd(Kernel):
    """``C[id] = A[id] + B[id]`` over int arrays, one thread per element (Yen14, Table 3).

    Instructions per warp: the whole kernel is one PTX block of 19 instructions.
    """

    name, source, registers = "kernel_vec_add", "vecadd.cu", 12
    specs = {"A": OpSpec("A[id]", starts=True), "B": OpSpec("B[id]"), "C": OpSpec("C[id]", kind="store")}
    INSTS = 19

    def __init__(self, n: int, block: int) -> None:
        super().__init__()
        if n % block:
            raise ValueError("the kernel has no bounds check: n must be a multiple of the block size")
        self.n, self.block = n, block
        self.base = allocate({"A": 4 * n, "B": 4 * n, "C": 4 * n})

    def emit(self, w: Warps, sink: Sink) -> None:
        gid = w.bx * self.block + w.tx
        warp = w.index
        for slot, name in enumerate(("A", "B", "C")):
            sink.access(self.id[name], warp, seq_key(0, 0, slot), w.exists, partial(lane_addr, self.base[name], gid, 4))
        sink.insts(warp, self.INSTS)

    def generator(self) -> dict[str, object]:
        return {"model": "vecadd", "n": self.n, "block": self.block}


# ---------------------------------------------------------------------------------------------
# SpMV: Baghsorkhi12 sec. 6.2, Listings 2 and 3

SPMV_BLOCKSIZE = 256
SPMV_MATRICES: dict[str, tuple[str, int]] = {
    "u": ("random", 32), "b": ("block", 32), "U": ("random", 128), "B": ("block", 128)}
"""Baghsorkhi12 sec. 6.2's matrices: (distribution of the nonzeros, mean nonzeros per row)."""
_ROW_CHUNK = 256


@dataclass(frozen=True)
class CsrPattern:
    """The sparsity pattern of a CSR matrix (values do not change the trace).

    Columns are known for the first `known_rows` rows only: the trace needs them for the
    snapshot's rows, the per-CTA counts of the whole grid need only the row lengths.
    """

    distribution: str
    n_rows: int
    n_cols: int
    mean_nnz: int
    block_width: int
    seed: int
    row_ptr: np.ndarray
    col_ind: np.ndarray
    known_rows: int

    @property
    def row_len(self) -> np.ndarray:
        return np.diff(self.row_ptr)

    def columns(self, j: np.ndarray) -> np.ndarray:
        """Column indices ``indices[j]`` (j must lie in the known rows)."""
        if j.size and int(j.max()) >= self.col_ind.shape[0]:
            raise IndexError("column indices requested beyond the generated rows")
        return self.col_ind[j]


def csr_pattern(distribution: str, n_rows: int, n_cols: int, mean_nnz: int, seed: int,
                known_rows: int | None = None, block_width: int | None = None) -> CsrPattern:
    """A deterministic CSR pattern in the manner of Baghsorkhi12 sec. 6.2.

    Row lengths are uniform in [mean/2, 3 mean/2]. Each row's columns are distinct and sorted:
    uniform over all columns (``random``), or within the diagonal block holding the row
    (``block``: block b of `block_width` rows owns columns ``[(b * width) mod n_cols, + width)``,
    wrapping when there are more rows than columns). Rows are generated in chunks of 256, each
    from its own seeded stream, so any prefix of rows is the same whatever `known_rows` is.
    """
    if distribution not in ("random", "block"):
        raise ValueError(f"unknown distribution {distribution!r}")
    lo, hi = mean_nnz // 2, mean_nnz * 3 // 2
    width = block_width or 2 * mean_nnz
    span = n_cols if distribution == "random" else width
    if hi > span or (distribution == "block" and n_cols % width):
        raise ValueError("rows do not fit: need 3*mean/2 <= columns (or block width dividing n_cols)")
    lengths = np.random.default_rng([seed, 0]).integers(lo, hi + 1, size=n_rows)
    row_ptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=row_ptr[1:])
    n_chunks = -(-min(n_rows if known_rows is None else max(known_rows, 0), n_rows) // _ROW_CHUNK)
    chunks = [np.zeros(0, np.int64)]
    for c in range(n_chunks):
        rows = np.arange(c * _ROW_CHUNK, min((c + 1) * _ROW_CHUNK, n_rows))
        lens = lengths[rows]
        m = int(lens.max())
        # Sorted draws with replacement from [0, span - len], plus 0..len-1: distinct, sorted, in range.
        u = np.random.default_rng([seed, 1, c]).random((rows.shape[0], m))
        draws = np.floor(u * (span - lens + 1)[:, None]).astype(np.int64)
        valid = np.arange(m) < lens[:, None]
        draws[~valid] = np.iinfo(np.int64).max // 2
        draws.sort(axis=1)
        first = 0 if distribution == "random" else (rows // width * width) % n_cols
        cols = draws + np.arange(m) + np.reshape(first, (-1, 1))
        chunks.append(cols[valid])
    known = min(n_chunks * _ROW_CHUNK, n_rows)
    return CsrPattern(distribution, n_rows, n_cols, mean_nnz, width, seed, row_ptr, np.concatenate(chunks), known)


class _Spmv(Kernel):
    """What the scalar and vectorized CSR kernels share: one thread per row ``myi``, the loads
    of ``rowIndices[myi]`` and ``rowIndices[myi + 1]``, the store of ``x[myi]``, and scalar
    loops over a range of nonzeros (``indices[j]``, ``val[j]``, then the dependent ``y[ind]``)."""

    source = "spmv.cu"

    def __init__(self, matrix: CsrPattern) -> None:
        super().__init__()
        self.matrix = matrix
        nnz = int(matrix.row_ptr[-1])
        self.base = allocate({"rowIndices": 4 * (matrix.n_rows + 1), "indices": 4 * nnz, "val": 4 * nnz,
                              "y": 4 * matrix.n_cols, "x": 4 * matrix.n_rows})

    def rows(self, w: Warps) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(row, in range, lb, ub) per lane; lb = ub = 0 outside the matrix."""
        row = w.cta * SPMV_BLOCKSIZE + w.tid
        inr = w.exists & (row < self.matrix.n_rows)
        safe = np.where(inr, row, 0)
        lb = np.where(inr, self.matrix.row_ptr[safe], 0)
        ub = np.where(inr, self.matrix.row_ptr[safe + 1], 0)
        return row, inr, lb, ub

    def emit_bounds(self, w: Warps, sink: Sink, row: np.ndarray, inr: np.ndarray) -> None:
        base = self.base["rowIndices"]
        sink.access(self.id["lb"], w.index, seq_key(0, 0, 0), inr, partial(lane_addr, base, row, 4))
        sink.access(self.id["ub"], w.index, seq_key(0, 0, 1), inr, partial(lane_addr, base, row + 1, 4))

    def emit_store(self, w: Warps, sink: Sink, phase: int, row: np.ndarray, inr: np.ndarray) -> None:
        sink.access(self.id["x"], w.index, seq_key(phase), inr, partial(lane_addr, self.base["x"], row, 4))

    def emit_scalar_loop(self, sink: Sink, phase: int, names: tuple[str, str, str],
                         first: np.ndarray, trips: np.ndarray) -> np.ndarray:
        """Lanes run j = first .. first + trips - 1; returns each warp's iteration count."""
        warp, k, active = loop(trips)
        j = first[warp] + k[:, None]
        key = seq_key(phase, k)
        ind, val, y = (self.id[n] for n in names)
        sink.access(ind, warp, key, active, partial(lane_addr, self.base["indices"], j, 4))
        sink.access(val, warp, key + 1, active, partial(lane_addr, self.base["val"], j, 4))
        sink.access(y, warp, key + 2, active, partial(self._y_addr, j, active))
        return trips.max(axis=1)

    def _y_addr(self, j: np.ndarray, active: np.ndarray) -> np.ndarray:
        return lane_addr(self.base["y"], self.matrix.columns(np.where(active, j, 0)), 4)

    def generator(self) -> dict[str, object]:
        m = self.matrix
        return {"model": self.name, "distribution": m.distribution, "rows": m.n_rows, "cols": m.n_cols,
                "mean_nnz": m.mean_nnz, "block_width": m.block_width if m.distribution == "block" else 0,
                "row_nnz": [m.mean_nnz // 2, m.mean_nnz * 3 // 2], "seed": m.seed, "nnz": int(m.row_ptr[-1])}


class SpmvScalar(_Spmv):
    """Scalar CSR SpMV, Baghsorkhi12 Listing 2.

    Instructions per warp (PTX blocks): 12 entry + 1 exit always; 12 (bounds loads) + 4 (store)
    if any lane has a row; 7 (loop preheader) if any lane has nonzeros; 11 per loop iteration.
    """

    name, registers = "spmv_csr_scalar", 20
    specs = {"lb": OpSpec("rowIndices[myi]", starts=True), "ub": OpSpec("rowIndices[myi + 1]"),
             "ind": OpSpec("indices[j]", starts=True), "val": OpSpec("val[j]"),
             "y": OpSpec("y[ind]", starts=True), "x": OpSpec("x[myi]", kind="store")}

    def emit(self, w: Warps, sink: Sink) -> None:
        row, inr, lb, ub = self.rows(w)
        self.emit_bounds(w, sink, row, inr)
        iters = self.emit_scalar_loop(sink, 1, ("ind", "val", "y"), lb, ub - lb)
        self.emit_store(w, sink, 2, row, inr)
        sink.insts(w.index, 13 + 16 * inr.any(axis=1) + 7 * (iters > 0) + 11 * iters)


class SpmvVector(_Spmv):
    """Vectorized CSR SpMV, Baghsorkhi12 Listing 3: a scalar prologue up to the first multiple of
    4, uint4 ``indices4[j / 4]`` and float4 ``val4[j / 4]`` loads (16 bytes per lane) feeding
    four ``y[]`` loads per iteration, and a scalar epilogue for the last ``ub % 4`` nonzeros.

    Instructions per warp (PTX blocks): 15 entry + 1 exit always; 17 + 2 + 2 + 4 if any lane has
    a row; prologue 4 if run + 11 per iteration; main loop 25 per iteration; epilogue 3 if run
    + 11 per iteration.
    """

    name, registers = "spmv_csr_vector4", 26
    specs = {"lb": OpSpec("rowIndices[myi]", starts=True), "ub": OpSpec("rowIndices[myi + 1]"),
             "p_ind": OpSpec("indices[j]", starts=True), "p_val": OpSpec("val[j]"),
             "p_y": OpSpec("y[ind]", starts=True),
             "ind4": OpSpec("indices4[j / 4]", bytes=16, starts=True), "val4": OpSpec("val4[j / 4]", bytes=16),
             "y_x": OpSpec("y[ind.x]", starts=True), "y_y": OpSpec("y[ind.y]"),
             "y_z": OpSpec("y[ind.z]"), "y_w": OpSpec("y[ind.w]"),
             "e_ind": OpSpec("indices[j]", starts=True, occurrence=1), "e_val": OpSpec("val[j]", occurrence=1),
             "e_y": OpSpec("y[ind]", starts=True, occurrence=1), "x": OpSpec("x[myi]", kind="store")}

    def emit(self, w: Warps, sink: Sink) -> None:
        row, inr, lb, ub = self.rows(w)
        newlb = np.minimum((lb + 3) & ~3, ub)
        newub = np.maximum(ub & ~3, newlb)
        self.emit_bounds(w, sink, row, inr)
        pro = self.emit_scalar_loop(sink, 1, ("p_ind", "p_val", "p_y"), lb, newlb - lb)
        warp, k, active = loop((newub - newlb) // 4)
        j = newlb[warp] + 4 * k[:, None]
        key = seq_key(2, k)
        sink.access(self.id["ind4"], warp, key, active, partial(lane_addr, self.base["indices"], j, 4))
        sink.access(self.id["val4"], warp, key + 1, active, partial(lane_addr, self.base["val"], j, 4))
        for c, name in enumerate(("y_x", "y_y", "y_z", "y_w")):
            sink.access(self.id[name], warp, key + 2 + c, active, partial(self._y_addr, j + c, active))
        main = ((newub - newlb) // 4).max(axis=1)
        epi = self.emit_scalar_loop(sink, 3, ("e_ind", "e_val", "e_y"), newub, ub - newub)
        self.emit_store(w, sink, 4, row, inr)
        sink.insts(w.index, 16 + 25 * inr.any(axis=1) + 4 * (pro > 0) + 11 * pro + 25 * main
                   + 3 * (epi > 0) + 11 * epi)


# ---------------------------------------------------------------------------------------------
# Matrix transpose (M. Harris, "An Efficient Matrix Transpose in CUDA C/C++")

TILE_DIM, BLOCK_ROWS = 32, 8


class _Transpose(Kernel):
    """Shared geometry: 32x8 threads per CTA, each moving 4 elements of a 32x32 tile."""

    source = "transpose.cu"

    def __init__(self, n: int) -> None:
        super().__init__()
        if n % TILE_DIM:
            raise ValueError(f"the matrix width must be a multiple of {TILE_DIM}")
        self.n = n
        self.base = allocate({"idata": 4 * n * n, "odata": 4 * n * n})

    def row_steps(self, w: Warps) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The loop ``for (j = 0; j < TILE_DIM; j += BLOCK_ROWS)``: (warp, iteration, j, active)."""
        warp, it, act = loop(np.where(w.exists, TILE_DIM // BLOCK_ROWS, 0))
        return warp, it, BLOCK_ROWS * it[:, None], act

    def generator(self) -> dict[str, object]:
        return {"model": self.name, "n": self.n, "tile": TILE_DIM, "block_rows": BLOCK_ROWS}


class TransposeNaive(_Transpose):
    """Naive transpose: coalesced loads of ``idata``, stores to ``odata`` strided by the width.

    Instructions per warp: one PTX block of 34 (the loop is fully unrolled).
    """

    name, registers = "transpose_naive", 20
    specs = {"in": OpSpec("idata[(y + j) * width + x]", starts=True),
             "out": OpSpec("odata[x * width + (y + j)]", kind="store")}

    def emit(self, w: Warps, sink: Sink) -> None:
        warp, it, j, act = self.row_steps(w)
        x, y = w.bx[warp] * TILE_DIM + w.tx[warp], w.by[warp] * TILE_DIM + w.ty[warp]
        sink.access(self.id["in"], warp, seq_key(0, it, 0), act,
                    partial(lane_addr, self.base["idata"], (y + j) * self.n + x, 4))
        sink.access(self.id["out"], warp, seq_key(0, it, 1), act,
                    partial(lane_addr, self.base["odata"], x * self.n + y + j, 4))
        sink.insts(w.index, 34)


class TransposeTiled(_Transpose):
    """Tiled transpose through ``tile[32][33]`` in shared memory (one column of padding against
    bank conflicts), with ``__syncthreads()`` between the two phases; shared accesses recorded.

    Instructions per warp: one PTX block of 55 (both loops fully unrolled).
    """

    name, registers, static_shared = "transpose_tiled", 26, 4 * TILE_DIM * (TILE_DIM + 1)
    specs = {"in": OpSpec("idata[(y + j) * width + x]", starts=True),
             "tile_st": OpSpec("tile[threadIdx.y + j][threadIdx.x]", kind="store", space="shared"),
             "tile_ld": OpSpec("tile[threadIdx.x][threadIdx.y + j]", space="shared", starts=True),
             "out": OpSpec("odata[(y + j) * width + x]", kind="store")}

    def emit(self, w: Warps, sink: Sink) -> None:
        pitch = TILE_DIM + 1
        warp, it, j, act = self.row_steps(w)
        tx, ty = w.tx[warp], w.ty[warp]
        x, y = w.bx[warp] * TILE_DIM + tx, w.by[warp] * TILE_DIM + ty
        sink.access(self.id["in"], warp, seq_key(0, it, 0), act,
                    partial(lane_addr, self.base["idata"], (y + j) * self.n + x, 4))
        sink.access(self.id["tile_st"], warp, seq_key(0, it, 1), act, partial(lane_addr, 0, (ty + j) * pitch + tx, 4))
        x2, y2 = w.by[warp] * TILE_DIM + tx, w.bx[warp] * TILE_DIM + ty
        sink.access(self.id["tile_ld"], warp, seq_key(1, it, 0), act, partial(lane_addr, 0, tx * pitch + ty + j, 4))
        sink.access(self.id["out"], warp, seq_key(1, it, 1), act,
                    partial(lane_addr, self.base["odata"], (y2 + j) * self.n + x2, 4))
        sink.insts(w.index, 55)


# ---------------------------------------------------------------------------------------------
# Dense matrix multiply, 16x16 shared-memory tiles (CUDA samples, matrixMul)

MATMUL_BLOCK = 16


class Matmul16(Kernel):
    """``C = A B`` (n x n floats) with 16x16 tiles of A and B staged in shared ``As``/``Bs``.

    Per K-tile t every thread loads ``A[a + wA * ty + tx]`` and ``B[b + wB * ty + tx]`` into
    its tile slots, then (after ``__syncthreads()``) reads ``Bs[k][tx]`` and ``As[ty][k]`` for
    k = 0..15 (the unrolled loop loads Bs first). With ``record_shared=False`` only the global
    accesses are emitted. Instructions per warp (PTX blocks): 16 entry + 23 preheader + 59 per
    K-tile + 1 loop exit + 8 exit.
    """

    name, source, registers = "matmul16", "matmul.cu", 39
    static_shared = 2 * 4 * MATMUL_BLOCK * MATMUL_BLOCK
    specs = {"A": OpSpec("A[a + wA * ty + tx]", starts=True),
             "As_st": OpSpec("As[ty][tx]", kind="store", space="shared"),
             "B": OpSpec("B[b + wB * ty + tx]"),
             "Bs_st": OpSpec("Bs[ty][tx]", kind="store", space="shared"),
             "Bs_ld": OpSpec("Bs[k][tx]", space="shared", starts=True),
             "As_ld": OpSpec("As[ty][k]", space="shared"),
             "C": OpSpec("C[c + wB * ty + tx]", kind="store")}

    def __init__(self, n: int, record_shared: bool = True) -> None:
        super().__init__()
        if n % MATMUL_BLOCK:
            raise ValueError(f"n must be a multiple of {MATMUL_BLOCK}")
        self.n, self.record_shared = n, record_shared
        self.base = allocate({"A": 4 * n * n, "B": 4 * n * n, "C": 4 * n * n})

    def emit(self, w: Warps, sink: Sink) -> None:
        n, bs = self.n, MATMUL_BLOCK
        tiles = n // bs
        warp, t, act = loop(np.where(w.exists, tiles, 0))
        tx, ty, bx, by = w.tx[warp], w.ty[warp], w.bx[warp], w.by[warp]
        a = n * bs * by + bs * t[:, None]
        b = bs * bx + bs * n * t[:, None]
        As, Bs = 0, 4 * bs * bs
        sink.access(self.id["A"], warp, seq_key(0, t, 0), act, partial(lane_addr, self.base["A"], a + n * ty + tx, 4))
        if self.record_shared:
            sink.access(self.id["As_st"], warp, seq_key(0, t, 1), act, partial(lane_addr, As, ty * bs + tx, 4))
        sink.access(self.id["B"], warp, seq_key(0, t, 2), act, partial(lane_addr, self.base["B"], b + n * ty + tx, 4))
        if self.record_shared:
            sink.access(self.id["Bs_st"], warp, seq_key(0, t, 3), act, partial(lane_addr, Bs, ty * bs + tx, 4))
            for k in range(bs):
                sink.access(self.id["Bs_ld"], warp, seq_key(0, t, 4 + 2 * k), act,
                            partial(lane_addr, Bs, k * bs + tx, 4))
                sink.access(self.id["As_ld"], warp, seq_key(0, t, 5 + 2 * k), act,
                            partial(lane_addr, As, ty * bs + k, 4))
        c = (n * bs * w.by + bs * w.bx) + n * w.ty + w.tx
        sink.access(self.id["C"], w.index, seq_key(1), w.exists, partial(lane_addr, self.base["C"], c, 4))
        sink.insts(w.index, 16 + 23 + 59 * tiles + 1 + 8)

    def generator(self) -> dict[str, object]:
        return {"model": "matmul16", "n": self.n, "tile": MATMUL_BLOCK, "record_shared": self.record_shared}


# ---------------------------------------------------------------------------------------------
# 7-point 3D stencil

STENCIL_BLOCK = (32, 8, 1)


class Stencil7(Kernel):
    """7-point Jacobi stencil, one thread per grid point: 32x8 CTAs tile an xy-plane and
    ``blockIdx.z`` picks the plane (the basic form of Parboil's stencil). Boundary points
    (i, j or k on the faces) are masked off. Loads in PTX order: ``in[idx - nx]``,
    ``in[idx - nx * ny]``, ``in[idx - 1]``, ``in[idx + 1]``, ``in[idx + nx]``,
    ``in[idx + nx * ny]``, ``in[idx]``, then the store ``out[idx]``.

    Instructions per warp (PTX blocks): 31 bounds test + 1 exit always; 36 if any lane is interior.
    """

    name, source, registers = "stencil7", "stencil.cu", 18
    specs = {"ym": OpSpec("in[idx - nx]", starts=True), "zm": OpSpec("in[idx - nx * ny]"),
             "xm": OpSpec("in[idx - 1]"), "xp": OpSpec("in[idx + 1]"), "yp": OpSpec("in[idx + nx]"),
             "zp": OpSpec("in[idx + nx * ny]"), "c": OpSpec("in[idx]"), "out": OpSpec("out[idx]", kind="store")}

    def __init__(self, nx: int, ny: int, nz: int) -> None:
        super().__init__()
        self.shape = (nx, ny, nz)
        self.base = allocate({"in": 4 * nx * ny * nz, "out": 4 * nx * ny * nz})

    def emit(self, w: Warps, sink: Sink) -> None:
        nx, ny, nz = self.shape
        i = w.bx * STENCIL_BLOCK[0] + w.tx
        j = w.by * STENCIL_BLOCK[1] + w.ty
        k = w.bz
        act = w.exists & (i > 0) & (i < nx - 1) & (j > 0) & (j < ny - 1) & (k > 0) & (k < nz - 1)
        idx = (k * ny + j) * nx + i
        offsets = {"ym": -nx, "zm": -nx * ny, "xm": -1, "xp": 1, "yp": nx, "zp": nx * ny, "c": 0}
        for slot, (name, off) in enumerate(offsets.items()):
            sink.access(self.id[name], w.index, seq_key(0, 0, slot), act,
                        partial(lane_addr, self.base["in"], idx + off, 4))
        sink.access(self.id["out"], w.index, seq_key(0, 0, 7), act, partial(lane_addr, self.base["out"], idx, 4))
        sink.insts(w.index, 32 + 36 * act.any(axis=1))

    def generator(self) -> dict[str, object]:
        nx, ny, nz = self.shape
        return {"model": "stencil7", "nx": nx, "ny": ny, "nz": nz, "block": list(STENCIL_BLOCK)}
