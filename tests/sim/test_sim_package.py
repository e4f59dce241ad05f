"""Package-level behaviour of tuiprof.sim: lazy imports, the kernel cache folder, trial-invariant stats."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.support.sim_traces import FULL, LANE0, lanes, one_lane, op, small_arch, trace_of

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str, **env: str) -> str:
    e = dict(os.environ)
    e.pop("NUMBA_CACHE_DIR", None)
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=e, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_importing_the_package_and_results_does_not_start_numba() -> None:
    out = _python("import sys, tuiprof.sim, tuiprof.sim.results; print('numba' in sys.modules)")
    assert out == "False"


def test_kernel_cache_folder_is_per_source_version_unless_set(tmp_path: Path) -> None:
    code = "from tuiprof.jit import kernel_cache_dir; import os; print(kernel_cache_dir(), os.environ['NUMBA_CACHE_DIR'])"
    default = _python(code, XDG_CACHE_HOME=str(tmp_path)).split()
    assert default[0] == default[1]
    assert Path(default[0]).parent == tmp_path / "tuiprof" / "numba" and len(Path(default[0]).name) == 16
    explicit = _python(code, NUMBA_CACHE_DIR=str(tmp_path / "mine")).split()
    assert explicit == [str(tmp_path / "mine")] * 2


def test_kernels_are_cached_in_the_kernel_folder_when_numba_was_imported_first(tmp_path: Path) -> None:
    # Before: numba read its settings before tuiprof.jit chose the folder, and the kernels were
    # cached beside the package's sources (`import numba; import tuiprof...`, tests/emu/test_jit_borrowed.py
    # run alone wrote tuiprof/__pycache__/jit.keep-*.nbi). Asked of Numba without compiling anything.
    code = ("import numba; import tuiprof.jit as j; "
            "print(j.keep._cache._cache_path.startswith(str(j.kernel_cache_dir())), j.keep._cache._cache_path)")
    out = _python(code, XDG_CACHE_HOME=str(tmp_path))
    assert out.startswith("True "), out


def test_every_kernel_module_is_in_the_cache_digest() -> None:
    # A module that compiles kernels but is not in KERNEL_SOURCES could load stale machine code.
    from tuiprof.jit import KERNEL_SOURCES

    pkg = ROOT / "tuiprof"
    covered = {p for pattern in KERNEL_SOURCES for p in pkg.glob(pattern)}
    users = {p for p in pkg.rglob("*.py")  # modules that make kernels (run.py only asks jit for its compile note)
             if re.search(r"from tuiprof\.jit import .*\bnjit\b", p.read_text()) or p.name == "jit.py"}
    assert users and users <= covered, sorted(str(p) for p in users - covered)
    assert not any("from numba import" in p.read_text() for p in pkg.rglob("*.py") if p.name != "jit.py")


def test_op_stats_are_the_coalescing_figures() -> None:
    from tuiprof.sim.montecarlo import MonteCarlo

    t = trace_of([[(0, lanes(0x1000, 4), FULL), (0, lanes(0x2000, 128), FULL), (1, one_lane(0x40), LANE0),
                   (2, lanes(0x3000), FULL)]], ops=(op(), op(space="shared"), op("store")))
    s = MonteCarlo(t, small_arch(), trials=1).op_stats()
    assert list(s.accesses) == [2, 1, 1]
    assert list(s.requests) == [33, 0, 1] and list(s.sectors) == [36, 0, 4]
    assert s.requests_per_access[0] == 16.5 and np.isnan(s.requests_per_access[1])
    assert s.sectors_per_request[0] == 36 / 33 and s.sectors_per_request[2] == 4.0


def test_lazy_names_resolve() -> None:
    import tuiprof.sim as sim

    assert sim.MonteCarlo.__name__ == "MonteCarlo" and callable(sim.run_trial) and callable(sim.prepare)
    try:
        sim.nonexistent  # noqa: B018
    except AttributeError as exc:
        assert "nonexistent" in str(exc)
    else:
        raise AssertionError("no AttributeError")
