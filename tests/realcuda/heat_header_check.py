"""Hand-written launch script for heat_header.cu (the kernel is in a header): one step, clamped edges."""
import numpy as np


def setup(dev):
    nx, ny, alpha = 50, 40, np.float32(0.1)
    u = np.random.default_rng(9).random((ny, nx)).astype(np.float32)
    out = dev.zeros((ny, nx), np.float32)
    dev.launch("heat::step<16, 16>", grid=((nx + 15) // 16, (ny + 15) // 16), block=(16, 16),
               args=(dev.to_device(u), out, np.int32(nx), np.int32(ny), alpha))
    p = np.pad(u, 1, mode="edge")
    lap = p[1:-1, :-2] + p[1:-1, 2:] + p[:-2, 1:-1] + p[2:, 1:-1] - 4 * u
    np.testing.assert_allclose(dev.from_device(out), u + alpha * lap, rtol=1e-5, atol=1e-6)
