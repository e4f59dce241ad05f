"""Launch script for vecadd.cu, demo ``vecadd``: Yen14's vector add (Table 3).

    tuiprof report demo_traces/vecadd.cu --launch demo_traces/vecadd_launch.py

20480 ints, one thread per element, 64 threads (2 warps) per CTA. Arrays are allocated in the
order A, B, C with the sizes of the synthetic model (tuiprof/trace/synth/), so the recorded
addresses are the model's.
"""

import numpy as np

ARCH = "gtx480"  # the GPU model this demo is profiled for (--arch overrides it)
N = 20480
BLOCK = 64


def inputs() -> dict[str, np.ndarray]:
    """The input arrays by parameter name, in allocation order."""
    rng = np.random.default_rng(2014)
    return {"A": rng.integers(-1000, 1000, N, dtype=np.int32),
            "B": rng.integers(-1000, 1000, N, dtype=np.int32)}


def reference(inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What the kernel computes, in NumPy."""
    return {"C": inp["A"] + inp["B"]}


def setup(dev) -> dict[str, np.ndarray]:
    """Allocate, launch, and return the outputs read back from the device."""
    buf = {name: dev.to_device(a) for name, a in inputs().items()}
    C = dev.empty(N, np.int32)
    dev.launch("kernel_vec_add", N // BLOCK, BLOCK, (C, buf["A"], buf["B"]))
    return {"C": dev.from_device(C)}


def check(out: dict[str, np.ndarray]) -> None:
    """Raise AssertionError unless `out` (from `setup`) is the reference's result."""
    np.testing.assert_array_equal(out["C"], reference(inputs())["C"])
