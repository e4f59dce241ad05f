"""Hand-written launch script for optional_bias.cu: a null bias (dev.null), then rows 4.. of the
buffers through pointers into their middle (buf + elements, as C's d_out + 4 * cols, and
buf[rows:], a slice of the first axis)."""
import numpy as np


def setup(dev):
    rows, cols = 10, 96
    rng = np.random.default_rng(17)
    x, g, b = rng.random((rows, cols)).astype(np.float32), rng.random(cols).astype(np.float32), rng.random(cols).astype(np.float32)
    dx, dg, db = dev.to_device(x), dev.to_device(g), dev.to_device(b)
    out = dev.zeros((rows, cols), np.float32)
    dev.launch("scale_rows", rows, 64, (out, dx, dg, dev.null, np.int32(rows), np.int32(cols)))
    np.testing.assert_array_equal(dev.from_device(out), x * g)
    skip = 4 * cols
    dev.launch("scale_rows", rows - 4, 64, (out + skip, dx[4:], dg, db, np.int32(rows - 4), np.int32(cols)))
    np.testing.assert_array_equal(dev.from_device(dx[4:]), x[4:])
    want = x * g
    want[4:] += b
    np.testing.assert_allclose(dev.from_device(out), want, rtol=1e-6)  # x * g + b may be one fused multiply-add
