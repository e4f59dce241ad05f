"""The README's first lines are the two commands a newcomer runs; CI runs the second verbatim, as
its last line, and there a missing CUDA compiler fails the session instead of skipping tests."""

from __future__ import annotations

from pathlib import Path

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
