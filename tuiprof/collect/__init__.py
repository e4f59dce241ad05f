"""Backends that run a kernel and produce a Trace: the emulator (`tuiprof.collect.emu`) and the
GPU (`tuiprof.collect.gpu`). Both implement the `Device` protocol that launch scripts program against:

    def setup(dev):
        x = dev.to_device(np.arange(1024, dtype=np.float32))
        y = dev.zeros(1024, np.float32)
        dev.launch("saxpy", grid=8, block=128, args=(y, x, np.float32(2.0), np.int32(1024)))
        print(dev.from_device(y)[:4])

Nothing heavy is imported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from tuiprof.ptx.module import Function

Dim = int | Sequence[int]
"""A grid or block size: an int (x) or a sequence of up to three ints (x, y, z)."""


@dataclass(frozen=True)
class DeviceArray:
    """A buffer in device memory: its device address, and the shape and dtype it was made with.

    It is also a pointer, as a kernel argument: ``buf + k`` points `k` elements into it (C's
    ``d_data + k``), ``buf[k:]`` (or ``buf[k:m]``) is the part from row `k` of its first axis;
    either is a DeviceArray of what is left, which ``from_device`` reads. `NULL` (``dev.null``)
    is the null pointer."""

    address: int
    shape: tuple[int, ...]
    dtype: str
    nbytes: int

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __add__(self, k: object) -> "DeviceArray":
        from tuiprof.errors import TuiprofError

        if not isinstance(k, (int, np.integer)) or isinstance(k, bool):
            return NotImplemented
        if self.address == 0:
            raise TuiprofError("dev.null + k: the null pointer points at nothing", "offset a buffer instead")
        if not 0 <= int(k) <= self.size:
            raise TuiprofError(f"a buffer of {self.size} elements + {int(k)} points outside it",
                               f"offset by 0 to {self.size} elements")
        item = np.dtype(self.dtype).itemsize
        left = self.size - int(k)
        return DeviceArray(self.address + int(k) * item, (left,), self.dtype, left * item)

    __radd__ = __add__

    def __getitem__(self, key: object) -> "DeviceArray":
        from tuiprof.errors import TuiprofError

        if not isinstance(key, slice) or key.step not in (None, 1) or not self.shape:
            raise TuiprofError(f"a device buffer takes only a slice of its first axis ([k:] or [k:m]), not [{key!r}]",
                               "slice it as buf[k:], or offset it as buf + k elements")
        start, stop, _ = key.indices(self.shape[0])
        stop = max(stop, start)
        row = np.dtype(self.dtype).itemsize * (self.size // self.shape[0] if self.shape[0] else 0)
        return DeviceArray(self.address + start * row, (stop - start, *self.shape[1:]), self.dtype,
                           (stop - start) * row)


NULL = DeviceArray(0, (0,), "|u1", 0)
"""The null pointer, as a kernel argument (``dev.null``)."""


def numba_array(buf: DeviceArray) -> tuple[KernelArg, ...]:
    """The kernel parameters a Numba CUDA kernel's array argument becomes in its PTX (Numba's data
    model of a C-contiguous array: meminfo, parent, nitems, itemsize, data, shape..., strides...),
    for launching a kernel of ``numba.cuda.compile_ptx``'s PTX: ``args=(*numba_array(x), np.int32(n))``."""
    item = np.dtype(buf.dtype).itemsize
    strides: list[int] = []
    step = item
    for extent in reversed(buf.shape):
        strides.insert(0, step)
        step *= extent
    return (NULL, NULL, np.int64(buf.size), np.int64(item), buf, *(np.int64(d) for d in buf.shape),
            *(np.int64(s) for s in strides))


def check_launch_bounds(fn: "Function", block: tuple[int, int, int], kernel: str) -> None:
    """Refuse a launch that breaks the kernel's ``__launch_bounds__`` (PTX ``.maxntid``) or its
    required block size (``.reqntid``), as the CUDA driver refuses it."""
    from tuiprof.errors import TuiprofError

    threads = block[0] * block[1] * block[2]
    if fn.maxntid:
        most = 1
        for d in fn.maxntid:
            most *= d
        if threads > most:
            raise TuiprofError(f"{kernel}: a block of {threads} threads exceeds its __launch_bounds__ of {most} "
                               "(CUDA refuses the launch: too many resources requested for launch)",
                               f"launch blocks of at most {most} threads, or raise the kernel's __launch_bounds__")
    if fn.reqntid:
        want = tuple(fn.reqntid) + (1,) * (3 - len(fn.reqntid))
        if tuple(block) != want:
            raise TuiprofError(f"{kernel}: block {block} differs from the block size the kernel requires "
                               f"({want}, .reqntid)", f"launch it with block={want}")


KernelArg = DeviceArray | np.generic
"""A kernel argument: a DeviceArray for a pointer parameter, a NumPy scalar for a value."""


class Device(Protocol):
    """What a launch script's ``setup(dev)`` may call."""

    def to_device(self, array: np.ndarray) -> DeviceArray:
        """A new device buffer holding a copy of `array`."""

    def empty(self, shape: int | Sequence[int], dtype: np.dtype | type | str) -> DeviceArray:
        """A new device buffer (its contents are unspecified; the emulator zeroes it)."""

    def zeros(self, shape: int | Sequence[int], dtype: np.dtype | type | str) -> DeviceArray:
        """A new zero-filled device buffer."""

    def launch(self, name: str, grid: Dim, block: Dim, args: Sequence[KernelArg], shared: int = 0) -> None:
        """Run kernel `name` on `grid` x `block` threads with `shared` bytes of dynamic shared memory."""

    def from_device(self, buf: DeviceArray) -> np.ndarray:
        """A host copy of a device buffer, with the shape and dtype it was created with."""

    def set_symbol(self, name: str, value: np.ndarray | np.generic, offset: int = 0) -> None:
        """Write `value` into the ``__constant__`` or ``__device__`` variable `name` (``cudaMemcpyToSymbol``)."""

    def get_symbol(self, name: str, dtype: np.dtype | type | str | None = None) -> np.ndarray:
        """The value of the ``__constant__`` or ``__device__`` variable `name` (``cudaMemcpyFromSymbol``)."""

    @property
    def null(self) -> DeviceArray:
        """The null pointer, as a kernel argument."""

    def texture(self, data: np.ndarray | DeviceArray, **options: object) -> np.uint64:
        """A texture object over `data` for a ``cudaTextureObject_t`` parameter (`tuiprof.collect.textures`)."""

    def surface(self, buf: DeviceArray, *, channels: int = 1) -> np.uint64:
        """A surface object reading and writing `buf` in place, for a ``cudaSurfaceObject_t`` parameter."""


MAX_ARRAY_BYTES = (1 << 63) - 1
"""No device array is larger: a size in bytes must fit the drivers' signed 64-bit arithmetic."""


def array_layout(shape: int | Sequence[int], dtype: object, call: str) -> tuple[tuple[int, ...], np.dtype, int]:
    """The shape, dtype and exact size in bytes of the device array a launch script asks for with
    `call` (``dev.empty`` ...), checked in its terms: sizes are ints >= 0 and the dtype numeric.
    The size is a Python int: a NumPy product wraps around ((2**62, 2) bytes came out negative,
    (2**33, 2**31) as 0 bytes)."""
    from tuiprof.errors import TuiprofError

    try:
        dt = np.dtype(dtype)  # type: ignore[call-overload]
        shp = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    except (TypeError, ValueError, OverflowError):
        raise TuiprofError(f"{call}: cannot make a device array of shape {shape!r:.100} and dtype {dtype!r:.100}",
                           "give a shape (int or tuple of ints) and a NumPy dtype, e.g. dev.zeros(1024, np.float32)") from None
    if any(s < 0 for s in shp) or dt.hasobject or dt.itemsize == 0:
        raise TuiprofError(f"{call}: cannot make a device array of shape {shp} and dtype {dt}",
                           "sizes must be non-negative and the dtype numeric")
    nbytes = dt.itemsize
    for s in shp:
        nbytes *= s
    if nbytes > MAX_ARRAY_BYTES:
        raise TuiprofError(f"{call}: an array of shape {shp} and dtype {dt} would be {nbytes:,} bytes, more than any "
                           f"device can address", "check the shape: it is far larger than any GPU's memory")
    return shp, dt, nbytes


def dim3(value: Dim, what: str) -> tuple[int, int, int]:
    """A grid or block size as (x, y, z); raises TuiprofError when it is not 1 to 3 positive ints."""
    from tuiprof.errors import TuiprofError

    if isinstance(value, (int, np.integer)):
        dims = [int(value)]
    else:
        try:
            dims = [int(v) for v in value]
        except (TypeError, ValueError):
            raise TuiprofError(f"{what} must be an int or up to three ints, not {value!r}",
                               f"for example {what}=(64, 1, 1)") from None
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise TuiprofError(f"{what} {value!r} is not 1 to 3 positive sizes", f"for example {what}=(64, 1, 1)")
    while len(dims) < 3:
        dims.append(1)
    return dims[0], dims[1], dims[2]


__all__ = ["MAX_ARRAY_BYTES", "NULL", "Device", "DeviceArray", "Dim", "KernelArg", "array_layout",
           "check_launch_bounds", "dim3", "numba_array"]
