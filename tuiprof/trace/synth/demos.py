"""The demos' synthetic models by their stable CLI names (`spmv-u`, `vecadd`, ...): what each
models and how it is built. The shipped traces are the emulator's recordings
(`tuiprof.demos`); these models stay as their test oracles."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from tuiprof.errors import UsageError
from tuiprof.trace.data import Trace
from tuiprof.trace.synth.assemble import matmul16, spmv, stencil7, transpose, vecadd
from tuiprof.trace.synth.kernels import SPMV_MATRICES

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
    built from the model on first use and cached (see `tuiprof.demos`)."""

    def __call__(self) -> Trace:
        return self.build()


_SPMV_DEMOS = {"u": "u", "b": "b", "u128": "U", "b128": "B"}
"""Demo name suffix -> Baghsorkhi12's matrix letter."""


def _spmv_demo(name: str, matrix: str, vectorized: bool) -> DemoSpec:
    dist, mean = SPMV_MATRICES[matrix]
    shipped = not (dist == "random" and mean > 32)
    kind = "vectorized (Listing 3)" if vectorized else "scalar (Listing 2)"
    what = "random" if dist == "random" else "block-diagonal"
    return DemoSpec(name, "spmv.cu", "tesla-c2050",
                    f"Baghsorkhi12 sec. 6.2: {kind} CSR SpMV, matrix {matrix} ({mean} nnz/row, {what})",
                    partial(spmv, dist, mean, vectorized=vectorized), shipped)


DEMOS: dict[str, DemoSpec] = {
    "vecadd": DemoSpec("vecadd", "vecadd.cu", "gtx480",
                       "Yen14 Table 3: vector add of 20480 ints, 2 warps per CTA", vecadd),
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
