"""EmuDevice: the launch-script API (`tuiprof.collect.Device`) on the Numba PTX interpreter.

Every launch runs, so multi-kernel scripts compute what they would on a GPU; the one launch the
caller chose (kernel name and index, `RecordChoice`) is recorded: the warp accesses of its
snapshot CTAs, in program order per warp, and every CTA's dynamic warp-instruction and access
counts. `EmuDevice.recorded` then holds a `RecordedLaunch` with the Trace arrays.

    dev = EmuDevice(module, "kernel.cu", record=RecordChoice("saxpy", snapshot=first_ctas(64)))
    script.run(dev)
    rec = dev.recorded

Pointer arguments are DeviceArrays; scalars are NumPy scalars whose size must be the
parameter's (``np.int32(n)`` for an ``int``); anything else is refused with a clear message.
``printf`` (vprintf) runs as a no-op returning 0: printing is not the profiler's job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np

from tuiprof import units
from tuiprof.collect import NULL, DeviceArray, Dim, KernelArg, array_layout, check_launch_bounds, dim3
from tuiprof.collect.emu.decode import DecodedKernel, ParamSlot, const_image, decode, module_constants, module_globals
from tuiprof.collect.emu.heap import Heap
from tuiprof.collect.emu.run import DEFAULT_STEP_LIMIT, check_grid, execute
from tuiprof.collect.symbols import Symbol, find_variable, module_symbols, symbol_bytes, symbol_view
from tuiprof.errors import TuiprofError
from tuiprof.progress import Phase, Progress, ignore
from tuiprof.ptx.module import Function, Module, SourceLoc
from tuiprof.resources import memory_budget
from tuiprof.trace.data import LANES, CtaRecords, Launch, Space, StaticOp

_RESOLVED_SPACES: tuple[Space, ...] = ("global", "shared", "local")
"""What a generic op resolves to: the space most of its accesses fell in."""

if TYPE_CHECKING:
    from tuiprof.ptx.ops import SourceMap
    from tuiprof.toolchain.names import Enums

MAX_THREADS_PER_CTA = 1024
MAX_SHARED_PER_CTA = 227 << 10
"""The largest shared memory a CTA may have on any supported GPU (sm_90: 227 KiB)."""

SnapshotChooser = Callable[[tuple[int, int, int], tuple[int, int, int], int, "ResourcesLike | None"], np.ndarray]
"""Called with (grid, block, dynamic shared bytes, the kernel's resources) when the recorded
launch starts; returns the linear ids of the snapshot CTAs."""


class ResourcesLike(Protocol):
    """What the device reads of a kernel's resources (`tuiprof.toolchain.program.KernelResources`)."""

    @property
    def registers_per_thread(self) -> int: ...
    @property
    def static_shared(self) -> int: ...


@dataclass(frozen=True)
class RecordChoice:
    """Which launch to record and which of its CTAs form the snapshot."""

    kernel: str | None = None
    """The kernel whose launch is recorded; None = the first kernel launched."""
    launch_index: int = 0
    """Which launch of that kernel (0 = its first)."""
    snapshot: SnapshotChooser | Sequence[int] | None = None
    """The snapshot CTAs (linear ids), or a chooser computing them; None = the whole grid."""


@dataclass(frozen=True)
class RecordedLaunch:
    """The recorded launch: its geometry, op table and the Trace arrays (see trace.data.Trace)."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_shared: int
    static_shared: int
    registers_per_thread: int
    ops: tuple[StaticOp, ...]
    """The kernel's StaticOps; a generic op carries the space its accesses resolved to."""
    cta_ids: np.ndarray
    warp_offsets: np.ndarray
    warp_cta: np.ndarray
    warp_index: np.ndarray
    op: np.ndarray
    mask: np.ndarray
    addr: np.ndarray
    ctas: CtaRecords
    """Dynamic warp instructions and warp accesses of every CTA of the grid (emulated)."""

    def launch_record(self, ctas_per_sm: int = 0) -> Launch:
        """The trace's Launch for this launch."""
        return Launch(kernel=self.kernel, grid=self.grid, block=self.block,
                      registers_per_thread=self.registers_per_thread, static_shared=self.static_shared,
                      dynamic_shared=self.dynamic_shared, ctas_per_sm=ctas_per_sm)


def first_ctas(n: int, start: int = 0) -> SnapshotChooser:
    """A chooser for `n` consecutive CTAs from `start`, capped by the grid."""
    def choose(grid: tuple[int, int, int], block: tuple[int, int, int], dynamic_shared: int,
               resources: ResourcesLike | None) -> np.ndarray:
        total = grid[0] * grid[1] * grid[2]
        return np.arange(min(start, total), min(start + n, total), dtype=np.int64)
    return choose


class EmuDevice:
    """The launch-script Device on the emulator (see the module docstring)."""

    null = NULL
    """The null pointer, as a kernel argument."""

    def __init__(self, module: Module, source_name: str, source_text: str | None = None, *,
                 resources: Mapping[str, ResourcesLike | None] | None = None, record: RecordChoice | None = None,
                 n_sms: int = 80, threads: int = 2, step_limit: int = DEFAULT_STEP_LIMIT,
                 progress: Progress = ignore, headers: Mapping[str, str] | None = None) -> None:
        self.module = module
        self.progress = progress
        """Hears each launch as it starts and its CTAs as they are run."""
        self.source_name = source_name
        self.source_text = source_text
        self.headers = dict(headers or {})
        """The texts of the source's local headers by path (kernels and device functions there)."""
        self._names: dict[str, str] = {}
        self._smap: SourceMap | None = None
        self._enum_table: Enums | None = None
        self.resources = dict(resources or {})
        self.record = record if record is not None else RecordChoice()
        self.n_sms = max(int(n_sms), 1)
        self.sm_spread = 0
        """The SMs the recorded launch's snapshot runs on (its ``%smid`` values; 0: all of them): set by
        the snapshot chooser, which knows the launch's occupancy (`tuiprof.arch.occupancy.snapshot_spread`)."""
        self.families: frozenset[int] | None = None
        """The interpreter variant every launch runs on (`interp.VARIANTS`: `tuiprof warmup` compiles
        each); None: the smallest that runs the kernel."""
        self.threads = max(int(threads), 1)
        self.step_limit = int(step_limit)
        self.heap = Heap()
        self._programs: dict[str, tuple[DecodedKernel, tuple[StaticOp, ...]]] = {}
        self._launch_counts: dict[str, int] = {}
        self.launches: list[tuple[str, tuple[int, int, int], tuple[int, int, int]]] = []
        """Every launch made so far: (kernel, grid, block)."""
        self.recorded: RecordedLaunch | None = None
        self.thread_instructions = 0
        """Thread instructions executed by every launch so far (for throughput figures)."""
        if self.record.kernel is not None:
            self.kernel_name(self.record.kernel)
        self._globals = {g.name: g for g in module_globals(module)}
        for g in self._globals.values():
            self.heap.place(g.address, g.size, g.init)
        self._constants = {c.name: c for c in module_constants(module)}
        self.constants = bytearray(const_image(tuple(self._constants.values())))
        """The constant bank as the launch script set it (``dev.set_symbol``)."""
        self._symbols: dict[str, Symbol] | None = None
        self._written: dict[str, tuple[np.dtype, tuple[int, ...]]] = {}

    # ------------------------------------------------------------------ memory
    def _alloc(self, shape: int | Sequence[int], dtype: np.dtype | type | str, call: str) -> DeviceArray:
        shp, dt, nbytes = array_layout(shape, dtype, call)
        budget = memory_budget()
        if self.heap.top + nbytes > budget.bytes:
            used = f" ({units.size(self.heap.top)} of it already allocated)" if self.heap.top >= 1 << 20 else ""
            raise TuiprofError(f"{call}: an array of shape {shp} and dtype {dt} is {units.size(nbytes)}; the emulator "
                               f"keeps device memory in this machine's memory, at most {units.size(budget.bytes)}, "
                               f"half {budget.of} (a tuiprof limit){used}",
                               "allocate smaller arrays in the launch script (a snapshot needs a few hundred CTAs' "
                               "data), or run it on a GPU (--backend gpu)")
        address = self.heap.allocate(nbytes)
        return DeviceArray(address, shp, dt.str, nbytes)

    def to_device(self, array: np.ndarray) -> DeviceArray:
        """A new device buffer holding a copy of `array`."""
        if not isinstance(array, np.ndarray):
            raise TuiprofError(f"to_device takes a NumPy array, not {type(array).__name__}",
                               "for example dev.to_device(np.arange(n, dtype=np.float32))")
        a = np.ascontiguousarray(array)
        buf = self._alloc(a.shape, a.dtype, "dev.to_device")
        if a.nbytes:
            self.heap.write(buf.address, a.view(np.uint8).reshape(-1))
        return buf

    def empty(self, shape: int | Sequence[int], dtype: np.dtype | type | str) -> DeviceArray:
        """A new device buffer (zero-filled here; its contents are unspecified on a GPU)."""
        return self._alloc(shape, dtype, "dev.empty")

    def zeros(self, shape: int | Sequence[int], dtype: np.dtype | type | str) -> DeviceArray:
        """A new zero-filled device buffer."""
        return self._alloc(shape, dtype, "dev.zeros")

    def from_device(self, buf: DeviceArray) -> np.ndarray:
        """A host copy of `buf` with its shape and dtype."""
        if not isinstance(buf, DeviceArray):
            raise TuiprofError(f"from_device takes a device array, not {type(buf).__name__}",
                               "pass what to_device, empty or zeros returned")
        try:
            raw = self.heap.read(buf.address, buf.nbytes) if buf.nbytes else np.zeros(0, np.uint8)
        except KeyError:
            raise TuiprofError("from_device: that array is not in this device's memory",
                               "pass an array returned by to_device, empty or zeros (or a part of one)") from None
        return raw.view(np.dtype(buf.dtype)).reshape(buf.shape)

    # ------------------------------------------------------------------ variables
    def _symbol(self, name: str) -> Symbol:
        if self._symbols is None:
            self._symbols = module_symbols(self.module)
        return find_variable(self._symbols, name, self.source_name or "the module", self._enums())

    def set_symbol(self, name: str, value: np.ndarray | np.generic, offset: int = 0) -> None:
        """Write `value` into the ``__constant__`` or ``__device__`` variable `name` from byte
        `offset` (``cudaMemcpyToSymbol``)."""
        sym = self._symbol(name)
        data = symbol_bytes(sym, value, offset, f"dev.set_symbol({name!r})")
        if sym.space == "const":
            at = self._constants[sym.name].address + int(offset)
            self.constants[at:at + len(data)] = data
        else:
            self.heap.write(self._globals[sym.name].address + int(offset), np.frombuffer(data, np.uint8))
        arr = np.asarray(value)
        self._written[sym.name] = (arr.dtype, arr.shape)

    def get_symbol(self, name: str, dtype: np.dtype | type | str | None = None) -> np.ndarray:
        """The value of the ``__constant__`` or ``__device__`` variable `name` (``cudaMemcpyFromSymbol``):
        as `dtype` when given, else as last written by the script, else as the PTX declares it."""
        sym = self._symbol(name)
        if sym.space == "const":
            at = self._constants[sym.name].address
            raw = np.frombuffer(bytes(self.constants[at:at + sym.size]), np.uint8)
        else:
            raw = self.heap.read(self._globals[sym.name].address, sym.size)
        return symbol_view(sym, np.ascontiguousarray(raw), self._written.get(sym.name), dtype)

    # ------------------------------------------------------------------ textures and surfaces
    def texture(self, data: np.ndarray | DeviceArray, *, filter: str = "point", address_mode: str | tuple[str, ...] = "clamp",
                normalized: bool = False, read_mode: str = "element", channels: int = 1) -> np.uint64:
        """A texture object over a copy of `data` (a NumPy array, or a device buffer it reads in
        place), sampled as the options say (`tuiprof.collect.textures`): the value to pass for a
        ``cudaTextureObject_t`` parameter."""
        return self._texture_object(data, dict(filter=filter, address_mode=address_mode, normalized=normalized,
                                               read_mode=read_mode, channels=channels), surface=False)

    def surface(self, buf: DeviceArray, *, channels: int = 1) -> np.uint64:
        """A surface object over device buffer `buf` (read and written in place, ``from_device(buf)``
        reads it back): the value to pass for a ``cudaSurfaceObject_t`` parameter."""
        if not isinstance(buf, DeviceArray):
            raise TuiprofError("dev.surface takes a device buffer", "make one with dev.to_device(array) or dev.zeros")
        return self._texture_object(buf, {"channels": channels}, surface=True)

    def _texture_object(self, data: object, options: dict[str, object], surface: bool) -> np.uint64:
        from tuiprof.collect.textures import descriptor_words, texture_layout

        if isinstance(data, DeviceArray):
            buf = data
        elif isinstance(data, np.ndarray):
            buf = self.to_device(data)
        else:
            raise TuiprofError(f"dev.texture takes a NumPy array or a device buffer, not {type(data).__name__}",
                               "for example dev.texture(np.zeros((64, 64), np.float32))")
        layout = texture_layout(tuple(buf.shape), np.dtype(buf.dtype), surface=surface, **options)  # type: ignore[arg-type]
        words = descriptor_words(layout, buf.address)
        handle = self._alloc(words.shape, words.dtype, "dev.texture")
        self.heap.write(handle.address, words.view(np.uint8))
        return np.uint64(handle.address)

    # ------------------------------------------------------------------ kernels
    def _loc_text(self, loc: SourceLoc | None) -> str:
        if loc is None:
            return f"{self.source_name or 'the kernel'}: no line information"
        from tuiprof.ptx.ops import resolve_loc, source_map
        if self._smap is None:
            self._smap = source_map(self.module, self.source_name, self.source_text or "", self.headers)
        r = resolve_loc(loc, self._smap.names)
        return f"{self._smap.name_of(self.module, r.file) or '?'}:{r.line}"

    def kernel_name(self, name: str) -> str:
        """The PTX entry `name` refers to: itself, its demangled signature, or the C++ name as
        written (``axpy<float, 4>``, ``ns::kern``; `tuiprof.toolchain.names.find_symbol`)."""
        from tuiprof.toolchain.names import find_symbol

        if name not in self._names:
            self._names[name] = find_symbol(name, tuple(self.module.kernels), where=self.source_name or "the module",
                                            enums=self._enums())
        return self._names[name]

    def _enums(self) -> Enums:
        from tuiprof.toolchain.names import source_enums

        if self._enum_table is None:
            self._enum_table = source_enums([t for t in (self.source_text, *self.headers.values()) if t])
        return self._enum_table

    def _program(self, kernel: str) -> tuple[DecodedKernel, tuple[StaticOp, ...]]:
        if kernel not in self._programs:
            from tuiprof.ptx.cfg import ipdom
            from tuiprof.ptx.ops import static_ops

            table = static_ops(self.module, kernel, self.source_name, self.source_text, self.headers)
            ids: dict[tuple[str, int], int | tuple[int, int]] = {}
            ops: dict[int, StaticOp] = {}
            for fname, index, sop in table:
                ops[sop.id] = sop
                key = (fname, index)
                if key in ids:   # cp.async: the load's id, then the store's
                    first = ids[key]
                    ids[key] = (first if isinstance(first, int) else first[0], sop.id)
                else:
                    ids[key] = sop.id
            cache: dict[str, list[int]] = {}

            def ipdoms(fn: Function) -> list[int]:
                if fn.name not in cache:
                    cache[fn.name] = ipdom(fn)
                return cache[fn.name]

            prog = decode(self.module, kernel, ipdoms, ids, len(ops), self._loc_text)
            self._programs[kernel] = (prog, tuple(ops[i] for i in range(len(ops))))
        return self._programs[kernel]

    def _params(self, prog: DecodedKernel, args: Sequence[KernelArg]) -> bytes:
        params = prog.params
        if isinstance(args, (DeviceArray, np.generic)) or not isinstance(args, (tuple, list)):
            raise TuiprofError(f"launch args of {prog.kernel} must be a tuple or list, not {type(args).__name__}",
                               "for example args=(out, inp, np.int32(n))")
        if len(args) != len(params):
            raise TuiprofError(f"{prog.kernel} takes {len(params)} parameters, the launch passes {len(args)}",
                               "parameters: " + ", ".join(f"{p.name} (.{p.type}, {p.size} bytes)" for p in params))
        buf = bytearray(prog.param_size)
        for k, (p, a) in enumerate(zip(params, args)):
            buf[p.offset:p.offset + p.size] = self._param_bytes(prog, k, p, a)
        return bytes(buf)

    def _param_bytes(self, prog: DecodedKernel, k: int, p: ParamSlot, a: KernelArg) -> bytes:
        where = f"argument {k} of {prog.kernel} ({p.name}, .{p.type}, {p.size} bytes)"
        if isinstance(a, DeviceArray):
            if p.size != 8 or p.type not in ("u64", "b64", "s64"):
                raise TuiprofError(f"{where} is not a pointer, but the launch passes a device array",
                                   "pass a NumPy scalar of the parameter's type")
            return int(a.address).to_bytes(8, "little")
        if isinstance(a, np.ndarray) and a.ndim == 0:
            a = a[()]
        if isinstance(a, np.ndarray):
            raise TuiprofError(f"{where}: the launch passes a host array",
                               "copy it to the device first: dev.to_device(array)")
        if not isinstance(a, np.generic):
            hint = "np.float32(x)" if isinstance(a, float) else "np.int32(n)"
            raise TuiprofError(f"{where}: the launch passes a Python {type(a).__name__}, whose size is ambiguous",
                               f"pass a NumPy scalar of the parameter's size, e.g. {hint}")
        raw = np.asarray(a).tobytes()
        if len(raw) != p.size:
            raise TuiprofError(f"{where}: the launch passes a {np.asarray(a).dtype} ({len(raw)} bytes)",
                               f"pass a {p.size}-byte NumPy scalar")
        kind = np.asarray(a).dtype.kind
        if p.type.startswith("f") and kind not in "f":
            raise TuiprofError(f"{where}: the launch passes an integer ({np.asarray(a).dtype}) for a float parameter",
                               f"pass np.float{8 * p.size}(value)")
        if p.type[:1] in ("u", "s") and kind not in "iub":
            raise TuiprofError(f"{where}: the launch passes a {np.asarray(a).dtype} for an integer parameter",
                               f"pass np.int{8 * p.size}(value) or np.uint{8 * p.size}(value)")
        if p.size == 8 and p.type in ("u64", "b64", "s64") and p.is_pointer and kind in "iu":
            raise TuiprofError(f"{where} is a pointer, but the launch passes an integer",
                               "pass a device array (dev.to_device / dev.empty / dev.zeros)")
        return raw

    def launch(self, name: str, grid: Dim, block: Dim, args: Sequence[KernelArg], shared: int = 0) -> None:
        """Run kernel `name` on `grid` x `block` threads with `shared` bytes of dynamic shared
        memory; record it if it is the chosen launch."""
        kernel = self.kernel_name(name)
        g = dim3(grid, "grid")
        b = dim3(block, "block")
        threads = b[0] * b[1] * b[2]
        if threads > MAX_THREADS_PER_CTA:
            raise TuiprofError(f"block {b} has {threads} threads; a CTA holds at most {MAX_THREADS_PER_CTA}",
                               "use a smaller block")
        if b[2] > 64 or g[1] > 65535 or g[2] > 65535 or g[0] > 2**31 - 1:
            raise TuiprofError(f"grid {g} / block {b} exceed CUDA's limits",
                               "grid y and z are at most 65535, block z at most 64")
        check_grid(name, g)   # before anything sized by the grid (a snapshot of the whole grid)
        check_launch_bounds(self.module.functions[kernel], b, name)
        try:
            dyn = int(shared)
        except (TypeError, ValueError):
            raise TuiprofError(f"shared={shared!r} is not a byte count", "pass an int, e.g. shared=4096") from None
        if dyn < 0:
            raise TuiprofError(f"shared={dyn} is negative", "pass the dynamic shared memory in bytes")
        prog, ops = self._program(kernel)
        total_shared = (prog.dynamic_shared_offset + dyn) if dyn else prog.shared_static
        if total_shared > MAX_SHARED_PER_CTA:
            raise TuiprofError(f"{kernel} needs {total_shared} bytes of shared memory per CTA",
                               f"a CTA has at most {MAX_SHARED_PER_CTA} bytes")
        params = self._params(prog, args)
        index = self._launch_counts.get(kernel, 0)
        self._launch_counts[kernel] = index + 1
        self.launches.append((kernel, g, b))
        want = self.record.kernel
        chosen = (self.recorded is None and index == self.record.launch_index
                  and (want is None or self.kernel_name(want) == kernel))
        n_ctas = g[0] * g[1] * g[2]
        snapshot = np.zeros(0, np.int64)
        res = self.resources.get(kernel)
        if chosen:
            snapshot = self._snapshot(g, b, dyn, res, n_ctas)
        recorded = ", the recorded one" if chosen else ""
        from tuiprof.toolchain.demangle import display_name

        what = f"emulating launch {len(self.launches)} ({display_name(kernel)}{recorded})"
        self.progress(Phase(what, 0, n_ctas, "CTAs"))
        result = execute(prog, self.heap, g, b, params, dyn, snapshot, n_sms=self.n_sms,
                         sm_spread=self.sm_spread if chosen else 0, threads=self.threads,
                         step_limit=self.step_limit, source_name=self._loc_text, per_cta=chosen,
                         on_ctas=lambda done: self.progress(Phase(what, done, n_ctas, "CTAs")),
                         constants=bytes(self.constants), families=self.families)
        self.thread_instructions += result.thread_insts
        if chosen:
            self.recorded = self._recording(kernel, g, b, dyn, prog, ops, res, snapshot, result)

    def _snapshot(self, grid: tuple[int, int, int], block: tuple[int, int, int], dyn: int,
                  res: ResourcesLike | None, n_ctas: int) -> np.ndarray:
        choice = self.record.snapshot
        if choice is None:
            ids = np.arange(n_ctas, dtype=np.int64)
        elif callable(choice):
            ids = np.asarray(choice(grid, block, dyn, res), dtype=np.int64).reshape(-1)
        else:
            ids = np.asarray(list(choice), dtype=np.int64).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= n_ctas):
            raise TuiprofError(f"snapshot CTAs {ids.min()}..{ids.max()} are outside the grid of {n_ctas} CTAs",
                               "choose CTAs 0 .. grid size - 1")
        if np.unique(ids).size != ids.size:
            raise TuiprofError("the snapshot names a CTA twice", "give each CTA once")
        return ids

    def _recording(self, kernel: str, grid: tuple[int, int, int], block: tuple[int, int, int], dyn: int,
                   prog: DecodedKernel, ops: tuple[StaticOp, ...], res: ResourcesLike | None, snapshot: np.ndarray,
                   result) -> RecordedLaunch:
        threads = block[0] * block[1] * block[2]
        wpc = -(-threads // LANES)
        n_warps = snapshot.shape[0] * wpc
        counts = np.bincount(result.key, minlength=n_warps)[:n_warps] if n_warps else np.zeros(0, np.int64)
        offsets = np.zeros(n_warps + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        local = np.arange(n_warps, dtype=np.int64)
        resolved = []
        for o in ops:
            seen = result.op_space[o.id] if o.id < result.op_space.shape[0] else np.zeros(3, np.int64)
            if seen.sum() and o.space in ("global", "shared", "local"):
                space: Space = _RESOLVED_SPACES[int(np.argmax(seen))]
                resolved.append(replace(o, space=space) if space != o.space else o)
            else:
                resolved.append(o)
        return RecordedLaunch(
            kernel=kernel, grid=grid, block=block, dynamic_shared=dyn,
            static_shared=getattr(res, "static_shared", prog.shared_static) if res is not None else prog.shared_static,
            registers_per_thread=int(getattr(res, "registers_per_thread", 0)) if res is not None else 0,
            ops=tuple(resolved), cta_ids=snapshot.astype(np.int64),
            warp_offsets=offsets, warp_cta=(local // wpc).astype(np.int32), warp_index=(local % wpc).astype(np.int32),
            op=result.op.astype(np.int32), mask=result.mask.astype(np.uint32), addr=result.addr.astype(np.uint64),
            ctas=CtaRecords(insts=result.insts, accesses=result.accesses))


__all__ = ["EmuDevice", "RecordChoice", "RecordedLaunch", "SnapshotChooser", "first_ctas"]
