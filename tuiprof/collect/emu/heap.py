"""The emulated device's global memory: one flat heap of cudaMalloc-like allocations.

Allocations get device addresses exactly as the synthetic demos place their arrays
(`tuiprof.trace.synth.allocate`: 2 MiB-aligned bases from 0x7f0000000000 with at least 2 MiB
between arrays), so that emulated and synthetic traces agree address for address when a launch
script allocates in the same order. The bytes live compactly in one growing NumPy buffer; a sorted
segment table maps device addresses to buffer offsets and bounds-checks every access.
"""

from __future__ import annotations

import numpy as np

from tuiprof.resources import memory_budget

ARRAY_BASE = 0x7F00_0000_0000
"""Where the first allocation starts (the synthetic demos' base: `tuiprof.trace.synth.ARRAY_BASE`)."""
ARRAY_ALIGN = 2 << 20
"""Allocations start on 2 MiB boundaries with at least 2 MiB between them (synth.ARRAY_ALIGN)."""
HEAP_ALIGN = 256


class Heap:
    """Device memory: allocate, read, write; the arrays the interpreter needs."""

    def __init__(self) -> None:
        self.buf = np.zeros(1 << 16, np.uint8)
        self.growth_limit = memory_budget().bytes
        """The buffer doubles as it grows, but never past this for the doubling's sake alone."""
        self.top = 0
        self.next_address = ARRAY_BASE
        self._segs: list[tuple[int, int, int]] = []   # (address, size, offset), sorted by address
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def _reserve(self, nbytes: int) -> int:
        off = -(-self.top // HEAP_ALIGN) * HEAP_ALIGN
        end = off + max(nbytes, 0)
        if end > self.buf.shape[0]:
            cap = max(end, min(2 * self.buf.shape[0], self.growth_limit))
            grown = np.zeros(cap, np.uint8)
            grown[:self.top] = self.buf[:self.top]
            self.buf = grown
        self.top = end
        return off

    def allocate(self, nbytes: int) -> int:
        """A new zeroed allocation of `nbytes`; its device address (cudaMalloc-like placement)."""
        address = self.next_address
        self.next_address = -(-(address + nbytes + ARRAY_ALIGN) // ARRAY_ALIGN) * ARRAY_ALIGN
        self.place(address, nbytes)
        return address

    def place(self, address: int, nbytes: int, init: bytes = b"") -> None:
        """Map `nbytes` at a chosen device address (module ``.global`` variables)."""
        off = self._reserve(nbytes)
        if init:
            self.buf[off:off + len(init)] = np.frombuffer(init, np.uint8)
        self._segs.append((address, nbytes, off))
        self._segs.sort()
        self._arrays = None

    def _find(self, address: int, nbytes: int) -> int:
        for a, size, off in self._segs:
            if a <= address and address + nbytes <= a + size:
                return off + address - a
        raise KeyError(address)

    def write(self, address: int, data: bytes | np.ndarray) -> None:
        raw = np.frombuffer(np.ascontiguousarray(data).tobytes() if isinstance(data, np.ndarray) else data, np.uint8)
        off = self._find(address, raw.shape[0])
        self.buf[off:off + raw.shape[0]] = raw

    def read(self, address: int, nbytes: int) -> np.ndarray:
        off = self._find(address, nbytes)
        return self.buf[off:off + nbytes].copy()

    def segments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start address, end address, buffer offset) int64 arrays, sorted, for the interpreter."""
        if self._arrays is None:
            lo = np.array([a for a, _, _ in self._segs], np.int64)
            hi = np.array([a + s for a, s, _ in self._segs], np.int64)
            off = np.array([o for _, _, o in self._segs], np.int64)
            self._arrays = (lo, hi, off)
        return self._arrays
