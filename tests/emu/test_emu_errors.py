"""Bad input stops the emulator with one clear TuiprofError naming the problem and the source
line: out-of-bounds and misaligned accesses, a runaway loop, barrier deadlocks, traps, an
unsupported instruction, and launches whose arguments do not match the kernel."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.support.emu_support import cuda_ptx, run  # noqa: F401 (cuda_ptx is a fixture)
from tuiprof.collect.emu.device import EmuDevice
from tuiprof.errors import TuiprofError


def line_of(text: str, needle: str) -> int:
    return next(i + 1 for i, line in enumerate(text.splitlines()) if needle in line)


def bad(cuda_ptx):
    return cuda_ptx("emu_bad")


def test_out_of_bounds_global_read_names_line_and_address(cuda_ptx):
    module, src, text = bad(cuda_ptx)
    with pytest.raises(TuiprofError) as e:
        run((module, src, text), "out_of_bounds", 1, 32, (np.zeros(32, np.int32), np.zeros(32, np.int32), np.int32(16)))
    msg = str(e.value)
    assert "out-of-bounds global access" in msg
    assert f"emu_bad.cu:{line_of(text, 'reads past the end')}" in msg
    addr = int(re.search(r"at 0x([0-9a-f]+)", msg).group(1), 16)
    assert addr == 0x7F0000000000 + 4 * (16 + 16)   # in is the first allocation; lane 16 reads in[32]
    assert e.value.hint


def test_out_of_bounds_shared_read(cuda_ptx):
    module, src, text = bad(cuda_ptx)
    with pytest.raises(TuiprofError, match=rf"out-of-bounds shared access .*emu_bad.cu:{line_of(text, 's[threadIdx.x + k]')}"):
        run((module, src, text), "shared_out_of_bounds", 1, 64, (np.zeros(64, np.int32), np.int32(1)))
    # in bounds it runs
    out = run((module, src, text), "shared_out_of_bounds", 1, 64, (np.zeros(64, np.int32), np.int32(0)))[0]
    np.testing.assert_array_equal(out, np.arange(64))


def test_misaligned_access(cuda_ptx):
    module, src, text = bad(cuda_ptx)
    with pytest.raises(TuiprofError, match=rf"misaligned global access .*emu_bad.cu:{line_of(text, 'p + 1 +')}"):
        run((module, src, text), "misaligned", 1, 4, (np.zeros(64, np.uint8),))


def test_runaway_loop_hits_the_step_limit(cuda_ptx):
    module, src, text = bad(cuda_ptx)
    with pytest.raises(TuiprofError, match=r"ran more than 100,000 warp instructions .*runaway") as e:
        run((module, src, text), "runaway", 1, 32, (np.zeros(1, np.int32), np.zeros(32, np.int32)), step_limit=100_000)
    assert "emu_bad.cu:" in str(e.value)
    out = run((module, src, text), "runaway", 1, 32, (np.ones(1, np.int32), np.zeros(32, np.int32)), step_limit=100_000)[1]
    np.testing.assert_array_equal(out, 0)


def test_barrier_with_a_thread_count_never_reached_deadlocks(cuda_ptx):
    module, src, text = bad(cuda_ptx)
    with pytest.raises(TuiprofError, match=r"barrier deadlock .*32 threads wait.*CTA barrier"):
        run((module, src, text), "barrier_count_never_reached", 1, 32, (np.zeros(32, np.int32),))
    out = run((module, src, text), "barrier_count_never_reached", 1, 64, (np.zeros(64, np.int32),))[0]
    np.testing.assert_array_equal(out, 1)


def test_warp_sync_against_block_sync_deadlocks(cuda_ptx):
    module, src, text = bad(cuda_ptx)
    with pytest.raises(TuiprofError, match=r"barrier deadlock") as e:
        run((module, src, text), "warp_sync_vs_block_sync", 1, 64, (np.zeros(64, np.int32),))
    assert f"emu_bad.cu:{line_of(text, '__syncwarp')}" in str(e.value) or \
        f"emu_bad.cu:{line_of(text, 'else __syncthreads')}" in str(e.value)


def test_trap(cuda_ptx):
    module, src, text = bad(cuda_ptx)
    with pytest.raises(TuiprofError, match=rf"trap in thread \(5,0,0\).*emu_bad.cu:{line_of(text, '__trap')}"):
        run((module, src, text), "traps", 1, 32, (np.zeros(32, np.int32),))


def test_unsupported_instruction_names_it_and_its_line(cuda_ptx):
    module, src, text = bad(cuda_ptx)
    line = line_of(text, 'asm("mad.lo.cc')
    with pytest.raises(TuiprofError, match=rf"unsupported PTX instruction mad.lo.cc.u32 \(emu_bad.cu:{line}"):
        run((module, src, text), "unsupported_mad_cc", 1, 32, (np.zeros(32, np.int32), np.zeros(32, np.int32)))


@pytest.mark.parametrize("args, message", [
    (lambda d: (d.zeros(8, np.float32), d.zeros(8, np.float32)), r"takes 3 parameters, the launch passes 2"),
    (lambda d: (d.zeros(8, np.float32), d.zeros(8, np.float32), 8), r"Python int, whose size is ambiguous"),
    (lambda d: (d.zeros(8, np.float32), d.zeros(8, np.float32), np.int64(8)), r"int64 \(8 bytes\)"),
    (lambda d: (d.zeros(8, np.float32), d.zeros(8, np.float32), np.float32(8)), r"for an integer parameter"),
    (lambda d: (d.zeros(8, np.float32), np.zeros(8, np.float32), np.int32(8)), r"host array"),
    (lambda d: (d.zeros(8, np.float32), d.zeros(8, np.float32), d.zeros(1, np.int32)), r"is not a pointer"),
    (lambda d: (np.float32(1), d.zeros(8, np.float32), np.int32(8)), r"argument 0 .* passes a float32 \(4 bytes\)"),
])
def test_wrong_launch_arguments(cuda_ptx, args, message):
    module, src, text = bad(cuda_ptx)
    dev = EmuDevice(module, src, text)
    with pytest.raises(TuiprofError, match=message) as e:
        dev.launch("takes_three", 1, 8, args(dev))
    assert e.value.hint


def test_unknown_kernel_and_bad_geometry(cuda_ptx):
    module, src, text = bad(cuda_ptx)
    dev = EmuDevice(module, src, text)
    with pytest.raises(TuiprofError, match=r"no kernel 'nope'") as e:
        dev.launch("nope", 1, 1, ())
    assert "takes_three" in e.value.hint
    args = (dev.zeros(8, np.float32), dev.zeros(8, np.float32), np.int32(8))
    with pytest.raises(TuiprofError, match=r"at most 1024"):
        dev.launch("takes_three", 1, (32, 64), args)
    with pytest.raises(TuiprofError, match=r"not 1 to 3 positive sizes"):
        dev.launch("takes_three", 0, 8, args)
    with pytest.raises(TuiprofError, match=r"shared=-1 is negative"):
        dev.launch("takes_three", 1, 8, args, shared=-1)


def test_bra_uni_taken_by_some_lanes_only(cuda_ptx):
    module, src, text = bad(cuda_ptx)
    with pytest.raises(TuiprofError, match=rf"bra.uni is not uniform .*lanes 0x0000ffff of 0xffffffff.*emu_bad.cu:{line_of(text, 'bra.uni')}"):
        run((module, src, text), "bra_uni_divergent", 1, 32, (np.zeros(32, np.int32),))
    out = run((module, src, text), "bra_uni_divergent", 1, 16, (np.zeros(16, np.int32),))[0]
    np.testing.assert_array_equal(out, 1)
