"""Hand-written launch script for bf16_residual.cu: bfloat16 bits held as uint16 (NumPy has no
bfloat16); the sum rounded to nearest even as __float2bfloat16 does."""
import numpy as np


def to_bf16(x):
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def setup(dev):
    n = 4096
    rng = np.random.default_rng(11)
    a, b = to_bf16(rng.standard_normal(n)), to_bf16(rng.standard_normal(n))
    out = dev.zeros(n, np.uint16)
    dev.launch("residual_forward", grid=(n // 8 + 127) // 128, block=128, args=(out, dev.to_device(a), dev.to_device(b), np.int32(n)))
    np.testing.assert_array_equal(dev.from_device(out), to_bf16(from_bf16(a) + from_bf16(b)))
