"""The README's first lines are the two commands a newcomer runs; CI runs the second verbatim, as
its last line, and there a missing CUDA compiler fails the session instead of skipping tests."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ptx_support import REQUIRE_COMPILERS, find_nvcc, nvrtc_available, run_without_nvcc

ROOT = Path(__file__).resolve().parents[2]


def _commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_readme_opens_with_two_commands() -> None:
    """What tuiprof is (a few sentences), then the two commands, on the first screen."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert lines[0].startswith("# tuiprof") and "```sh" in lines[:16]
    assert "shows" in " ".join(lines[:lines.index("```sh")])
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
                              "tests/cli/test_readme.py::test_readme_opens_with_two_commands"],
                             capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert ran.returncode == 0, ran.stdout + ran.stderr
    code = ("import pytest\nraise SystemExit(pytest.main(['-q', '-p', 'no:cacheprovider', "
            "'tests/cli/test_readme.py::test_readme_opens_with_two_commands']))\n")
    r = run_without_nvcc(code, tmp_path, hide_nvrtc=hide_nvrtc, cwd=ROOT, check=False)
    missing = "nvcc and NVRTC" if hide_nvrtc or not nvrtc_available() else "nvcc"
    assert r.returncode == 4 and f"{missing} cannot be found" in r.stdout + r.stderr, r.stdout + r.stderr


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
"""The README and the files it links to: what a newcomer reads."""


def _sh_commands(path: Path) -> list[str]:
    """Every `tuiprof` command in the file's sh blocks (one per `&&` part, comments dropped)."""
    out = []
    for block in re.findall(r"```sh\n(.*?)```", path.read_text(), re.S):
        for line in block.splitlines():
            for part in line.split(" # ", 1)[0].split("&&"):
                if part.strip().startswith("tuiprof"):
                    out.append(part.strip())
    return out


def test_every_documented_command_parses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each `tuiprof ...` line of a code block in the README and docs/ is a command line tuiprof
    accepts: its command exists and every option it names is one tuiprof knows (the sources it
    names are made here: `app.cu` and `main.cu` whole programs, other `.cu` files kernel files)."""
    from tuiprof.cli.main import COMMANDS, build_parser, parse_command_line

    monkeypatch.chdir(tmp_path)
    seen = 0
    for path in DOCS:
        for command in _sh_commands(path):
            words = shlex.split(command)[1:]
            for w in words:
                if w.endswith(".cu") and not w.startswith("-"):
                    program = Path(w).name.startswith(("app", "main"))
                    (tmp_path / w).parent.mkdir(parents=True, exist_ok=True)
                    (tmp_path / w).write_text("int main() { return 0; }\n" if program else
                                              "__global__ void k(float *a) { a[threadIdx.x] = 0; }\n")
            try:
                args = parse_command_line(build_parser(), words)
            except SystemExit:  # argparse refused it
                pytest.fail(f"{path.name}: `{command}` is not a command line tuiprof accepts")
            assert args.command in COMMANDS, (path.name, command)
            seen += 1
    assert seen >= 8


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_no_link_points_outside_the_repository() -> None:
    """Markdown links of the README and docs/ name files in the repository that exist (or web
    addresses); no path climbs out of it (`../shared/...` exists only in the authors' workspace)."""
    for path in DOCS:
        text = path.read_text()
        assert "../shared" not in text, path.name
        for target in LINK.findall(text):
            if re.match(r"[a-z]+://", target):
                continue
            resolved = (path.parent / target).resolve()
            assert resolved.is_relative_to(ROOT), (path.name, target)
            assert resolved.exists(), (path.name, target)


def test_readme_first_screen_says_what_how_and_how_to_read() -> None:
    """The first screen (60 lines): what tuiprof shows, the commands, requirements, the picture,
    and the reading of the screen starts; the README stays short, the reference is in docs/."""
    text = (ROOT / "README.md").read_text()
    first = "\n".join(text.splitlines()[:60])
    for needed in ("## Requirements", "docs/screenshot.svg", "## Reading the screen", "prediction", "no GPU"):
        assert needed.lower() in first.lower(), needed
    assert len(text.splitlines()) <= 160
    assert (ROOT / "docs" / "screenshot.svg").read_text().lstrip().startswith("<svg")


def test_the_default_tolerance_is_the_one_the_docs_and_help_name(capsys: pytest.CaptureFixture[str]) -> None:
    """The early-stop tolerance decides how many trials a default run makes (issue 23 item 4: the
    SpMV demos stop at 20 at +-1 point): the help, the usage table, the README's status bar and
    its explanation say the value the code uses."""
    from tuiprof.cli.main import main
    from tuiprof.config import DEFAULT_TOLERANCE

    pts = f"{100 * DEFAULT_TOLERANCE:g}"
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    assert f"(default {DEFAULT_TOLERANCE:g}," in " ".join(capsys.readouterr().out.split())
    usage = (ROOT / "docs" / "usage.md").read_text()
    assert f"default {DEFAULT_TOLERANCE:g} (±{pts} percentage point" in usage
    readme = (ROOT / "README.md").read_text()
    assert f"· ±{pts} pts " in readme and f"stops at (±{pts} percentage point" in readme
