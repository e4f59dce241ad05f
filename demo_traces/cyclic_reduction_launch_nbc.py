"""Launch script for cyclic_reduction.cu, demo ``cr-nbc``: cyclic reduction padded against bank conflicts.

    tuiprof report demo_traces/cyclic_reduction.cu --launch demo_traces/cyclic_reduction_launch_nbc.py

Zhang11 sec. 5.2: 512 tridiagonal systems of 512 equations, one CTA (256 threads) per system,
solved in shared memory. The systems are random and diagonally dominant (|b| > |a| + |c| + 1), so
cyclic reduction is stable; the reference is the Thomas algorithm in float64 and the check allows
for float32 rounding.

CR-NBC pads one element per 32 (the banks of Fermi and later GPUs): at most 2-way conflicts where
CR has up to 16-way. The unpadded variant: cyclic_reduction_launch.py.
"""

import numpy as np

ARCH = "v100"  # the GPU model this demo is profiled for (--arch overrides it)
KERNEL = "cr_nbc"
SYSTEMS, SIZE = 512, 512
# dynamic shared memory: five float arrays (a, b, c, d, x) of the kernel's at(SIZE - 1) + 1 elements
SHARED = 5 * 4 * (SIZE + (SIZE - 1) // 32)


def inputs() -> dict[str, np.ndarray]:
    """The input arrays by parameter name, in allocation order: row s holds system s."""
    rng = np.random.default_rng(2011)
    a = rng.uniform(-1, 1, (SYSTEMS, SIZE)).astype(np.float32)
    c = rng.uniform(-1, 1, (SYSTEMS, SIZE)).astype(np.float32)
    a[:, 0] = 0  # no x[-1]
    c[:, -1] = 0  # no x[SIZE]
    b = (np.abs(a) + np.abs(c) + rng.uniform(1, 2, (SYSTEMS, SIZE))).astype(np.float32)
    d = rng.uniform(-1, 1, (SYSTEMS, SIZE)).astype(np.float32)
    return {"a": a, "b": b, "c": c, "d": d}


def reference(inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The solutions by the Thomas algorithm, all systems at once, in float64."""
    a, b, c, d = (inp[k].astype(np.float64) for k in "abcd")
    cp, dp = np.empty_like(c), np.empty_like(d)
    cp[:, 0], dp[:, 0] = c[:, 0] / b[:, 0], d[:, 0] / b[:, 0]
    for i in range(1, SIZE):
        m = b[:, i] - a[:, i] * cp[:, i - 1]
        cp[:, i], dp[:, i] = c[:, i] / m, (d[:, i] - a[:, i] * dp[:, i - 1]) / m
    x = dp.copy()
    for i in range(SIZE - 2, -1, -1):
        x[:, i] -= cp[:, i] * x[:, i + 1]
    return {"x": x}


def setup(dev) -> dict[str, np.ndarray]:
    """Allocate, launch, and return the outputs read back from the device."""
    buf = {name: dev.to_device(v) for name, v in inputs().items()}
    x = dev.empty((SYSTEMS, SIZE), np.float32)
    dev.launch(KERNEL, SYSTEMS, SIZE // 2, (buf["a"], buf["b"], buf["c"], buf["d"], x), shared=SHARED)
    return {"x": dev.from_device(x)}


def check(out: dict[str, np.ndarray]) -> None:
    """Raise AssertionError unless `out` (from `setup`) is the reference's result to float32 accuracy."""
    np.testing.assert_allclose(out["x"], reference(inputs())["x"], rtol=0, atol=1e-5)
