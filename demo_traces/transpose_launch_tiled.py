"""Launch script for transpose.cu, demo ``transpose-tiled``: the tiled transpose through a padded 32x33 shared tile: loads and stores coalesced.

    tuiprof report demo_traces/transpose.cu --launch demo_traces/transpose_launch_tiled.py

A 2048 x 2048 float matrix, 32 x 8 threads per CTA each moving 4 elements of a 32 x 32 tile
(M. Harris, "An Efficient Matrix Transpose in CUDA C/C++"). Arrays are allocated in the order
idata, odata, as the synthetic model does, so the recorded addresses are the model's.
"""

import numpy as np

ARCH = "v100"  # the GPU model this demo is profiled for (--arch overrides it)
KERNEL = "transpose_tiled"
N, TILE_DIM, BLOCK_ROWS = 2048, 32, 8


def inputs() -> dict[str, np.ndarray]:
    """The input arrays by parameter name, in allocation order (element values = their index)."""
    return {"idata": np.arange(N * N, dtype=np.float32).reshape(N, N)}


def reference(inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What the kernel computes, in NumPy."""
    return {"odata": np.ascontiguousarray(inp["idata"].T)}


def setup(dev) -> dict[str, np.ndarray]:
    """Allocate, launch, and return the outputs read back from the device."""
    idata = dev.to_device(inputs()["idata"])
    odata = dev.empty((N, N), np.float32)
    dev.launch(KERNEL, (N // TILE_DIM, N // TILE_DIM, 1), (TILE_DIM, BLOCK_ROWS, 1), (odata, idata))
    return {"odata": dev.from_device(odata)}


def check(out: dict[str, np.ndarray]) -> None:
    """Raise AssertionError unless `out` (from `setup`) is the reference's result."""
    np.testing.assert_array_equal(out["odata"], reference(inputs())["odata"])
