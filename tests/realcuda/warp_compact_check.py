"""Hand-written launch script for warp_compact.cu: the kept values, as a multiset, and their count."""
import numpy as np


def setup(dev):
    n = 1000  # not a multiple of 32: the last warp runs with a partial mask
    x = np.random.default_rng(3).integers(-5, 6, n).astype(np.int32)
    out = dev.zeros(n, np.int32)
    count = dev.zeros(1, np.uint32)
    dev.launch("compact_positive", grid=(n + 127) // 128, block=128, args=(dev.to_device(x), np.int32(n), out, count))
    k = int(dev.from_device(count)[0])
    assert k == int((x > 0).sum()), k
    np.testing.assert_array_equal(np.sort(dev.from_device(out)[:k]), np.sort(x[x > 0]))
