"""Launch script for neighbour_sector.cu (issue 24's micro-kernels).

    tuiprof report benchmarks/micro/neighbour_sector.cu --backend emu --arch h100

``MICRO_N`` (environment) sets the threads: 4096 by default (16 CTAs of 256, for the emulator);
benchmarks/gpu_accuracy.sh runs 1,048,576 (a 64 MiB input, past the 50 MiB L2).
"""

import os

import numpy as np

N = int(os.environ.get("MICRO_N", "4096"))
BLOCK = 256


def setup(dev) -> dict[str, np.ndarray]:
    data = np.arange(16 * N, dtype=np.float32) % 1024
    src = dev.to_device(data)
    out = dev.zeros(N, np.float32)
    dev.launch("neighbour_sector", -(-N // BLOCK), BLOCK, (src, out, np.int32(N)))
    return {"out": dev.from_device(out)}


def check(out: dict[str, np.ndarray]) -> None:
    data = np.arange(16 * N, dtype=np.float32) % 1024
    np.testing.assert_array_equal(out["out"], data[0::16] + data[8::16])
