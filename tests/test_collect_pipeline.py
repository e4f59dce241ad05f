"""A .cu target end to end: compile, emulate under the launch script, record. The synthetic
models of the demos (tuiprof/trace/synth/) are the oracle: where both cover a kernel, the
emulator's trace must equal the model's access for access."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tuiprof.collect.options import CollectOptions
from tuiprof.collect.pipeline import collect_trace
from tuiprof.errors import TuiprofError
from tuiprof.session import RunConfig
from tuiprof.trace.io import load_trace
from tuiprof.trace.synth import DEMOS as MODELS

DEMOS = Path(__file__).resolve().parents[1] / "demo_traces"
ARRAYS = ("warp_offsets", "warp_cta", "warp_index", "op", "mask", "addr")


def record(cu: str, script: str, **options: object) -> object:
    return collect_trace(DEMOS / cu, RunConfig(collect=CollectOptions(launch=DEMOS / script, **options)))


@pytest.mark.parametrize("demo,cu,script", [
    ("vecadd", "vecadd.cu", "vecadd_launch.py"),
    ("transpose-naive", "transpose.cu", "transpose_launch.py"),
    ("transpose-tiled", "transpose.cu", "transpose_launch_tiled.py"),
    ("spmv-u", "spmv.cu", "spmv_launch.py"),
    ("spmv-vec-u", "spmv.cu", "spmv_launch_vec_u.py"),
])
def test_emulator_trace_equals_the_synthetic_model(demo: str, cu: str, script: str) -> None:
    model = MODELS[demo].build()
    emu = record(cu, script, snapshot=model.snapshot.n_ctas)
    for name in ARRAYS:
        assert np.array_equal(getattr(emu, name), getattr(model, name)), name
    assert [(o.kind, o.space, o.bytes, o.line, o.label, o.starts_sequence) for o in emu.ops] == \
        [(o.kind, o.space, o.bytes, o.line, o.label, o.starts_sequence) for o in model.ops]
    assert np.array_equal(emu.ctas.accesses, model.ctas.accesses)
    assert emu.launch == model.launch
    assert emu.provenance.backend == "emulator" and emu.provenance.arch == model.provenance.arch


def test_snapshot_options_and_launch_choice() -> None:
    t = record("transpose.cu", "transpose_launch.py", snapshot=10, snapshot_start=5)
    assert list(t.snapshot.cta_ids) == list(range(5, 15)) and "from CTA 5" in t.snapshot.rule
    default = record("vecadd.cu", "vecadd_launch.py")
    assert default.snapshot.n_ctas == 320 and "the whole grid" in default.snapshot.rule  # 4 x 15 x 8 > 320


@pytest.mark.parametrize("options,message", [
    ({"kernel": "nosuch"}, "nosuch"),
    ({"launch_index": 3}, "--launch-index 3: kernel_vec_add is launched 1 time"),
])
def test_a_launch_that_never_happens(options: dict[str, object], message: str) -> None:
    with pytest.raises(TuiprofError, match=message):
        record("vecadd.cu", "vecadd_launch.py", **options)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuiprof", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


KERNEL = """extern "C" __global__ void scale(float *x, int n, int step)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < n; k += step)
        x[i] = x[i] * 2.0f;
}
"""


@pytest.mark.parametrize("script,message", [
    ("import numpy as np\ndef setup(dev):\n    pass\n", "launched nothing"),
    ("def setup(dev):\n    raise ValueError('bad size')\n", "ValueError in setup(dev): bad size"),
    ("import numpy as np\ndef setup(dev):\n    x = dev.zeros(32, np.float32)\n"
     "    dev.launch('scale', 2, 32, (x, np.int32(1), np.int32(1)))\n", "out-of-bounds global access"),
    ("import numpy as np\ndef setup(dev):\n    x = dev.zeros(32, np.float32)\n"
     "    dev.launch('scale', 1, 32, (x, np.int32(1), np.int32(0)))\n", "runaway loop"),
    ("import numpy as np\ndef setup(dev):\n    x = dev.zeros(32, np.float32)\n"
     "    dev.launch('scale', 1, 32, (x,))\n", "takes 3 parameters, the launch passes 1"),
])
def test_bad_launches_are_one_error(tmp_path: Path, script: str, message: str) -> None:
    write(tmp_path, "k.cu", KERNEL)
    write(tmp_path, "k_launch.py", script)
    r = cli("report", "k.cu", "--trials", "2", "--no-sweep", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("error: ") and "hint:" in r.stderr and message in r.stderr, r.stderr


def test_a_source_that_does_not_compile(tmp_path: Path) -> None:
    write(tmp_path, "k.cu", KERNEL.replace("x[i] * 2.0f;", "x[i] * ;"))
    write(tmp_path, "k_launch.py", "def setup(dev):\n    pass\n")
    r = cli("report", "k.cu", cwd=tmp_path)
    assert r.returncode == 2 and "k.cu:5: error" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_no_launch_script_points_at_init(tmp_path: Path) -> None:
    write(tmp_path, "k.cu", KERNEL)
    r = cli("report", "k.cu", cwd=tmp_path)
    assert r.returncode == 2 and "tuiprof init k.cu" in r.stderr, r.stderr


def test_init_then_record_then_report(tmp_path: Path) -> None:
    write(tmp_path, "k.cu", KERNEL)
    assert cli("init", "k.cu", cwd=tmp_path).returncode == 0
    r = cli("record", "k.cu", "-o", "k.tptrace", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    trace = load_trace(tmp_path / "k.tptrace")
    assert trace.provenance.backend == "emulator" and trace.ops[0].label == "x[i]"
    r = cli("report", "k.tptrace", "--trials", "2", "--no-sweep", cwd=tmp_path)
    assert r.returncode == 0 and "x[i]" in r.stdout, r.stderr
    r = cli("record", "k.cu", "-o", "k.cu", cwd=tmp_path)
    assert r.returncode == 2 and "the input being read" in r.stderr
