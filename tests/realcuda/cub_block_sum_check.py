"""Hand-written launch script for cub_block_sum.cu: block totals and exclusive prefix sums of the
per-thread partials (BLOCK_LOAD_DIRECT: thread t holds items t*4 .. t*4+3 of its tile)."""
import numpy as np


def setup(dev):
    threads, items, blocks = 128, 4, 3
    x = np.random.default_rng(13).integers(0, 100, blocks * threads * items).astype(np.int32)
    totals, prefix = dev.zeros(blocks, np.int32), dev.zeros(blocks * threads, np.int32)
    dev.launch("block_sums<128, 4>", blocks, threads, (dev.to_device(x), totals, prefix))
    partial = x.reshape(blocks, threads, items).sum(axis=2)
    np.testing.assert_array_equal(dev.from_device(totals), partial.sum(axis=1))
    np.testing.assert_array_equal(dev.from_device(prefix).reshape(blocks, threads), np.cumsum(partial, axis=1) - partial)
