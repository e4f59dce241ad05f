"""Hand-written launch script for tex_resample.cu: point sampling and bilinear filtering (with the
hardware's 8-bit fractional weights) of a texture object, clamped at the edges, against NumPy."""
import numpy as np


def bilinear(img, u, v):
    h, w = img.shape
    x, y = u - 0.5, v - 0.5
    x0, y0 = np.floor(x), np.floor(y)
    a = np.round((x - x0) * 256) / 256   # 1.8 fixed point weights
    b = np.round((y - y0) * 256) / 256
    def at(yy, xx):
        return img[np.clip(yy, 0, h - 1).astype(int), np.clip(xx, 0, w - 1).astype(int)]
    return ((1 - a) * (1 - b) * at(y0, x0) + a * (1 - b) * at(y0, x0 + 1)
            + (1 - a) * b * at(y0 + 1, x0) + a * b * at(y0 + 1, x0 + 1))


def setup(dev):
    h, w, ow, oh, scale = 24, 40, 64, 32, 0.7
    img = np.random.default_rng(8).random((h, w)).astype(np.float32)
    ys, xs = np.mgrid[0:oh, 0:ow]
    u = ((xs + 0.5) * np.float32(scale)).astype(np.float32)
    v = ((ys + 0.5) * np.float32(scale)).astype(np.float32)
    out = dev.zeros((oh, ow), np.float32)
    grid, block = ((ow + 15) // 16, (oh + 7) // 8), (16, 8)
    point = dev.texture(img, filter="point", address_mode="clamp")
    dev.launch("resample", grid, block, (point, out, np.int32(ow), np.int32(oh), np.float32(scale)))
    want = img[np.clip(np.floor(v), 0, h - 1).astype(int), np.clip(np.floor(u), 0, w - 1).astype(int)]
    np.testing.assert_array_equal(dev.from_device(out), want)
    linear = dev.texture(img, filter="linear", address_mode="clamp")
    dev.launch("resample", grid, block, (linear, out, np.int32(ow), np.int32(oh), np.float32(scale)))
    np.testing.assert_allclose(dev.from_device(out), bilinear(img.astype(np.float64), u, v), rtol=1e-5, atol=1e-6)
