"""The README's first lines are the two commands a newcomer runs; CI runs the second verbatim, as
its last line, and there a missing CUDA compiler fails the session instead of skipping tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.ptx_support import REQUIRE_COMPILERS, find_nvcc, nvrtc_available, run_without_nvcc

ROOT = Path(__file__).resolve().parents[1]


def _commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_readme_opens_with_two_commands() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert lines[0].startswith("# tuiprof") and lines[2] == "```sh"
    install_run, test = _commands()
    assert "pip install" in install_run and "tuiprof" in install_run.split("&&")[1]
    assert "pytest" in test


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci[-1] == _commands()[1]


@pytest.mark.parametrize("hide_nvrtc", [False, True])
def test_ci_fails_without_a_compiler_instead_of_skipping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         hide_nvrtc: bool) -> None:
    """With .ci/run's variable set, a machine without nvcc (and here without NVRTC too) stops the
    test session with one message; where both are found (this machine), the session runs."""
    monkeypatch.setenv(REQUIRE_COMPILERS, "1")
    if find_nvcc() is not None and nvrtc_available() and not hide_nvrtc:
        ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              "tests/test_readme.py::test_readme_opens_with_two_commands"],
                             capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert ran.returncode == 0, ran.stdout + ran.stderr
    code = ("import pytest\nraise SystemExit(pytest.main(['-q', '-p', 'no:cacheprovider', "
            "'tests/test_readme.py::test_readme_opens_with_two_commands']))\n")
    r = run_without_nvcc(code, tmp_path, hide_nvrtc=hide_nvrtc, cwd=ROOT, check=False)
    missing = "nvcc and NVRTC" if hide_nvrtc or not nvrtc_available() else "nvcc"
    assert r.returncode == 4 and f"{missing} cannot be found" in r.stdout + r.stderr, r.stdout + r.stderr
