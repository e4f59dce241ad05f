"""``__constant__`` and ``__device__`` variables as a launch script sees them: ``dev.set_symbol(name,
value)`` and ``dev.get_symbol(name)``, the launch-script form of ``cudaMemcpyToSymbol`` and
``cudaMemcpyFromSymbol``. Both devices share what is here: finding the variable a C++ name means
(`tuiprof.toolchain.names`: ``c_Kernel``, ``img::c_gamma_lut``, a ``static`` one), checking what the
script writes against its size, and giving back what it reads with the dtype and shape it wrote
(else the variable's own PTX type and dimensions, else bytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tuiprof.errors import TuiprofError
from tuiprof.ptx.module import Module, Variable

if TYPE_CHECKING:
    from tuiprof.toolchain.names import Enums

_PTX_DTYPES = {"f16": "f2", "f32": "f4", "f64": "f8", "u8": "u1", "s8": "i1", "u16": "u2", "s16": "i2",
               "u32": "u4", "s32": "i4", "u64": "u8", "s64": "i8"}


@dataclass(frozen=True)
class Symbol:
    """A module variable a launch script may read and write."""

    name: str
    """The PTX symbol (mangled when the C++ name is scoped)."""
    space: str
    """``const`` (a ``__constant__`` variable) or ``global`` (a ``__device__`` one)."""
    size: int
    dtype: np.dtype
    """Of one element: the variable's PTX type (raw bytes for ``.b8`` arrays)."""
    shape: tuple[int, ...]


def module_symbols(module: Module) -> dict[str, Symbol]:
    """The ``.const`` and ``.global`` variables of `module` that hold memory, by PTX name."""
    out = {}
    for v in module.variables:
        if v.space in ("const", "global") and v.size_bytes > 0 and v.linkage != "extern":
            out[v.name] = _symbol(v)
    return out


def _symbol(v: Variable) -> Symbol:
    dt = np.dtype(_PTX_DTYPES.get(v.type, "u1"))
    count = v.size_bytes // dt.itemsize
    shape = v.dims if v.dims and dt.itemsize > 1 and int(np.prod(v.dims)) == count else (count,)
    return Symbol(v.name, v.space, v.size_bytes, dt, () if shape == (1,) and not v.dims else shape)


def find_variable(symbols: dict[str, Symbol], name: str, where: str, enums: Enums | None = None) -> Symbol:
    """The variable `name` names (its PTX symbol, or its C++ name as written); one error listing
    the module's variables when there is none or several."""
    from tuiprof.toolchain.names import NO_ENUMS, find_symbol

    if not isinstance(name, str):
        raise TuiprofError(f"a symbol name must be a string, not {type(name).__name__}",
                           "for example dev.set_symbol(\"c_filter\", taps)")
    user = [s for s in symbols if not _internal(s)] or list(symbols)
    pool = user if name not in symbols else list(symbols)
    return symbols[find_symbol(name, pool, what="__constant__ or __device__ variable", where=where,
                               enums=enums or NO_ENUMS)]


def _internal(symbol: str) -> bool:
    """A variable the CUDA headers define (libcu++'s customisation points), not the user's."""
    return "_INTERNAL_" in symbol and ("4cuda3std" in symbol or "6ranges" in symbol)


def symbol_bytes(sym: Symbol, value: object, offset: int, call: str) -> bytes:
    """What ``dev.set_symbol`` writes: `value` (a NumPy array or scalar) as bytes, checked to fit
    the variable from `offset` (bytes)."""
    if not isinstance(value, (np.ndarray, np.generic)):
        hint = "np.float32(x)" if isinstance(value, float) else "np.int32(n)" if isinstance(value, int) else "np.asarray(...)"
        raise TuiprofError(f"{call}: the value must be a NumPy array or scalar, not a {type(value).__name__}",
                           f"give its type explicitly, e.g. {hint}")
    data = np.ascontiguousarray(value)
    if data.dtype.hasobject:
        raise TuiprofError(f"{call}: an array of Python objects has no device layout", "give a numeric NumPy array")
    if not isinstance(offset, (int, np.integer)) or offset < 0:
        raise TuiprofError(f"{call}: offset={offset!r} is not a byte count", "give offset in bytes, e.g. offset=16")
    if int(offset) + data.nbytes > sym.size:
        raise TuiprofError(f"{call}: {data.nbytes} bytes at offset {int(offset)} do not fit {sym.name}, which holds "
                           f"{sym.size} bytes", "copy no more than the variable holds (cudaMemcpyToSymbol's rule)")
    return data.tobytes()


def symbol_view(sym: Symbol, raw: np.ndarray, written: tuple[np.dtype, tuple[int, ...]] | None,
                dtype: object) -> np.ndarray:
    """The variable's bytes `raw` as ``dev.get_symbol`` returns them: as `dtype` when asked, else
    with the dtype and shape the script last wrote when they cover the variable, else its own type."""
    if dtype is not None:
        dt = np.dtype(dtype)  # type: ignore[call-overload]
        if dt.itemsize == 0 or sym.size % dt.itemsize:
            raise TuiprofError(f"dev.get_symbol: {sym.name} holds {sym.size} bytes, not a whole number of {dt}",
                               "give a dtype whose size divides the variable's")
        return raw.view(dt).copy()
    if written is not None:
        dt, shape = written
        count = int(np.prod(shape)) if shape else 1
        if dt.itemsize * count == sym.size:
            return raw.view(dt).reshape(shape).copy()
        if sym.size % dt.itemsize == 0:
            return raw.view(dt).copy()
    out = raw.view(sym.dtype)
    return (out.reshape(sym.shape) if sym.shape else out.reshape(())).copy()
