"""Kernels compiled with ``nvcc -G`` (every access generic, a stack in local memory through
%SP/%SPL, calls for most operators) run on the emulator with the same results as -O3."""

from __future__ import annotations

import numpy as np

from tests.support.emu_support import cuda_ptx, run  # noqa: F401 (a fixture)


def test_debug_build_divergence_and_early_return(cuda_ptx):
    rng = np.random.default_rng(1)
    n = 200
    inp = rng.integers(1, 100, 256).astype(np.int32)
    fast = run(cuda_ptx("ptx_divergent"), "divergent", 2, 128, (inp, np.zeros(256, np.int32), np.int32(n)))[1]
    slow = run(cuda_ptx("ptx_divergent", debug=True), "divergent", 2, 128, (inp, np.zeros(256, np.int32), np.int32(n)))[1]
    np.testing.assert_array_equal(slow, fast)
    v = np.arange(64, dtype=np.int32)
    out = run(cuda_ptx("ptx_sync_in_divergence", debug=True), "shfl_both_sides2", 1, 32, (v[:32], np.zeros(32, np.int32)))[1]
    lane = np.arange(32)
    np.testing.assert_array_equal(out, np.where(lane < 16, v[lane ^ 16] + 100 + 1, v[lane ^ 16] * 2 - 1))


def test_debug_build_local_arrays_calls_and_generic_pointers(cuda_ptx):
    rng = np.random.default_rng(2)
    inp = rng.integers(-50, 50, 128).astype(np.int32)
    args = (inp, np.zeros(128, np.int32), np.int32(100), np.int32(5))
    np.testing.assert_array_equal(run(cuda_ptx("ptx_local_mem", debug=True), "local_array", 1, 128, args)[1],
                                  run(cuda_ptx("ptx_local_mem"), "local_array", 1, 128, args)[1])
    g = rng.integers(-9, 9, 512).astype(np.float32)
    for use_shared in (0, 1):
        a = (g, np.zeros(512, np.float32), np.int32(512), np.int32(use_shared))
        np.testing.assert_array_equal(run(cuda_ptx("ptx_generic_ptr", debug=True), "generic_ptr", 2, 256, a)[1],
                                      run(cuda_ptx("ptx_generic_ptr"), "generic_ptr", 2, 256, a)[1])


def test_debug_build_atomics_and_reduction(cuda_ptx):
    rng = np.random.default_rng(3)
    data = rng.integers(0, 256, 3000).astype(np.uint8)
    hist = run(cuda_ptx("ptx_histogram_atomic", debug=True), "histogram_shared", 2, 128,
               (data, np.int32(3000), np.zeros(256, np.uint32)))[2]
    np.testing.assert_array_equal(hist, np.bincount(data, minlength=256))
    x = rng.integers(-3, 4, 700).astype(np.float32)
    out = run(cuda_ptx("ptx_reduce_shfl", debug=True), "reduce_shfl", 2, 128, (x, np.zeros(1, np.float32), np.int32(700)))[1]
    assert out[0] == x.sum()
