"""The house rules stay complete: every top-level module and package of tuiprof has its place in
the layers contract of pyproject.toml (a module left out would escape every import rule), and every
module named there exists; the tests mirror the packages, share helpers only through tests/support/,
and hold one copy of each CUDA fixture."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def _top_level() -> set[str]:
    pkg = ROOT / "tuiprof"
    mods = {p.stem for p in pkg.glob("*.py") if p.stem != "__init__"}
    mods |= {p.name for p in pkg.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    return {f"tuiprof.{m}" for m in mods}


def _layered() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    layers = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")["layers"]
    return {m.strip() for layer in layers for m in re.split(r"[|:]", layer)}


def test_every_top_level_module_is_in_the_layers() -> None:
    top, layered = _top_level(), _layered()
    assert not top - layered, f"place these in pyproject.toml's layers contract: {sorted(top - layered)}"
    assert not layered - top, f"the layers contract names modules that do not exist: {sorted(layered - top)}"


def test_the_headless_modules_load_no_textual() -> None:
    """The report, the session and the GPU commands run without the UI: importing them loads
    neither Textual nor Rich (the report reaches tui/format.py, which must stay free of both)."""
    import subprocess

    code = ("import sys, tuiprof.report, tuiprof.session, tuiprof.cli.gpu, tuiprof.validate\n"
            "print('UI', sorted(m for m in ('textual', 'rich') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT).stdout
    assert "UI []" in out, out


def test_tests_mirror_the_packages_and_import_only_support() -> None:
    """Test modules live in their area's folder (tests/sim/, tests/emu/, ...), and none imports
    another test module or a conftest: shared helpers are in tests/support/."""
    tests = ROOT / "tests"
    assert not sorted(p.name for p in tests.glob("test_*.py")), "test modules belong in an area folder"
    crossing = re.compile(r"^\s*(?:from|import)\s+tests\.(?:[\w.]+\.)?(?:test_\w+|conftest)\b", re.M)
    offenders = [str(p.relative_to(tests)) for p in sorted(tests.rglob("*.py")) if crossing.search(p.read_text())]
    assert not offenders, f"import helpers from tests/support/, not from test modules: {offenders}"


def test_each_cuda_fixture_is_one_copy() -> None:
    """No two CUDA files of the tests are byte-identical (a second copy drifts from the first)."""
    import hashlib

    seen: dict[str, str] = {}
    copies = []
    for p in sorted((ROOT / "tests").rglob("*.cu")):
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
        if digest in seen:
            copies.append((seen[digest], str(p.relative_to(ROOT))))
        seen.setdefault(digest, str(p.relative_to(ROOT)))
    assert not copies, f"identical CUDA files: {copies}"
