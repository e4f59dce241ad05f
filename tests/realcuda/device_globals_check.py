"""Hand-written launch script for device_globals.cu: dev.set_symbol / dev.get_symbol on __device__
variables (cudaMemcpyToSymbol / FromSymbol)."""
import numpy as np


def setup(dev):
    n = 700
    x = np.arange(n, dtype=np.float32)
    dev.set_symbol("g_scale", np.float32(0.5))
    dev.set_symbol("g_visits", np.uint64(10))
    d = dev.to_device(x)
    dev.launch("scale_and_count", grid=3, block=256, args=(d, np.int32(n)))
    np.testing.assert_array_equal(dev.from_device(d), x * np.float32(0.5))
    assert int(dev.get_symbol("g_visits")) == 10 + n, dev.get_symbol("g_visits")
