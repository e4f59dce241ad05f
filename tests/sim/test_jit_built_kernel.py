"""`tuiprof.jit.built_kernel`: the kernels a factory builds (closures over the values they are
compiled for: the emulator's variants, the replay kernel's geometry families) each get a name of
their own, so that a process can load several of them from the disk cache.

Numba names a compiled function's machine code and its environment (the constants its Python entry
reads: the dtypes of the arrays it returns) after its qualified name and a counter that restarts
in every process, and keeps one environment per name in a process. The closures of one factory
share a qualified name: a process that loaded one from the cache and compiled another gave the
second the first one's environment and numbered its constants after it; a later process that
loaded both then ran the second with the first one's shorter list of constants, and its call
failed (``SystemError: ... returned a result with an exception set``, 'descr' is NULL) on every
run until the cache was removed. Each run here is a fresh process on a cache folder of the test's
own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tuiprof.jit import built_kernel

ROOT = Path(__file__).resolve().parents[2]

FACTORY = '''
import numpy as np

from tuiprof.jit import KERNEL, built_kernel, njit


def make(k, named):
    """A kernel that returns four arrays filled with `k`, `k` frozen in (a closure)."""
    def filled(n):
        return np.full(n, k, np.int64), np.full(n, k, np.int32), np.full(n, k, np.uint32), np.full(n, k, np.uint64)

    return built_kernel(filled, f"filled_{k}") if named else njit(**KERNEL)(filled)


def run(named, ks):
    kept = []  # alive to the end, as the emulator keeps its variants (Numba frees an unused environment)
    for k in ks:
        kernel = make(k, named)
        kept.append(kernel)
        out = kernel(3)
        assert [(a.dtype.name, a.tolist()) for a in out] == \\
            [(t, [k] * 3) for t in ("int64", "int32", "uint32", "uint64")], out
'''


def _runs(tmp_path: Path, named: bool) -> list[subprocess.CompletedProcess[str]]:
    """Three processes on one fresh cache: the first compiles kernel 1; the second loads it and
    compiles kernel 2; the third loads both."""
    (tmp_path / "closures.py").write_text(FACTORY)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]),
               NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    runs = []
    for ks in ([1], [1, 2], [1, 2]):
        code = f"import closures; closures.run({named}, {ks})"
        runs.append(subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                                   text=True, timeout=300))
    return runs


def test_built_kernels_compiled_by_different_processes_load_together(tmp_path: Path) -> None:
    runs = _runs(tmp_path, named=True)
    assert [r.returncode for r in runs] == [0, 0, 0], [r.stderr[-2000:] for r in runs]
    assert {p.name.split("-")[0] for p in (tmp_path / "numba").rglob("*.nbi")} == \
        {"closures.filled_1", "closures.filled_2"}  # an index each, not one shared


def test_the_control_plain_closures_fail_so(tmp_path: Path) -> None:
    """The same runs with the closures under Numba's own names (so the test above can fail)."""
    runs = _runs(tmp_path, named=False)
    assert [r.returncode for r in runs[:2]] == [0, 0], [r.stderr[-2000:] for r in runs]
    if runs[2].returncode == 0:
        pytest.skip("this Numba keeps the environments of same-named closures apart")
    assert "returned a result with an exception set" in runs[2].stderr, runs[2].stderr[-2000:]


def test_a_name_given_to_other_closure_values_is_refused() -> None:
    def make(k: int):  # noqa: ANN202
        def kernel(x):  # noqa: ANN001, ANN202
            return x + k
        return kernel

    first = built_kernel(make(1), "test_jit_built_kernel_k")  # not called: nothing compiled, nothing cached
    again = built_kernel(make(1), "test_jit_built_kernel_k")  # the same values: the same kernel, named again
    assert first.py_func.__qualname__ == again.py_func.__qualname__ == "test_jit_built_kernel_k"
    assert first.py_func(2) == again.py_func(2) == 3
    with pytest.raises(RuntimeError, match="both named 'test_jit_built_kernel_k'"):
        built_kernel(make(2), "test_jit_built_kernel_k")
