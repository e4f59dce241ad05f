"""The emulator's SIMT execution on real nvcc PTX, against NumPy references: the six
reconvergence cases of collectors.md sec. 3.2 (shfl on both sides of a divergent if/else,
__syncthreads on both sides, early return then __syncthreads, a spin on a volatile flag,
divergent loops, SpMV), warp collectives, and atomics under contention."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.emu_support import cuda_ptx, run  # noqa: F401 (cuda_ptx is a fixture)
from tuiprof.collect.emu.device import EmuDevice, RecordChoice, first_ctas


def test_divergent_if_else_and_collatz_loops(cuda_ptx):
    rng = np.random.default_rng(1)
    n = 300
    inp = rng.integers(1, 200, 320).astype(np.int32)
    out = run(cuda_ptx("ptx_divergent"), "divergent", 3, 128, (inp, np.zeros(320, np.int32), np.int32(n)))[1]
    ref = np.zeros(320, np.int32)
    for i in range(n):
        v, steps = int(inp[i]), 0
        if v & 1:
            while v != 1 and steps < 1000:
                v = 3 * v + 1 if v & 1 else v >> 1
                steps += 1
            ref[i] = steps
        else:
            ref[i] = -sum(int(inp[(i + k) % n]) for k in range(v & 15))
    np.testing.assert_array_equal(out, ref)


def test_switch(cuda_ptx):
    rng = np.random.default_rng(2)
    inp = rng.integers(-50, 50, 256).astype(np.int32)
    prev = rng.integers(-5, 5, 256).astype(np.float32)
    out = run(cuda_ptx("ptx_divergent"), "switch_kernel", 2, 128, (inp, prev.copy(), np.int32(250)))[1]
    ref = prev.copy()
    for i in range(250):
        c = inp[i] & 7
        ref[i] = {0: 1.0, 1: inp[i] * 2.0, 2: prev[i] + 3.0, 3: float(int(inp[i] / 7)),
                  4: float(int(np.fmod(inp[i], 9)))}.get(c, -1.0)
    np.testing.assert_array_equal(out, ref)


def test_shfl_on_both_sides_of_a_divergent_branch(cuda_ptx):
    v = (np.arange(64) * 3).astype(np.int32)
    out = run(cuda_ptx("ptx_sync_in_divergence"), "shfl_both_sides", 1, 64, (v, np.zeros(64, np.int32)))[1]
    lane = np.arange(64) % 32
    partner = (np.arange(64) // 32) * 32 + (lane ^ 16)
    np.testing.assert_array_equal(out, np.where(lane < 16, v[partner] + 1, v[partner] - 1))


def test_shfl_sources_computed_inside_each_side(cuda_ptx):
    v = (np.arange(32) * 3).astype(np.int32)
    out = run(cuda_ptx("ptx_sync_in_divergence"), "shfl_both_sides2", 1, 32, (v, np.zeros(32, np.int32)))[1]
    a, b = v * 2, v + 100
    lane = np.arange(32)
    np.testing.assert_array_equal(out, np.where(lane < 16, b[lane ^ 16] + 1, a[lane ^ 16] - 1))


def test_syncthreads_on_both_sides(cuda_ptx):
    v = np.arange(256, dtype=np.int32) * 7 - 100
    out = run(cuda_ptx("ptx_sync_in_divergence"), "bar_both_sides", 1, 256, (v, np.zeros(256, np.int32)))[1]
    s = np.where(np.arange(256) & 1, v * 2, v + 1)
    np.testing.assert_array_equal(out, s[np.arange(256) ^ 1])


def test_early_return_then_syncthreads(cuda_ptx):
    n = 200
    v = np.arange(256, dtype=np.int32) + 5
    out = run(cuda_ptx("ptx_sync_in_divergence"), "early_exit_then_bar", 2, 128, (v, np.zeros(256, np.int32), np.int32(n)))[1]
    ref = np.zeros(256, np.int32)
    for i in range(n):
        c, t = divmod(i, 128)
        j = c * 128 + (t + 1) % 128
        ref[i] = v[j] if j < n else 0   # threads past n exited: their shared slot was never written
    np.testing.assert_array_equal(out, ref)


def test_spin_on_a_volatile_flag_set_by_another_lane(cuda_ptx):
    flag, data = run(cuda_ptx("ptx_modern_features"), "volatile_flag", 1, 32,
                     (np.zeros(1, np.int32), np.zeros(1, np.int32)))
    assert flag[0] == 1 and data[0] == 42


def test_spmv_divergent_loops(cuda_ptx):
    rng = np.random.default_rng(3)
    rows = 200
    lens = rng.integers(0, 12, rows)
    rowptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    col = rng.integers(0, rows, rowptr[-1]).astype(np.int32)
    val = rng.integers(-3, 4, rowptr[-1]).astype(np.float32)
    x = rng.integers(-3, 4, rows).astype(np.float32)
    ref = np.array([np.sum(val[rowptr[r]:rowptr[r + 1]] * x[col[rowptr[r]:rowptr[r + 1]]]) for r in range(rows)],
                   np.float32)
    for kernel in ("spmv_csr", "spmv_csr_plain"):
        y = run(cuda_ptx("ptx_spmv_csr"), kernel, 4, 64, (np.int32(rows), rowptr, col, val, x, np.zeros(rows, np.float32)))[5]
        np.testing.assert_array_equal(y, ref)


def test_spmv_warp_accesses_cover_each_nonzero_once(cuda_ptx):
    """Every nonzero's column index is loaded by exactly one lane of one warp access, at its address
    (nvcc unrolls this loop by 4, so several ops share the work)."""
    module, src, text = cuda_ptx("ptx_spmv_csr")
    rows = 32
    lens = np.arange(rows) % 7
    rowptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    col = np.zeros(rowptr[-1], np.int32)
    dev = EmuDevice(module, src, text, record=RecordChoice(snapshot=first_ctas(1)))
    bufs = [dev.to_device(a) for a in (rowptr, col, np.ones(rowptr[-1], np.float32), np.ones(rows, np.float32),
                                        np.zeros(rows, np.float32))]
    dev.launch("spmv_csr", 1, 32, [np.int32(rows)] + bufs)
    rec = dev.recorded
    colidx = [o.id for o in rec.ops if o.label.startswith("colidx")]
    sel = np.isin(rec.op, colidx)
    active = np.unpackbits(rec.mask[sel].view(np.uint8), bitorder="little").reshape(-1, 32).astype(bool)
    addrs = np.sort(rec.addr[sel][active])
    np.testing.assert_array_equal(addrs, bufs[1].address + 4 * np.arange(rowptr[-1], dtype=np.uint64))


def test_warp_reduction_and_votes(cuda_ptx):
    rng = np.random.default_rng(4)
    n = 1000
    inp = rng.integers(-3, 4, n).astype(np.float32)
    out = run(cuda_ptx("ptx_reduce_shfl"), "reduce_shfl", 4, 128, (inp, np.zeros(1, np.float32), np.int32(n)))[1]
    assert out[0] == inp.sum()
    vi = rng.integers(-5, 6, 96).astype(np.int32)
    got = run(cuda_ptx("ptx_reduce_shfl"), "vote_ops", 1, 96, (vi, np.zeros(96, np.uint32), np.int32(90)))[1]
    v = np.where(np.arange(96) < 90, vi, 0).astype(np.int64)
    ref = np.zeros(96, np.uint64)
    for w in range(3):
        lanes = np.arange(32)
        vw = v[w * 32:(w + 1) * 32]
        ballot = int(sum(1 << l for l in lanes if vw[l] > 0))
        all_ = int(all(vw > 0))
        any_ = int(any(vw < 0))
        for l in lanes:
            i = w * 32 + l
            if i >= 90:
                continue
            up = vw[l - 1] if l >= 1 else vw[l]
            clz = 32 - int(vw[l] & 0xFFFFFFFF).bit_length()
            ffs = (ballot & -ballot).bit_length()
            total = ballot + all_ + any_ + 0xFFFFFFFF + up + vw[l ^ 4] + vw[0] + bin(ballot).count("1") + ffs + clz
            ref[i] = total & 0xFFFFFFFF
    np.testing.assert_array_equal(got.astype(np.uint64), ref)


def test_histogram_atomics_under_contention(cuda_ptx):
    rng = np.random.default_rng(5)
    data = (rng.integers(0, 256, 5000) ** 2 % 256).astype(np.uint8)   # skewed: many lanes hit one bin
    ref = np.bincount(data, minlength=256).astype(np.uint32)
    for kernel in ("histogram_global", "histogram_shared"):
        hist = run(cuda_ptx("ptx_histogram_atomic"), kernel, 4, 128,
                   (data, np.int32(data.shape[0]), np.zeros(256, np.uint32)))[2]
        np.testing.assert_array_equal(hist, ref)


def test_every_atomic_operation(cuda_ptx):
    p = np.zeros(9, np.int32)
    p[1] = 1000
    p[4] = -1
    f, d, u = np.zeros(1, np.float32), np.zeros(1, np.float64), np.zeros(1, np.uint64)
    p, f, d, u = run(cuda_ptx("ptx_histogram_atomic"), "atomics_misc", 1, 64, (p, f, d, u))
    t = np.arange(64)
    assert p[0] == 63 and p[1] == 0           # max, min
    assert p[2] == 64                         # cas(t -> t+1) applied by threads in order 0..63
    assert p[3] in t                          # exch: some thread's value
    assert p[4] == np.bitwise_and.reduce(t) and p[5] == np.bitwise_or.reduce(t) and p[6] == np.bitwise_xor.reduce(t)
    assert p[7] == -t.sum()                   # atomicSub
    assert p[8] == 64                         # inc with limit 100
    assert f[0] == 64 and d[0] == 64 and u[0] == 64


@pytest.mark.parametrize("start", [0, 3])
def test_clocks_are_monotone_and_smid_is_the_modeled_placement(cuda_ptx, start):
    """%clock64 and %globaltimer grow within each thread and from one CTA to the next (one worker
    thread runs the CTAs in order); %smid is the same for a whole CTA and follows the simulator's
    placement, snapshot CTA k on SM k mod S, continued over the grid from the first snapshot CTA;
    %warpid and %laneid are the thread's."""
    grid, block, sms = 6, 64, 4
    module, src, text = cuda_ptx("emu_special")
    dev = EmuDevice(module, src, text, record=RecordChoice(snapshot=first_ctas(2, start)), n_sms=sms, threads=1)
    out = dev.zeros(6 * grid * block, np.int64)
    dev.launch("clocks", grid, block, (out,))
    c0, c1, g0, g1, smid, ids = dev.from_device(out).reshape(grid * block, 6).T
    assert (c1 > c0).all() and (g1 > g0).all()
    per_cta = lambda v: v.reshape(grid, block)  # noqa: E731
    assert (per_cta(c0).min(axis=1)[1:] > per_cta(c1).max(axis=1)[:-1]).all()
    assert (per_cta(g0).min(axis=1)[1:] > per_cta(g1).max(axis=1)[:-1]).all()
    np.testing.assert_array_equal(per_cta(smid), np.repeat((np.arange(grid) - start) % sms, block).reshape(grid, block))
    t = np.tile(np.arange(block), grid)
    np.testing.assert_array_equal(ids, t // 32 * 100 + t % 32)
