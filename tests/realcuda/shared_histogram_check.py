"""Hand-written launch script for shared_histogram.cu: the counts of 8000 random bytes."""
import numpy as np


def setup(dev):
    data = np.random.default_rng(16).integers(0, 256, 8000).astype(np.uint8)
    hist = dev.zeros(256, np.uint32)
    dev.launch("histogram256", grid=4, block=256, args=(dev.to_device(data), np.uint32(data.size // 4), hist))
    np.testing.assert_array_equal(dev.from_device(hist), np.bincount(data, minlength=256))
