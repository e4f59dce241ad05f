"""The GPU wing's driver layer: whether a GPU is usable (`gpu_problem`, `gpu_info`, `require_gpu`),
the `Driver` protocol the device and the calibration run on, and its two backends on NVIDIA's
driver API: cuda-bindings (the default; a dependency of tuiprof on Linux and Windows) and pycuda
(``--cuda pycuda``, when installed).

Nothing here imports a GPU library at module import: `gpu_problem` says, cheaply, why no GPU is
usable (no driver, no device, no library), and every GPU command turns that into one clear
`GpuUnavailable` that points at the emulator (``--backend emu``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from tuiprof.collect.gpu.params import KernelParams
from tuiprof.errors import TuiprofError

EMULATOR_HINT = ("run it in the emulator instead: --backend emu (no GPU needed; the same launch script, "
                 "exact addresses)")


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
