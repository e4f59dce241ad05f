"""From a model to a Trace: the launch at the kernel's occupancy, Baghsorkhi12's snapshot, the
snapshot's accesses, the grid's per-CTA records; and a builder per kernel with its parameters."""

from __future__ import annotations

import datetime

import numpy as np

from tuiprof import __version__
from tuiprof.arch import load_arch
from tuiprof.arch.occupancy import occupancy
from tuiprof.arch.spec import Arch
from tuiprof.trace.data import CtaRecords, Launch, Provenance, Snapshot, SourceFile, Trace
from tuiprof.trace.synth.build import PAPER_WAVES, CountSink, Kernel, TraceSink, cta_warps, kernel_source
from tuiprof.trace.synth.kernels import (
    BLOCK_ROWS,
    MATMUL_BLOCK,
    SPMV_BLOCKSIZE,
    STENCIL_BLOCK,
    TILE_DIM,
    Matmul16,
    SpmvScalar,
    SpmvVector,
    Stencil7,
    TransposeNaive,
    TransposeTiled,
    VecAdd,
    csr_pattern,
)

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
    """Consecutive CTAs from CTA 0 (Baghsorkhi12 sec. 3.1): `waves` x the CTAs resident at once on
    all SMs (or exactly `ctas`), capped by the grid; the rule is recorded in words."""
    resident = arch.sm_count * launch.ctas_per_sm
    want = ctas if ctas is not None else max(1, int(round(waves * resident)))
    n = min(want, launch.grid_ctas)
    rule = (f"{n} consecutive CTAs from CTA 0 (Baghsorkhi12 sec. 3.1): "
            f"{f'{n / resident:.3g} x' if n >= resident else f'{n / resident:.1%} of'} the {resident} CTAs "
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
    """Yen14 Table 3: ``C[id] = A[id] + B[id]``, 64 threads (2 warps) per CTA on the GTX 480."""
    a = load_arch(arch)
    k = VecAdd(n, block)
    launch = make_launch(k, (n // block, 1, 1), (block, 1, 1), a)
    return assemble(k, launch, choose_snapshot(launch, a, waves, ctas), arch)


def spmv(distribution: str = "random", mean_nnz: int = 32, *, vectorized: bool = False,
         n_rows: int = 1 << 17, n_cols: int = 32768, seed: int = 2012, block_width: int | None = None,
         arch: str = "tesla-c2050", waves: float = PAPER_WAVES, ctas: int | None = None) -> Trace:
    """Baghsorkhi12 sec. 6.2: scalar (Listing 2) or vectorized (Listing 3) CSR SpMV, 256 threads
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
