"""The GPU collector's parts that need no GPU: kernel-parameter packing against the PTX parameter
list, and the one clear message when no GPU is usable. Runs on the GPU itself are marked `gpu`
(tests/test_gpu_run.py)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from tuiprof.collect import DeviceArray
from tuiprof.collect.gpu import EMULATOR_HINT, GpuUnavailable, gpu_problem, pack_params, require_gpu
from tuiprof.errors import TuiprofError
from tuiprof.ptx import parse_module

PTX = """
.version 8.0
.target sm_75
.address_size 64
.visible .entry k(.param .u64 k_param_0, .param .u32 k_param_1, .param .f32 k_param_2,
                  .param .s32 k_param_3, .param .f64 k_param_4, .param .align 8 .b8 k_param_5[16],
                  .param .u8 k_param_6)
{
	ret;
}
"""
FN = parse_module(PTX).functions["k"]


def test_pack_params_by_ptx_type() -> None:
    arr = DeviceArray(0x7F00_1234_5000, (4,), "<f4", 16)
    struct_arg = np.void(bytes(range(16)))
    out = pack_params(FN, [arr, np.uint32(7), 2.5, -3, np.float64(0.125), struct_arg, 255], "k")
    assert out == [struct.pack("<Q", 0x7F00_1234_5000), struct.pack("<I", 7), struct.pack("<f", 2.5),
                   struct.pack("<i", -3), struct.pack("<d", 0.125), bytes(range(16)), b"\xff"]


@pytest.mark.parametrize("args, message", [
    ([1, 2], "takes 7 arguments, the launch script passes 2"),
    ([np.int32(1)] * 7, "argument 1 of k .* takes 8 bytes, the launch script passes 4"),
    ([0, DeviceArray(8, (1,), "<f4", 4)] + [0] * 5, "argument 2 .* is not a pointer"),
    ([0, 0, 0, 0, 0, b"short", 0], "argument 6 .* takes 16 bytes, the launch script passes 5"),
    ([0, 1 << 40, 0, 0, 0, bytes(16), 0], r"argument 2 .*: 1099511627776 does not fit in 4 bytes"),
    ([0, -1, 0, 0, 0, bytes(16), 0], "does not fit in 4 bytes"),
    ([0, 0, 0, 2.5, 0, bytes(16), 0], "argument 4 .* is not an integer"),
    ([0, 0, 0, 0, 0, bytes(16), "x"], "cannot pass a str"),
])
def test_pack_params_errors(args: list, message: str) -> None:
    with pytest.raises(TuiprofError, match=message):
        pack_params(FN, args, "k")


@pytest.mark.skipif(gpu_problem() is None, reason="a GPU is usable here")
def test_no_gpu_is_one_clear_error() -> None:
    problem = gpu_problem()
    assert problem and "\n" not in problem and len(problem) < 200
    with pytest.raises(GpuUnavailable) as exc:
        require_gpu("tuiprof kernel.cu --backend gpu")
    assert exc.value.message.startswith("tuiprof kernel.cu --backend gpu needs an NVIDIA GPU: ")
    assert exc.value.hint == EMULATOR_HINT and "--backend emu" in exc.value.hint
    assert exc.value.exit_code == 2


def test_pycuda_missing_or_no_gpu_is_clear() -> None:
    problem = gpu_problem("pycuda")
    if problem is not None:
        assert "pycuda" in problem or "driver" in problem or "device" in problem
    with pytest.raises(TuiprofError, match="unknown CUDA library 'cupy'"):
        gpu_problem("cupy")
