"""The emulator compiles what a kernel uses: each decoded row belongs to one instruction family
(the handler that runs it), and the interpreter is compiled for the first variant that holds a
kernel's families. Checked on hand-built rows and on decoded CUDA kernels (no Numba compile)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.support.emu_support import Compiler, cuda_ptx  # noqa: F401 (fixture)
from tuiprof.collect.emu.device import EmuDevice, RecordChoice
from tuiprof.collect.emu.kernel import codes
from tuiprof.collect.emu.kernel.codes import (
    BOOL_AND,
    CMP_LT,
    F_FAM,
    F_FLAGS,
    F_OP,
    F_S1,
    F_SUB,
    F_TY,
    F_TY2,
    FAM_BRA,
    FAM_CMP,
    FAM_CVT,
    FAM_CVT_INT,
    FAM_EXIT,
    FAM_FLOAT,
    FAM_FLOAT_PLAIN,
    FAM_IADD,
    FAM_IMUL,
    FAM_LDST,
    FAM_NONE,
    FAM_SETP_INT,
    FAM_SHIFT,
    FL_FTZ,
    N_FIELDS,
    OP_CVT,
    OP_FADD,
    OP_FDIV,
    OP_FFMA,
    OP_FNS,
    OP_SETP,
    RND_NONE,
    RND_RN,
    RND_RZ,
    T_F16,
    T_F32,
    T_F64,
    T_S32,
    T_S64,
)
from tuiprof.collect.emu.kernel.interp import ALWAYS_COMPILED, VARIANTS, families_of
from tuiprof.collect.emu.kernel.warp import row_family

ROOT = Path(__file__).resolve().parents[2]


def _row(op: int, ty: int = 0, ty2: int = 0, sub: int = 0, flags: int = 0, s1: int = -1) -> np.ndarray:
    code = np.zeros((1, N_FIELDS), np.int64)
    code[0, F_OP], code[0, F_TY], code[0, F_TY2], code[0, F_SUB], code[0, F_FLAGS], code[0, F_S1] = \
        op, ty, ty2, sub, flags, s1
    return code


def test_every_opcode_the_decoder_emits_has_a_handler() -> None:
    opcodes = {v for k, v in vars(codes).items() if k.startswith("OP_") and k != "OP_MEM_LAST"}
    missing = sorted(op for op in opcodes if row_family(_row(op), 0) == FAM_NONE)
    assert missing == [OP_FNS]   # fns: decoded by nothing, refused when it runs


@pytest.mark.parametrize(("row", "family"), [
    (_row(OP_FFMA, T_F32, sub=RND_RN), FAM_FLOAT_PLAIN),
    (_row(OP_FADD, T_F64, sub=RND_NONE), FAM_FLOAT_PLAIN),
    (_row(OP_FFMA, T_F32, sub=RND_RZ), FAM_FLOAT),
    (_row(OP_FADD, T_F32, sub=RND_RN, flags=FL_FTZ), FAM_FLOAT),
    (_row(OP_FADD, T_F16, sub=RND_RN), FAM_FLOAT),
    (_row(OP_FDIV, T_F32, sub=RND_RN), FAM_FLOAT),
    (_row(OP_SETP, ty2=T_S32, sub=CMP_LT), FAM_SETP_INT),
    (_row(OP_SETP, ty2=T_S32, sub=CMP_LT | (BOOL_AND << 8)), FAM_CMP),
    (_row(OP_SETP, ty2=T_F32, sub=CMP_LT), FAM_CMP),
    (_row(OP_CVT, T_S64, T_S32, sub=RND_NONE), FAM_CVT_INT),
    (_row(OP_CVT, T_F32, T_S32, sub=RND_RN), FAM_CVT),
    (_row(OP_CVT, T_S32, T_F32, sub=RND_NONE), FAM_CVT),
])
def test_a_row_goes_to_the_handler_that_covers_it(row: np.ndarray, family: int) -> None:
    assert row_family(row, 0) == family


def test_variants_grow_to_every_family() -> None:
    assert VARIANTS[0] == ALWAYS_COMPILED
    assert all(a < b for a, b in zip(VARIANTS, VARIANTS[1:]))
    assert VARIANTS[-1] == frozenset(range(FAM_NONE))


def test_each_variant_is_compiled_under_a_name_of_its_own() -> None:
    """Numba names a variant's machine code, environment and cache files after its qualified name
    (and a counter that restarts in every process): with one name for all, a process that loaded
    two variants compiled by different processes ran the second with the first one's environment
    (SystemError, 'descr' is NULL; tests/sim/test_jit_built_kernel.py shows how). The name is a
    function of the families alone, so every process gives a variant the same one. No compile."""
    from tuiprof.collect.emu.kernel.interp import interpreter, interpreter_name

    names = [interpreter(v).py_func.__qualname__ for v in VARIANTS]
    assert names == [interpreter_name(v) for v in VARIANTS]
    assert len(set(names)) == len(VARIANTS)
    assert interpreter_name(frozenset({0, 1, 2})) == "run_ctas_7" and interpreter_name(frozenset({4, 8})) == "run_ctas_110"


@pytest.mark.parametrize(("families", "variant"), [
    ({FAM_IADD, FAM_IMUL, FAM_LDST, FAM_EXIT}, 0),            # integer indices, loads and stores (vecadd)
    ({FAM_IADD, FAM_SHIFT, FAM_FLOAT_PLAIN, FAM_LDST}, 1),    # float arithmetic, no branch (a saxpy without bounds)
    ({FAM_IADD, FAM_LDST, FAM_SETP_INT, FAM_BRA}, 2),         # a bounds check
    ({FAM_FLOAT, FAM_LDST}, 4),                               # rounding modes: everything
])
def test_the_first_variant_that_holds_the_families(families: set[int], variant: int) -> None:
    code = np.zeros((len(families), N_FIELDS), np.int64)
    code[:, F_FAM] = sorted(families)
    assert families_of(code) == VARIANTS[variant]


def _variant(compiled: tuple, kernel: str) -> int:
    module, src, text = compiled
    dev = EmuDevice(module, src, text, record=RecordChoice(snapshot=()))
    code = dev._program(kernel)[0].code
    fams = set(np.unique(code[:, F_FAM]).tolist())
    chosen = families_of(code)
    assert fams <= chosen
    return VARIANTS.index(chosen)


def test_kernels_get_the_smallest_variant_that_runs_them(cuda_ptx: Compiler) -> None:  # noqa: F811
    assert _variant(cuda_ptx.file(ROOT / "demo_traces" / "vecadd.cu"), "kernel_vec_add") == 0   # integer indices
    assert _variant(cuda_ptx.file(ROOT / "demo_traces" / "stencil.cu"), "stencil7") == 2       # bounds checks
    assert _variant(cuda_ptx("ptx_matmul_tiled"), "matmul_tiled") == 3   # CTA barriers
    assert _variant(cuda_ptx("ptx_reduce_shfl"), "reduce_shfl") == 4     # atomicAdd on floats
