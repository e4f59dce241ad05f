"""Snapshot pictures of the UI (pytest-textual-snapshot) on fixed analysis data (made-up trials
through the run's own analysis, `tests.support.fixed_analysis`), so that a picture changes only when the
layout does: the main screen of spmv-u and transpose-naive at 80x24, 120x40, 160x50 and 220x60,
and of spmv-u on a GPU without an L2, the histogram tab, the drill-down, the help screen and the
arch picker (and at 80x24 the last three, issue 25), and a pinned baseline (issue 26)."""

from __future__ import annotations

import pytest

from tests.support.fixed_analysis import fixed, fixed_app
from tests.support.tui_support import wait_for

pytest.importorskip("pytest_textual_snapshot")

SIZES = [(80, 24), (120, 40), (160, 50), (220, 60)]


async def patterns_in(pilot) -> None:
    """Wait until the reason words can be drawn (the address patterns come from a thread)."""
    await wait_for(pilot, lambda: pilot.app.patterns is not None)
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("demo", ["spmv-u", "transpose-naive"])
def test_main_screen(snap_compare, demo: str, size: tuple[int, int]) -> None:
    assert snap_compare(fixed_app(demo), terminal_size=size, run_before=patterns_in)


def test_histogram_and_model_tabs_at_80x24(snap_compare) -> None:
    async def tabs(pilot) -> None:
        await patterns_in(pilot)
        await pilot.press("n", "2")

    assert snap_compare(fixed_app("spmv-u"), terminal_size=(80, 24), run_before=tabs)


def test_model_tab_at_120x40(snap_compare) -> None:
    async def tab(pilot) -> None:
        await patterns_in(pilot)
        await pilot.press("4")

    assert snap_compare(fixed_app("spmv-u"), terminal_size=(120, 40), run_before=tab)


@pytest.mark.parametrize("demo,size,keys", [("transpose-naive", (120, 40), ("n", "enter")),
                                             ("spmv-u", (80, 24), ("enter",))],
                         ids=["transpose-naive-120x40", "spmv-u-80x24"])
def test_drill_down(snap_compare, demo: str, size: tuple[int, int], keys: tuple[str, ...]) -> None:
    async def drill(pilot) -> None:
        await patterns_in(pilot)
        await pilot.press(*keys)
        await wait_for(pilot, lambda: getattr(pilot.app.screen, "pattern", None) is not None)
        await pilot.pause()

    assert snap_compare(fixed_app(demo), terminal_size=size, run_before=drill)


@pytest.mark.parametrize("size", [(100, 50), (80, 24)], ids=["100x50", "80x24"])
def test_help_screen(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(fixed_app("spmv-u"), terminal_size=size, press=["question_mark"])


@pytest.mark.parametrize("size", [(100, 40), (80, 24)], ids=["100x40", "80x24"])
def test_arch_picker(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(fixed_app("spmv-u"), terminal_size=size, press=["a"])


def test_main_screen_without_an_l2(snap_compare) -> None:
    assert snap_compare(fixed_app("spmv-u", arch="gtx480"), terminal_size=(120, 40), run_before=patterns_in)


def test_baseline_main_screen_at_120x40(snap_compare) -> None:
    """Issue 26: a baseline at MD 2 pinned (fixed data too): the gutter's ΔX column, the status
    bar and the cursor op's changes under the code."""
    async def pin(pilot) -> None:
        await patterns_in(pilot)
        pilot.app.pin_baseline(*fixed("spmv-u", md=2))
        await pilot.press("n")
        await pilot.pause()

    assert snap_compare(fixed_app("spmv-u"), terminal_size=(120, 40), run_before=pin)


def test_baseline_histogram_tab_at_80x24(snap_compare) -> None:
    """The baseline's histogram (░, its mean △) behind the current one, and the change."""
    async def pin(pilot) -> None:
        await patterns_in(pilot)
        pilot.app.pin_baseline(*fixed("spmv-u", md=2))
        await pilot.press("n", "2")
        await pilot.pause()

    assert snap_compare(fixed_app("spmv-u"), terminal_size=(80, 24), run_before=pin)
