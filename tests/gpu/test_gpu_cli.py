"""The GPU command lines. Without a GPU: whole programs (`tuiprof app.cu [nvcc args] [-- args]`,
`tuiprof -- nvcc ...`), --backend gpu, calibrate and validate say in one message that they need a
GPU and point at the emulator (exit 2, no traceback); --backend auto records in the emulator. With
a GPU pretended (the driver never reached): the arguments reach the program runner and the GPU
collector as given. `tuiprof build` builds with nvcc alone; ncu's CSV (a sample written from
NVIDIA's documented layout, not captured from a real ncu) is parsed into measured values and
compared with a prediction."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tests.support.ptx_support import CUDA_DIR, find_nvcc, nvrtc_available
from tuiprof.cli.main import main
from tuiprof.collect.gpu.driver import DeviceInfo, GpuUnavailable, gpu_problem
from tuiprof.collect.gpu.ncu import METRICS, ValidateError, measured_values, ncu_command, parse_ncu_csv
from tuiprof.model.latency import Estimate
from tuiprof.trace.data import StaticOp
from tuiprof.trace.packed import lane_addresses
from tuiprof.validate import Comparison, compare, predicted_sectors_per_request, render

ROOT = Path(__file__).resolve().parents[2]
no_gpu = pytest.mark.skipif(gpu_problem() is None, reason="a GPU is usable here")


def tuiprof(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tuiprof", *args], capture_output=True, text=True, timeout=600,
                          cwd=cwd, env=env)


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with a whole program (app.cu defines main) and a kernel file with its launch
    script (k.cu, k_launch.py), as the current folder."""
    shutil.copy(CUDA_DIR / "wholeprog_main.cu", tmp_path / "app.cu")
    (tmp_path / "k.cu").write_text(KERNEL)
    (tmp_path / "k_launch.py").write_text(LAUNCH)
    monkeypatch.chdir(tmp_path)
    return tmp_path


KERNEL = """extern "C" __global__ void twice(float *y, const float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""
LAUNCH = """import numpy as np


def setup(dev):
    x = dev.to_device(np.arange(256, dtype=np.float32))
    y = dev.zeros(256, np.float32)
    dev.launch("twice", 2, 128, (y, x, np.int32(256)))
"""

WHOLE_PROGRAM = "error: profiling app.cu as a whole program needs an NVIDIA GPU: "
BACKEND_GPU = "error: --backend gpu needs an NVIDIA GPU: "
VALIDATE = "error: tuiprof validate needs an NVIDIA GPU: "
EMULATOR_PATH = "`tuiprof init app.cu` writes a launch script, then `tuiprof app.cu --backend emu`"


@no_gpu
@pytest.mark.parametrize("args, error, hint", [
    (["app.cu"], WHOLE_PROGRAM, EMULATOR_PATH),
    (["app.cu", "-arch=sm_80", "-O3", "--", "4096"], WHOLE_PROGRAM, EMULATOR_PATH),
    (["app.cu", "--once", "-Xptxas", "-v", "--kernel", "gather"], WHOLE_PROGRAM, EMULATOR_PATH),
    (["report", "app.cu", "--format", "json", "--", "4096"], WHOLE_PROGRAM, EMULATOR_PATH),
    (["record", "app.cu", "-o", "app.tptrace", "-DN=3"], WHOLE_PROGRAM, EMULATOR_PATH),
    (["--", "nvcc", "-o", "app", "app.cu"], WHOLE_PROGRAM, EMULATOR_PATH),
    (["--once", "--", "nvcc", "-o", "app", "app.cu", "-lineinfo", "--", "7"], WHOLE_PROGRAM, EMULATOR_PATH),
    (["report", "--arch", "h100", "--", "/usr/local/cuda/bin/nvcc", "app.cu", "k.cu"], WHOLE_PROGRAM, EMULATOR_PATH),
    (["k.cu", "--backend", "gpu"], BACKEND_GPU, "--backend emu"),
    (["report", "k.cu", "--backend", "gpu", "--cuda", "pycuda"], BACKEND_GPU, "--backend emu"),
    (["record", "k.cu", "-o", "k.tptrace", "--backend", "gpu"], BACKEND_GPU, "--backend emu"),
    (["validate", "k.cu"], VALIDATE, "`tuiprof report k.cu --backend emu` still predicts"),
    (["validate", "spmv-u"], VALIDATE, "`tuiprof report spmv-u` still predicts"),
    (["validate", "app.instr", "--kernel", "gather", "--", "1048576"], VALIDATE, EMULATOR_PATH.replace("app", "SOURCE")),
    (["validate", "--kernel", "gather", "app.instr", "--", "1048576"], VALIDATE, EMULATOR_PATH.replace("app", "SOURCE")),
    (["calibrate"], "error: tuiprof calibrate needs an NVIDIA GPU: ", "`tuiprof archs`"),
    (["calibrate", "--cuda", "pycuda"], "error: tuiprof calibrate needs an NVIDIA GPU: ", "`tuiprof archs`"),
])
def test_gpu_commands_without_gpu(app: Path, capsys: pytest.CaptureFixture[str], args: list[str], error: str,
                                  hint: str) -> None:
    """Every command that needs a GPU: one error line that says so and why, one hint line that
    points where to go (the emulator path that exists: a kernel file with its launch script and
    --backend emu), exit 2, nothing on stdout, no file written. (Before the CLI knew these forms,
    most of them failed as "unrecognized arguments".)"""
    before = sorted(p.name for p in app.iterdir())
    assert main(args) == 2
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 2 and lines[0].startswith(error) and lines[1].startswith("hint: "), err
    assert hint in lines[1] and out == ""
    assert sorted(p.name for p in app.iterdir()) == before


def test_gpu_command_without_gpu_in_a_fresh_process(app: Path) -> None:
    """The same through the installed entry point's code path: no traceback, exit 2."""
    if gpu_problem() is None:
        pytest.skip("a GPU is usable here")
    r = tuiprof("app.cu", "-arch=sm_80", "--", "5", cwd=app)
    assert r.returncode == 2 and r.stderr.startswith(WHOLE_PROGRAM) and "Traceback" not in r.stderr


@pytest.mark.parametrize("args, message", [
    (["k.cu", "-arch=sm_80"], "unrecognized arguments: -arch=sm_80"),  # a kernel file takes --cflag=FLAG
    (["report", "k.cu", "-O3", "--backend", "emu"], "unrecognized arguments: -O3"),
    (["app.cu", "--backend", "emu", "-O3"], "unrecognized arguments: -O3"),  # the emulator: a kernel file
    (["report", "k.cu", "--", "5"], "program arguments (after --): k.cu is profiled as a kernel file"),
    (["report", "spmv-u", "--", "5"], "arguments after -- are a program's, and spmv-u is a trace"),
    (["report", "spmv-u", "-arch=sm_80"], "unrecognized arguments: -arch=sm_80"),
    (["archs", "-x"], "unrecognized arguments: -x"),
    (["--", "nvcc", "-o", "app"], "the nvcc command line after -- names no .cu source"),
    (["validate", "spmv-u", "--", "5"], "arguments after -- are a program's, and spmv-u is a kernel file"),
    (["validate", "app.instr", "5"], "unrecognized arguments: 5"),
])
def test_misplaced_program_arguments(app: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                     message: str) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and "\nhint: " in err and "Traceback" not in err


def test_whole_program_is_recognised_by_its_main() -> None:
    from tuiprof.toolchain.wholeprog import defines_main

    assert defines_main((CUDA_DIR / "wholeprog_main.cu").read_text())
    assert defines_main((CUDA_DIR / "wholeprog_rdc_main.cu").read_text())
    assert not defines_main((CUDA_DIR / "wholeprog_rdc_lib.cu").read_text())
    assert not any(defines_main(p.read_text()) for p in (ROOT / "demo_traces").glob("*.cu"))
    programs = ["int main() { return 0; }", "int main(int argc, char *argv[])\n{", "int\nmain\n(\n)\n{",
                "auto main() -> int {", "static const char q = '\\''; int main(void){"]
    others = ["// int main() {}\n__global__ void k() {}", "/* int main() {\n} */", 'const char *s = "int main() {";',
              "obj.main() {", "ns::main() {", "int main();", "void f() { main(); }", "__global__ void domain() {}"]
    assert all(defines_main(t) for t in programs)
    assert not any(defines_main(t) for t in others)


def test_backend_choice_without_gpu() -> None:
    from tuiprof.collect.options import CollectOptions
    from tuiprof.collect.pipeline import choose_backend

    if gpu_problem() is None:
        pytest.skip("a GPU is usable here")
    backend, why = choose_backend(CollectOptions(backend="auto"))
    assert backend == "emu" and why is not None and why.startswith("--backend auto chose the emulator: ")
    assert choose_backend(CollectOptions(backend="emu")) == ("emu", None)
    with pytest.raises(GpuUnavailable, match="--backend gpu needs an NVIDIA GPU") as exc:
        choose_backend(CollectOptions(backend="gpu"))
    assert "--backend emu" in exc.value.hint


def test_cli_choices_are_the_collectors() -> None:
    """The CLI repeats the choices (importing tuiprof.collect would import NumPy into --help)."""
    from tuiprof.cli import gpu as cli_gpu
    from tuiprof.collect import options

    assert cli_gpu.BACKENDS == options.BACKENDS and cli_gpu.CUDA_LIBRARIES == options.CUDA_LIBRARIES


@pytest.mark.skipif(find_nvcc() is None and not nvrtc_available(), reason="no CUDA compiler")
def test_auto_backend_without_gpu_records_in_the_emulator(app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--backend auto (the default) falls back to the emulator and says so in the provenance;
    --backend emu records the same accesses and says nothing of a choice."""
    from tuiprof.trace.io import load_trace

    if gpu_problem() is None:
        pytest.skip("a GPU is usable here")
    assert main(["record", "k.cu", "-o", "auto.tptrace"]) == 0
    assert main(["record", "k.cu", "-o", "emu.tptrace", "--backend", "emu"]) == 0
    auto, emu = load_trace(app / "auto.tptrace"), load_trace(app / "emu.tptrace")
    assert auto.provenance.backend == emu.provenance.backend == "emulator"
    assert auto.provenance.generator["backend_choice"].startswith("--backend auto chose the emulator: ")
    assert "backend_choice" not in emu.provenance.generator
    np.testing.assert_array_equal(lane_addresses(auto), lane_addresses(emu))


# --------------------------------------------------------------------------- with a GPU, pretended


@pytest.fixture
def pretend_gpu(monkeypatch: pytest.MonkeyPatch) -> DeviceInfo:
    """`gpu_problem` and `gpu_info` answer as on an H100; nothing may reach a real driver."""
    from tuiprof.collect.gpu import driver

    info = DeviceInfo(name="pretend H100", compute_capability=(9, 0), sm_count=132, clock_mhz=1755,
                      memory_clock_mhz=2619, driver="13.0", library="cuda-bindings (pretend)")
    monkeypatch.setattr(driver, "_PROBLEM", {"cuda-bindings": None, "pycuda": None})
    monkeypatch.setattr(driver, "_INFO", {"cuda-bindings": info, "pycuda": info})

    def no_driver(cuda: str) -> None:
        raise AssertionError("a test with a pretended GPU opened a driver")

    monkeypatch.setattr(driver, "_open_driver", no_driver)
    return info


def _some_trace() -> Any:
    import dataclasses

    from tuiprof import demos
    from tuiprof.trace.io import load_trace

    t = load_trace(demos.demo_path("vecadd"))
    return dataclasses.replace(t, provenance=dataclasses.replace(t.provenance, backend="gpu", gpu="pretend H100"))


def test_whole_program_command_lines_reach_the_program(app: Path, pretend_gpu: DeviceInfo,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`tuiprof record app.cu [nvcc args] -- ARGS` and `tuiprof record -- nvcc ... -- ARGS`: the
    nvcc arguments and the program's own arguments reach `profile_sources` as given, the arch is
    the GPU's generation, the notes are said, and the trace is kept beside the cached binary."""
    from tuiprof.collect.gpu import program_run
    from tuiprof.collect.gpu.program_run import ProgramRun
    from tuiprof.trace.io import load_trace

    calls: list[tuple[tuple[str, ...], tuple[str, ...], dict[str, Any]]] = []
    cache = app / "cache"
    cache.mkdir()

    def fake(command: Sequence[str], program_args: Sequence[str], **kw: Any) -> ProgramRun:
        calls.append((tuple(command), tuple(program_args), kw))
        return ProgramRun(_some_trace(), (0, 3), ("the recording run exited with status 3 after the chosen launch; "
                                                   "the trace is complete",), cache / "app")

    monkeypatch.setattr(program_run, "profile_sources", fake)
    assert main(["record", "app.cu", "-o", "one.tptrace", "-arch=sm_90", "-O3", "--kernel", "gather", "-I", "inc",
                 "--launch-index", "1", "--", "5", "--flag"]) == 0
    command, args, kw = calls[-1]
    assert command == ("app.cu", "-arch=sm_90", "-O3", "-I", "inc") and args == ("5", "--flag")
    assert kw["kernel"] == "gather" and kw["launch_index"] == 1 and kw["arch"].name == "h100"
    err = capsys.readouterr().err
    assert "note: the recording run exited with status 3" in err and f"the trace is kept in {cache / 'app.tptrace'}" in err
    kept, saved = load_trace(cache / "app.tptrace"), load_trace(app / "one.tptrace")
    assert kept.provenance.arch == saved.provenance.arch == "h100" and saved.provenance.backend == "gpu"

    assert main(["record", "--arch", "a100", "-o", "two.tptrace", "--", "nvcc", "-o", "app", "main.cu", "lib.cu",
                 "-rdc=true", "--", "7"]) == 0
    command, args, kw = calls[-1]  # no architecture named: built for the GPU at hand (compute capability 9.0)
    assert command == ("nvcc", "-o", "app", "main.cu", "lib.cu", "-rdc=true", "-arch=sm_90") and args == ("7",)
    assert kw["arch"].name == "a100" and load_trace(app / "two.tptrace").provenance.arch == "a100"
    assert main(["record", "app.cu", "-o", "three.tptrace", "-gencode", "arch=compute_80,code=sm_80"]) == 0
    assert calls[-1][:2] == (("app.cu", "-gencode", "arch=compute_80,code=sm_80"), ())


def test_kernel_file_on_the_gpu(app: Path, pretend_gpu: DeviceInfo, monkeypatch: pytest.MonkeyPatch) -> None:
    """--backend gpu and auto (a GPU is usable) record through `record_kernel_file` with --cuda's
    library, the launch script beside the source and the GPU generation's arch."""
    from tuiprof.collect.gpu import run
    from tuiprof.trace.io import load_trace

    calls: list[dict[str, Any]] = []

    def fake(source: Any, script: Any, **kw: Any) -> Any:
        calls.append(dict(kw, source=source, script=script.path))
        return run.GpuRun(_some_trace(), 0.1, 0.1, pretend_gpu, (("twice", 0.1), ("twice", 0.2)))

    monkeypatch.setattr(run, "record_kernel_file", fake)
    assert main(["record", "k.cu", "-o", "k.tptrace", "--backend", "gpu", "--cuda", "pycuda", "--snapshot", "3"]) == 0
    kw = calls[-1]
    assert kw["cuda"] == "pycuda" and kw["snapshot_ctas"] == 3 and kw["arch_name"] == "h100"
    assert Path(kw["script"]).name == "k_launch.py" and Path(kw["source"]).name == "k.cu"
    t = load_trace(app / "k.tptrace")
    assert t.provenance.backend == "gpu" and t.provenance.generator["launch_script"] == "k_launch.py"
    assert main(["record", "k.cu", "-o", "auto.tptrace"]) == 0 and calls[-1]["cuda"] == "cuda-bindings"
    assert len(calls) == 2


def test_validate_targets() -> None:
    """A demo name validates the demo's kernel file with its own launch script, kernel, launch and
    snapshot (start and warm-up too: as its trace was recorded; the command line's where it names them); a .cu is a kernel file; anything else a built program,
    whose arguments follow -- after any options."""
    from tuiprof.cli.gpu import _validate_target
    from tuiprof.cli.main import build_parser, parse_command_line
    from tuiprof.demos import demo_dir

    def target(*argv: str) -> tuple[Path, Any]:
        return _validate_target(parse_command_line(build_parser(), ["validate", *argv]))

    source, opts = target("bfs")
    assert source == demo_dir() / "bfs.cu" and opts.launch == demo_dir() / "bfs_launch.py"
    assert (opts.kernel, opts.launch_index, opts.snapshot) == ("bfs_expand", 5, None)
    source, opts = target("bfs", "--kernel", "bfs_update", "--launch-index", "2", "--snapshot", "4")
    assert (opts.kernel, opts.launch_index, opts.snapshot) == ("bfs_update", 2, 4)
    source, opts = target("matmul-tile8", "--cuda", "pycuda")
    assert source.name == "matmul_tiles.cu" and opts.snapshot == 512 and opts.cuda == "pycuda"
    assert (opts.snapshot_start, opts.snapshot_warm) == (512, 512)  # the demo's, not the automatic warm-up
    source, opts = target("matmul-tile8", "--snapshot-warm", "0")
    assert (opts.snapshot_start, opts.snapshot_warm) == (512, 0)
    source, opts = target("bfs")
    assert (opts.snapshot_start, opts.snapshot_warm) == (0, 0)
    source, opts = target("demo_traces/vecadd.cu")
    assert source == Path("demo_traces/vecadd.cu") and opts.launch is None
    args = parse_command_line(build_parser(), ["validate", "app.instr", "--kernel", "gather", "--", "1048576", "-v"])
    assert _validate_target(args) == (Path("app.instr"), None)
    assert (args.kernel, args.program_args) == ("gather", ["1048576", "-v"])


@pytest.mark.skipif(find_nvcc() is None or shutil.which("g++") is None, reason="nvcc and g++ are needed")
def test_build_command(tmp_path: Path) -> None:
    shutil.copy(CUDA_DIR / "wholeprog_main.cu", tmp_path / "app.cu")
    r = tuiprof("build", "app.cu", "-o", "app.instr", "-arch=sm_75", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "built " in r.stdout and "2 kernel(s)" in r.stdout
    assert (tmp_path / "app.instr").is_file() and (tmp_path / "app.instr.tuiprof" / "meta.json").is_file()
    r = tuiprof("build", "--", "-c", "app.cu", cwd=tmp_path)
    assert r.returncode == 2 and "error: nvcc -c compiles without linking" in r.stderr
    r = tuiprof("build", cwd=tmp_path)
    assert r.returncode == 2 and "needs an nvcc command line" in r.stderr


@pytest.mark.skipif(find_nvcc() is None or shutil.which("g++") is None, reason="nvcc and g++ are needed")
def test_build_of_a_kernel_file_says_it_has_no_main(tmp_path: Path) -> None:
    """A kernel file (no main) fails at the link: the hint says why and where to go instead, and the
    failed build leaves no metadata folder behind (it used to leave v.instr.tuiprof/toolchain/)."""
    shutil.copy(ROOT / "demo_traces" / "vecadd.cu", tmp_path / "vecadd.cu")
    r = tuiprof("build", "vecadd.cu", "-o", "v.instr", "-arch=sm_75", cwd=tmp_path)
    # a build that takes over a few seconds says its steps first (`tuiprof build: step 6/12 ...`)
    stderr = "".join(line for line in r.stderr.splitlines(keepends=True) if not line.startswith("tuiprof build: step "))
    assert r.returncode == 2 and stderr.startswith("error: the instrumented build failed at ")
    assert "undefined reference to `main'" in stderr and "Traceback" not in r.stderr
    hint = stderr[stderr.index("\nhint: "):]
    assert "no source defines main()" in hint and "tuiprof init KERNEL.cu" in hint and "please report" not in hint
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vecadd.cu"]


# --------------------------------------------------------------------------- ncu CSV

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def row(lid: str, kernel: str, metric: str, unit: str, value: str) -> str:
    return (f'"{lid}","4242","python3","gpu01","{kernel}","1","7","(256, 1, 1)","(64, 1, 1)","0","8.0",'
            f'"Command line profiler metrics","{metric}","{unit}","{value}"')


SAMPLE = "\n".join([
    "==PROF== Connected to process 4242 (/usr/bin/python3)",
    "the program's own line",
    "==PROF== Profiling \"spmv_csr_scalar\" - 0: 0%....50%....100% - 9 passes",
    HEADER,
    row("0", "spmv_csr_scalar", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "", "1,310,720"),
    row("0", "spmv_csr_scalar", "l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct", "%", "42.17"),
    row("0", "spmv_csr_scalar", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "sector", "6,553,600"),
    row("0", "spmv_csr_scalar", "lts__t_sector_op_read_hit_rate.pct", "%", "71.5"),
    row("0", "spmv_csr_scalar", "lts__t_sector_op_write_hit_rate.pct", "%", "n/a"),
    "==PROF== Disconnected from process 4242",
]) + "\n"


def test_parse_ncu_csv_sample() -> None:
    [launch] = parse_ncu_csv(SAMPLE)
    assert launch.id == "0" and launch.kernel == "spmv_csr_scalar"
    assert launch.metrics["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"] == 1310720
    assert launch.metrics["lts__t_sector_op_write_hit_rate.pct"] is None
    m = measured_values(launch)
    assert m == pytest.approx({"l1_read": 0.4217, "l2_read": 0.715, "sectors_per_request": 5.0})
    two = SAMPLE.replace('"0","4242"', '"1","4242"', 2)
    assert [x.id for x in parse_ncu_csv(two)] == ["1", "0"]


@pytest.mark.parametrize("text, message", [
    ("==PROF== No kernels were profiled.\n", "no CSV table"),
    ('"ID","Kernel Name"\n"0","k"\n', "lacks the columns Metric Name, Metric Value"),
])
def test_parse_ncu_csv_errors(text: str, message: str) -> None:
    with pytest.raises(ValidateError, match=message):
        parse_ncu_csv(text)


def test_ncu_command(tmp_path: Path) -> None:
    cmd = ncu_command("/opt/ncu", ["./app", "-n", "4"], kernel="_Z4spmvPfi", launch_index=2, log=tmp_path / "l.csv")
    assert cmd[:2] == ["/opt/ncu", "--csv"]
    assert cmd[cmd.index("--cache-control") + 1] == "all"
    assert cmd[cmd.index("--metrics") + 1].split(",") == list(METRICS)
    assert cmd[cmd.index("--launch-skip") + 1] == "2" and cmd[cmd.index("--launch-count") + 1] == "1"
    assert cmd[cmd.index("--kernel-name") + 1] == "_Z4spmvPfi" and "mangled" in cmd
    assert cmd[-4:] == ["--", "./app", "-n", "4"]
    assert "--kernel-name" not in ncu_command("ncu", ["x"], kernel=None, launch_index=0, log=tmp_path / "l")


def _est(mean: float, lo: float, hi: float) -> Estimate:
    return Estimate(mean=mean, std=0.01, spread_lo=lo, spread_hi=hi, ci_lo=mean, ci_hi=mean, stderr=0.001, n=64)


def _op(i: int, kind: str, space: str) -> StaticOp:
    return StaticOp(id=i, kernel="k", kind=kind, space=space, bytes=4, file="k.cu", line=i + 1)


def test_compare_and_render() -> None:
    ops = (SimpleNamespace(op=_op(0, "load", "global"), warp_accesses=100, sectors_per_access=8.0, passes=None),
           SimpleNamespace(op=_op(1, "load", "global"), warp_accesses=50, sectors_per_access=4.0, passes=None),
           SimpleNamespace(op=_op(2, "store", "global"), warp_accesses=80, sectors_per_access=4.0, passes=None),
           SimpleNamespace(op=_op(3, "load", "shared"), warp_accesses=80, sectors_per_access=8.0, passes=None))
    analysis = SimpleNamespace(headline={"l1_read": _est(0.45, 0.43, 0.47), "l2_read": _est(0.80, 0.78, 0.82),
                                         "l2_write": _est(float("nan"), float("nan"), float("nan"))}, ops=ops)
    # ncu's sectors per request are per warp instruction: (100 x 8 + 50 x 4) sectors / 150 accesses
    assert predicted_sectors_per_request(analysis) == pytest.approx(1000 / 150)
    rows = compare(analysis, {"l1_read": 0.4217, "l2_read": 0.715, "l2_write": 0.9, "sectors_per_request": 3.0})
    assert [c.key for c in rows] == ["l1_read", "l2_read", "sectors_per_request"]
    assert rows[0].abs_error == pytest.approx(0.0283) and not rows[0].inside
    assert rows[1].abs_error == pytest.approx(0.085)
    text = render(rows)
    assert "L1 read hit ratio" in text and "45.0%" in text and "42.2%" in text and "2.8 pts" in text
    assert "sectors / request (global loads)  6.67" in text
    assert "mean absolute error of the hit ratios: 5.7 percentage points" in text
    assert Comparison("l2_read", 0.5, 0.4, 0.6, 0.45).inside


def test_plain_run_usage() -> None:
    r = subprocess.run([sys.executable, "-m", "tuiprof.collect.gpu.ncu"], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 2 and "usage:" in r.stderr


def test_kernel_file_end_to_end_through_the_gpu_path(app: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """`tuiprof record k.cu --backend gpu` through every step of the GPU path but the driver
    itself, whose part the emulator plays (tests/support/emu_driver.py): the register caps, the
    instrumented PTX, both passes, the snapshot rule, the decoding and the trace's provenance.
    The trace holds the accesses the emulator backend records (`--backend emu`), CTA by CTA,
    each buffer's addresses relative to its own start."""
    from tests.support.emu_driver import emulator_as_gpu
    from tuiprof.trace.io import load_trace

    emulator_as_gpu(monkeypatch)
    assert main(["record", "k.cu", "-o", "gpu.tptrace", "--backend", "gpu"]) == 0
    assert main(["record", "k.cu", "-o", "emu.tptrace", "--backend", "emu"]) == 0
    g, e = load_trace(app / "gpu.tptrace"), load_trace(app / "emu.tptrace")
    assert (g.provenance.backend, g.provenance.gpu, g.provenance.arch) == ("gpu", "tuiprof emulator", "a100")
    assert g.provenance.generator["launch_script"] == "k_launch.py" and g.ctas.measured_timing
    assert g.sources == e.sources and {o.file for o in g.ops} == {s.name for s in g.sources} == {"k.cu"}
    assert (g.launch.grid, g.launch.block) == (e.launch.grid, e.launch.block) == ((2, 1, 1), (128, 1, 1))
    assert np.array_equal(g.snapshot.cta_ids, e.snapshot.cta_ids) and np.array_equal(g.warp_offsets, e.warp_offsets)
    np.testing.assert_array_equal(g.op, e.op)
    np.testing.assert_array_equal(g.mask, e.mask)
    def relative(t: Any) -> np.ndarray:  # x (op 0) and y (op 1): each op's addresses from its buffer's start
        addr = lane_addresses(t).copy()
        for op in (0, 1):
            addr[t.op == op] -= addr[t.op == op].min()
        return addr

    np.testing.assert_array_equal(relative(g), relative(e))
    assert "recorded" in capsys.readouterr().err


FAKE_NCU = '''#!{python}
"""Stands in for Nsight Compute: keeps its command line, writes the CSV given to it."""
import json, os, sys
args = sys.argv[1:]
open(os.environ["FAKE_NCU_ARGV"], "w").write(json.dumps(args))
open(args[args.index("--log-file") + 1], "w").write({csv!r})
'''


def test_validate_a_kernel_file_end_to_end(app: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """`tuiprof validate k.cu`: recorded through the GPU path (the emulator in the driver's place),
    ncu (a stand-in that keeps its command line and writes a CSV) run on the plain kernel with
    caches flushed, the measured values stored in the saved trace, prediction against measurement
    printed per metric with the absolute error."""
    import json

    from tests.support.emu_driver import emulator_as_gpu
    from tuiprof.trace.io import load_trace

    emulator_as_gpu(monkeypatch)
    csv = "\n".join([HEADER, row("0", "twice", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "", "8"),
                     row("0", "twice", "l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct", "%", "0"),
                     row("0", "twice", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "sector", "32"),
                     row("0", "twice", "lts__t_sector_op_read_hit_rate.pct", "%", "12.5"),
                     row("0", "twice", "lts__t_sector_op_write_hit_rate.pct", "%", "100")]) + "\n"
    bin_dir = app / "bin"
    bin_dir.mkdir()
    (bin_dir / "ncu").write_text(FAKE_NCU.format(python=sys.executable, csv=csv))
    (bin_dir / "ncu").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NCU_ARGV", str(app / "ncu_argv.json"))
    assert main(["validate", "k.cu", "--trace", "v.tptrace", "--trials", "8", "--no-sweep"]) == 0
    out = capsys.readouterr().out
    args = json.loads((app / "ncu_argv.json").read_text())
    assert args[args.index("--cache-control") + 1] == "all" and args[args.index("--launch-skip") + 1] == "0"
    assert "--kernel-name" not in args  # no --kernel: the first launch of any kernel, as recorded
    program = args[args.index("--") + 1:]
    assert program[:3] == [sys.executable, "-m", "tuiprof.collect.gpu.ncu"] and str(app / "k_launch.py") in program
    from tuiprof.collect.gpu.ncu import _main as plain_main

    assert plain_main(program[3:]) == 0  # what ncu runs: the launch script on the plain kernel
    t = load_trace(app / "v.tptrace")
    assert t.provenance.backend == "gpu"
    assert t.provenance.measured == pytest.approx({"l1_read": 0.0, "l2_read": 0.125, "l2_write": 1.0,
                                                   "sectors_per_request": 4.0})
    assert "twice on tuiprof emulator, simulated as a100" in out
    assert "L1 read hit ratio" in out and "12.5%" in out and "mean absolute error of the hit ratios" in out
    assert "sectors / request (global loads)  4.00" in out
    assert "note: the trace holds" not in out  # the whole grid recorded
    assert main(["validate", "k.cu", "--trace", "v1.tptrace", "--trials", "2", "--no-sweep", "--snapshot", "1"]) == 0
    assert "note: the trace holds 1 of the 2 CTAs ncu measured" in capsys.readouterr().out


async def test_the_ui_records_a_kernel_file_on_the_gpu_when_one_is_usable(app: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`tuiprof k.cu` with a GPU usable, the emulator playing the driver: the UI's worker takes the
    GPU path (the `gpu` test of tests/gpu/test_gpu_run.py does this on a real GPU)."""
    pytest.importorskip("textual")
    from tests.support.emu_driver import emulator_as_gpu
    from tests.support.tui_support import assert_ui_records_on_the_gpu

    emulator_as_gpu(monkeypatch)
    trace = await assert_ui_records_on_the_gpu("k.cu")
    assert trace.provenance.gpu == "tuiprof emulator"


# --- the measurements of issue 24: optional metrics, counters, shared wavefronts -----------------

def test_optional_metrics_follow_what_the_ncu_at_hand_lists() -> None:
    from tuiprof.collect.gpu.ncu import RESEARCH, metric_base, missing_metrics, usable_metrics

    listing = "Device NVIDIA H100\n" + "\n".join(f"{metric_base(m)}   some description" for m in RESEARCH[:3])
    launch = tuple(m for m in RESEARCH if m.startswith("launch__"))  # attributes, often not listed: always asked
    assert launch and usable_metrics(RESEARCH, listing) == RESEARCH[:3] + launch
    assert usable_metrics(RESEARCH, None) == RESEARCH and usable_metrics(RESEARCH, "no metrics here") == RESEARCH
    err = "==ERROR== Failed to find metric regex:^lts__t_sectors_srcunit_ltcfabric_op_read.sum$\n"
    assert missing_metrics(err, RESEARCH) == {"lts__t_sectors_srcunit_ltcfabric_op_read.sum"}


def test_measure_drops_a_metric_this_ncu_refuses_and_keeps_the_headline(tmp_path: Path) -> None:
    # A stand-in ncu: lists every metric but one it then refuses by name, and writes the CSV of
    # whatever it is asked for (each metric 1.0, hit rates 50%).
    from tuiprof.collect.gpu.ncu import METRICS, RESEARCH, SHARED_WAVEFRONTS, counters, measure

    refused = RESEARCH[5]
    listed = list(METRICS) + [m for _, w, n in SHARED_WAVEFRONTS for m in (w, n)] + list(RESEARCH)
    fake = tmp_path / "ncu"
    fake.write_text(f"""#!{sys.executable}
import sys
args = sys.argv[1:]
if args == ["--query-metrics"]:
    print("\\n".join(m.split(".")[0] for m in {listed!r}))
    sys.exit(0)
metrics = args[args.index("--metrics") + 1].split(",")
log = args[args.index("--log-file") + 1]
if {refused!r} in metrics:
    open(log, "w").write("==ERROR== Failed to find metric {refused}\\n")
    sys.exit(1)
rows = ['"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"']
rows += [f'"0","k","{{m}}","{{"%" if m.endswith(".pct") else ""}}","{{50 if m.endswith(".pct") else 1}}"' for m in metrics]
open(log, "w").write("\\n".join(rows) + "\\n")
""")
    fake.chmod(0o755)
    asked: list[tuple[str, ...]] = []

    def command(metrics):
        asked.append(tuple(metrics))
        return ncu_command(str(fake), ["./app"], kernel=None, launch_index=0, log=tmp_path / "l.csv", metrics=metrics)

    [launch] = measure(str(fake), command)
    assert len(asked) == 2 and refused in asked[0] and refused not in asked[1]
    assert measured_values(launch)["l1_read"] == 0.5
    got = counters(launch)
    assert refused not in got and set(got) == set(RESEARCH) - {refused}
    assert measured_values(launch)["shared_ld_wavefronts_per_request"] == 1.0


def test_shared_wavefronts_are_compared_with_the_prediction() -> None:
    from tuiprof.model.shared import PassStats
    from tuiprof.trace.data import measured_problem
    from tuiprof.validate import predicted_wavefronts_per_request

    def passes(n: int, per: float) -> PassStats:
        return PassStats("shared", n, per, 1.0, int(per), 1.0, 19.0 + per - 1, ())

    ops = (SimpleNamespace(op=_op(0, "load", "shared"), warp_accesses=100, sectors_per_access=float("nan"),
                           passes=passes(100, 32.0)),
           SimpleNamespace(op=_op(1, "load", "shared"), warp_accesses=300, sectors_per_access=float("nan"),
                           passes=passes(300, 1.0)),
           SimpleNamespace(op=_op(2, "store", "shared"), warp_accesses=50, sectors_per_access=float("nan"),
                           passes=passes(50, 1.0)))
    analysis = SimpleNamespace(headline={}, ops=ops)
    assert predicted_wavefronts_per_request(analysis, "load") == pytest.approx((100 * 32 + 300) / 400)
    rows = compare(analysis, {"shared_ld_wavefronts_per_request": 8.0, "shared_st_wavefronts_per_request": 1.0})
    assert [(c.key, c.predicted, c.abs_error) for c in rows] == [
        ("shared_ld_wavefronts_per_request", 8.75, 0.75), ("shared_st_wavefronts_per_request", 1.0, 0.0)]
    assert re.search(r"wavefronts / request \(shared loads\) +8\.75", render(rows))
    assert measured_problem("shared_ld_wavefronts_per_request", 32.0) is None
    assert "outside" in measured_problem("shared_ld_wavefronts_per_request", 500.0)
