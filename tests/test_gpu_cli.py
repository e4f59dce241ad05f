"""The GPU commands without a GPU: calibrate, validate and --backend gpu say in one message that they
need a GPU and point at the emulator (exit 2, no traceback); `tuiprof build` builds with nvcc alone;
ncu's CSV (a sample written from NVIDIA's documented layout, not captured from a real ncu) is
parsed into measured values and compared with a prediction."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.ptx_support import CUDA_DIR, find_nvcc
from tuiprof.collect.gpu import GpuUnavailable, gpu_problem
from tuiprof.model.latency import Estimate
from tuiprof.trace.model import StaticOp
from tuiprof.validate import (METRICS, Comparison, ValidateError, compare, measured_values, ncu_command,
                              parse_ncu_csv, predicted_sectors_per_request, render)

ROOT = Path(__file__).resolve().parent.parent
no_gpu = pytest.mark.skipif(gpu_problem() is None, reason="a GPU is usable here")


def tuiprof(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tuiprof", *args], capture_output=True, text=True, timeout=600,
                          cwd=cwd, env=env)


@no_gpu
@pytest.mark.parametrize("args, what", [
    (["calibrate"], "tuiprof calibrate needs an NVIDIA GPU"),
    (["calibrate", "--cuda", "pycuda"], "tuiprof calibrate needs an NVIDIA GPU"),
    (["validate", "demo_traces/spmv.cu"], "tuiprof validate needs an NVIDIA GPU"),
])
def test_gpu_commands_without_gpu(args: list[str], what: str) -> None:
    r = tuiprof(*args, cwd=ROOT)
    assert r.returncode == 2
    assert r.stderr.startswith(f"error: {what}: ") and "\nhint: " in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


@no_gpu
def test_backend_choice_without_gpu() -> None:
    from tuiprof.cli_gpu import add_backend_options, choose_backend

    p = argparse.ArgumentParser()
    add_backend_options(p)
    assert choose_backend(p.parse_args([])) == "emu"
    assert choose_backend(p.parse_args(["--backend", "emu"])) == "emu"
    with pytest.raises(GpuUnavailable, match="--backend gpu needs an NVIDIA GPU") as exc:
        choose_backend(p.parse_args(["--backend", "gpu"]))
    assert "--backend emu" in exc.value.hint


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
    ops = (SimpleNamespace(op=_op(0, "load", "global"), warp_accesses=100, requests_per_access=2.0, sectors_per_request=4.0),
           SimpleNamespace(op=_op(1, "load", "global"), warp_accesses=50, requests_per_access=4.0, sectors_per_request=1.0),
           SimpleNamespace(op=_op(2, "store", "global"), warp_accesses=80, requests_per_access=1.0, sectors_per_request=4.0),
           SimpleNamespace(op=_op(3, "load", "shared"), warp_accesses=80, requests_per_access=1.0, sectors_per_request=8.0))
    analysis = SimpleNamespace(headline={"l1_read": _est(0.45, 0.43, 0.47), "l2_read": _est(0.80, 0.78, 0.82),
                                         "l2_write": _est(float("nan"), float("nan"), float("nan"))}, ops=ops)
    # (200 requests x 4 sectors + 200 x 1) / 400 requests
    assert predicted_sectors_per_request(analysis) == pytest.approx(2.5)
    rows = compare(analysis, {"l1_read": 0.4217, "l2_read": 0.715, "l2_write": 0.9, "sectors_per_request": 3.0})
    assert [c.key for c in rows] == ["l1_read", "l2_read", "sectors_per_request"]
    assert rows[0].abs_error == pytest.approx(0.0283) and not rows[0].inside
    assert rows[1].abs_error == pytest.approx(0.085)
    text = render(rows)
    assert "L1 read hit ratio" in text and "45.0%" in text and "42.2%" in text and "2.8 pts" in text
    assert "sectors / request (global loads)  2.50" in text
    assert "mean absolute error of the hit ratios: 5.7 percentage points" in text
    assert Comparison("l2_read", 0.5, 0.4, 0.6, 0.45).inside


def test_plain_run_usage() -> None:
    r = subprocess.run([sys.executable, "-m", "tuiprof.validate"], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 2 and "usage:" in r.stderr
