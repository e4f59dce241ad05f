"""The GPU collector: a launch script run on a real GPU with instrumented PTX (Baghsorkhi12 sec. 4.2).

`GpuDevice` implements the Device protocol of `tuiprof.collect` on NVIDIA's driver API, through
cuda-bindings (the default; a dependency of tuiprof on Linux and Windows) or pycuda (``--cuda
pycuda``, when installed). It loads the PTX of `tuiprof.ptx.instrument`, and at the chosen launch
fills the probes' control block: a counting pass (the whole launch script, probes only counting
each snapshot warp's record words), then a recording pass (the script again, each warp writing
into an exact region), then decodes the buffers (`tuiprof.collect.records`). Every CTA of the
grid also leaves its %smid and start/end %globaltimer, so the SM pane says *measured*.

Nothing here imports a GPU library at module import: `gpu_problem` says, cheaply, why no GPU is
usable (no driver, no device, no library), and every GPU command turns that into one clear
`GpuUnavailable` that points at the emulator (``--backend emu``).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from collections.abc import Callable, Sequence

import numpy as np

from tuiprof import __version__
from tuiprof.arch.model import Arch
from tuiprof.build.program import Program
from tuiprof.collect import NULL, DeviceArray, Dim, KernelArg, array_layout, check_launch_bounds, dim3
from tuiprof.collect.options import CUDA_LIBRARIES
from tuiprof.collect.records import build_trace
from tuiprof.collect.symbols import Symbol, find_variable, module_symbols, symbol_bytes, symbol_view
from tuiprof.errors import TuiprofError
from tuiprof.ptx.instrument import CTA_WORDS, CTL_SYMBOL, CTL_WORDS, Instrumented
from tuiprof.ptx.model import Function, Module, Param, param_layout
from tuiprof.trace.model import Launch, Provenance, Snapshot, StaticOp, Trace

EMULATOR_HINT = ("run it in the emulator instead: --backend emu (no GPU needed; the same launch script, "
                 "exact addresses)")
U64_MAX = np.uint64(0xFFFFFFFFFFFFFFFF)


class GpuUnavailable(TuiprofError):
    """No usable GPU: no driver, no device, or no CUDA Python library."""


class GpuError(TuiprofError):
    """The GPU refused something: a PTX the driver cannot load, a failed launch, no memory."""


# --------------------------------------------------------------------------- availability


_PROBLEM: dict[str, str | None] = {}
_INFO: dict[str, DeviceInfo] = {}


def gpu_problem(cuda: str = "cuda-bindings") -> str | None:
    """Why no GPU can be used through `cuda` (None when one can); cached per library."""
    if cuda in _PROBLEM:
        return _PROBLEM[cuda]
    problem: str | None
    try:
        drv = _open_driver(cuda)
    except GpuUnavailable as exc:
        problem = exc.message
    else:
        problem = None
        _INFO[cuda] = drv.info
        drv.close()
    _PROBLEM[cuda] = problem
    return problem


def gpu_info(cuda: str = "cuda-bindings") -> DeviceInfo:
    """The GPU at hand (the first device), as `gpu_problem` found it; GpuUnavailable when none is
    usable (call `require_gpu` first for a message that says what needed it)."""
    if cuda not in _INFO:
        drv = _open_driver(cuda)
        _INFO[cuda] = drv.info
        drv.close()
    return _INFO[cuda]


def require_gpu(what: str, cuda: str = "cuda-bindings", hint: str = EMULATOR_HINT) -> None:
    """Raise GpuUnavailable (`what` needs a GPU, and why there is none) unless one is usable."""
    problem = gpu_problem(cuda)
    if problem is not None:
        raise GpuUnavailable(f"{what} needs an NVIDIA GPU: {problem}", hint)


# --------------------------------------------------------------------------- drivers


@dataclass(frozen=True)
class DeviceInfo:
    """The GPU at hand, for the trace's provenance and for `tuiprof calibrate`."""

    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    clock_mhz: int
    memory_clock_mhz: int
    driver: str
    library: str
    l2_bytes: int = 0
    shared_per_sm: int = 0
    max_threads_per_sm: int = 0
    l2_fetch_granularity: int = 0
    """Bytes the L2 fetches from DRAM on a sector miss at most (``cudaLimitMaxL2FetchGranularity``,
    a hint the driver may round: 0 when not queried). Set through `L2_FETCH_ENV` for experiments."""


L2_FETCH_ENV = "TUIPROF_L2_FETCH_GRANULARITY"
"""Bytes to set ``cudaLimitMaxL2FetchGranularity`` to (0-128) in every context tuiprof opens on a
GPU (`tuiprof validate --l2-fetch-granularity`: accuracy experiments, issue 24); unset leaves the
driver's default."""
JIT_LINEINFO_ENV = "TUIPROF_JIT_LINEINFO"
"""Set to 1: the driver's JIT keeps line information (CU_JIT_GENERATE_LINE_INFO), so that ncu's source
page places each SASS instruction under its source line (`tuiprof validate --per-op`)."""


class Driver(Protocol):
    """The few driver operations the collector needs (cuda-bindings or pycuda)."""

    info: DeviceInfo

    def alloc(self, nbytes: int) -> int: ...
    def free(self, ptr: int) -> None: ...
    def htod(self, ptr: int, data: np.ndarray) -> None: ...
    def dtoh(self, out: np.ndarray, ptr: int) -> None: ...
    def load(self, ptx: str) -> object: ...
    def get_global(self, module: object, name: str) -> tuple[int, int]: ...
    def get_function(self, module: object, name: str) -> object: ...
    def function_attributes(self, fn: object) -> tuple[int, int, int]: ...
    def launch(self, fn: object, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int,
               params: KernelParams) -> float: ...
    def close(self) -> None: ...


def _open_driver(cuda: str) -> Driver:
    if cuda == "cuda-bindings":
        return _CudaBindings()
    if cuda == "pycuda":
        return _Pycuda()
    raise TuiprofError(f"unknown CUDA library {cuda!r}", "use --cuda cuda-bindings or --cuda pycuda")


class _CudaBindings:
    """NVIDIA's cuda-bindings (driver API), imported here and only here."""

    def __init__(self) -> None:
        try:
            from cuda.bindings import driver as drv
        except ImportError:
            raise GpuUnavailable("the cuda-bindings package is not installed",
                                 "pip install 'tuiprof[gpu]'") from None
        self.drv = drv
        try:
            err, = drv.cuInit(0)
        except Exception as exc:  # the driver library itself is missing (no NVIDIA driver)
            why = "libcuda not found" if "NotFound" in type(exc).__name__ else _first_line(exc)
            raise GpuUnavailable(f"no NVIDIA driver on this machine ({why})", EMULATOR_HINT) from None
        if err != drv.CUresult.CUDA_SUCCESS:
            raise GpuUnavailable(f"the NVIDIA driver did not start ({_name(err)})", EMULATOR_HINT)
        count = self._ok(drv.cuDeviceGetCount())
        if count < 1:
            raise GpuUnavailable("the driver sees no CUDA device", EMULATOR_HINT)
        self.dev = self._ok(drv.cuDeviceGet(0))
        self.ctx = self._ok(drv.cuDevicePrimaryCtxRetain(self.dev))
        self._ok(drv.cuCtxSetCurrent(self.ctx))
        fetch_limit = drv.CUlimit.CU_LIMIT_MAX_L2_FETCH_GRANULARITY
        wanted = os.environ.get(L2_FETCH_ENV)
        if wanted:
            self._ok(drv.cuCtxSetLimit(fetch_limit, _fetch_bytes(wanted)))
        A = drv.CUdevice_attribute

        def attr(a: object) -> int:
            return int(self._ok(drv.cuDeviceGetAttribute(a, self.dev)))

        raw_name = self._ok(drv.cuDeviceGetName(256, self.dev))
        version = int(self._ok(drv.cuDriverGetVersion()))
        import cuda.bindings

        self.info = DeviceInfo(
            name=bytes(raw_name).split(b"\0", 1)[0].decode(errors="replace"),
            compute_capability=(attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                                attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)),
            sm_count=attr(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
            clock_mhz=attr(A.CU_DEVICE_ATTRIBUTE_CLOCK_RATE) // 1000,
            memory_clock_mhz=attr(A.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE) // 1000,
            driver=f"{version // 1000}.{version % 1000 // 10}",
            library=f"cuda-bindings {getattr(cuda.bindings, '__version__', '?')}",
            l2_bytes=attr(A.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
            shared_per_sm=attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
            max_threads_per_sm=attr(A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR),
            l2_fetch_granularity=int(self._ok(drv.cuCtxGetLimit(fetch_limit))))
        self._events = (self._ok(drv.cuEventCreate(0)), self._ok(drv.cuEventCreate(0)))

    def _ok(self, res: object) -> object:
        err, *rest = res if isinstance(res, tuple) else (res,)
        if err != self.drv.CUresult.CUDA_SUCCESS:
            raise GpuError(f"CUDA driver call failed: {_name(err)}", _hint_for(_name(err)))
        if not rest:
            return None
        return rest[0] if len(rest) == 1 else tuple(rest)

    def alloc(self, nbytes: int) -> int:
        return int(self._ok(self.drv.cuMemAlloc(max(int(nbytes), 8))))

    def free(self, ptr: int) -> None:
        self.drv.cuMemFree(ptr)

    def htod(self, ptr: int, data: np.ndarray) -> None:
        a = np.ascontiguousarray(data)
        if a.nbytes:
            self._ok(self.drv.cuMemcpyHtoD(ptr, a.ctypes.data, a.nbytes))

    def dtoh(self, out: np.ndarray, ptr: int) -> None:
        if out.nbytes:
            self._ok(self.drv.cuMemcpyDtoH(out.ctypes.data, ptr, out.nbytes))

    def load(self, ptx: str) -> object:
        image = np.frombuffer(ptx.encode() + b"\0", np.uint8)
        if os.environ.get(JIT_LINEINFO_ENV) == "1":  # ncu's source page names source lines (validate --per-op)
            option = self.drv.CUjit_option.CU_JIT_GENERATE_LINE_INFO
            err, module = self.drv.cuModuleLoadDataEx(image.ctypes.data, 1, [option], [1])
        else:
            err, module = self.drv.cuModuleLoadData(image.ctypes.data)
        if err != self.drv.CUresult.CUDA_SUCCESS:
            raise GpuError(f"the driver could not load the PTX ({_name(err)})", _hint_for(_name(err)))
        return module

    def get_global(self, module: object, name: str) -> tuple[int, int]:
        ptr, size = self._ok(self.drv.cuModuleGetGlobal(module, name.encode()))  # type: ignore[misc]
        return int(ptr), int(size)

    def get_function(self, module: object, name: str) -> object:
        return self._ok(self.drv.cuModuleGetFunction(module, name.encode()))

    def function_attributes(self, fn: object) -> tuple[int, int, int]:
        A = self.drv.CUfunction_attribute
        get = self.drv.cuFuncGetAttribute
        return (int(self._ok(get(A.CU_FUNC_ATTRIBUTE_NUM_REGS, fn))),
                int(self._ok(get(A.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn))),
                int(self._ok(get(A.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn))))

    def launch(self, fn: object, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int,
               params: KernelParams) -> float:
        drv = self.drv
        if shared > 48 * 1024:
            self._ok(drv.cuFuncSetAttribute(
                fn, drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared))
        # kernelParams: one pointer per parameter; the driver copies each to its .param offset
        holders = [np.frombuffer(p + b"\0" * (-len(p) % 8), np.uint8).copy() for p in params.values]
        pointers = np.array([h.ctypes.data for h in holders], np.uint64)
        start, end = self._events
        self._ok(drv.cuEventRecord(start, 0))
        self._ok(drv.cuLaunchKernel(fn, *grid, *block, shared, 0, pointers.ctypes.data if params.values else 0, 0))
        self._ok(drv.cuEventRecord(end, 0))
        self._ok(drv.cuEventSynchronize(end))
        return float(self._ok(drv.cuEventElapsedTime(start, end)))  # type: ignore[arg-type]

    def close(self) -> None:
        try:
            for e in getattr(self, "_events", ()):
                self.drv.cuEventDestroy(e)
            self.drv.cuDevicePrimaryCtxRelease(self.dev)
        except Exception:  # the context may already be gone at interpreter exit
            pass


class _Pycuda:
    """pycuda (``--cuda pycuda``), imported here and only here."""

    def __init__(self) -> None:
        try:
            import pycuda.driver as cuda
        except ImportError:
            raise GpuUnavailable("pycuda is not installed", "pip install pycuda, or use --cuda cuda-bindings") from None
        except Exception as exc:
            raise GpuUnavailable(f"pycuda could not start ({_first_line(exc)})", EMULATOR_HINT) from None
        self.cuda = cuda
        try:
            cuda.init()
            if cuda.Device.count() < 1:
                raise GpuUnavailable("the driver sees no CUDA device", EMULATOR_HINT)
            self.dev = cuda.Device(0)
            self.ctx = self.dev.retain_primary_context()
            self.ctx.push()
        except cuda.Error as exc:
            raise GpuUnavailable(f"the NVIDIA driver did not start ({_first_line(exc)})", EMULATOR_HINT) from None
        A = cuda.device_attribute
        cc = self.dev.compute_capability()
        version = cuda.get_driver_version()
        import pycuda

        self.info = DeviceInfo(
            name=self.dev.name(), compute_capability=(int(cc[0]), int(cc[1])),
            sm_count=self.dev.get_attribute(A.MULTIPROCESSOR_COUNT),
            clock_mhz=self.dev.get_attribute(A.CLOCK_RATE) // 1000,
            memory_clock_mhz=self.dev.get_attribute(A.MEMORY_CLOCK_RATE) // 1000,
            driver=f"{version // 1000}.{version % 1000 // 10}",
            library=f"pycuda {getattr(pycuda, 'VERSION_TEXT', '?')}",
            l2_bytes=self.dev.get_attribute(A.L2_CACHE_SIZE),
            shared_per_sm=self.dev.get_attribute(A.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
            max_threads_per_sm=self.dev.get_attribute(A.MAX_THREADS_PER_MULTIPROCESSOR))
        self._allocs: dict[int, object] = {}

    def _guard(self, call: Callable[[], object]) -> object:
        try:
            return call()
        except self.cuda.Error as exc:
            text = _first_line(exc)
            raise GpuError(f"CUDA driver call failed: {text}", _hint_for(text)) from None

    def alloc(self, nbytes: int) -> int:
        a = self._guard(lambda: self.cuda.mem_alloc(max(int(nbytes), 8)))
        self._allocs[int(a)] = a  # type: ignore[call-overload]
        return int(a)  # type: ignore[call-overload]

    def free(self, ptr: int) -> None:
        a = self._allocs.pop(ptr, None)
        if a is not None:
            a.free()  # type: ignore[attr-defined]

    def htod(self, ptr: int, data: np.ndarray) -> None:
        a = np.ascontiguousarray(data)
        if a.nbytes:
            self._guard(lambda: self.cuda.memcpy_htod(ptr, a))

    def dtoh(self, out: np.ndarray, ptr: int) -> None:
        if out.nbytes:
            self._guard(lambda: self.cuda.memcpy_dtoh(out, ptr))

    def load(self, ptx: str) -> object:
        return self._guard(lambda: self.cuda.module_from_buffer(ptx.encode()))

    def get_global(self, module: object, name: str) -> tuple[int, int]:
        ptr, size = self._guard(lambda: module.get_global(name))  # type: ignore[attr-defined, misc]
        return int(ptr), int(size)

    def get_function(self, module: object, name: str) -> object:
        return self._guard(lambda: module.get_function(name))  # type: ignore[attr-defined]

    def function_attributes(self, fn: object) -> tuple[int, int, int]:
        A = self.cuda.function_attribute
        get = fn.get_attribute  # type: ignore[attr-defined]
        return int(get(A.NUM_REGS)), int(get(A.SHARED_SIZE_BYTES)), int(get(A.LOCAL_SIZE_BYTES))

    def launch(self, fn: object, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int,
               params: KernelParams) -> float:
        cuda = self.cuda
        buf = params.buffer()  # pycuda packs a NumPy void as its raw bytes: the .param space as is
        arg = np.void(buf) if buf else None
        if shared > 48 * 1024:
            self._guard(lambda: fn.set_attribute(  # type: ignore[attr-defined]
                cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, shared))
        start, end = cuda.Event(), cuda.Event()
        start.record()
        self._guard(lambda: fn(*([arg] if arg is not None else []), block=block, grid=grid,  # type: ignore[operator]
                               shared=shared))
        end.record()
        end.synchronize()
        return float(start.time_till(end))

    def close(self) -> None:
        try:
            for a in list(self._allocs.values()):
                a.free()  # type: ignore[attr-defined]
            self._allocs.clear()
            self.ctx.pop()
            self.ctx.detach()
        except Exception:
            pass


def _name(err: object) -> str:
    return getattr(err, "name", str(err))


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _hint_for(error: str) -> str:
    if "UNSUPPORTED_PTX_VERSION" in error or "unsupported PTX" in error.lower():
        return ("the PTX comes from a newer CUDA than this driver supports: update the NVIDIA driver, or "
                "compile with an older toolkit (--compiler nvcc with a matching nvcc)")
    if "OUT_OF_MEMORY" in error:
        return "the probe buffers or the script's arrays do not fit in GPU memory; profile a smaller snapshot (--snapshot N)"
    if "NO_BINARY" in error or "INVALID_PTX" in error or "INVALID_IMAGE" in error:
        return "the GPU is older than the PTX target; tuiprof compiles for the GPU it finds, so please report it"
    if "ILLEGAL_ADDRESS" in error or "LAUNCH_FAILED" in error:
        return "the kernel made an invalid memory access; run the same launch in the emulator (--backend emu) to see where"
    return "check that the GPU works (nvidia-smi) and that no other process holds it"


# --------------------------------------------------------------------------- parameters


_PARAM_KINDS = {"f16": "f", "bf16": "u", "f32": "f", "f64": "f"}


@dataclass(frozen=True)
class KernelParams:
    """A launch's parameters: each one's bytes, and where the kernel's ``.param`` space has it."""

    values: tuple[bytes, ...]
    offsets: tuple[int, ...]
    size: int
    """The ``.param`` space's size in bytes."""

    def buffer(self) -> bytes:
        """The whole ``.param`` space, each value at its offset, zeros between."""
        buf = bytearray(self.size)
        for at, raw in zip(self.offsets, self.values):
            buf[at:at + len(raw)] = raw
        return bytes(buf)


def pack_params(fn: Function, args: Sequence[KernelArg], kernel: str) -> KernelParams:
    """The kernel's parameters from a launch script's arguments: a DeviceArray for a pointer (8
    bytes), a NumPy scalar of the parameter's size, a Python int/float converted to the
    parameter's PTX type, bytes or a NumPy void scalar for a struct passed by value; laid out at
    the offsets the PTX ``.param`` declarations give (their ``.align``, not a guess)."""
    params = fn.params
    if len(args) != len(params):
        raise TuiprofError(f"kernel {kernel} takes {len(params)} arguments, the launch script passes {len(args)}",
                           "pass one argument per kernel parameter, in order")
    values = tuple(_param_bytes(p, a, i, kernel) for i, (p, a) in enumerate(zip(params, args)))
    offsets, size = param_layout(params)
    return KernelParams(values, offsets, size)


def _param_bytes(p: Param, a: object, i: int, kernel: str) -> bytes:
    where = f"argument {i + 1} of {kernel} (PTX .{p.type}{'[' + str(p.size_bytes) + ']' if p.dims else ''})"
    if isinstance(a, DeviceArray):
        if p.size_bytes != 8 or p.dims:
            raise TuiprofError(f"{where} is not a pointer, but the launch script passes a device array",
                               "pass a NumPy scalar of the parameter's type")
        return struct.pack("<Q", a.address)
    if isinstance(a, (bytes, bytearray)) or isinstance(a, np.void):
        raw = bytes(a)
    elif isinstance(a, np.generic):
        raw = a.tobytes()
    elif isinstance(a, bool) or not isinstance(a, (int, float)):
        raise TuiprofError(f"{where}: cannot pass a {type(a).__name__}",
                           "pass a device array (dev.to_device(...)) or a NumPy scalar such as np.int32(n)")
    else:
        kind = _PARAM_KINDS.get(p.type, "i")
        if kind == "f":
            raw = np.array(a, {2: np.float16, 4: np.float32, 8: np.float64}[p.size_bytes]).tobytes()
        else:
            if not isinstance(a, int):
                raise TuiprofError(f"{where}: {a!r} is not an integer", "pass an int, or a NumPy scalar")
            lo = -(1 << (8 * p.size_bytes - 1)) if p.type.startswith("s") else 0
            hi = (1 << (8 * p.size_bytes)) - 1
            if not lo <= a <= hi:
                raise TuiprofError(f"{where}: {a} does not fit in {p.size_bytes} bytes", "pass a value in range")
            raw = (a & hi).to_bytes(p.size_bytes, "little")
    if len(raw) != p.size_bytes:
        raise TuiprofError(f"{where} takes {p.size_bytes} bytes, the launch script passes {len(raw)}",
                           "use the NumPy type of the parameter (np.int32, np.float32, np.uint64...)")
    return raw


# --------------------------------------------------------------------------- the device


@dataclass(frozen=True)
class LaunchChoice:
    """Which launch of the script to record: the `index`-th launch (from 0) of `kernel` (a name
    the Program resolves), or of any kernel when `kernel` is None."""

    kernel: str | None = None
    index: int = 0


@dataclass
class RecordedLaunch:
    """What the chosen launch left: its configuration, the snapshot, and the raw probe buffers."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_shared: int
    snapshot: Snapshot
    counts: np.ndarray
    woff: np.ndarray | None = None
    used: np.ndarray | None = None
    words: np.ndarray | None = None
    cta: np.ndarray | None = None
    elapsed_ms: float = 0.0


SnapshotRule = Callable[[Launch], Snapshot]


@dataclass
class _Buffer:
    ptr: int
    shape: tuple[int, ...]
    dtype: np.dtype


class GpuDevice:
    """The Device protocol on a GPU. `mode` is ``"plain"`` (the program's own PTX, nothing
    recorded), ``"count"`` or ``"record"`` (instrumented PTX; the chosen launch counts, or records
    into regions sized by `counts` from the counting pass). Use as a context manager: device
    memory is freed on exit."""

    def __init__(self, program: Program, module: Module, *, mode: str = "plain", choice: LaunchChoice = LaunchChoice(),
                 snapshot_rule: SnapshotRule | None = None, instrumented: Instrumented | None = None,
                 counts: RecordedLaunch | None = None, cuda: str = "cuda-bindings", driver: Driver | None = None) -> None:
        if mode not in ("plain", "count", "record"):
            raise ValueError(mode)
        if mode == "record" and counts is None:
            raise ValueError("the recording pass needs the counting pass's result")
        self.program = program
        self.module = module
        self.mode = mode
        self.choice = choice
        self.snapshot_rule = snapshot_rule
        self.counted = counts
        self._own_driver = driver is None  # closed with the device (pycuda aborts at exit on a context left pushed)
        self.drv: Driver = driver if driver is not None else _open_driver(cuda)
        try:
            self.instrumented = instrumented if mode != "plain" else None
            if mode != "plain" and self.instrumented is None:
                self.instrumented = instrument_for(program, module, self.drv)
            self._module = self.drv.load(self.instrumented.ptx if self.instrumented else program.ptx)
            self._ctl = self.drv.get_global(self._module, CTL_SYMBOL)[0] if self.instrumented else 0
        except BaseException:
            if self._own_driver:
                self.drv.close()
            raise
        self._functions: dict[str, object] = {}
        self._plain_module: object | None = None
        self._buffers: dict[int, _Buffer] = {}
        self._scratch: list[int] = []
        self._launches: dict[str | None, int] = {}
        self.recorded: RecordedLaunch | None = None
        self.times_ms: list[tuple[str, float]] = []
        self._symbols: dict[str, Symbol] | None = None
        self._written: dict[str, tuple[np.dtype, tuple[int, ...]]] = {}

    # ---------------------------------------------------------------- memory

    def _new(self, shape: int | Sequence[int], dtype: object, call: str) -> DeviceArray:
        shp, dt, nbytes = array_layout(shape, dtype, call)
        ptr = self.drv.alloc(nbytes)
        self._buffers[ptr] = _Buffer(ptr, shp, dt)
        return DeviceArray(ptr, shp, dt.str, nbytes)

    def to_device(self, array: np.ndarray) -> DeviceArray:
        a = np.ascontiguousarray(array)
        buf = self._new(a.shape, a.dtype, "dev.to_device")
        self.drv.htod(buf.address, a)
        return buf

    def empty(self, shape: int | Sequence[int], dtype: np.dtype | type | str) -> DeviceArray:
        return self._new(shape, dtype, "dev.empty")

    def zeros(self, shape: int | Sequence[int], dtype: np.dtype | type | str) -> DeviceArray:
        buf = self._new(shape, dtype, "dev.zeros")
        self.drv.htod(buf.address, np.zeros(buf.nbytes, np.uint8))
        return buf

    null = NULL
    """The null pointer, as a kernel argument."""

    def from_device(self, buf: DeviceArray) -> np.ndarray:
        meta = self._buffers.get(buf.address)
        if meta is None and isinstance(buf, DeviceArray) and buf.nbytes >= 0:  # a part of a buffer (buf + k, buf[k:])
            inside = any(b.ptr <= buf.address and buf.address + buf.nbytes <= b.ptr + int(np.prod(b.shape)) * b.dtype.itemsize
                         for b in self._buffers.values())
            meta = _Buffer(buf.address, tuple(buf.shape), np.dtype(buf.dtype)) if inside else None
        if meta is None:
            raise TuiprofError("from_device: that array does not belong to this device",
                               "pass an array returned by to_device, empty or zeros (or a part of one)")
        out = np.empty(meta.shape, meta.dtype)
        if out.nbytes:
            self.drv.dtoh(out, buf.address)
        return out

    # ---------------------------------------------------------------- textures

    def texture(self, data: object, **options: object) -> np.uint64:
        raise TuiprofError("texture objects are emulated only, for now: a launch script that makes one runs in the "
                           "emulator", "profile this kernel with --backend emu")

    surface = texture

    # ---------------------------------------------------------------- variables

    def _symbol(self, name: str) -> Symbol:
        if self._symbols is None:
            self._symbols = module_symbols(self.module)
        return find_variable(self._symbols, name, self.program.source.path, self.program.enums)

    def set_symbol(self, name: str, value: np.ndarray | np.generic, offset: int = 0) -> None:
        """``cudaMemcpyToSymbol``: `value` into the ``__constant__`` or ``__device__`` variable
        `name` from byte `offset` (the driver's cuModuleGetGlobal address of it)."""
        sym = self._symbol(name)
        data = symbol_bytes(sym, value, offset, f"dev.set_symbol({name!r})")
        ptr, _ = self.drv.get_global(self._module, sym.name)
        self.drv.htod(ptr + int(offset), np.frombuffer(data, np.uint8))
        arr = np.asarray(value)
        self._written[sym.name] = (arr.dtype, arr.shape)

    def get_symbol(self, name: str, dtype: np.dtype | type | str | None = None) -> np.ndarray:
        """``cudaMemcpyFromSymbol``: the variable `name` (as `dtype`, else as last written, else
        as its PTX type)."""
        sym = self._symbol(name)
        ptr, _ = self.drv.get_global(self._module, sym.name)
        raw = np.empty(sym.size, np.uint8)
        self.drv.dtoh(raw, ptr)
        return symbol_view(sym, raw, self._written.get(sym.name), dtype)

    # ---------------------------------------------------------------- launches

    def _function(self, symbol: str) -> object:
        fn = self._functions.get(symbol)
        if fn is None:
            fn = self._functions[symbol] = self.drv.get_function(self._module, symbol)
        return fn

    def _is_chosen(self, symbol: str) -> bool:
        """Whether this launch of `symbol` is the chosen one (counting launches as it goes)."""
        want = self.choice.kernel
        if want is not None and self.program.kernel(want).name != symbol:
            return False
        key = symbol if want is not None else None
        n = self._launches.get(key, 0)
        self._launches[key] = n + 1
        return n == self.choice.index

    def launch(self, name: str, grid: Dim, block: Dim, args: Sequence[KernelArg], shared: int = 0) -> None:
        info = self.program.kernel(name)
        fn = self.module.functions[info.name]
        g, b = dim3(grid, "grid"), dim3(block, "block")
        check_launch_bounds(fn, b, name)
        if not isinstance(shared, (int, np.integer)) or shared < 0:
            raise TuiprofError(f"shared={shared!r} is not a byte count", "dynamic shared memory in bytes, e.g. shared=4096")
        params = pack_params(fn, args, info.demangled)
        chosen = self.mode != "plain" and self._is_chosen(info.name)
        if not chosen:
            self.times_ms.append((info.name, self.drv.launch(self._function(info.name), g, b, int(shared), params)))
            return
        self._record_launch(info.name, g, b, int(shared), params)

    def _alloc_scratch(self, words: np.ndarray) -> int:
        ptr = self.drv.alloc(words.nbytes)
        self._scratch.append(ptr)
        self.drv.htod(ptr, words)
        return ptr

    def _record_launch(self, symbol: str, g: tuple[int, int, int], b: tuple[int, int, int], shared: int,
                       params: KernelParams) -> None:
        grid_ctas = g[0] * g[1] * g[2]
        if grid_ctas >= 1 << 32:
            raise TuiprofError(f"a grid of {grid_ctas} CTAs is too large to record", "launch fewer than 2^32 CTAs")
        warps = -(-(b[0] * b[1] * b[2]) // 32)
        launch = self._launch_of(symbol, g, b, shared)
        if self.mode == "count":
            snapshot = self.snapshot_rule(launch) if self.snapshot_rule else Snapshot(
                np.arange(grid_ctas, dtype=np.int64), "the whole grid")
        else:
            assert self.counted is not None
            c = self.counted
            if (c.kernel, c.grid, c.block, c.dynamic_shared) != (symbol, g, b, shared):
                raise TuiprofError("the recording run launched the chosen kernel differently from the counting run "
                                   f"({c.kernel} {c.grid}x{c.block} then {symbol} {g}x{b})",
                                   "the launch script must make the same launches every time it runs")
            snapshot = c.snapshot
        lo = int(snapshot.cta_ids[0]) if snapshot.n_ctas else 0
        hi = lo + snapshot.n_ctas
        if snapshot.n_ctas and not np.array_equal(snapshot.cta_ids, np.arange(lo, hi)):
            raise TuiprofError("the GPU collector records consecutive snapshot CTAs only", "please report it")
        n_w = snapshot.n_ctas * warps
        counters = self._alloc_scratch(np.zeros(max(n_w, 1), np.uint64))
        cta_init = np.zeros((grid_ctas, CTA_WORDS), np.uint64)
        cta_init[:, 0] = U64_MAX
        cta_ptr = self._alloc_scratch(cta_init.reshape(-1))
        ctl = np.zeros(CTL_WORDS, np.uint64)
        ctl[0] = counters if n_w else 0  # an empty snapshot records nothing
        ctl[1] = lo | (hi << 32)
        ctl[4] = cta_ptr
        woff = None
        if self.mode == "record":
            assert self.counted is not None
            woff = np.zeros(n_w + 1, np.uint64)
            np.cumsum(self.counted.counts, out=woff[1:])
            total = int(woff[-1])
            ctl[2] = self._alloc_scratch(woff)
            ctl[3] = self.drv.alloc(8 * max(total, 1))
            self._scratch.append(int(ctl[3]))
        self.drv.htod(self._ctl, ctl)
        try:
            elapsed = self.drv.launch(self._function(symbol), g, b, shared, params)
        finally:
            self.drv.htod(self._ctl, np.zeros(CTL_WORDS, np.uint64))
        used = np.zeros(n_w, np.uint64)
        self.drv.dtoh(used, counters)
        cta = np.zeros(grid_ctas * CTA_WORDS, np.uint64)
        self.drv.dtoh(cta, cta_ptr)
        rec = RecordedLaunch(symbol, g, b, shared, snapshot, used, cta=cta, elapsed_ms=elapsed)
        if self.mode == "record":
            assert woff is not None
            words = np.zeros(int(woff[-1]), np.uint64)
            self.drv.dtoh(words, int(ctl[3]))
            rec.woff, rec.used, rec.words = woff, used, words
            rec.counts = self.counted.counts if self.counted else used
        self.recorded = rec
        self.times_ms.append((symbol, elapsed))

    def _launch_of(self, symbol: str, g: tuple[int, int, int], b: tuple[int, int, int], shared: int) -> Launch:
        return Launch(kernel=symbol, grid=g, block=b, registers_per_thread=self.registers(symbol),
                      static_shared=self.static_shared(symbol), dynamic_shared=shared)

    def registers(self, symbol: str) -> int:
        """Registers per thread of the *uninstrumented* kernel (the program's resources, else the
        driver's figure for the plain PTX)."""
        res = self.program.kernel(symbol).resources
        if res is not None:
            return res.registers_per_thread
        return self._plain_attributes(symbol)[0]

    def static_shared(self, symbol: str) -> int:
        res = self.program.kernel(symbol).resources
        if res is not None:
            return res.static_shared
        return self._plain_attributes(symbol)[1]

    def local_bytes(self, symbol: str) -> int:
        res = self.program.kernel(symbol).resources
        if res is not None:
            return res.local_bytes_per_thread
        return self._plain_attributes(symbol)[2]

    def _plain_attributes(self, symbol: str) -> tuple[int, int, int]:
        if self.instrumented is None:
            return self.drv.function_attributes(self._function(symbol))
        if self._plain_module is None:  # loaded once, not once per question
            self._plain_module = self.drv.load(self.program.ptx)
        return self.drv.function_attributes(self.drv.get_function(self._plain_module, symbol))

    def close(self) -> None:
        for ptr in list(self._buffers) + self._scratch:
            self.drv.free(ptr)
        self._buffers.clear()
        self._scratch.clear()
        if self._own_driver:
            self._own_driver = False
            self.drv.close()

    def __enter__(self) -> GpuDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------- collecting a trace


@dataclass(frozen=True)
class GpuRun:
    """A trace recorded on the GPU, with the two passes' kernel times."""

    trace: Trace
    count_ms: float
    record_ms: float
    info: DeviceInfo
    timings: tuple[tuple[str, float], ...] = field(default_factory=tuple)


def device_arch(info: DeviceInfo) -> Arch:
    """The preset of the device's generation with the device's own warp slots (48 on CC 8.6 and
    8.9, where the preset says 64): what occupancy on this device is computed with."""
    from tuiprof.arch import load_arch
    from tuiprof.arch.calibrate import base_preset

    arch = load_arch(base_preset(info.compute_capability))
    if info.max_threads_per_sm:
        arch = dataclasses.replace(arch, max_threads_per_sm=info.max_threads_per_sm,
                                   max_warps_per_sm=info.max_threads_per_sm // arch.warp_size)
    return arch


def probe_occupancy(info: DeviceInfo, launch: Launch, probe_registers: int) -> dict[str, list[int]]:
    """Registers per thread and resident CTAs per SM of the launch on the device, plain and with
    the probes: the residency under which the per-CTA clocks were measured."""
    from tuiprof.arch.occupancy import occupancy

    arch = device_arch(info)
    threads = launch.block[0] * launch.block[1] * launch.block[2]
    ctas = [occupancy(arch, threads, r, launch.static_shared, launch.dynamic_shared).ctas_per_sm
            for r in (launch.registers_per_thread, probe_registers)]
    return {"registers": [launch.registers_per_thread, probe_registers], "ctas_per_sm": ctas}


def instrument_for(program: Program, module: Module, drv: Driver) -> Instrumented:
    """The program's PTX instrumented for the device: each kernel capped at the registers that
    keep its plain occupancy there (so the per-CTA times the probes measure are those of the
    plain kernel's residency), unless the cap makes the driver's compiler spill."""
    from tuiprof.arch.occupancy import next_register_cap, register_cap
    from tuiprof.ptx.instrument import instrument_capped

    arch = device_arch(drv.info)

    def attributes(ptx: str) -> dict[str, tuple[int, int, int]]:
        loaded = drv.load(ptx)
        return {k: drv.function_attributes(drv.get_function(loaded, k)) for k in module.kernels}

    return instrument_capped(program.ptx, module, plain=attributes(program.ptx),
                             cap=functools.partial(register_cap, arch), next_cap=functools.partial(next_register_cap, arch),
                             compiler=attributes)


def collect_gpu(program: Program, run_script: Callable[[object], None], *, arch_name: str,
                snapshot_rule: SnapshotRule, ctas_per_sm: Callable[[Launch], int],
                choice: LaunchChoice = LaunchChoice(), module: Module | None = None,
                ops: tuple[tuple[str, int, StaticOp], ...] | None = None, cuda: str = "cuda-bindings",
                driver: Driver | None = None) -> GpuRun:
    """Run the launch script (`run_script(device)`) twice on the GPU, counting then recording the
    chosen launch, and build its Trace (provenance ``gpu``, per-CTA SM and times measured)."""
    from tuiprof.ptx import parse_module
    from tuiprof.ptx.ops import op_sources, static_ops

    mod = module if module is not None else parse_module(program.ptx)
    own_driver = driver is None
    drv = driver if driver is not None else _open_driver(cuda)
    try:
        inst = instrument_for(program, mod, drv)
        with GpuDevice(program, mod, mode="count", choice=choice, snapshot_rule=snapshot_rule, instrumented=inst,
                       driver=drv) as dev:
            run_script(dev)
            counted = dev.recorded
        if counted is None:
            raise TuiprofError(_missing_launch(program, choice), "check --kernel and --launch-index against the script")
        with GpuDevice(program, mod, mode="record", choice=choice, instrumented=inst, counts=counted,
                       driver=drv) as dev:
            run_script(dev)
            rec = dev.recorded
            local_bytes = dev.local_bytes(counted.kernel)
            launch = dev._launch_of(counted.kernel, counted.grid, counted.block, counted.dynamic_shared)
            probe_registers = drv.function_attributes(dev._function(counted.kernel))[0]
            timings = tuple(dev.times_ms)
        if rec is None or rec.words is None or rec.woff is None or rec.used is None or rec.cta is None:
            raise TuiprofError("the recording run did not reach the chosen launch",
                               "the launch script must make the same launches every time it runs")
        info = drv.info
    finally:
        if own_driver:
            drv.close()
    launch = Launch(kernel=launch.kernel, grid=launch.grid, block=launch.block,
                    registers_per_thread=launch.registers_per_thread, static_shared=launch.static_shared,
                    dynamic_shared=launch.dynamic_shared, ctas_per_sm=ctas_per_sm(launch))
    headers = {h.path: h.text for h in program.headers}
    table = ops if ops is not None else static_ops(mod, rec.kernel, program.source.path, program.source.text, headers)
    provenance = Provenance(
        backend="gpu", arch=arch_name, gpu=info.name, tool_version=__version__,
        date=datetime.date.today().isoformat(),
        generator={**device_generator(info), "compiler": program.compiler, "target": program.target,
                   "launch_index": choice.index, "count_ms": counted.elapsed_ms, "record_ms": rec.elapsed_ms,
                   "snapshot_words": int(rec.used.sum()),
                   **({"probe_occupancy": probe_occupancy(info, launch, probe_registers)} if probe_registers else {})})
    trace = build_trace(launch=launch, table=table, sites=inst.sites, tag=inst.tag, snapshot=rec.snapshot,
                        words=rec.words, woff=rec.woff, used=rec.used, cta=rec.cta, local_bytes=local_bytes,
                        sources=op_sources(mod, program.source.path, program.source.text, headers,
                                           tuple({o.id: o for _, _, o in table}.values())),
                        provenance=provenance)
    return GpuRun(trace, counted.elapsed_ms, rec.elapsed_ms, info, timings)


def record_kernel_file(source: str | Path, script: Any, *, arch: Any, arch_name: str | None = None,
                       kernel: str | None = None, launch_index: int = 0, snapshot_ctas: int | None = None,
                       snapshot_start: int | None = 0, flags: Sequence[str] = (), compiler: str = "auto",
                       cuda: str = "cuda-bindings", snapshot_warm: int | None = 0) -> GpuRun:
    """`tuiprof KERNEL.cu --launch SCRIPT --backend gpu`: compile the kernel file for the GPU at
    hand, run the launch script (a `tuiprof.collect.script.LaunchScript`) counting then recording
    the chosen launch, and return the trace with the snapshot Baghsorkhi12's rule picks for `arch`
    (an `Arch`; the trace names `arch_name`, default its name). Raises GpuUnavailable without a GPU."""
    from tuiprof.arch.occupancy import occupancy
    from tuiprof.build.compile import load_program
    from tuiprof.ptx import parse_module
    from tuiprof.trace.snapshot import choose_snapshot

    require_gpu(f"recording {Path(source).name} on the GPU", cuda)
    drv = _open_driver(cuda)
    try:
        program = load_program(source, compute_capability=drv.info.compute_capability, flags=flags,
                               compiler=compiler)
        module = parse_module(program.ptx)
        symbol = program.kernel(kernel).name if kernel else None

        def md(launch: Launch) -> int:
            return occupancy(arch, launch.threads_per_cta, launch.registers_per_thread, launch.static_shared,
                             launch.dynamic_shared).ctas_per_sm

        def rule(launch: Launch) -> Snapshot:
            with_md = Launch(kernel=launch.kernel, grid=launch.grid, block=launch.block,
                             registers_per_thread=launch.registers_per_thread, static_shared=launch.static_shared,
                             dynamic_shared=launch.dynamic_shared, ctas_per_sm=md(launch))
            return choose_snapshot(with_md, arch, ctas=snapshot_ctas, start=snapshot_start, warm=snapshot_warm)

        return collect_gpu(program, script.run, arch_name=arch_name or arch.name, snapshot_rule=rule, ctas_per_sm=md,
                           choice=LaunchChoice(symbol, launch_index), module=module, driver=drv)
    finally:
        drv.close()


def device_generator(info: DeviceInfo) -> dict[str, object]:
    """The GPU's facts as a trace's provenance records them."""
    out: dict[str, object] = {
        "device": info.name, "compute_capability": f"{info.compute_capability[0]}.{info.compute_capability[1]}",
        "driver": info.driver, "library": info.library, "sm_clock_mhz": info.clock_mhz,
        "memory_clock_mhz": info.memory_clock_mhz, "sm_count": info.sm_count}
    if info.l2_fetch_granularity:
        out["l2_fetch_granularity"] = info.l2_fetch_granularity
    return out


def _fetch_bytes(text: str) -> int:
    """`L2_FETCH_ENV`'s value: 0 to 128 bytes."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if not 0 <= n <= 128:
        raise TuiprofError(f"{L2_FETCH_ENV}={text!r} is not an L2 fetch granularity",
                           "give 0 to 128 bytes (cudaLimitMaxL2FetchGranularity), e.g. 32, 64 or 128")
    return n


def _missing_launch(program: Program, choice: LaunchChoice) -> str:
    which = f"launch {choice.index} of {choice.kernel}" if choice.kernel else f"launch {choice.index}"
    return f"the launch script never made {which} (kernels in {program.source.path}: " + \
        ", ".join(k.demangled for k in program.kernels) + ")"


__all__ = ["CUDA_LIBRARIES", "DeviceInfo", "GpuDevice", "GpuError", "GpuRun", "GpuUnavailable", "KernelParams", "LaunchChoice",
           "collect_gpu", "gpu_problem", "pack_params", "record_kernel_file", "require_gpu"]
