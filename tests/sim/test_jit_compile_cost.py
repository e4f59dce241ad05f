"""What `tuiprof.jit` spares every first compile: a built-in operation is typed once per argument
types in a process, however many kernels and call sites use it (Numba applied the function's
templates at every call site of every kernel: most of a first run's typing); and no C callback
wrapper is built beside each compiled function (none is used)."""

from __future__ import annotations

import tuiprof.jit  # noqa: F401  (sets Numba's cache folder, installs the memo; first)

# isort: split
from numba import njit, types
from numba.core.imputils import lower_builtin
from numba.extending import type_callable


def doubled(x):  # noqa: ANN001, ANN201 (typed by the template below)
    return 2 * x


typed: list[types.Type] = []


@type_callable(doubled)
def _type_doubled(context):  # noqa: ANN001, ANN202 (Numba's signature)
    def typer(x):  # noqa: ANN001, ANN202
        typed.append(x)
        return x if isinstance(x, types.Integer) else None

    return typer


@lower_builtin(doubled, types.Integer)
def _lower_doubled(context, builder, sig, args):  # noqa: ANN001, ANN202
    return builder.mul(args[0], context.get_constant(sig.args[0], 2))


def test_one_typing_per_argument_types_across_kernels_and_call_sites() -> None:
    @njit  # not cached: tests write nothing outside their temporary folders
    def one(x):
        return doubled(x) + doubled(x + 1)

    @njit
    def other(x):
        return doubled(x) - 1

    assert one(3) == 14 and other(5) == 9
    assert typed.count(types.int64) == 1, typed  # without the memo: once per site and kernel at least


def test_failed_typings_are_not_kept() -> None:
    """A typing that fails is tried again (and fails again, with Numba's own error)."""
    import pytest
    from numba.core.errors import TypingError

    @njit
    def bad(x):
        return doubled(x)

    before = typed.count(types.float64)
    for _ in range(2):
        with pytest.raises(TypingError):
            bad(1.5)
    assert typed.count(types.float64) >= before + 2


def test_no_c_callback_wrapper_beside_a_kernel() -> None:
    @njit
    def plus_one(x):
        return x + 1

    assert plus_one(1) == 2
    cres = plus_one.overloads[plus_one.signatures[0]]
    ir = cres.library.get_llvm_str()
    assert cres.fndesc.llvm_cpython_wrapper_name in ir  # the control: wrappers are named in the module
    assert cres.fndesc.llvm_cfunc_wrapper_name not in ir


def test_a_c_callback_still_gets_its_wrapper() -> None:
    import ctypes

    from numba import cfunc

    @cfunc("int64(int64)")
    def plus_two(x):
        return x + 2

    assert ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(plus_two.address)(40) == 42


def test_block_entry_variables_are_computed_only_when_asked(monkeypatch) -> None:  # noqa: ANN001
    """Numba's IR post-processor no longer computes every block's live-on-entry variables after
    each pass (only object-mode lowering and generators read them); those that do still get them."""
    from numba import objmode
    from numba.core import analysis

    calls: list[int] = []
    live = analysis.compute_live_variables

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        return live(*args, **kwargs)

    monkeypatch.setattr(analysis, "compute_live_variables", counted)

    @njit
    def branchy(n):
        s = 0
        for i in range(n):
            if i % 3 == 0:
                s += i
            else:
                s -= 1
        return s

    assert branchy(10) == 18 - 6
    assert calls == []  # without the change: after every pass that changed the IR

    @njit
    def counter(n):
        for i in range(n):
            yield i * i

    @njit
    def squares(n):
        s = 0
        for v in counter(n):
            s += v
        return s

    @njit
    def through_python(x):
        with objmode(y="int64"):
            y = x + 1
        return y

    assert squares(4) == 14 and through_python(41) == 42
    assert calls  # the generator and the object-mode block got their live variables
