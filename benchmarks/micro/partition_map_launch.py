"""Launch script for partition_map.cu (issue 24's micro-kernels): for each SM s from 1, SM 0 reads a
fresh buffer (`warm`), then SM s reads it (`probe`). ncu profiles the probes alone, caches not flushed:
the fabric lookups of probe s say whether SM s reads through SM 0's L2 partition.

    tuiprof report benchmarks/micro/partition_map.cu --backend emu --arch h100 --kernel probe

``MICRO_SMS`` (environment): the SMs probed, 1 to MICRO_SMS - 1 (default 4, for the emulator;
benchmarks/gpu_accuracy.sh runs the GPU's 132). ``MICRO_LINES``: lines per buffer (default 512,
64 KiB). Each launch has 8 CTAs an SM, so that some CTA runs on every SM.
"""

import os

import numpy as np

SMS = int(os.environ.get("MICRO_SMS", "4"))
LINES = int(os.environ.get("MICRO_LINES", "512"))
BLOCK = 128


def setup(dev) -> dict[str, np.ndarray]:
    sink = dev.zeros(8 * SMS, np.uint32)
    for s in range(1, SMS):
        buf = dev.to_device(np.full(LINES * 32, s, dtype=np.uint32))  # a fresh buffer each time
        args = (buf, sink, np.uint32(LINES), np.uint32(0))
        dev.launch("warm", 8 * SMS, BLOCK, args)
        dev.launch("probe", 8 * SMS, BLOCK, (*args[:3], np.uint32(s)))
    return {"sink": dev.from_device(sink)}


def check(out: dict[str, np.ndarray]) -> None:
    assert not out["sink"].any(), "no sum is all ones"
