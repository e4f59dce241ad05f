"""Corpus kernels (half and double math, local arrays, device-function calls, printf, constant
memory, generic pointers, templates, vector loads, dynamic shared memory, cp.async, cooperative
groups, CUB) run on the emulator; outputs equal NumPy references."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.emu_support import cuda_ptx, run  # noqa: F401 (cuda_ptx is a fixture)
from tuiprof.collect.emu.device import EmuDevice, RecordChoice


def test_half_math(cuda_ptx):
    rng = np.random.default_rng(1)
    n = 200
    a = rng.uniform(0.5, 4, 256).astype(np.float16)
    b = rng.uniform(0.5, 4, 256).astype(np.float16)
    ptx = cuda_ptx("ptx_half_double")
    _, _, c, f, _ = run(ptx, "half_math", 2, 128, (a, b, np.zeros(256, np.float16), np.zeros(256, np.float32), np.int32(n)))
    h = (a.astype(np.float32) + (a.astype(np.float32) * b.astype(np.float32)).astype(np.float16)).astype(np.float16)
    np.testing.assert_array_equal(c[:n], h[:n])
    # hsqrt is an approximation (sqrt.approx.f32 then a rounding to half): within one half ulp
    ref = h.astype(np.float32) + np.sqrt(b.astype(np.float32)).astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(f[:n], ref[:n], rtol=2e-3)
    a2 = rng.uniform(-2, 2, 512).astype(np.float16)
    c2 = run(ptx, "half2_math", 2, 128, (a2, np.zeros(512, np.float16), np.int32(256)))[1]
    x = a2.astype(np.float64)
    np.testing.assert_array_equal(c2, (x * x + x).astype(np.float16))   # fma: exact product, one rounding


def test_double_math(cuda_ptx):
    rng = np.random.default_rng(2)
    x = rng.uniform(0.1, 5, 128)
    y, z, w = run(cuda_ptx("ptx_half_double"), "double_math", 1, 128,
                  (x, np.zeros(128), np.zeros(128, np.float32), np.zeros(128, np.int64), np.int32(128)))[1:4]
    r = np.sqrt(x) + np.exp(x) + x / 3.0 + (x * x + 1.0)
    np.testing.assert_allclose(y, r, rtol=1e-15)
    xf = x.astype(np.float32)
    np.testing.assert_allclose(z, r.astype(np.float32) + np.sin(xf) + np.exp(xf) + 1 / xf, rtol=1e-5)
    np.testing.assert_array_equal(w, np.trunc(y).astype(np.int64) + np.rint(x).astype(np.int64))


def test_local_array_noinline_call_and_printf(cuda_ptx):
    rng = np.random.default_rng(3)
    n, k = 100, 7
    inp = rng.integers(-50, 50, 128).astype(np.int32)
    out = run(cuda_ptx("ptx_local_mem"), "local_array", 1, 128, (inp, np.zeros(128, np.int32), np.int32(n), np.int32(k)))[1]
    ref = np.zeros(128, np.int32)
    for i in range(n):
        loc = [int(inp[(i + j) % n]) for j in range(16)]
        ref[i] = loc[k & 15] + loc[0] * loc[1] + max(loc[0], loc[1]) + min(loc[2], loc[3]) + abs(loc[4])
    np.testing.assert_array_equal(out, ref)


def test_local_accesses_are_recorded_lane_interleaved(cuda_ptx):
    """Local memory is per thread; its recorded addresses model the hardware's interleaving (the
    lanes' elements side by side), so a warp's access to loc[j] is coalesced."""
    module, src, text = cuda_ptx("ptx_local_mem")
    dev = EmuDevice(module, src, text)
    inp = dev.to_device(np.arange(64, dtype=np.int32))
    dev.launch("local_array", 1, 64, (inp, dev.zeros(64, np.int32), np.int32(64), np.int32(3)))
    rec = dev.recorded
    local_ops = [o.id for o in rec.ops if o.space == "local"]
    assert local_ops
    sel = np.isin(rec.op, local_ops)
    assert sel.any()
    assert (rec.mask[sel] == 0xFFFFFFFF).sum() >= 8   # loc[] stores (st.local.v4) and the loc[k] load, both warps
    for op, addr, mask in zip(rec.op[sel], rec.addr[sel], rec.mask[sel]):
        lanes = np.nonzero([(int(mask) >> l) & 1 for l in range(32)])[0]
        a = addr[lanes].astype(np.int64)
        np.testing.assert_array_equal(a - a[0], rec.ops[op].bytes * (lanes - lanes[0]))


def test_constant_memory(cuda_ptx):
    module, src, text = cuda_ptx("ptx_local_mem")
    rng = np.random.default_rng(4)
    n = 100
    inp = rng.integers(-5, 5, 128).astype(np.float32)
    dev = EmuDevice(module, src, text, record=RecordChoice(snapshot=()))
    i, o = dev.to_device(inp), dev.zeros(128, np.float32)
    dev.launch("const_mem", 1, 128, (i, o, np.uint64(n)))
    # __constant__ coeffs has no initialiser: zero, so the result is 0
    np.testing.assert_array_equal(dev.from_device(o), np.zeros(128, np.float32))


@pytest.mark.parametrize("use_shared", [0, 1])
def test_generic_pointer_to_shared_or_global(cuda_ptx, use_shared):
    module, src, text = cuda_ptx("ptx_generic_ptr")
    rng = np.random.default_rng(5)
    g = rng.integers(-9, 9, 512).astype(np.float32)
    dev = EmuDevice(module, src, text)
    gi, out = dev.to_device(g), dev.zeros(512, np.float32)
    dev.launch("generic_ptr", 2, 256, (gi, out, np.int32(512), np.int32(use_shared)))
    blocks = g.reshape(2, 256)
    t = np.arange(256)
    ref = sum(blocks[:, (t + k) & 255] for k in range(8)).reshape(-1)
    np.testing.assert_array_equal(dev.from_device(out), ref)
    # the generic loads resolve to the space they read
    spaces = {o.space for o in dev.recorded.ops if o.label.startswith("p[")}
    assert spaces == {"shared" if use_shared else "global"}


def test_templates(cuda_ptx):
    module, src, text = cuda_ptx("ptx_template_saxpy")
    names = [k for k in module.kernels]
    rng = np.random.default_rng(6)
    for name, dtype, unroll, a in ((n, np.float32, 4, np.float32(2.5)) if "Li4" in n else
                                   (n, np.float64, 2, np.float64(-1.5)) if "Li2" in n else
                                   (n, np.int32, 1, np.int32(3)) for n in names):
        x = rng.integers(-5, 5, 300).astype(dtype)
        y = rng.integers(-5, 5, 300).astype(dtype)
        out = run((module, src, text), name, -(-290 // (64 * unroll)), 64, (a, x, y.copy(), np.int32(290)))[2]
        ref = y.copy()
        ref[:290] = a * x[:290] + y[:290]
        np.testing.assert_array_equal(out, ref)


def test_vector_loads(cuda_ptx):
    ptx = cuda_ptx("ptx_vector_loads")
    rng = np.random.default_rng(7)
    f4 = rng.integers(-9, 9, (128, 4)).astype(np.float32)
    out = run(ptx, "copy_float4", 1, 128, (f4, np.zeros((128, 4), np.float32), np.int32(100)))[1]
    ref = f4.copy()
    ref[:, 0] *= 2
    ref[:, 3] += 1
    ref[100:] = 0
    np.testing.assert_array_equal(out, ref)
    u4 = rng.integers(0, 2**32, (128, 4), dtype=np.uint64).astype(np.uint32)
    out = run(ptx, "copy_uint4", 1, 128, (u4, np.zeros((128, 4), np.uint32), np.int32(128)))[1]
    ref = u4.copy()
    ref[:, 0] ^= ref[:, 1]
    np.testing.assert_array_equal(out, ref)
    f2 = rng.integers(-9, 9, (64, 2)).astype(np.float32)
    out = run(ptx, "copy_float2_ldg", 1, 64, (f2, np.zeros((64, 2), np.float32), np.int32(64)))[1]
    np.testing.assert_array_equal(out, f2[:, ::-1])
    s4 = rng.integers(-9, 9, (256, 4)).astype(np.float32)
    out = run(ptx, "shared_vec", 2, 128, (s4, np.zeros((256, 4), np.float32)))[1]
    np.testing.assert_array_equal(out, s4.reshape(2, 128, 4)[:, ::-1].reshape(256, 4))


def test_tiled_matmul_with_bounds_and_dynamic_shared_transpose(cuda_ptx):
    ptx = cuda_ptx("ptx_matmul_tiled")
    rng = np.random.default_rng(8)
    n = 40   # not a multiple of the tile: the bounds checks pad with zeros
    a = rng.integers(-3, 4, (n, n)).astype(np.float32)
    b = rng.integers(-3, 4, (n, n)).astype(np.float32)
    c = run(ptx, "matmul_tiled", (3, 3, 1), (16, 16, 1), (a, b, np.zeros((n, n), np.float32), np.int32(n)))[2]
    np.testing.assert_array_equal(c, (a.astype(np.float64) @ b).astype(np.float32))
    w, h = 64, 96
    m = rng.random((h, w)).astype(np.float32)
    out = run(ptx, "transpose_dyn", (2, 3, 1), (32, 32, 1), (m, np.zeros((w, h), np.float32), np.int32(w), np.int32(h)),
              shared=32 * 33 * 4)[1]
    np.testing.assert_array_equal(out, m.T)


def test_cp_async_and_barrier_reductions(cuda_ptx):
    ptx = cuda_ptx("ptx_modern_features")
    rng = np.random.default_rng(9)
    n = 500
    inp = rng.integers(-3, 4, 512).astype(np.float32)
    out = run(ptx, "async_copy", 2, 256, (inp, np.zeros(512, np.float32), np.int32(n)))[1]
    ref = np.zeros(512, np.float32)
    for blk in range(2):
        buf = np.zeros(256, np.float32)
        for t in range(256):
            if blk * 256 + t < n:
                buf[t] = inp[blk * 256 + t]
        v = np.array([buf[t] + buf[t + 1] + buf[t + 2] if t + 2 < 256 else 0 for t in range(256)], np.float32)
        cnt, any_ = int((v > 0).sum()), int((v < 0).any())
        for t in range(256):
            i = blk * 256 + t
            if i < n:
                ref[i] = v[t] + cnt + any_ + inp[i] + inp[i]
    np.testing.assert_array_equal(out, ref)


def test_cooperative_groups_match_and_redux(cuda_ptx):
    rng = np.random.default_rng(10)
    n = 200
    inp = rng.integers(0, 4, 256).astype(np.int32)
    out = run(cuda_ptx("ptx_modern_features"), "cg_reduce", 2, 128, (inp, np.zeros(1, np.int32), np.int32(n)))[1]
    v = np.where(np.arange(256) < n, inp, 0)
    total = 0
    for w in range(8):
        vw = v[w * 32:(w + 1) * 32]
        m = sum(1 << l for l in range(32) if vw[l] == vw[0])
        total += int(vw.sum()) + m + int(vw.sum())
    assert out[0] == np.array(total & 0xFFFFFFFF, np.uint32).view(np.int32)


def test_cub_block_reduce(cuda_ptx):
    rng = np.random.default_rng(11)
    inp = rng.integers(-100, 100, 512).astype(np.float32)
    out = run(cuda_ptx("ptx_modern_features"), "cub_block_sum", 4, 128, (inp, np.zeros(4, np.float32)))[1]
    np.testing.assert_array_equal(out, inp.reshape(4, 128).sum(axis=1))
