"""Hand-written launch script for cg_block_reduce.cu: the sum of 5000 small integers (exact in float)."""
import numpy as np


def setup(dev):
    n = 5000
    x = (np.arange(n) % 7).astype(np.float32)
    out = dev.zeros(1, np.float32)
    dev.launch("block_sum", grid=4, block=256, args=(dev.to_device(x), out, np.int32(n)))
    assert dev.from_device(out)[0] == x.sum(), (dev.from_device(out)[0], x.sum())
