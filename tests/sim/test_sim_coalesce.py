"""Coalescing: warp accesses -> L1 line requests with 32 B sector masks."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.sim_traces import FULL, LANE0, lanes, one_lane, op, small_arch, trace_of
from tuiprof.arch import load_arch
from tuiprof.errors import ArchError
from tuiprof.sim.coalesce import coalesce, coalesce_trace
from tuiprof.sim.prepared import pack_arch, prepare


def requests(t, line=128):
    c = coalesce_trace(t, line)
    lines = c.request_lines()
    return [(int(lines[j]), int(c.req_mask[j])) for j in range(c.n_requests)], c


def test_stride_one_floats_make_one_request_of_four_sectors() -> None:
    reqs, c = requests(trace_of([[(0, lanes(0x10000, 4), FULL)]]))
    assert reqs == [(0x10000 // 128, 0b1111)]
    assert c.sectors_per_request()[0] == 4.0
    assert c.requests_per_access()[0] == 1.0


def test_stride_32_floats_make_32_requests_of_one_sector() -> None:
    reqs, c = requests(trace_of([[(0, lanes(0x10000, 128), FULL)]]))
    assert reqs == [(0x10000 // 128 + i, 0b1) for i in range(32)]
    assert c.sectors_per_request()[0] == 1.0
    assert c.requests_per_access()[0] == 32.0


def test_random_gather_requests_are_the_distinct_lines_touched() -> None:
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 64, size=32)  # floats 0..63: 2 lines of 128 B, 8 sectors
    addr = np.uint64(0x20000) + idx.astype(np.uint64) * np.uint64(4)
    reqs, c = requests(trace_of([[(0, addr, FULL)]]))
    expected: dict[int, int] = {}
    for i in idx:
        line, sector = (0x20000 + 4 * int(i)) // 128, ((4 * int(i)) % 128) // 32
        expected[line] = expected.get(line, 0) | (1 << sector)
    assert reqs == sorted(expected.items())
    assert c.op_sectors[0] == sum(bin(m).count("1") for m in expected.values())


def test_descending_lanes_are_sorted_and_merged() -> None:
    reqs, _ = requests(trace_of([[(0, lanes(0x10000 + 31 * 64, -64 & 0xFFFFFFFFFFFFFFFF), FULL)]]))
    # 32 lanes 64 B apart, descending: 16 lines, sectors 0 and 2 of each.
    assert reqs == [(0x10000 // 128 + i, 0b0101) for i in range(16)]


def test_inactive_lanes_touch_nothing() -> None:
    reqs, c = requests(trace_of([[(0, lanes(0x10000, 128), 0x80000001)]]))
    assert reqs == [(0x10000 // 128, 1), (0x10000 // 128 + 31, 1)]


def test_wide_unaligned_lane_straddles_lines() -> None:
    # A 16-byte lane at line offset 120 covers bytes 120..135: sector 3 of one line, 0 of the next.
    reqs, _ = requests(trace_of([[(0, one_lane(0x10000 + 120), LANE0)]], ops=(op(nbytes=16),)))
    assert reqs == [(0x10000 // 128, 0b1000), (0x10000 // 128 + 1, 0b0001)]


def test_vector_loads_cover_more_sectors() -> None:
    reqs, _ = requests(trace_of([[(0, lanes(0x10000, 16), FULL)]], ops=(op(nbytes=16),)))
    assert reqs == [(0x10000 // 128 + i, 0b1111) for i in range(4)]


def test_top_of_the_address_space() -> None:
    top = 2**64 - 4
    reqs, _ = requests(trace_of([[(0, one_lane(top), LANE0)]], ops=(op(nbytes=16),)))
    assert reqs == [((2**64 - 1) // 128, 1 << 3)]


def test_shared_memory_ops_make_no_requests() -> None:
    t = trace_of([[(0, lanes(0x100), FULL), (1, lanes(0x10000), FULL)]], ops=(op(space="shared"), op()))
    reqs, c = requests(t)
    assert reqs == [(0x10000 // 128, 0b1111)]
    assert list(c.req_off) == [0, 0, 1]
    assert list(c.op_requests) == [0, 1] and np.isnan(c.sectors_per_request()[0])


def test_line_size_follows_the_l1() -> None:
    t = trace_of([[(0, lanes(0, 4), FULL)]])
    assert requests(t, 32)[0] == [(i, 1) for i in range(4)]
    assert requests(t, 256)[0] == [(0, 0b1111)]


def test_unsupported_geometry_is_refused() -> None:
    import pytest

    with pytest.raises(ArchError, match="16 B sectors are not modeled"):
        pack_arch(small_arch(l1__sector=16))
    with pytest.raises(ValueError):
        coalesce(np.zeros(0, np.int32), np.zeros(0, np.uint32), np.zeros((0, 32), np.uint64),
                 np.array([4]), np.array([1], np.uint8), 48)


def test_prepare_places_ctas_round_robin_and_cuts_sequences() -> None:
    arch = small_arch(sm_count=2)
    w = [[(0, lanes(0x1000 * k), FULL), (1, lanes(0x1000 * k + 128), FULL), (0, lanes(0x1000 * k + 256), FULL)]
         for k in range(3)]
    t = trace_of(w, ops=(op(starts=True), op()), warps_per_cta=1)
    p = prepare(t, arch)
    # Sequences start at each warp's first access and at every op 0: (0,1) (2) per warp.
    assert list(p.seq_off) == [0, 2, 3, 5, 6, 8, 9]
    assert list(p.warp_seq_off) == [0, 2, 4, 6]
    # CTAs 0 and 2 on SM 0, CTA 1 on SM 1.
    assert list(p.sm_seq_off) == [0, 4, 6]
    assert list(p.sm_requests) == [6, 3]
    assert list(p.sm_acc_off) == [0, 6, 9]


def _reference(addr_row, mask, nbytes, line):
    """(line, chunk mask, full-chunk mask) of every line, from the bytes each lane covers."""
    covered: dict[int, set[int]] = {}
    for lane in range(32):
        if not (mask >> lane) & 1:
            continue
        a = int(addr_row[lane])
        for byte in range(a, min(a + nbytes - 1, 2**64 - 1) + 1):
            covered.setdefault(byte // 32, set()).add(byte % 32)
    out: dict[int, list[int]] = {}
    for chunk, nbs in covered.items():
        ln, bit = chunk * 32 // line, 1 << ((chunk * 32 % line) // 32)
        m = out.setdefault(ln, [0, 0])
        m[0] |= bit
        m[1] |= bit if len(nbs) == 32 else 0
    return sorted((ln, m, f) for ln, (m, f) in out.items())


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128]), st.sampled_from([32, 128, 1024]),
       st.integers(1, 2**32 - 1), st.sampled_from(["dense", "random", "huge", "overlapping"]))
def test_matches_a_reference_coalescer(seed, nbytes, line, mask, pattern) -> None:
    rng = np.random.default_rng(seed)
    if pattern == "dense":
        addr = np.uint64(rng.integers(0, 1 << 20)) + np.arange(32, dtype=np.uint64) * np.uint64(nbytes)
    elif pattern == "random":
        addr = rng.integers(0, 1 << 16, size=32, dtype=np.uint64)
    elif pattern == "overlapping":  # lanes that overlap, leave gaps and straddle chunks, in any order
        addr = np.uint64(rng.integers(0, 1 << 20)) + rng.integers(0, 3 * nbytes + 40, size=32, dtype=np.uint64)
    else:
        addr = rng.integers(0, 2**64 - 1, size=32, dtype=np.uint64, endpoint=True)
    t = trace_of([[(0, addr, mask)]], ops=(op(nbytes=nbytes),))
    c = coalesce_trace(t, line)
    lines = c.request_lines()
    got = [(int(lines[j]), int(c.req_mask[j]), int(c.req_full[j])) for j in range(c.n_requests)]
    assert got == _reference(t.addr[0], mask, nbytes, line)
    assert c.req_mask.dtype == c.req_full.dtype == (np.uint8 if line <= 256 else np.uint32)


def test_a_chunk_is_full_only_where_the_lanes_cover_its_32_bytes() -> None:
    # 4 B lanes: 8 lanes cover chunk 0; one lane touches chunk 1; two lanes touch chunk 2; six
    # lanes 5 B apart leave gaps in chunk 3. Only chunk 0 is full.
    addr = np.zeros(32, dtype=np.uint64)
    addr[:8] = np.arange(8, dtype=np.uint64) * np.uint64(4)
    addr[8] = 44
    addr[9:11] = (64, 80)
    addr[11:17] = 96 + np.arange(6, dtype=np.uint64) * np.uint64(5)
    active = (1 << 17) - 1
    c = coalesce_trace(trace_of([[(0, addr, active)]], ops=(op(nbytes=4),)), 128)
    assert [(int(c.req_mask[j]), int(c.req_full[j])) for j in range(c.n_requests)] == [(0b1111, 0b0001)]
    # The same lanes 16 B wide: chunk 0 is bytes 0..43's, chunk 1 lacks bytes 60..63, chunk 2 is
    # 64..95, chunk 3 96..136 (overlapping lanes), and bytes 128..136 start the next line.
    c = coalesce_trace(trace_of([[(0, addr, active)]], ops=(op(nbytes=16),)), 128)
    assert [(int(c.req_mask[j]), int(c.req_full[j])) for j in range(c.n_requests)] == [(0b1111, 0b1101), (0b0001, 0)]


def test_prepare_uses_every_preset() -> None:
    t = trace_of([[(0, lanes(0x1000), FULL)]])
    for name in ("tesla-c2050", "gtx480", "gtx285", "v100", "a100", "h100"):
        p = prepare(t, load_arch(name))
        assert p.coalesced.n_requests == (1 if load_arch(name).l1.line >= 128 else 4)


def test_dense_ids_number_the_distinct_lines_in_order_of_first_appearance() -> None:
    from tuiprof.sim.coalesce import dense_ids

    rng = np.random.default_rng(8)
    keys = np.concatenate([rng.integers(0, 5000, 20000), [2**62 + 1, 0, 2**62 + 1]]).astype(np.int64)
    ids, lines = dense_ids(keys)
    first = dict.fromkeys(int(k) for k in keys)  # insertion order = first appearance
    assert list(lines) == list(first) and ids.dtype == np.int32
    assert np.array_equal(lines[ids], keys)
    empty_ids, empty_lines = dense_ids(np.zeros(0, dtype=np.int64))
    assert empty_ids.size == 0 and empty_lines.size == 0


def test_coalescing_carries_the_dense_ids_of_its_requests() -> None:
    from tests.support.factories import random_trace

    t = random_trace(3, n=300)
    c = coalesce_trace(t, 128)
    # the request lines from the addresses, access by access (the reference coalescer)
    want = [ln for r in range(t.n_accesses) if t.ops[t.op[r]].is_cached
            for ln, _, _ in _reference(t.addr[r], int(t.mask[r]), t.ops[t.op[r]].bytes, 128)]
    assert c.request_lines().tolist() == want
    assert list(c.lines) == list(dict.fromkeys(want))  # ids in order of first appearance
    assert len(set(c.lines.tolist())) == c.lines.size == np.unique(c.request_lines()).size


def test_request_masks_take_the_narrowest_dtype_the_line_allows() -> None:
    # 128 B lines (every preset's L1) hold 4 chunks and 256 B lines 8: one byte a mask; 512 and
    # 1024 B lines (reachable with --set l1.line=...) hold 16 and 32 chunks: uint32, every bit kept.
    for name in ("tesla-c2050", "gtx480", "gtx285", "v100", "a100", "h100"):
        assert load_arch(name).l1.line // 32 <= 8
    addr = np.uint64(0x4000) + np.arange(32, dtype=np.uint64) * np.uint64(32)  # 1 KiB, one chunk a lane
    t = trace_of([[(0, addr, FULL)]], ops=(op(nbytes=32),))
    for line, dtype in ((128, np.uint8), (256, np.uint8), (512, np.uint32), (1024, np.uint32)):
        c = coalesce_trace(t, line)
        assert c.req_mask.dtype == c.req_full.dtype == dtype
        chunks = line // 32
        full = (1 << chunks) - 1
        assert c.req_mask.tolist() == c.req_full.tolist() == [full] * (1024 // line)


def test_wide_l2_line_ids_are_the_dense_ids_of_the_wide_lines() -> None:
    from tests.support.factories import random_trace
    from tuiprof.sim.coalesce import dense_ids

    p = prepare(random_trace(5, n=400), load_arch("tesla-c2050"))
    lines = p.coalesced.request_lines()
    for shift in (1, 2, 3):
        ids, wide = p.line_ids(shift)
        want_ids, want_wide = dense_ids(lines >> shift)  # numbered over the requests themselves
        assert np.array_equal(ids, want_ids) and np.array_equal(wide, want_wide)
        assert np.array_equal(wide[ids], lines >> shift)


def test_prepared_request_arrays_take_6_bytes_a_request() -> None:
    # req_id int32 + two uint8 masks; the line ids are not kept per request: spmv-b128's 23.7M
    # requests take 142 MB, where an int64 line, two uint32 masks and the id took 474 MB.
    from tests.support.factories import random_trace

    p = prepare(random_trace(11, n=2000), load_arch("v100"))
    co = p.coalesced
    q = co.n_requests
    per_request = co.req_id.nbytes + co.req_mask.nbytes + co.req_full.nbytes
    assert q > 2000 and per_request == 6 * q
    assert not any(f.name == "req_line" for f in dataclasses.fields(co))


def test_the_working_set_per_cta_is_the_models_definition() -> None:
    from tests.support.factories import random_trace
    from tuiprof.demos import resolve_target
    from tuiprof.model.decisions import working_set_lines
    from tuiprof.trace.io import load_trace

    for t in (random_trace(4, n=500, n_warps=12), load_trace(resolve_target("stencil7"))):
        for arch in (small_arch(), load_arch("tesla-c2050").with_overrides({"sm_count": "3"})):
            p = prepare(t, arch)
            co = p.coalesced
            assert p.working_set_lines() == pytest.approx(working_set_lines(t, co.req_off, co.request_lines()), rel=1e-12)
