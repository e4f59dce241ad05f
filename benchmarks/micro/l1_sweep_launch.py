"""Launch script for l1_sweep.cu (issue 24's micro-kernels): one launch per window size.

    tuiprof report benchmarks/micro/l1_sweep.cu --backend emu --arch h100 --launch-index 1

Environment: ``MICRO_WINDOWS_KIB`` (comma-separated, per CTA; default "8,256": one window far
inside the L1, one past it), ``MICRO_CTAS`` (default 1, for the emulator; benchmarks/gpu_accuracy.sh
runs SpMV's 512 with windows of 4 to 96 KiB), ``MICRO_REPS`` (default 2).
"""

import os

import numpy as np

WINDOWS = [int(w) * 1024 // 4 for w in os.environ.get("MICRO_WINDOWS_KIB", "8,256").split(",")]
CTAS = int(os.environ.get("MICRO_CTAS", "1"))
REPS = int(os.environ.get("MICRO_REPS", "2"))
BLOCK = 256  # the SpMV demos' CTA


def setup(dev) -> dict[str, np.ndarray]:
    data = np.ones(CTAS * max(WINDOWS), dtype=np.float32)
    src = dev.to_device(data)
    outs = []
    for window in WINDOWS:
        out = dev.zeros(CTAS * BLOCK, np.float32)
        dev.launch("l1_sweep", CTAS, BLOCK, (src, out, np.uint32(window), np.int32(REPS)))
        outs.append(out)
    return {f"out{k}": dev.from_device(o) for k, o in enumerate(outs)}


def check(out: dict[str, np.ndarray]) -> None:
    for k, window in enumerate(WINDOWS):
        per_thread = np.full(BLOCK, REPS * window // BLOCK, dtype=np.float32)
        np.testing.assert_array_equal(out[f"out{k}"], np.tile(per_thread, CTAS))
