"""The GPU collector's parts that need no GPU: kernel-parameter packing against the PTX parameter
list, and the one clear message when no GPU is usable. Runs on the GPU itself are marked `gpu`
(tests/gpu/test_gpu_run.py)."""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path

import numpy as np
import pytest

from tests.support.ptx_support import DEMO_DIR, find_nvcc, nvrtc_available
from tuiprof.collect import DeviceArray
from tuiprof.collect.gpu.driver import EMULATOR_HINT, GpuUnavailable, gpu_problem, require_gpu
from tuiprof.collect.gpu.params import pack_params
from tuiprof.errors import TuiprofError
from tuiprof.ptx import parse_module
from tuiprof.ptx.module import param_layout

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
    assert out.values == (struct.pack("<Q", 0x7F00_1234_5000), struct.pack("<I", 7), struct.pack("<f", 2.5),
                          struct.pack("<i", -3), struct.pack("<d", 0.125), bytes(range(16)), b"\xff")
    # by hand: u64 @0, u32 @8, f32 @12, s32 @16, f64 @24 (align 8), .align 8 b8[16] @32, u8 @48
    assert out.offsets == (0, 8, 12, 16, 24, 32, 48) and out.size == 49
    assert out.buffer() == (struct.pack("<QIfi4xd", 0x7F00_1234_5000, 7, 2.5, -3, 0.125) + bytes(range(16))
                            + b"\xff")


# A parameter list where alignment and size differ: a char, a float3 (align 4, 12 bytes), a short,
# a struct {char; double} (align 8, 16 bytes), a char3 (align 1, 3 bytes), an int, a pointer.
PACKED = parse_module("""
.version 8.0
.target sm_75
.address_size 64
.visible .entry q(.param .u8 q_param_0, .param .align 4 .b8 q_param_1[12], .param .u16 q_param_2,
                  .param .align 8 .b8 q_param_3[16], .param .align 1 .b8 q_param_4[3], .param .u32 q_param_5,
                  .param .u64 q_param_6)
{
\tret;
}
""").functions["q"]


def test_param_buffer_uses_the_ptx_alignment() -> None:
    """Offsets computed by hand from the declarations: u8 @0; float3 aligned to 4 -> @4..16; u16 @16..18;
    the struct aligned to 8 -> @24..40; char3 @40..43; u32 aligned to 4 -> @44..48; u64 @48..56.
    (A guess from the sizes alone put the 12-byte float3 at 8 and the 3-byte char3 at 43.)"""
    f3 = struct.pack("<3f", 1.0, 2.0, 3.0)
    s = struct.pack("<b7xd", -2, 6.5)
    out = pack_params(PACKED, [np.uint8(9), f3, np.uint16(0xBEEF), s, b"xyz", np.uint32(5),
                               DeviceArray(0x1122334455667788, (1,), "<f4", 4)], "q")
    assert out.offsets == (0, 4, 16, 24, 40, 44, 48) and out.size == 56
    want = bytearray(56)
    for at, raw in ((0, b"\x09"), (4, f3), (16, b"\xef\xbe"), (24, s), (40, b"xyz"), (44, b"\x05\0\0\0"),
                    (48, struct.pack("<Q", 0x1122334455667788))):
        want[at:at + len(raw)] = raw
    assert out.buffer() == bytes(want)


class _F3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_float), ("y", ctypes.c_float), ("z", ctypes.c_float)]


class _Mixed(ctypes.Structure):
    _fields_ = [("c", ctypes.c_int8), ("d", ctypes.c_double)]


class _C3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_char), ("y", ctypes.c_char), ("z", ctypes.c_char)]


class _QParams(ctypes.Structure):
    """The same parameter list as a C struct: CUDA lays kernel parameters out as C lays out a
    struct of them (ctypes computes the C ABI's offsets independently)."""
    _fields_ = [("a", ctypes.c_uint8), ("f3", _F3), ("h", ctypes.c_uint16), ("s", _Mixed), ("c3", _C3),
                ("n", ctypes.c_uint32), ("p", ctypes.c_void_p)]


def test_param_layout_matches_the_c_abi() -> None:
    offsets, size = param_layout(PACKED.params)
    assert offsets == tuple(getattr(_QParams, f).offset for f, _ in _QParams._fields_)
    assert size == _QParams.p.offset + ctypes.sizeof(ctypes.c_void_p)


STRUCT_KERNEL = r"""
struct Mixed { char c; double d; };
struct F3 { float x, y, z; };
extern "C" __global__ void by_value(char a, F3 f, Mixed s, double* out) {
    out[threadIdx.x] = a + f.y + s.d + s.c;
}
"""


@pytest.mark.skipif(find_nvcc() is None and not nvrtc_available(), reason="no CUDA compiler")
def test_struct_by_value_reaches_the_kernel(tmp_path: Path) -> None:
    """nvcc's own .param declarations for structs passed by value, and a launch through the GPU
    collector's device (the emulator as its driver, the parameter buffer as pycuda passes it): the
    kernel reads back the values the launch script packed as NumPy structured scalars."""
    from tests.support.emu_driver import EmuDriver
    from tuiprof.collect.gpu.device import GpuDevice
    from tuiprof.toolchain import build_program

    src = tmp_path / "byval.cu"
    src.write_text(STRUCT_KERNEL)
    program = build_program(src, compute_capability=(8, 0), cache=False)
    module = parse_module(program.ptx)
    fn = module.functions["by_value"]
    assert [(p.align, p.size_bytes) for p in fn.params] == [(1, 1), (4, 12), (8, 16), (8, 8)]
    mixed = np.dtype([("c", "i1"), ("d", "f8")], align=True)
    f3 = np.dtype([("x", "f4"), ("y", "f4"), ("z", "f4")], align=True)
    with GpuDevice(program, module, driver=EmuDriver()) as dev:
        out = dev.zeros(4, np.float64)
        dev.launch("by_value", 1, 4, (np.int8(3), np.array((0.5, 1.25, 9.0), f3)[()],
                                      np.array((-7, 100.5), mixed)[()], out))
        got = dev.from_device(out)
    np.testing.assert_array_equal(got, np.full(4, 3 + 1.25 + 100.5 - 7))


def test_a_device_closes_the_driver_it_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GpuDevice given no driver opens one and closes it with itself, also when loading the
    module fails (pycuda aborts the process at exit when a context is left pushed: the first GPU
    run's `--cuda pycuda` validate printed that); a driver passed in stays open for its owner."""
    from tests.support.emu_driver import EmuDriver
    from tuiprof.collect.gpu import driver
    from tuiprof.collect.gpu.device import GpuDevice
    from tuiprof.toolchain import build_program

    closed: list[int] = []

    class Counted(EmuDriver):
        def close(self) -> None:
            closed.append(1)

    monkeypatch.setattr(driver, "_open_driver", lambda cuda: Counted())
    program = build_program(DEMO_DIR / "vecadd.cu", compute_capability=(8, 0))
    module = parse_module(program.ptx)
    with GpuDevice(program, module) as dev:
        dev.zeros(4, np.float32)
    assert closed == [1]
    dev.close()
    assert closed == [1]
    shared = Counted()
    with GpuDevice(program, module, driver=shared):
        pass
    assert closed == [1]
    monkeypatch.setattr(Counted, "load", lambda self, ptx: (_ for _ in ()).throw(driver.GpuError("no", "hint")))
    with pytest.raises(driver.GpuError):
        GpuDevice(program, module)
    assert closed == [1, 1]


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


def test_the_driver_calls_exist_in_the_installed_cuda_bindings() -> None:
    """Every driver function, enum and attribute the cuda-bindings collector names exists in the
    installed NVIDIA cuda-bindings (a renamed or misspelt one would fail only on a GPU)."""
    import inspect
    import re

    drv = pytest.importorskip("cuda.bindings.driver")
    from tuiprof.collect.gpu import driver

    source = inspect.getsource(driver._CudaBindings)
    calls = set(re.findall(r"\bdrv\.(cu[A-Za-z0-9_]+|CU[A-Za-z_]+)", source))
    assert {"cuInit", "cuModuleLoadData", "cuLaunchKernel", "cuFuncGetAttribute", "cuMemcpyDtoH"} <= calls
    missing = [name for name in sorted(calls) if not hasattr(drv, name)]
    assert not missing, missing
    attributes = set(re.findall(r"\b(CU_(?:DEVICE|FUNC)_ATTRIBUTE_[A-Z0-9_]+)", source))
    assert len(attributes) >= 10
    enums = (drv.CUdevice_attribute, drv.CUfunction_attribute)
    missing = [a for a in sorted(attributes) if not any(hasattr(e, a) for e in enums)]
    assert not missing, missing
    assert hasattr(drv.CUresult, "CUDA_SUCCESS")


def test_a_texture_on_the_gpu_path_is_one_clear_refusal(tmp_path: Path) -> None:
    """Texture objects are emulated only (issue 22 item 4): on the GPU collector's device, making
    one is an error that says so and names the way that works, not a crash mid-launch."""
    from tests.support.emu_driver import EmuDriver
    from tuiprof.collect.gpu.device import GpuDevice
    from tuiprof.toolchain import build_program

    src = tmp_path / "byval.cu"
    src.write_text(STRUCT_KERNEL)
    program = build_program(src, compute_capability=(8, 0), cache=False)
    with GpuDevice(program, parse_module(program.ptx), driver=EmuDriver()) as dev:
        with pytest.raises(TuiprofError) as err:
            dev.texture(np.zeros((4, 4), np.float32), filter="point")
    assert "emulated only" in str(err.value.message) and "--backend emu" in str(err.value.hint)
