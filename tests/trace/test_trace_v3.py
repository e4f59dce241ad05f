"""The .tptrace format version 3 (issue 23 item 5): an access whose active lanes all moved by the
same step since their previous access (a tile walked row by row, a strided loop) keeps that
one step (``addr_step``); only the others (``addr_whole``) keep their 32 lanes in ``addr_lanes``.
Round trips across block and read boundaries, the same trace as its version 1 and 2 layouts,
the lanes a tiled trace no longer stores, and hostile declarations named in words."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.support import hostile as H
from tests.support.factories import make_trace, random_trace, with_shared
from tuiprof.compare.cache import trace_digest
from tuiprof.errors import TraceError
from tuiprof.trace.data import Trace
from tuiprof.trace.io import load_trace, save_trace
from tuiprof.trace.packed import lane_addresses


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 1,024 accesses (the least a file may declare), read 700 at a time, so that reads
    straddle blocks (and the lanes member's reads, of the whole accesses only, straddle others)."""
    monkeypatch.setattr("tuiprof.trace.io.PLANE_ROWS", 1024)
    monkeypatch.setattr("tuiprof.trace.packed.CHUNK", 700)


def tiles(n: int, partial: bool = False) -> Trace:
    """`n` accesses (a multiple of 24) of 8 warps, in turn, to a 32 x 32 tile of floats in shared
    memory and a global array: each warp's j-th access is op j % 3 at k = j // 3, op 0 reading a
    row (``tile[k % 32][lane]``), op 1 a column (``tile[lane][k % 32]``, 32-way), op 2
    ``a[k * 32 + lane]``. With `partial`, the accesses of op 0 have only their even lanes active."""
    lane = np.arange(32, dtype=np.uint64)
    j = np.arange(n) % (n // 8)
    op = j % 3
    k = (j // 3).astype(np.uint64)[:, None]
    rows = (k % np.uint64(32)) * np.uint64(128) + lane * np.uint64(4)
    cols = (k % np.uint64(32)) * np.uint64(4) + lane * np.uint64(128)
    glob = np.uint64(1 << 20) + k * np.uint64(128) + lane * np.uint64(4)
    addr = np.where(op[:, None] == 0, rows, np.where(op[:, None] == 1, cols, glob))
    masks = [0x55555555 if partial and o == 0 else 0xFFFFFFFF for o in op.tolist()]
    t = make_trace(addr, ops=op.tolist(), warps=(np.arange(n) // (n // 8)).tolist(), masks=masks)
    return with_shared(t, {0, 1})


def stored(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """The header and the logical arrays of a file, read with NumPy and the test's own layouts."""
    tf = H.TraceFile(path)
    return tf.header, tf.arrays


@pytest.mark.parametrize("compression", ["deflate", "lzma"])
@pytest.mark.parametrize("partial", [False, True], ids=["full warps", "half the lanes"])
def test_version_3_round_trips_across_plane_blocks(tmp_path: Path, small_blocks: None, compression: str,
                                                   partial: bool) -> None:
    t = tiles(3000, partial)
    path = save_trace(t, tmp_path / "t.tptrace", compression=compression)
    header, arrays = stored(path)
    assert header["version"] == 3 and header["arrays"]["addr_step"]["plane_rows"] == 1024
    whole = arrays["addr_whole"].astype(bool)
    assert arrays["addr_lanes"].shape == (int(whole.sum()), 32)
    u = load_trace(path)
    assert u.packed is not None and u.addr.shape[0] == 1000  # op 2's
    assert np.array_equal(lane_addresses(u), t.addr)


def test_a_walked_tile_keeps_one_step_per_access(tmp_path: Path) -> None:
    """Each warp's first access of an op keeps its lanes (its offsets from the base differ by
    lane); every later one moved all its lanes by one step: 3 ops x 8 warps whole accesses of
    3,000, and the steps are the walk's (128 B a row, 4 B a column, 128 B the global array, in
    the file's unit of 4 B)."""
    path = save_trace(tiles(3000), tmp_path / "t.tptrace")
    _, arrays = stored(path)
    whole = arrays["addr_whole"].astype(bool)
    assert int(whole.sum()) == 3 * 8
    steps = arrays["addr_step"].astype(np.int64)
    j = np.arange(3000) % 375
    op = j % 3
    wraps = (j // 3) % 32 == 0  # k % 32 back to 0: a step of -31 rows or columns
    for o, step in ((0, 32), (1, 1), (2, 32)):
        sel = (op == o) & ~whole & ~wraps
        assert sel.any() and np.all(steps[sel] == step)


def test_same_trace_as_versions_1_and_2(tmp_path: Path, small_blocks: None) -> None:
    """Random addresses (few steps) and tile walks (nearly all steps), in shared and global ops:
    the version 3 file and the same trace laid out as versions 1 and 2 load to equal traces."""
    for i, t in enumerate([with_shared(random_trace(21, n=2600, n_warps=7, n_ops=5), {1, 3}), tiles(2640, True)]):
        v3 = save_trace(t, tmp_path / f"v3-{i}.tptrace")
        older = [H.TraceFile(v3).as_version(v).save(tmp_path / f"v{v}-{i}.tptrace") for v in (1, 2)]
        digests = {trace_digest(load_trace(p)) for p in (v3, *older)}
        assert digests == {trace_digest(t)}


def test_a_tiled_file_inflates_a_fraction_of_version_2(tmp_path: Path) -> None:
    """What loading inflates: the address members of a walked tile take a few bytes per access,
    not the 32 lanes' bytes version 2 stored."""
    path = save_trace(tiles(30_000), tmp_path / "t.tptrace")
    v2 = H.TraceFile(path).as_version(2).save(tmp_path / "v2.tptrace")

    def inflated(p: Path) -> int:
        with zipfile.ZipFile(p) as zf:
            return sum(i.file_size for i in zf.infolist() if i.filename.startswith("addr_"))

    assert inflated(path) * 5 < inflated(v2), (inflated(path), inflated(v2))


def test_loading_a_tiled_trace_allocates_little(tmp_path: Path) -> None:
    """Memory (tracemalloc sees NumPy's allocations): loading the tile walk, every op in shared
    memory, allocates a small share of the uint64 [R, 32] array its addresses would fill, and
    under half what the same trace as version 2 needs (it inflated and packed 32 lanes per access)."""
    import tracemalloc

    n = 60_000
    path = save_trace(with_shared(tiles(n), {0, 1, 2}), tmp_path / "t.tptrace")
    v2 = H.TraceFile(path).as_version(2).save(tmp_path / "v2.tptrace")
    peaks = []
    for p in (path, v2):
        load_trace(p)  # imports and compiles outside the measurement
        tracemalloc.start()
        try:
            u = load_trace(p)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert u.packed is not None and u.addr.shape[0] == 0
    full = n * 32 * 8
    assert peaks[0] < 0.25 * full and 2 * peaks[0] < peaks[1], (peaks, full)


def _whole(value: int) -> Callable[[H.TraceFile], None]:
    def edit(tf: H.TraceFile) -> None:
        w = tf.arrays["addr_whole"].copy()
        w[0] = value
        tf.set_array("addr_whole", w)
    return edit


def _lanes_rows(extra: int) -> Callable[[H.TraceFile], None]:
    """addr_lanes with `extra` more rows of zeros (fewer, where negative)."""
    def edit(tf: H.TraceFile) -> None:
        lanes = tf.arrays["addr_lanes"]
        lanes = lanes[:extra] if extra < 0 else np.concatenate([lanes, np.zeros((extra, 32), lanes.dtype)])
        tf.set_array("addr_lanes", lanes)
    return edit


def _drop(name: str) -> Callable[[H.TraceFile], None]:
    def edit(tf: H.TraceFile) -> None:
        del tf.arrays[name], tf.header["arrays"][name]
    return edit


def _as_v2_with_steps(tf: H.TraceFile) -> None:
    tf.header["version"] = 2


def _step_shape(tf: H.TraceFile) -> None:
    tf.set_array("addr_step", tf.arrays["addr_step"][:-1])


def _whole_type(tf: H.TraceFile) -> None:
    tf.set_array("addr_whole", tf.arrays["addr_whole"].astype(np.int16))


@pytest.mark.parametrize("edit, needle", [
    (_whole(2), "array addr_whole holds a value other than 0 and 1"),
    (_lanes_rows(-1), "array addr_whole marks 1,920 accesses as keeping their 32 lanes, but addr_lanes holds 1,919"),
    (_lanes_rows(10_000), "array addr_lanes has shape [11920, 32], but the counts make it at most [1920, 32]"),
    (_drop("addr_step"), "array addr_step missing"),
    (_drop("addr_whole"), "array addr_whole missing"),
    (_as_v2_with_steps, "arrays.addr_step is an array of tptrace version 3, not of version 2"),
    (_step_shape, "array addr_step has shape [1919], but the counts make it [1920]"),
    (_whole_type, "array addr_whole has type '<i2', not bytes ('|u1')"),
], ids=["flag 2", "fewer lanes than flags", "more lanes than accesses", "no steps", "no flags", "steps in version 2",
        "steps short", "flags wide"])
def test_a_damaged_version_3_file_is_named(tmp_path: Path, edit: Callable[[H.TraceFile], None], needle: str) -> None:
    t = H.TraceFile()
    assert t.header["version"] == 3 and t.header["counts"]["accesses"] == 1920
    edit(t)
    with pytest.raises(TraceError) as e:
        load_trace(t.save(tmp_path / "t.tptrace"))
    assert needle in e.value.message and e.value.hint


def test_a_hostile_version_3_file_is_one_error_line(tmp_path: Path) -> None:
    """Through the command line: flags that disagree with the lanes stored give one `error:` line
    naming the file, a `hint:`, exit status 2, no traceback, and nothing written."""
    from tests.support.hostile_run import assert_clean_error, run_cli, snapshot

    t = H.TraceFile()
    _whole(1 - int(t.arrays["addr_whole"][0]))(t)
    path = t.save(tmp_path / "flags.tptrace")
    before = snapshot(tmp_path)
    run = run_cli(["report", str(path), "--trials", "2", "--no-sweep"], tmp_path)
    assert_clean_error(run, str(path), "accesses as keeping their 32 lanes, but addr_lanes holds")
    assert snapshot(tmp_path) == before


def test_the_shipped_demos_are_version_3() -> None:
    """Every shipped demo is in the current format (`benchmarks/resave_demo_traces.py` re-saved them)."""
    from tuiprof.resources import data_dir

    for path in sorted(data_dir("demo_traces").glob("*.tptrace")):
        with zipfile.ZipFile(path) as zf:
            assert json.loads(zf.read(H.HEADER))["version"] == 3, path.name

