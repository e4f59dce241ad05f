"""Launch script for stencil.cu, demo ``stencil7``: the 7-point 3D Jacobi stencil.

    tuiprof report demo_traces/stencil.cu --launch demo_traces/stencil_launch.py

A 256^3 float grid, one thread per point, 32 x 8 threads per CTA tiling an xy-plane and one
plane per blockIdx.z; boundary points are not written (out starts at zero). The coefficients
are Parboil's (c0 = 1/6, c1 = 1/36). Arrays are allocated in the order in, out, as the
synthetic model does, so the recorded addresses are the model's.
"""

import numpy as np

ARCH = "v100"  # the GPU model this demo is profiled for (--arch overrides it)
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
    i = slice(1, -1)  # the interior
    s = a[:-2, i, i] + a[2:, i, i]  # z neighbours, then y and x
    s += a[i, :-2, i]
    s += a[i, 2:, i]
    s += a[i, i, :-2]
    s += a[i, i, 2:]
    s *= float(C1)
    s -= float(C0) * a[i, i, i]
    out = np.zeros(a.shape, np.float32)
    out[i, i, i] = s
    return {"out": out}


def setup(dev) -> dict[str, np.ndarray]:
    """Allocate, launch, and return the outputs read back from the device."""
    in_ = dev.to_device(inputs()["in"])
    out = dev.zeros((NZ, NY, NX), np.float32)
    grid = (-(-NX // BLOCK[0]), -(-NY // BLOCK[1]), NZ)
    dev.launch("stencil7", grid, BLOCK, (out, in_, np.int32(NX), np.int32(NY), np.int32(NZ), C0, C1))
    return {"out": dev.from_device(out)}


def check(out: dict[str, np.ndarray]) -> None:
    """Raise AssertionError unless `out` (from `setup`) is the reference's result (float32 rounding)."""
    err = np.abs(out["out"] - reference(inputs())["out"]).max()
    assert err <= 1e-6, f"out differs from the reference by up to {err:.3g}"
