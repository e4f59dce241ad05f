"""The emulator compiles what a kernel uses: each decoded row belongs to one instruction family
(the handler that runs it), and the interpreter is compiled for the first variant that holds a
kernel's families. Checked on hand-built rows and on decoded CUDA kernels (no Numba compile)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tests.support.emu_support import Compiler, cuda_ptx  # noqa: F401 (fixture)
from tuiprof.collect.emu.device import EmuDevice, RecordChoice
from tuiprof.collect.emu.kernel import codes
from tuiprof.collect.emu.kernel.codes import (
    BOOL_AND,
    CMP_LT,
    F_D0,
    F_FAM,
    F_FLAGS,
    F_OP,
    F_S0,
    F_S1,
    F_SPACE,
    F_SUB,
    F_TY,
    F_TY2,
    F_VEC,
    FAM_BRA,
    FAM_CMP,
    FAM_CVT,
    FAM_CVT_INT,
    FAM_EXIT,
    FAM_FLOAT,
    FAM_FLOAT_PLAIN,
    FAM_IADD,
    FAM_IMUL,
    FAM_LD_BANK,
    FAM_LDST,
    FAM_NONE,
    FAM_SCALAR_LDST,
    FAM_SETP_INT,
    FAM_SHIFT,
    FL_FTZ,
    N_FIELDS,
    OP_CVT,
    OP_FADD,
    OP_FDIV,
    OP_FFMA,
    OP_FNS,
    OP_LD,
    OP_SETP,
    OP_ST,
    RND_NONE,
    RND_RN,
    RND_RZ,
    SP_CONST,
    SP_FPARAM,
    SP_GENERIC,
    SP_GLOBAL,
    SP_LOCAL,
    SP_PARAM,
    SP_SHARED,
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


def _ldst(op: int, space: int, vec: int = 1, d0: int = 3) -> np.ndarray:
    code = _row(op, T_S32)
    code[0, F_SPACE], code[0, F_VEC], code[0, F_D0], code[0, F_S0] = space, vec, d0 if op == OP_LD else -1, 4
    return code


@pytest.mark.parametrize(("row", "family"), [
    (_ldst(OP_LD, SP_GLOBAL), FAM_SCALAR_LDST),
    (_ldst(OP_ST, SP_GLOBAL), FAM_SCALAR_LDST),
    (_ldst(OP_LD, SP_SHARED), FAM_SCALAR_LDST),
    (_ldst(OP_ST, SP_SHARED), FAM_SCALAR_LDST),
    (_ldst(OP_LD, SP_CONST), FAM_LD_BANK),             # __constant__ data
    (_ldst(OP_LD, SP_PARAM), FAM_LD_BANK),             # a kernel parameter
    (_ldst(OP_LD, SP_PARAM, vec=2), FAM_LDST),
    (_ldst(OP_LD, SP_CONST, d0=-1), FAM_LDST),
    (_ldst(OP_ST, SP_PARAM), FAM_LDST),                # a fault (read-only), named by mem_ldst
    (_ldst(OP_ST, SP_CONST), FAM_LDST),
    (_ldst(OP_LD, SP_FPARAM), FAM_LDST),               # a device function's parameter: local memory
    (_ldst(OP_LD, SP_LOCAL), FAM_LDST),
    (_ldst(OP_LD, SP_GENERIC), FAM_LDST),
    (_ldst(OP_ST, SP_GENERIC), FAM_LDST),
    (_ldst(OP_LD, SP_GLOBAL, vec=2), FAM_LDST),
    (_ldst(OP_ST, SP_SHARED, vec=4), FAM_LDST),
    (_ldst(OP_LD, SP_GLOBAL, d0=-1), FAM_LDST),        # ld into the sink `_`
])
def test_scalar_global_shared_and_bank_accesses_have_families_of_their_own(row: np.ndarray, family: int) -> None:
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
    ({FAM_IADD, FAM_IMUL, FAM_SCALAR_LDST, FAM_LD_BANK, FAM_EXIT}, 0),  # integer indices, ld/st (vecadd)
    ({FAM_IADD, FAM_IMUL, FAM_SCALAR_LDST, FAM_LDST}, 1),     # a vector or generic access: mem_ldst
    ({FAM_IADD, FAM_SHIFT, FAM_FLOAT_PLAIN, FAM_SCALAR_LDST}, 1),  # float arithmetic, no branch (a saxpy)
    ({FAM_IADD, FAM_SCALAR_LDST, FAM_SETP_INT, FAM_BRA}, 2),  # a bounds check
    ({FAM_FLOAT, FAM_SCALAR_LDST}, 4),                        # rounding modes: everything
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


_VECADD_CHILD = """
import sys
import os
from pathlib import Path
import numpy as np
from tuiprof.collect.emu.device import EmuDevice, RecordChoice
from tuiprof.collect.emu.kernel import interp
from tuiprof.ptx.parse import parse_module
ptx, src = Path(sys.argv[1]), Path(sys.argv[2])
dev = EmuDevice(parse_module(ptx.read_text()), str(src), src.read_text(), record=RecordChoice(snapshot=(0,)))
a = dev.to_device(np.arange(256, dtype=np.int32))
c = dev.empty(256, np.int32)
dev.launch("kernel_vec_add", 4, 64, (c, a, a))
assert (dev.from_device(c) == 2 * np.arange(256)).all()
print(len(interp.mem_ldst.overloads), len(interp.ld_bank.overloads), len(interp.mem_atom.overloads))
"""


def test_a_vecadd_first_run_compiles_no_general_load_store(cuda_ptx: Compiler, tmp_path: Path) -> None:  # noqa: F811
    """Issue 23: a first run compiles what the kernel uses. vecadd's loads and stores are scalars
    of global memory and its parameters, so in a fresh process with an empty Numba cache its
    interpreter compiles `ld_bank` (called) and not `mem_ldst` (local, generic and vector
    accesses) nor the atomics."""
    import subprocess
    import sys

    src = ROOT / "demo_traces" / "vecadd.cu"
    cuda_ptx.file(src)
    ptx = cuda_ptx.out / "vecadd.sm_80.ptx"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    out = subprocess.run([sys.executable, "-c", _VECADD_CHILD, str(ptx), str(src)], env=env, capture_output=True,
                         text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["0", "1", "0"]


def test_a_kernel_runs_on_any_variant_that_holds_its_families(cuda_ptx: Compiler) -> None:  # noqa: F811
    """`EmuDevice.families` (what `tuiprof warmup` uses to compile each variant) runs vecadd on a
    larger variant with the same result; a variant that lacks one of its families is refused."""
    module, src, text = cuda_ptx.file(ROOT / "demo_traces" / "vecadd.cu")
    a = np.arange(256, dtype=np.int32)
    for families in (None, VARIANTS[2]):
        dev = EmuDevice(module, src, text, record=RecordChoice(snapshot=()), threads=1)
        dev.families = families
        c = dev.empty(256, np.int32)
        dev.launch("kernel_vec_add", 4, 64, (c, dev.to_device(a), dev.to_device(a + 7)))
        np.testing.assert_array_equal(dev.from_device(c), 2 * a + 7)
    dev = EmuDevice(module, src, text, record=RecordChoice(snapshot=()), threads=1)
    dev.families = frozenset({FAM_EXIT, FAM_SCALAR_LDST})
    with pytest.raises(ValueError, match="cannot run kernel_vec_add"):
        dev.launch("kernel_vec_add", 4, 64, (dev.empty(256, np.int32), dev.to_device(a), dev.to_device(a)))
