"""Hand-written launch script for block_scan_dyn.cu: per-tile inclusive prefix sums."""
import numpy as np


def setup(dev):
    n, block = 1000, 256
    grid = (n + block - 1) // block
    x = np.random.default_rng(5).integers(0, 10, n).astype(np.int32)
    out, totals = dev.zeros(n, np.int32), dev.zeros(grid, np.int32)
    dev.launch("tile_scan<int>", grid, block, (dev.to_device(x), out, totals, np.int32(n)), shared=2 * block * 4)
    want = np.concatenate([np.cumsum(x[k:k + block]) for k in range(0, n, block)])
    np.testing.assert_array_equal(dev.from_device(out), want)
    np.testing.assert_array_equal(dev.from_device(totals)[:-1], [np.sum(x[k:k + block]) for k in range(0, n - block, block)])
