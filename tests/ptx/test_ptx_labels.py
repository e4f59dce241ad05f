"""One op per source access, labelled from its own address (issue 20 part 2).

The oracle is the emulator's own recording: every address an op records must be the one its
label's expression gives for the lane's thread (computed here in NumPy), so an instruction
credited to the wrong expression of a line fails whatever the labelling code believes. Plus the
labels' form: never cut, never the other side of an assignment, and the PTX instructions behind
each op listed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.support.emu_support import cuda_ptx  # noqa: F401  (fixture)
from tuiprof.collect.emu.device import EmuDevice, RecordChoice
from tuiprof.ptx.labels import candidates
from tuiprof.trace.data import LANES

DEMO_DIR = Path(__file__).resolve().parents[2] / "demo_traces"


def record(compiled, kernel: str, grid, block, args) -> tuple[object, dict[str, int]]:
    """Run `kernel` on the emulator, recording its whole grid; returns the recording and each
    array argument's device address by position."""
    module, src, text = compiled
    dev = EmuDevice(module, src, text, record=RecordChoice(kernel=kernel, snapshot=None))
    dargs = [dev.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    dev.launch(kernel, grid, block, dargs)
    return dev.recorded, [getattr(d, "address", None) for d in dargs]


def lanes_of(rec, op_id: int, block: tuple[int, int, int]):
    """(thread x, thread y, CTA x, address) of every active lane of op `op_id`'s accesses."""
    out = []
    warp_of = np.repeat(np.arange(rec.warp_cta.size), np.diff(rec.warp_offsets))
    for r in np.flatnonzero(rec.op == op_id):
        w = warp_of[r]
        cta = int(rec.cta_ids[rec.warp_cta[w]])
        for lane in range(LANES):
            if rec.mask[r] >> lane & 1:
                t = int(rec.warp_index[w]) * LANES + lane
                out.append((t % block[0], t // block[0], cta, int(rec.addr[r, lane])))
    return np.array(out, dtype=np.int64).reshape(-1, 4)


def op_by_label(rec, label: str, kind: str):
    (o,) = [o for o in rec.ops if o.label == label and o.kind == kind]
    return o


def assert_addresses(rec, label: str, kind: str, block, base: int, element, size: int = 4) -> None:
    """Every address of the op labelled `label` is ``base + size * element(tx, ty, cta)``."""
    o = op_by_label(rec, label, kind)
    got = lanes_of(rec, o.id, block)
    assert got.size, label
    want = base + size * element(got[:, 0], got[:, 1], got[:, 2])
    assert np.array_equal(got[:, 3], want), (label, o.ptx)


def test_a_stencil_line_labels_each_neighbour_from_its_address(cuda_ptx) -> None:
    n = 4096
    rec, addr = record(cuda_ptx("labels_same_line"), "stencil3", (n // 256,), (256, 1, 1),
                       [np.arange(n, dtype=np.float32), np.zeros(n, np.float32), np.int32(n)])
    i = lambda tx, ty, c: c * 256 + tx + 1  # noqa: E731
    for label, d in (("in[i - 1]", -1), ("in[i]", 0), ("in[i + 1]", 1)):
        assert_addresses(rec, label, "load", (256, 1, 1), addr[0], lambda tx, ty, c, d=d: i(tx, ty, c) + d)
    assert_addresses(rec, "out[i]", "store", (256, 1, 1), addr[1], i)


def test_an_xor_neighbour_is_told_from_the_plain_index(cuda_ptx) -> None:
    n = 2048
    rec, addr = record(cuda_ptx("labels_same_line"), "pair_sum", (n // 128,), (128, 1, 1),
                       [np.arange(n, dtype=np.float32), np.zeros(n, np.float32)])
    i = lambda tx, ty, c: c * 128 + tx  # noqa: E731
    assert_addresses(rec, "a[i]", "load", (128, 1, 1), addr[0], i)
    assert_addresses(rec, "a[i ^ 1]", "load", (128, 1, 1), addr[0], lambda tx, ty, c: i(tx, ty, c) ^ 1)


def test_a_rotated_loop_condition_is_one_op_apart_from_the_bound(cuda_ptx) -> None:
    # bfs's line 22 shape: row_ptr[r] read once, row_ptr[r + 1] before the loop and each iteration.
    rows = 512
    rng = np.random.default_rng(4)
    counts = rng.integers(0, 9, rows)
    row_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    rec, addr = record(cuda_ptx("labels_same_line"), "row_sums", (rows // 128,), (128, 1, 1),
                       [row_ptr, rng.random(int(row_ptr[-1])).astype(np.float32), np.zeros(rows, np.float32),
                        np.int32(rows)])
    r = lambda tx, ty, c: c * 128 + tx  # noqa: E731
    assert_addresses(rec, "row_ptr[r]", "load", (128, 1, 1), addr[0], r)
    assert_addresses(rec, "row_ptr[r + 1]", "load", (128, 1, 1), addr[0], lambda tx, ty, c: r(tx, ty, c) + 1)
    first, bound = op_by_label(rec, "row_ptr[r]", "load"), op_by_label(rec, "row_ptr[r + 1]", "load")
    assert len(first.ptx) == 1 and len(bound.ptx) == 2  # the condition's copy before the loop and in it
    # Each thread reads its bound once, then once per iteration: one more than its row's length.
    acc = np.bincount(rec.op, minlength=len(rec.ops))
    warps = rows // 32
    assert acc[first.id] == warps
    per_warp = (counts.reshape(warps, 32).max(axis=1) + 1)
    assert acc[bound.id] == per_warp.sum()


def test_two_statements_on_a_line_and_vector_casts(cuda_ptx) -> None:
    n = 1024
    rec, addr = record(cuda_ptx("labels_same_line"), "two_statements", (n // 128,), (128, 1, 1),
                       [np.arange(2 * n, dtype=np.float32), np.zeros(4 * n + 256, np.float32),
                        np.arange(4 * n, dtype=np.float32)])
    i = lambda tx, ty, c: c * 128 + tx  # noqa: E731
    assert_addresses(rec, "x[2 * i]", "load", (128, 1, 1), addr[0], lambda tx, ty, c: 2 * i(tx, ty, c))
    assert_addresses(rec, "x[2 * i + 1]", "load", (128, 1, 1), addr[0], lambda tx, ty, c: 2 * i(tx, ty, c) + 1)
    store = op_by_label(rec, "reinterpret_cast<float4 *>(y)[i + 64]", "store")
    load = op_by_label(rec, "*reinterpret_cast<const float4 *>(&u4[i])", "load")
    assert store.bytes == load.bytes == 16
    assert_addresses(rec, store.label, "store", (128, 1, 1), addr[1], lambda tx, ty, c: i(tx, ty, c) + 64, 16)
    assert_addresses(rec, load.label, "load", (128, 1, 1), addr[2], i, 16)


def test_a_padded_tile_row_and_its_neighbour(cuda_ptx) -> None:
    rec, addr = record(cuda_ptx("labels_same_line"), "tile_pairs", (4,), (32, 32, 1),
                       [np.arange(4 * 1024, dtype=np.float32), np.zeros(4 * 1024, np.float32)])
    tile = op_by_label(rec, "tile[ty][tx]", "load")
    shared_base = int(lanes_of(rec, tile.id, (32, 32, 1))[0, 3]) - 0  # the tile's own base for (0, 0)
    got = lanes_of(rec, tile.id, (32, 32, 1))
    base = got[(got[:, 0] == 0) & (got[:, 1] == 0)][0, 3]
    assert_addresses(rec, "tile[ty][tx]", "load", (32, 32, 1), base, lambda tx, ty, c: ty * 33 + tx)
    assert_addresses(rec, "tile[ty][(tx + 1) % TILE]", "load", (32, 32, 1), base,
                     lambda tx, ty, c: ty * 33 + (tx + 1) % 32)
    assert shared_base >= 0


def test_arrays_of_a_struct_passed_by_value(cuda_ptx) -> None:
    # Before: p.a[i], p.b[i] and p.out[i] were no candidates (only p->a[i] was), so each op was
    # labelled with its whole statement.
    n = 1024
    a, b = np.arange(n, dtype=np.float32), np.arange(n, dtype=np.float32) + 0.5
    params = np.dtype([("a", "<u8"), ("b", "<u8"), ("out", "<u8"), ("alpha", "<f4"), ("beta", "<f4"), ("n", "<i4"),
                       ("pad", "<i4")])
    module, src, text = cuda_ptx("labels_same_line")
    dev = EmuDevice(module, src, text, record=RecordChoice(kernel="axpby_struct", snapshot=None))
    da, db, dout = dev.to_device(a), dev.to_device(b), dev.zeros(2 * n, np.float32)
    p = np.array([(da.address, db.address, dout.address, 2.0, 3.0, n, 0)], dtype=params)[0]
    dev.launch("axpby_struct", (n // 128,), (128, 1, 1), [p])
    out = dev.from_device(dout)
    assert np.array_equal(out[:n], 2 * a + 3 * b) and np.array_equal(out[n:2 * n - 2], b[1:-1] - a[2:])
    rec = dev.recorded
    i = lambda tx, ty, c: c * 128 + tx  # noqa: E731
    block = (128, 1, 1)
    assert_addresses(rec, "p.a[i]", "load", block, da.address, i)
    assert_addresses(rec, "p.b[i]", "load", block, db.address, i)
    assert_addresses(rec, "p.out[i]", "store", block, dout.address, i)
    assert_addresses(rec, "p.b[i + 1]", "load", block, db.address, lambda tx, ty, c: i(tx, ty, c) + 1)
    assert_addresses(rec, "p.a[i + 2]", "load", block, da.address, lambda tx, ty, c: i(tx, ty, c) + 2)
    assert_addresses(rec, "p.out[p.n + i]", "store", block, dout.address, lambda tx, ty, c: n + i(tx, ty, c))


def test_bfs_credits_the_loop_to_the_condition(cuda_ptx) -> None:
    from tuiprof.demos import demo_path, load

    trace = load(demo_path("bfs"))
    acc = np.bincount(trace.op, minlength=len(trace.ops))
    bound = {o.label: acc[o.id] for o in trace.ops if o.line == 22}
    assert set(bound) == {"row_ptr[tid]", "row_ptr[tid + 1]"}
    assert bound["row_ptr[tid]"] < bound["row_ptr[tid + 1]"]
    (stores,) = [acc[o.id] for o in trace.ops if o.label == "cost[id]"]
    # The condition is read once before the loop, and again after each iteration that stored (the
    # stores may alias row_ptr: nvcc reloads it only there): 2,045 + 21,653, where the old
    # labelling credited those reloads to row_ptr[tid].
    assert bound["row_ptr[tid + 1]"] == bound["row_ptr[tid]"] + stores


@pytest.mark.parametrize("line, want", [
    ("    v = *reinterpret_cast<const float4 *>(&a[4 * i]);",
     [("*reinterpret_cast<const float4 *>(&a[4 * i])", "a", "rhs")]),
    ("    reinterpret_cast<float2 *>(out)[i] = make_float2(x, y);", [("reinterpret_cast<float2 *>(out)[i]", "out", "lhs")]),
    ("    float c = __ldg(&in[(i + 7) % n]);", [("in[(i + 7) % n]", "in", "rhs")]),
    ("    __stcs(&out[i], v);", [("out[i]", "out", "lhs")]),
    ("    float *p = &a[i];", []),
    ("    a[b[i]] = x;", [("a[b[i]]", "a", "lhs"), ("b[i]", "b", "rhs")]),
])
def test_candidates_are_whole_and_on_their_side(line: str, want) -> None:
    assert [(c.text, c.base, c.side) for c in candidates(line)] == want


def test_labels_are_never_the_other_side(cuda_ptx) -> None:
    # A store's label is what it writes and a load's what it reads, on every op of the corpus.
    from tuiprof.ptx.ops import static_ops

    for name in ("labels_same_line", "ptx_vector_loads", "ptx_matmul_tiled", "ptx_histogram_atomic"):
        module, src, text = cuda_ptx(name)
        lines = text.splitlines()
        for kernel in module.kernels:
            for _, _, o in static_ops(module, kernel, src, text):
                sides = {c.text: c.side for c in candidates(lines[o.line - 1])}
                if o.label in sides:
                    assert sides[o.label] in ({"load": ("rhs", "both"), "store": ("lhs", "both"),
                                               "atomic": ("arg", "both", "lhs")}[o.kind]), (name, o)
                assert o.ptx and all(text_.endswith(";") for _, text_ in o.ptx)
