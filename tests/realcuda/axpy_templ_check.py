"""Hand-written launch script for axpy_templ.cu: both instantiations, checked against NumPy."""
import numpy as np

rng = np.random.default_rng(1)


def setup(dev):
    n = 3000
    for dtype, name, alpha in ((np.float32, "blas::axpy<float, 4>", np.float32(1.5)),
                               (np.float64, "axpy<double, 2>", np.float64(-0.25))):
        x = rng.random(n).astype(dtype)
        y = rng.random(n).astype(dtype)
        dx, dy = dev.to_device(x), dev.to_device(y)
        dev.launch(name, grid=3, block=128, args=(np.int32(n), alpha, dx, dy))
        np.testing.assert_allclose(dev.from_device(dy), alpha * x + y, rtol=1e-6)
