"""The UI's export (issue 9 items 3 and 6): it never writes over what the run reads (the trace, a
.cu source, its launch script, an --arch file), and a name the file system cannot hold is a
modal, never the end of the session."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.tui_support import finished, wait_for
from tuiprof.session import RunConfig, Session

pytest.importorskip("textual")

from tuiprof.tui.app import TuiprofApp  # noqa: E402
from tuiprof.tui.screens.modals import ErrorScreen  # noqa: E402


def app_reading(tmp_path: Path, target: Path, config: RunConfig) -> TuiprofApp:
    """The app showing the finished stencil7 run as if `target` had been opened under `config`."""
    session, analysis = finished()
    return TuiprofApp(session=Session(session.trace, config, target), analysis=analysis, show_timing=False)


async def export_error(app: TuiprofApp, path: Path | str) -> str:
    """Export to `path` and return the message of the modal that must follow."""
    async with app.run_test(size=(120, 40)) as pilot:
        app.export(Path(path))
        await wait_for(pilot, lambda: isinstance(app.screen, ErrorScreen), timeout=30)
        message = app.screen.error.message
        await pilot.press("escape")                                    # the session goes on
        assert not isinstance(app.screen, ErrorScreen) and app.analysis is not None
        return message


def inputs(tmp_path: Path) -> dict[str, Path]:
    """A copy of the trace, a .cu source with its launch script beside it, an arch TOML."""
    from tuiprof.arch.presets import PRESET_DIR

    session, _ = finished()
    files = {"trace": Path(shutil.copy(session.path, tmp_path / "mine.tptrace")),
             "source": tmp_path / "k.cu", "script": tmp_path / "k_launch.py", "arch": tmp_path / "gpu.toml"}
    files["source"].write_text("__global__ void k() {}\n")
    files["script"].write_text("def setup(dev):\n    pass\n")
    files["arch"].write_text((PRESET_DIR / f"{session.arch.name}.toml").read_text())
    return files


@pytest.mark.parametrize("victim", ["trace", "source", "script", "arch"])
async def test_export_never_writes_over_an_input(tmp_path: Path, victim: str) -> None:
    # Before: typing the trace's own name in the export dialog replaced the trace with the report.
    files = inputs(tmp_path)
    before = {k: p.read_bytes() for k, p in files.items()}
    target = files["trace"] if victim == "trace" else files["source"]
    app = app_reading(tmp_path, target, RunConfig(arch=str(files["arch"]), trials=4, sweep_trials=2))
    message = await export_error(app, files[victim])
    assert "is the input being read" in message, message
    assert {k: p.read_bytes() for k, p in files.items()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


async def test_export_with_a_300_character_name_is_a_modal(tmp_path: Path) -> None:
    # Before: the OSError (file name too long) escaped app.export and the session was lost.
    files = inputs(tmp_path)
    app = app_reading(tmp_path, files["trace"], RunConfig(trials=4, sweep_trials=2))
    message = await export_error(app, tmp_path / ("r" * 300 + ".txt"))
    assert "a file name is longer than 255 bytes" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in files.values())
