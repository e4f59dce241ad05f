"""A compiled kernel that fails in a way no input can cause (Numba's entry "returned a result with
an exception set", as a stale or mixed-up compiled-code cache made it: see
tests/sim/test_jit_built_kernel.py) is one `error:` line that names the compiled-code cache and a
`hint:` to remove it, exit status 2, no traceback, and not blamed on the launch script. Any other
SystemError stays a bug, with its traceback.

The failure is raised where the kernel is called (a stand-in for the dispatcher): a real one needs a
cache that tuiprof no longer makes."""

from __future__ import annotations

from pathlib import Path

import pytest

import tuiprof.jit as jit
from tests.support.ptx_support import needs_compiler
from tuiprof.cli import main as cli
from tuiprof.errors import CompiledCodeError

DEMOS = Path(__file__).resolve().parents[2] / "demo_traces"
NUMBA_SAYS = "CPUDispatcher(<function run_ctas_7f at 0x7f3a2c1e5da0>) returned a result with an exception set"


def _failing_kernel(*args: object) -> object:
    raise SystemError(NUMBA_SAYS) from RuntimeError("In 'NRT_adapt_ndarray_to_python', 'descr' is NULL")


def _error_and_hint(err: str) -> tuple[str, str]:
    lines = err.strip().splitlines()
    assert "Traceback" not in err and len(lines) >= 2, err
    assert lines[-2].startswith("error: ") and lines[-1].startswith("hint: "), err
    assert sum(ln.startswith("error: ") for ln in lines) == 1, err
    return lines[-2], lines[-1]


def test_a_compiled_kernel_failure_is_one_error_naming_the_cache(monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(cli.COMMANDS, "archs", lambda args: _failing_kernel())
    assert cli.main(["archs"]) == 2
    error, hint = _error_and_hint(capsys.readouterr().err)
    assert "the compiled kernel run_ctas_7f failed inside tuiprof" in error and "'descr' is NULL" in error
    if jit.kernel_cache_dir() is not None:
        assert f"cache at {jit.kernel_cache_dir()} may be stale" in error
        assert f"rm -r '{jit.kernel_cache_dir()}'" in hint


def test_any_other_system_error_is_a_bug_with_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    def other(args: object) -> int:
        raise SystemError("error return without exception set")

    monkeypatch.setitem(cli.COMMANDS, "archs", other)
    with pytest.raises(SystemError, match="error return without exception set"):
        cli.main(["archs"])
    assert jit.kernel_failure(SystemError(NUMBA_SAYS.replace("CPUDispatcher", "builtin"))) is None
    assert isinstance(jit.kernel_failure(SystemError(NUMBA_SAYS)), CompiledCodeError)


@needs_compiler
def test_the_emulator_says_so_instead_of_blaming_the_launch_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # Before: "launch script .../vecadd_launch.py raised SystemError in setup(dev): CPUDispatcher(...)
    # returned a result with an exception set", with the script's traceback as the hint.
    import tuiprof.collect.emu.run as emu_run

    monkeypatch.setattr(emu_run, "run_ctas_for", lambda code: _failing_kernel)
    out = tmp_path / "t.tptrace"
    assert cli.main(["record", str(DEMOS / "vecadd.cu"), "--launch", str(DEMOS / "vecadd_launch.py"), "-o", str(out)]) == 2
    error, _ = _error_and_hint(capsys.readouterr().err)
    assert "the compiled kernel run_ctas_7f failed inside tuiprof" in error and "launch script" not in error
    assert not out.exists()
