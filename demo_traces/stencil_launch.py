"""Launch script for stencil.cu, demo ``stencil7``: the 7-point 3D Jacobi stencil.

    tuiprof report demo_traces/stencil.cu --launch demo_traces/stencil_launch.py

A 256^3 float grid, one thread per point, 32 x 8 threads per CTA tiling an xy-plane and one
plane per blockIdx.z; boundary points are not written (out starts at zero). The coefficients
are Parboil's (c0 = 1/6, c1 = 1/36). Arrays are allocated in the order in, out, as the
synthetic model does, so the recorded addresses are the model's.
"""

import numpy as np

NX = NY = NZ = 256
BLOCK = (32, 8, 1)
C0, C1 = np.float32(1.0 / 6.0), np.float32(1.0 / 6.0 / 6.0)


def inputs() -> dict[str, np.ndarray]:
    """The input arrays by parameter name, in allocation order ([z, y, x], x fastest)."""
    rng = np.random.default_rng(256)
    return {"in": rng.random((NZ, NY, NX), dtype=np.float32)}


def reference(inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What the kernel computes, in NumPy (float64; the kernel rounds to float32)."""
    a = inp["in"].astype(np.float64)
    i = slice(1, -1)
    neighbours = a[:-2, i, i] + a[2:, i, i] + a[i, :-2, i] + a[i, 2:, i] + a[i, i, :-2] + a[i, i, 2:]
    out = np.zeros_like(a)
    out[i, i, i] = float(C1) * neighbours - float(C0) * a[i, i, i]
    return {"out": out.astype(np.float32)}


def setup(dev) -> dict[str, np.ndarray]:
    """Allocate, launch, and return the outputs read back from the device."""
    in_ = dev.to_device(inputs()["in"])
    out = dev.zeros((NZ, NY, NX), np.float32)
    grid = (-(-NX // BLOCK[0]), -(-NY // BLOCK[1]), NZ)
    dev.launch("stencil7", grid, BLOCK, (out, in_, np.int32(NX), np.int32(NY), np.int32(NZ), C0, C1))
    return {"out": dev.from_device(out)}


def check(out: dict[str, np.ndarray]) -> None:
    """Raise AssertionError unless `out` (from `setup`) is the reference's result (float32 rounding)."""
    np.testing.assert_allclose(out["out"], reference(inputs())["out"], rtol=0, atol=1e-6)
