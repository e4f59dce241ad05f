"""What a key costs the UI's thread (issue 25 item 4), counted, never timed: closing a dialog
does not rebuild the footer, Python's full garbage collections wait for a quiet moment instead
of landing on a key, the objects that live as long as the app are out of their walk, and Esc
waits tuiprof's 50 ms (or the user's ESCDELAY) for the rest of an escape sequence."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support.fixed_analysis import fixed_app
from tests.support.tui_support import DEMO, screen_text

pytest.importorskip("textual")

from tuiprof.tui import ESCDELAY_MS, heap  # noqa: E402
from tuiprof.tui.screens.drill import DrillScreen  # noqa: E402
from tuiprof.tui.screens.modals import ArchScreen, ExportScreen, HelpScreen, MdScreen  # noqa: E402
from tuiprof.tui.status import AppFooter  # noqa: E402


@pytest.fixture
def gc_state() -> Iterator[None]:
    """The collector's thresholds and frozen objects as they were, whatever the test did."""
    thresholds = gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    gc.unfreeze()


@pytest.fixture
def footer_composes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one each time any footer composes its keys."""
    seen: list[int] = []
    real = AppFooter.compose

    def compose(self: AppFooter):  # type: ignore[no-untyped-def]
        seen.append(1)
        return real(self)

    monkeypatch.setattr(AppFooter, "compose", compose)
    return seen


async def drill_built_ahead(pilot) -> None:  # type: ignore[no-untyped-def]
    """Let the app run until it has built its drill-down ahead (at its first quiet tick) and the
    screen has mounted, off-screen (its footer composes then)."""
    app = pilot.app
    for _ in range(100):
        await pilot.pause(0.1)
        if app.is_screen_installed("drill") and app.get_screen("drill").is_mounted:
            return


async def test_closing_a_dialog_or_the_drill_down_does_not_rebuild_the_footer(footer_composes: list[int]) -> None:
    """The footer behind a dialog shows the same keys once the dialog closes: Textual recomposed
    it on every close (its ~25 keys removed and mounted again, ~20-30 ms of the UI thread)."""
    app = fixed_app(DEMO)
    async with app.run_test(size=(120, 40)) as pilot:
        await drill_built_ahead(pilot)
        for key, screen in (("m", MdScreen), ("a", ArchScreen), ("e", ExportScreen), ("question_mark", HelpScreen),
                            ("enter", DrillScreen)):
            await pilot.press(key)
            await pilot.pause(0.2)
            assert isinstance(app.screen, screen)
            footer_composes.clear()
            await pilot.press("escape")
            await pilot.pause(0.2)
            assert not isinstance(app.screen, screen)
            assert footer_composes == [], f"closing {screen.__name__} recomposed the footer"


async def test_the_footer_is_rebuilt_when_its_keys_change(footer_composes: list[int]) -> None:
    """The control: opening the drill-down (other keys) composes its footer."""
    app = fixed_app(DEMO)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        footer_composes.clear()
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert isinstance(app.screen, DrillScreen)
        assert footer_composes, "the drill-down's footer was never composed"
        keys = [k.key for k in app.screen.query("FooterKey")]
        assert "n" in keys and "escape" in keys


def make_gen1_collections(n: int) -> None:
    """Allocate container objects until `n` generation-1 collections have run since the last
    full one (gc.get_count()[2])."""
    keep: list[list[object]] = []
    while gc.get_count()[2] < n:
        keep.append([[] for _ in range(100)])
        if len(keep) > 1000:
            keep.clear()


def test_a_full_collection_waits_for_a_quiet_moment(gc_state: None) -> None:
    collector = heap.Collector()
    before = gc.get_threshold()
    collector.start()
    assert gc.get_threshold()[:2] == before[:2] and gc.get_threshold()[2] >= heap.FORCED * 1000
    gc.collect()
    make_gen1_collections(heap.DUE)
    assert gc.get_count()[2] >= heap.DUE  # Python did not run a full collection on its own
    assert not collector.tick(since_key=0.0)  # due, but a key just came
    assert collector.tick(since_key=heap.QUIET)  # due and quiet
    assert gc.get_count()[2] == 0 and collector.full == 1
    assert not collector.tick(since_key=10.0)  # not due any more
    collector.stop()
    assert gc.get_threshold() == before


def test_a_long_overdue_full_collection_runs_even_while_keys_come(gc_state: None) -> None:
    collector = heap.Collector()
    collector.start()
    gc.collect()
    make_gen1_collections(heap.FORCED)
    assert collector.tick(since_key=0.0)
    collector.stop()


def test_settle_takes_the_objects_alive_now_out_of_the_walk(gc_state: None) -> None:
    gc.unfreeze()
    walked = heap.walked()
    frozen = heap.settle(collect=True)
    assert frozen > 0
    assert heap.walked() < walked - frozen // 2


async def test_the_app_freezes_what_lives_as_long_as_it_and_gives_it_back(gc_state: None) -> None:
    gc.unfreeze()
    thresholds = gc.get_threshold()
    app = fixed_app(DEMO)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        assert gc.get_freeze_count() > 0  # the trace, the panes, the modules: out of the walk
        assert gc.get_threshold()[2] > thresholds[2]  # full collections at quiet ticks only
        assert heap.walked() < gc.get_freeze_count()
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == thresholds


@pytest.mark.parametrize("user, expected", [(None, ESCDELAY_MS), ("100", 100), ("25", 25)])
def test_esc_waits_50_ms_unless_the_user_set_escdelay(user: str | None, expected: int) -> None:
    """Textual reads ESCDELAY once, when imported: the app sets tuiprof's default before."""
    env = {k: v for k, v in os.environ.items() if k != "ESCDELAY"}
    if user is not None:
        env["ESCDELAY"] = user
    code = ("from tuiprof.tui import prepare_terminal; prepare_terminal(); "
            "import textual.constants as c; print(round(c.ESCAPE_DELAY * 1000))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    assert int(out.stdout) == expected


def test_esc_waits_50_ms_when_the_cli_imported_the_themes_first() -> None:
    """The CLI checks `--theme` (`tuiprof.tui.themes`, which imports Textual) before it starts
    the app: Textual had read its 100 ms default by then, and tuiprof's 50 ms never applied."""
    env = {k: v for k, v in os.environ.items() if k != "ESCDELAY"}
    code = "import tuiprof.tui.themes; import textual.constants as c; print(round(c.ESCAPE_DELAY * 1000))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    assert int(out.stdout) == ESCDELAY_MS


async def test_the_drill_down_is_kept_and_reopened_on_the_op_under_the_cursor(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second Enter shows the new op in the same screen without composing it again (it took
    ~40 ms of each Enter), scrolled to the top; Esc leaves the source as it was."""
    composed: list[int] = []
    real = DrillScreen.compose

    def compose(self: DrillScreen):  # type: ignore[no-untyped-def]
        composed.append(1)
        return real(self)

    monkeypatch.setattr(DrillScreen, "compose", compose)
    app = fixed_app(DEMO)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        view = app.query_one("SourceView")
        first = view.current_op
        await pilot.press("enter")
        await pilot.pause(0.3)
        drill = app.screen
        assert isinstance(drill, DrillScreen) and drill.op_id == first
        assert f"op {first} " in screen_text(app)
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, DrillScreen) and " tuiprof " in screen_text(app)
        await pilot.press("n")
        await pilot.pause(0.2)
        second = view.current_op
        assert second is not None and second != first
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert app.screen is drill and drill.op_id == second
        assert f"op {second} " in screen_text(app) and f"op {first} ·" not in screen_text(app)
        assert composed == [1]


async def test_the_first_enter_shows_a_drill_down_built_ahead_at_a_quiet_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    """The session's first Enter composed the drill-down and mounted its ~15 widgets (~90-120 ms
    of the UI thread, against ~30 ms for later Enters): it is built once results are on screen
    and no key came for a while, off-screen, so that the first Enter only fills and shows it (its
    footer's keys and a scroll bar are all it mounts)."""
    from textual.widget import Widget

    built: list[str] = []
    real = Widget._compose

    async def compose(self: Widget) -> None:
        built.append(type(self).__name__)
        await real(self)

    monkeypatch.setattr(Widget, "_compose", compose)
    app = fixed_app(DEMO)
    async with app.run_test(size=(120, 40)) as pilot:
        await drill_built_ahead(pilot)
        assert not isinstance(app.screen, DrillScreen)
        assert "DrillScreen" in built and "HistogramView" in built[built.index("DrillScreen"):]
        drill = app.get_screen("drill")
        assert drill.is_mounted and drill not in app.screen_stack
        op = app.query_one("SourceView").current_op
        built.clear()
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert app.screen is drill and drill.op_id == op and f"op {op} " in screen_text(app)
        assert not {"DrillScreen", "HistogramView", "Static", "VerticalScroll"} & set(built), built


async def test_the_drill_down_is_built_ahead_only_at_a_quiet_moment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building ahead waits for a moment without keys (here never one): an Enter before it
    builds the drill-down as it always did."""
    monkeypatch.setattr(heap, "QUIET", float("inf"))
    app = fixed_app(DEMO)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(4):
            await pilot.press("j")
            await pilot.pause(0.15)
        assert not app.is_screen_installed("drill")
        op = app.query_one("SourceView").current_op
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert isinstance(app.screen, DrillScreen) and app.screen.op_id == op


async def test_a_dialog_holds_the_main_screens_updates_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a dialog the main screen is drawn dimmed, and each of its updates redrew the whole
    terminal (ten times a second while trials ran, ~22 kB a frame at 120x40): with a dialog open
    the analyses and the trial counts wait (here for good), and show at the first tick after it
    closes."""
    from tuiprof.session import TrialDone
    from tuiprof.tui import app as app_module
    from tuiprof.tui.status import StatusBar

    monkeypatch.setattr(app_module, "COVERED_REFRESH", 3600.0)
    app = fixed_app(DEMO)
    async with app.run_test(size=(120, 40)) as pilot:
        await drill_built_ahead(pilot)
        views: list[int] = []
        shows: list[int] = []
        real_views, real_show = app._update_views, StatusBar.show
        monkeypatch.setattr(app, "_update_views", lambda: (views.append(1), real_views())[1])
        monkeypatch.setattr(StatusBar, "show", lambda self, fields: (shows.append(1), real_show(self, fields))[1])
        await pilot.press("m")
        await pilot.pause(0.2)
        assert isinstance(app.screen, MdScreen) and app.covered()
        analysis = app.analysis
        assert analysis is not None
        app.phase = "running"
        views.clear(), shows.clear()
        for _ in range(10):
            app._pending = analysis
            app._handle(TrialDone(None, 3, 64))  # type: ignore[arg-type]  # the app reads done and planned
            app._tick()
        assert views == [] and shows == []
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert not app.covered() and views and shows and app.trials_done == 3
