"""Kernel parameters packed as the PTX's own `.param` declarations lay them out (`pack_params`)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tuiprof.collect import DeviceArray, KernelArg
from tuiprof.errors import TuiprofError
from tuiprof.ptx.module import Function, Param, param_layout

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
