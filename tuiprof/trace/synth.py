"""Synthetic workloads: exact NumPy models of the kernels in ``demo_traces/*.cu``.

Each model emits, warp by warp, the memory accesses its kernel makes (paper 000 sec. 4.2: op id,
active mask, 32 lane addresses), tied to the source line of each access. Models are vectorised
over warps and loop iterations, so the largest demo builds in seconds.

Conventions shared by every model:

- *Program order* within a warp is the order of the memory instructions in nvcc 13's PTX for
  ``-arch=sm_75`` (what the GPU and emulator backends record): for example the scalar SpMV loop
  loads ``indices[j]``, ``val[j]``, then ``y[ind]``. Loops are followed at source level, one
  dynamic iteration after another; a divergent warp runs a loop body while any lane still
  iterates, with the finished lanes masked off (SIMT).
- *Bulk sequences* (paper 000 sec. 2, 3.2.2): ``starts_sequence`` marks the first op of the
  kernel, the first op of a loop body (back-edge), the first op after ``__syncthreads()``, and
  a load whose address depends on a load of the current sequence (``y[ind]``).
- *Addresses*: each global array gets a cudaMalloc-like base on a 2 MiB boundary from
  ``0x7f0000000000``, with at least 2 MiB unused between arrays; shared-memory ops address the
  CTA's shared window from 0.
- *Snapshot* (paper 000 sec. 3.1): consecutive CTAs from CTA 0, normally 4 x the CTAs resident
  at once on all SMs at the kernel's occupancy; `Snapshot.rule` says when a demo uses fewer.
- *Per-CTA records* for the whole grid: ``accesses`` are counted by running the same model over
  every CTA without addresses; ``insts`` (dynamic warp instructions) weight each basic block of
  the kernel's PTX by how often the warp runs it (a block runs once per warp if any lane runs
  it). The block sizes are counted from nvcc 13.0 ``-arch=sm_75`` PTX; they are an estimate of
  the SASS a real GPU executes.
- *Registers* per thread are ptxas's (nvcc 13.0 ``-arch=sm_75 -Xptxas -v``; nvcc 13 no longer
  targets sm_70 or Fermi), and ``launch.ctas_per_sm`` is the occupancy on the target arch.
"""

from __future__ import annotations

import datetime
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Callable, Protocol

import numpy as np

from tuiprof import __version__
from tuiprof.arch import load_arch
from tuiprof.arch.model import Arch
from tuiprof.arch.occupancy import occupancy
from tuiprof.errors import UsageError
from tuiprof.resources import data_dir
from tuiprof.trace.model import (LANES, CtaRecords, Launch, Provenance, Snapshot, SourceFile,
                                 StaticOp, Trace)

ARRAY_BASE = 0x7F00_0000_0000
"""Where the first global array starts (a typical cudaMalloc address on Linux x86-64)."""
ARRAY_ALIGN = 2 << 20
"""Global arrays start on 2 MiB boundaries (cudaMalloc aligns to at least 256 B)."""
PAPER_WAVES = 4.0
"""Paper 000 sec. 3.1 / 5.3: the snapshot is 4 x the threads running at once on all SMs."""

AddrFn = Callable[[], np.ndarray]
"""Lazily computed lane addresses ([n, 32] integers; inactive lanes may hold anything)."""


# ---------------------------------------------------------------------------------------------
# Address and lane helpers

def allocate(sizes: dict[str, int], start: int = ARRAY_BASE) -> dict[str, int]:
    """cudaMalloc-like base addresses for arrays of the given byte sizes, in order."""
    bases: dict[str, int] = {}
    at = start
    for name, size in sizes.items():
        bases[name] = at
        at = -(-(at + size + ARRAY_ALIGN) // ARRAY_ALIGN) * ARRAY_ALIGN
    return bases


def lane_addr(base: int, index: np.ndarray, elem_bytes: int) -> np.ndarray:
    """``base + elem_bytes * index`` lane by lane, as int64."""
    return np.int64(base) + np.int64(elem_bytes) * index.astype(np.int64)


def mask_bits(active: np.ndarray) -> np.ndarray:
    """Active-lane bool [n, 32] -> uint32 masks (bit i = lane i)."""
    packed = np.packbits(active, axis=1, bitorder="little")
    return np.ascontiguousarray(packed).view("<u4")[:, 0].astype(np.uint32)


def loop(trips: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dynamic iterations of a loop whose lane i of warp w runs ``trips[w, i]`` times.

    A warp runs the body while any lane still iterates (SIMT), so it runs it ``trips[w].max()``
    times, iteration k active in the lanes with ``trips > k``. Returns ``(warp [n], k [n],
    active [n, 32])`` for every dynamic iteration, warp-major.
    """
    per_warp = trips.max(axis=1) if trips.size else np.zeros(trips.shape[0], np.int64)
    per_warp = per_warp.astype(np.int64)
    warp = np.repeat(np.arange(per_warp.shape[0], dtype=np.int64), per_warp)
    start = np.cumsum(per_warp) - per_warp
    k = np.arange(warp.shape[0], dtype=np.int64) - np.repeat(start, per_warp)
    active = trips[warp] > k[:, None]
    return warp, k, active


def seq_key(phase: int, it: np.ndarray | int = 0, slot: int = 0) -> np.ndarray | int:
    """Order key of an access within its warp: program phase, then loop iteration, then slot."""
    return (phase << 40) + it * 4096 + slot


@dataclass(frozen=True)
class Warps:
    """The warps of some CTAs with per-lane thread coordinates ([W, 32]) and per-warp CTA
    coordinates ([W, 1]); warps are numbered CTA by CTA, ``warps_per_cta`` each."""

    cta: np.ndarray
    tid: np.ndarray
    tx: np.ndarray
    ty: np.ndarray
    tz: np.ndarray
    bx: np.ndarray
    by: np.ndarray
    bz: np.ndarray
    exists: np.ndarray
    """Lane holds a thread (false past the end of a CTA whose size is not a multiple of 32)."""
    warps_per_cta: int

    @property
    def n(self) -> int:
        return int(self.tid.shape[0])

    @property
    def index(self) -> np.ndarray:
        """Warp numbers 0..n-1, int64."""
        return np.arange(self.n, dtype=np.int64)


def cta_warps(grid: tuple[int, int, int], block: tuple[int, int, int], cta_ids: np.ndarray) -> Warps:
    """Thread and CTA coordinates of every lane of the CTAs `cta_ids` (linear ids, x fastest)."""
    threads = block[0] * block[1] * block[2]
    wpc = -(-threads // LANES)
    cta = np.repeat(np.asarray(cta_ids, dtype=np.int64), wpc)[:, None]
    tid = (np.arange(wpc * LANES, dtype=np.int64).reshape(wpc, LANES)[None, :, :]
           .repeat(len(cta_ids), axis=0).reshape(-1, LANES))
    return Warps(cta=cta, tid=tid,
                 tx=tid % block[0], ty=tid // block[0] % block[1], tz=tid // (block[0] * block[1]),
                 bx=cta % grid[0], by=cta // grid[0] % grid[1], bz=cta // (grid[0] * grid[1]),
                 exists=tid < threads, warps_per_cta=wpc)


# ---------------------------------------------------------------------------------------------
# Sinks: where a model's accesses go (a trace for the snapshot, per-CTA counts for the grid)

class Sink(Protocol):
    def access(self, op: int, warp: np.ndarray, key: np.ndarray | int, active: np.ndarray,
               addr: AddrFn) -> None:
        """Warp ``warp[i]`` executes op `op` with lanes ``active[i]`` at ``addr()[i]``."""

    def insts(self, warp: np.ndarray, count: np.ndarray | int) -> None:
        """Warp ``warp[i]`` executes ``count[i]`` more warp instructions."""


@dataclass
class _Piece:
    op: int
    warp: np.ndarray
    key: np.ndarray
    active: np.ndarray
    addr: AddrFn


def _rows(addr: AddrFn, keep: np.ndarray) -> np.ndarray:
    return addr()[keep]


class TraceSink:
    """Collects accesses, then lays them out warp by warp in program order (by key)."""

    def __init__(self, n_warps: int) -> None:
        self.n_warps = n_warps
        self._pieces: list[_Piece] = []

    def access(self, op: int, warp: np.ndarray, key: np.ndarray | int, active: np.ndarray,
               addr: AddrFn) -> None:
        keys = np.broadcast_to(np.asarray(key, dtype=np.int64), warp.shape)
        keep = active.any(axis=1)
        if not keep.all():  # a warp whose lanes all skip the access records nothing
            warp, keys, active = warp[keep], keys[keep], active[keep]
            addr = partial(_rows, addr, keep)
        if warp.shape[0]:
            self._pieces.append(_Piece(op, warp, keys, active, addr))

    def insts(self, warp: np.ndarray, count: np.ndarray | int) -> None:
        pass

    def build(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(warp_offsets, op, mask, addr) in the layout of `Trace`."""
        pieces, self._pieces = self._pieces, []
        warp = np.concatenate([p.warp for p in pieces]) if pieces else np.zeros(0, np.int64)
        key = np.concatenate([p.key for p in pieces]) if pieces else np.zeros(0, np.int64)
        n = warp.shape[0]
        order = np.lexsort((key, warp))
        sw, sk = warp[order], key[order]
        if n > 1 and np.any((sw[1:] == sw[:-1]) & (sk[1:] == sk[:-1])):
            raise RuntimeError("synthetic model emitted two accesses with the same order key")
        dest = np.empty(n, dtype=np.int64)
        dest[order] = np.arange(n, dtype=np.int64)
        op = np.empty(n, dtype=np.int32)
        mask = np.empty(n, dtype=np.uint32)
        addr = np.zeros((n, LANES), dtype=np.uint64)
        at = 0
        for p in pieces:
            d = dest[at:at + p.warp.shape[0]]
            at += p.warp.shape[0]
            op[d] = p.op
            mask[d] = mask_bits(p.active)
            addr[d] = np.where(p.active, p.addr(), 0).astype(np.uint64)
        offsets = np.zeros(self.n_warps + 1, dtype=np.int64)
        np.cumsum(np.bincount(warp, minlength=self.n_warps), out=offsets[1:])
        return offsets, op, mask, addr


class CountSink:
    """Per-CTA warp accesses and warp instructions; addresses are never computed."""

    def __init__(self, n_ctas: int, warps_per_cta: int) -> None:
        self.cta_accesses = np.zeros(n_ctas, dtype=np.int64)
        self.cta_insts = np.zeros(n_ctas, dtype=np.int64)
        self._wpc = warps_per_cta
        self._first = 0
        self._n = n_ctas

    def chunk(self, first_cta: int, n_ctas: int) -> None:
        """The next warps passed in belong to CTAs ``first_cta ..`` (warp 0 = its warp 0)."""
        self._first, self._n = first_cta, n_ctas

    def access(self, op: int, warp: np.ndarray, key: np.ndarray | int, active: np.ndarray,
               addr: AddrFn) -> None:
        cta = warp[active.any(axis=1)] // self._wpc
        self.cta_accesses[self._first:self._first + self._n] += np.bincount(cta, minlength=self._n)

    def insts(self, warp: np.ndarray, count: np.ndarray | int) -> None:
        weights = np.broadcast_to(np.asarray(count, dtype=np.float64), warp.shape)
        per = np.bincount(warp // self._wpc, weights=weights, minlength=self._n)
        self.cta_insts[self._first:self._first + self._n] += np.rint(per).astype(np.int64)


# ---------------------------------------------------------------------------------------------
# Kernels: source files, static ops, launch resources

@lru_cache(maxsize=None)
def kernel_source(name: str) -> str:
    """The text of ``demo_traces/<name>``."""
    return (data_dir("demo_traces") / name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class OpSpec:
    """A memory instruction found in a kernel's source by its accessed expression."""

    label: str
    kind: str = "load"
    space: str = "global"
    bytes: int = 4
    starts: bool = False
    occurrence: int = 0
    """Which line containing `label` within the kernel (0 = first)."""


def locate(source: str, kernel: str, label: str, occurrence: int = 0) -> tuple[int, int]:
    """1-based (line, column) of the `occurrence`-th line of `kernel`'s body containing `label`."""
    lines = source.splitlines()
    start = next(i for i, s in enumerate(lines) if f" {kernel}(" in s and "__global__" in s)
    end = next((i for i in range(start + 1, len(lines)) if "__global__" in lines[i]), len(lines))
    found = [i for i in range(start + 1, end) if label in lines[i]]
    if occurrence >= len(found):
        raise LookupError(f"{label!r} (occurrence {occurrence}) not found in kernel {kernel}")
    i = found[occurrence]
    return i + 1, lines[i].index(label) + 1


class Kernel(ABC):
    """A kernel model: its source, resources, static ops (in program order) and emitter."""

    name: str
    source: str
    registers: int
    """ptxas, nvcc 13.0 -arch=sm_75 -Xptxas -v."""
    static_shared: int = 0
    specs: dict[str, OpSpec]

    def __init__(self) -> None:
        self.id = {name: i for i, name in enumerate(self.specs)}
        self.base: dict[str, int] = {}
        """Base address of each global array, by its name in the source."""

    def ops(self) -> tuple[StaticOp, ...]:
        text = kernel_source(self.source)
        out = []
        for i, s in enumerate(self.specs.values()):
            line, col = locate(text, self.name, s.label, s.occurrence)
            out.append(StaticOp(id=i, kernel=self.name, kind=s.kind, space=s.space, bytes=s.bytes,
                                file=self.source, line=line, column=col, starts_sequence=s.starts,
                                label=s.label))
        return tuple(out)

    @abstractmethod
    def emit(self, w: Warps, sink: Sink) -> None:
        """Emit the accesses and instructions of the warps `w` into `sink`."""

    def generator(self) -> dict[str, object]:
        """Model parameters recorded in the provenance."""
        return {"model": self.name}


# ---------------------------------------------------------------------------------------------
# vecadd: paper 002, Table 3

class VecAdd(Kernel):
    """``C[id] = A[id] + B[id]`` over int arrays, one thread per element (paper 002, Table 3).

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
# SpMV: paper 000 sec. 6.2, Listings 2 and 3

SPMV_BLOCKSIZE = 256
SPMV_MATRICES: dict[str, tuple[str, int]] = {
    "u": ("random", 32), "b": ("block", 32), "U": ("random", 128), "B": ("block", 128)}
"""Paper 000 sec. 6.2's matrices: (distribution of the nonzeros, mean nonzeros per row)."""
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
    """A deterministic CSR pattern in the manner of paper 000 sec. 6.2.

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
    """Scalar CSR SpMV, paper 000 Listing 2.

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
    """Vectorized CSR SpMV, paper 000 Listing 3: a scalar prologue up to the first multiple of
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


# ---------------------------------------------------------------------------------------------
# Assembly: launch, snapshot, trace, per-CTA records

def make_launch(kernel: Kernel | type[Kernel], grid: tuple[int, int, int], block: tuple[int, int, int],
                arch: Arch) -> Launch:
    """The launch with ``ctas_per_sm`` = the kernel's occupancy on `arch`."""
    threads = block[0] * block[1] * block[2]
    md = occupancy(arch, threads, kernel.registers, kernel.static_shared).ctas_per_sm
    return Launch(kernel=kernel.name, grid=grid, block=block, registers_per_thread=kernel.registers,
                  static_shared=kernel.static_shared, dynamic_shared=0, ctas_per_sm=md)


def choose_snapshot(launch: Launch, arch: Arch, waves: float = PAPER_WAVES, ctas: int | None = None,
                    why: str = "") -> Snapshot:
    """Consecutive CTAs from CTA 0 (paper 000 sec. 3.1): `waves` x the CTAs resident at once on
    all SMs (or exactly `ctas`), capped by the grid; the rule is recorded in words."""
    resident = arch.sm_count * launch.ctas_per_sm
    want = ctas if ctas is not None else max(1, int(round(waves * resident)))
    n = min(want, launch.grid_ctas)
    rule = (f"{n} consecutive CTAs from CTA 0 (paper 000 sec. 3.1): {n / resident:.3g} x the {resident} CTAs "
            f"({resident * launch.threads_per_cta} threads) that run at once on the {arch.sm_count} SMs of the "
            f"{arch.name} at {launch.ctas_per_sm} CTAs/SM")
    if want > launch.grid_ctas:
        rule += f"; the whole grid (the rule asked for {want} CTAs)"
    if why:
        rule += f"; {why}"
    return Snapshot(cta_ids=np.arange(n, dtype=np.int64), rule=rule)


def grid_records(kernel: Kernel, launch: Launch, chunk_warps: int = 1 << 14) -> CtaRecords:
    """Modeled warp instructions and warp accesses of every CTA of the grid."""
    wpc = launch.warps_per_cta
    sink = CountSink(launch.grid_ctas, wpc)
    step = max(1, chunk_warps // wpc)
    for first in range(0, launch.grid_ctas, step):
        ids = np.arange(first, min(first + step, launch.grid_ctas), dtype=np.int64)
        sink.chunk(first, ids.shape[0])
        kernel.emit(cta_warps(launch.grid, launch.block, ids), sink)
    return CtaRecords(insts=sink.cta_insts, accesses=sink.cta_accesses)


def assemble(kernel: Kernel, launch: Launch, snapshot: Snapshot, arch_name: str,
             extra: dict[str, object] | None = None) -> Trace:
    """Run `kernel` over the snapshot into a Trace, with per-CTA records for the grid."""
    warps = cta_warps(launch.grid, launch.block, snapshot.cta_ids)
    sink = TraceSink(warps.n)
    kernel.emit(warps, sink)
    offsets, op, mask, addr = sink.build()
    wpc = launch.warps_per_cta
    local = np.arange(warps.n, dtype=np.int64)
    generator = {**kernel.generator(), "arrays": dict(kernel.base), **(extra or {})}
    return Trace(
        launch=launch, ops=kernel.ops(), snapshot=snapshot,
        warp_offsets=offsets, warp_cta=(local // wpc).astype(np.int32), warp_index=(local % wpc).astype(np.int32),
        op=op, mask=mask, addr=addr,
        sources=(SourceFile(kernel.source, kernel_source(kernel.source)),),
        provenance=Provenance(backend="synthetic", arch=arch_name, gpu="", tool_version=__version__,
                              date=datetime.date.today().isoformat(), generator=generator),
        ctas=grid_records(kernel, launch))


# ---------------------------------------------------------------------------------------------
# Builders (parameters for tests; the demos below fix them)

def vecadd(n: int = 20480, block: int = 64, arch: str = "gtx480", waves: float = PAPER_WAVES,
           ctas: int | None = None) -> Trace:
    """Paper 002 Table 3: ``C[id] = A[id] + B[id]``, 64 threads (2 warps) per CTA on the GTX 480."""
    a = load_arch(arch)
    k = VecAdd(n, block)
    launch = make_launch(k, (n // block, 1, 1), (block, 1, 1), a)
    return assemble(k, launch, choose_snapshot(launch, a, waves, ctas), arch)


def spmv(distribution: str = "random", mean_nnz: int = 32, *, vectorized: bool = False,
         n_rows: int = 1 << 17, n_cols: int = 32768, seed: int = 2012, block_width: int | None = None,
         arch: str = "tesla-c2050", waves: float = PAPER_WAVES, ctas: int | None = None) -> Trace:
    """Paper 000 sec. 6.2: scalar (Listing 2) or vectorized (Listing 3) CSR SpMV, 256 threads
    per CTA, one per row, on a matrix of `n_rows` x `n_cols` (see `csr_pattern`)."""
    a = load_arch(arch)
    cls = SpmvVector if vectorized else SpmvScalar
    grid = (-(-n_rows // SPMV_BLOCKSIZE), 1, 1)
    launch = make_launch(cls, grid, (SPMV_BLOCKSIZE, 1, 1), a)  # resources do not depend on the matrix
    snap = choose_snapshot(launch, a, waves, ctas)
    matrix = csr_pattern(distribution, n_rows, n_cols, mean_nnz, seed,
                         known_rows=snap.n_ctas * SPMV_BLOCKSIZE, block_width=block_width)
    kernel = cls(matrix)
    snap_rows = min(snap.n_ctas * SPMV_BLOCKSIZE, n_rows)
    return assemble(kernel, launch, snap, arch, {"snapshot_nnz": int(matrix.row_ptr[snap_rows])})


def transpose(tiled: bool = False, n: int = 2048, arch: str = "v100", waves: float = PAPER_WAVES,
              ctas: int | None = None, why: str = "") -> Trace:
    """Naive or shared-memory tiled transpose of an n x n float matrix, 32x8 threads per CTA."""
    a = load_arch(arch)
    k: Kernel = TransposeTiled(n) if tiled else TransposeNaive(n)
    launch = make_launch(k, (n // TILE_DIM, n // TILE_DIM, 1), (TILE_DIM, BLOCK_ROWS, 1), a)
    return assemble(k, launch, choose_snapshot(launch, a, waves, ctas, why), arch)


def matmul16(n: int = 1024, arch: str = "v100", waves: float = PAPER_WAVES, ctas: int | None = None,
             record_shared: bool = True, why: str = "") -> Trace:
    """16x16-tiled dense matmul of n x n floats (CUDA samples' matrixMul), 256 threads per CTA."""
    a = load_arch(arch)
    k = Matmul16(n, record_shared)
    launch = make_launch(k, (n // MATMUL_BLOCK, n // MATMUL_BLOCK, 1), (MATMUL_BLOCK, MATMUL_BLOCK, 1), a)
    return assemble(k, launch, choose_snapshot(launch, a, waves, ctas, why), arch)


def stencil7(nx: int = 256, ny: int = 256, nz: int = 256, arch: str = "v100", waves: float = PAPER_WAVES,
             ctas: int | None = None, why: str = "") -> Trace:
    """7-point stencil on an nx x ny x nz float grid, one thread per point, 32x8 CTAs per plane."""
    a = load_arch(arch)
    k = Stencil7(nx, ny, nz)
    grid = (-(-nx // STENCIL_BLOCK[0]), -(-ny // STENCIL_BLOCK[1]), nz)
    launch = make_launch(k, grid, STENCIL_BLOCK, a)
    return assemble(k, launch, choose_snapshot(launch, a, waves, ctas, why), arch)


# ---------------------------------------------------------------------------------------------
# The demos: stable CLI names

_SMALLER = "fewer CTAs than the paper's 4 x to keep the shipped trace small"


@dataclass(frozen=True)
class DemoSpec:
    """A shipped demo: its name, kernel file, target arch, what it models, and its builder."""

    name: str
    source: str
    arch: str
    summary: str
    build: Callable[[], Trace] = field(repr=False)
    shipped: bool = True
    """False: too large to keep in the repository (random gathers do not compress: ~15-18 MB);
    built from the model on first use and cached (see `tuiprof.trace.demos`)."""

    def __call__(self) -> Trace:
        return self.build()


_SPMV_DEMOS = {"u": "u", "b": "b", "u128": "U", "b128": "B"}
"""Demo name suffix -> paper 000's matrix letter."""


def _spmv_demo(name: str, matrix: str, vectorized: bool) -> DemoSpec:
    dist, mean = SPMV_MATRICES[matrix]
    shipped = not (dist == "random" and mean > 32)
    kind = "vectorized (Listing 3)" if vectorized else "scalar (Listing 2)"
    what = "random" if dist == "random" else "block-diagonal"
    return DemoSpec(name, "spmv.cu", "tesla-c2050",
                    f"paper 000 sec. 6.2: {kind} CSR SpMV, matrix {matrix} ({mean} nnz/row, {what})",
                    partial(spmv, dist, mean, vectorized=vectorized), shipped)


DEMOS: dict[str, DemoSpec] = {
    "vecadd": DemoSpec("vecadd", "vecadd.cu", "gtx480",
                       "paper 002 Table 3: vector add of 20480 ints, 2 warps per CTA", vecadd),
    **{f"spmv-{suffix}": _spmv_demo(f"spmv-{suffix}", m, False) for suffix, m in _SPMV_DEMOS.items()},
    **{f"spmv-vec-{suffix}": _spmv_demo(f"spmv-vec-{suffix}", m, True) for suffix, m in _SPMV_DEMOS.items()},
    "transpose-naive": DemoSpec("transpose-naive", "transpose.cu", "v100",
                                "naive transpose of a 2048x2048 float matrix (strided stores)",
                                partial(transpose, False, waves=1, why=_SMALLER)),
    "transpose-tiled": DemoSpec("transpose-tiled", "transpose.cu", "v100",
                                "32x32 shared-memory tiled transpose (+1 padding) of a 2048x2048 float matrix",
                                partial(transpose, True, waves=1, why=_SMALLER)),
    "matmul16": DemoSpec("matmul16", "matmul.cu", "v100",
                         "16x16-tiled dense matmul, N = 1024 floats (global accesses only)",
                         partial(matmul16, ctas=128, record_shared=False,
                                 why=_SMALLER + " (2 rows of the 64 x 64 CTA grid); shared-memory accesses "
                                 "not recorded")),
    "stencil7": DemoSpec("stencil7", "stencil.cu", "v100",
                         "7-point 3D stencil on a 256^3 float grid, one thread per point",
                         partial(stencil7, waves=2, why=_SMALLER)),
}


def build_demo(name: str) -> Trace:
    """Build the demo trace `name` (a key of `DEMOS`)."""
    if name not in DEMOS:
        raise UsageError(f"unknown demo {name!r}", "demos are: " + ", ".join(DEMOS))
    return DEMOS[name].build()
