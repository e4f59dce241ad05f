"""Hand-written launch script for conv_rows_const.cu: the filter set with dev.set_symbol, the
result checked against NumPy's convolution of each row (zero padded)."""
import numpy as np


def setup(dev):
    w, h, _r = 128, 16, 4
    img = np.random.default_rng(6).random((h, w)).astype(np.float32)
    taps = np.array([1, 2, 3, 4, 5, 4, 3, 2, 1], np.float32) / 25
    dev.set_symbol("c_Kernel", taps)
    assert np.array_equal(dev.get_symbol("c_Kernel"), taps)
    dst = dev.zeros((h, w), np.float32)
    dev.launch("convolutionRows", grid=(w // 32, h // 4), block=(32, 4),
               args=(dst, dev.to_device(img), np.int32(w), np.int32(h)))
    want = np.stack([np.convolve(row, taps, mode="same") for row in img.astype(np.float64)])
    np.testing.assert_allclose(dev.from_device(dst), want, rtol=1e-5, atol=1e-6)
