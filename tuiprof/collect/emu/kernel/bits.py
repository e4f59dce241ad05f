"""Bit-level primitives of the emulator kernels, as LLVM intrinsics Numba cannot express.

Registers hold raw bit patterns in int64 lanes; these reinterpret them as IEEE floats (and
back) without any conversion, load and store little-endian values of 1 to 8 bytes at any byte
offset of a uint8 buffer, and give the fused multiply-add and bit-count instructions the
hardware has, so that results are exact rather than approximated by several roundings.
"""

from __future__ import annotations

from tuiprof.jit import INLINE, njit  # first: it sets Numba's cache folder before numba is imported

# isort: split

from llvmlite import ir  # noqa: E402
from numba.core import cgutils, types  # noqa: E402
from numba.extending import intrinsic  # noqa: E402

_I8, _I16, _I32, _I64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)


def _as_i64(builder, value, bits: int):
    """Zero-extend (or keep) an integer of `bits` bits to i64."""
    return value if bits == 64 else builder.zext(value, _I64)


@intrinsic
def f32_of(typingctx, x):
    """The float32 whose IEEE bits are the low 32 bits of integer `x`."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        v = context.cast(builder, args[0], sig.args[0], types.int64)
        return builder.bitcast(builder.trunc(v, _I32), ir.FloatType())

    return types.float32(x), codegen


@intrinsic
def bits_f32(typingctx, x):
    """The IEEE bits of float32 `x`, zero-extended to int64."""
    if not isinstance(x, types.Float):
        return None

    def codegen(context, builder, sig, args):
        v = context.cast(builder, args[0], sig.args[0], types.float32)
        return builder.zext(builder.bitcast(v, _I32), _I64)

    return types.int64(x), codegen


@intrinsic
def f64_of(typingctx, x):
    """The float64 whose IEEE bits are integer `x`."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        v = context.cast(builder, args[0], sig.args[0], types.int64)
        return builder.bitcast(v, ir.DoubleType())

    return types.float64(x), codegen


@intrinsic
def bits_f64(typingctx, x):
    """The IEEE bits of float64 `x`, as int64."""
    if not isinstance(x, types.Float):
        return None

    def codegen(context, builder, sig, args):
        v = context.cast(builder, args[0], sig.args[0], types.float64)
        return builder.bitcast(v, _I64)

    return types.int64(x), codegen


def _fma(llty, nbty, suffix: str):
    @intrinsic
    def fma(typingctx, a, b, c):
        if not all(isinstance(t, types.Float) for t in (a, b, c)):
            return None

        def codegen(context, builder, sig, args):
            vals = [context.cast(builder, v, t, nbty) for v, t in zip(args, sig.args)]
            fnty = ir.FunctionType(llty, [llty, llty, llty])
            fn = cgutils.get_or_insert_function(builder.module, fnty, f"llvm.fma.{suffix}")
            return builder.call(fn, vals)

        return nbty(a, b, c), codegen
    return fma


fma32 = _fma(ir.FloatType(), types.float32, "f32")
"""a*b+c on float32 with one rounding (IEEE fusedMultiplyAdd)."""
fma64 = _fma(ir.DoubleType(), types.float64, "f64")
"""a*b+c on float64 with one rounding."""


def _unary_int(name: str, width: int, extra_flag: bool):
    llty = ir.IntType(width)

    @intrinsic
    def fn(typingctx, x):
        if not isinstance(x, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            v = context.cast(builder, args[0], sig.args[0], types.int64)
            if width < 64:
                v = builder.trunc(v, llty)
            argtys = [llty, ir.IntType(1)] if extra_flag else [llty]
            callee = cgutils.get_or_insert_function(builder.module, ir.FunctionType(llty, argtys), f"{name}.i{width}")
            r = builder.call(callee, [v, ir.Constant(ir.IntType(1), 0)] if extra_flag else [v])
            return _as_i64(builder, r, width)

        return types.int64(x), codegen
    return fn


clz32 = _unary_int("llvm.ctlz", 32, True)
"""Leading zeros of the low 32 bits (32 for 0)."""
clz64 = _unary_int("llvm.ctlz", 64, True)
popc32 = _unary_int("llvm.ctpop", 32, False)
"""Set bits of the low 32 bits."""
popc64 = _unary_int("llvm.ctpop", 64, False)
brev32 = _unary_int("llvm.bitreverse", 32, False)
"""The low 32 bits in reverse order (zero-extended)."""
brev64 = _unary_int("llvm.bitreverse", 64, False)


def _load(width: int):
    llty = ir.IntType(width)

    @intrinsic
    def ld(typingctx, buf, off):
        if not (isinstance(buf, types.Array) and buf.dtype == types.uint8 and isinstance(off, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            o = context.cast(builder, args[1], sig.args[1], types.intp)
            ptr = builder.gep(ary.data, [o])
            v = builder.load(builder.bitcast(ptr, llty.as_pointer()), align=1)
            return _as_i64(builder, v, width)

        return types.int64(buf, off), codegen
    return ld


def _store(width: int):
    llty = ir.IntType(width)

    @intrinsic
    def st(typingctx, buf, off, val):
        if not (isinstance(buf, types.Array) and buf.dtype == types.uint8 and isinstance(off, types.Integer)
                and isinstance(val, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            o = context.cast(builder, args[1], sig.args[1], types.intp)
            v = context.cast(builder, args[2], sig.args[2], types.int64)
            if width < 64:
                v = builder.trunc(v, llty)
            ptr = builder.gep(ary.data, [o])
            builder.store(v, builder.bitcast(ptr, llty.as_pointer()), align=1)
            return context.get_dummy_value()

        return types.none(buf, off, val), codegen
    return st


ld8, ld16, ld32, ld64 = _load(8), _load(16), _load(32), _load(64)
"""Little-endian unsigned loads of 1, 2, 4, 8 bytes at a byte offset of a uint8 buffer (no bounds check)."""
st8, st16, st32, st64 = _store(8), _store(16), _store(32), _store(64)
"""Stores of the low 1, 2, 4, 8 bytes of an integer at a byte offset of a uint8 buffer (no bounds check)."""


@njit(**INLINE)
def load_bits(buf, off, nbytes):
    """The `nbytes` (1, 2, 4 or 8) little-endian bytes at ``buf[off:]``, zero-extended."""
    if nbytes == 4:
        return ld32(buf, off)
    if nbytes == 8:
        return ld64(buf, off)
    if nbytes == 2:
        return ld16(buf, off)
    return ld8(buf, off)


@njit(**INLINE)
def store_bits(buf, off, nbytes, val):
    """Store the low `nbytes` (1, 2, 4 or 8) bytes of `val` at ``buf[off:]``."""
    if nbytes == 4:
        st32(buf, off, val)
    elif nbytes == 8:
        st64(buf, off, val)
    elif nbytes == 2:
        st16(buf, off, val)
    else:
        st8(buf, off, val)


__all__ = ["bits_f32", "bits_f64", "brev32", "brev64", "clz32", "clz64", "f32_of", "f64_of", "fma32", "fma64",
           "ld16", "ld32", "ld64", "ld8", "load_bits", "popc32", "popc64", "st16", "st32", "st64", "st8",
           "store_bits"]
