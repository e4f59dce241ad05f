"""Faults of the environment, not of the file (issue 9 item 8): a dependency that fails to
import, no writable folder for compiled kernels, a bug inside the loader. None of them may be
reported as a damaged trace ("not a valid .tptrace file ... record the trace again"): the user
would throw away a good trace, even a shipped demo, and the real cause would stay hidden."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import hostile as H
from tests.support.hostile_run import ROOT, assert_clean_error, run_cli, snapshot
from tuiprof.errors import TraceError, TuiprofError
from tuiprof.trace.io import load_trace

RUN = ("--trials", "2", "--no-sweep")


def _load_failure() -> TuiprofError:
    with pytest.raises(TuiprofError) as e:
        load_trace(H.BASE)
    err = e.value
    assert not isinstance(err, TraceError), err.message        # not a verdict on the file
    assert "not a valid" not in err.message and "record" not in err.hint, err.render()
    return err


def test_a_failed_import_is_the_installation_not_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: "vecadd.tptrace is not a valid .tptrace file: its contents are damaged in a way this
    # tuiprof cannot decode" + "record the trace again", the ImportError dropped (`from None`).
    monkeypatch.setitem(sys.modules, "tuiprof.trace._codec", None)   # `import` raises ImportError
    err = _load_failure()
    assert err.message.startswith("cannot load traces: a dependency failed to import")
    assert "reinstall" in err.hint and "NumPy" in err.hint
    assert isinstance(err.__cause__, ImportError)


def test_a_bug_inside_the_loader_is_called_a_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: the catch-all made any exception (here what Numba raises when it cannot cache) a
    # damaged file.
    import tuiprof.trace._codec as codec

    def broken(*args: object) -> int:
        raise RuntimeError("cannot cache function 'undelta': no locator available")

    for name in ("undelta", "undelta_packed"):  # version 1-2 lanes, version 3 steps
        monkeypatch.setattr(codec, name, broken)
    err = _load_failure()
    assert "vecadd.tptrace failed: RuntimeError: cannot cache function" in err.message
    assert "tuiprof bug" in err.hint and isinstance(err.__cause__, RuntimeError)


def test_what_damaged_bytes_raise_is_still_damage(monkeypatch: pytest.MonkeyPatch) -> None:
    """The catch-all is narrowed, not gone: what parsing damaged bytes raises (a ValueError from
    NumPy, say) is still the file's fault."""
    import tuiprof.trace._codec as codec

    def damaged(*args: object) -> int:
        raise ValueError("buffer is smaller than requested size")

    for name in ("undelta", "undelta_packed"):
        monkeypatch.setattr(codec, name, damaged)
    with pytest.raises(TraceError, match="not a valid .tptrace file") as e:
        load_trace(H.BASE)
    assert isinstance(e.value.__cause__, ValueError)


def test_a_file_refused_by_its_header_never_imports_numba(tmp_path: Path) -> None:
    """The decoder (and Numba with it, 80 MiB and a few tenths of a second) is imported only for a
    file that gets as far as decoding: a damaged header is refused without it."""
    t = H.TraceFile()
    del t.header["launch"]
    code = ("import sys\nfrom tuiprof.errors import TraceError\nfrom tuiprof.trace.io import load_trace\n"
            "try:\n    load_trace(sys.argv[1])\nexcept TraceError as e:\n    print(e.message)\n"
            "print('numba' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code, str(t.save(tmp_path / "t.tptrace"))], capture_output=True, text=True,
                       timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and r.stdout.splitlines()[-2:] == [f"{tmp_path / 't.tptrace'} is not a valid .tptrace "
                                                               "file: launch is missing", "False"], r.stdout + r.stderr


def test_a_failed_import_on_the_command_line(tmp_path: Path) -> None:
    """A Numba that cannot import (as when NumPy is newer than it supports) first on the path:
    one error, exit 2, bounded memory, nothing written."""
    fake = tmp_path / "site" / "numba"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ImportError("Numba needs NumPy 2.0 or less. Got NumPy 9.9.")\n')
    work = tmp_path / "work"
    work.mkdir()
    before = snapshot(tmp_path)
    run = run_cli(["report", "vecadd", *RUN], work, env={"PYTHONPATH": f"{fake.parent}{os.pathsep}{ROOT}"})
    assert_clean_error(run, "a dependency failed to import (Numba needs NumPy 2.0 or less")
    assert "not a valid" not in run.stderr and run.peak_mib < 400
    assert snapshot(tmp_path) == before


DENY_WRITES = """
import errno, tempfile

def deny(*args, **kwargs):  # how tuiprof.jit and every Numba cache locator probe a folder
    raise PermissionError(errno.EACCES, "Permission denied (read-only, for the test)")

tempfile.TemporaryFile = deny
"""


def test_nothing_writable_loads_and_reports_uncached(tmp_path: Path) -> None:
    # Before: trace/_codec.py asked Numba for cache=True whatever tuiprof.jit found; with no
    # writable folder its import raised "cannot cache function '_value': no locator available",
    # and every trace, the shipped demos included, was "not a valid .tptrace file".
    before = snapshot(tmp_path)
    run = run_cli(["report", "vecadd", "--trials", "1", "--no-sweep"], tmp_path, prelude=DENY_WRITES,
                  cap=3 << 30, timeout=600)  # compiling every kernel takes more address space than a run
    assert run.code == 0, run.stderr[-2000:]
    assert "every run compiles them again" in run.stderr and "error" not in run.stderr
    assert run.stdout.startswith(b"tuiprof ") and b"kernel_vec_add" in run.stdout
    assert snapshot(tmp_path) == before


def test_every_kernel_takes_its_options_from_jit() -> None:
    """`njit` is only ever given tuiprof.jit's options (or a name bound to them), never a literal
    ``cache=``: a kernel that asks for the cache itself breaks the run-uncached fallback."""
    offenders = []
    for path in sorted((ROOT / "tuiprof").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "njit":
                if node.args or any(kw.arg is not None for kw in node.keywords):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []
