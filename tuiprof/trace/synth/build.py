"""The shared parts of the synthetic models: array placement, lane addresses and masks, loops,
warps of CTAs, the sinks a model writes its accesses to, and the `Kernel` base (source, static
ops, launch resources)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from typing import Protocol, cast

import numpy as np

from tuiprof.resources import data_dir
from tuiprof.trace.data import LANES, OpKind, Space, StaticOp

ARRAY_BASE = 0x7F00_0000_0000
"""Where the first global array starts (a typical cudaMalloc address on Linux x86-64)."""
ARRAY_ALIGN = 2 << 20
"""Global arrays start on 2 MiB boundaries (cudaMalloc aligns to at least 256 B)."""
PAPER_WAVES = 4.0
"""Baghsorkhi12 sec. 3.1 / 5.3: the snapshot is 4 x the threads running at once on all SMs."""

AddrFn = Callable[[], np.ndarray]
"""Lazily computed lane addresses ([n, 32] integers; inactive lanes may hold anything)."""


# ---------------------------------------------------------------------------------------------
# Address and lane helpers

def allocate(sizes: dict[str, int], start: int = ARRAY_BASE) -> dict[str, int]:
    """cudaMalloc-like base addresses for arrays of the given byte sizes, in order."""
    bases: dict[str, int] = {}
    at = start
    for name, size in sizes.items():
        bases[name] = at
        at = -(-(at + size + ARRAY_ALIGN) // ARRAY_ALIGN) * ARRAY_ALIGN
    return bases


def lane_addr(base: int, index: np.ndarray, elem_bytes: int) -> np.ndarray:
    """``base + elem_bytes * index`` lane by lane, as int64."""
    return np.int64(base) + np.int64(elem_bytes) * index.astype(np.int64)


def mask_bits(active: np.ndarray) -> np.ndarray:
    """Active-lane bool [n, 32] -> uint32 masks (bit i = lane i)."""
    packed = np.packbits(active, axis=1, bitorder="little")
    return np.ascontiguousarray(packed).view("<u4")[:, 0].astype(np.uint32)


def loop(trips: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dynamic iterations of a loop whose lane i of warp w runs ``trips[w, i]`` times.

    A warp runs the body while any lane still iterates (SIMT), so it runs it ``trips[w].max()``
    times, iteration k active in the lanes with ``trips > k``. Returns ``(warp [n], k [n],
    active [n, 32])`` for every dynamic iteration, warp-major.
    """
    per_warp = trips.max(axis=1) if trips.size else np.zeros(trips.shape[0], np.int64)
    per_warp = per_warp.astype(np.int64)
    warp = np.repeat(np.arange(per_warp.shape[0], dtype=np.int64), per_warp)
    start = np.cumsum(per_warp) - per_warp
    k = np.arange(warp.shape[0], dtype=np.int64) - np.repeat(start, per_warp)
    active = trips[warp] > k[:, None]
    return warp, k, active


def seq_key(phase: int, it: np.ndarray | int = 0, slot: int = 0) -> np.ndarray | int:
    """Order key of an access within its warp: program phase, then loop iteration, then slot."""
    return (phase << 40) + it * 4096 + slot


@dataclass(frozen=True)
class Warps:
    """The warps of some CTAs with per-lane thread coordinates ([W, 32]) and per-warp CTA
    coordinates ([W, 1]); warps are numbered CTA by CTA, ``warps_per_cta`` each."""

    cta: np.ndarray
    tid: np.ndarray
    tx: np.ndarray
    ty: np.ndarray
    tz: np.ndarray
    bx: np.ndarray
    by: np.ndarray
    bz: np.ndarray
    exists: np.ndarray
    """Lane holds a thread (false past the end of a CTA whose size is not a multiple of 32)."""
    warps_per_cta: int

    @property
    def n(self) -> int:
        return int(self.tid.shape[0])

    @property
    def index(self) -> np.ndarray:
        """Warp numbers 0..n-1, int64."""
        return np.arange(self.n, dtype=np.int64)


def cta_warps(grid: tuple[int, int, int], block: tuple[int, int, int], cta_ids: np.ndarray) -> Warps:
    """Thread and CTA coordinates of every lane of the CTAs `cta_ids` (linear ids, x fastest)."""
    threads = block[0] * block[1] * block[2]
    wpc = -(-threads // LANES)
    cta = np.repeat(np.asarray(cta_ids, dtype=np.int64), wpc)[:, None]
    tid = (np.arange(wpc * LANES, dtype=np.int64).reshape(wpc, LANES)[None, :, :]
           .repeat(len(cta_ids), axis=0).reshape(-1, LANES))
    return Warps(cta=cta, tid=tid,
                 tx=tid % block[0], ty=tid // block[0] % block[1], tz=tid // (block[0] * block[1]),
                 bx=cta % grid[0], by=cta // grid[0] % grid[1], bz=cta // (grid[0] * grid[1]),
                 exists=tid < threads, warps_per_cta=wpc)


# ---------------------------------------------------------------------------------------------
# Sinks: where a model's accesses go (a trace for the snapshot, per-CTA counts for the grid)

class Sink(Protocol):
    def access(self, op: int, warp: np.ndarray, key: np.ndarray | int, active: np.ndarray,
               addr: AddrFn) -> None:
        """Warp ``warp[i]`` executes op `op` with lanes ``active[i]`` at ``addr()[i]``."""

    def insts(self, warp: np.ndarray, count: np.ndarray | int) -> None:
        """Warp ``warp[i]`` executes ``count[i]`` more warp instructions."""


@dataclass
class _Piece:
    op: int
    warp: np.ndarray
    key: np.ndarray
    active: np.ndarray
    addr: AddrFn


def _rows(addr: AddrFn, keep: np.ndarray) -> np.ndarray:
    return addr()[keep]


class TraceSink:
    """Collects accesses, then lays them out warp by warp in program order (by key)."""

    def __init__(self, n_warps: int) -> None:
        self.n_warps = n_warps
        self._pieces: list[_Piece] = []

    def access(self, op: int, warp: np.ndarray, key: np.ndarray | int, active: np.ndarray,
               addr: AddrFn) -> None:
        keys = np.broadcast_to(np.asarray(key, dtype=np.int64), warp.shape)
        keep = cast("np.ndarray", active.any(axis=1))
        if not keep.all():  # a warp whose lanes all skip the access records nothing
            warp, keys, active = warp[keep], keys[keep], active[keep]
            addr = partial(_rows, addr, keep)
        if warp.shape[0]:
            self._pieces.append(_Piece(op, warp, keys, active, addr))

    def insts(self, warp: np.ndarray, count: np.ndarray | int) -> None:
        pass

    def build(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(warp_offsets, op, mask, addr) in the layout of `Trace`."""
        pieces, self._pieces = self._pieces, []
        warp = np.concatenate([p.warp for p in pieces]) if pieces else np.zeros(0, np.int64)
        key = np.concatenate([p.key for p in pieces]) if pieces else np.zeros(0, np.int64)
        n = warp.shape[0]
        order = np.lexsort((key, warp))
        sw, sk = warp[order], key[order]
        if n > 1 and np.any((sw[1:] == sw[:-1]) & (sk[1:] == sk[:-1])):
            raise RuntimeError("synthetic model emitted two accesses with the same order key")
        dest = np.empty(n, dtype=np.int64)
        dest[order] = np.arange(n, dtype=np.int64)
        op = np.empty(n, dtype=np.int32)
        mask = np.empty(n, dtype=np.uint32)
        addr = np.zeros((n, LANES), dtype=np.uint64)
        at = 0
        for p in pieces:
            d = dest[at:at + p.warp.shape[0]]
            at += p.warp.shape[0]
            op[d] = p.op
            mask[d] = mask_bits(p.active)
            addr[d] = np.where(p.active, p.addr(), 0).astype(np.uint64)
        offsets = np.zeros(self.n_warps + 1, dtype=np.int64)
        np.cumsum(np.bincount(warp, minlength=self.n_warps), out=offsets[1:])
        return offsets, op, mask, addr


class CountSink:
    """Per-CTA warp accesses and warp instructions; addresses are never computed."""

    def __init__(self, n_ctas: int, warps_per_cta: int) -> None:
        self.cta_accesses = np.zeros(n_ctas, dtype=np.int64)
        self.cta_insts = np.zeros(n_ctas, dtype=np.int64)
        self._wpc = warps_per_cta
        self._first = 0
        self._n = n_ctas

    def chunk(self, first_cta: int, n_ctas: int) -> None:
        """The next warps passed in belong to CTAs ``first_cta ..`` (warp 0 = its warp 0)."""
        self._first, self._n = first_cta, n_ctas

    def access(self, op: int, warp: np.ndarray, key: np.ndarray | int, active: np.ndarray,
               addr: AddrFn) -> None:
        cta = warp[active.any(axis=1)] // self._wpc
        self.cta_accesses[self._first:self._first + self._n] += np.bincount(cta, minlength=self._n)

    def insts(self, warp: np.ndarray, count: np.ndarray | int) -> None:
        weights = np.broadcast_to(np.asarray(count, dtype=np.float64), warp.shape)
        per = np.bincount(warp // self._wpc, weights=weights, minlength=self._n)
        self.cta_insts[self._first:self._first + self._n] += np.rint(per).astype(np.int64)


# ---------------------------------------------------------------------------------------------
# Kernels: source files, static ops, launch resources

@cache
def kernel_source(name: str) -> str:
    """The text of ``demo_traces/<name>``."""
    return (data_dir("demo_traces") / name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class OpSpec:
    """A memory instruction found in a kernel's source by its accessed expression."""

    label: str
    kind: str = "load"
    space: str = "global"
    bytes: int = 4
    starts: bool = False
    occurrence: int = 0
    """Which line containing `label` within the kernel (0 = first)."""


def locate(source: str, kernel: str, label: str, occurrence: int = 0) -> tuple[int, int]:
    """1-based (line, column) of the `occurrence`-th line of `kernel`'s body containing `label`."""
    lines = source.splitlines()
    start = next(i for i, s in enumerate(lines) if f" {kernel}(" in s and "__global__" in s)
    end = next((i for i in range(start + 1, len(lines)) if "__global__" in lines[i]), len(lines))
    found = [i for i in range(start + 1, end) if label in lines[i]]
    if occurrence >= len(found):
        raise LookupError(f"{label!r} (occurrence {occurrence}) not found in kernel {kernel}")
    i = found[occurrence]
    return i + 1, lines[i].index(label) + 1


class Kernel(ABC):
    """A kernel model: its source, resources, static ops (in program order) and emitter."""

    name: str
    source: str
    registers: int
    """ptxas, nvcc 13.0 -arch=sm_75 -Xptxas -v."""
    static_shared: int = 0
    specs: dict[str, OpSpec]

    def __init__(self) -> None:
        self.id = {name: i for i, name in enumerate(self.specs)}
        self.base: dict[str, int] = {}
        """Base address of each global array, by its name in the source."""

    def ops(self) -> tuple[StaticOp, ...]:
        text = kernel_source(self.source)
        out = []
        for i, s in enumerate(self.specs.values()):
            line, col = locate(text, self.name, s.label, s.occurrence)
            out.append(StaticOp(id=i, kernel=self.name, kind=cast("OpKind", s.kind), space=cast("Space", s.space), bytes=s.bytes,
                                file=self.source, line=line, column=col, starts_sequence=s.starts,
                                label=s.label))
        return tuple(out)

    @abstractmethod
    def emit(self, w: Warps, sink: Sink) -> None:
        """Emit the accesses and instructions of the warps `w` into `sink`."""

    def generator(self) -> dict[str, object]:
        """Model parameters recorded in the provenance."""
        return {"model": self.name}
