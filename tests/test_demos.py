"""Demo names resolve from any directory; unshipped demos are built once and cached."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from tuiprof.trace import demos, synth
from tuiprof.trace.io import load_trace


def test_every_demo_name_is_listed() -> None:
    names = demos.demo_names()
    for n in ("spmv-u", "spmv-b", "spmv-u128", "spmv-b128", "spmv-vec-u", "spmv-vec-b", "spmv-vec-u128",
              "spmv-vec-b128", "vecadd", "transpose-naive", "transpose-tiled", "matmul16", "stencil7"):
        assert n in names


def test_shipped_demo_matches_its_model() -> None:
    """The committed file is exactly what the synthetic model builds today."""
    shipped = load_trace(demos.demo_path("vecadd"))
    fresh = synth.build_demo("vecadd")
    assert np.array_equal(shipped.addr, fresh.addr) and np.array_equal(shipped.mask, fresh.mask)
    assert shipped.ops == fresh.ops


def test_unshipped_demo_built_once_into_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(demos, "demo_dir", lambda: tmp_path / "empty")
    monkeypatch.setitem(synth.DEMOS, "vecadd", dataclasses.replace(synth.DEMOS["vecadd"], shipped=False))
    assert "vecadd" in demos.demo_names()
    path = demos.resolve_target("vecadd")
    assert path.is_relative_to(tmp_path / "cache") and path.exists()
    assert "building demo vecadd" in capsys.readouterr().err
    mtime = path.stat().st_mtime_ns
    assert demos.resolve_target("vecadd") == path and path.stat().st_mtime_ns == mtime
    assert load_trace(path).n_accesses == synth.build_demo("vecadd").n_accesses


def test_demo_by_name_from_another_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert demos.resolve_target("spmv-u").exists()
