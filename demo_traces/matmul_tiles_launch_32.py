"""Launch script for matmul_tiles.cu, demo ``matmul-tile32``: 32x32 tiles (Zhang11 sec. 5.1).

    tuiprof report demo_traces/matmul_tiles.cu --launch demo_traces/matmul_tiles_launch_32.py

C = A B with N = 1024 square float matrices (Zhang11 Fig. 4), 32 x 32 = 1024 threads per CTA,
one per element of C. Values are small integers, so every float32 sum is exact. The three sizes:
matmul_tiles_launch_8.py, matmul_tiles_launch.py (16x16, the default), matmul_tiles_launch_32.py.
"""

import numpy as np

ARCH = "v100"  # the GPU model this demo is profiled for (--arch overrides it)
KERNEL = "matmul_tile32"
N, TILE = 1024, 32


def inputs() -> dict[str, np.ndarray]:
    """The input arrays by parameter name, in allocation order."""
    rng = np.random.default_rng(1024)
    return {"A": rng.integers(-2, 3, (N, N)).astype(np.float32),
            "B": rng.integers(-2, 3, (N, N)).astype(np.float32)}


def reference(inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What the kernel computes, in NumPy."""
    return {"C": (inp["A"].astype(np.float64) @ inp["B"]).astype(np.float32)}


def setup(dev) -> dict[str, np.ndarray]:
    """Allocate, launch, and return the outputs read back from the device."""
    buf = {name: dev.to_device(a) for name, a in inputs().items()}
    C = dev.empty((N, N), np.float32)
    dev.launch(KERNEL, (N // TILE, N // TILE, 1), (TILE, TILE, 1), (C, buf["A"], buf["B"], np.int32(N)))
    return {"C": dev.from_device(C)}


def check(out: dict[str, np.ndarray]) -> None:
    """Raise AssertionError unless `out` (from `setup`) is the reference's result."""
    np.testing.assert_array_equal(out["C"], reference(inputs())["C"])
