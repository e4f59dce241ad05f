"""The launch-script API on the CPU, for tests: a demo ``.cu`` compiled by g++ with
``cpu_cuda/prelude.h`` and run by ``cpu_cuda/runtime.cpp`` (one fiber per CUDA thread, CTAs one
after another). It checks kernels, launch scripts and their references against each other
without the emulator; it models no warps, caches or timing, and runs only kernels that need no
warp-synchronous execution (all the demos). Linux x86-64 with g++ only (`available`).
"""

from __future__ import annotations

import ctypes
import hashlib
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1] / "cpu_cuda"
KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)')


def available() -> bool:
    return platform.system() == "Linux" and platform.machine() == "x86_64" and shutil.which("g++") is not None


def _param_types(params: str) -> list[str]:
    """C types of a parameter list: ``const float *a, int n`` -> ``['const float *', 'int']``."""
    types = []
    for p in params.split(","):
        m = re.fullmatch(r"(.*?)\s*(\w+)", " ".join(p.split()))
        assert m, p
        types.append(m.group(1))
    return types


def build(source: Path, out_dir: Path) -> tuple[Path, dict[str, int]]:
    """Compile `source` with a trampoline per kernel; returns the library and each kernel's
    parameter count."""
    text = source.read_text()
    kernels = {name: _param_types(params) for name, params in KERNEL.findall(text)}
    body = re.sub(r"extern\s+__shared__\s+(\w+)\s+(\w+)\[\];", r"\1 *\2 = (\1 *)cpu_cuda_dynamic_shared;", text)
    trampolines = "".join(
        f'extern "C" void cpu_cuda_run_{k}(void **a) {{ {k}('
        + ", ".join(f"*({t} *)a[{i}]" for i, t in enumerate(types)) + "); }\n"
        for k, types in kernels.items())
    code = f'#include "prelude.h"\n#line 1 "{source.name}"\n{body}\n{trampolines}'
    # Named by content: the loader keeps one library per path, so an edited source needs a new name.
    stem = f"{source.stem}-{hashlib.sha1(code.encode()).hexdigest()[:12]}"
    cpp, lib = out_dir / f"{stem}.cpp", out_dir / f"{stem}.so"
    cpp.write_text(code)
    subprocess.run(["g++", "-O2", "-std=c++17", "-fPIC", "-shared", "-w", f"-I{HERE}", "-o", str(lib), str(cpp),
                    str(HERE / "runtime.cpp")], check=True, capture_output=True, text=True)
    return lib, {k: len(t) for k, t in kernels.items()}


@dataclass(frozen=True)
class CpuBuffer:
    array: np.ndarray


def _dim3(v: int | tuple[int, int, int]) -> tuple[int, int, int]:
    if isinstance(v, (int, np.integer)):
        return (int(v), 1, 1)
    assert len(v) == 3
    return (int(v[0]), int(v[1]), int(v[2]))


class CpuDevice:
    """`to_device`, `empty`, `zeros`, `launch`, `from_device` over host arrays; `empty` fills
    its buffer with a 0xA5 byte pattern so a kernel that leaves outputs unwritten is seen."""

    def __init__(self, library: Path, params: dict[str, int]) -> None:
        self.lib = ctypes.CDLL(str(library))
        self.lib.cpu_cuda_launch.restype = ctypes.c_long
        self.params = params
        self.launches: list[str] = []

    def to_device(self, array: np.ndarray) -> CpuBuffer:
        return CpuBuffer(np.array(array, copy=True, order="C"))

    def empty(self, shape: int | tuple[int, ...], dtype: type) -> CpuBuffer:
        n = int(np.prod(shape)) * np.dtype(dtype).itemsize
        return CpuBuffer(np.full(n, 0xA5, np.uint8).view(dtype).reshape(shape))

    def zeros(self, shape: int | tuple[int, ...], dtype: type) -> CpuBuffer:
        return CpuBuffer(np.zeros(shape, dtype))

    def launch(self, name: str, grid: int | tuple[int, int, int], block: int | tuple[int, int, int],
               args: tuple[CpuBuffer | np.generic, ...], shared: int = 0) -> None:
        assert len(args) == self.params[name], f"{name}: {len(args)} arguments for {self.params[name]} parameters"
        argv = (ctypes.c_void_p * len(args))()
        keep: list[object] = []
        for i, a in enumerate(args):
            if isinstance(a, CpuBuffer):
                pointer = ctypes.c_void_p(a.array.ctypes.data)
                keep.append(pointer)
                argv[i] = ctypes.addressof(pointer)
            else:
                assert isinstance(a, np.generic), f"{name}: argument {i} is not a NumPy scalar"
                scalar = np.array(a)
                keep.append(scalar)
                argv[i] = scalar.ctypes.data
        run = ctypes.cast(getattr(self.lib, f"cpu_cuda_run_{name}"), ctypes.c_void_p)
        dims = [ctypes.c_uint(d) for d in _dim3(grid) + _dim3(block)]
        self.lib.cpu_cuda_launch(run, argv, *dims, ctypes.c_size_t(shared))
        self.launches.append(name)

    def from_device(self, buf: CpuBuffer) -> np.ndarray:
        return buf.array.copy()
