"""Hand-written launch script for coalesced_count.cu: the selected indices, as a set."""
import numpy as np


def setup(dev):
    n = 777
    v = np.random.default_rng(4).random(n).astype(np.float32)
    sel = dev.zeros(n, np.int32)
    cnt = dev.zeros(1, np.int32)
    dev.launch("bucket_indices", grid=7, block=128, args=(dev.to_device(v), np.int32(n), np.float32(0.6), sel, cnt))
    k = int(dev.from_device(cnt)[0])
    want = np.flatnonzero(v > np.float32(0.6))
    assert k == want.size, (k, want.size)
    np.testing.assert_array_equal(np.sort(dev.from_device(sel)[:k]), want)
