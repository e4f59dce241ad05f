"""Launch scripts: read capped, run in their own namespace, the user's errors shown as theirs."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tuiprof.arch import load_arch
from tuiprof.collect.script import LaunchScriptError, find_launch_script, read_launch_script
from tuiprof.errors import TuiprofError
from tuiprof.trace.data import Launch
from tuiprof.trace.snapshot import choose_snapshot


class Recorder:
    """Stands in for a Device: records what the script asks for (the scripts are under test here)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def to_device(self, a: np.ndarray) -> np.ndarray:
        self.calls.append(("to_device", a.shape))
        return a

    def launch(self, name: str, grid: object, block: object, args: list[object], shared: int = 0) -> None:
        self.calls.append(("launch", name))


def script(tmp_path: Path, text: str, name: str = "launch.py") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_a_script_runs_setup_with_the_device(tmp_path: Path) -> None:
    p = script(tmp_path, "import numpy as np\ndef setup(dev):\n    a = dev.to_device(np.zeros(8, np.float32))\n"
                         "    dev.launch('k', 1, 32, [a])\n")
    dev = Recorder()
    read_launch_script(p).run(dev)
    assert dev.calls == [("to_device", (8,)), ("launch", "k")]


def test_the_users_exception_shows_the_scripts_own_lines(tmp_path: Path) -> None:
    p = script(tmp_path, "def helper():\n    return 1 / 0\n\ndef setup(dev):\n    helper()\n")
    with pytest.raises(LaunchScriptError) as err:
        read_launch_script(p).run(Recorder())
    assert "ZeroDivisionError in setup(dev)" in err.value.message
    assert f'File "{p}", line 5' in err.value.hint and "line 2" in err.value.hint
    assert "tuiprof/collect" not in err.value.hint


def test_device_errors_pass_through_unchanged(tmp_path: Path) -> None:
    class Strict(Recorder):
        def launch(self, *a: object, **k: object) -> None:
            raise TuiprofError("kernel 'k' takes 2 arguments, got 1", "pass every argument")

    p = script(tmp_path, "def setup(dev):\n    dev.launch('k', 1, 32, [1])\n")
    with pytest.raises(TuiprofError, match="takes 2 arguments") as err:
        read_launch_script(p).run(Strict())
    assert not isinstance(err.value, LaunchScriptError)


@pytest.mark.parametrize("text,message", [
    ("x = 1\n", "does not define setup"),
    ("def setup(dev):\n  return (\n", "not valid Python (line 2)"),
    ("raise RuntimeError('boom')\n", "RuntimeError while loading it: boom"),
])
def test_bad_scripts(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(LaunchScriptError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_launch_script(script(tmp_path, text)).run(Recorder())


def test_unreadable_scripts(tmp_path: Path) -> None:
    with pytest.raises(LaunchScriptError, match="does not exist"):
        read_launch_script(tmp_path / "nope.py")
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    with pytest.raises(LaunchScriptError, match="not a regular file"):
        read_launch_script(fifo)
    big = script(tmp_path, "#" * (2 << 20), "big.py")
    with pytest.raises(LaunchScriptError, match="larger than 1 MiB"):
        read_launch_script(big)


def test_scripts_beside_the_source_are_found(tmp_path: Path) -> None:
    src = tmp_path / "spmv.cu"
    assert find_launch_script(src) is None
    named = script(tmp_path, "", "spmv_launch.py")
    assert find_launch_script(src) == named
    plain = script(tmp_path, "", "launch.py")
    assert find_launch_script(src) == plain


def test_snapshot_is_four_waves_from_the_start_cta() -> None:
    arch = load_arch("tesla-c2050")  # 14 SMs
    launch = Launch("k", (512, 1, 1), (256, 1, 1), 20, ctas_per_sm=6)
    snap = choose_snapshot(launch, arch)
    assert snap.n_ctas == 4 * 14 * 6 and snap.cta_ids[0] == 0 and "4 x the 84 CTAs" in snap.rule
    later = choose_snapshot(launch, arch, ctas=100, start=450)
    assert list(later.cta_ids[[0, -1]]) == [450, 511] and "up to the end of the grid" in later.rule
    with pytest.raises(TuiprofError, match="outside the grid"):
        choose_snapshot(launch, arch, start=512)


def test_no_snapshot_is_larger_than_the_counting_bound() -> None:
    """A whole program's counting run counts, before the launch is known, the CTAs any snapshot
    may take: 4 waves of the most CTAs an SM can hold (4 x 132 x 32 on an H100), or --snapshot."""
    from tuiprof.arch import load_arch
    from tuiprof.trace.data import Launch
    from tuiprof.trace.snapshot import choose_snapshot, max_snapshot_ctas

    h100 = load_arch("h100")
    bound = max_snapshot_ctas(h100)
    assert bound == 4 * 132 * 32 and max_snapshot_ctas(h100, ctas=100) == 100
    for threads, per_sm in ((32, 32), (64, 32), (256, 8), (1024, 2), (128, 1)):
        launch = Launch(kernel="k", grid=(1 << 20, 1, 1), block=(threads, 1, 1), registers_per_thread=32,
                        static_shared=0, dynamic_shared=0, ctas_per_sm=per_sm)
        assert choose_snapshot(launch, h100).n_ctas <= bound
    assert choose_snapshot(launch, h100, ctas=100, start=7).cta_ids[-1] < 7 + max_snapshot_ctas(h100, ctas=100)
