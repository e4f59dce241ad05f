"""Pilot tests of the terminal UI: every key binding and the flow (start, trials stream in,
rerun, cancel, change MD, change arch, drill-down and back), asserting on state and screens."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.tui_support import CONFIG, DEMO, finished, make_app, screen_text, wait_for
from tuiprof.session import RunConfig

pytest.importorskip("textual")

from textual.widgets import Input, OptionList  # noqa: E402

from tuiprof.tui.app import TuiprofApp  # noqa: E402
from tuiprof.tui.panes.histogram import HistogramView  # noqa: E402
from tuiprof.tui.panes.source import SourceView, build_rows  # noqa: E402
from tuiprof.tui.screens.drill import DrillScreen  # noqa: E402
from tuiprof.tui.screens.modals import ArchScreen, ErrorScreen, ExportScreen, HelpScreen, MdScreen  # noqa: E402

RUNNING = ("preparing", "running", "sweep")


def idle(app: TuiprofApp) -> bool:
    return app.phase in ("done", "failed", "cancelled")


async def test_live_run_streams_trials_and_decisions() -> None:
    """Start on a demo: the trace loads, trials stream in, the panes fill, decisions arrive."""
    seen: list[str] = []

    class Spy(TuiprofApp):
        def on_run_event(self, message) -> None:  # record the event stream the app handled
            seen.append(type(message.event).__name__)
            super().on_run_event(message)

    app = Spy(DEMO, CONFIG, show_timing=False)
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.phase in ("loading", "preparing", "running", "sweep", "done")
        await wait_for(pilot, lambda: app.phase == "done")
        await pilot.pause(0.3)
        assert seen.count("TrialDone") == 4 and seen[-1] == "Finished"
        assert "SweepProgress" in seen
        a = app.analysis
        assert a is not None and a.trials == 4 and a.decisions is not None and a.decisions.md is not None
        view = app.query_one(SourceView)
        assert set(view.stats) == {s.op.id for s in a.ops}
        assert app.query_one(HistogramView).series is not None
        assert app.t_first_update is not None
        text = screen_text(app)
        assert "✓ 4/4 trials" in text and "▶1" in text and "MD decision" in text and "[modeled]" in text


async def test_rerun_new_seed_and_trials_keys() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        gen = app.generation
        await pilot.press("r")
        assert app.config.seed == CONFIG.seed + 1 and app.generation == gen + 1
        assert app.phase in RUNNING + ("done",) and app.session.config.seed == 1
        await wait_for(pilot, lambda: app.phase == "done")
        assert app.session.config.seed == 1 and app.analysis.trials == 4
        await pilot.press("T")
        assert app.config.trials == 8
        await pilot.press("t")                      # halving cancels the 8-trial run, starts a 4-trial one
        assert app.config.trials == 4 and app.planned == 4
        await wait_for(pilot, lambda: app.phase == "done")
        assert app.analysis.planned == 4


async def test_cancel_keeps_the_app_and_drops_late_events() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.start_run(dataclasses.replace(CONFIG, trials=4096))
        await wait_for(pilot, lambda: app.trials_done >= 1)
        await pilot.press("c")
        await wait_for(pilot, lambda: app.phase == "cancelled")
        done = app.trials_done
        await pilot.pause(0.5)
        assert app.phase == "cancelled" and app.trials_done <= done + 2
        assert "cancelled at" in screen_text(app)


async def test_md_picker_reruns_at_the_chosen_md() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("m")
        assert isinstance(app.screen, MdScreen)
        options = app.screen.query_one(OptionList)
        assert options.option_count == app.session.occupancy.ctas_per_sm
        assert "recommended" in str(options.get_option_at_index(app.screen.decision.recommended_md - 1).prompt)
        await pilot.press("home", "down", "enter")   # MD 2
        assert not isinstance(app.screen, MdScreen)
        assert app.session.md == 2 and app.config.md == 2
        await wait_for(pilot, lambda: idle(app))
        assert app.analysis.md == 2
        await pilot.press("m", "escape")
        assert app.session.md == 2


async def test_arch_picker_validates_what_if_edits_then_reruns() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("a")
        screen = app.screen
        assert isinstance(screen, ArchScreen)
        screen.query_one("#set-l1-size", Input).value = "3KiB"
        screen.query_one("#set-l1-size", Input).focus()
        await pilot.press("enter")
        assert isinstance(app.screen, ArchScreen)       # rejected: stays open with the reason
        assert "l1.size" in str(screen.query_one("#arch-error").render())
        screen.query_one("#set-l1-size", Input).value = "64KiB"
        screen.query_one("#set-l1-assoc", Input).value = "8"
        await pilot.press("enter")
        assert not isinstance(app.screen, ArchScreen)
        assert app.session.arch.l1.size == 64 * 1024 and app.session.arch.l1.assoc == 8
        assert dict(app.config.overrides) == {"l1.size": "64KiB", "l1.assoc": "8"}
        await wait_for(pilot, lambda: idle(app))
        await pilot.press("a")
        ol = app.screen.query_one(OptionList)
        names = [ol.get_option_at_index(i).id for i in range(ol.option_count)]
        ol.highlighted = names.index("a100")
        app.screen.query_one("#set-l1-size", Input).value = ""
        app.screen.query_one("#set-l1-assoc", Input).value = ""
        app.screen.query_one("#arch-apply").focus()
        await pilot.press("enter")
        assert app.session.arch.name == "a100" and not app.config.overrides
        await wait_for(pilot, lambda: idle(app))


async def test_drill_down_and_back() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("n")
        hottest = [s.op.id for s in app.analysis.by_cost() if s.op.kind == "load"][0]
        assert app.query_one(SourceView).current_op == hottest
        await pilot.press("enter")
        assert isinstance(app.screen, DrillScreen) and app.screen.op_id == hottest
        await wait_for(pilot, lambda: app.screen.pattern is not None)
        text = screen_text(app)
        for needle in ("Latency breakdown", "Coalescing", "Address pattern", "Advice", "H1 · L1 hit ratio"):
            assert needle in text
        await pilot.press("n")
        assert app.screen.op_id != hottest
        await pilot.press("N")
        assert app.screen.op_id == hottest
        await pilot.press("escape")
        assert not isinstance(app.screen, DrillScreen)


async def test_navigation_keys_search_and_hot_loads() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        view = app.query_one(SourceView)
        await pilot.press("g")
        assert view.cursor == 0
        await pilot.press("j", "j", "down")
        assert view.cursor == 3
        await pilot.press("k", "up")
        assert view.cursor == 1
        await pilot.press("G")
        assert view.cursor == len(view.rows) - 1
        await pilot.press("pageup", "home")
        assert view.cursor == 0
        await pilot.press("pagedown")
        assert view.cursor > 0
        await pilot.press("right", "l", "left")
        assert view.pan == 4
        await pilot.press("h")
        assert view.pan == 0
        loads = view.loads_by_cost()
        await pilot.press("n")
        assert view.current_op == loads[0]
        await pilot.press("n")
        assert view.current_op == loads[1]
        await pilot.press("N", "N")
        assert view.current_op == loads[-1]
        await pilot.press("slash")
        search = app.query_one("#search", Input)
        assert search.has_focus
        await pilot.press(*"out[")
        assert "out[" in view.code[view.rows[view.cursor].line - 1].plain
        await pilot.press("enter", "escape")
        assert not search.has_class("-open") and view.has_focus


async def test_metric_keys_follow_the_selected_op() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        hist = app.query_one(HistogramView)
        await pilot.press("n")
        op = app.query_one(SourceView).current_op
        assert app.metric == "l1_read" and hist.series.title.startswith("L1 read")
        await pilot.press("right_square_bracket")
        assert app.metric == "l2_read"
        await pilot.press("right_square_bracket", "right_square_bracket")
        assert app.metric == f"op{op}.h1" and "op" in hist.series.title
        await pilot.press("n")                      # the op metric follows the cursor
        assert app.metric == f"op{app.query_one(SourceView).current_op}.h1"
        await pilot.press("left_square_bracket")
        assert app.metric == "l2_write"


async def test_panes_become_tabs_at_80x24() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.screen.has_class("-narrow")
        for key, pane in (("2", "#hist"), ("3", "#sm"), ("4", "#md"), ("1", "#source")):
            await pilot.press(key)
            assert app.query_one(pane).display and app.query_one(pane).region.height > 0
        assert app.query_one("#hist").region.height == 0
        text = screen_text(app)
        assert "▸ 1 Source" in text


async def test_help_lists_every_key_and_export_writes_the_report(tmp_path: Path) -> None:
    app = make_app()
    async with app.run_test(size=(120, 70)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        for b in app.BINDINGS:
            assert (b.tooltip or b.description) in text, b.id
        await pilot.press("escape")
        await pilot.press("e")
        assert isinstance(app.screen, ExportScreen)
        out = tmp_path / "report.json"
        app.screen.query_one(Input).value = str(out)
        await pilot.press("enter")
        await pilot.pause()
        import json

        doc = json.loads(out.read_text())
        assert doc["analysis"]["trials"] == 4 and doc["run"]["md"] == app.session.md


async def test_recollect_explains_why_it_is_unavailable() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("R")
        await pilot.pause()
        assert any("recollects from a .cu source" in str(n.message) for n in app._notifications)


async def test_command_palette_has_tuiprof_commands() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        names = [name for name, _, _ in app.palette_commands()]
        assert "Rerun with a new seed" in names and "Choose the MD" in names
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"rerun with")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause()
        assert app.config.seed == 1
        await wait_for(pilot, lambda: idle(app))


async def test_quit_cancels_the_run() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.start_run(dataclasses.replace(CONFIG, trials=4096))
        session = app.session
        await pilot.press("q")
    assert session._cancelled and app.return_code == 0


async def test_run_failure_is_a_modal_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    """A simulator failure (as a Numba compile error would be) shows a message; r still works."""
    from tuiprof.sim import montecarlo

    def broken(self, *a, **k):
        raise RuntimeError("numba.core.errors.TypingError: Failed in nopython mode pipeline")

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        monkeypatch.setattr(montecarlo.MonteCarlo, "run_one", broken)
        await pilot.press("r")
        await wait_for(pilot, lambda: app.phase == "failed")
        await pilot.pause()
        assert isinstance(app.screen, ErrorScreen)
        assert "TypingError" in screen_text(app)
        await pilot.press("escape")
        monkeypatch.undo()
        await pilot.press("r")
        await wait_for(pilot, lambda: app.phase == "done")


async def test_bad_configuration_and_bad_target_are_messages() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        assert not app.start_run(dataclasses.replace(CONFIG, md=999))
        await pilot.pause()
        assert isinstance(app.screen, ErrorScreen) and "exceeds" in screen_text(app)
    app = TuiprofApp("/nonexistent/k.tptrace", CONFIG)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.phase == "failed")
        await pilot.pause()
        assert isinstance(app.screen, ErrorScreen) and "Traceback" not in screen_text(app)


async def test_themes_registered_and_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(theme="tuiprof-high-contrast")
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.no_color
        assert {"tuiprof-dark", "tuiprof-light", "tuiprof-high-contrast", "textual-dark"} <= set(app.available_themes)
        assert app.theme == "tuiprof-high-contrast"
        text = screen_text(app)
        assert "▶1" in text and "▶2" in text          # heat is a glyph and a rank, not only a colour
        app.theme = "tuiprof-light"
        await pilot.pause()


def test_rows_give_each_op_on_a_line_its_own_row() -> None:
    session, _ = finished()
    ops = session.trace.ops
    rows = build_rows(len(session.trace.source_text().splitlines()), ops)
    assert sorted(r.op for r in rows if r.op is not None) == sorted(o.id for o in ops)
    shared = [r for r in rows if not r.first]
    assert shared and all(any(o.line == r.line for o in ops) for r in shared)


def test_cli_once_and_not_a_tty_print_the_report() -> None:
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "tuiprof", "demo", "vecadd", "--trials", "2", "--no-sweep"],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and "kernel_vec_add" in r.stdout
    for how in (["--once"], []):  # with --once, and without a terminal (captured stdout)
        r = subprocess.run([sys.executable, "-m", "tuiprof", "vecadd", *how, "--trials", "2", "--theme", "nope"],
                           capture_output=True, text=True, timeout=180)
        assert r.returncode == 2 and "unknown theme 'nope'" in r.stderr and "tuiprof-dark" in r.stderr
        assert r.stdout == "" and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, "-m", "tuiprof", "kernel.cu"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "no launch script" in r.stderr and "Traceback" not in r.stderr


def test_measured_value_is_a_dashed_marker() -> None:
    """A measured (ncu) value is drawn as ┊ in the histogram, like paper 000's dashed line."""
    from tuiprof.tui.metrics import series
    from tuiprof.tui.panes.histogram import render_histogram

    _, analysis = finished()
    s = series(analysis, "l1_read", {"l1_read_hit_rate": 47.5})
    assert s is not None and s.measured == pytest.approx(0.475)
    text = render_histogram(s, 60, 16, "").plain
    assert "┊ measured 47.5%" in text and text.count("┊") >= 2


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_gutter_columns_align_on_every_row(size: tuple[int, int]) -> None:
    """The compact and the full annotation are as wide as a blank gutter and as the header, so
    the source column starts at the same cell on every row."""
    app = make_app()
    async with app.run_test(size=size):
        view = app.query_one(SourceView)
        lines = ["".join(s.text for s in view.render_line(y)) for y in range(view.size.height)]
        rows = [line for line in lines if line.count("│") >= 2]
        assert any(line[:2].strip() for line in rows)            # some rows carry an op's rank
        edges = {line.index("│", line.index("│") + 1) for line in rows}
        assert len(edges) == 1, edges


def test_md_pane_shows_the_gain_and_its_range() -> None:
    from tests.test_decisions import THIN, run, thrash_trace
    from tuiprof.tui.panes.md import render_md

    analysis, _ = run(thrash_trace(), overrides=THIN)
    d = analysis.decisions
    text = render_md(d, None, analysis.md, 80).plain
    lo, hi = d.md.gain_range
    assert f"gain {d.md.gain:+.0%} [{lo:+.0%}..{hi:+.0%}]" in text
    assert "★" in text and "D" in text


async def test_recollect_recompiles_an_edited_source_and_keeps_the_line(tmp_path: Path) -> None:
    from tuiprof.tui.app import TuiprofApp
    from tuiprof.tui.panes.source import SourceView
    from tuiprof.tui.screens.modals import ErrorScreen

    body = "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    y[i] = 2.0f * x[i];\n"
    src = tmp_path / "k.cu"
    src.write_text('extern "C" __global__ void k(float *y, const float *x)\n{\n' + body + "}\n")
    (tmp_path / "k_launch.py").write_text(
        "import numpy as np\nARCH = 'v100'\ndef setup(dev):\n    x = dev.to_device(np.ones(256, np.float32))\n"
        "    y = dev.zeros(256, np.float32)\n    dev.launch('k', 4, 64, (y, x))\n")
    app = TuiprofApp(str(src), RunConfig(trials=2, sweep=False), show_timing=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.trace is not None)
        first = app.trace
        assert [o.label for o in first.ops] == ["x[i]", "y[i]"]
        view = app.query_one(SourceView)
        view.go_to_line(4)
        # the edit adds a load of x[i + 64] on line 4
        src.write_text(src.read_text().replace("2.0f * x[i];", "2.0f * x[i] + x[(i + 64) % 256];"))
        await pilot.press("R")
        await wait_for(pilot, lambda: app.trace is not first)
        assert len(app.trace.ops) == 3 and view.current_line == 4
        # an edit that does not compile: the error is shown, the app and its last results stay
        src.write_text(src.read_text().replace("2.0f *", "2.0f * *"))
        shown = app.trace
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ErrorScreen))
        assert "does not compile" in str(app.screen.error) and app.trace is shown and app.is_running
