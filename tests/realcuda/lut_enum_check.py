"""Hand-written launch script for lut_enum.cu: the gamma table set with dev.set_symbol; both
instantiations launched by the names a C++ programmer writes."""
import numpy as np


def setup(dev):
    n = 2000
    lut = np.round(255 * (np.arange(256) / 255) ** (1 / 2.2)).astype(np.uint8)
    dev.set_symbol("img::c_gamma_lut", lut)
    x = np.random.default_rng(7).integers(0, 256, n).astype(np.uint8)
    src, dst = dev.to_device(x), dev.zeros(n, np.uint8)
    dev.launch("img::tone_map<img::Curve::Gamma>", grid=(n + 255) // 256, block=256, args=(src, dst, np.uint32(n)))
    np.testing.assert_array_equal(dev.from_device(dst), lut[x])
    dev.launch("tone_map<Curve::Invert>", grid=(n + 255) // 256, block=256, args=(src, dst, np.uint32(n)))
    np.testing.assert_array_equal(dev.from_device(dst), 255 - x)
