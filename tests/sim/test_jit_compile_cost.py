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


def test_python_entry_wrapper_is_not_optimised_and_still_works() -> None:
    """The wrapper that unboxes a call from Python is ``optnone`` (LLVM skips it); the kernel's
    own function is optimised as before, and calls from Python give the same results."""
    import numpy as np

    @njit
    def total(a, scale):
        s = 0.0
        for i in range(a.shape[0]):
            s += a[i] * scale
        return s

    assert total(np.arange(4.0), 2.0) == 12.0
    cres = total.overloads[total.signatures[0]]
    ir = cres.library.get_llvm_str()
    wrapper = next(line for line in ir.splitlines()
                   if line.startswith("define") and cres.fndesc.llvm_cpython_wrapper_name in line)
    kernel = next(line for line in ir.splitlines()
                  if line.startswith("define") and f"@{cres.fndesc.llvm_func_name}(" in line)
    groups = {g.split()[1]: body for g, body in (line.split(" = ", 1) for line in ir.splitlines()
                                                 if line.startswith("attributes #"))}

    def attributes(define: str) -> str:
        return " ".join(groups.get(tok, "") for tok in define.split() if tok.startswith("#"))

    assert "optnone" in attributes(wrapper)
    assert "optnone" not in attributes(kernel)


def test_function_passes_run_on_defined_functions_only(monkeypatch) -> None:  # noqa: ANN001
    from numba.core import codegen

    ran: list[bool] = []
    make = codegen.CPUCodegen._function_pass_manager

    def counted(self, **kwargs):  # noqa: ANN001, ANN003, ANN202
        fpm, pb = make(self, **kwargs)
        run = fpm.run

        class Counting:
            def run(self, func, pb):  # noqa: ANN001, ANN202
                ran.append(func.is_declaration)
                return run(func, pb)

        return Counting(), pb

    monkeypatch.setattr(codegen.CPUCodegen, "_function_pass_manager", counted)

    @njit
    def halved(x):
        return x // 2

    assert halved(9) == 4
    assert ran and not any(ran)  # without the change: every declared runtime function too


def test_no_numba_callbacks_on_the_llvm_lock() -> None:
    from llvmlite.binding import ffi

    assert not [a for a, _ in ffi.lib._lock._cblist if getattr(a, "__module__", "") == "numba.core.base"]


def _redefined(n, flag):  # noqa: ANN001, ANN202 (a function for Numba's front end)
    x = 0
    total = 0
    for i in range(n):
        if i % 2 == 0:
            x = i
        elif flag:
            x = -i
        while x > 3:
            x -= 3
        total += x
    y = total if flag else -total
    return y + x


def test_live_map_matches_numbas_own() -> None:
    """The live variables at each block's entry, computed over bit sets, are Numba's own."""
    from numba.core import analysis, compiler

    ours = analysis.compute_live_map
    numbas = getattr(ours, "_numba", None)
    assert numbas is not None  # the replacement is installed (on this Numba)
    blocks = compiler.run_frontend(_redefined).blocks
    cfg = analysis.compute_cfg_from_blocks(blocks)
    usedefs = analysis.compute_use_defs(blocks)
    got = ours(cfg, blocks, usedefs.usemap, usedefs.defmap)
    ref = numbas(cfg, blocks, usedefs.usemap, usedefs.defmap)
    assert list(got) == list(ref) and got == ref and any(len(v) > 1 for v in got.values())


def test_ssa_reconstruction_matches_numbas_own() -> None:
    """The SSA reconstruction that visits only the blocks mentioning each variable gives the same
    IR as Numba's, statement for statement, on a function with loops, branches and a variable
    redefined on several paths."""
    import copy
    import io

    from numba.core import compiler, ssa

    ours = ssa._run_ssa
    numbas = getattr(ours, "_numba", None)
    assert numbas is not None  # the replacement is installed (on this Numba)
    func_ir = compiler.run_frontend(_redefined)
    blocks_a, blocks_b = copy.deepcopy(func_ir.blocks), copy.deepcopy(func_ir.blocks)

    def dump(blocks) -> str:  # noqa: ANN001
        out = io.StringIO()
        for label, block in sorted(blocks.items()):
            print(label, file=out)
            block.dump(file=out)
        return out.getvalue()

    ref, got = dump(numbas(blocks_a)), dump(ours(blocks_b))
    assert "phi" in got and got == ref


def _clamped(x):  # noqa: ANN001, ANN202 (inlined below)
    return 0 if x < 0 else x


clamped = njit(inline="always")(_clamped)


def test_an_inlined_helper_goes_through_the_front_end_once(monkeypatch) -> None:  # noqa: ANN001
    """A helper inlined at several call sites, in several kernels, is translated from bytecode
    once; each site still gets its own copy (the results show the sites apart)."""
    from numba.core import inline_closurecall

    fronts: list[object] = []
    run = inline_closurecall.InlineWorker.run_untyped_passes

    def counted(self, func, enable_ssa=False):  # noqa: ANN001, ANN202
        fronts.append(func)
        return run(self, func, enable_ssa)

    monkeypatch.setattr(inline_closurecall.InlineWorker, "run_untyped_passes", counted)

    @njit
    def three_sites(a, b, c):
        return clamped(a) + 10 * clamped(b) + 100 * clamped(c)

    @njit
    def another(a):
        return clamped(a - 5)

    assert three_sites(-1, 2, 3) == 320 and three_sites(4, -2, -3) == 4 and another(7) == 2 and another(1) == 0
    assert fronts.count(_clamped) == 1  # without the change: once per call site (4)


def test_source_locations_are_shared_by_ir_copies() -> None:
    import copy

    from numba.core import ir

    loc = ir.Loc("kernel.py", 12, 4)
    scope = ir.Scope(None, loc)
    stmt = ir.Assign(ir.Const(1, loc), ir.Var(scope, "x", loc), loc)
    dup = copy.deepcopy(stmt)
    assert dup is not stmt and dup.target is not stmt.target  # the statement is copied
    assert dup.loc is loc and dup.target.loc is loc  # its location is not
    assert str(dup) == str(stmt)
