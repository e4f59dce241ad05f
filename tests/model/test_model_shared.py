"""Shared memory as Nsight Compute counts it (issue 20 part 4): wavefronts per request against
hand-counted cases, on hand-built addresses and on kernels run in the emulator, and what a shared
op shows instead of cache hit ratios."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.emu_support import cuda_ptx  # noqa: F401  (fixture)
from tuiprof.collect.emu.device import EmuDevice, RecordChoice
from tuiprof.model.shared import MAX_WAVEFRONTS, shared_op_stats
from tuiprof.model.wavefronts import wavefronts

LANE = np.arange(32, dtype=np.uint64)
FULL = 0xFFFFFFFF


def count(addresses, nbytes: int = 4, mask: int = FULL, banks: int = 32) -> tuple[int, int, int]:
    """(wavefronts, ideal, worst phase) of one warp access."""
    a, i, w = wavefronts(np.asarray(addresses, dtype=np.uint64).reshape(1, 32), np.array([mask], np.uint32),
                         np.zeros(1, np.int32), np.array([nbytes], np.int64), np.zeros(1, np.int64), banks, 4)
    return int(a[0]), int(i[0]), int(w[0])


@pytest.mark.parametrize("name, addresses, nbytes, mask, want", [
    ("row of floats", LANE * 4, 4, FULL, (1, 1, 1)),
    ("column of a 32 x 32 float tile", LANE * 32 * 4, 4, FULL, (32, 1, 32)),
    ("column of a tile padded to 33", LANE * 33 * 4, 4, FULL, (1, 1, 1)),
    ("broadcast of one word", np.full(32, 256, np.uint64), 4, FULL, (1, 1, 1)),
    ("two words apart", LANE * 8, 4, FULL, (2, 1, 2)),
    ("four lanes of a column", LANE * 128, 4, 0b1111, (4, 1, 4)),
    ("no active lane", LANE * 128, 4, 0, (0, 0, 0)),
    ("bytes of one word", LANE // 4 * 4, 1, FULL, (1, 1, 1)),
    ("row of doubles: two half-warps", LANE * 8, 8, FULL, (2, 2, 1)),
    ("doubles 16 words apart: banks 0, 1, 16, 17 hold 8 each per half-warp", LANE * 64, 8, FULL, (16, 2, 8)),
    ("row of float4: four quarter-warps", LANE * 16, 16, FULL, (4, 4, 1)),
    ("float4 of one lane of each quarter", LANE * 16, 16, 0x01010101, (4, 4, 1)),
])
def test_wavefronts_by_hand(name, addresses, nbytes, mask, want) -> None:
    assert count(addresses, nbytes, mask) == want, name


def test_gt200_serves_half_warps_on_16_banks() -> None:
    assert count(LANE * 4, banks=16) == (2, 2, 1)
    assert count(LANE * 64, banks=16) == (32, 2, 16)  # stride 16 words: one bank per half-warp


def run_and_record(compiled, kernel: str, block, args):
    module, src, text = compiled
    dev = EmuDevice(module, src, text, record=RecordChoice(kernel=kernel, snapshot=None))
    dargs = [dev.to_device(a) for a in args]
    dev.launch(kernel, (1,), block, dargs)
    return dev, dargs


def stats_by_label(compiled, kernel: str, block, args, banks: int = 32):
    from tuiprof.collect.pipeline import with_provenance  # noqa: F401  (a Trace from the recording)
    from tuiprof.trace.data import Launch, Provenance, Snapshot, SourceFile, Trace

    dev, dargs = run_and_record(compiled, kernel, block, args)
    r = dev.recorded
    trace = Trace(launch=Launch(kernel, r.grid, r.block, r.registers_per_thread), ops=r.ops,
                  snapshot=Snapshot(cta_ids=r.cta_ids, rule="test"), warp_offsets=r.warp_offsets, warp_cta=r.warp_cta,
                  warp_index=r.warp_index, op=r.op, mask=r.mask, addr=r.addr,
                  sources=(SourceFile("shared_banks.cu", compiled[2]),), provenance=Provenance("emulator", "v100"))
    st = shared_op_stats(trace, banks, 4, 19)
    return {(r.ops[i].kind, r.ops[i].label): s for i, s in st.items()}, dev, dargs


@pytest.mark.parametrize("kernel, column_wavefronts", [("column32", 32), ("column33", 1)])
def test_a_tile_column_is_32_way_unless_padded(cuda_ptx, kernel: str, column_wavefronts: int) -> None:
    data = np.arange(32 * 32, dtype=np.float32)
    st, dev, dargs = stats_by_label(cuda_ptx("shared_banks"), kernel, (32, 32, 1), [data, np.zeros_like(data)])
    np.testing.assert_array_equal(dev.from_device(dargs[1]), data.reshape(32, 32).T.reshape(-1))
    row, column = st[("store", "tile[y][x]")], st[("load", "tile[x][y]")]
    assert (row.passes, row.ideal, row.conflicted) == (1, 1, 0)
    assert (column.passes, column.ideal, column.worst) == (column_wavefronts, 1, column_wavefronts)
    assert column.warp_accesses == 32 and column.latency == 19 + column_wavefronts - 1
    assert column.histogram[column_wavefronts] == 32 and len(column.histogram) == MAX_WAVEFRONTS + 1


def test_broadcast_stride_and_vectors(cuda_ptx) -> None:
    data = np.arange(64, dtype=np.float32)
    st, dev, dargs = stats_by_label(cuda_ptx("shared_banks"), "broadcast_and_stride", (32, 1, 1),
                                    [data, np.zeros(32, np.float32)])
    np.testing.assert_array_equal(dev.from_device(dargs[1]), data[0] + data[2 * np.arange(32)])
    assert st[("load", "s[0]")].passes == 1
    assert st[("load", "s[2 * t]")].passes == 2 and st[("load", "s[2 * t]")].ways == 2
    vec = np.arange(32 * 4, dtype=np.float32)
    st, dev, dargs = stats_by_label(cuda_ptx("shared_banks"), "vector_rows", (32, 1, 1), [vec, np.zeros_like(vec)])
    assert (st[("store", "v[t]")].passes, st[("store", "v[t]")].ideal) == (4, 4)
    assert st[("load", "v[31 - t]")].extra == 0
