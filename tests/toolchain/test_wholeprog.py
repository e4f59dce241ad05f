"""Whole programs without a GPU (tuiprof.toolchain.wholeprog): nvcc's -dryrun plan parsed; a program
with `main` and a two-unit -rdc=true program build instrumented and link with the host runtime
(the launch stub calls the wrapper); the runtime's own file writer and count reader (compiled
without CUDA) agree with tuiprof's decoding; its launch wrapper, linked with a CUDA runtime
stand-in whose kernels use the probes' control block, picks the chosen launch, counts, records
the snapshot and leaves the other launches alone; the instrumented binary runs as the plain one when
tuiprof does not drive it (and, without a GPU, leaves no record file when it does); bad command
lines are one clear error."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.support.ptx_support import CUDA_DIR, find_nvcc
from tuiprof.collect.gpu.records import RECORD_MAGIC, cta_records, read_record_file
from tuiprof.errors import BuildError, TuiprofError
from tuiprof.ptx import parse_module
from tuiprof.ptx.instrument import CTL_SYMBOL, instrument
from tuiprof.toolchain.wholeprog import (
    RUNTIME_SOURCE,
    WRAP_FLAGS,
    WholeProgram,
    build_instrumented,
    check_args,
    load_whole_program,
    parse_dryrun,
)

needs_toolkit = pytest.mark.skipif(find_nvcc() is None or shutil.which("g++") is None,
                                   reason="nvcc and g++ are needed to build whole programs")

DRYRUN = r'''#$ _NVVM_BRANCH_=nvvm
#$ _SPACE_= 
#$ CICC_PATH=/usr/local/cuda-13.0/bin/../nvvm/bin
#$ INCLUDES="-I/usr/local/cuda-13.0/bin/../targets/x86_64-linux/include"  
#$ SYSTEM_INCLUDES="-isystem" "/usr/local/cuda-13.0/bin/../targets/x86_64-linux/include/cccl"  
#$ rm /b/app_dlink.reg.c
#$ gcc -E -x c++ -D__CUDACC__ -include "cuda_runtime.h" -m64 "app.cu" -o "/b/app.cpp4.ii" 
#$ "$CICC_PATH/cicc" --c++17 --orig_src_file_name "app.cu" --orig_src_path_name "/src/app.cu" -arch compute_80 "/b/app.cpp1.ii" -o "/b/app.ptx"
#$ ptxas -arch=sm_80 -m64  --generate-line-info "/b/app.ptx"  -o "/b/app.sm_80.cubin" 
#$ gcc -c -x c++ -m64 "/b/app.cudafe1.cpp" -o "/b/app.o" 
#$ nvlink -m64 --arch=sm_80 "/b/app.o"  -lcudadevrt  -o "/b/app_dlink.sm_80.cubin" --host-ccbin "gcc"
#$ gcc -c -x c++ -m64 "/usr/local/cuda-13.0/bin/crt/link.stub" -o "/b/app_dlink.o" 
#$ g++ -m64 -Wl,--start-group "/b/app_dlink.o" "/b/app.o" -lcudart_static -lrt -lpthread -ldl -Wl,--end-group -o "app" 
'''


def test_parse_dryrun() -> None:
    dry = parse_dryrun("nvcc noise\n" + DRYRUN)
    env = dict(dry.environment)
    assert env["CICC_PATH"] == "/usr/local/cuda-13.0/bin/../nvvm/bin"
    assert env["SYSTEM_INCLUDES"] == '"-isystem" "/usr/local/cuda-13.0/bin/../targets/x86_64-linux/include/cccl"'
    assert env["_SPACE_"] == ""
    assert [s.command.split()[0] for s in dry.steps] == ["rm", "gcc", '"$CICC_PATH/cicc"', "ptxas", "gcc", "nvlink",
                                                         "gcc", "g++"]
    cicc = [s for s in dry.steps if s.ptx]
    assert [(s.ptx, s.source) for s in cicc] == [("/b/app.ptx", "/src/app.cu")]
    assert [s.final_link for s in dry.steps] == [False] * 7 + [True]


@pytest.mark.parametrize("args, message", [
    (["-c", "a.cu"], "compiles without linking"),
    (["-ptx", "a.cu"], "stops at PTX"),
    (["--lib", "a.cu"], "builds a library"),
    (["-O3", "-o", "x"], "no source file"),
])
def test_check_args(args: list[str], message: str) -> None:
    with pytest.raises(BuildError, match=message):
        check_args(args)


def _objdump_calls(binary: Path, function_prefix: str) -> list[str]:
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(binary)], capture_output=True, text=True,
                          timeout=120).stdout
    body = re.search(rf"<{re.escape(function_prefix)}[^>]*>:\n(.*?)\n\n", text, re.S)
    return re.findall(r"call\s+\S+\s+<([^>]+)>", body.group(1)) if body else []


@needs_toolkit
def test_program_with_main_builds_links_and_runs_plain(tmp_path: Path) -> None:
    src = tmp_path / "app.cu"
    shutil.copy(CUDA_DIR / "wholeprog_main.cu", src)
    prog = build_instrumented(["app.cu", "-arch=sm_80", "-o", "app.instr"], cwd=tmp_path)
    assert prog.binary == tmp_path / "app.instr" and prog.binary.is_file()
    [module] = prog.modules
    assert module.tag == 0 and module.source == str(src) and module.target == "sm_80"
    assert set(module.kernels) == {"_Z5saxpyPfPKffi", "_Z6gatherPfPKfPKii"}
    # the metadata keeps the compiler's own PTX, and its sites are the instrumenter's
    original = prog.ptx_text(module)
    assert CTL_SYMBOL not in original and ".loc" in original
    assert module.sites == instrument(original, parse_module(original)).sites
    assert module.resources["_Z5saxpyPfPKffi"].registers_per_thread > 0
    assert set(module.probe_registers) == set(module.kernels) and min(module.probe_registers.values()) > 0
    assert load_whole_program(prog.binary) == prog
    # the launch stub goes through the wrapper; the instrumented PTX is in the binary
    symbols = subprocess.run(["nm", str(prog.binary)], capture_output=True, text=True, timeout=60).stdout
    for flag in WRAP_FLAGS:
        assert f" T __wrap_{flag.split('=')[1]}" in symbols
    assert "__wrap___cudaLaunchKernel" in _objdump_calls(prog.binary, "_ZL25__cudaLaunchKernel_helper")
    assert CTL_SYMBOL.encode() in prog.binary.read_bytes()
    # not driven by tuiprof: the program runs as built (here it reports that there is no GPU)
    plain = subprocess.run([str(prog.binary), "256"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "[tuiprof]" not in plain.stderr
    assert plain.stdout.strip() in ("ok", ) or plain.stdout.startswith("no usable GPU")
    if plain.stdout.startswith("no usable GPU"):
        # driven by tuiprof without a driver: the program's own output, and no record file
        env = dict(os.environ, TUIPROF_MODE="count", TUIPROF_OUT=str(tmp_path / "c.tprec"))
        run = subprocess.run([str(prog.binary), "256"], capture_output=True, text=True, timeout=120, env=env,
                             cwd=tmp_path)
        assert run.stdout.startswith("no usable GPU")
        assert not (tmp_path / "c.tprec").exists()


@needs_toolkit
def test_two_units_with_rdc_link(tmp_path: Path) -> None:
    for name in ("wholeprog_rdc_main.cu", "wholeprog_rdc_lib.cu"):
        shutil.copy(CUDA_DIR / name, tmp_path / name)
    prog = build_instrumented(["-rdc=true", "-arch=sm_80", "wholeprog_rdc_main.cu", "wholeprog_rdc_lib.cu",
                               "-o", "app"], cwd=tmp_path)
    assert prog.binary.is_file()
    assert [m.tag for m in prog.modules] == [0, 1]
    assert [Path(m.source).name for m in prog.modules] == ["wholeprog_rdc_main.cu", "wholeprog_rdc_lib.cu"]
    assert prog.module_with("_Z5applyPfPKfi").tag == 0 and prog.module_with("_Z4fillPffi").tag == 1
    lib_sites = prog.modules[1].sites
    assert {s.function for s in lib_sites} == {"_Z6scaledPKfi", "_Z4fillPffi"}
    with pytest.raises(BuildError, match="no instrumented module defines kernel nothere"):
        prog.module_with("nothere")
    # the kernel's op table covers the device function it calls in the other unit
    from tuiprof.collect.gpu.records import site_to_op
    from tuiprof.ptx.ops import static_ops
    from tuiprof.toolchain.wholeprog import linked_module

    main = prog.module_with("_Z5applyPfPKfi")
    module, lent = linked_module(prog, main)
    assert set(lent) == {1} and module.functions["_Z6scaledPKfi"].has_body
    table = static_ops(module, "_Z5applyPfPKfi", main.source, Path(main.source).read_text())
    files = {op.file for _, _, op in table}
    assert files == {"wholeprog_rdc_main.cu", "wholeprog_rdc_lib.cu"}
    borrowed = [op for fn, _, op in table if fn == "_Z6scaledPKfi"]
    assert len(borrowed) == 1 and borrowed[0].kind == "load" and borrowed[0].line == 5
    lib_map = site_to_op(lib_sites, table)
    for site, op_id in zip(lib_sites, lib_map.tolist()):
        assert (op_id >= 0) == (site.function == "_Z6scaledPKfi")
    assert set(site_to_op(main.sites, table).tolist()) | set(lib_map[lib_map >= 0].tolist()) == \
        set(range(len({op.id for _, _, op in table})))


@needs_toolkit
def test_build_errors_are_clear(tmp_path: Path) -> None:
    (tmp_path / "bad.cu").write_text("__global__ void k(int *p) { p[0] = undefined_name; }\nint main() {}\n")
    with pytest.raises(BuildError, match="the instrumented build failed at cudafe\\+\\+|undefined_name") as exc:
        build_instrumented(["bad.cu", "-o", "bad"], cwd=tmp_path)
    assert "undefined_name" in exc.value.message
    with pytest.raises(BuildError, match="nvcc refused the command line"):
        build_instrumented(["nothere.cu", "--no-such-flag", "-o", "x"], cwd=tmp_path)
    with pytest.raises(BuildError, match="no readable tuiprof metadata"):
        load_whole_program(tmp_path / "bad")


@pytest.fixture(scope="module")
def selftest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runtime's file code compiled without CUDA (TUIPROF_RT_SELFTEST)."""
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("g++ is not installed")
    exe = tmp_path_factory.mktemp("rt") / "rt_selftest"
    subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Werror", "-DTUIPROF_RT_SELFTEST", str(RUNTIME_SOURCE),
                    "-o", str(exe)], check=True, capture_output=True, timeout=300)
    return exe


def test_runtime_writes_what_tuiprof_reads(selftest: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.tprec"
    subprocess.run([str(selftest), "write", str(out)], check=True, timeout=60)
    assert not Path(str(out) + ".part").exists()
    [launch] = read_record_file(out)
    assert (launch.index, launch.kernel, launch.grid, launch.block, launch.dynamic_shared) == \
        (2, "_Z6kernelPf", (3, 1, 1), (40, 1, 1), 128)
    assert (launch.cta_lo, launch.cta_hi, launch.elapsed_ns) == (1, 2, 4242)
    rec = launch.records()
    assert rec.warp_offsets.tolist() == [0, 1, 1] and rec.site.tolist() == [3] and rec.mask.tolist() == [3]
    assert rec.addr[0, :3].tolist() == [0x1000, 0x1008, 0]
    c = cta_records(launch.cta, 3)
    assert c.sm.tolist() == [7, 8, 9] and c.start.tolist() == [0, 2, 1] and c.end.tolist() == [10, 20, 15]


def test_runtime_reads_the_counting_runs_file(selftest: Path, tmp_path: Path) -> None:
    """The recording run takes its regions from the counting run's file: whole grid, sliced to
    the snapshot CTAs."""
    import struct

    counts = np.arange(10, 22, dtype=np.uint64)  # 4 CTAs x 3 warps
    head = struct.pack("<IIQ3I3IQQQQQQQQ", 0x4C41554E, 3, 0, 4, 1, 1, 96, 1, 1, 0, 0, 4, 12, 0, 0, 0, 0)
    body = np.zeros(13, np.uint64).tobytes() + counts.tobytes()
    f = tmp_path / "count.tprec"
    f.write_bytes(RECORD_MAGIC + head + b"_Z1" + body)
    r = subprocess.run([str(selftest), "counts", str(f), "_Z1", "3", "1", "3"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and [int(v) for v in r.stdout.split()] == counts[3:9].tolist()
    r = subprocess.run([str(selftest), "counts", str(f), "other", "3", "1", "3"], capture_output=True, timeout=60)
    assert r.returncode == 1  # another kernel's counts are never used
    r = subprocess.run([str(selftest), "counts", str(f), "_Z1", "3", "1", "5"], capture_output=True, timeout=60)
    assert r.returncode == 1  # CTAs past the counted grid
    # a counting run of CTAs 2-3 only: CTA 3's counts are its second CTA's; CTA 1 was not counted
    head = struct.pack("<IIQ3I3IQQQQQQQQ", 0x4C41554E, 3, 0, 4, 1, 1, 96, 1, 1, 0, 2, 4, 6, 0, 0, 0, 0)
    f.write_bytes(RECORD_MAGIC + head + b"_Z1" + np.zeros(7, np.uint64).tobytes() + counts[:6].tobytes())
    r = subprocess.run([str(selftest), "counts", str(f), "_Z1", "3", "3", "4"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and [int(v) for v in r.stdout.split()] == counts[3:6].tolist()
    r = subprocess.run([str(selftest), "counts", str(f), "_Z1", "3", "1", "3"], capture_output=True, timeout=60)
    assert r.returncode == 1


@pytest.fixture(scope="module")
def stubbed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runtime's launch wrapper linked with a CUDA runtime stand-in (tests/cpu_cuda/rt_stub.cpp:
    host memory, kernels that use the probes' control block as instrumented ones do)."""
    cxx = shutil.which("g++")
    roots = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    include = next((Path(r) / "include" for r in roots if r and (Path(r) / "include" / "cuda_runtime.h").is_file()),
                   None)
    if cxx is None or include is None:
        pytest.skip("g++ and the CUDA toolkit's headers are needed")
    exe = tmp_path_factory.mktemp("rt_stub") / "rt_stub"
    subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Werror", f"-I{include}", str(RUNTIME_SOURCE),
                    str(Path(__file__).parents[1] / "cpu_cuda" / "rt_stub.cpp"), "-o", str(exe)],
                   check=True, capture_output=True, timeout=300)
    return exe


GATHER = "_Z6gatherPfPKfPKii"
LAUNCHES = ["saxpy:3:40", "gather:4:64", "gather:2:96"]


def _run_stub(exe: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(exe), *LAUNCHES], capture_output=True, text=True, timeout=60, cwd=cwd,
                          env=dict(os.environ, **{f"TUIPROF_{k.upper()}": v for k, v in env.items()}))


def test_runtime_records_the_chosen_launch_through_its_wrapper(stubbed: Path, tmp_path: Path) -> None:
    """The wrapper picks launch 1 of gather (the second), counts the whole grid, then records the
    snapshot CTAs into regions sliced from the counting run's file; tuiprof decodes both files:
    every warp's record at its addresses, the per-CTA SM and times, the elapsed time."""
    count, record = tmp_path / "c.tprec", tmp_path / "r.tprec"
    assert _run_stub(stubbed, tmp_path, mode="count", kernel=GATHER, launch="1", out=str(count),
                     count_hi="1000").returncode == 0  # the CTAs a snapshot may take: here the whole grid
    [c] = read_record_file(count)
    assert (c.index, c.kernel, c.grid, c.block, c.cta_lo, c.cta_hi) == (1, GATHER, (2, 1, 1), (96, 1, 1), 0, 2)
    assert c.used.tolist() == [33] * 6 and c.words.size == 0 and c.elapsed_ns == 250000  # 1 + 32 words a warp
    r = _run_stub(stubbed, tmp_path, mode="record", kernel=GATHER, launch="1", out=str(record), counts=str(count),
                  cta_lo="1", cta_hi="2")
    assert r.returncode == 0 and "[tuiprof]" not in r.stderr
    [launch] = read_record_file(record)
    assert (launch.cta_lo, launch.cta_hi) == (1, 2)
    assert launch.woff.tolist() == [0, 33, 66, 99] and launch.used.tolist() == [18, 18, 18]  # compressed: 2 + 16
    rec = launch.records()
    assert rec.warp_offsets.tolist() == [0, 1, 2, 3] and rec.mask.tolist() == [0xFFFFFFFF] * 3
    base = 0x7F0000100000 + 4 * 96  # CTA 1's first thread
    np.testing.assert_array_equal(rec.addr[:, :32], base + 4 * np.arange(96, dtype=np.uint64).reshape(3, 32))
    ctas = cta_records(launch.cta, 2)
    assert ctas.sm.tolist() == [0, 1] and ctas.start.tolist() == [0, 1] and ctas.end.tolist() == [100, 101]
    # a counting run of CTA 1 alone serves a snapshot of CTA 1 (the same records), not one of CTA 0
    assert _run_stub(stubbed, tmp_path, mode="count", kernel=GATHER, launch="1", out=str(count), count_lo="1",
                     count_hi="2").returncode == 0
    [c] = read_record_file(count)
    assert (c.cta_lo, c.cta_hi) == (1, 2) and c.used.tolist() == [33] * 3
    again = tmp_path / "r2.tprec"
    assert _run_stub(stubbed, tmp_path, mode="record", kernel=GATHER, launch="1", out=str(again), counts=str(count),
                     cta_lo="1", cta_hi="2").returncode == 0
    np.testing.assert_array_equal(read_record_file(again)[0].words, launch.words)
    r = _run_stub(stubbed, tmp_path, mode="record", kernel=GATHER, launch="1", out=str(again) + "x",
                  counts=str(count), cta_lo="0", cta_hi="1")
    assert "do not match this launch" in r.stderr and not Path(str(again) + "x").exists()


def test_runtime_leaves_other_launches_alone(stubbed: Path, tmp_path: Path) -> None:
    """No TUIPROF_MODE, another kernel's name, or a launch index past the last: no record file and
    a clean exit; a recording run whose counting file names another kernel records nothing and
    says so on stderr."""
    out = tmp_path / "x.tprec"
    for env in ({}, {"mode": "count", "kernel": "_Z5otherv"}, {"mode": "count", "kernel": GATHER, "launch": "2"}):
        r = _run_stub(stubbed, tmp_path, out=str(out), **env)
        assert r.returncode == 0 and r.stderr == "" and not out.exists(), env
    count = tmp_path / "c.tprec"
    assert _run_stub(stubbed, tmp_path, mode="count", kernel="_Z5saxpyPfPKffi", out=str(count)).returncode == 0
    r = _run_stub(stubbed, tmp_path, mode="record", kernel=GATHER, out=str(out), counts=str(count), cta_lo="0",
                  cta_hi="1")
    assert r.returncode == 0 and not out.exists()
    assert "[tuiprof] the counting run's records do not match this launch; nothing recorded" in r.stderr


def _fake_program(tmp_path: Path) -> WholeProgram:
    from tuiprof.toolchain.wholeprog import ModuleMeta

    mods = (ModuleMeta(0, "/src/a.cu", "m0.ptx", "sm_80", (), ("_Z4spmvPfi", "_Z3addIfEvPT_", "_Z3addIiEvPT_"), {}),)
    return WholeProgram(tmp_path / "app", tmp_path / "app.tuiprof", mods, ())


def test_resolve_kernel(tmp_path: Path) -> None:
    from tuiprof.collect.gpu.program_run import resolve_kernel

    prog = _fake_program(tmp_path)
    assert resolve_kernel(prog, None) is None
    assert resolve_kernel(prog, "_Z4spmvPfi") == "_Z4spmvPfi"
    assert resolve_kernel(prog, "spmv") == "_Z4spmvPfi"
    assert resolve_kernel(prog, "void add<int>(int*)") == "_Z3addIiEvPT_"
    with pytest.raises(TuiprofError, match="ambiguous"):
        resolve_kernel(prog, "add")
    with pytest.raises(TuiprofError, match="no kernel 'gemm'"):
        resolve_kernel(prog, "gemm")


def test_program_exit_and_missing_records(tmp_path: Path) -> None:
    from tuiprof.collect.gpu.program_run import ProgramError, _one_launch, run_program

    script = tmp_path / "prog.sh"
    script.write_text("#!/bin/sh\necho \"args: $*\"\nexit 3\n")
    script.chmod(0o755)
    assert run_program(script, ["a", "b"], dict(os.environ), timeout=60) == 3
    with pytest.raises(ProgramError, match="prog exited with status 3 before the chosen launch was recorded"):
        _one_launch(tmp_path / "none.tprec", 3, "counting", "prog")
    with pytest.raises(ProgramError, match="was killed by SIGSEGV"):
        _one_launch(tmp_path / "none.tprec", -11, "counting", "prog")
    with pytest.raises(ProgramError, match="never made the chosen launch"):
        _one_launch(tmp_path / "none.tprec", 0, "recording", "prog")
    (tmp_path / "bad.tprec").write_bytes(b"nonsense")
    with pytest.raises(ProgramError, match="counting run: .* is not a tuiprof record file"):
        _one_launch(tmp_path / "bad.tprec", 0, "counting", "prog")
    hang = tmp_path / "hang.sh"
    hang.write_text("#!/bin/sh\nsleep 30 & sleep 30\n")
    hang.chmod(0o755)
    with pytest.raises(ProgramError, match="ran longer than 0.5 s"):
        run_program(hang, [], dict(os.environ), timeout=0.5)


def test_collect_program_without_gpu_is_one_clear_error(tmp_path: Path) -> None:
    from tuiprof.arch import load_arch
    from tuiprof.collect.gpu.driver import GpuUnavailable, gpu_problem
    from tuiprof.collect.gpu.program_run import collect_program

    if gpu_problem() is None:
        pytest.skip("a GPU is usable here")
    with pytest.raises(GpuUnavailable, match="profiling app needs an NVIDIA GPU") as exc:
        collect_program(_fake_program(tmp_path), [], arch=load_arch("a100"))
    assert "emulator" in exc.value.hint


def test_profile_sources_without_gpu(tmp_path: Path) -> None:
    from tuiprof.arch import load_arch
    from tuiprof.collect.gpu.driver import GpuUnavailable, gpu_problem
    from tuiprof.collect.gpu.program_run import profile_sources

    if gpu_problem() is None:
        pytest.skip("a GPU is usable here")
    with pytest.raises(GpuUnavailable, match="profiling a whole program needs an NVIDIA GPU"):
        profile_sources(["nvcc", "app.cu", "-o", "app"], [], arch=load_arch("a100"), cwd=tmp_path)


@needs_toolkit
def test_instrumented_units_keep_the_plain_occupancy(tmp_path: Path) -> None:
    """The build's instrumentation step on a unit of three kernels (sm_75): the plain resources
    go into the metadata; ptxas then compiles each kernel into the registers that keep its plain
    occupancy (`.maxnreg`), with no more local memory than the plain kernel."""
    import functools

    from tuiprof.arch import load_arch
    from tuiprof.arch.occupancy import register_cap
    from tuiprof.toolchain.wholeprog import _instrument_file
    from tuiprof.toolchain.wholeprog import ptxas_report as _ptxas_report

    fixture = Path(__file__).parents[1] / "ptx" / "nvcc" / "demo_matmul_tiles.sm75.ptx"
    ptx = tmp_path / "unit.ptx"
    shutil.copy(fixture, ptx)
    folder = tmp_path / "meta"
    folder.mkdir()
    report = functools.partial(_ptxas_report, folder=folder, nvcc_path=str(find_nvcc()), cwd=tmp_path, timeout=300,
                               stage=tmp_path)
    plain = report(fixture.read_text(), "sm_75")
    meta = _instrument_file(ptx, 3, "tiles.cu", folder, report)
    assert meta.tag == 3 and meta.target == "sm_75" and (folder / meta.ptx).read_text() == fixture.read_text()
    assert {k: (r.registers_per_thread, r.static_shared, r.local_bytes_per_thread)
            for k, r in meta.resources.items()} == plain
    text = ptx.read_text()
    compiled = report(text, "sm_75")
    v100 = load_arch("v100")
    capped = 0
    for k, (regs, shared, local) in plain.items():
        assert compiled[k][1:] == (shared, local), k
        assert meta.probe_registers[k] == compiled[k][0]
        cap = re.search(rf"\.entry {k}\([^)]*\)\s*\.maxnreg (\d+)", text)
        if cap:
            capped += 1
            assert compiled[k][0] <= int(cap.group(1)) <= register_cap(v100, regs)
    assert capped == 3


def test_cached_builds_are_keyed_by_the_instrumenter(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A program built by other probes is never reused: the build cache's key covers the
    instrumentation pass's and the build's code."""
    from tuiprof.collect.gpu import program_run

    before = program_run.instrumenter_digest()
    assert before == program_run.instrumenter_digest()
    fake = tmp_path / "instrument.py"
    fake.write_text("# other probes\n")
    import tuiprof.ptx.instrument as inst

    monkeypatch.setattr(inst, "__file__", str(fake))
    assert program_run.instrumenter_digest() != before


@needs_toolkit
def test_collect_program_end_to_end_on_the_runtime_stand_in(stubbed: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """`collect_program` on a built program whose binary is the runtime linked with the CUDA
    runtime stand-in: its two runs (the counting one bounded to the CTAs a snapshot may take),
    the snapshot rule, the decoding against the program's own sites and ops, the trace."""
    import dataclasses

    from tests.support.emu_driver import emulator_as_gpu
    from tuiprof.arch import load_arch
    from tuiprof.collect.gpu.program_run import collect_program

    shutil.copy(CUDA_DIR / "wholeprog_main.cu", tmp_path / "app.cu")
    built = build_instrumented(["app.cu", "-arch=sm_80", "-o", "app.instr"], cwd=tmp_path)
    [module] = built.modules
    site = next(i for i, s in enumerate(module.sites) if s.function == GATHER)  # gather's first access
    prog = dataclasses.replace(built, binary=stubbed)
    emulator_as_gpu(monkeypatch)
    monkeypatch.setenv("TUIPROF_STUB_SITE", str(site))
    run = collect_program(prog, LAUNCHES, arch=load_arch("h100"), kernel="gather", launch_index=1, cwd=tmp_path)
    t = run.trace
    assert run.exits == (0, 0) and run.notes == ()
    assert (t.launch.kernel, t.launch.grid, t.launch.block) == (GATHER, (2, 1, 1), (96, 1, 1))
    assert t.snapshot.cta_ids.tolist() == [0, 1] and t.n_warps == 6 and t.n_accesses == 6
    assert t.provenance.backend == "gpu" and t.provenance.generator["launch_index"] == 1
    # the source is named as the ops name their file, so the report and the UI find their lines
    assert [s.name for s in t.sources] == ["app.cu"] and {o.file for o in t.ops} == {"app.cu"}
    assert "out[i] = in[idx[i]];" in t.source_text("app.cu")
    assert {t.ops[o].kernel for o in t.op} == {GATHER} and len(set(t.op.tolist())) == 1
    np.testing.assert_array_equal(np.sort(t.addr.ravel()), 0x7F0000100000 + 4 * np.arange(192, dtype=np.uint64))


@needs_toolkit
def test_collect_program_records_a_warm_up_before_the_snapshot(stubbed: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole programs take the snapshot's warm-up as kernel files do (issue 24.3): launch 1 of
    gather has 2 CTAs; a snapshot of 1 CTA from CTA 1 after 1 warm-up CTA records CTAs 0 and 1,
    CTA 0 only warming (Snapshot.warm 1, said in the rule); the command line's default (start
    and warm None: one resident set of the H100, bounded by the CTAs before the snapshot) does
    the same; --snapshot-warm 0 with the default start is the cold snapshot of CTA 0 alone. The
    counting run counts the CTAs the warm-up takes too (the recording would refuse otherwise)."""
    import dataclasses

    from tests.support.emu_driver import emulator_as_gpu
    from tuiprof.arch import load_arch
    from tuiprof.collect.gpu.program_run import collect_program

    shutil.copy(CUDA_DIR / "wholeprog_main.cu", tmp_path / "app.cu")
    built = build_instrumented(["app.cu", "-arch=sm_80", "-o", "app.instr"], cwd=tmp_path)
    [module] = built.modules
    site = next(i for i, s in enumerate(module.sites) if s.function == GATHER)
    prog = dataclasses.replace(built, binary=stubbed)
    emulator_as_gpu(monkeypatch)
    monkeypatch.setenv("TUIPROF_STUB_SITE", str(site))
    h100 = load_arch("h100")
    for start, warm, ids, counted in ((1, 1, [0, 1], 1), (None, None, [0, 1], 1), (None, 0, [0], 0)):
        run = collect_program(prog, LAUNCHES, arch=h100, kernel="gather", launch_index=1, cwd=tmp_path,
                              snapshot_ctas=1, snapshot_start=start, snapshot_warm=warm)
        t = run.trace
        assert run.exits == (0, 0) and t.snapshot.cta_ids.tolist() == ids, (start, warm)
        assert t.snapshot.warm == counted and t.snapshot.counted_ctas == 1 and t.n_warps == 3 * len(ids)
        assert ("that warm the caches" in t.snapshot.rule) == bool(counted)
        assert ("the default warm-up" in t.snapshot.rule) == (warm is None)
