"""Snapshot pictures of the UI (pytest-textual-snapshot) from a finished run with fixed seeds:
the main screen at 80x24, 120x40 and 200x50, the drill-down, the help screen, the arch picker."""

from __future__ import annotations

import pytest

from tests.tui_support import make_app, wait_for

pytest.importorskip("pytest_textual_snapshot")


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)])
def test_main_screen(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(make_app(), terminal_size=size)


def test_main_screen_histogram_tab_at_80x24(snap_compare) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24), press=["n", "2"])


def test_drill_down(snap_compare) -> None:
    async def drill(pilot) -> None:
        await pilot.press("n", "enter")
        await wait_for(pilot, lambda: getattr(pilot.app.screen, "pattern", None) is not None)
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=(120, 40), run_before=drill)


def test_help_screen(snap_compare) -> None:
    assert snap_compare(make_app(), terminal_size=(100, 50), press=["question_mark"])


def test_arch_picker(snap_compare) -> None:
    assert snap_compare(make_app(), terminal_size=(100, 40), press=["a"])
