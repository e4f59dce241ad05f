"""Demo names resolve from any directory; unshipped demos are recorded once and cached; the shipped
traces are the emulator's recordings of the demo kernels, equal to the synthetic models."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tuiprof import demos
from tuiprof.trace import synth
from tuiprof.trace.io import load_trace, read_header


def test_every_demo_name_is_listed() -> None:
    names = demos.demo_names()
    for n in ("spmv-u", "spmv-b", "spmv-u128", "spmv-b128", "spmv-vec-u", "spmv-vec-b", "spmv-vec-u128",
              "spmv-vec-b128", "vecadd", "transpose-naive", "transpose-tiled", "matmul16", "stencil7"):
        assert n in names
    assert set(demos.CATALOGUE) <= set(names)


def test_shipped_demo_is_the_emulators_recording_and_matches_its_model() -> None:
    """The committed file is exactly what the emulator records today, byte for byte, and the
    synthetic model builds the same accesses."""
    path = demos.demo_path("vecadd")
    shipped = load_trace(path)
    assert shipped.provenance.backend == "emulator" and shipped.provenance.date == ""
    fresh = synth.build_demo("vecadd")
    assert np.array_equal(shipped.addr, fresh.addr) and np.array_equal(shipped.mask, fresh.mask)
    assert [(o.kind, o.line, o.label) for o in shipped.ops] == [(o.kind, o.line, o.label) for o in fresh.ops]


SHIPPED = sorted(p.name[: -len(".tptrace")] for p in demos.demo_dir().glob("*.tptrace"))
SLOW_TO_RECORD = {"matmul16", "matmul-tile8", "matmul-tile16", "matmul-tile32", "stencil7", "spmv-b128",
                  "spmv-vec-b128", "cr", "cr-nbc"}
"""Shipped demos whose recording and saving take more than a few seconds: 10-200 s each on a
loaded 2-core machine, where the others take 0.1-10 s (bfs, the slowest of those, was the one
found stale)."""


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_TO_RECORD else n
                                  for n in SHIPPED])
def test_rerecording_a_shipped_demo_gives_the_same_bytes(name: str, tmp_path: Path) -> None:
    from tuiprof.trace.io import save_trace

    again = save_trace(demos.record_demo(name), tmp_path / "t.tptrace")
    assert again.read_bytes() == demos.demo_path(name).read_bytes()


def test_the_demo_readme_table_is_true() -> None:
    """demo_traces/README.md lists every demo once, says which are shipped, and gives each shipped
    trace's arch, registers, snapshot CTAs and warp accesses as its file holds them."""
    text = (demos.demo_dir() / "README.md").read_text()
    rows = [[c.strip().strip("`") for c in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| `")]
    assert sorted(r[0] for r in rows) == sorted(demos.CATALOGUE) and "to record" not in text
    for name, _, _, _, arch, regs, trace in rows:
        m = re.fullmatch(r"(shipped|built on first use): ([\d,]+) CTAs(?: \(.*\))?, ([\d,]+)", trace)
        assert m, trace
        path = demos.demo_dir() / f"{name}.tptrace"
        assert (m.group(1) == "shipped") == path.exists(), name
        if path.exists():
            header = read_header(path)
            assert arch == header["provenance"]["arch"] and int(regs.split(",")[0]) == \
                header["launch"]["registers_per_thread"], name
            assert (int(m.group(2).replace(",", "")), int(m.group(3).replace(",", ""))) == \
                (header["counts"]["snapshot_ctas"], header["counts"]["accesses"]), name


def test_unshipped_demo_built_once_into_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    sources = tmp_path / "sources"  # the demo kernels and scripts without their shipped traces
    sources.mkdir()
    for f in demos.demo_dir().glob("vecadd*"):
        if f.suffix != ".tptrace":
            (sources / f.name).write_bytes(f.read_bytes())
    monkeypatch.setattr(demos, "demo_dir", lambda: sources)
    assert "vecadd" in demos.demo_names()
    path = demos.resolve_target("vecadd")
    assert path.is_relative_to(tmp_path / "cache") and path.exists()
    assert "recording demo vecadd" in capsys.readouterr().err
    mtime = path.stat().st_mtime_ns
    assert demos.resolve_target("vecadd") == path and path.stat().st_mtime_ns == mtime
    assert load_trace(path).n_accesses == synth.build_demo("vecadd").n_accesses


def test_demo_by_name_from_another_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert demos.resolve_target("spmv-u").exists()
