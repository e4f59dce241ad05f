"""The baseline in the UI (issue 26): `b` pins the run shown, and the gutter, the line under the
code, the drill-down, the histogram and the model pane then show changes against it, across an MD
change, a rerun and `R` after an edit of the source; a run made before in the session is shown
again instead of simulated; `B` clears the baseline. Pilot tests at 80x24 and 120x40 (the
pictures are in tests/tui/test_tui_snapshots.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("textual")

from tests.support.fixed_analysis import fixed, fixed_app  # noqa: E402
from tests.support.tui_support import CONFIG, DEMO, screen_text, wait_for  # noqa: E402
from tuiprof.session import RunConfig  # noqa: E402
from tuiprof.tui.app import TuiprofApp  # noqa: E402
from tuiprof.tui.panes.histogram import HistogramView  # noqa: E402
from tuiprof.tui.panes.md import MdPane  # noqa: E402
from tuiprof.tui.panes.source import SourceView  # noqa: E402
from tuiprof.tui.screens.drill import DrillScreen  # noqa: E402


def idle(app: TuiprofApp) -> bool:
    return app.phase in ("done", "failed", "cancelled")


def gutter(view: SourceView, op: int) -> str:
    """The gutter of op `op`'s row as drawn."""
    view.go_to_op(op)
    y = view.row_of[op] - view.top + 1
    return "".join(s.text for s in view.render_line(y))[: view.gutter_width]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_pinning_shows_changes_in_every_view_and_b_clears_them(size: tuple[int, int]) -> None:
    app = fixed_app("spmv-u")
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.patterns is not None)
        view = app.query_one(SourceView)
        plain = view.gutter_width
        await pilot.press("b")  # the run shown against itself: no change anywhere
        assert app.baseline is not None and view.gutter_width == plain + 6
        hot = view.loads_by_cost()[0]
        assert gutter(view, hot).rstrip("│").endswith("+0 ") and "ΔX" in "".join(s.text for s in view.render_line(0))
        # a baseline at MD 2 (fixed data): the op's X rose, significantly, by what Welch's test says
        session, analysis = fixed("spmv-u", md=2)
        app.pin_baseline(session, analysis)
        await pilot.pause()
        d = app._against.op(hot)["x"]
        assert d.significant and d.delta == pytest.approx(analysis_x(app, hot) - d.base)
        assert gutter(view, hot).rstrip("│").endswith(f"{d.delta:+.0f}*")
        assert "vs baseline X" in view.detail().plain and "Δ vs tesla-c2050 · MD 2 · seed 0" in screen_text(app) \
            or size[0] < 100  # the status bar is cut at 80 columns
        assert "vs baseline" in app.query_one(MdPane).render().plain
        hist = app.query_one(HistogramView)
        assert hist.series is not None and hist.series.baseline is not None and hist.series.baseline.size == 8
        await pilot.press("enter")
        assert isinstance(app.screen, DrillScreen)
        await pilot.pause()
        assert "Against the baseline" in screen_text(app) or size[1] < 30
        await pilot.press("escape", "B")
        assert app.baseline is None and view.gutter_width == plain
        assert app.query_one(HistogramView).series.baseline is None


def analysis_x(app: TuiprofApp, op: int) -> float:
    return app.analysis.ops[op].x.mean


async def test_baseline_across_an_md_change_and_a_rerun_and_runs_shown_again() -> None:
    from tuiprof.sim.montecarlo import MonteCarlo

    app = TuiprofApp(DEMO, replace(CONFIG, sweep=False), show_timing=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.phase == "done")
        default_md = app.session.md
        await pilot.press("b")
        assert app.baseline is not None and f"MD {default_md}" in app.baseline.short
        await pilot.press("m", "home", "enter")  # MD 1
        await wait_for(pilot, lambda: idle(app) and app.analysis.md == 1 and not app.stale)
        view = app.query_one(SourceView)
        assert app._against is not None and all(app._against.op(op) is not None for op in view.ops)
        assert "vs baseline" in app.query_one(MdPane).render().plain
        at_md1 = app.session
        await pilot.press("r")  # seed + 1, still against the baseline
        await wait_for(pilot, lambda: idle(app) and app.session is not at_md1 and not app.stale)
        assert app.baseline is not None and app._against.analysis is app.analysis
        ran: list[int] = []
        real = MonteCarlo.run_one

        def counted(self: MonteCarlo, index: int):
            ran.append(index)
            return real(self, index)

        MonteCarlo.run_one = counted  # type: ignore[method-assign]
        try:  # back to MD 1 at seed 0: made before in this session, so shown again, not simulated
            assert app.start_run(replace(app.config, seed=CONFIG.seed))
            await wait_for(pilot, lambda: idle(app) and app.session is at_md1)
        finally:
            MonteCarlo.run_one = real  # type: ignore[method-assign]
        assert ran == [] and app.analysis is at_md1.analysis
        await pilot.press("B")
        assert app.baseline is None and app._against is None


async def test_baseline_survives_a_recollect_after_an_edit(tmp_path: Path) -> None:
    """Lines inserted and a variable renamed: after R the edited kernel's ops are still compared
    with their counterparts in the baseline; the load the edit adds is new."""
    src = tmp_path / "k.cu"
    src.write_text('extern "C" __global__ void k(float *y, const float *x)\n{\n'
                   "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    y[i] = 2.0f * x[i];\n}\n")
    (tmp_path / "k_launch.py").write_text(
        "import numpy as np\nARCH = 'v100'\ndef setup(dev):\n    x = dev.to_device(np.ones(512, np.float32))\n"
        "    y = dev.zeros(256, np.float32)\n    dev.launch('k', 4, 64, (y, x))\n")
    app = TuiprofApp(str(src), RunConfig(trials=4, sweep=False), show_timing=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.phase == "done" or app.phase == "failed", timeout=240)
        assert app.phase == "done", app.error
        first = app.trace
        await pilot.press("b")
        src.write_text('// an edit: two lines above the kernel\n\nextern "C" __global__ void k(float *y, const float *x)\n'
                       "{\n    int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
                       "    y[t] = 2.0f * x[t] + x[t + 256];\n}\n")
        await pilot.press("R")
        await wait_for(pilot, lambda: app.trace is not first and idle(app) and not app.stale, timeout=180)
        labels = {o.id: o.label for o in app.trace.ops}
        assert sorted(labels.values()) == ["x[t + 256]", "x[t]", "y[t]"]
        view = app.query_one(SourceView)
        for op, label in labels.items():
            found = app._against.op(op)
            assert (found is None) == (label == "x[t + 256]"), label
        new = next(op for op, label in labels.items() if label == "x[t + 256]")
        assert gutter(view, new).rstrip("│").endswith("new")


async def test_no_baseline_figures_for_an_absent_cache_level() -> None:
    """On a gtx480 (no L2, issue 25) the baseline's views leave H2 and the L2 out, as the rest of
    the UI does; the L1's figures stay."""
    from tuiprof.tui import delta

    app = fixed_app("spmv-u", arch="gtx480")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.patterns is not None)
        app.pin_baseline(*fixed("spmv-u", arch="gtx480", md=2))
        await pilot.pause()
        hot = app.query_one(SourceView).loads_by_cost()[0]
        drill = " ".join(c.plain for c in delta.drill_lines(app.baseline, app._against.op(hot), app.levels))
        assert "H1 " in drill and "X " in drill and "H2 " not in drill
        ratios = [line for line in app.query_one(MdPane).render().plain.splitlines() if line.startswith("L1 ")]
        assert len(ratios) == 1 and "→" in ratios[0] and "L2 " not in ratios[0], ratios
        assert "vs baseline X" in app.query_one(SourceView).detail().plain


async def test_baseline_across_a_what_if_and_an_arch_change() -> None:
    """The pinned run stays the reference when the GPU model changes: a what-if (half the L1) and
    another preset both show their changes against it (each op of the new run is matched)."""
    app = TuiprofApp(DEMO, replace(CONFIG, sweep=False), show_timing=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.phase == "done")
        await pilot.press("b")
        pinned = app.baseline
        l1 = app.session.arch.l1.size
        for config, arch, size in ((replace(app.config, overrides={"l1.size": f"{l1 // 2 >> 10}KiB"}), None, l1 // 2),
                                   (replace(app.config, arch="a100", overrides={}), "a100", None)):
            before = app.session
            assert app.start_run(config)
            await wait_for(pilot, lambda before=before: idle(app) and app.session is not before and not app.stale)
            view = app.query_one(SourceView)
            assert app.baseline is pinned and app._against is not None
            assert app._against.analysis is app.analysis
            assert all(app._against.op(op) is not None for op in view.ops)
            assert "vs baseline" in app.query_one(MdPane).render().plain
            assert arch is None or app.session.arch.name == arch
            assert size is None or app.session.arch.l1.size == size
