"""The emulator's cross-lane instructions are exact or refused (issue 20 sec. 3), against NumPy
references over random cases drawn by hypothesis: redux.sync, vote.sync, match.sync and shfl.sync
with partial, per-lane membermasks (groups that meet at one PC or across two, members that have
exited), CTA barriers with thread counts and bar.red, atomics under contention (every old value
handed out in some serial order), cooperative groups as production code writes them; and the
cases that PTX leaves undefined, which must stop with the unsupported-instruction error.

Each random batch is one launch of tests/cuda/emu_collectives.cu (one warp per case)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.emu_support import cuda_ptx, run  # noqa: F401 (cuda_ptx is a fixture)
from tuiprof.errors import TuiprofError

LANES = np.arange(32, dtype=np.int64)
NOUT = 32
SEGMASKS = np.array([0, 0x10, 0x18, 0x1C, 0x1E, 0x1F], np.uint32)
"""shfl's c[12:8] for widths 32, 16, 8, 4, 2, 1 (c = ((32 - width) << 8) | clamp)."""


def lane_bits(words: np.ndarray) -> np.ndarray:
    """[..., 32] bool: bit k of each 32-bit word."""
    return ((words[..., None].astype(np.int64) >> LANES) & 1).astype(bool)


def word_of(bits: np.ndarray) -> np.ndarray:
    """The 32-bit words whose bits are `bits` ([..., 32] bool)."""
    return (bits.astype(np.int64) << LANES).sum(-1).astype(np.uint32)


# ------------------------------------------------------------------ warp collectives: cases

def shfl_source(mode: int, lane: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(source lane j, in range) of shfl.sync (PTX ISA, shfl.sync, Semantics)."""
    bval, cval, seg = b & 31, c & 31, (c >> 8) & 31
    max_lane = (lane & seg) | (cval & ~seg)
    if mode == 0:
        j = lane - bval
        ok = j >= max_lane
    elif mode == 1:
        j = lane + bval
        ok = j <= max_lane
    elif mode == 2:
        j = lane ^ bval
        ok = j <= max_lane
    else:
        j = (lane & seg) | (bval & ~seg)
        ok = j <= max_lane
    return np.where(ok, j, lane), ok


def make_cases(rng: np.random.Generator, n: int, groups: str, p_exit: float, p_skip: float,
               p_side: float, bias: float) -> dict[str, np.ndarray]:
    """`n` warps' worth of per-lane operands: membermasks that partition each warp's taking-part
    lanes into groups (`groups`: random, tiles of a random width, or one), some lanes exited
    (still named in their group's mask: PTX counts only non-exited members), some skipping the
    collectives, some running them from the second copy of the code; values whose low bits (the
    votes' predicates and match keys) are skewed by `bias`; shfl operands whose source lane, when
    in range, takes part (reading any other lane is undefined, and refused)."""
    lane = np.broadcast_to(LANES, (n, 32))
    exited = rng.random((n, 32)) < p_exit
    skip = ~exited & (rng.random((n, 32)) < p_skip)
    if groups == "random":
        gid = rng.integers(0, rng.integers(1, 9, (n, 1)), (n, 32))
    elif groups == "tiles":
        gid = lane // (1 << rng.integers(0, 6, (n, 1)))
    else:
        gid = np.zeros((n, 32), np.int64)
    member = ~skip
    same = (gid[:, :, None] == gid[:, None, :]) & member[:, None, :]
    masks = np.where(member & ~exited, word_of(same), 0).astype(np.uint32)
    vals = rng.integers(0, 1 << 32, (n, 32), dtype=np.uint64).astype(np.uint32)
    low = np.where(rng.random((n, 32)) < bias, rng.integers(0, 4, (n, 1)), rng.integers(0, 4, (n, 32)))
    vals = (vals & ~np.uint32(3)) | low.astype(np.uint32)
    flags = exited.astype(np.int32) | ((rng.random((n, 32)) < p_side) << 1).astype(np.int32)
    group = masks & word_of(~exited)[:, None]
    sb = np.zeros((n, 32, 4), np.uint32)
    sc = np.zeros((n, 32, 4), np.uint32)
    for mode in range(4):
        done = np.zeros((n, 32), bool)
        for _ in range(8):
            b = np.where(rng.random((n, 32)) < 0.5, rng.integers(0, 8, (n, 32)), rng.integers(0, 64, (n, 32)))
            b = b.astype(np.uint32)
            clamp = np.where(rng.random((n, 32)) < 0.5, 31 * (mode != 0), rng.integers(0, 32, (n, 32)))
            c = (SEGMASKS[rng.integers(0, 6, (n, 32))] << 8) | clamp.astype(np.uint32)
            c |= rng.integers(0, 2, (n, 32)).astype(np.uint32) * np.uint32(0xA0E0)   # bits shfl ignores
            j, _ok = shfl_source(mode, lane, b.astype(np.int64), c.astype(np.int64))
            valid = ((group.astype(np.int64) >> j) & 1).astype(bool) & ~done
            sb[..., mode] = np.where(valid, b, sb[..., mode])
            sc[..., mode] = np.where(valid, c, sc[..., mode])
            done |= valid
        # fallback: the lane's own value (b = 0, or b = lane for .idx)
        sb[..., mode] = np.where(done, sb[..., mode], lane if mode == 3 else 0)
    return {"masks": masks, "vals": vals, "flags": flags, "sb": sb, "sc": sc}


def expected_collectives(cs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(expected outputs [n, 32, NOUT], lanes that wrote them [n, 32]), from PTX's definitions:
    each lane's group is its membermask less the exited lanes."""
    masks, vals, flags = cs["masks"], cs["vals"], cs["flags"]
    n = masks.shape[0]
    lane = np.broadcast_to(LANES, (n, 32))
    exited = (flags & 1).astype(bool)
    wrote = (masks != 0) & ~exited
    inb = lane_bits(masks & word_of(~exited)[:, None])           # [n, l, k]: k in lane l's group
    v = vals.astype(np.int64)
    vk = np.broadcast_to(v[:, None, :], inb.shape)
    sv = vals.view(np.int32).astype(np.int64)
    svk = np.broadcast_to(sv[:, None, :], inb.shape)
    out = np.zeros((n, 32, NOUT), np.int64)
    out[..., 0] = np.where(inb, vk, 0).sum(-1)
    out[..., 1] = np.where(inb, vk, 0xFFFFFFFF).min(-1)
    out[..., 2] = np.where(inb, vk, 0).max(-1)
    out[..., 3] = np.where(inb, svk, 2**31 - 1).min(-1)
    out[..., 4] = np.where(inb, svk, -2**31).max(-1)
    out[..., 5] = np.bitwise_and.reduce(np.where(inb, vk, 0xFFFFFFFF), -1)
    out[..., 6] = np.bitwise_or.reduce(np.where(inb, vk, 0), -1)
    out[..., 7] = np.bitwise_xor.reduce(np.where(inb, vk, 0), -1)
    out[..., 8] = out[..., 0]
    p = np.broadcast_to((vals & 1).astype(bool)[:, None, :], inb.shape)
    any_p, any_not = (inb & p).any(-1), (inb & ~p).any(-1)
    out[..., 9], out[..., 10] = ~any_not, ~any_p              # all(p), all(!p)
    out[..., 11], out[..., 12] = any_p, any_not               # any(p), any(!p)
    out[..., 13] = out[..., 14] = ~(any_p & any_not)          # uni: the same either way
    out[..., 15], out[..., 16] = word_of(inb & p), word_of(inb & ~p)
    key = (vals & 3).astype(np.int64)
    same_key = inb & (key[:, None, :] == key[:, :, None])
    out[..., 17] = out[..., 18] = word_of(same_key)           # the b64 key equals iff vals & 3 does
    all_p_equal = ~(any_p & any_not)
    group_word = word_of(inb)
    out[..., 19], out[..., 20] = np.where(all_p_equal, group_word, 0), all_p_equal
    all_key_equal = ~(inb & ~same_key).any(-1)
    out[..., 21], out[..., 22] = np.where(all_key_equal, group_word, 0), all_key_equal
    for mode in range(4):
        j, ok = shfl_source(mode, lane, cs["sb"][..., mode].astype(np.int64), cs["sc"][..., mode].astype(np.int64))
        out[..., 23 + 2 * mode] = np.take_along_axis(v, j, 1)
        out[..., 24 + 2 * mode] = ok
    out[..., 31] = (flags >> 1) & 1
    out = np.where(wrote[..., None], out & 0xFFFFFFFF, 0)
    return out.astype(np.uint32), wrote


def run_collectives(cuda_ptx, cs: dict[str, np.ndarray]) -> np.ndarray:
    n = cs["masks"].shape[0]
    args = (cs["masks"].ravel(), cs["vals"].ravel(), cs["sb"].ravel(), cs["sc"].ravel(), cs["flags"].ravel(),
            np.zeros(n * 32 * NOUT, np.uint32))
    per_cta = 4
    assert n % per_cta == 0
    out = run(cuda_ptx("emu_collectives"), "warp_collectives", n // per_cta, 32 * per_cta, args)[5]
    return out.reshape(n, 32, NOUT)


OUTPUT_NAMES = ("redux.add.u32 redux.min.u32 redux.max.u32 redux.min.s32 redux.max.s32 redux.and redux.or "
                "redux.xor redux.add.s32 vote.all vote.all(!p) vote.any vote.any(!p) vote.uni vote.uni(!p) "
                "vote.ballot vote.ballot(!p) match.any.b32 match.any.b64 match.all.b32 match.all.b32|p "
                "match.all.b64 match.all.b64|p shfl.up shfl.up|p shfl.down shfl.down|p shfl.bfly shfl.bfly|p "
                "shfl.idx shfl.idx|p side").split()


def assert_collectives(got: np.ndarray, want: np.ndarray, cs: dict[str, np.ndarray]) -> None:
    bad = np.argwhere(got != want)
    if bad.size:
        c, l, k = bad[0]
        raise AssertionError(f"{len(bad)} wrong outputs; first: case {c} lane {l} {OUTPUT_NAMES[k]}: got "
                             f"{got[c, l, k]:#x}, want {want[c, l, k]:#x}; masks {[hex(m) for m in cs['masks'][c]]}, "
                             f"flags {cs['flags'][c].tolist()}")


@settings(max_examples=12, deadline=None, database=None)
@given(seed=st.integers(0, 2**32 - 1), groups=st.sampled_from(["random", "tiles", "one"]),
       p_exit=st.sampled_from([0.0, 0.1, 0.4]), p_skip=st.sampled_from([0.0, 0.15]),
       p_side=st.sampled_from([0.0, 0.5, 1.0]), bias=st.sampled_from([0.0, 0.7, 0.95]))
def test_warp_collectives_with_partial_masks(cuda_ptx, seed, groups, p_exit, p_skip, p_side, bias):
    """256 warps per example: redux (every op, signed and unsigned), vote (all/any/uni/ballot, p and
    !p), match (any/all, b32/b64, match.all's predicate), shfl (every mode, random clamp and
    segment mask, the in-range predicate)."""
    cs = make_cases(np.random.default_rng(seed), 256, groups, p_exit, p_skip, p_side, bias)
    want, _ = expected_collectives(cs)
    assert_collectives(run_collectives(cuda_ptx, cs), want, cs)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, database=None)
@given(seed=st.integers(0, 2**32 - 1), groups=st.sampled_from(["random", "tiles", "one"]),
       p_exit=st.floats(0, 0.6), p_skip=st.floats(0, 0.4), p_side=st.floats(0, 1), bias=st.floats(0, 1))
def test_warp_collectives_with_partial_masks_many(cuda_ptx, seed, groups, p_exit, p_skip, p_side, bias):
    cs = make_cases(np.random.default_rng(seed), 512, groups, p_exit, p_skip, p_side, bias)
    want, _ = expected_collectives(cs)
    assert_collectives(run_collectives(cuda_ptx, cs), want, cs)


def test_reduce_over_the_groups_of_match_any(cuda_ptx):
    """The issue's reproduction: __reduce_add_sync(__match_any_sync(full, lane & 1), lane) is 240
    on even lanes and 256 on odd ones (it was 496 everywhere)."""
    out = run(cuda_ptx("emu_collectives"), "reduce_by_parity", 2, 64, (np.zeros(128, np.uint32),))[0]
    np.testing.assert_array_equal(out, np.where(np.arange(128) & 1, 256, 240))


def test_activemask_leaves_out_predicated_off_threads(cuda_ptx):
    on = (np.random.default_rng(3).random(64) < 0.5).astype(np.uint32)
    out = run(cuda_ptx("emu_collectives"), "activemask_predicated", 1, 64, (on, np.zeros(64, np.uint32)))[1]
    ballot = word_of(on.reshape(2, 32).astype(bool))
    np.testing.assert_array_equal(out, np.where(on, np.repeat(ballot, 32), 0))


# ------------------------------------------------------------------ undefined in PTX: refused

@pytest.mark.parametrize("kernel, block, why", [
    ("redux_outside_own_mask", 32, r"lane 0 .*not in its membermask 0x00000002"),
    ("masks_disagree", 32, r"lanes 0 and 1 .*different membermasks \(0x00000003 and 0x00000002\)"),
    ("shfl_from_outside_mask", 32, r"lane 0 reads lane 16, which does not execute it"),
    ("shfl_from_exited_lane", 32, r"lane 8 reads lane 16, which does not execute it"),
    ("bar_red_mixed_with_sync", 64, r"barrier 0 .*bar.red"),
])
def test_undefined_cases_are_refused(cuda_ptx, kernel, block, why):
    compiled = cuda_ptx("emu_collectives")
    line = next(i + 1 for i, text in enumerate(compiled[2].splitlines()) if f"void {kernel}(" in text)
    args = (np.arange(block, dtype=np.uint32), np.zeros(block, np.uint32))
    if kernel == "bar_red_mixed_with_sync":
        args = args[1:]
    with pytest.raises(TuiprofError, match=r"unsupported PTX instruction (redux|shfl|bar)\S* .*emu_collectives.cu:"
                                           + rf"(\d+).*{why}") as e:
        run(compiled, kernel, 1, block, args)
    at = int(e.value.args[0].split("emu_collectives.cu:")[1].split()[0].rstrip(",)"))
    assert line < at <= line + 6
    assert e.value.hint


# ------------------------------------------------------------------ CTA barriers

@settings(max_examples=10, deadline=None, database=None)
@given(seed=st.integers(0, 2**32 - 1), p_exit=st.sampled_from([0.0, 0.3, 0.9]))
def test_barriers_count_warps_and_reduce_over_arrived_threads(cuda_ptx, seed, p_exit):
    """A warp arrives at bar.sync/bar.red when its non-exited threads have, from wherever in the
    code, and counts as 32 threads towards a thread count (PTX ISA, barrier): two warps with exited
    threads complete `bar.red.popc 1, 64`, four complete `barrier.sync 3, 128` reached from both
    sides of a branch. bar.red's popc/and/or cover the threads that arrive."""
    rng = np.random.default_rng(seed)
    exits = (rng.random(128) < p_exit).astype(np.int32)
    exits[rng.integers(0, 32, 4) + 32 * np.arange(4)] = 0        # every warp keeps a thread
    preds = (rng.random(128) < rng.random()).astype(np.int32)
    out = run(cuda_ptx("emu_collectives"), "barriers", 1, 128, (exits, preds, np.zeros(5 * 128, np.uint32)))[2]
    out = out.reshape(128, 5)
    live = exits == 0
    t = np.arange(128)
    pair_popc = np.array([preds[(t // 64 == q) & live].sum() for q in range(2)])
    np.testing.assert_array_equal(out[live, 0], pair_popc[t[live] // 64])
    partner_live = live & live[t ^ 32]
    np.testing.assert_array_equal(out[partner_live, 1], 1000 + (t ^ 32)[partner_live])
    np.testing.assert_array_equal(out[live, 2], preds[live].sum())
    np.testing.assert_array_equal(out[live, 3], 2 * int(preds[live].all()) + int((preds[live] == 0).any()))
    mirror_live = live & live[127 - t]
    np.testing.assert_array_equal(out[mirror_live, 4], 2000 + (127 - t)[mirror_live])


def test_bar_arrive_lets_a_producer_warp_go_on(cuda_ptx):
    out = run(cuda_ptx("emu_collectives"), "producer_consumer", 1, 64, (np.zeros(32, np.uint32),))[0]
    np.testing.assert_array_equal(out, 7 * (31 - np.arange(32)) + 1)


# ------------------------------------------------------------------ atomics under contention

def atomic_new(op: int, r: int, b: int, c: int, bits: int) -> int:
    """The value an atomic leaves in a word holding `r` (PTX ISA, atom, Semantics; CUDA's
    atomicCAS(a, c, b) is atom.cas with compare c and new value b)."""
    top = (1 << bits) - 1
    sgn = lambda x: x - (1 << bits) if x >> (bits - 1) else x  # noqa: E731
    return [lambda: (r + b) & top, lambda: (r - b) & top, lambda: b, lambda: min(r, b), lambda: max(r, b),
            lambda: min(sgn(r), sgn(b)) & top, lambda: max(sgn(r), sgn(b)) & top,
            lambda: 0 if r >= b else r + 1, lambda: b if r == 0 or r > b else r - 1,
            lambda: b if r == c else r, lambda: r & b, lambda: r | b, lambda: r ^ b][op]()


def serial_order_exists(first: int, last: int, ops: list[tuple[int, int]], olds: list[int], new) -> bool:
    """Whether some order of `ops` applied one at a time (`new(r, *op)`) to a word holding `first`
    hands each op the old value it returned and leaves `last`. Each op is an edge from the value it
    read to the value it left; such an order is an Eulerian trail of those edges from `first` to
    `last`: every value enters as often as it leaves (but `first` leaves once more, `last` enters
    once more) and all edges hang together with `first`."""
    balance: dict[int, int] = {first: 0, last: 0}
    parent: dict[int, int] = {}

    def root(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    root(first)
    for op, r in zip(ops, olds):
        to = new(r, *op)
        balance[r] = balance.get(r, 0) + 1
        balance[to] = balance.get(to, 0) - 1
        parent[root(r)] = root(to)
    balance[first] -= 1
    balance[last] += 1
    if any(balance.values()):
        return False
    return all(root(r) == root(first) for r in olds)


def check_atomics(idx, b, c, first, last, old, bits: int, ops) -> None:
    nw = first.shape[1]
    for op in ops:
        for w in range(nw):
            lanes = np.flatnonzero(idx[op] == w)
            pairs = [(int(b[op, t]), int(c[op, t])) for t in lanes]
            olds = [int(old[op, t]) for t in lanes]
            ok = serial_order_exists(int(first[op, w]), int(last[op, w]), pairs, olds,
                                     lambda r, x, y, op=op: atomic_new(op, r, x, y, bits))
            assert ok, f"op {op} word {w}: no serial order gives olds {olds} from {first[op, w]} to {last[op, w]}"


OPS32 = tuple(range(13))
OPS64 = (0, 2, 3, 4, 5, 6, 9, 10, 11, 12)


@settings(max_examples=10, deadline=None, database=None)
@given(seed=st.integers(0, 2**32 - 1), shared=st.booleans(), wide=st.booleans(), nw=st.sampled_from([1, 4]))
def test_atomics_hand_out_old_values_in_some_serial_order(cuda_ptx, seed, shared, wide, nw):
    """Two warps, 13 (32-bit) or 10 (64-bit) operations on few words: add, sub, exch, min/max
    signed and unsigned, inc/dec with their wrap, cas, and/or/xor, on global or shared memory."""
    rng = np.random.default_rng(seed)
    bits, dt, ops = (64, np.uint64, OPS64) if wide else (32, np.uint32, OPS32)
    T = 64
    idx = np.where(rng.random((13, T)) < 0.15, -1, rng.integers(0, nw, (13, T))).astype(np.int32)
    small = rng.integers(0, 6, (13, T)).astype(dt)
    big = rng.integers(0, 1 << 63, (13, T), dtype=np.uint64).astype(dt) << dt(rng.integers(0, 2))
    b = np.where(rng.random((13, T)) < 0.6, small, big)
    c = rng.integers(0, 6, (13, T)).astype(dt)
    first = np.where(rng.random((13, nw)) < 0.7, rng.integers(0, 6, (13, nw)).astype(dt),
                     rng.integers(0, 1 << 63, (13, nw), dtype=np.uint64).astype(dt))
    kernel = "atomics64" if wide else "atomics32"
    res = run(cuda_ptx("emu_collectives"), kernel, 1, T,
              (np.int32(shared), idx.ravel(), b.ravel(), c.ravel(), first.ravel().copy(), np.zeros(13 * T, dt), np.int32(nw)))
    check_atomics(idx, b, c, first, res[4].reshape(13, nw), res[5].reshape(13, T), bits, ops)


def test_every_lane_of_a_warp_gets_a_distinct_old_value(cuda_ptx):
    for shared in (0, 1):
        idx = np.full((13, 32), -1, np.int32)
        idx[0] = 0
        res = run(cuda_ptx("emu_collectives"), "atomics32", 1, 32,
                  (np.int32(shared), idx.ravel(), np.ones(13 * 32, np.uint32), np.zeros(13 * 32, np.uint32),
                   np.zeros(13, np.uint32), np.zeros(13 * 32, np.uint32), np.int32(1)))
        np.testing.assert_array_equal(np.sort(res[5][:32]), np.arange(32))
        assert res[4][0] == 32


def f32_add(r: int, x: int, ftz: bool) -> int:
    """Bits of float32 r + x rounded to nearest even; `ftz`: subnormal inputs and result flushed to
    sign-preserving zero."""
    def flush(bits: int) -> int:
        return bits & 0x80000000 if ftz and (bits & 0x7F800000) == 0 else bits
    a = np.array([flush(r), flush(x)], np.uint32).view(np.float32)
    return flush(int(np.array([a[0] + a[1]], np.float32).view(np.uint32)[0]))


def test_float_atomic_add_flushes_subnormals_on_global_memory_only(cuda_ptx):
    """PTX ISA, atom: atom.add.f32 on global memory flushes subnormal inputs and results to
    sign-preserving zero; on shared memory it keeps them."""
    tiny = np.array([1e-40, -3e-41, 2e-39, 1e-45], np.float32)
    x = np.resize(tiny, 32).astype(np.float32)
    x[5] = 1.0
    g = np.array([2e-39, 3e-40], np.float32)
    res = run(cuda_ptx("emu_collectives"), "float_add", 1, 32,
              (x, g.copy(), np.zeros(32, np.float32), np.zeros(32, np.float32), np.zeros(1, np.float32)))
    xb = x.view(np.uint32)

    def fits(first, last, old, ftz: bool) -> bool:
        return serial_order_exists(int(np.float32(first).view(np.uint32)), int(np.float32(last).view(np.uint32)),
                                   [(int(v), 0) for v in xb], [int(v) for v in old.view(np.uint32)],
                                   lambda r, v, _c: f32_add(r, v, ftz))

    assert fits(g[0], res[1][0], res[2], True) and not fits(g[0], res[1][0], res[2], False)   # global
    assert fits(g[1], res[4][0], res[3], False) and not fits(g[1], res[4][0], res[3], True)   # shared


# ------------------------------------------------------------------ cooperative groups

@pytest.mark.parametrize("arch", ["sm_75", "sm_80"])
def test_cooperative_groups_in_production_idiom(cuda_ptx, arch):
    """tiled_partition<16> with cg::reduce (plus, greater), warp-aggregated atomics over
    coalesced_threads(), and a reduction over a coalesced group: shuffles on sm_75, redux.sync with
    per-tile masks on sm_80."""
    rng = np.random.default_rng(7)
    n, total = 1000, 1024
    data = rng.integers(-50, 100, total).astype(np.int32)
    res = run(cuda_ptx("emu_cg", arch), "cg_filter_and_reduce", 8, 128,
              (data, np.int32(n), np.zeros(total, np.int32), np.zeros(1, np.int32), np.zeros(total, np.int32),
               np.zeros(total, np.int32), np.zeros(total, np.int32)))
    kept, count, tile_sums, tile_max, group_sums = res[2], res[3][0], res[4], res[5], res[6]
    v = np.where(np.arange(total) < n, data, 0)
    np.testing.assert_array_equal(tile_sums, np.repeat(v.reshape(-1, 16).sum(1), 16))
    np.testing.assert_array_equal(tile_max, np.repeat(v.reshape(-1, 16).max(1), 16))
    positive = v > 0
    assert count == positive.sum()
    np.testing.assert_array_equal(np.sort(kept[:count]), np.sort(v[positive]))
    warp_sum = np.repeat(np.where(positive, v, 0).reshape(-1, 32).sum(1), 32)
    warp_cnt = np.repeat(positive.reshape(-1, 32).sum(1), 32)
    np.testing.assert_array_equal(group_sums[positive], (warp_sum * 64 + warp_cnt)[positive])


def test_invoke_one_elects_with_elect_sync_on_sm90_and_is_refused(cuda_ptx):
    """PTX does not say which lane elect.sync elects (only that the choice is deterministic), so
    the emulator refuses it; on sm_80 nvcc elects the lowest lane of the coalesced group itself."""
    out = run(cuda_ptx("emu_cg", "sm_80"), "cg_invoke_one", 2, 96, (np.zeros(1, np.int32),))[0]
    assert out[0] == 6
    with pytest.raises(TuiprofError, match=r"unsupported PTX instruction elect.sync .*emu_cg.cu:"):
        run(cuda_ptx("emu_cg", "sm_90"), "cg_invoke_one", 2, 96, (np.zeros(1, np.int32),))
