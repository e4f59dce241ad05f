"""Launch script for spmv.cu, demo ``spmv-u``: scalar CSR SpMV (Baghsorkhi12 Listing 2) on matrix u.

    tuiprof report demo_traces/spmv.cu --launch demo_traces/spmv_launch.py

Matrix u of Baghsorkhi12 sec. 6.2: 131072 x 32768, 16-48 nonzeros per row (mean 32) in uniformly
random columns: the pattern of the synthetic demo (``csr_pattern``, seed 2012). Values are small
integers, so every float32 sum is exact. Arrays are allocated in the synthetic model's order and
sizes (rowIndices, indices, val, y, x), so the recorded addresses are the model's. One thread per
row, 256 threads per CTA.
"""

import numpy as np

from tuiprof.trace.synth import csr_pattern

ARCH = "tesla-c2050"  # the GPU model this demo is profiled for (--arch overrides it)
KERNEL = "spmv_csr_scalar"
DISTRIBUTION, MEAN_NNZ = "random", 32
ROWS, COLS, BLOCK = 131072, 32768, 256


def inputs() -> dict[str, np.ndarray]:
    """The input arrays by parameter name, in allocation order."""
    m = csr_pattern(DISTRIBUTION, ROWS, COLS, MEAN_NNZ, seed=2012)
    rng = np.random.default_rng(6)
    return {"rowIndices": m.row_ptr.astype(np.uint32), "indices": m.col_ind.astype(np.uint32),
            "val": rng.integers(-4, 5, m.col_ind.shape[0]).astype(np.float32),
            "y": rng.integers(-4, 5, COLS).astype(np.float32)}


def reference(inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What the kernel computes, in NumPy: x = A y, row by row."""
    products = inp["val"].astype(np.float64) * inp["y"][inp["indices"]]
    starts = inp["rowIndices"][:-1].astype(np.int64)
    return {"x": np.add.reduceat(products, starts).astype(np.float32)}


def setup(dev) -> dict[str, np.ndarray]:
    """Allocate, launch, and return the outputs read back from the device."""
    buf = {name: dev.to_device(a) for name, a in inputs().items()}
    x = dev.empty(ROWS, np.float32)
    dev.launch(KERNEL, -(-ROWS // BLOCK), BLOCK,
               (x, buf["val"], buf["indices"], buf["rowIndices"], buf["y"], np.uint32(ROWS)))
    return {"x": dev.from_device(x)}


def check(out: dict[str, np.ndarray]) -> None:
    """Raise AssertionError unless `out` (from `setup`) is the reference's result."""
    np.testing.assert_array_equal(out["x"], reference(inputs())["x"])
