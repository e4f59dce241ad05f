"""`GpuDevice`: the Device protocol of `tuiprof.collect` on a GPU driver (`tuiprof.collect.gpu.driver`).

It loads the PTX of `tuiprof.ptx.instrument`, and at the chosen launch fills the probes' control
block: a counting pass (the whole launch script, probes only counting each snapshot warp's record
words), then a recording pass (the script again, each warp writing into an exact region). Every CTA
of the grid also leaves its %smid and start/end %globaltimer, so the SM pane says *measured*.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tuiprof.collect import NULL, DeviceArray, Dim, KernelArg, array_layout, check_launch_bounds, dim3
from tuiprof.collect.gpu import driver as gpu_driver
from tuiprof.collect.gpu.driver import Driver
from tuiprof.collect.gpu.occupancy import device_arch
from tuiprof.collect.gpu.params import KernelParams, pack_params
from tuiprof.collect.symbols import Symbol, find_variable, module_symbols, symbol_bytes, symbol_view
from tuiprof.errors import TuiprofError
from tuiprof.ptx.instrument import CTA_WORDS, CTL_SYMBOL, CTL_WORDS, Instrumented
from tuiprof.ptx.module import Module
from tuiprof.toolchain.program import Program
from tuiprof.trace.data import Launch, Snapshot

U64_MAX = np.uint64(0xFFFFFFFFFFFFFFFF)


@dataclass(frozen=True)
class LaunchChoice:
    """Which launch of the script to record: the `index`-th launch (from 0) of `kernel` (a name
    the Program resolves), or of any kernel when `kernel` is None."""

    kernel: str | None = None
    index: int = 0


@dataclass
class ProbeBuffers:
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
                 counts: ProbeBuffers | None = None, cuda: str = "cuda-bindings", driver: Driver | None = None) -> None:
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
        self.drv: Driver = driver if driver is not None else gpu_driver._open_driver(cuda)
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
        self.recorded: ProbeBuffers | None = None
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
        rec = ProbeBuffers(symbol, g, b, shared, snapshot, used, cta=cta, elapsed_ms=elapsed)
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
