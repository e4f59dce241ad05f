"""PTX instrumentation (tuiprof.ptx.instrument) without a GPU: the instrumented PTX of every demo
kernel and of the CUDA corpus (the PTX front end's, the build's and the emulator's) assembles with
ptxas for sm_75, sm_80 and sm_90; the original
instructions survive in order with exactly one probe before each recorded access (two before a
cp.async); sites map onto the StaticOp ids of every kernel; guarded accesses fold their predicate
into the mask; kernels get per-CTA records at entry and before every exit. Running the probes and
decoding their buffers is tested against the emulator in test_instrument_emu.py."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.ptx_support import CUDA_DIR, DEMO_DIR, compile_nvcc, corpus_sources, find_nvcc, fixtures, source_for
from tuiprof.collect.gpu.records import site_to_op
from tuiprof.ptx import parse_module
from tuiprof.ptx.instrument import COMPRESSED_BIT, CTL_SYMBOL, SITE_BITS, Instrumented, instrument, is_instrumented
from tuiprof.ptx.module import Function, Instruction, Module, PtxError, Reg
from tuiprof.ptx.ops import defs_uses, memory_ops, static_ops

PTXAS = shutil.which("ptxas")
NVCC_FIXTURES = fixtures("nvcc")
BUILD_SOURCES = sorted(p for p in CUDA_DIR.glob("build_*.cu")
                       if p.stem not in ("build_syntax_error", "build_missing_include"))
EMU_SOURCES = sorted(CUDA_DIR.glob("emu_*.cu")) + [CUDA_DIR / "instrument_local.cu"]
SHARED_SOURCES = [p for p in corpus_sources() if p.stem != "ptx_extras"]
"""The PTX corpus files that the build and emulator tests use as well (one copy of each in tests/cuda)."""
ALL_DEMO_SOURCES = sorted(DEMO_DIR.glob("*.cu"))
PLAIN_PTX_INVALID = {"emu_alu.cu": "Arguments mismatch for instruction 'shl'"}
"""Corpus files whose *uninstrumented* PTX ptxas refuses already: emu_alu's inline asm shifts by a
.b64 register (``shl.b64 %rd, %rd, %rd``), which the emulator accepts on purpose and ptxas does not."""
OLDEST_TARGET = {"emu_bf16.cu": 80, "emu_collectives.cu": 80}
"""Corpus files that need a newer target than sm_75 (bf16 arithmetic and redux.sync are sm_80 and up)."""
needs_ptxas = pytest.mark.skipif(PTXAS is None, reason="ptxas is not installed")
needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")


def _target(ptx: str) -> int:
    return int(re.search(r"^\.target\s+sm_(\d+)", ptx, re.M).group(1))  # type: ignore[union-attr]


def assemble(ptx: str, arch: int, tmp: Path) -> subprocess.CompletedProcess[str]:
    src = tmp / f"k{arch}.ptx"
    src.write_text(ptx)
    return subprocess.run([str(PTXAS), f"-arch=sm_{arch}", str(src), "-o", str(tmp / f"k{arch}.cubin")],
                          capture_output=True, text=True, timeout=300)


def assert_assembles(ptx: str, tmp: Path) -> None:
    """ptxas accepts `ptx` for sm_75, sm_80 and sm_90 (from its own target up); the three run at once."""
    src = tmp / "k.ptx"
    src.write_text(ptx)
    archs = [a for a in (75, 80, 90) if a >= _target(ptx)]
    runs = {a: subprocess.Popen([str(PTXAS), f"-arch=sm_{a}", str(src), "-o", str(tmp / f"k{a}.cubin")],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for a in archs}
    for arch, proc in runs.items():
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"sm_{arch}: {out[:2000]}"


# --------------------------------------------------------------------------- assembling


@needs_ptxas
@pytest.mark.parametrize("fixture", NVCC_FIXTURES, ids=lambda p: p.name)
def test_instrumented_fixture_assembles(fixture: Path, tmp_path: Path) -> None:
    """Demos and corpus (the committed nvcc PTX, sm_75 and sm_80/sm_90 targets)."""
    ptx = fixture.read_text()
    result = instrument(ptx)
    assert result.sites, "every fixture has memory accesses"
    assert_assembles(result.ptx, tmp_path)


@needs_ptxas
@needs_nvcc
@pytest.mark.parametrize("src", BUILD_SOURCES + SHARED_SOURCES + ALL_DEMO_SOURCES + EMU_SOURCES, ids=lambda p: p.name)
def test_fresh_nvcc_compile_instrumented_assembles(src: Path, tmp_path: Path) -> None:
    """The rest of tests/cuda (the build and emulator corpora) and every demo, compiled now by the
    nvcc at hand."""
    arch = OLDEST_TARGET.get(src.name, 80 if "modern" in src.name else 75)
    ptx = compile_nvcc(src, arch, tmp_path / "k.ptx")
    if src.name in PLAIN_PTX_INVALID:  # excluded: ptxas refuses the plain PTX already
        r = assemble(ptx, arch, tmp_path)
        assert r.returncode != 0 and PLAIN_PTX_INVALID[src.name] in r.stderr, "it assembles now: include it"
        return
    assert_assembles(instrument(ptx).ptx, tmp_path)


# --------------------------------------------------------------------------- structure


def _norm(name: str) -> str:
    return name.split("~", 1)[0]


def _is_probe(ins: Instruction) -> bool:
    """An instruction the pass inserted: it names a probe register or label."""
    defs, uses = defs_uses(ins)
    regs = [_norm(r) for r in defs + uses]
    if any(r.startswith(("%tp", "%tuiprof_")) for r in regs):
        return True
    return any(getattr(o, "name", "").startswith("$L__tuiprof_") for o in ins.operands) or any(
        getattr(getattr(o, "base", None), "name", "") == CTL_SYMBOL for o in ins.operands)


def _key(ins: Instruction) -> tuple[object, ...]:
    """An instruction with scoped register names normalised (probe scopes renumber them)."""
    def op(o: object) -> object:
        if isinstance(o, Reg):
            return Reg(_norm(o.name))
        return re.sub(r"~\d+", "", repr(o))
    guard = (_norm(ins.guard[0]), ins.guard[1]) if ins.guard else None
    return (ins.opcode, ins.mods, guard, tuple(op(o) for o in ins.operands))


def _site_of(ins: Instruction, tag: int = 0) -> int | None:
    """The site id a probe's header selp names (``selp.b32 x, word|COMPRESSED, word, p``)."""
    if ins.opcode == "selp" and len(ins.operands) == 4 and hasattr(ins.operands[2], "value"):
        a, b = ins.operands[1], ins.operands[2]
        if hasattr(a, "value") and int(a.value) == int(b.value) | COMPRESSED_BIT:  # type: ignore[union-attr]
            word = int(b.value)  # type: ignore[union-attr]
            assert word >> SITE_BITS == tag
            return word & ((1 << SITE_BITS) - 1)
    return None


def check_structure(orig: Module, result: Instrumented) -> None:
    inst = parse_module(result.ptx)
    expected_sites = [(name, i, part) for name, f in orig.functions.items() for i, ins in enumerate(f.instructions)
                      for part, _ in enumerate(memory_ops(ins, i))]
    assert [(s.function, s.index, s.part) for s in result.sites] == expected_sites
    assert set(result.kernels) == set(orig.kernels)
    ids = result.site_ids()
    for name, f in orig.functions.items():
        g: Function = inst.functions[name]
        kept = [ins for ins in g.instructions if not _is_probe(ins)]
        assert [_key(i) for i in kept] == [_key(i) for i in f.instructions], name
        # the probes right before each original instruction name exactly its sites, in part order
        pending: list[int] = []
        k = 0
        for ins in g.instructions:
            if _is_probe(ins):
                s = _site_of(ins)
                if s is not None:
                    pending.append(s)
                continue
            want = [ids[(name, k, part)] for part, _ in enumerate(memory_ops(f.instructions[k], k))]
            assert pending == want, f"{name} instruction {k} (PTX line {f.instructions[k].ptx_line})"
            pending = []
            k += 1


@pytest.mark.parametrize("fixture", NVCC_FIXTURES + fixtures("nvrtc"), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_probe_before_every_access_and_nothing_else_changed(fixture: Path) -> None:
    ptx = fixture.read_text()
    orig = parse_module(ptx)
    check_structure(orig, instrument(ptx, orig))


@pytest.mark.parametrize("fixture", NVCC_FIXTURES, ids=lambda p: p.name)
def test_sites_cover_every_static_op(fixture: Path) -> None:
    """Op ids are the StaticOp table's: every op of every kernel has a site, and each site of the
    kernel (and the functions it calls) maps onto the op static_ops gives its instruction."""
    ptx = fixture.read_text()
    module = parse_module(ptx)
    result = instrument(ptx, module)
    src = source_for(fixture)
    for kernel in module.kernels:
        triples = static_ops(module, kernel, str(src), src.read_text())
        mapping = site_to_op(result.sites, triples)
        n_ops = len({op.id for _, _, op in triples})
        assert sorted(set(mapping[mapping >= 0].tolist())) == list(range(n_ops))
        ids = result.site_ids()
        for fn, index, op in triples:
            parts = [p for (f, i, p) in ids if f == fn and i == index]
            assert any(mapping[ids[(fn, index, p)]] == op.id for p in parts)


HAND = """
.version 8.0
.target sm_75
.address_size 64

.func helper(.param .b64 helper_param_0)
{
	.reg .pred %p<2>;
	.reg .b32 %r<3>;
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [helper_param_0];
	ld.u32 %r1, [%rd1+4];
	setp.eq.s32 %p1, %r1, 0;
	@%p1 exit;
	st.u32 [%rd1], %r1;
	ret;
}

.visible .entry k(.param .u64 k_param_0)
{
	.reg .pred %p<3>;
	.reg .b32 %r<6>;
	.reg .f32 %f<3>;
	.reg .b64 %rd<6>;
	.shared .align 4 .b8 tile[128];
	ld.param.u64 %rd1, [k_param_0];
	cvta.to.global.u64 %rd2, %rd1;
	mov.u32 %r1, %tid.x;
	setp.lt.u32 %p1, %r1, 7;
	mul.wide.u32 %rd3, %r1, 4;
	add.s64 %rd4, %rd2, %rd3;
	@%p1 ld.global.f32 %f1, [%rd4+-8];
	shl.b32 %r2, %r1, 2;
	mov.u32 %r3, tile;
	add.s32 %r4, %r3, %r2;
	@!%p1 st.shared.f32 [%r4], %f1;
	ld.shared.f32 %f2, [tile+4];
	atom.global.add.u32 %r5, [%rd4], 1;
	{
	.reg .pred p;
	setp.ne.u32 p, %r5, 0;
	@p red.global.add.u32 [%rd4+16], 2;
	}
	{
	.param .b64 param0;
	st.param.b64 [param0], %rd1;
	call.uni helper, (param0);
	}
	@%p1 ret;
	ret;
}
"""


@needs_ptxas
def test_hand_written_guards_scopes_symbols_and_exits(tmp_path: Path) -> None:
    module = parse_module(HAND)
    result = instrument(HAND, module)
    check_structure(module, result)
    assert_assembles(result.ptx, tmp_path)
    text = result.ptx
    # guards fold into the mask; the inline-asm scope's own predicate is used by its name there
    assert "vote.sync.ballot.b32 %tp_m, %p1, %tp_am;" in text
    assert "vote.sync.ballot.b32 %tp_m, !%p1, %tp_am;" in text
    assert "vote.sync.ballot.b32 %tp_m, p, %tp_am;" in text
    # addresses: a negative offset, a 32-bit shared register, a shared symbol plus offset
    assert "add.s64 %tp_a, %tp_a, -8;" in text
    assert "cvt.u64.u32 %tp_a, %r4;" in text
    assert "mov.u64 %tp_a, tile;" in text and "add.s64 %tp_a, %tp_a, 4;" in text
    # generic accesses in the device function classify their addresses
    helper = text[text.index(".func helper"):text.index(".visible .entry k")]
    assert helper.count("isspacep.shared") == 2 and helper.count("cvta.to.local.u64") == 2
    # exits: the kernel's two rets (one guarded) and the helper's exit (not its ret) end the CTA's time
    kernel = text[text.index(".visible .entry k"):]
    assert kernel.count("atom.global.max.u64") == 2 and helper.count("atom.global.max.u64") == 1
    assert kernel.count("%globaltimer") == 3 and kernel.count("%smid") == 1
    assert text.count(f".weak .global .align 16 .u64 {CTL_SYMBOL}[8];") == 1


EARLY_RETURN = """
.version 8.0
.target sm_75
.address_size 64

.visible .entry k(.param .u64 k_param_0, .param .u32 k_param_1)
{
	.reg .pred %p<2>;
	.reg .b32 %r<4>;
	.reg .b64 %rd<4>;
	.shared .align 4 .b8 s[1024];
	ld.param.u64 %rd1, [k_param_0];
	ld.param.u32 %r1, [k_param_1];
	mov.u32 %r2, %tid.x;
	setp.ge.u32 %p1, %r2, %r1;
	@%p1 bra $L__BB0_2;
	mov.u32 %r3, s;
	st.shared.u32 [%r3], %r2;
	bar.sync 0;
	cvta.to.global.u64 %rd2, %rd1;
	st.global.u32 [%rd2], %r2;
$L__BB0_2:
	ret;
}
"""


@needs_ptxas
def test_early_return_keeps_its_exit_join(tmp_path: Path) -> None:
    """`if (t >= n) return; ... __syncthreads(); ...`: the returning lanes' epilogue goes before the
    branch (its guard folded in) and the others' at the end of the code that falls into the
    `ret`, so the branch's lanes still meet only at the `ret` itself, where no convergence barrier
    holds them while the rest of the CTA waits at bar.sync (the early return deadlocked the
    instrumented kernel in the emulator)."""
    from tuiprof.ptx.cfg import ipdom

    module = parse_module(EARLY_RETURN)
    result = instrument(EARLY_RETURN, module)
    check_structure(module, result)
    assert_assembles(result.ptx, tmp_path)
    text = result.ptx
    assert re.search(r"\$L__BB0_2:\s*ret;", text)  # nothing between the join and the ret
    assert text.count("// tuiprof: exit") == 2 and "vote.sync.ballot.b32 %tpx_m, %p1, %tpx_a;" in text
    assert text.index("vote.sync.ballot.b32 %tpx_m, %p1") < text.index("@%p1 bra $L__BB0_2")
    assert text.index("st.global.u32 [%rd2], %r2;") < text.rindex("// tuiprof: exit") < text.index("$L__BB0_2:")
    f = parse_module(text).functions["k"]
    branch = next(i for i, ins in enumerate(f.instructions) if ins.guard and ins.guard[0] == "%p1")
    assert f.instructions[ipdom(f)[branch]].opcode == "ret"


def test_refusals() -> None:
    result = instrument(HAND)
    assert is_instrumented(result.ptx) and not is_instrumented(HAND)
    with pytest.raises(PtxError, match="already instrumented"):
        instrument(result.ptx)
    with pytest.raises(PtxError, match="module tag 300"):
        instrument(HAND, tag=300)
    with pytest.raises(PtxError, match="address_size 32"):
        instrument(HAND.replace(".address_size 64", ".address_size 32"))


def test_module_tag_in_every_site_word() -> None:
    result = instrument(HAND, tag=5)
    inst = parse_module(result.ptx)
    words = [_site_of(i, tag=5) for f in inst.functions.values() for i in f.instructions]
    assert sorted(w for w in words if w is not None) == list(range(len(result.sites)))


@needs_ptxas
@needs_nvcc
@pytest.mark.parametrize("name", ["ptx_local_mem", "ptx_generic_ptr", "ptx_sync_in_divergence"])
def test_debug_build_instrumented_assembles(name: str, tmp_path: Path) -> None:
    """-G code: nearly every access generic (the stack through %SP), all probed and classified."""
    out = tmp_path / "k.ptx"
    subprocess.run([find_nvcc(), "-ptx", "-G", "-arch=sm_75", str(CUDA_DIR / f"{name}.cu"), "-o", str(out)],
                   check=True, capture_output=True, timeout=300)
    ptx = out.read_text()
    module = parse_module(ptx)
    result = instrument(ptx, module)
    check_structure(module, result)
    assert "isspacep.local" in result.ptx
    assert_assembles(result.ptx, tmp_path)


# --------------------------------------------------------------------------- occupancy


class _PtxasDriver:
    """The parts of the GPU collector's Driver that `instrument_for` uses, answered by ptxas
    (sm_80, like the device's JIT compiler): a kernel's registers, static shared and local bytes
    per thread as ``ptxas -v`` reports them for the loaded PTX."""

    def __init__(self, tmp: Path, cc: tuple[int, int] = (8, 0), max_threads_per_sm: int = 2048) -> None:
        from tuiprof.collect.gpu.driver import DeviceInfo

        self.info = DeviceInfo(name="ptxas", compute_capability=cc, sm_count=108, clock_mhz=1410,
                               memory_clock_mhz=1215, driver="", library="", max_threads_per_sm=max_threads_per_sm)
        self.tmp = tmp
        self.loads = 0

    def load(self, ptx: str) -> dict[str, tuple[int, int, int]]:
        from tuiprof.toolchain.compilers import parse_ptxas_report

        self.loads += 1
        src = self.tmp / f"m{self.loads}.ptx"
        src.write_text(ptx)
        r = subprocess.run([str(PTXAS), "-v", "-arch=sm_80", str(src), "-o", str(src.with_suffix(".cubin"))],
                           capture_output=True, text=True, timeout=300, check=True)
        return parse_ptxas_report(r.stdout + r.stderr)

    def get_function(self, module: dict[str, tuple[int, int, int]], name: str) -> tuple[int, int, int]:
        return module[name]

    def function_attributes(self, fn: tuple[int, int, int]) -> tuple[int, int, int]:
        return fn


@needs_ptxas
@pytest.mark.parametrize("demo", ["matmul", "matmul_tiles", "transpose", "spmv", "cyclic_reduction"])
def test_instrumented_kernels_keep_the_plain_occupancy_unless_that_spills(demo: str, tmp_path: Path) -> None:
    """ptxas, plain and instrumented: each kernel keeps the register-limited warps per SM of its
    plain kernel and its local memory; a kernel that the cap makes spill (ptxas says so when it
    is forced) takes the next occupancy step down that does not spill, never lower than with no
    cap at all."""
    from types import SimpleNamespace

    from tuiprof.arch import load_arch
    from tuiprof.arch.occupancy import _registers_limit, register_cap
    from tuiprof.collect.gpu.device import instrument_for

    ptx = (Path(__file__).parents[1] / "ptx" / "nvcc" / f"demo_{demo}.sm75.ptx").read_text()
    module = parse_module(ptx)
    drv = _PtxasDriver(tmp_path)
    arch = load_arch("a100")
    warps = lambda regs: min(arch.max_warps_per_sm, _registers_limit(arch, regs, 1))  # noqa: E731
    plain = drv.load(ptx)
    result = instrument_for(SimpleNamespace(ptx=ptx), module, drv)  # type: ignore[arg-type]
    check_structure(module, result)
    inst = drv.load(result.ptx)
    uncapped = drv.load(instrument(ptx, module).ptx)
    forced = drv.load(instrument(ptx, module, max_registers={k: register_cap(arch, r[0])
                                                             for k, r in plain.items()}).ptx)
    for k, (regs, shared, local) in plain.items():
        assert inst[k][1:] == (shared, local), k  # no spill, the same shared memory
        if forced[k][2] > local:
            assert warps(uncapped[k][0]) <= warps(inst[k][0]) < warps(regs), (k, regs, inst[k][0])
        else:
            assert warps(inst[k][0]) == warps(regs), (k, regs, inst[k][0])


@needs_ptxas
def test_register_caps_follow_the_device_warp_slots(tmp_path: Path) -> None:
    """A CC 8.6 device runs 48 warps per SM, not the A100 preset's 64: vecadd (12 registers plain)
    may take 40 there and keep its occupancy (65536 / (48 x 32) = 42.7, in steps of 8), 32 on an A100."""
    from types import SimpleNamespace

    from tuiprof.collect.gpu.device import instrument_for

    ptx = (Path(__file__).parents[1] / "ptx" / "nvcc" / "demo_vecadd.sm75.ptx").read_text()
    module = parse_module(ptx)
    for cc, threads, cap in (((8, 6), 1536, 40), ((8, 0), 2048, 32)):
        drv = _PtxasDriver(tmp_path, cc, threads)
        result = instrument_for(SimpleNamespace(ptx=ptx), module, drv)  # type: ignore[arg-type]
        assert re.search(rf"\.entry kernel_vec_add\([^)]*\)\s*\.maxnreg {cap}\b", result.ptx), cc
