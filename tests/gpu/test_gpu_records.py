"""Probe-buffer decoding (tuiprof.collect.gpu.records) on bytes built by hand from the layout that
tuiprof.ptx.instrument documents: hand-computed cases, an independent encoder under hypothesis,
lost and damaged records, the site -> op mapping, local and shared addresses, per-CTA records and
the whole-program record file."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuiprof.collect.gpu.records import (
    LOCAL_TRACE_BASE,
    RECORD_MAGIC,
    RecordsError,
    check_regions,
    cta_records,
    decode_words,
    read_record_file,
    site_to_op,
    to_accesses,
)
from tuiprof.ptx.instrument import LOCAL_TAG, SHARED_TAG, Site
from tuiprof.trace.data import StaticOp

U64 = (1 << 64) - 1


def head(mask: int, site: int, compressed: bool, tag: int = 0) -> int:
    word = site | (tag << 23) | ((1 << 31) if compressed else 0)
    return mask | (word << 32)


def encode(mask: int, site: int, addrs: dict[int, int], tag: int = 0, compress: bool = True) -> list[int]:
    """One record as the probe writes it (an encoder written from the documented layout)."""
    lanes = [lane for lane in range(32) if mask >> lane & 1]
    base = addrs[lanes[0]]
    deltas = [(addrs[lane] - base) for lane in lanes]
    if compress and all(-(1 << 31) <= d < (1 << 31) for d in deltas):
        out = [head(mask, site, True, tag), base]
        halves = [d & 0xFFFFFFFF for d in deltas]
        if len(halves) % 2:
            halves.append(0)
        out += [halves[i] | (halves[i + 1] << 32) for i in range(0, len(halves), 2)]
        return out
    return [head(mask, site, False, tag)] + [addrs[lane] for lane in lanes]


def regions(warps: list[list[list[int]]], slack: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(words, woff, used) for per-warp lists of encoded records, each region `slack` words longer."""
    words: list[int] = []
    woff = [0]
    used = []
    for recs in warps:
        flat = [w for r in recs for w in r]
        words += flat + [0xAAAAAAAAAAAAAAAA] * slack
        used.append(len(flat))
        woff.append(len(words))
    return np.array(words, np.uint64), np.array(woff, np.uint64), np.array(used, np.uint64)


def test_hand_computed_records() -> None:
    # warp 0: a compressed record (lanes 0 and 2, +8), then a full one (lane 31, far address)
    words = np.array([
        (0x80000005 << 32) | 0b101, 0x1000, (8 << 32) | 0,
        (7 << 32) | 0x80000000, 0x0000_DEAD_BEEF_0000,
    ], np.uint64)
    rec = decode_words(words, np.array([0, 5], np.uint64), np.array([5], np.uint64))
    assert rec.warp_offsets.tolist() == [0, 2]
    assert rec.site.tolist() == [5, 7]
    assert rec.mask.tolist() == [0b101, 0x80000000]
    assert rec.addr[0, 0] == 0x1000 and rec.addr[0, 2] == 0x1008 and rec.addr[0, 1] == 0
    assert rec.addr[1, 31] == 0xDEADBEEF0000 and int(rec.addr[1].sum()) == 0xDEADBEEF0000


def test_negative_offsets_and_tags() -> None:
    # lanes 3 and 5; lane 5 is 16 bytes below the base (lane 3): offset 0xFFFFFFF0
    words = np.array([head(0b101000, 9, True, tag=3), 0x2000, (0xFFFFFFF0 << 32) | 0], np.uint64)
    rec = decode_words(words, np.array([0, 3], np.uint64), np.array([3], np.uint64))
    assert rec.tag.tolist() == [3] and rec.site.tolist() == [9]
    assert rec.addr[0, 3] == 0x2000 and rec.addr[0, 5] == 0x1FF0


def test_full_warp_compressed_size() -> None:
    addrs = {lane: 0x7F00_0000_0000 + 4 * lane for lane in range(32)}
    rec_words = encode(0xFFFFFFFF, 1, addrs)
    assert len(rec_words) == 2 + 16  # 144 bytes, against 264 uncompressed
    rec = decode_words(*regions([[rec_words]]))
    assert rec.addr[0].tolist() == [addrs[lane] for lane in range(32)]


def test_slack_and_empty_warps() -> None:
    a = encode(0xF, 0, {0: 100, 1: 104, 2: 108, 3: 112})
    b = encode(0x1, 2, {0: 1 << 40}, compress=False)
    words, woff, used = regions([[a, b], [], [b]], slack=3)
    rec = decode_words(words, woff, used)
    assert rec.warp_offsets.tolist() == [0, 2, 2, 3]
    assert rec.site.tolist() == [0, 2, 2]
    assert rec.addr[2, 0] == 1 << 40


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(
    st.integers(1, U64 >> 32),  # mask (never 0)
    st.integers(0, (1 << 23) - 1),  # site
    st.integers(0, (1 << 46)),  # base address
    st.lists(st.integers(-(1 << 33), 1 << 33), min_size=32, max_size=32),  # lane offsets
    st.booleans()), max_size=6), min_size=1, max_size=5))
def test_decode_matches_independent_encoder(warps: list) -> None:
    expected_site, expected_addr = [], []
    encoded = []
    for recs in warps:
        enc_w = []
        for mask, site, base, offs, compress in recs:
            mask &= 0xFFFFFFFF
            addrs = {lane: (base + offs[lane]) & U64 for lane in range(32) if mask >> lane & 1}
            enc_w.append(encode(mask, site, addrs, compress=compress))
            expected_site.append(site)
            expected_addr.append([addrs.get(lane, 0) for lane in range(32)])
        encoded.append(enc_w)
    rec = decode_words(*regions(encoded, slack=1))
    assert rec.site.tolist() == expected_site
    assert rec.addr.reshape(-1, 32).tolist() == expected_addr
    assert np.diff(rec.warp_offsets).tolist() == [len(w) for w in warps]


def test_lost_records_are_an_error() -> None:
    a = encode(0x3, 0, {0: 0, 1: 4})
    words, woff, used = regions([[a], [a]])
    used[1] += 5  # warp 1 reserved more than its region: the runs differed
    with pytest.raises(RecordsError, match="1 snapshot warps recorded more than the counting run") as exc:
        decode_words(words, woff, used)
    assert "deterministic" in exc.value.hint
    check_regions(woff, used - np.uint64(5) * (used > 3))  # within the regions: fine


def test_truncated_record_is_an_error() -> None:
    a = encode(0xFF, 0, {lane: 8 * lane for lane in range(8)}, compress=False)
    words, woff, used = regions([[a]])
    used[0] -= 1
    with pytest.raises(RecordsError, match="runs past the end of its region"):
        decode_words(words, woff, used)
    with pytest.raises(RecordsError, match="empty mask"):
        decode_words(np.zeros(4, np.uint64), np.array([0, 4], np.uint64), np.array([1], np.uint64))


def _op(i: int, kind: str = "load", space: str = "global") -> StaticOp:
    return StaticOp(id=i, kernel="k", kind=kind, space=space, bytes=4, file="k.cu", line=1 + i)


def test_site_to_op_with_cp_async_and_other_functions() -> None:
    sites = (Site("k", 3), Site("k", 7, 0), Site("k", 7, 1), Site("other_kernel", 2), Site("helper", 1))
    ops = (("k", 3, _op(0)), ("k", 7, _op(1)), ("k", 7, _op(2, "store", "shared")), ("helper", 1, _op(0)))
    assert site_to_op(sites, ops).tolist() == [0, 1, 2, -1, 0]


def test_to_accesses_spaces_local_layout_and_mapping() -> None:
    # warp 0 of CTA 5 (2 warps per CTA, snapshot CTAs 5 and 6): a shared access, a local one
    shared = encode(0x3, 1, {0: SHARED_TAG | 0x40, 1: SHARED_TAG | 0x44})
    local = encode(0x5, 2, {0: LOCAL_TAG | 8, 2: LOCAL_TAG | 9})
    glob = encode(0x1, 0, {0: 0x5000})
    words, woff, used = regions([[shared, local], [], [glob], []])
    rec = decode_words(words, woff, used)
    site_ops = np.array([0, 1, 2], np.int32)
    acc = to_accesses(rec, site_ops, 3, cta_ids=np.array([5, 6], np.int64), warps_per_cta=2, local_words=4)
    assert acc.op.tolist() == [1, 2, 0]
    assert acc.addr[0, :2].tolist() == [0x40, 0x44]
    # offsets 8 and 9 (4-byte accesses: element 2) of lanes 0 and 2, warp 0 of CTA 5, whose frame
    # of 4 words per thread (512 bytes) is the 10th; byte 1 of the element for lane 2
    frame = LOCAL_TRACE_BASE + (5 * 2 + 0) * 4 * 128
    assert acc.addr[1, 0] == frame + (2 * 32 + 0) * 4
    assert acc.addr[1, 2] == frame + (2 * 32 + 2) * 4 + 1
    assert acc.addr[1, 1] == 0 and acc.addr[2, 0] == 0x5000
    assert acc.op_space.tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    assert acc.warp_offsets.tolist() == [0, 2, 2, 3, 3]
    # 16-byte accesses (a v4 store): offset 32 is element 2, lanes 16 bytes apart
    words, woff, used = regions([[encode(0x3, 2, {0: LOCAL_TAG | 32, 1: LOCAL_TAG | 36})], [], [], []])
    wide = to_accesses(decode_words(words, woff, used), site_ops, 3, cta_ids=np.array([5, 6], np.int64),
                       warps_per_cta=2, local_words=16, op_bytes=np.array([4, 4, 16]))
    frame = LOCAL_TRACE_BASE + 10 * 16 * 128
    assert wide.addr[0, :2].tolist() == [frame + (2 * 32 + 0) * 16, frame + (2 * 32 + 1) * 16 + 4]


def test_to_accesses_refuses_foreign_records() -> None:
    words, woff, used = regions([[encode(0x1, 4, {0: 0})]])
    rec = decode_words(words, woff, used)
    with pytest.raises(RecordsError, match="outside the launched kernel"):
        to_accesses(rec, np.array([0, 1, 2, 3, -1], np.int32), 4, cta_ids=np.array([0]), warps_per_cta=1,
                    local_words=0)
    words, woff, used = regions([[encode(0x1, 0, {0: 0}, tag=2)]])
    with pytest.raises(RecordsError, match="records of module 2"):
        to_accesses(decode_words(words, woff, used), np.array([0], np.int32), 1, cta_ids=np.array([0]),
                    warps_per_cta=1, local_words=0)


def test_cta_records() -> None:
    raw = np.array([1000, 1900, 3, 1200, 2500, 0], np.uint64)
    c = cta_records(raw, 2)
    assert c.measured_timing
    assert c.sm.tolist() == [3, 0] and c.start.tolist() == [0, 200] and c.end.tolist() == [900, 1500]
    raw[3] = U64
    with pytest.raises(RecordsError, match="no start or end"):
        cta_records(raw, 2)


def _launch_bytes(index: int, name: bytes, words: list[int], woff: list[int], used: list[int], cta: list[int]) -> bytes:
    headb = struct.pack("<IIQ3I3IQQQQQQQQ", 0x4C41554E, len(name), index, 2, 1, 1, 64, 1, 1, 0, 0, 2,
                        len(used), len(words), len(cta), 12345, 0)
    arr = np.array(woff + used + words + cta, np.uint64).tobytes()
    return headb + name + arr


def test_record_file(tmp_path) -> None:
    rec = encode(0x3, 0, {0: 0x100, 1: 0x104})
    body = _launch_bytes(3, b"_Z4spmvPfi", rec, [0, len(rec), len(rec)], [len(rec), 0], [5, 9, 1, 6, 8, 0])
    p = tmp_path / "run.tprec"
    p.write_bytes(RECORD_MAGIC + body)
    [launch] = read_record_file(p)
    assert (launch.index, launch.kernel, launch.grid, launch.block) == (3, "_Z4spmvPfi", (2, 1, 1), (64, 1, 1))
    assert (launch.cta_lo, launch.cta_hi, launch.elapsed_ns) == (0, 2, 12345)
    decoded = launch.records()
    assert decoded.addr[0, 1] == 0x104 and decoded.warp_offsets.tolist() == [0, 1, 1]
    assert cta_records(launch.cta, 2).sm.tolist() == [1, 0]
    p.write_bytes(RECORD_MAGIC + body[:-9])
    with pytest.raises(RecordsError, match="ends inside launch 3"):
        read_record_file(p)
    p.write_bytes(b"garbage!" + body)
    with pytest.raises(RecordsError, match="not a tuiprof record file"):
        read_record_file(p)
    with pytest.raises(RecordsError, match="cannot read"):
        read_record_file(tmp_path / "missing.tprec")


def test_build_trace_from_buffers() -> None:
    from tuiprof.collect.gpu.records import build_trace
    from tuiprof.trace.data import Launch, Provenance, Snapshot, SourceFile

    # snapshot CTAs 1..2 of a 3-CTA grid, 40 threads = 2 warps per CTA
    table = (("k", 4, _op(0)), ("k", 9, _op(1, "store")))
    sites = (Site("k", 4), Site("k", 9))
    warps = [[encode(0xFF, 0, {lane: 0x100 + 4 * lane for lane in range(8)})], [],
             [encode(0x1, 1, {0: SHARED_TAG | 8}), encode(0x3, 0, {0: 0x200, 1: 0x204})], []]
    words, woff, used = regions(warps)
    cta = np.array([100, 300, 4, 150, 250, 5, 120, 400, 6], np.uint64)
    launch = Launch(kernel="k", grid=(3, 1, 1), block=(40, 1, 1), registers_per_thread=20, ctas_per_sm=4)
    t = build_trace(launch=launch, table=table, sites=sites, tag=0, snapshot=Snapshot(np.array([1, 2], np.int64)),
                    words=words, woff=woff, used=used, cta=cta, local_bytes=0,
                    sources=(SourceFile("k.cu", "text"),), provenance=Provenance(backend="gpu", arch="a100"))
    assert t.warp_cta.tolist() == [0, 0, 1, 1] and t.warp_index.tolist() == [0, 1, 0, 1]
    assert t.warp_offsets.tolist() == [0, 1, 1, 3, 3]
    assert t.op.tolist() == [0, 1, 0] and t.mask.tolist() == [0xFF, 0x1, 0x3]
    assert t.addr[1, 0] == 8 and t.addr[2, 1] == 0x204
    assert t.ctas.measured_timing and t.ctas.sm.tolist() == [4, 5, 6] and t.ctas.end.tolist() == [200, 150, 300]
    # op 1 is a global store (as static_ops types a generic access) that reached shared memory once
    assert t.provenance.generator["generic_ops_by_space"] == {"1": [0, 1, 0]}
    assert [o.space for o in t.ops] == ["global", "shared"]


def test_to_accesses_with_two_modules() -> None:
    """-rdc: a device function of module 1 runs inside module 0's kernel; each tag has its map."""
    words, woff, used = regions([[encode(0x1, 0, {0: 0x100}), encode(0x1, 0, {0: 0x200}, tag=1),
                                  encode(0x1, 1, {0: 0x300})]])
    rec = decode_words(words, woff, used)
    acc = to_accesses(rec, {0: np.array([0, 2], np.int32), 1: np.array([1], np.int32)}, 3,
                      cta_ids=np.array([0]), warps_per_cta=1, local_words=0)
    assert acc.op.tolist() == [0, 1, 2] and acc.addr[:, 0].tolist() == [0x100, 0x200, 0x300]
    with pytest.raises(RecordsError, match="records of module 1"):
        to_accesses(rec, {0: np.array([0, 2], np.int32)}, 3, cta_ids=np.array([0]), warps_per_cta=1, local_words=0)
