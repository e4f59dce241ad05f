"""Hand-written launch script for tiled_gemm_bounds.cu: a 40x24 by 24x56 product (edges not
multiples of the tile), and a 32x32 block that __launch_bounds__(256) forbids."""
import numpy as np


def setup(dev):
    M, K, N = 40, 24, 56
    rng = np.random.default_rng(14)
    a, b = rng.random((M, K)).astype(np.float32), rng.random((K, N)).astype(np.float32)
    c = dev.zeros((M, N), np.float32)
    da, db = dev.to_device(a), dev.to_device(b)
    dev.launch("gemm::sgemm_tiled<16>", grid=((N + 15) // 16, (M + 15) // 16), block=(16, 16),
               args=(da, db, c, np.int32(M), np.int32(N), np.int32(K)))
    np.testing.assert_allclose(dev.from_device(c), a.astype(np.float64) @ b, rtol=1e-5)
    try:
        dev.launch("gemm::sgemm_tiled<16>", grid=1, block=(32, 32), args=(da, db, c, np.int32(M), np.int32(N), np.int32(K)))
    except Exception as exc:  # a CUDA launch beyond __launch_bounds__ fails: too many resources requested
        assert "launch_bounds" in str(exc), exc
    else:
        raise AssertionError("a 1024-thread block ran under __launch_bounds__(256)")
