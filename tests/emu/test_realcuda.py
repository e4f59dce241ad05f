"""Real CUDA as it is written (issue 22): C++ kernel names, predefined PTX identifiers, constant
and device variables, textures and surfaces, kernels in headers, launch scripts `tuiprof init`
writes, pointers, launch bounds, PTX from other compilers, whole programs with Thrust or CUB.

The corpus (tests/realcuda/, 18 kernels written in production idioms) runs under its generated
launch script and under a hand-written one that checks the kernel's output against NumPy; two of
each kind run here, all of them in the slow tests.
"""

from __future__ import annotations

import re
import runpy
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.emu_support import Compiler, cuda_ptx  # noqa: F401 (cuda_ptx is a fixture)
from tests.support.ptx_support import find_nvcc, require_compiler
from tuiprof.collect.emu.device import EmuDevice, RecordChoice
from tuiprof.errors import TuiprofError
from tuiprof.toolchain.demangle import display_name, itanium_demangle
from tuiprof.toolchain.names import find_symbol, read_name, source_enums

CORPUS = Path(__file__).resolve().parents[1] / "realcuda"
KERNELS = sorted(p.stem for p in CORPUS.glob("*.cu"))
needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is needed")


# --------------------------------------------------------------------------- item 1: C++ names

DEMANGLED = {
    "_ZN4blas4axpyIfLi4EEEviT_PKS1_PS1_": "void blas::axpy<float, 4>(int, float, float const*, float*)",
    "_ZN3img8tone_mapILNS_5CurveE1EEEvPKhPhj":
        "void img::tone_map<(img::Curve)1>(unsigned char const*, unsigned char*, unsigned int)",
    "_Z10block_sumsILi128ELi4EEvPKiPiS2_": "void block_sums<128, 4>(int const*, int*, int*)",
    "_Z16residual_forwardP13__nv_bfloat16PKS_S2_i":
        "residual_forward(__nv_bfloat16*, __nv_bfloat16 const*, __nv_bfloat16 const*, int)",
    "_ZZN4gemm11sgemm_tiledILi16EEEvPKfS2_PfiiiE2As": "gemm::sgemm_tiled<16>(float const*, float const*, float*, int, int, int)::As",
    "_Z6reduceILi256ELb1EEvPKfPf": "void reduce<256, true>(float const*, float*)",
    "_ZN3cub17CUB_300001_SM_8006detail6reduce12ReduceKernelIfLj256EEEvPKT_PS4_":
        "void cub::CUB_300001_SM_800::detail::reduce::ReduceKernel<float, 256u>(float const*, float*)",
}


@pytest.mark.parametrize("symbol", list(DEMANGLED))
def test_own_demangler_reads_kernel_names(symbol: str) -> None:
    assert itanium_demangle(symbol) == DEMANGLED[symbol]


@pytest.mark.parametrize("symbol, shown, short", [
    ("_ZN4blas4axpyIfLi4EEEviT_PKS1_PS1_", "blas::axpy<float, 4>", "axpy<float, 4>"),
    ("_ZN3img8tone_mapILNS_5CurveE1EEEvPKhPhj", "img::tone_map<(img::Curve)1>", "tone_map<(img::Curve)1>"),
    ("_Z10block_sumsILi128ELi4EEvPKiPiS2_", "block_sums<128, 4>", "block_sums<128, 4>"),
    ("_Z16residual_forwardP13__nv_bfloat16PKS_S2_i", "residual_forward", "residual_forward"),
    ("_ZN3cub17CUB_300001_SM_8006detail6reduce12ReduceKernelIfLj256EEEvPKT_PS4_",
     "cub::CUB_300001_SM_800::detail::reduce::ReduceKernel<float, 256u>", "ReduceKernel<float, 256u>"),
    ("_Z1kIN3cub3SumELi4EEvPfT_", "k<cub::Sum, 4>", "k<cub::Sum, 4>"),
    ("_ZN12_GLOBAL__N_16kernelEPf", "(anonymous namespace)::kernel", "kernel"),
    ("_Z6kernelPf.constprop.0", "kernel", "kernel"),
    ("kernel_vec_add", "kernel_vec_add", "kernel_vec_add"), ("_Znot_a_name", "_Znot_a_name", "_Znot_a_name")])
def test_kernels_are_shown_by_the_names_their_source_writes(symbol: str, shown: str, short: str) -> None:
    """The report, the UI and the CLI show `sum_vec4<256>`, not `_Z8sum_vec4ILi256EEvPK6float4Pfi`:
    no return type, no parameter list; a name no demangler reads is shown as it is. Unqualified
    (the export's file name), the scopes go, never those inside template arguments."""
    assert display_name(symbol) == shown
    assert display_name(symbol, qualified=False) == short


SYMBOLS = list(DEMANGLED)[:4] + ["_ZN4blas4axpyIdLi2EEEviT_PKS1_PS1_", "_ZN3img8tone_mapILNS_5CurveE2EEEvPKhPhj",
                                 "_Z6reduceILi256ELb1EEvPKfPf", "plain_c"]
ENUMS = source_enums(["namespace img { enum class Curve : int { Identity = 0, Gamma = 1, Invert = 2 }; }"])


@pytest.mark.parametrize("written, symbol", [
    ("blas::axpy<float, 4>", 0), ("axpy<double,2>", 4), ("blas::axpy<double, 2u>", 4),
    ("img::tone_map<img::Curve::Gamma>", 1), ("tone_map<Curve::Invert>", 5), ("block_sums", 2),
    ("reduce<256, true>", 6), ("void block_sums<128, 4>(const int*, int*, int*)", 2), ("residual_forward", 3),
    ("plain_c", 7)])
def test_kernels_by_the_names_a_programmer_writes(written: str, symbol: int) -> None:
    assert find_symbol(written, SYMBOLS, enums=ENUMS) == SYMBOLS[symbol]


def test_ambiguous_and_unknown_names_list_the_kernels_demangled() -> None:
    with pytest.raises(TuiprofError) as e:
        find_symbol("axpy", SYMBOLS, enums=ENUMS)
    assert "ambiguous" in e.value.message
    assert "void blas::axpy<float, 4>(int, float, float const*, float*)" in e.value.hint and "_ZN4blas" not in e.value.hint
    with pytest.raises(TuiprofError) as e:
        find_symbol("nope", SYMBOLS)
    lines = e.value.hint.splitlines()
    assert len(lines) > 2 and all(len(line) <= 110 for line in lines[1:]) and "plain_c" in e.value.hint


def test_names_match_across_architecture_namespaces() -> None:
    """The script tuiprof init wrote names CUB's sm_80 namespace; a report compiled for sm_90 has
    the sm_90 one: the same kernel."""
    sm80 = "_ZN3cub17CUB_300001_SM_8006detail6reduce12ReduceKernelIfLj256EEEvPKT_PS4_"
    sm90 = sm80.replace("17CUB_300001_SM_800", "17CUB_300001_SM_900")
    assert find_symbol(sm80, [sm90]) == sm90
    assert find_symbol("cub::detail::reduce::ReduceKernel<float, 256>", [sm90]) == sm90
    assert read_name("void ns::f<cuda::std::__4::plus<float> >(int)").scopes == (
        ("ns", None), ("f", ("cuda::std::plus<float>",)))
    internal = "_INTERNAL_1dcb6e62_7_conv_cu_c14d0730"  # nvcc's namespace of a static variable
    static = f"_ZN{len(internal)}{internal}8c_KernelE"
    assert find_symbol("c_Kernel", [static], what="variable") == static


# --------------------------------------------------------------------------- item 2: predefined identifiers


PTX_HEAD = ".version 8.4\n.target sm_80\n.address_size 64\n"


def test_warp_sz_and_a_parse_error_that_names_the_source_line() -> None:
    from tuiprof.ptx.module import Imm, PtxError
    from tuiprof.ptx.parse import parse_module

    body = (".visible .entry k()\n{\n\t.reg .b32 %r<3>;\n\t.loc 1 7 3\n\tmov.u32 %r1, WARP_SZ;\n"
            "\trem.u32 %r2, %r1, WARP_SZ;\n\t.loc 1 9 3\n\t{bogus}\n\tret;\n}\n\t.file 1 \"/src/k.cu\"\n")
    m = parse_module(PTX_HEAD + body.replace("\t{bogus}\n", ""))
    ins = m.functions["k"].instructions
    assert ins[0].operands[1] == Imm(32, "WARP_SZ") and ins[1].operands[2] == Imm(32, "WARP_SZ")
    with pytest.raises(PtxError) as e:
        parse_module(PTX_HEAD + body.replace("{bogus}", "frob.u32 %r1, %r2"))
    assert "(k.cu:9)" in e.value.message and "newer compiler" not in e.value.hint and "8.4" in e.value.hint
    with pytest.raises(PtxError) as e:
        parse_module(PTX_HEAD.replace("8.4", "10.1") + body.replace("{bogus}", "frob.u32 %r1, %r2"))
    assert "newer" in e.value.hint


# --------------------------------------------------------------------------- the corpus, in process


def run_check(compiled: tuple[Any, str, str], name: str, **options: Any) -> EmuDevice:
    """Run tests/realcuda/<name>_check.py (which asserts the kernel's output) on an EmuDevice."""
    module, src, text = compiled
    headers = {str(p): p.read_text() for p in (CORPUS / "include").glob("*.cuh")}
    dev = EmuDevice(module, src, text, headers=headers, **options)
    runpy.run_path(str(CORPUS / f"{name}_check.py"))["setup"](dev)
    return dev


def corpus(cuda_ptx: Compiler, name: str) -> tuple[Any, str, str]:
    return cuda_ptx.file(CORPUS / f"{name}.cu")


def test_constant_memory_set_by_the_script_and_counted_as_the_constant_cache(cuda_ptx: Compiler) -> None:
    """dev.set_symbol fills __constant__ tables; ld.const is an op of space const: the filter
    taps are broadcasts (1 request per warp access), the gamma table indexed by the data is
    serialised (as many requests as distinct bytes a warp reads)."""
    from tuiprof.model.constant import const_op_stats
    from tuiprof.trace.data import Launch, Provenance, Snapshot, SourceFile, Trace

    def stats(dev: EmuDevice) -> dict[str, Any]:
        r = dev.recorded
        assert r is not None
        t = Trace(Launch(r.kernel, r.grid, r.block, 0), r.ops, Snapshot(r.cta_ids), r.warp_offsets, r.warp_cta,
                  r.warp_index, r.op, r.mask, r.addr, (SourceFile("k.cu", ""),), Provenance("emulator", "a100"))
        return {t.ops[i].label: s for i, s in const_op_stats(t, 33).items()}

    taps = stats(run_check(corpus(cuda_ptx, "conv_rows_const"), "conv_rows_const"))
    assert taps["c_Kernel[KERNEL_RADIUS - j]"].passes == 1.0 and taps["c_Kernel[KERNEL_RADIUS - j]"].latency == 33
    dev = run_check(corpus(cuda_ptx, "lut_enum"), "lut_enum")
    lut = stats(dev)["c_gamma_lut[v]"]
    assert lut.passes > 10 and lut.worst <= 32 and lut.conflicted == 1.0
    assert np.array_equal(dev.get_symbol("c_gamma_lut"), np.round(255 * (np.arange(256) / 255) ** (1 / 2.2)).astype(np.uint8))
    with pytest.raises(TuiprofError, match="do not fit"):
        dev.set_symbol("c_gamma_lut", np.zeros(300, np.uint8))


def test_device_variables_and_their_scalar_labels(cuda_ptx: Compiler) -> None:
    dev = run_check(corpus(cuda_ptx, "device_globals"), "device_globals")
    assert [(o.kind, o.label) for o in dev.recorded.ops] == [  # type: ignore[union-attr]
        ("load", "data[i]"), ("load", "g_scale"), ("store", "data[i]"), ("atomic", "atomicAdd(&g_visits, 1ull)")]


def test_header_kernel_ops_are_on_the_headers_lines(cuda_ptx: Compiler) -> None:
    dev = run_check(corpus(cuda_ptx, "heat_header"), "heat_header")
    ops = dev.recorded.ops  # type: ignore[union-attr]
    assert {o.file for o in ops} == {"heat_step.cuh", "stencil_ops.cuh"}
    text = (CORPUS / "include" / "heat_step.cuh").read_text().splitlines()
    for o in ops:
        lines = (CORPUS / "include" / o.file).read_text().splitlines()
        assert o.label and o.label in lines[o.line - 1], o
    assert any(o.label == "u_next[y * nx + x]" and "u_next" in text[o.line - 1] for o in ops)


def test_pointers_null_and_into_the_middle_of_a_buffer(cuda_ptx: Compiler) -> None:
    run_check(corpus(cuda_ptx, "optional_bias"), "optional_bias")


def test_launch_bounds_are_honoured_and_imply_registers(cuda_ptx: Compiler) -> None:
    from tuiprof.arch.presets import load_arch
    from tuiprof.collect.pipeline import bounded_resources

    compiled = corpus(cuda_ptx, "tiled_gemm_bounds")
    run_check(compiled, "tiled_gemm_bounds")  # its script checks that a 1024-thread launch fails
    fn = next(f for f in compiled[0].kernels.values())
    assert fn.maxntid == (256, 1, 1) and fn.minnctapersm == 4
    res = bounded_resources(None, fn, load_arch("a100"))
    assert res is not None and res.registers_per_thread == 64  # 4 CTAs of 256 threads in 64 Ki registers


# --------------------------------------------------------------------------- item 4: textures and surfaces


def _bilinear(img: np.ndarray, x: np.ndarray, y: np.ndarray, modes: tuple[str, str]) -> np.ndarray:
    """Linear filtering as the CUDA guide defines it, for one channel (weights in 1.8 fixed point)."""
    h, w = img.shape
    xb, yb = x.astype(np.float64) - 0.5, y.astype(np.float64) - 0.5
    i0, j0 = np.floor(xb).astype(int), np.floor(yb).astype(int)
    a = np.floor((xb - i0) * 256 + 0.5) / 256
    b = np.floor((yb - j0) * 256 + 0.5) / 256

    def index(i: np.ndarray, n: int, mode: str) -> np.ndarray:
        return np.clip(i, 0, n - 1)  # wrap and mirror fall back to clamp for unnormalized coordinates

    def t(i: np.ndarray, j: np.ndarray) -> np.ndarray:
        return img[index(j, h, modes[1]), index(i, w, modes[0])]

    return (1 - a) * (1 - b) * t(i0, j0) + a * (1 - b) * t(i0 + 1, j0) + (1 - a) * b * t(i0, j0 + 1) + a * b * t(i0 + 1, j0 + 1)


def test_texture_fetches_and_surfaces(cuda_ptx: Compiler) -> None:
    compiled = cuda_ptx("emu_texture")
    module, src, text = compiled
    dev = EmuDevice(module, src, text, record=RecordChoice("fetch_forms", snapshot=[0]))
    rng = np.random.default_rng(1)
    a1, a2, a3 = rng.random(20).astype(np.float32), rng.random((6, 9)).astype(np.float32), rng.random((4, 5, 6)).astype(np.float32)
    a4 = rng.integers(0, 256, (3, 7, 4)).astype(np.uint8)
    t1 = dev.texture(a1)
    t2 = dev.texture(a2, filter="linear", address_mode=("wrap", "mirror"))
    t3 = dev.texture(a3, address_mode="border")
    t4 = dev.texture(a4, channels=4)
    f, iv, uv, g = dev.zeros((4, 64), np.float32), dev.zeros(64, np.int32), dev.zeros(64, np.uint32), dev.zeros((64, 4), np.float32)
    dev.launch("fetch_forms", 1, 64, (t1, t2, t3, t4, f, iv, uv, g))
    F, i = dev.from_device(f), np.arange(64)
    np.testing.assert_array_equal(F[0], a1[np.clip(i - 3, 0, 19)])
    np.testing.assert_array_equal(F[1], a1[np.clip(np.floor(np.float32(0.37) * i - np.float32(2.0)), 0, 19).astype(int)])
    x, y = (np.float32(0.3) * i).astype(np.float32), (np.float32(0.25) * i - np.float32(1.0)).astype(np.float32)
    np.testing.assert_allclose(F[2], _bilinear(a2, x, y, ("wrap", "mirror")), rtol=1e-5, atol=1e-6)
    xs, zs = (0.5 + i % 5).astype(np.int64), np.floor(0.75 * (i % 3)).astype(np.int64)
    want3 = np.where(xs < 6, a3[np.minimum(zs, 3), 1, np.minimum(xs, 5)], 0.0)  # border: 0 outside
    np.testing.assert_array_equal(F[3], want3.astype(np.float32))
    gx = (np.float32(0.4) * i).astype(np.float64) - 0.5
    g0 = np.clip(np.floor(gx).astype(int), 0, 8)
    g1 = np.clip(np.floor(gx).astype(int) + 1, 0, 8)
    np.testing.assert_array_equal(dev.from_device(g), np.stack([a2[1, g0], a2[1, g1], a2[0, g1], a2[0, g0]], axis=1))
    np.testing.assert_array_equal(dev.from_device(iv), a4[1, i % 7, 0].astype(np.int32))
    np.testing.assert_array_equal(dev.from_device(uv), a4[0, i % 7].copy().view(np.uint32).reshape(-1))
    rec = dev.recorded
    assert rec is not None and {o.space for o in rec.ops if o.label.startswith("tex")} == {"texture"}
    # surfaces: read in place, written in place
    src_buf, dst_buf = dev.to_device(rng.random((5, 40)).astype(np.float32)), dev.zeros((5, 40), np.float32)
    dev.launch("surface_copy", (3, 1), (16, 8), (dev.surface(src_buf), dev.surface(dst_buf), np.int32(40), np.int32(5)))
    np.testing.assert_array_equal(dev.from_device(dst_buf), 2 * dev.from_device(src_buf) + 1)
    with pytest.raises(TuiprofError, match=r"texture/surface instruction tex\.level\.2d.* is not supported yet \(emu_texture\.cu:\d+"):
        dev.launch("mip_level", 1, 32, (t2, f))
    with pytest.raises(TuiprofError, match="no texture object"):
        dev.launch("fetch_forms", 1, 64, (np.uint64(12345), t2, t3, t4, f, iv, uv, g))


# --------------------------------------------------------------------------- items 6, 10: scripts and PTX files, by the CLI


def _record(tmp: Path, name: str, script: str, capsys: pytest.CaptureFixture[str]) -> Any:
    from tuiprof.cli.main import main
    from tuiprof.trace.io import load_trace

    out = tmp / f"{name}.tptrace"
    assert main(["record", str(tmp / name), "--launch", str(tmp / script), "--backend", "emu", "-o", str(out)]) == 0, \
        capsys.readouterr().err
    return load_trace(out)


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the corpus, the build cache in the test's folder."""
    require_compiler()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    shutil.copytree(CORPUS, tmp_path / "corpus")
    return tmp_path / "corpus"


def _generated(work: Path, name: str, capsys: pytest.CaptureFixture[str]) -> Any:
    from tuiprof.cli.main import main

    assert main(["init", str(work / f"{name}.cu"), "-o", str(work / f"{name}_gen.py")]) == 0, capsys.readouterr().err
    return _record(work, f"{name}.cu", f"{name}_gen.py", capsys)


FAST = ("conv_rows_const", "lut_enum")


@pytest.mark.parametrize("name", FAST)
def test_generated_script_runs_as_written(work: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    text_name = {"conv_rows_const": "convolutionRows", "lut_enum": "img::tone_map<img::Curve::Gamma>"}[name]
    trace = _generated(work, name, capsys)
    script = (work / f"{name}_gen.py").read_text()
    assert f"dev.launch('{text_name}'" in script and "dev.set_symbol(" in script
    assert any(o.space == "const" for o in trace.ops)
    if name == "conv_rows_const":
        assert "block = (32, 4, 1)" in script  # blockIdx.x * ROWS_BLOCKDIM_X + threadIdx.x, blockIdx.y * 4


@pytest.mark.slow
@pytest.mark.parametrize("name", [k for k in KERNELS if k not in FAST])
def test_generated_script_runs_as_written_slow(work: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _generated(work, name, capsys)
    assert trace.n_accesses > 0


@pytest.mark.parametrize("name", ["cub_block_sum"])
def test_checked_script_passes(work: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _record(work, f"{name}.cu", f"{name}_check.py", capsys).n_accesses > 0
    assert " warp accesses of block_sums<128, 4> (" in capsys.readouterr().err  # as the script names it


@pytest.mark.slow
@pytest.mark.parametrize("name", [k for k in KERNELS if k != "cub_block_sum"])
def test_checked_script_passes_slow(work: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _record(work, f"{name}.cu", f"{name}_check.py", capsys).n_accesses > 0


def test_init_compiles_for_the_arch_report_uses(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """tuiprof init names kernels so that a report compiled for another arch finds them (CUB's
    architecture namespaces differ), and writes ARCH when asked for one."""
    from tuiprof.cli.main import main

    assert main(["init", str(work / "cub_block_sum.cu"), "--arch", "h100", "-o", str(work / "g.py")]) == 0
    text = (work / "g.py").read_text()
    assert "ARCH = 'h100'" in text and "dev.launch('block_sums<128, 4>'" in text and "block = (128, 1, 1)" in text


def test_numba_ptx_profiles_on_its_python_lines(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Numba kernel's PTX (numba.cuda.compile_ptx: no GPU) profiled directly: its ops on the
    .py file's lines, the file embedded in the trace."""
    folder = work / "numba"
    ptx = (folder / "saxpy_numba.ptx").read_text()
    ptx = re.sub(r'(\.file\s+1\s+)"[^"]*"', lambda m: f'{m.group(1)}"{folder / "saxpy_numba.py"}"', ptx)
    (folder / "saxpy_numba.ptx").write_text(ptx)
    trace = _record(folder, "saxpy_numba.ptx", "saxpy_numba_launch.py", capsys)
    assert [(o.file, o.line, o.kind, o.label) for o in trace.ops] == [
        ("saxpy_numba.py", 10, "load", "x[i]"), ("saxpy_numba.py", 10, "load", "y[i]"),
        ("saxpy_numba.py", 10, "store", "out[i]")]
    assert [s.name for s in trace.sources] == ["saxpy_numba.py"] and "cuda.grid(1)" in trace.sources[0].text


def test_numba_compiles_ptx_tuiprof_reads() -> None:
    """numba.cuda.compile_ptx's own output, fresh (skipped without libNVVM)."""
    pytest.importorskip("numba.cuda")
    from tuiprof.ptx.parse import parse_module

    mod = runpy.run_path(str(CORPUS / "numba" / "saxpy_numba.py"))
    try:
        ptx = mod["compile_ptx"]()
    except Exception as exc:  # noqa: BLE001 - no libNVVM here
        pytest.skip(f"numba cannot compile PTX here: {str(exc)[:80]}")
    module = parse_module(ptx)
    assert find_symbol("saxpy", list(module.kernels)) in module.kernels


# --------------------------------------------------------------------------- item 9: whole programs


def test_build_takes_nvcc_arguments_flags_first() -> None:
    from tuiprof.cli.main import build_parser, parse_command_line

    args = parse_command_line(build_parser(), ["build", "-I", "inc", "-o", "app", "a.cu", "--kernel", "k"])
    assert args.nvcc_args == ["-I", "inc", "-o", "app", "a.cu"] and args.kernels == ["k"]
    args = parse_command_line(build_parser(), ["build", "--", "-O3", "a.cu"])
    assert args.nvcc_args == ["-O3", "a.cu"]


def test_instrumenting_a_large_module_is_linear() -> None:
    """A module of many probed accesses instruments in well under a second (the splices were
    quadratic: 22 s for Thrust's radix sort), and `only` leaves the other kernels as they were."""
    import time

    from tuiprof.ptx.instrument import instrument
    from tuiprof.ptx.parse import parse_module

    body = "".join(f"\tld.global.f32 %f1, [%rd1+{4 * k}];\n\tst.global.f32 [%rd1+{4 * k}], %f1;\n" for k in range(3000))
    kernel = (".visible .entry k{n}(.param .u64 p)\n{{\n\t.reg .b64 %rd<2>;\n\t.reg .f32 %f<2>;\n"
              "\tld.param.u64 %rd1, [p];\n" + body + "\tret;\n}}\n")
    ptx = PTX_HEAD + kernel.format(n=1) + kernel.format(n=2)
    module = parse_module(ptx)
    start = time.perf_counter()
    out = instrument(ptx, module)
    assert time.perf_counter() - start < 5 and len(out.sites) == 12000
    one = instrument(ptx, module, only=["k2"])
    assert one.kernels == ("k2",) and len(one.sites) == 6000 and kernel.format(n=1) in one.ptx


THRUST_MAIN = """#include <cstdio>
#include <thrust/device_vector.h>
#include <thrust/sort.h>
#include "scale.cuh"
int main() {
    thrust::device_vector<float> v(1 << 12);
    thrust::sequence(v.begin(), v.end());
    launch_scale(thrust::raw_pointer_cast(v.data()), (int)v.size());
    thrust::sort(v.begin(), v.end());
    std::printf("%f\\n", (float)v[0]);
    return 0;
}
"""
SCALE_CUH = "void launch_scale(float* x, int n);\n"
SCALE_CU = """#include "scale.cuh"
__global__ void scale(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }
void launch_scale(float* x, int n) { scale<<<(n + 255) / 256, 256>>>(x, n); }
"""
CUB_MAIN = """#include <cub/device/device_reduce.cuh>
#include "inc/util.cuh"
int main() {
    float* d; float* out; void* tmp = nullptr; size_t bytes = 0;
    cudaMalloc(&d, 4096 * sizeof(float)); cudaMalloc(&out, sizeof(float));
    fill(d, 4096);
    cub::DeviceReduce::Sum(tmp, bytes, d, out, 4096);
    cudaMalloc(&tmp, bytes);
    cub::DeviceReduce::Sum(tmp, bytes, d, out, 4096);
    return 0;
}
"""
UTIL_CUH = "void fill(float* d, int n);\n"
UTIL_CU = """#include "util.cuh"
__global__ void fill_kernel(float* d, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) d[i] = 1.0f; }
void fill(float* d, int n) { fill_kernel<<<(n + 127) / 128, 128>>>(d, n); }
"""


@needs_nvcc
@pytest.mark.slow
@pytest.mark.parametrize("program", ["thrust", "cub"])
def test_whole_program_builds_with_thrust_or_cub(program: str, tmp_path: Path) -> None:
    """Two multi-file programs with Thrust or CUB build instrumented: the program's own kernels
    probed, the library's left as they are (then one chosen by --kernel)."""
    from tuiprof.toolchain.wholeprog import build_instrumented

    if program == "thrust":
        (tmp_path / "main.cu").write_text(THRUST_MAIN)
        (tmp_path / "scale.cuh").write_text(SCALE_CUH)
        (tmp_path / "scale.cu").write_text(SCALE_CU)
        args, own = ["-arch=sm_80", "-o", "app", "main.cu", "scale.cu"], "scale"
    else:
        (tmp_path / "inc").mkdir()
        (tmp_path / "main.cu").write_text(CUB_MAIN)
        (tmp_path / "inc" / "util.cuh").write_text(UTIL_CUH)
        (tmp_path / "util.cu").write_text(UTIL_CU)
        args, own = ["-I", "inc", "-arch=sm_80", "-o", "app", "main.cu", "util.cu"], "fill_kernel"
    prog = build_instrumented(args, cwd=tmp_path)
    assert [read_name(itanium_demangle(k) or k).scopes[-1][0] for k in prog.kernels] == [own]
    assert (tmp_path / "app").is_file()
    library = next(k for m in prog.modules for k in m.plain_kernels if k not in prog.kernels)
    one = build_instrumented(args, cwd=tmp_path, kernels=(library,))
    assert one.kernels == (library,)
