"""Pilot tests of the terminal UI: every key binding and the flow (start, trials stream in,
rerun, cancel, change MD, change arch, drill-down and back), asserting on state and screens;
and the layout: the source gets the width, the numbers read like Nsight Compute's, results
survive reruns (issue 13)."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from pathlib import Path

import numpy as np
import pytest

from tests.support.fixed_analysis import fixed, fixed_app
from tests.support.tui_support import CONFIG, DEMO, finished, make_app, screen_text, wait_for
from tuiprof.session import RunConfig

pytest.importorskip("textual")

from textual.containers import VerticalScroll  # noqa: E402
from textual.widgets import Input, OptionList  # noqa: E402

from tuiprof.demos import CATALOGUE, demo_dir  # noqa: E402
from tuiprof.tui.actions import ACTIONS  # noqa: E402
from tuiprof.tui.app import RUNNING, TuiprofApp, precision_step, side_width  # noqa: E402
from tuiprof.tui.messages import Compiling  # noqa: E402
from tuiprof.tui.panes.histogram import HistogramView, Series, render_histogram  # noqa: E402
from tuiprof.tui.panes.md import MdPane, render_md  # noqa: E402
from tuiprof.tui.panes.source import SourceView, build_rows  # noqa: E402
from tuiprof.tui.screens.drill import DrillScreen  # noqa: E402
from tuiprof.tui.screens.modals import ArchScreen, ErrorScreen, ExportScreen, HelpScreen, MdScreen  # noqa: E402


def idle(app: TuiprofApp) -> bool:
    return app.phase in ("done", "failed", "cancelled")


def status_text(app: TuiprofApp) -> str:
    """The status bar's text as last set (no repaint needed)."""
    from tuiprof.tui.app import StatusBar

    return str(app.query_one(StatusBar).render())


def lines_of(view: SourceView) -> list[str]:
    return ["".join(s.text for s in view.render_line(y)) for y in range(view.size.height)]


async def patterns_in(pilot) -> None:
    await wait_for(pilot, lambda: pilot.app.patterns is not None)
    await pilot.pause()


# --- the flow ------------------------------------------------------------------------------------

async def test_live_run_streams_trials_and_decisions() -> None:
    """Start on a demo: the trace loads, trials stream in, the panes fill, decisions arrive."""
    seen: list[str] = []

    class Spy(TuiprofApp):
        def on_run_event(self, message) -> None:  # record the event stream the app handled
            seen.append(type(message.event).__name__)
            super().on_run_event(message)

    app = Spy(DEMO, CONFIG, show_timing=False)
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.phase in ("loading", *RUNNING, "done")
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
        assert "✓ 4/4 trials" in text and "#1" in text and "emulator trace" in text
        await pilot.press("4")
        assert "MD decision" in screen_text(app)
        await pilot.press("3")
        assert "[modeled]" in screen_text(app)


async def test_rerun_keeps_the_previous_results_dimmed_until_the_new_arrive() -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        before = app.analysis
        gen = app.generation
        app.action_rerun()                          # r, looked at before any of the rerun's events
        assert app.config.seed == CONFIG.seed + 1 and app.generation == gen + 1
        assert app.phase in RUNNING and app.session.config.seed == 1
        # Before: every pane was wiped ("waiting for the first trial") until the rerun's first trial.
        assert app.analysis is before and app.stale
        view = app.query_one(SourceView)
        assert view.stats and view.stale and app.query_one(HistogramView).series is not None
        assert app.query_one(HistogramView).has_class("-stale") and app.query_one(MdPane).has_class("-stale")
        assert "MD decision" in app.query_one(MdPane).render().plain
        await wait_for(pilot, lambda: app.phase == "done")
        assert not app.stale and app.analysis is not before and app.analysis.trials == 4
        assert not app.query_one(HistogramView).has_class("-stale")


def test_precision_step_tightens_the_tolerance_and_pins_the_sweep() -> None:
    """T buys precision: half the tolerance with room for 4x the trials (the CI narrows as
    1/sqrt(n)); before, it doubled the trials, and the run converged at the same 20 trials."""
    c = RunConfig(trials=64, tolerance=0.002)
    up = precision_step(c, 16, True)
    assert (up.tolerance, up.trials, up.sweep_trials, up.sweep_tolerance) == (0.001, 256, 16, 0.002)
    down = precision_step(up, 16, False)
    assert (down.tolerance, down.trials, down.sweep_trials, down.sweep_tolerance) == (0.002, 64, 16, 0.002)
    every = precision_step(RunConfig(trials=64, tolerance=None), 16, True)
    assert (every.tolerance, every.trials) == (None, 128)


def test_precision_step_keeps_the_sweep_adaptive_or_not() -> None:
    """Pinning the sweep's trial count must not turn its adaptive trials off (nor on): the sweep
    is then found in the SweepCache instead of run again."""
    up = precision_step(RunConfig(trials=64, tolerance=0.002), 16, True)
    assert up.sweep_trials == 16 and up.adaptive_sweep
    fixed = precision_step(RunConfig(trials=64, tolerance=0.002, sweep_trials=8), 16, True)
    assert fixed.sweep_trials == 8 and not fixed.adaptive_sweep


async def test_more_precision_reruns_to_a_narrower_interval() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.start_run(dataclasses.replace(CONFIG, trials=40, tolerance=0.004, sweep=False))
        await wait_for(pilot, lambda: app.phase == "done")
        first = app.analysis
        await pilot.press("T")
        assert app.config.tolerance == 0.002 and app.config.trials == 160
        await wait_for(pilot, lambda: app.phase == "done")
        a = app.analysis
        half = {k: (e.ci_hi - e.ci_lo) / 2 for k, e in a.headline.items() if e.n > 1}
        assert a.trials > first.trials or all(h <= 0.002 for h in half.values())
        assert all(h <= 0.002 for h in half.values()) or a.trials == a.planned
        await pilot.press("t")
        assert app.config.tolerance == 0.004 and app.config.trials == 40


async def test_cancel_says_so_at_once_and_in_the_md_pane() -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        app.start_run(dataclasses.replace(CONFIG, trials=4096, tolerance=None))
        await wait_for(pilot, lambda: app.trials_done >= 1)
        app.action_cancel_run()                      # c: said at once, before the run's own event
        assert "■ cancelling" in status_text(app)
        await wait_for(pilot, lambda: app.phase == "cancelled")
        done = app.trials_done
        await pilot.pause(0.5)
        assert app.phase == "cancelled" and app.trials_done <= done + 2
        text = screen_text(app)
        assert "cancelled at" in text
        # Before: the MD pane kept saying "waiting for the MD sweep…" forever.
        assert "waiting for the MD sweep" not in text and "cancelled" in app.query_one(MdPane).render().plain


async def test_md_picker_reruns_at_the_chosen_md_and_reuses_the_sweep() -> None:
    from tuiprof.sim.montecarlo import MonteCarlo

    app = TuiprofApp(DEMO, CONFIG, show_timing=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.phase == "done")
        limit = app.session.occupancy.ctas_per_sm
        await pilot.press("m")
        assert isinstance(app.screen, MdScreen)
        options = app.screen.query_one(OptionList)
        assert options.option_count == limit
        assert "recommended" in str(options.get_option_at_index(app.screen.decision.recommended_md - 1).prompt)
        ran: list[int] = []
        real = MonteCarlo.run_one

        def counted(self: MonteCarlo, index: int):
            ran.append(self.md)
            return real(self, index)

        MonteCarlo.run_one = counted  # type: ignore[method-assign]
        try:
            await pilot.press("home", "down", "enter")   # MD 2
            assert not isinstance(app.screen, MdScreen)
            assert app.session.md == 2 and app.config.md == 2
            await wait_for(pilot, lambda: idle(app))
        finally:
            MonteCarlo.run_one = real  # type: ignore[method-assign]
        assert app.analysis.md == 2 and app.analysis.decisions.md is not None
        # The sweep's MDs other than the old main run's came from the cache: only MD 2 (the main
        # run) and the old default (never swept before) were simulated.
        assert set(ran) <= {2, limit}, sorted(set(ran))
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
        # The what-if star once (before: "v100**"), and an export name without glob characters.
        status = screen_text(app).splitlines()[0]
        assert f"{app.session.arch.name} ·" in status and "**" not in status
        assert not re.search(r"[*?\[\]]", app.export_name()) and "whatif" in app.export_name()
        await wait_for(pilot, lambda: idle(app))
        await pilot.press("a")
        ol = app.screen.query_one(OptionList)
        names = [ol.get_option_at_index(i).id for i in range(ol.option_count)]
        ol.highlighted = names.index("a100")
        await pilot.pause()
        # One unit style: the preset's L2 of 40 MiB, not "40960KiB".
        assert app.screen.query_one("#set-l2-size", Input).placeholder == "a100: 40 MiB"
        app.screen.query_one("#set-l1-size", Input).value = ""
        app.screen.query_one("#set-l1-assoc", Input).value = ""
        app.screen.query_one("#arch-apply").focus()
        await pilot.press("enter")
        assert app.session.arch.name == "a100" and not app.config.overrides
        await wait_for(pilot, lambda: idle(app))


async def test_drill_down_shares_the_numbering_and_advice_of_the_report() -> None:
    from tuiprof.report import document

    session, analysis = fixed("transpose-naive")
    app = fixed_app("transpose-naive")
    async with app.run_test(size=(120, 40)) as pilot:
        await patterns_in(pilot)
        await pilot.press("n")
        hottest = [i for i, r in analysis.ranks().items() if r == "#1"][0]
        assert app.query_one(SourceView).current_op == hottest
        await pilot.press("enter")
        assert isinstance(app.screen, DrillScreen) and app.screen.op_id == hottest
        await wait_for(pilot, lambda: app.screen.pattern is not None)
        text = screen_text(app)
        for needle in ("Latency breakdown", "Coalescing", "Address pattern", "Advice", "H1 (L1 hit ratio)",
                       "sectors per request 4.0", f"#1 op {hottest}"):
            assert needle in text, needle
        await pilot.press("n")                      # the only other ranked op is a store: n stays on loads
        assert app.screen.op_id == hottest
        app.screen.op_id = 1                        # the store
        app.screen.update_analysis(analysis)
        await pilot.pause()
        text = " ".join(screen_text(app).split())
        doc = document(session, analysis)
        store = next(o for o in doc["analysis"]["ops"] if o["id"] == 1)
        assert store["rank"] == "w1" and store["reason"] == "uncoalesced 8x" and "w1 op 1" in text
        for tip in store["advice"]:
            assert " ".join(tip.split())[:60] in text
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
        loads = view.loads_by_cost()
        assert all(app.session.trace.ops[i].kind == "load" for i in loads)
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


async def test_metrics_default_to_the_hottest_loads_latency() -> None:
    """The histogram opens on L1's X (before: the kernel's L1 read hit ratio, 0% on half the
    demos), follows the cursor's op, and ] steps through X, H1, H2 and the kernel ratios."""
    app = fixed_app("spmv-u")
    async with app.run_test(size=(160, 50)) as pilot:
        await patterns_in(pilot)
        hist = app.query_one(HistogramView)
        analysis = app.analysis
        l1 = [i for i, r in analysis.ranks().items() if r == "#1"][0]
        assert app.metric == "x" and hist.series.title.startswith("X expected latency") and f"#1 op {l1}" in hist.series.title
        await pilot.press("right_square_bracket")
        assert app.metric == "h1" and hist.series.title.startswith("H1")
        await pilot.press("n", "n")                 # the op metric follows the cursor
        assert f"op {app.query_one(SourceView).current_op} " in hist.series.title
        await pilot.press("right_square_bracket", "right_square_bracket")
        assert app.metric == "l1_read" and hist.series.title.startswith("L1 read hit ratio")
        await pilot.press("left_square_bracket", "left_square_bracket", "left_square_bracket")
        assert app.metric == "x"


# --- the layout: the source gets the width ------------------------------------------------------

@pytest.mark.parametrize("size", [(120, 40), (160, 50)])
async def test_every_demo_line_up_to_100_characters_is_visible_whole(size: tuple[int, int]) -> None:
    """Before: the code got 33 columns at 120x40 and 56 at 160x50, cut mid-expression."""
    app = fixed_app("spmv-u")
    async with app.run_test(size=size) as pilot:
        await patterns_in(pilot)
        view = app.query_one(SourceView)
        for source in sorted({d.source for d in CATALOGUE.values()}):
            text = (demo_dir() / source).read_text()
            view.set_source(source, text, [])
            app._layout()
            await pilot.pause()
            lines = text.split("\n")
            gutter = view.gutter_width
            for top in range(0, len(view.rows), view.body_height):
                view.top = top
                for y, line in enumerate(lines_of(view)[1: view.body_height + 1]):
                    k = top + y
                    if k >= len(lines):
                        break
                    want = lines[k].rstrip().expandtabs(4)
                    if len(want) <= 100:
                        assert line[gutter:].rstrip() == want, (size, source, k + 1, line)
        if size == (160, 50):
            assert app.split                     # and the panes still sit beside the source


async def test_zoom_hides_the_side_panes() -> None:
    app = fixed_app("transpose-naive")
    async with app.run_test(size=(160, 50)) as pilot:
        await patterns_in(pilot)
        view = app.query_one(SourceView)
        assert app.split and app.query_one("#side").display and view.size.width < 160
        await pilot.press("z")
        assert view.size.width == 160 and app.query_one("#side").region.width == 0
        await pilot.press("z")
        assert app.query_one("#side").region.width > 0


async def test_cut_lines_end_in_an_ellipsis_and_the_cursor_line_is_echoed_whole() -> None:
    app = fixed_app("transpose-naive")
    async with app.run_test(size=(80, 24)) as pilot:
        await patterns_in(pilot)
        view = app.query_one(SourceView)
        line = next(k for k, c in enumerate(view.code, 1) if c.cell_length > view.code_width)
        view.go_to_line(line)
        await pilot.pause()
        rows = lines_of(view)
        shown = next(r for r in rows[1: view.body_height + 1] if r[view.gutter_width:].startswith(
            view.code[line - 1].plain[:20]))
        assert shown.rstrip().endswith("…")
        echo = "".join(r.rstrip() for r in rows[view.body_height + 2:])
        assert view.code[line - 1].plain.strip() in echo.strip()
        # Scrolling right keeps the gutter where it is and moves only the code.
        await pilot.press("right")
        after = lines_of(view)
        assert view.pan == 8
        for before_row, after_row in zip(rows[2: view.body_height], after[2: view.body_height]):
            assert before_row[: view.gutter_width] == after_row[: view.gutter_width]


async def test_gutter_is_fixed_and_aligned_at_every_width() -> None:
    """The gutter does not grow with the terminal (before: 29 -> 53 columns), and the code starts
    at the same cell on every row, header included."""
    for size in ((80, 24), (120, 40), (220, 60)):
        app = fixed_app("spmv-u")
        async with app.run_test(size=size) as pilot:
            await patterns_in(pilot)
            view = app.query_one(SourceView)
            rows = lines_of(view)[: view.body_height + 1]
            assert view.gutter_width == 20
            assert {r.index("│") for r in rows if "│" in r} == {19}
            assert any(r[:2] == "#1" for r in rows)
            assert "✓" in "".join(r[:20] for r in rows)  # an op at the ideal sectors per request


def test_side_panes_take_what_the_source_leaves() -> None:
    assert side_width(120, 20, 100) == 0                  # tabs: the source keeps its 100 columns
    assert side_width(160, 20, 100) == 39
    assert side_width(160, 20, 60) == 79
    assert side_width(220, 20, 107) == 96                 # capped; long lines still get 100 columns


async def test_legend_and_the_cursor_op_in_full() -> None:
    session, analysis = fixed("spmv-u")
    app = fixed_app("spmv-u")
    async with app.run_test(size=(160, 50)) as pilot:
        await patterns_in(pilot)
        view = app.query_one(SourceView)
        text = screen_text(app)
        assert "#1 costliest load" in text and "s/r" in text
        l1 = [i for i, r in analysis.ranks().items() if r == "#1"][0]
        s = analysis.ops[l1]
        detail = view.detail().plain
        assert detail.startswith(f"#1 op {l1} load") and "gather" in detail
        assert f"{s.sectors_per_access:.1f} sect/req, ideal {s.ideal_sectors:.0f}" in detail


async def test_panes_become_tabs_when_they_do_not_fit() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.screen.has_class("-tabs") and not app.split
        for key, pane in (("2", "#hist"), ("3", "#sm"), ("4", "#md"), ("1", "#source")):
            await pilot.press(key)
            assert app.query_one(pane).display and app.query_one(pane).region.height > 0
        assert app.query_one("#hist").region.height == 0
        assert "▸ 1 Source" in screen_text(app)
        await pilot.press("4")                      # a tab gets the whole width (before: half of it)
        assert app.query_one("#md").region.width == 80


async def test_model_pane_shows_time_bottleneck_mwp_and_every_md_row() -> None:
    session, analysis = fixed("spmv-u")
    app = fixed_app("spmv-u")
    async with app.run_test(size=(160, 50)) as pilot:
        await patterns_in(pilot)
        text = screen_text(app)
        d = analysis.decisions
        pane = " ".join(app.query_one(MdPane).render().plain.split())
        assert f"bottleneck {d.bottleneck.bottleneck}" in pane and d.time.bound_label in pane
        assert f"MWP {d.mwp.mwp:.1f} CWP {d.mwp.cwp:.1f}" in pane
        for r in d.md.thesis.rows:                  # the pane gets the rows it needs
            assert re.search(rf"▏\s+\S*\s+{r.md}\s+\d+%", text), r.md


def test_md_pane_marks_the_default_and_recommended_rows_and_the_timing_gain() -> None:
    """The ★ row is the recommended MD's, the D row the default's, and the gain printed is the
    timing model's T(default) / T(recommended) - 1 (before, the test asserted "D" in a text
    holding "DRAM", which cannot fail)."""
    from tests.support.decision_runs import THIN, run, thrash_trace

    analysis, _ = run(thrash_trace(), overrides=THIN)
    d = analysis.decisions
    m = d.md
    text = render_md(d, None, analysis.md, 80).plain
    rows = {int(mo.group(2)): mo.group(1) for mo in re.finditer(r"^  ([▸ ][D ][★ ])\s*(\d+) ", text, re.M)}
    assert sorted(rows) == [r.md for r in m.thesis.rows]
    assert [k for k, v in rows.items() if "★" in v] == [m.recommended_md]
    assert [k for k, v in rows.items() if "D" in v] == [m.default_md]
    assert m.recommended_md != m.default_md
    gain = m.timing.time(m.default_md).time_s / m.timing.time(m.recommended_md).time_s - 1
    assert f"gain {gain:+.0%}" in text
    lo, hi = m.gain_range
    assert lo <= gain <= hi and f"[{lo:+.0%}..{hi:+.0%}]" in text


def test_titles_do_not_wrap() -> None:
    from tuiprof.tui.panes.sm import render_sm

    _, analysis = fixed("spmv-u")
    for width in (36, 40, 60):
        for text in (render_md(analysis.decisions, None, 6, width), render_sm(analysis.decisions.sm, width, 16, "")):
            title = text.plain.split("\n")[0]
            assert len(title) <= width, (width, title)


def test_sm_pane_says_when_the_probes_ran_at_lower_occupancy() -> None:
    import dataclasses

    from tuiprof.tui.panes.sm import render_sm

    _, analysis = fixed("spmv-u")
    sm = analysis.decisions.sm
    caveat = "timed with the probes at 6 CTAs/SM (40 regs/thread); plain: 8 (28 regs)"
    plain = render_sm(sm, 80, 16, "").plain
    marked = render_sm(dataclasses.replace(sm, caveat=caveat), 80, 16, "").plain
    assert caveat not in plain and f"⚠ {caveat}" in marked
    assert len(marked.split("\n")) <= 16  # within the pane's height


# --- histogram -------------------------------------------------------------------------------------

def test_histogram_axis_spans_the_data_and_sigma_has_its_digits() -> None:
    """Before: 0.003-point spreads were drawn on an axis padded to ±0.5 points (one bar) with
    "std 0.00%"."""
    from tuiprof.model.latency import estimate

    rng = np.random.default_rng(0)
    v = 0.4312 + rng.normal(0, 0.00003, 64)
    s = Series("L1 read hit ratio", v, estimate(v, 0.0, 1.0), True, 64)
    text = render_histogram(s, 60, 18, "").plain
    bars = [line for line in text.splitlines() if "│" in line]
    columns = {i for line in bars for i, ch in enumerate(line) if ch in "▁▂▃▄▅▆▇█" and i > 6}
    assert len(columns) > 4                        # spread over the axis, not one bar
    lo, hi = re.findall(r"(\d+\.\d+)%", [line for line in text.splitlines() if "%" in line and "mean" not in line
                                         and "σ" not in line][0])[:2]
    assert float(hi) - float(lo) < 0.1             # the axis spans the data, not ±0.5 points
    sigma = re.search(r"σ (\d+\.\d+)%", text).group(1)
    assert float(sigma) == pytest.approx(100 * np.std(v, ddof=1), rel=0.05)


def test_measured_value_is_a_dashed_marker() -> None:
    """A measured (ncu) value is drawn as ┊ in the histogram, like Baghsorkhi12's dashed line."""
    from tuiprof.tui.metrics import series

    _, analysis = finished()
    s = series(analysis, "l1_read", None, {"l1_read_hit_rate": 47.5})
    assert s is not None and s.measured == pytest.approx(0.475)
    text = render_histogram(s, 60, 16, "").plain
    assert "┊ measured 47.5%" in text and text.count("┊") >= 2


# --- keys, help, palette, export ------------------------------------------------------------------

async def test_help_lists_every_key_and_scrolls() -> None:
    app = make_app()
    async with app.run_test(size=(100, 24)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        listed = " ".join(what for _, rows in app.screen.groups for _, what in rows)
        for a in ACTIONS:
            assert a.help in listed, a.id
        view = app.screen.query_one(VerticalScroll)
        assert view.max_scroll_y > 0
        await pilot.press("pagedown")
        assert view.scroll_y > 0                     # before: the help could not be scrolled
        await pilot.press("end")
        assert view.scroll_y == view.max_scroll_y
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_bindings_help_and_palette_come_from_one_registry() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        assert [b.id for b in app.BINDINGS] == [a.id for a in ACTIONS]
        names = [name for name, _, _ in app.palette_commands()]
        assert "Rerun with a new seed" in names and "Choose the MD" in names
        assert "Cancel the run" not in names          # check_action: nothing runs, nothing to cancel
        assert app.check_action("cancel_run", ()) is None and app.check_action("export", ()) is True
        app.start_run(dataclasses.replace(CONFIG, trials=4096, tolerance=None))
        assert app.check_action("cancel_run", ()) is True
        assert "Cancel the run" in [name for name, _, _ in app.palette_commands()]
        app.action_cancel_run()
        await wait_for(pilot, lambda: idle(app))


async def test_export_during_a_run_says_it_is_partial(tmp_path: Path) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("e")
        assert isinstance(app.screen, ExportScreen)
        done = tmp_path / "report.json"
        app.screen.query_one(Input).value = str(done)
        await pilot.press("enter")
        await wait_for(pilot, lambda: done.exists())
        doc = json.loads(done.read_text())
        assert doc["analysis"]["trials"] == 4 and doc["run"]["md"] == app.session.md and doc["partial"] is False
        app.start_run(dataclasses.replace(CONFIG, trials=4096, tolerance=None))
        await wait_for(pilot, lambda: app.trials_done >= 1 and not app.stale)
        partial = tmp_path / "partial.txt"
        app.export(partial)
        await wait_for(pilot, lambda: partial.exists())
        await pilot.pause()
        assert partial.read_text().startswith("PARTIAL REPORT: written while the run was in progress")
        assert any("partial report" in str(n.message) for n in app._notifications)
        app.action_cancel_run()
        await wait_for(pilot, lambda: idle(app))


async def test_compiling_is_said_only_when_the_simulator_compiles() -> None:
    """Before: "(the first run compiles it)" on every run, compiled or not."""
    app = make_app()
    async with app.run_test(size=(160, 50)):
        app.phase = "preparing"
        app.on_compiling(Compiling(app.generation, False))
        assert "preparing the simulator" in status_text(app) and "compil" not in status_text(app)
        app.on_compiling(Compiling(app.generation, True))
        assert "compiling the simulator" in status_text(app)
        app.on_compiling(Compiling(app.generation - 1, False))   # a cancelled run's word is dropped
        assert "compiling the simulator" in status_text(app)


def test_a_session_knows_whether_it_compiles(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    session, _ = finished()                          # this process has run its kernel
    assert session.compiles() is False
    code = ("from tuiprof.session import RunConfig, Session; "
            "print(Session.open('vecadd', RunConfig(trials=2, sweep=False)).compiles())")
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)})
    assert fresh.stdout.split()[-1] == "True", fresh.stderr      # an empty kernel cache: it will compile


async def test_recollect_explains_why_it_is_unavailable() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("R")
        await pilot.pause()
        assert any("recollects from a .cu source" in str(n.message) for n in app._notifications)


async def test_command_palette_has_tuiprof_commands() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
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
    assert session.cancelled and app.return_code == 0


def test_exit_does_not_wait_for_trials_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    """After the app closes, the process ends at once even with a trial in flight (before,
    Python's exit joined the trial pool's threads: seconds during an MD sweep)."""
    import tuiprof.tui.signals as signals
    from tuiprof.tui import run_app

    ended: list[int] = []

    def finish(status: int) -> None:
        ended.append(status)
        raise SystemExit(status)

    stop = threading.Event()
    worker = threading.Thread(target=stop.wait, name="tuiprof-trial_0", daemon=True)
    worker.start()
    monkeypatch.setattr(signals, "finish", finish)
    monkeypatch.setattr(TuiprofApp, "run", lambda self: 0)
    try:
        with pytest.raises(SystemExit):
            run_app(DEMO, CONFIG)
        assert ended == [0] and worker.is_alive()
    finally:
        stop.set()
        worker.join()


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


def _colours(app: TuiprofApp) -> set[str]:
    """Every colour the app would send to the terminal: its screen through its line filters."""
    from rich.segment import Segment

    out = set()
    for strip in app.screen._compositor.render_strips():
        segments = list(strip)
        for f in app.get_line_filters():
            segments = f.apply(segments, app.screen.styles.background)
        for seg in Segment.filter_control(segments):
            for c in (seg.style.color, seg.style.bgcolor) if seg.style else ():
                if c is not None and not c.is_default:
                    out.add(c.name)
    return out


async def test_no_color_sends_no_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    """NO_COLOR: no colour at all (before: Textual's greys, 38;5;231 and the like), heat as a
    glyph and a rank, the cursor in reverse video."""
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(theme="tuiprof-high-contrast")
    async with app.run_test(size=(120, 40)):
        assert app.no_color
        assert {"tuiprof-dark", "tuiprof-light", "tuiprof-high-contrast", "textual-dark"} <= set(app.available_themes)
        assert app.theme == "tuiprof-high-contrast"
        text = screen_text(app)
        assert "#1" in text and "#2" in text          # heat is a rank, not only a colour
        assert _colours(app) == set()


async def test_themes_change_the_colours() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        dark = _colours(app)
        app.theme = "tuiprof-light"
        await pilot.pause()
        light = _colours(app)
        assert dark and light and dark != light       # before: the switch was made and nothing checked


def test_rows_give_each_op_on_a_line_its_own_row() -> None:
    session, _ = finished()
    ops = session.trace.ops
    rows = build_rows(len(session.trace.source_text().splitlines()), ops)
    assert sorted(r.op for r in rows if r.op is not None) == sorted(o.id for o in ops)
    shared = [r for r in rows if not r.first]
    assert shared and all(any(o.line == r.line for o in ops) for r in shared)


def test_cli_once_and_not_a_tty_print_the_report(tmp_path: Path) -> None:
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
    (tmp_path / "kernel.cu").write_text('extern "C" __global__ void k(float *a) { a[threadIdx.x] = 1.0f; }\n')
    r = subprocess.run([sys.executable, "-m", "tuiprof", str(tmp_path / "kernel.cu")], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "no launch script" in r.stderr and "Traceback" not in r.stderr


def test_tui_seams_are_typed() -> None:
    """No `Any` between the UI and the core (session events, panes, decisions): the UI imports
    the core's types under TYPE_CHECKING instead."""
    root = Path(__file__).resolve().parents[2] / "tuiprof"
    for path in [*sorted((root / "tui").rglob("*.py")), root / "session.py"]:
        src = path.read_text()
        assert not re.search(r"\bAny\b", src), path


async def test_recollect_recompiles_an_edited_source_and_keeps_the_line(tmp_path: Path) -> None:
    body = "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    y[i] = 2.0f * x[i];\n"
    src = tmp_path / "k.cu"
    src.write_text('extern "C" __global__ void k(float *y, const float *x)\n{\n' + body + "}\n")
    (tmp_path / "k_launch.py").write_text(
        "import numpy as np\nARCH = 'v100'\ndef setup(dev):\n    x = dev.to_device(np.ones(256, np.float32))\n"
        "    y = dev.zeros(256, np.float32)\n    dev.launch('k', 4, 64, (y, x))\n")
    app = TuiprofApp(str(src), RunConfig(trials=2, sweep=False), show_timing=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.trace is not None or app.phase == "failed")
        assert app.trace is not None, app.error
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


async def test_a_shared_op_shows_its_bank_conflicts_not_cache_ratios() -> None:
    """Issue 20 part 4: cyclic reduction's shared loads conflict (up to 16-way); the gutter says
    ``shm`` with its wavefronts per request, the histogram draws requests by wavefronts (the same
    in every trial), and the drill-down speaks of banks, never of H1, H2 or the L2."""
    session, analysis = fixed("cr")
    conflicted = next(s for s in analysis.ops if s.passes is not None and s.passes.extra > 1)
    app = fixed_app("cr")
    async with app.run_test(size=(160, 48)) as pilot:
        await patterns_in(pilot)
        view = app.query_one(SourceView)
        view.go_to_op(conflicted.op.id)
        await pilot.pause()
        row = next(line for line in lines_of(view) if f"{conflicted.passes.passes:>2.0f}" in line and "shm" in line)
        assert "shm" in row
        hist = app.query_one("#hist", HistogramView)
        assert hist.shared is conflicted.passes and "wavefronts per request" in screen_text(app)
        await pilot.press("enter")
        assert isinstance(app.screen, DrillScreen)
        await pilot.pause()
        text = " ".join(screen_text(app).split())
        for needle in ("Shared memory: bank conflicts", "wavefronts per request", "Bank conflicts:", "Pad the array"):
            assert needle in text, needle
        for absent in ("H1 (L1 hit ratio)", "Stores go to L2", "L2 hit", "DRAM"):
            assert absent not in text, absent


async def test_the_first_launch_warms_up_the_other_kernels_in_the_background(monkeypatch) -> None:
    """Once the first trial has landed (this GPU's kernels are compiled), a launch that may warm up
    starts `tuiprof warmup --progress` beside the run when kernels are missing, and the status line
    shows its steps; quitting ends it."""
    import sys

    from tuiprof import warmup

    monkeypatch.setattr(warmup, "needed", lambda step: step.target == "v100")
    script = ("import time\nprint('warmup: compiling the simulator for v100 (1 of 1)', flush=True)\n"
              "time.sleep(30)\n")
    monkeypatch.setattr(warmup, "background_command", lambda: [sys.executable, "-c", script])
    app = make_app(warm_up=True)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("r")  # a run: its first trial starts the warm-up
        await wait_for(pilot, lambda: app.warming is not None)
        assert app.warming == "warmup: compiling the simulator for v100 (1 of 1)"
        assert "in the background: compiling the simulator for v100 (1 of 1)" in str(app.query_one("StatusBar").render())
        proc = app._warmup
        app.cancel_everything()
        assert proc.wait(timeout=10) != 0  # terminated, not left running


async def test_messages_that_arrive_while_the_app_shuts_down_are_dropped() -> None:
    # CI, twice: Textual removes the screens' widgets while the app still dispatches what was
    # queued (the warm-up's last line, a recollected trace): NoMatches 'StatusBar' / 'SourceView'
    # failed the exit. Here each handler runs once the widgets are gone, as such a late one does.
    from textual import events
    from textual.geometry import Size

    from tuiprof.session import Finished
    from tuiprof.tui.messages import RunEvent, TraceLoaded, WarmupProgress

    app = fixed_app("transpose-naive")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: pilot.app.analysis is not None)
    session, analysis = app.session, app.analysis
    assert session is not None and analysis is not None and not app.is_running
    app.on_warmup_progress(WarmupProgress(None))
    app.on_trace_loaded(TraceLoaded(session))
    app.on_compiling(Compiling(app.generation, False))
    app.on_run_event(RunEvent(app.generation, Finished(analysis)))
    app.on_resize(events.Resize(Size(80, 24), Size(80, 24)))
    app._tick()


def test_a_warm_up_asked_for_after_quitting_never_starts(monkeypatch) -> None:
    """The warm-up's thread may reach its start after `q` ended everything: it must not start one
    then (the UI would exit and leave it compiling for minutes)."""
    from tuiprof import warmup

    started: list[bool] = []

    def command() -> list[str]:
        started.append(True)
        return ["true"]

    monkeypatch.setattr(warmup, "needed", lambda step: True)
    monkeypatch.setattr(warmup, "background_command", command)
    app = make_app(warm_up=True)
    app.cancel_everything()
    app._warm_up_in_background()
    assert started == [] and app._warmup is None


async def test_a_drill_down_built_ahead_survives_the_app_closing_while_it_mounts() -> None:
    # The app builds the drill-down off-screen at a quiet moment; quitting then (q, or a run_test
    # ending) tore its widgets down before its on_mount filled them: NoMatches '#hist-x' on exit.
    for _ in range(3):
        app = fixed_app("transpose-naive")
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: pilot.app.analysis is not None)
            app._get_screen(app._install_drill(0))
            app.exit()


async def test_a_templated_kernel_is_named_as_its_source_writes_it(tmp_path: Path) -> None:
    """The status line, a pinned baseline's label and the export's file name show `sum_vec4<256>`,
    not the symbol `_Z8sum_vec4ILi256EEvPK6float4Pfi`."""
    from tests.support.factories import make_trace
    from tuiprof.session import Session
    from tuiprof.trace.io import save_trace

    t = make_trace([list(range(0, 128, 4))])
    symbol = "_Z8sum_vec4ILi256EEvPK6float4Pfi"
    path = save_trace(dataclasses.replace(t, launch=dataclasses.replace(t.launch, kernel=symbol)),
                      tmp_path / "cpp.tptrace")
    session = Session.open(str(path), dataclasses.replace(CONFIG, arch="gtx480"))
    app = TuiprofApp(session=session, analysis=session.run(), show_timing=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        status = str(app.query_one("StatusBar").render())
        assert "sum_vec4<256>" in status and "_Z8" not in status, status
        assert app.export_name().startswith("tuiprof-sum_vec4_256_-") and "_Z8" not in app.export_name()
        await pilot.press("b")  # pin this run as the baseline
        assert app.baseline is not None and app.baseline.label.startswith("sum_vec4<256> · ")
