"""The .tptrace file: exact round trips, compactness, and TraceError on every kind of damage."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.factories import make_trace, random_trace
from tuiprof.errors import OutputError, TraceError
from tuiprof.trace.data import CtaRecords
from tuiprof.trace.io import HEADER, load_trace, read_header, save_trace
from tuiprof.trace.packed import lane_addresses

FIELDS = ("warp_offsets", "warp_cta", "warp_index", "op", "mask")


def assert_same(a, b) -> None:
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and np.array_equal(x, y), f
    x, y = lane_addresses(a), lane_addresses(b)  # a loaded trace keeps shared-memory accesses packed
    assert x.dtype == y.dtype and np.array_equal(x, y), "addresses"
    assert a.ops == b.ops and a.launch == b.launch and a.sources == b.sources and a.provenance == b.provenance
    assert np.array_equal(a.snapshot.cta_ids, b.snapshot.cta_ids)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 300), warps=st.integers(1, 9), ops=st.integers(1, 6))
def test_round_trip_random(tmp_path: Path, seed: int, n: int, warps: int, ops: int) -> None:
    t = random_trace(seed, n=n, n_warps=warps, n_ops=ops) if n else make_trace(np.zeros((0, 32)))
    p = save_trace(t, tmp_path / "t.tptrace")
    assert_same(t, load_trace(p))


def test_round_trip_lzma_and_cta_records(tmp_path: Path) -> None:
    n_ctas = 7
    ctas = CtaRecords(insts=np.arange(n_ctas, dtype=np.int64) * 1000, accesses=np.full(n_ctas, 5, np.int64),
                      sm=np.arange(n_ctas, dtype=np.int64) % 3, start=np.arange(n_ctas, dtype=np.int64),
                      end=np.arange(n_ctas, dtype=np.int64) + 10)
    t = make_trace(np.arange(64).reshape(2, 32) * 4, n_ctas=n_ctas, ctas=ctas)
    u = load_trace(save_trace(t, tmp_path / "t.tptrace", compression="lzma"))
    assert_same(t, u)
    for f in ("insts", "accesses", "sm", "start", "end"):
        assert np.array_equal(getattr(t.ctas, f), getattr(u.ctas, f))
    assert u.ctas.measured_timing


def test_strided_loop_compresses_to_almost_nothing(tmp_path: Path) -> None:
    # 20,000 accesses of a stride-1 stream: 2.5 MB of raw addresses.
    n = 20_000
    base = 0x7F0000000000 + np.arange(n, dtype=np.uint64)[:, None] * 128 + np.arange(32, dtype=np.uint64) * 4
    p = save_trace(make_trace(base), tmp_path / "s.tptrace")
    assert p.stat().st_size < 40_000


def test_header_only_read(tmp_path: Path) -> None:
    p = save_trace(random_trace(1), tmp_path / "t.tptrace")
    h = read_header(p)
    assert h["format"] == "tptrace" and h["counts"]["accesses"] == 200


def _rewrite(src: Path, dst: Path, edit) -> None:
    """Copy a tptrace zip, passing (name, bytes) through `edit` (None drops the member)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            out = edit(info.filename, zin.read(info.filename))
            if out is not None:
                zout.writestr(info.filename, out)


@pytest.fixture()
def good(tmp_path: Path) -> Path:
    return save_trace(random_trace(7), tmp_path / "good.tptrace")


def _header_edit(fn):
    def edit(name: str, data: bytes):
        if name != HEADER:
            return data
        h = json.loads(data)
        fn(h)
        return json.dumps(h).encode()
    return edit


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, a, allow_pickle=True)
    return buf.getvalue()


CASES = {
    "wrong version": (_header_edit(lambda h: h.update(version=99)), "version 99"),
    "foreign format": (_header_edit(lambda h: h.update(format="other")), "not a tptrace header"),
    "no header": (lambda n, d: None if n == HEADER else d, "no tptrace.json"),
    "missing array": (lambda n, d: None if n == "mask.npy" else d, "mask missing"),
    "huge declared shape": (_header_edit(lambda h: h["arrays"]["op"].update(shape=[2**40])), "counts make it [200]"),
    "bigger than declared": (lambda n, d: _npy(np.zeros(10**6, np.uint8)) if n == "op.npy" else d, "larger than declared"),
    "pickled object array": (lambda n, d: _npy(np.array([{"x": 1}] * 200, dtype=object)) if n == "op.npy" else d, ""),
    "float dtype": (_header_edit(lambda h: h["arrays"]["mask"].update(dtype="<f8")), "type '<f8'"),
    "op id out of range": (lambda n, d: _npy(np.full(200, 250, np.uint8)) if n == "op.npy" else d, "op id"),
    "counts disagree": (_header_edit(lambda h: h["counts"].update(accesses=5)), "counts"),
    "bad launch": (_header_edit(lambda h: h["launch"].update(grid=[0, 1, 1])), "grid"),
    "header not json": (lambda n, d: b"{not json" if n == HEADER else d, "not valid JSON"),
    "header is a list": (lambda n, d: b"[1,2]" if n == HEADER else d, "not a tptrace header"),
    "ops missing": (_header_edit(lambda h: h.pop("ops")), "ops is missing"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_damaged_members(good: Path, tmp_path: Path, case: str) -> None:
    edit, needle = CASES[case]
    bad = tmp_path / "bad.tptrace"
    _rewrite(good, bad, edit)
    with pytest.raises(TraceError) as e:
        load_trace(bad)
    assert str(bad) in e.value.message and e.value.hint
    assert needle in e.value.message


def test_missing_directory_and_foreign_files(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="does not exist"):
        load_trace(tmp_path / "none.tptrace")
    with pytest.raises(TraceError, match="directory"):
        load_trace(tmp_path)
    (tmp_path / "text.tptrace").write_text("hello")
    with pytest.raises(TraceError, match="not a tptrace container"):
        load_trace(tmp_path / "text.tptrace")
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as z:
        z.writestr("readme.txt", "hi")
    with pytest.raises(TraceError, match="no tptrace.json"):
        load_trace(tmp_path / "other.zip")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_corruption_raises_only_trace_error(good: Path, tmp_path: Path, data: st.DataObject) -> None:
    raw = bytearray(good.read_bytes())
    kind = data.draw(st.sampled_from(["truncate", "flip", "splice", "zero"]))
    if kind == "truncate":
        raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
    elif kind == "flip":
        for _ in range(data.draw(st.integers(1, 8))):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] ^= 1 << data.draw(st.integers(0, 7))
    elif kind == "splice":
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i:i] = data.draw(st.binary(min_size=1, max_size=64))
    else:
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i : i + data.draw(st.integers(1, 256))] = bytes(min(256, len(raw) - i))
    bad = tmp_path / "c.tptrace"
    bad.write_bytes(bytes(raw))
    try:
        t = load_trace(bad)
    except TraceError as e:
        assert e.message and e.hint
    else:  # a flip inside stored-but-unused bytes can leave a valid file: it must still be consistent
        assert t.n_accesses == 200


def test_atomic_write_leaves_nothing_on_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "t.tptrace"
    save_trace(random_trace(1), target)
    before = target.read_bytes()

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np.lib.format, "write_array", boom)
    with pytest.raises(OutputError, match="No space"):
        save_trace(random_trace(2), target)
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["t.tptrace"]


def test_unwritable_folder(tmp_path: Path) -> None:
    with pytest.raises(OutputError):
        save_trace(random_trace(1), tmp_path / "no" / "such" / "dir" / "t.tptrace")


def test_saving_the_same_trace_twice_gives_the_same_bytes(tmp_path: Path) -> None:
    # Demo traces are committed: rebuilding one must not change its file unless its content did.
    import os

    from tuiprof.demos import demo_path

    t = load_trace(demo_path("vecadd"))
    first = save_trace(t, tmp_path / "a.tptrace").read_bytes()
    os.utime(tmp_path / "a.tptrace", (0, 0))
    assert save_trace(t, tmp_path / "b.tptrace").read_bytes() == first


def test_ptx_lists_and_barrier_pairs_round_trip_and_give_way_to_the_header_cap(tmp_path) -> None:
    """Ops keep their PTX instructions and barrier flag through a file; a trace whose PTX lists
    alone would pass the header's cap is written without them (they are only shown), not refused."""
    import dataclasses

    from tests.support.factories import make_trace
    from tuiprof.trace.data import MAX_OP_PTX
    from tuiprof.trace.io import load_trace, save_trace

    t = make_trace([[4 * i for i in range(32)]] * 2, ops=[0, 1], kinds=("load", "store"))
    ops = (dataclasses.replace(t.ops[0], ptx=((12, "ld.global.f32 %f1, [%rd4];"),), barrier_after=(1,)), t.ops[1])
    back = load_trace(save_trace(dataclasses.replace(t, ops=ops), tmp_path / "a.tptrace"))
    assert back.ops[0].ptx == ((12, "ld.global.f32 %f1, [%rd4];"),) and back.ops[0].barrier_after == (1,)
    assert back.ops[1].ptx == () and back.ops[1].barrier_after == ()
    long = tuple((k, "ld.global.f32 %f1, [%rd4+" + "9" * 4000 + "];") for k in range(MAX_OP_PTX))
    many = tuple(dataclasses.replace(t.ops[0], id=i, ptx=long) for i in range(80))
    big = load_trace(save_trace(dataclasses.replace(t, ops=many), tmp_path / "b.tptrace"))
    assert len(big.ops) == 80 and all(o.ptx == () for o in big.ops)
