"""The command line: help without heavy imports, clear errors with exit 2, no partial output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support.factories import make_trace
from tuiprof.cli.main import main
from tuiprof.trace.io import save_trace


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuiprof", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture()
def trace_file(tmp_path: Path) -> Path:
    addr = 0x7F0000000000 + np.arange(4 * 32, dtype=np.uint64).reshape(4, 32) * 4
    return save_trace(make_trace(addr, ops=[0, 1, 0, 1], kinds=("load", "store")), tmp_path / "k.tptrace")


def test_help_imports_nothing_heavy() -> None:
    code = ("import sys; from tuiprof.cli.main import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('numba', 'textual', 'numpy', 'pycuda') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert "usage: tuiprof" in out and "HEAVY []" in out


def test_version() -> None:
    from tuiprof import __version__

    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"tuiprof {__version__}"


def test_archs_lists_presets() -> None:
    r = run("archs")
    assert r.returncode == 0
    for name in ("tesla-c2050", "gtx480", "gtx285", "v100", "a100", "h100"):
        assert name in r.stdout
    r = run("archs", "--show", "h100")
    assert r.returncode == 0 and "sm_count = 132" in r.stdout


def test_report_json_describes_trace(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(trace_file), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["trace"]["kernel"] == "k"
    assert doc["trace"]["snapshot"]["warp_accesses"] == 4
    assert [o["kind"] for o in doc["trace"]["ops"]] == ["load", "store"]
    assert doc["trace"]["ops"][0]["line"] == 2 and "a[threadIdx.x]" in doc["trace"]["ops"][0]["source"]
    assert doc["trace"]["provenance"]["backend"] == "synthetic"


@pytest.mark.parametrize("fmt,needle", [("text", "static memory ops"), ("md", "| op |")])
def test_report_text_and_md(trace_file: Path, capsys: pytest.CaptureFixture[str], fmt: str, needle: str) -> None:
    assert main(["report", str(trace_file), "--format", fmt]) == 0
    assert needle in capsys.readouterr().out


def test_report_output_file(trace_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main(["report", str(trace_file), "--format", "json", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["trace"]["kernel"] == "k"


def test_the_readme_what_if_runs(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # README: --set l1.size=48KiB on the tesla-c2050 (6 sets of 64 ways: any set count works).
    assert main(["report", str(trace_file), "--arch", "tesla-c2050", "--set", "l1.size=48KiB", "--trials", "2",
                 "--no-sweep", "--format", "json"]) == 0
    a = json.loads(capsys.readouterr().out)["arch"]
    assert (a["l1"]["size"], a["l1"]["assoc"], a["shared_carveout"]) == (48 << 10, 64, None)


@pytest.mark.parametrize("args,needle", [
    (["report", "/no/such/file.tptrace"], "does not exist"),
    (["report", "/no/such/kernel.cu"], "kernel.cu does not exist"),
    (["report", "{tmp}/folder.cu"], "folder.cu is a directory"),
    (["report", "{tmp}"], "is a directory"),
    (["report", "{bad}"], "not a valid .tptrace"),
    (["report", "not-a-demo"], "neither a file nor a demo"),
    (["report", "{trace}", "--arch", "gtx9000"], "unknown arch"),
    (["report", "{trace}", "--set", "l1.size=3KiB"], "l1.size"),
    (["report", "{trace}", "--set", "l1.size"], "KEY=VALUE"),
    (["report", "{trace}", "--set", "warp_size=64"], "warp_size"),
    (["report", "{trace}", "--trials", "-3"], "--trials"),
    (["report", "{trace}", "--trials", "many"], "--trials"),
    (["report", "{trace}", "--seed", "-1"], "--seed"),
    (["report", "{trace}", "--md", "0"], "--md"),
    (["report", "{trace}", "--md", "999"], "exceeds"),
    (["report", "{trace}", "--format", "pdf"], "invalid choice"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_exit_2_no_traceback(trace_file: Path, tmp_path: Path, args: list[str], needle: str) -> None:
    bad = tmp_path / "bad.tptrace"
    bad.write_bytes(b"PK\x03\x04 truncated")
    (tmp_path / "folder.cu").mkdir()
    out = tmp_path / "out.json"
    args = [a.format(tmp=tmp_path, bad=bad, trace=trace_file) for a in args] + ["-o", str(out)] * (args[0] == "report")
    r = run(*args)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    first = r.stderr.splitlines()[0]
    assert first.startswith("error: ") and needle in r.stderr
    assert "hint: " in r.stderr
    assert not out.exists()


def test_output_into_missing_folder(trace_file: Path, tmp_path: Path) -> None:
    r = run("report", str(trace_file), "-o", str(tmp_path / "no" / "r.txt"))
    assert r.returncode == 2 and "cannot write" in r.stderr and "Traceback" not in r.stderr
