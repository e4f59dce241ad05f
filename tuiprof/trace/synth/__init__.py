"""Synthetic workloads: exact NumPy models of the kernels in ``demo_traces/*.cu``, in four parts:
`build` (array placement, lanes, loops, warps, sinks, the `Kernel` base), `kernels` (one model per
kernel), `assemble` (launch, snapshot, Trace, per-CTA records; a builder per kernel) and `demos`
(the models by their CLI names).

Each model emits, warp by warp, the memory accesses its kernel makes (Baghsorkhi12 sec. 4.2: op id,
active mask, 32 lane addresses), tied to the source line of each access. Models are vectorised
over warps and loop iterations, so the largest demo builds in seconds.

Conventions shared by every model:

- *Program order* within a warp is the order of the memory instructions in nvcc 13's PTX for
  ``-arch=sm_75`` (what the GPU and emulator backends record): for example the scalar SpMV loop
  loads ``indices[j]``, ``val[j]``, then ``y[ind]``. Loops are followed at source level, one
  dynamic iteration after another; a divergent warp runs a loop body while any lane still
  iterates, with the finished lanes masked off (SIMT).
- *Bulk sequences* (Baghsorkhi12 sec. 2, 3.2.2): ``starts_sequence`` marks the first op of the
  kernel, the first op of a loop body (back-edge), the first op after ``__syncthreads()``, and
  a load whose address depends on a load of the current sequence (``y[ind]``).
- *Addresses*: each global array gets a cudaMalloc-like base on a 2 MiB boundary from
  ``0x7f0000000000``, with at least 2 MiB unused between arrays; shared-memory ops address the
  CTA's shared window from 0.
- *Snapshot* (Baghsorkhi12 sec. 3.1): consecutive CTAs from CTA 0, normally 4 x the CTAs resident
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

from tuiprof.trace.synth.assemble import (
                                       assemble,
                                       choose_snapshot,
                                       grid_records,
                                       make_launch,
                                       matmul16,
                                       spmv,
                                       stencil7,
                                       transpose,
                                       vecadd,
)
from tuiprof.trace.synth.build import (
                                       ARRAY_ALIGN,
                                       ARRAY_BASE,
                                       PAPER_WAVES,
                                       CountSink,
                                       Kernel,
                                       OpSpec,
                                       TraceSink,
                                       Warps,
                                       allocate,
                                       cta_warps,
                                       kernel_source,
                                       lane_addr,
                                       locate,
                                       loop,
                                       mask_bits,
                                       seq_key,
)
from tuiprof.trace.synth.demos import DEMOS, DemoSpec, build_demo
from tuiprof.trace.synth.kernels import (
                                       SPMV_BLOCKSIZE,
                                       SPMV_MATRICES,
                                       CsrPattern,
                                       Matmul16,
                                       SpmvScalar,
                                       SpmvVector,
                                       Stencil7,
                                       TransposeNaive,
                                       TransposeTiled,
                                       VecAdd,
                                       csr_pattern,
)

__all__ = ["ARRAY_ALIGN", "ARRAY_BASE", "CountSink", "CsrPattern", "DEMOS", "DemoSpec", "Kernel", "Matmul16",
           "OpSpec", "PAPER_WAVES", "SPMV_BLOCKSIZE", "SPMV_MATRICES", "SpmvScalar", "SpmvVector",
           "Stencil7", "TraceSink", "TransposeNaive", "TransposeTiled", "VecAdd", "Warps", "allocate",
           "assemble", "build_demo", "choose_snapshot", "csr_pattern", "cta_warps", "grid_records",
           "kernel_source", "lane_addr", "locate", "loop", "make_launch", "mask_bits", "matmul16", "seq_key",
           "spmv", "stencil7", "transpose", "vecadd"]
