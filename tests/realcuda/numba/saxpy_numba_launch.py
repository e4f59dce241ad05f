"""Launch script for saxpy_numba.ptx: a Numba kernel's array argument is passed as Numba lays it
out in the PTX (tuiprof.collect.numba_array); the result checked against NumPy."""
import numpy as np

from tuiprof.collect import numba_array


def setup(dev):
    n = 3000
    x = np.arange(n, dtype=np.float32)
    y = np.random.default_rng(18).random(n).astype(np.float32)
    out = dev.zeros(n, np.float32)
    dev.launch("saxpy", grid=(n + 127) // 128, block=128,
               args=(*numba_array(out), *numba_array(dev.to_device(x)), *numba_array(dev.to_device(y)),
                     np.float32(2.0), np.int32(n)))
    np.testing.assert_allclose(dev.from_device(out), np.float32(2.0) * x + y, rtol=1e-6)
