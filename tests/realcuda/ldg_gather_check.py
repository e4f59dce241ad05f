"""Hand-written launch script for ldg_gather.cu: a random permutation gathered and scaled."""
import numpy as np


def setup(dev):
    n = 1500
    rng = np.random.default_rng(12)
    idx = rng.permutation(n).astype(np.int32)
    val = rng.random(n).astype(np.float32)
    out = dev.zeros(n, np.float32)
    dev.launch("gather_scale", grid=(n + 255) // 256, block=256,
               args=(dev.to_device(idx), dev.to_device(val), out, np.float32(3.0), np.int32(n)))
    np.testing.assert_array_equal(dev.from_device(out), np.float32(3.0) * val[idx])
