"""Hand-written launch script for half2_bias_gelu.cu: fp16 bias + ReLU against NumPy's float16."""
import numpy as np


def setup(dev):
    rows, cols = 12, 64
    rng = np.random.default_rng(10)
    a = rng.uniform(-2, 2, (rows, cols)).astype(np.float16)
    b = rng.uniform(-1, 1, cols).astype(np.float16)
    da = dev.to_device(a)
    n_vec = rows * cols // 8
    dev.launch("bias_relu_h8", grid=(n_vec + 63) // 64, block=64, args=(da, dev.to_device(b), np.int32(rows), np.int32(cols)))
    np.testing.assert_array_equal(dev.from_device(da), np.maximum(a + b, np.float16(0)))
