"""The .tptrace format version 2 (issue 23 item 5): the address members' byte planes are laid out
block by block, so that loading inflates each byte once. Round trips across block and read
boundaries, version 1 files (planes of the whole member) still load, and a damaged declaration
is one message. Version 3 (`test_trace_v3`) keeps the blocks; the older files here are this
tuiprof's version 3 files laid out again as those versions were (`hostile.TraceFile.as_version`)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.support import hostile as H
from tests.support.factories import make_trace, random_trace, with_shared
from tuiprof.compare.cache import trace_digest
from tuiprof.errors import TraceError
from tuiprof.trace.io import load_trace, save_trace
from tuiprof.trace.packed import lane_addresses

N = 2600
"""Accesses of the test traces: two whole blocks of 1,024 and a part one."""


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 1,024 accesses (the least a file may declare), read 700 at a time, so that reads
    straddle blocks."""
    monkeypatch.setattr("tuiprof.trace.io.PLANE_ROWS", 1024)
    monkeypatch.setattr("tuiprof.trace.packed.CHUNK", 700)


def stored_arrays(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """The header and the logical arrays of a file, read with NumPy and the test's own plane layouts."""
    with zipfile.ZipFile(path) as zf:
        header = json.loads(zf.read(H.HEADER))
        arrays = {}
        for name, spec in header["arrays"].items():
            dtype, shape = np.dtype(spec["dtype"]), tuple(spec["shape"])
            stored = np.lib.format.read_array(io.BytesIO(zf.read(f"{name}.npy")), allow_pickle=False)
            if spec["shuffled"] and "plane_rows" in spec:
                arrays[name] = H.from_blocked_planes(stored, dtype, shape, spec["plane_rows"])
            else:
                arrays[name] = H.from_planes(stored, dtype, shape) if spec["shuffled"] else stored
    return header, arrays


@pytest.mark.parametrize("compression", ["deflate", "lzma"])
def test_version_2_round_trips_across_plane_blocks(tmp_path: Path, small_blocks: None, compression: str) -> None:
    t = with_shared(random_trace(11, n=N, n_warps=7, n_ops=5), {1, 3})  # packed and replayed accesses
    method = {"deflate": zipfile.ZIP_DEFLATED, "lzma": zipfile.ZIP_LZMA}[compression]
    path = H.TraceFile(save_trace(t, tmp_path / "t3.tptrace")).as_version(2).save(tmp_path / "t.tptrace", method)
    header, arrays = stored_arrays(path)
    assert header["version"] == 2 and "addr_step" not in arrays
    assert header["arrays"]["addr_lanes"]["plane_rows"] == 1024 and arrays["addr_lanes"].dtype.itemsize > 1
    u = load_trace(path)
    assert u.packed is not None and u.addr.shape[0] > 0
    assert np.array_equal(lane_addresses(u), t.addr)


def test_version_1_files_still_load(tmp_path: Path, small_blocks: None) -> None:
    """A version 2 file rewritten as version 1 lays each address member out as the planes of the
    whole member; both load to the same trace."""
    t = with_shared(random_trace(12, n=N, n_warps=4, n_ops=3), {0})
    v3 = save_trace(t, tmp_path / "v3.tptrace")
    v2 = H.TraceFile(v3).as_version(2).save(tmp_path / "v2.tptrace")
    v1 = H.TraceFile(v3).as_version(1).save(tmp_path / "v1.tptrace")
    with zipfile.ZipFile(v1) as zf:  # the old layout: planes [itemsize, size]
        a = np.lib.format.read_array(io.BytesIO(zf.read("addr_lanes.npy")), allow_pickle=False)
    assert a.shape == (8, N * 32)
    u1, u2 = load_trace(v1), load_trace(v2)
    assert np.array_equal(lane_addresses(u1), t.addr) and trace_digest(u1) == trace_digest(u2) == trace_digest(load_trace(v3))


@pytest.mark.parametrize("edit, needle", [
    (lambda h: h["arrays"]["addr_base"].update(plane_rows=1), "plane_rows must be a whole number from 1,024 to 65,536"),
    (lambda h: h["arrays"]["addr_base"].update(plane_rows=True), "plane_rows must be a whole number"),
    (lambda h: h["arrays"]["warp_cta"].update(plane_rows=16384), "plane_rows is only for the byte planes of an address"),
    (lambda h: h.update(version=1), "plane_rows is only for the byte planes of an address member (version 2 on)"),
], ids=["too small", "not a number", "not an address member", "in a version 1 file"])
def test_a_wrong_plane_rows_is_named(tmp_path: Path, edit, needle: str) -> None:
    t = H.TraceFile()
    assert t.header["version"] == 3 and "plane_rows" in t.header["arrays"]["addr_base"]
    edit(t.header)
    with pytest.raises(TraceError) as e:
        load_trace(t.save(tmp_path / "t.tptrace"))
    assert needle in e.value.message and e.value.hint


def test_a_short_blocked_member_is_named(tmp_path: Path, small_blocks: None) -> None:
    """An address member cut inside its second block: the declared size is missing."""
    path = save_trace(random_trace(13, n=N), tmp_path / "t.tptrace")
    t = H.TraceFile(path)
    member = t.member_bytes()["addr_lanes.npy"]
    t.raw["addr_lanes.npy"] = member[:len(member) // 2]
    with pytest.raises(TraceError) as e:
        load_trace(t.save(tmp_path / "cut.tptrace"))
    assert "addr_lanes" in e.value.message and e.value.hint


def test_loading_a_tiled_trace_stays_far_below_its_full_addresses(tmp_path: Path, small_blocks: None) -> None:
    """Memory, not time: loading a trace of shared-memory tile accesses (rows of a 32 x 32 tile,
    and columns of it) allocates a small share of the uint64 [R, 32] array its addresses would
    fill, since they stay packed and the file streams in blocks (tracemalloc sees NumPy's allocations)."""
    import dataclasses
    import tracemalloc

    n = 40_000
    lane = np.arange(32, dtype=np.uint64)
    k = np.arange(n, dtype=np.uint64)[:, None]
    rows = (k % np.uint64(32)) * np.uint64(128) + lane * np.uint64(4)  # a row of the tile
    cols = (k % np.uint64(32)) * np.uint64(4) + lane * np.uint64(128)  # a column: 32-way
    addr = np.where(k % np.uint64(2) == 0, rows, cols)
    t = make_trace(addr, ops=[i % 2 for i in range(n)], warps=[(i // 100) % 8 for i in range(n)])
    t = dataclasses.replace(t, ops=tuple(dataclasses.replace(o, space="shared") for o in t.ops))
    path = save_trace(t, tmp_path / "tiles.tptrace")
    load_trace(path)  # imports and compiles outside the measurement
    tracemalloc.start()
    try:
        u = load_trace(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    full = n * 32 * 8
    assert u.packed is not None and peak < 0.35 * full, (peak, full)
    assert np.array_equal(lane_addresses(u), t.addr)


def test_a_hostile_version_2_file_is_one_error_line(tmp_path: Path) -> None:
    """Through the command line: a plane_rows past the range gives one `error:` line naming the
    file and the field, a `hint:`, exit status 2, no traceback, and nothing written."""
    from tests.support.hostile_run import assert_clean_error, run_cli, snapshot

    t = H.TraceFile()
    t.header["arrays"]["addr_base"]["plane_rows"] = 1 << 40
    path = t.save(tmp_path / "blocks.tptrace")
    before = snapshot(tmp_path)
    run = run_cli(["report", str(path), "--trials", "2", "--no-sweep"], tmp_path)
    assert_clean_error(run, str(path), "arrays.addr_base.plane_rows must be a whole number from 1,024 to 65,536")
    assert snapshot(tmp_path) == before
