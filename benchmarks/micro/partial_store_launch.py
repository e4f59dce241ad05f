"""Launch script for partial_store.cu (issue 24's micro-kernels).

    tuiprof report benchmarks/micro/partial_store.cu --backend emu --arch h100

``MICRO_N`` (environment) sets the threads: 4096 by default (for the emulator);
benchmarks/gpu_accuracy.sh runs 2,097,152 (a 64 MiB buffer).
"""

import os

import numpy as np

N = int(os.environ.get("MICRO_N", "4096"))
BLOCK = 256


def initial() -> np.ndarray:
    return (np.arange(8 * N) % 977).astype(np.float32)


def setup(dev) -> dict[str, np.ndarray]:
    buf = dev.to_device(initial())
    out = dev.zeros(N, np.float32)
    dev.launch("partial_store", -(-N // BLOCK), BLOCK, (buf, out, np.int32(N)))
    return {"out": dev.from_device(out), "buf": dev.from_device(buf)}


def check(out: dict[str, np.ndarray]) -> None:
    want = initial()
    np.testing.assert_array_equal(out["out"], want[1::8])
    want[0::8] = np.arange(N, dtype=np.float32)
    np.testing.assert_array_equal(out["buf"], want)
