"""tuiprof.toolchain: CUDA source -> Program with nvcc and with NVRTC, kernel resources checked
against ptxas's own report, errors, flags, the target floor, the cache; and `tuiprof init`.

Truth comes from outside the code under test: ptxas -v run by the test itself, the sizes of the
arrays written in the kernels' source, `nvcc --list-gpu-arch`, and hand-written tables of the
kernels' parameter types.
"""

from __future__ import annotations

import ast
import os
import re
import runpy
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.support.ptx_support import run_without_nvcc
from tuiprof.cli.main import main
from tuiprof.toolchain import BuildError, Program, build_program, choose_target, locate
from tuiprof.toolchain import cache as build_cache
from tuiprof.toolchain.cubin import kernel_resources, read_elf
from tuiprof.toolchain.demangle import demangle
from tuiprof.toolchain.diagnostics import summarize_errors
from tuiprof.toolchain.flags import normalize_flags
from tuiprof.toolchain.init_script import write_launch_script
from tuiprof.toolchain.locate import find_nvcc, nvrtc_compiler
from tuiprof.toolchain.signature import entry_params, kernel_signatures, parse_param

ROOT = Path(__file__).resolve().parents[2]
CUDA = Path(__file__).resolve().parents[1] / "cuda"
NVCC = find_nvcc()
HAS_NVRTC = nvrtc_compiler() is not None
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="needs nvcc (the CUDA toolkit)")
needs_nvrtc = pytest.mark.skipif(not HAS_NVRTC, reason="needs cuda-bindings with the NVRTC wheel")
COMPILERS = [pytest.param("nvcc", marks=needs_nvcc), pytest.param("nvrtc", marks=needs_nvrtc)]

CORPUS = ["ptx_spmv_csr.cu", "ptx_matmul_tiled.cu", "ptx_local_mem.cu", "ptx_half_double.cu",
          "ptx_template_saxpy.cu", "ptx_vector_loads.cu", "ptx_histogram_atomic.cu", "build_modern.cu", "build_cxx.cu"]

# Bytes declared in the sources: __shared__ arrays (static shared per CTA) and __constant__ arrays.
STATIC_SHARED = {
    "matmul_tiled": 2 * 16 * 16 * 4,   # As[TILE][TILE] and Bs[TILE][TILE] floats, TILE 16
    "transpose_dyn": 0,                # extern __shared__ only: dynamic, not static
    "histogram_shared": 256 * 4,       # unsigned int sh[256]
    "histogram_global": 0,
    "shared_vec": 128 * 16,            # float4 s[128]
    "async_copy": 256 * 4,             # float buf[256]
    "spmv_csr": 0,
}
CONST_BYTES = {"ptx_local_mem.cu": 16 * 4, "ptx_spmv_csr.cu": 0, "ptx_matmul_tiled.cu": 0}  # float coeffs[16]


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture(autouse=True)
def private_cache(shared_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every build in these tests caches under a temporary folder, never the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared_cache))
    return shared_cache


def build(name: str, compiler: str, cc: tuple[int, int] = (8, 0), **kw: object) -> Program:
    return build_program(CUDA / name, compute_capability=cc, compiler=compiler, **kw)  # type: ignore[arg-type]


def ptxas_report(ptx: str, target: str, workdir: Path) -> tuple[dict[str, tuple[int, int, int]], bytes]:
    """Run ptxas -v ourselves: kernel -> (registers, smem bytes, stack bytes), and the cubin."""
    src = workdir / "k.ptx"
    src.write_text(ptx)
    assert NVCC is not None
    ptxas = shutil.which("ptxas") or str(Path(NVCC).parent / "ptxas")
    out = subprocess.run([ptxas, "-v", f"-arch={target}", str(src), "-o", str(workdir / "k.cubin")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return parse_v(out.stdout + out.stderr), (workdir / "k.cubin").read_bytes()


def parse_v(text: str) -> dict[str, tuple[int, int, int]]:
    """A test-local reading of ptxas -v: per entry, its 'Used' line and its stack figures."""
    report: dict[str, tuple[int, int, int]] = {}
    entry, frame = None, 0
    for line in text.splitlines():
        if m := re.search(r"Compiling entry function '([^']+)'", line):
            entry, frame = m.group(1), 0
        elif entry and (m := re.search(r"(\d+) bytes stack frame", line)):
            frame = int(m.group(1))
        elif entry and (m := re.search(r"Used (\d+) registers", line)):
            smem = re.search(r"(\d+) bytes smem", line)
            cumulative = re.search(r"(\d+) bytes cumulative stack size", line)
            report[entry] = (int(m.group(1)), int(smem.group(1)) if smem else 0,
                             int(cumulative.group(1)) if cumulative else frame)
            entry = None
    return report


# --------------------------------------------------------------------------- compiling


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("name", CORPUS)
def test_corpus_compiles_to_ptx_with_line_info(name: str, compiler: str) -> None:
    program = build(name, compiler)
    assert program.compiler.startswith(compiler + " ")
    assert program.target == "sm_80" and program.requested == (8, 0)
    assert ".target sm_80" in program.ptx
    source = str((CUDA / name).resolve())
    assert program.source.path == source and program.source.text == (CUDA / name).read_text()
    assert re.search(rf'\.file\s+1\s+"{re.escape(source)}"', program.ptx)
    assert re.search(r"^\s*\.loc\s+1\s+\d+\s+\d+", program.ptx, re.M), "line info is always on"
    entries = re.findall(r"\.entry\s+(\w+)\s*\(", program.ptx)
    assert list(program.kernel_names) == entries and entries
    assert program.resources_from == ("ptxas -v" if compiler == "nvcc" else "cubin")
    for kernel in program.kernels:
        assert kernel.resources is not None and kernel.resources.registers_per_thread > 0
        if kernel.name in STATIC_SHARED:
            assert kernel.resources.static_shared == STATIC_SHARED[kernel.name], kernel.name
        if name in CONST_BYTES:
            assert kernel.resources.const_bytes == CONST_BYTES[name]
    if name == "ptx_local_mem.cu":
        local = program.kernel("local_array").resources
        assert local is not None and local.local_bytes_per_thread >= 16 * 4  # int loc[16] lives in local memory


@needs_nvcc
@pytest.mark.parametrize("cc", [(7, 5), (8, 0), (9, 0)])
@pytest.mark.parametrize("name", ["ptx_matmul_tiled.cu", "ptx_local_mem.cu", "ptx_histogram_atomic.cu", "ptx_vector_loads.cu"])
def test_registers_match_ptxas_v_on_every_target(name: str, cc: tuple[int, int], tmp_path: Path) -> None:
    program = build(name, "nvcc", cc)
    report, cubin = ptxas_report(program.ptx, program.target, tmp_path)
    assert set(report) == set(program.kernel_names)
    sm = int(program.target[3:])
    from_elf = kernel_resources(cubin, program.kernel_names, sm)
    for kernel in program.kernels:
        regs, smem, stack = report[kernel.name]
        assert kernel.resources is not None
        assert (kernel.resources.registers_per_thread, kernel.resources.static_shared,
                kernel.resources.local_bytes_per_thread) == (regs, smem, stack)
        elf = from_elf[kernel.name]  # the cubin reader alone, as the NVRTC path uses it
        assert (elf.registers_per_thread, elf.static_shared, elf.local_bytes_per_thread) == (regs, smem, stack)


@needs_nvrtc
@pytest.mark.parametrize("name", ["ptx_matmul_tiled.cu", "ptx_local_mem.cu", "ptx_half_double.cu", "build_cxx.cu"])
@pytest.mark.parametrize("cc", [(8, 0), (9, 0)])
def test_nvrtc_cubin_resources_match_its_own_ptxas_report(name: str, cc: tuple[int, int]) -> None:
    from cuda.bindings import nvrtc

    program = build(name, "nvrtc", cc)
    include = [f"-I{d}".encode() for d in nvrtc_compiler().include_dirs]  # type: ignore[union-attr]
    err, prog = nvrtc.nvrtcCreateProgram((CUDA / name).read_bytes(), str((CUDA / name).resolve()).encode(), 0, [], [])
    options = [f"-arch={program.target}".encode(), b"--generate-line-info", b"--ptxas-options=-v", *include]
    err, = nvrtc.nvrtcCompileProgram(prog, len(options), options)
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, log)
    nvrtc.nvrtcDestroyProgram(prog)
    report = parse_v(log.decode())
    assert set(report) == set(program.kernel_names)
    for kernel in program.kernels:
        assert kernel.resources is not None
        assert (kernel.resources.registers_per_thread, kernel.resources.static_shared,
                kernel.resources.local_bytes_per_thread) == report[kernel.name]


@needs_nvcc
@needs_nvrtc
@pytest.mark.parametrize("name", ["ptx_spmv_csr.cu", "build_cxx.cu", "ptx_template_saxpy.cu"])
def test_nvcc_and_nvrtc_agree_on_kernels_and_line_table(name: str) -> None:
    a, b = build(name, "nvcc"), build(name, "nvrtc")
    assert a.kernel_names == b.kernel_names
    assert [k.demangled for k in a.kernels] == [k.demangled for k in b.kernels]
    files = re.compile(r'^\s*\.file\s+\d+\s+"([^"]+)"', re.M)
    assert files.findall(a.ptx) == files.findall(b.ptx)
    assert entry_params(a.ptx) == entry_params(b.ptx)


def test_target_is_floored_at_the_oldest_and_capped_at_the_newest_supported() -> None:
    supported = (75, 80, 86, 89, 90, 100, 120)
    assert choose_target((2, 0), supported) == 75      # Fermi presets: the compiler's oldest
    assert choose_target((1, 3), supported) == 75
    assert choose_target((8, 0), supported) == 80
    assert choose_target((8, 7), supported) == 86      # not supported: the newest older one
    assert choose_target((9, 0), supported) == 90
    assert choose_target((13, 0), supported) == 120    # newer than the compiler knows
    assert choose_target((9, 0), ()) == 90              # no list: as requested


@needs_nvcc
def test_nvcc_target_floor_comes_from_the_compiler() -> None:
    listing = subprocess.run([str(NVCC), "--list-gpu-arch"], capture_output=True, text=True, timeout=60).stdout
    oldest = min(int(a) for a in re.findall(r"compute_(\d+)", listing))
    program = build("ptx_spmv_csr.cu", "nvcc", (2, 0))
    assert program.target == f"sm_{oldest}" and program.requested == (2, 0)
    assert f".target sm_{oldest}" in program.ptx


@needs_nvrtc
def test_nvrtc_target_floor_comes_from_the_library() -> None:
    from cuda.bindings import nvrtc

    _, archs = nvrtc.nvrtcGetSupportedArchs()
    program = build("ptx_spmv_csr.cu", "nvrtc", (1, 3))
    assert program.target == f"sm_{min(archs)}" and program.requested == (1, 3)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("compiler", COMPILERS)
def test_syntax_error_is_one_build_error_with_file_and_line(compiler: str) -> None:
    with pytest.raises(BuildError) as info:
        build("build_syntax_error.cu", compiler, cache=False)
    message = info.value.message
    assert "build_syntax_error.cu:4: error" in message and "undefined_name" in message
    assert "build_syntax_error.cu:5: error" in message and "expected an expression" in message
    assert len(message) < 2500 and info.value.hint


@pytest.mark.parametrize("compiler", COMPILERS)
def test_missing_include_is_a_build_error_naming_the_header(compiler: str) -> None:
    with pytest.raises(BuildError) as info:
        build("build_missing_include.cu", compiler, cache=False)
    assert "build_missing_include.cu:2" in info.value.message
    assert "build_no_such_header.cuh" in info.value.message
    assert "-I" in info.value.hint


@pytest.mark.parametrize("compiler", COMPILERS)
def test_the_cli_shows_a_compile_error_without_traceback(compiler: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["init", str(CUDA / "build_syntax_error.cu"), "-o", str(tmp_path / "l.py"), "--compiler", compiler])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: build_syntax_error.cu does not compile") and "\nhint: " in err
    assert "Traceback" not in err and not (tmp_path / "l.py").exists()


def test_bad_paths_and_arguments_are_build_errors(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="does not exist"):
        build_program(tmp_path / "nope.cu", compute_capability=(8, 0))
    with pytest.raises(BuildError, match="is a directory"):
        build_program(tmp_path, compute_capability=(8, 0))
    with pytest.raises(BuildError, match="compute capability"):
        build_program(CUDA / "ptx_spmv_csr.cu", compute_capability=(8,))  # type: ignore[arg-type]
    with pytest.raises(BuildError, match="unknown compiler"):
        build_program(CUDA / "ptx_spmv_csr.cu", compute_capability=(8, 0), compiler="clang")


@pytest.mark.parametrize("compiler", COMPILERS)
def test_a_file_without_kernels_is_refused(compiler: str, tmp_path: Path) -> None:
    src = tmp_path / "helpers.cu"
    src.write_text("__device__ float twice(float x) { return 2.0f * x; }\n")
    with pytest.raises(BuildError, match="defines no kernel"):
        build_program(src, compute_capability=(8, 0), compiler=compiler, cache=False)


@needs_nvcc
def test_nvcc_timeout_is_a_build_error_and_leaves_no_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(BuildError, match="took longer than"):
        build("build_modern.cu", "nvcc", timeout=0.05, cache=False)
    assert list(tmp_path.iterdir()) == []


def test_compile_error_summary_is_bounded_and_located() -> None:
    output = "".join(f"/src/k.cu({i}): error: thing {i} is wrong\n    bad line {i}\n    ^\n\n" for i in range(1, 40))
    text = summarize_errors(output + "39 errors detected in the compilation of \"/src/k.cu\".\n")
    assert text.splitlines()[0] == "/src/k.cu:1: error: thing 1 is wrong"
    assert "/src/k.cu:4: error: thing 4 is wrong" in text and "/src/k.cu:5:" not in text
    assert text.rstrip().endswith("... and 35 more errors")
    assert "ptxas fatal   : Unresolved extern function 'f'" in summarize_errors(
        "ptxas info    : 0 bytes gmem\nptxas fatal   : Unresolved extern function 'f'\n")


def test_a_corrupt_cubin_is_a_build_error() -> None:
    with pytest.raises(BuildError, match="not a readable ELF"):
        read_elf(b"not an elf file at all" * 4)
    with pytest.raises(BuildError, match="not a readable ELF"):
        kernel_resources(b"\x7fELF\x02\x01" + b"\0" * 58 + b"\xff" * 8, ("k",), 80)


# --------------------------------------------------------------------------- flags


@pytest.mark.parametrize("compiler", COMPILERS)
def test_defines_pass_through(compiler: str) -> None:
    plain = build("build_cxx.cu", compiler)
    seven = build("build_cxx.cu", compiler, flags=("-DBUILD_FACTOR=7.0",))
    assert "0d401c000000000000" in seven.ptx.lower() and "0d401c000000000000" not in plain.ptx.lower()  # 7.0
    assert seven.flags == ("-DBUILD_FACTOR=7.0",)


@pytest.mark.parametrize("compiler", COMPILERS)
def test_relative_include_folders_are_made_absolute(compiler: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "inc").mkdir()
    (tmp_path / "src").mkdir()
    shutil.copy(CUDA / "build_cxx.cuh", tmp_path / "inc" / "helper.cuh")
    src = tmp_path / "src" / "k.cu"
    src.write_text('#include <helper.cuh>\nextern "C" __global__ void k(float* a) { a[threadIdx.x] = twice(a[0]); }\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BuildError) as info:
        build_program(src, compute_capability=(8, 0), compiler=compiler, cache=False)
    assert "helper.cuh" in info.value.message
    program = build_program(src, compute_capability=(8, 0), compiler=compiler, flags=["-I", "inc"])
    inc = (tmp_path / "inc").resolve()
    assert program.flags == (f"-I{inc}",)
    assert [h.path for h in program.headers] == [str(inc / "helper.cuh")]
    assert program.headers[0].text == (CUDA / "build_cxx.cuh").read_text()


def test_flag_normalisation(tmp_path: Path) -> None:
    flags, includes = normalize_flags(["-Iinc", "-DN=4", "-lineinfo", "--include-path=/abs", "-std=c++17",
                                       "-isystem", "sys", "-Xptxas", "-O1"], cwd=tmp_path)
    assert flags == (f"-I{tmp_path / 'inc'}", "-DN=4", "-I/abs", "-std=c++17", f"-I{tmp_path / 'sys'}",
                     "-Xptxas", "-O1")
    assert includes == (tmp_path / "inc", Path("/abs"), tmp_path / "sys")
    for bad in (["-arch=sm_50"], ["-o", "x"], ["-gencode", "arch=compute_80,code=sm_80"], ["-ptx"], ["-I"], [""]):
        with pytest.raises(BuildError):
            normalize_flags(bad, cwd=tmp_path)


@needs_nvrtc
def test_nvrtc_leaves_out_host_only_flags_and_reports_unknown_ones() -> None:
    program = build("ptx_spmv_csr.cu", "nvrtc", flags=("-O3", "-Xcompiler", "-Wall"))
    assert program.flags == ("-O3", "-Xcompiler", "-Wall")
    with pytest.raises(BuildError) as info:
        build("ptx_spmv_csr.cu", "nvrtc", flags=("--no-such-flag",), cache=False)
    assert "--no-such-flag" in info.value.message and "NVRTC" in info.value.hint


# --------------------------------------------------------------------------- private folders, cache


@pytest.mark.parametrize("compiler", COMPILERS)
def test_compiles_in_a_private_folder_and_cleans_up(compiler: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    src_dir, tmp_dir = tmp_path / "src", tmp_path / "tmp"
    src_dir.mkdir()
    tmp_dir.mkdir()
    shutil.copy(CUDA / "ptx_spmv_csr.cu", src_dir / "spmv.cu")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_dir))
    monkeypatch.chdir(src_dir)
    build_program(src_dir / "spmv.cu", compute_capability=(8, 0), compiler=compiler, cache=False)
    assert sorted(os.listdir(src_dir)) == ["spmv.cu"]
    assert os.listdir(tmp_dir) == []


@pytest.mark.parametrize("compiler", COMPILERS)
def test_cache_returns_the_same_program_without_compiling(compiler: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import tuiprof.toolchain.compile as compile_mod

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for name in ("build_cxx.cu", "build_cxx.cuh"):
        shutil.copy(CUDA / name, tmp_path / name)
    first = build_program(tmp_path / "build_cxx.cu", compute_capability=(8, 0), compiler=compiler)
    assert len(list((tmp_path / "cache" / "tuiprof" / "build").glob("*.json"))) == 1

    def no_compile(*args: object, **kw: object) -> None:
        raise AssertionError("compiled although the cache holds this program")

    monkeypatch.setattr(compile_mod, "compile_nvcc", no_compile)
    monkeypatch.setattr(compile_mod, "compile_nvrtc", no_compile)
    assert build_program(tmp_path / "build_cxx.cu", compute_capability=(8, 0), compiler=compiler) == first
    # an edited header is a different program
    header = tmp_path / "build_cxx.cuh"
    header.write_text(header.read_text().replace("3.0", "5.0"))
    with pytest.raises(AssertionError, match="compiled although"):
        build_program(tmp_path / "build_cxx.cu", compute_capability=(8, 0), compiler=compiler)
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    edited = build_program(tmp_path / "build_cxx.cu", compute_capability=(8, 0), compiler=compiler)
    assert "0d4014000000000000" in edited.ptx.lower() and edited.headers[0].text == header.read_text()  # 5.0
    # another target or other flags are other programs too
    assert build_program(tmp_path / "build_cxx.cu", compute_capability=(9, 0), compiler=compiler).target == "sm_90"
    assert len(list((tmp_path / "cache" / "tuiprof" / "build").glob("*.json"))) == 3


@pytest.mark.parametrize("compiler", COMPILERS)
def test_an_unwritable_cache_still_builds(compiler: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    program = build("ptx_spmv_csr.cu", compiler)
    assert program.kernel_names == ("spmv_csr", "spmv_csr_plain")


@needs_nvcc
def test_cache_entries_round_trip() -> None:
    program = build("ptx_local_mem.cu", "nvcc")
    assert build_cache.from_json(build_cache.to_json(program)) == program
    assert build_cache.from_json('{"version": 0}') is None and build_cache.from_json("garbage") is None


# --------------------------------------------------------------------------- nvcc hidden: NVRTC alone


def test_nvcc_is_found_on_path_then_cuda_home_then_cuda_path_then_the_standard_folders(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def toolkit(name: str, executable: bool = True) -> str:
        nvcc = tmp_path / name / "bin" / "nvcc"
        nvcc.parent.mkdir(parents=True)
        nvcc.write_text("#!/bin/sh\n")
        nvcc.chmod(0o755 if executable else 0o644)
        return str(tmp_path / name)

    on_path, home, cuda_path, standard = (toolkit(n) for n in ("on_path", "home", "cuda_path", "standard"))
    monkeypatch.setattr(locate, "STANDARD_ROOTS", (toolkit("not_executable", executable=False), standard))
    (tmp_path / "empty").mkdir()
    env = {"PATH": f"{tmp_path / 'empty'}{os.pathsep}{on_path}/bin", "CUDA_HOME": home, "CUDA_PATH": cuda_path}
    found = []
    for unset in ("PATH", "CUDA_HOME", "CUDA_PATH", "STANDARD_ROOTS"):
        found.append(find_nvcc(env))
        if unset == "STANDARD_ROOTS":
            monkeypatch.setattr(locate, "STANDARD_ROOTS", ())
        else:
            env[unset] = str(tmp_path / "empty") if unset == "PATH" else ""
    found.append(find_nvcc(env))
    assert found == [Path(on_path) / "bin" / "nvcc", Path(home) / "bin" / "nvcc", Path(cuda_path) / "bin" / "nvcc",
                     Path(standard) / "bin" / "nvcc", None]


@needs_nvrtc
def test_without_nvcc_nvrtc_compiles(tmp_path: Path) -> None:
    out = run_without_nvcc(
        "from tuiprof.toolchain import build_program\n"
        "from tuiprof.toolchain.locate import find_nvcc\n"
        f"p = build_program({str(CUDA / 'ptx_matmul_tiled.cu')!r}, compute_capability=(8, 0))\n"
        "print(find_nvcc(), p.compiler, p.target, p.resources_from, p.kernel('matmul_tiled').resources.static_shared)\n",
        tmp_path).stdout
    none, compiler, version, target, origin, shared = out.split()
    assert none == "None" and compiler == "nvrtc" and target == "sm_80" and origin == "cubin"
    assert int(shared) == STATIC_SHARED["matmul_tiled"]


def test_no_compiler_at_all_is_one_clear_message(tmp_path: Path) -> None:
    out = run_without_nvcc(
        "from tuiprof.toolchain import build_program, BuildError\n"
        "try:\n"
        f"    build_program({str(CUDA / 'ptx_spmv_csr.cu')!r}, compute_capability=(8, 0))\n"
        "except BuildError as e:\n"
        "    print(e.render())\n", tmp_path, hide_nvrtc=True).stdout
    assert out.startswith("error: no CUDA compiler found")
    assert "pip install nvidia-cuda-nvrtc cuda-bindings" in out and "CUDA toolkit" in out


def test_init_without_any_compiler_writes_a_source_only_script(tmp_path: Path) -> None:
    shutil.copy(CUDA / "build_cxx.cu", tmp_path / "k.cu")
    shutil.copy(CUDA / "build_cxx.cuh", tmp_path / "build_cxx.cuh")
    run_without_nvcc("from tuiprof.cli.main import main\nraise SystemExit(main(['init', 'k.cu']))\n", tmp_path,
                     hide_nvrtc=True)
    script = (tmp_path / "k_launch.py").read_text()
    assert "source only" in script
    launches = run_script(tmp_path / "k_launch.py")
    assert [name for name, *_ in launches] == ["scale", "affine", "plain_c"]  # unmangled: no PTX to ask


# --------------------------------------------------------------------------- names


def test_demangling_and_kernel_lookup() -> None:
    assert demangle("_Z4axpyIfLi4EEvT_PKS0_PS0_i") == "void axpy<float, 4>(float, float const*, float*, int)"
    assert demangle("_ZN3ops5scaleEPfPKffj") == "ops::scale(float*, float const*, float, unsigned int)"
    assert demangle("spmv_csr") == "spmv_csr"


@pytest.mark.parametrize("compiler", COMPILERS)
def test_kernel_lookup_by_symbol_signature_or_plain_name(compiler: str) -> None:
    program = build("ptx_template_saxpy.cu", compiler)
    assert program.kernel("_Z4axpyIdLi2EEvT_PKS0_PS0_i").demangled == \
        "void axpy<double, 2>(double, double const*, double*, int)"
    with pytest.raises(BuildError, match="ambiguous"):
        program.kernel("axpy")
    cxx = build("build_cxx.cu", compiler)
    assert cxx.kernel("scale").name == "_ZN3ops5scaleEPfPKffj"
    assert cxx.kernel("affine(Coeffs, double const*, double*, long long)").name == "_Z6affine6CoeffsPKdPdx"
    with pytest.raises(BuildError) as info:
        cxx.kernel("nope")
    assert "plain_c" in info.value.hint and "ops::scale(float*, float const*" in info.value.hint  # demangled


# --------------------------------------------------------------------------- signatures


def test_signature_reader_on_tricky_declarations() -> None:
    text = '''
    // __global__ void in_a_comment(int x) {}
    typedef unsigned short u16;
    using real = double;
    template <typename T> __global__ void tmpl(T* a, int n) { a[threadIdx.x] = n; }
    __global__ void declared_only(float* a);
    extern "C" {
    __global__ void __launch_bounds__(64, 2) in_block(const u16* __restrict__ p, real* q, real s) {
        q[threadIdx.y] = p[0] * s;
    }
    }
    extern __shared__ float dyn[];
    static __global__ void cxx(float const* in, float* const out, bool flag, float4 v, unsigned) {
        out[blockIdx.z] = in[0] + dyn[0];
    }
    '''
    sigs = {s.name: s for s in kernel_signatures(text)}
    assert list(sigs) == ["tmpl", "in_block", "cxx"]
    assert sigs["tmpl"].template and not sigs["tmpl"].extern_c
    block = sigs["in_block"]
    assert block.extern_c and block.max_threads == 64 and block.dims == 2 and block.dynamic_shared is None
    assert [(p.name, p.pointer, p.const, p.restrict, p.dtype) for p in block.params] == [
        ("p", True, True, True, "uint16"), ("q", True, False, False, "float64"), ("s", False, False, False, "float64")]
    cxx = sigs["cxx"]
    assert not cxx.extern_c and cxx.dims == 3 and cxx.dynamic_shared == "float"
    assert [(p.name, p.pointer, p.const, p.dtype, p.lanes) for p in cxx.params] == [
        ("in", True, True, "float32", 1), ("out", True, False, "float32", 1), ("flag", False, False, "bool_", 1),
        ("v", False, False, "float32", 4), ("", False, False, "uint32", 1)]
    assert parse_param("long long* w", {}).dtype == "int64"
    assert parse_param("const __half2* h", {}).lanes == 2
    assert parse_param("float** pp", {}).indirection == 2
    assert parse_param("MyStruct s", {}).dtype is None


def test_entry_params_from_ptx() -> None:
    ptx = """
.visible .entry _Z6affine6CoeffsPKdPdx(
	.param .align 4 .b8 _Z6affine6CoeffsPKdPdx_param_0[12],
	.param .u64 .ptr .align 1 _Z6affine6CoeffsPKdPdx_param_1,
	.param .f32 _Z6affine6CoeffsPKdPdx_param_2
)
.entry k2()
"""
    params = entry_params(ptx)
    assert [(p.type, p.size) for p in params["_Z6affine6CoeffsPKdPdx"]] == [("b8", 12), ("u64", 8), ("f32", 4)]
    assert params["k2"] == ()


# --------------------------------------------------------------------------- tuiprof init


@dataclass
class Buffer:
    """What the recording device hands out for a device array."""

    array: np.ndarray


class RecordingDevice:
    """A test double of the launch-script API: keeps the arrays and records the launches."""

    def __init__(self) -> None:
        self.launches: list[tuple[str, tuple[int, ...], tuple[int, ...], tuple[object, ...], int]] = []
        self.symbols: dict[str, np.ndarray] = {}

    def to_device(self, array: np.ndarray) -> Buffer:
        assert isinstance(array, np.ndarray)
        return Buffer(array.copy())

    def empty(self, shape: object, dtype: object) -> Buffer:
        return Buffer(np.empty(shape, dtype))  # type: ignore[call-overload]

    def zeros(self, shape: object, dtype: object) -> Buffer:
        return Buffer(np.zeros(shape, dtype))  # type: ignore[call-overload]

    def from_device(self, buf: Buffer) -> np.ndarray:
        return buf.array.copy()

    def launch(self, name: str, grid: tuple[int, ...], block: tuple[int, ...], args: tuple[object, ...],
               shared: int = 0) -> None:
        self.launches.append((name, tuple(grid), tuple(block), tuple(args), shared))

    def set_symbol(self, name: str, value: object) -> None:
        self.symbols[name] = np.asarray(value)

    def texture(self, array: np.ndarray, **options: object) -> np.uint64:
        return np.uint64(1)


def run_script(path: Path) -> list[tuple[str, tuple[int, ...], tuple[int, ...], tuple[object, ...], int]]:
    ast.parse(path.read_text())
    dev = RecordingDevice()
    runpy.run_path(str(path))["setup"](dev)
    return dev.launches


P = "ptr"
# Hand-written from the sources: per kernel, each argument as a NumPy dtype (a value) or
# (P, dtype, lanes) (a device array).
EXPECTED_LAUNCHES = {
    "ptx_spmv_csr.cu": [
        ("spmv_csr", [np.int32, (P, np.int32, 1), (P, np.int32, 1), (P, np.float32, 1), (P, np.float32, 1),
                      (P, np.float32, 1)]),
        ("spmv_csr_plain", [np.int32, (P, np.int32, 1), (P, np.int32, 1), (P, np.float32, 1), (P, np.float32, 1),
                            (P, np.float32, 1)])],
    "ptx_half_double.cu": [
        ("half_math", [(P, np.float16, 1), (P, np.float16, 1), (P, np.float16, 1), (P, np.float32, 1), np.int32]),
        ("half2_math", [(P, np.float16, 2), (P, np.float16, 2), np.int32]),
        ("double_math", [(P, np.float64, 1), (P, np.float64, 1), (P, np.float32, 1), (P, np.int64, 1), np.int32])],
    "ptx_vector_loads.cu": [
        ("copy_float4", [(P, np.float32, 4), (P, np.float32, 4), np.int32]),
        ("copy_uint4", [(P, np.uint32, 4), (P, np.uint32, 4), np.int32]),
        ("copy_float2_ldg", [(P, np.float32, 2), (P, np.float32, 2), np.int32]),
        ("shared_vec", [(P, np.float32, 4), (P, np.float32, 4)])],
    "ptx_template_saxpy.cu": [  # C++ kernels by the names a programmer writes (issue 22)
        ("axpy<float, 4>", [np.float32, (P, np.float32, 1), (P, np.float32, 1), np.int32])],
    "build_cxx.cu": [
        ("ops::scale", [(P, np.float32, 1), (P, np.float32, 1), np.float32, np.uint32]),
        ("affine", [np.void, (P, np.float64, 1), (P, np.float64, 1), np.int64]),
        ("plain_c", [(P, np.int16, 1), (P, np.uint8, 1), np.int32])],
    "ptx_matmul_tiled.cu": [
        ("matmul_tiled", [(P, np.float32, 1), (P, np.float32, 1), (P, np.float32, 1), np.int32]),
        ("transpose_dyn", [(P, np.float32, 1), (P, np.float32, 1), np.int32, np.int32])],
    "ptx_local_mem.cu": [
        ("local_array", [(P, np.int32, 1), (P, np.int32, 1), np.int32, np.int32]),
        ("const_mem", [(P, np.float32, 1), (P, np.float32, 1), np.uint64])],
}


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("name", list(EXPECTED_LAUNCHES))
def test_init_script_launches_with_the_kernels_dtypes(name: str, compiler: str, tmp_path: Path) -> None:
    for f in (name, "build_cxx.cuh"):
        shutil.copy(CUDA / f, tmp_path / f)
    path = write_launch_script(tmp_path / name, compiler=compiler)
    assert path == tmp_path / name.replace(".cu", "_launch.py")
    launches = run_script(path)
    expected = EXPECTED_LAUNCHES[name]
    assert [n for n, *_ in launches] == [n for n, _ in expected]
    program = build_program(tmp_path / name, compute_capability=(8, 0), compiler=compiler)
    ptx_sizes = entry_params(program.ptx)
    for (written, grid, block, args, shared), (_, want) in zip(launches, expected):
        kname = program.kernel(written).name
        assert len(args) == len(want)
        assert all(isinstance(v, int) and v >= 1 for v in (*grid, *block)) and len(grid) == len(block) == 3
        threads = np.prod(block) * np.prod(grid)
        for arg, w, ptx in zip(args, want, ptx_sizes[kname]):
            if isinstance(w, tuple):
                _, dtype, lanes = w
                assert isinstance(arg, Buffer) and arg.array.dtype == dtype
                assert arg.array.shape[1:] == ((lanes,) if lanes > 1 else ())
                assert arg.array.shape[0] >= threads  # one element per thread at least: in bounds
                assert ptx.size == 8
            else:
                assert isinstance(arg, w) if w is np.void else type(arg) is w
                assert arg.nbytes == ptx.size  # the value fills the PTX parameter exactly
        if kname == "transpose_dyn":
            assert block[1] > 1 and shared >= np.prod(block) * 4  # 2-D kernel with dynamic shared memory
        else:
            assert shared == 0
    text = path.read_text()
    assert "def setup(dev):" in text and "adapt" in text
    if name == "ptx_template_saxpy.cu":
        assert "axpy<double, 2>" in text and "axpy<int, 1>" in text


@needs_nvcc
def test_init_script_inputs_and_outputs(tmp_path: Path) -> None:
    shutil.copy(CUDA / "ptx_spmv_csr.cu", tmp_path / "k.cu")
    launches = run_script(write_launch_script(tmp_path / "k.cu"))
    _, _, _, args, _ = launches[0]
    n, rowptr, colidx, vals, x, y = args
    assert not rowptr.array.any() and not colidx.array.any()  # index arrays stay in bounds
    assert vals.array.min() >= 0 and vals.array.max() < 1 and vals.array.std() > 0  # random inputs
    assert not y.array.any()  # output starts at zero
    assert int(n) <= rowptr.array.size - 1  # rowptr[row + 1] stays in bounds for every row < n


@needs_nvcc
def test_init_never_overwrites_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(CUDA / "ptx_spmv_csr.cu", tmp_path / "k.cu")
    target = tmp_path / "mine.py"
    target.write_text("# my own launch script\n")
    assert main(["init", str(tmp_path / "k.cu"), "-o", str(target)]) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "--force" in err and target.read_text() == "# my own launch script\n"
    assert main(["init", str(tmp_path / "k.cu"), "-o", str(target), "--force"]) == 0
    assert "def setup(dev):" in target.read_text() and "wrote" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.cu", "mine.py"]  # no temporary file left


@needs_nvcc
def test_init_cflags_reach_the_compiler(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "inc").mkdir()
    shutil.copy(CUDA / "build_cxx.cuh", tmp_path / "inc" / "helper.cuh")
    (tmp_path / "k.cu").write_text('#include "helper.cuh"\n'
                                   'extern "C" __global__ void k(float* a, int n) { a[threadIdx.x] = twice(n); }\n')
    assert main(["init", str(tmp_path / "k.cu")]) == 2
    assert "helper.cuh" in capsys.readouterr().err
    assert main(["init", str(tmp_path / "k.cu"), f"--cflag=-I{tmp_path / 'inc'}"]) == 0
    assert [n for n, *_ in run_script(tmp_path / "k_launch.py")] == ["k"]
