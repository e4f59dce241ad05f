"""The GPU collector's driver interface (`tuiprof.collect.gpu.driver.Driver`) on the emulator's engine:
instrumented PTX decoded and run by the Numba interpreter, device memory in its heap.

With it, the whole GPU path — `GpuDevice`, the counting and recording passes, the probes
themselves, `collect/gpu/records.py` — runs in CI without a GPU, and its trace can be compared
access for access with what the emulator records natively from the uninstrumented PTX
(tests/gpu/test_instrument_emu.py). Nothing here imitates a GPU: every probe instruction executes.
"""

from __future__ import annotations

import numpy as np
import pytest

from tuiprof.collect.emu.decode import DecodedKernel, decode, module_constants
from tuiprof.collect.emu.heap import Heap
from tuiprof.collect.emu.run import DEFAULT_STEP_LIMIT, execute
from tuiprof.collect.gpu.driver import DeviceInfo
from tuiprof.collect.gpu.params import KernelParams
from tuiprof.ptx import parse_module
from tuiprof.ptx.cfg import ipdom
from tuiprof.ptx.module import Function, Module, SourceLoc

CONST_BANK = 0x7E40_0000_0000
"""Where this driver keeps a module's constant bank in device memory (as a GPU backs it), so that
cuModuleGetGlobal of a ``__constant__`` variable gives an address the host can write."""


class _EmuModule:
    def __init__(self, module: Module) -> None:
        self.module = module
        self.programs: dict[str, DecodedKernel] = {}
        self._ipdom: dict[str, list[int]] = {}

    def program(self, kernel: str) -> DecodedKernel:
        if kernel not in self.programs:
            def ipdoms(fn: Function) -> list[int]:
                if fn.name not in self._ipdom:
                    self._ipdom[fn.name] = ipdom(fn)
                return self._ipdom[fn.name]

            # no op ids: the emulator records nothing natively here, the probes do
            self.programs[kernel] = decode(self.module, kernel, ipdoms, {}, 0, _where)
        return self.programs[kernel]


def _where(loc: SourceLoc | None) -> str:
    return f"line {loc.line}" if loc is not None else "no line information"


class EmuDriver:
    """`tuiprof.collect.gpu.driver.Driver` on the emulator: one heap, modules placed in it at load."""

    def __init__(self, n_sms: int = 80, threads: int = 2) -> None:
        self.heap = Heap()
        self._placed: set[int] = set()
        self._globals: list[tuple[int, int, bytes]] = []
        self._live: set[int] = set()
        self.n_sms = n_sms
        self.threads = threads
        self.info = DeviceInfo(name="tuiprof emulator", compute_capability=(8, 0), sm_count=n_sms, clock_mhz=1000,
                               memory_clock_mhz=1000, driver="-", library="tuiprof.collect.emu")

    def alloc(self, nbytes: int) -> int:
        ptr = self.heap.allocate(max(int(nbytes), 8))
        self._live.add(ptr)
        return ptr

    def free(self, ptr: int) -> None:
        """Once every allocation is freed the heap starts afresh (module variables kept), as a
        GPU's allocator hands the same addresses out again: a launch script run twice (the
        counting and the recording pass) sees the same addresses both times."""
        self._live.discard(ptr)
        if not self._live:
            self.heap = Heap()
            for address, size, init in self._globals:
                self.heap.place(address, size, init)

    def htod(self, ptr: int, data: np.ndarray) -> None:
        a = np.ascontiguousarray(data)
        if a.nbytes:
            self.heap.write(ptr, a.view(np.uint8).reshape(-1))

    def dtoh(self, out: np.ndarray, ptr: int) -> None:
        if out.nbytes:
            out.view(np.uint8).reshape(-1)[:] = self.heap.read(ptr, out.nbytes)

    def load(self, ptx: str) -> object:
        m = _EmuModule(parse_module(ptx))
        kernels = list(m.module.kernels)
        if kernels:  # module variables sit at fixed addresses: a module loaded again shares them
            bank = tuple(g.__class__(g.name, CONST_BANK + g.address, max(g.size, 1), g.init)
                         for g in module_constants(m.module))
            for g in m.program(kernels[0]).globals_ + bank:
                if g.address not in self._placed:
                    self._placed.add(g.address)
                    self._globals.append((g.address, g.size, g.init))
                    self.heap.place(g.address, g.size, g.init)
        return m

    def get_global(self, module: object, name: str) -> tuple[int, int]:
        assert isinstance(module, _EmuModule)
        prog = module.program(next(iter(module.module.kernels)))
        g = next((g for g in prog.globals_ if g.name == name), None)
        if g is None:
            c = next(c for c in module_constants(module.module) if c.name == name)
            return CONST_BANK + c.address, c.size
        return g.address, g.size

    def get_function(self, module: object, name: str) -> object:
        assert isinstance(module, _EmuModule)
        return (module, name)

    def function_attributes(self, fn: object) -> tuple[int, int, int]:
        module, name = fn  # type: ignore[misc]
        prog = module.program(name)
        return 0, prog.shared_static, prog.local_size

    def launch(self, fn: object, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int,
               params: KernelParams) -> float:
        module, name = fn  # type: ignore[misc]
        prog = module.program(name)
        buf = params.buffer()  # the .param space as pycuda hands it to the driver
        assert len(buf) == prog.param_size
        execute(prog, self.heap, grid, block, buf, shared, np.zeros(0, np.int64), n_sms=self.n_sms,
                threads=self.threads, step_limit=DEFAULT_STEP_LIMIT, source_name=_where, constants=self.constants(prog))
        return 0.0

    def constants(self, prog: DecodedKernel) -> bytes:
        """The constant bank of `prog`'s module as the host last wrote it."""
        return self.heap.read(CONST_BANK, len(prog.const_image)).tobytes() if prog.const_image else b""

    def close(self) -> None:
        pass


def emulator_as_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the GPU collector see a usable GPU whose driver is a fresh EmuDriver each time it
    opens one: every GPU path runs but the device's."""
    from tuiprof.collect.gpu import driver

    info = EmuDriver().info
    monkeypatch.setattr(driver, "_PROBLEM", {"cuda-bindings": None, "pycuda": None})
    monkeypatch.setattr(driver, "_INFO", {"cuda-bindings": info, "pycuda": info})
    monkeypatch.setattr(driver, "_open_driver", lambda cuda: EmuDriver())
