"""Launch script for chase.cu (issue 24's micro-kernels): one thread walks a shuffled cycle
through one word of every 128 B line of a footprint, twice.

    tuiprof report benchmarks/micro/chase.cu --backend emu --arch h100

``MICRO_FOOTPRINT_KIB`` (environment) sets the footprint: 1024 KiB by default (for the emulator:
past the L1, far below the L2); benchmarks/gpu_accuracy.sh runs 25 and 50 MiB.
"""

import os

import numpy as np

FOOTPRINT = int(os.environ.get("MICRO_FOOTPRINT_KIB", "1024")) * 1024
LINE_WORDS = 32  # 128 B of 4 B words
PASSES = 2


def cycle() -> np.ndarray:
    """next[32 * order[k]] = 32 * order[k + 1]: one cycle through every line, in shuffled order."""
    lines = FOOTPRINT // 128
    order = np.random.default_rng(24).permutation(lines).astype(np.uint32)
    order = np.concatenate([[0], order[order != 0]]).astype(np.uint32)  # the walk starts at word 0
    nxt = np.zeros(lines * LINE_WORDS, dtype=np.uint32)
    nxt[order * LINE_WORDS] = np.roll(order, -1) * LINE_WORDS
    return nxt


def setup(dev) -> dict[str, np.ndarray]:
    nxt = cycle()
    steps = PASSES * (FOOTPRINT // 128)
    out = dev.zeros(1, np.uint32)
    dev.launch("chase", 1, 1, (dev.to_device(nxt), out, np.int32(steps)))
    return {"out": dev.from_device(out)}


def check(out: dict[str, np.ndarray]) -> None:
    assert int(out["out"][0]) == 0, "two whole passes end where they began"
