"""Launch script for streaming.cu (issue 24's micro-kernels): `read_twice`, then `read_twice_cs`
on the same input (``--kernel read_twice_cs`` profiles the second).

    tuiprof report benchmarks/micro/streaming.cu --backend emu --arch h100 --kernel read_twice_cs

``MICRO_N`` (environment) sets the elements: 8192 by default (for the emulator);
benchmarks/gpu_accuracy.sh runs 16,777,216 (64 MiB).
"""

import os

import numpy as np

N = int(os.environ.get("MICRO_N", "8192"))
BLOCK = 256


def setup(dev) -> dict[str, np.ndarray]:
    data = (np.arange(N) % 4096).astype(np.float32)
    src = dev.to_device(data)
    plain, cs = dev.zeros(N, np.float32), dev.zeros(N, np.float32)
    grid = -(-N // BLOCK)
    dev.launch("read_twice", grid, BLOCK, (src, plain, np.int32(N)))
    dev.launch("read_twice_cs", grid, BLOCK, (src, cs, np.int32(N)))
    return {"plain": dev.from_device(plain), "cs": dev.from_device(cs)}


def check(out: dict[str, np.ndarray]) -> None:
    data = (np.arange(N) % 4096).astype(np.float32)
    want = data - data[np.arange(N) ^ 1]
    np.testing.assert_array_equal(out["plain"], want)
    np.testing.assert_array_equal(out["cs"], want)
