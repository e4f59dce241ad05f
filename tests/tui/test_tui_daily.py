"""A UI a GPU developer keeps open all day (issue 25): resizes, a readable cursor line, a status
bar and a footer that keep what matters, honest phases, the drill-down's search, 80x24, one
rendering per number, an arch without an L2, and the small things users hit. Pilot tests at
several sizes on fixed data (`tests.support.fixed_analysis`); the real-terminal side is in
`tests/tui/test_tui_tmux.py`."""

from __future__ import annotations

import re

import pytest

from tests.support.fixed_analysis import fixed_app
from tests.support.tui_support import screen_text, wait_for

pytest.importorskip("textual")

from rich.color import Color as RichColor  # noqa: E402
from textual.highlight import highlight  # noqa: E402

from tuiprof.tui.app import TuiprofApp  # noqa: E402
from tuiprof.tui.panes.source import SourceView  # noqa: E402
from tuiprof.tui.themes import load_themes  # noqa: E402

SIZES = [(80, 24), (120, 40), (200, 60)]


async def patterns_in(pilot) -> None:
    await wait_for(pilot, lambda: pilot.app.patterns is not None)
    await pilot.pause()


def layout(app: TuiprofApp) -> tuple[bool, int, int, int]:
    """What a resize must get right: split or tabs, the source's width and height, the code area."""
    view = app.query_one(SourceView)
    return app.split, view.size.width, view.size.height, view.code_width


# --- 1. resize ------------------------------------------------------------------------------------

async def test_layout_follows_each_resize_as_a_fresh_start_would() -> None:
    """Before: one resize late (120x40 -> 200x60 kept the tabs; 100x30 then left a 2-cell code
    area, 80x24 one cell)."""
    fresh: dict[tuple[int, int], tuple[bool, int, int, int]] = {}
    for size in {(200, 60), (198, 60), (100, 30), (80, 24), (120, 40)}:
        app = fixed_app("bfs")
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            fresh[size] = layout(app)
    app = fixed_app("bfs")
    async with app.run_test(size=(120, 40)) as pilot:
        for size in [(200, 60), (198, 60), (100, 30), (200, 60), (80, 24), (120, 40)]:
            await pilot.resize_terminal(*size)
            await pilot.pause()
            assert layout(app) == fresh[size], size
    assert fresh[(200, 60)][0] and not fresh[(80, 24)][0]


# --- 2. the cursor line ----------------------------------------------------------------------------

def luminance(c: RichColor) -> float:
    """WCAG 2 relative luminance of a truecolor."""
    def channel(v: int) -> float:
        x = v / 255
        return x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4
    r, g, b = c.get_truecolor()
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(a: RichColor, b: RichColor) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


TOKENS = ('#include <x.h>\n__global__ void k(const float *in, int n) { if (n > 0x10) in[n] = 1.5f; '
          'return; /* c */ "s"; // c\n')
"""One line of every token class the CUDA lexer gives (preprocessor, keywords, types, names,
numbers, strings, comments, operators, punctuation) for the cursor row."""


@pytest.mark.parametrize("theme", [t.name for t in load_themes()])
async def test_the_cursor_line_has_its_own_readable_foreground(theme: str) -> None:
    """Every cell of the cursor row (gutter, rank glyph, every token class) is at least 4.5:1
    against the cursor's background (WCAG AA), focused and not. Before: identifiers and the rank
    glyph kept their syntax colours, 1.01-1.76:1."""
    app = fixed_app("spmv-u", theme=theme)
    async with app.run_test(size=(120, 40)) as pilot:
        await patterns_in(pilot)
        view = app.query_one(SourceView)
        rows = [view.cursor - 1, view.cursor]              # L1's row (rank glyph, figures) and the one above
        lines = highlight(TOKENS, language="cuda").split("\n")
        for row, text in zip(rows, lines):
            view.code[view.rows[row].line - 1] = text
        for focused in (True, False):
            if not focused:
                await pilot.press("slash")          # the search field takes the focus
            for row in rows:
                view.cursor = row
                await pilot.pause()
                assert view.has_focus is focused
                segments = [s for s in view.render_line(view.cursor - view.top + 1) if s.text.strip()]
                assert len(segments) > 3
                for seg in segments:
                    ratio = contrast(seg.style.color, seg.style.bgcolor)
                    assert ratio >= 4.5, (theme, focused, seg.text, ratio)


async def test_the_cursor_line_is_reverse_video_under_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    """README: "the cursor is reverse video" under NO_COLOR. Before: only bold, like many parts of
    every line."""
    monkeypatch.setenv("NO_COLOR", "1")
    app = fixed_app("spmv-u")
    async with app.run_test(size=(120, 40)) as pilot:
        await patterns_in(pilot)
        view = app.query_one(SourceView)
        cursor = list(view.render_line(view.cursor - view.top + 1))
        other = list(view.render_line(view.cursor - view.top + 2))
        assert all(s.style.reverse for s in cursor)
        assert not any(s.style.reverse for s in other)


# --- 3. the status bar and the footer ---------------------------------------------------------------

def test_status_fields_drop_by_priority_and_leave_no_dangling_separator() -> None:
    from tuiprof.tui.status import Field, fit

    fields = [Field((("tuiprof bfs", ""),), 8, 0), Field((("✓ 64/64 trials", ""),), 0, 1),
              Field((("L1 43.1% L2 12.0%", ""),), 4, 2), Field((("h100*", ""),), 1, 3),
              Field((("MD 4", ""),), 2, 3), Field((("bfs_expand", ""),), 3, 3), Field((("seed 0", ""),), 5, 3)]
    assert fit(fields, 200).plain == "tuiprof bfs │ ✓ 64/64 trials │ L1 43.1% L2 12.0% │ h100* · MD 4 · bfs_expand · seed 0"
    assert fit(fields, 62).plain == "✓ 64/64 trials │ L1 43.1% L2 12.0% │ h100* · MD 4 · bfs_expand"
    assert fit(fields, 61).plain == "✓ 64/64 trials │ h100* · MD 4 · bfs_expand"
    assert fit(fields, 30).plain == "✓ 64/64 trials │ h100* · MD 4"
    assert fit(fields, 10).plain == "✓ 64/64 t…"


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_status_and_footer_keep_what_matters_at_every_width(size: tuple[int, int]) -> None:
    """Before: at 80 columns the arch, MD and the rest went once a run finished; at 120 the line
    ended in a dangling "·" without the kernel's name; the footer cut `? Help` and `q Quit`."""
    app = fixed_app("bfs")
    async with app.run_test(size=size) as pilot:
        await patterns_in(pilot)
        s = app.session
        await wait_for(pilot, lambda: "? Help" in screen_text(app).splitlines()[-1])  # the footer recomposes
        lines = screen_text(app).splitlines()
        status, footer = lines[0].strip(), lines[-1]
        for needle in ("✓ 8/8 trials", s.arch.name, f"MD {s.md}", s.trace.launch.kernel):
            assert needle in status, (needle, status)
        assert not re.search(r"[·│]$", status)
        assert "? Help" in footer and "q Quit" in footer, footer
        await pilot.press("n", "enter")
        # the footer recomposes when the bindings change: wait for it rather than read it mid-way
        await wait_for(pilot, lambda: "? Help" in screen_text(app).splitlines()[-1])
        footer = screen_text(app).splitlines()[-1]
        assert "? Help" in footer and "q Quit" in footer, footer


# --- 11. small things users hit ------------------------------------------------------------------------

async def test_the_line_counter_counts_source_lines_not_rows() -> None:
    """stencil7 has two ops on one line (two rows); before, `8-41/41` for a 39-line file."""
    app = fixed_app("stencil7")
    async with app.run_test(size=(120, 40)) as pilot:
        await patterns_in(pilot)
        view = app.query_one(SourceView)
        lines = len(view.code)                        # one highlighted line per source line
        assert len(view.rows) > lines
        shown = view.rows[view.top: view.top + view.body_height]
        header = "".join(s.text for s in view.render_line(0))
        assert f"  {shown[0].line}–{shown[-1].line}/{lines}" in header, header


async def test_export_edits_the_name_and_says_where_it_writes() -> None:
    """Before: the whole name was selected (backspace erased it) and the folder was not shown."""
    from pathlib import Path

    from textual.widgets import Input

    app = fixed_app("spmv-u")
    async with app.run_test(size=(120, 40)) as pilot:
        await patterns_in(pilot)
        await pilot.press("e")
        name = app.export_name()
        await pilot.press("backspace", "backspace", "backspace", "m", "d")
        assert app.screen.query_one(Input).value == name[:-3] + "md"
        assert str(Path.cwd()) in " ".join(screen_text(app).split())
        await pilot.press("escape")


async def test_n_steps_from_the_load_under_the_cursor() -> None:
    """The first analysis puts the cursor on L1; before, the first n went to L1 again (nothing)."""
    app = fixed_app("spmv-u")
    async with app.run_test(size=(120, 40)) as pilot:
        await patterns_in(pilot)
        view = app.query_one(SourceView)
        ranks = app.analysis.ranks()
        assert ranks[view.current_op] == "#1"
        await pilot.press("n")
        assert ranks[view.current_op] == "#2"
        await pilot.press("N", "N")
        loads = view.loads_by_cost()
        assert view.current_op == loads[-1]


async def test_n_in_the_drill_down_moves_the_source_cursor_along() -> None:
    """Before: esc returned to the op the drill-down was opened on."""
    app = fixed_app("spmv-u")
    async with app.run_test(size=(120, 40)) as pilot:
        await patterns_in(pilot)
        await pilot.press("enter", "n", "n")
        shown = app.screen.op_id
        assert app.analysis.ranks()[shown] == "#3"
        await pilot.press("escape")
        assert app.query_one(SourceView).current_op == shown


async def test_esc_in_search_puts_the_cursor_back_and_enter_keeps_the_match() -> None:
    app = fixed_app("spmv-u")
    async with app.run_test(size=(120, 40)) as pilot:
        await patterns_in(pilot)
        view = app.query_one(SourceView)
        start = view.cursor
        await pilot.press("slash", *"x[myi]")
        assert view.cursor != start
        await pilot.press("escape")
        assert view.cursor == start                     # before: left on the match
        await pilot.press("slash", *"x[myi]", "enter", "escape")
        assert view.cursor != start and "x[myi]" in view.code[view.current_line - 1].plain


async def test_the_palettes_keys_is_the_help_screen_and_esc_closes_it() -> None:
    """Before: the palette's `Keys` opened Textual's keys panel, which esc did not close."""
    from tuiprof.tui.screens.modals import HelpScreen

    app = fixed_app("spmv-u")
    async with app.run_test(size=(120, 40)) as pilot:
        await patterns_in(pilot)
        assert "Keys" not in [c.title for c in app.get_system_commands(app.screen)]
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"keys")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen) and not app.screen.query("HelpPanel")
        app.action_show_help_panel()                   # Textual's own way in (F1 in some keymaps)
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)


def test_less_precision_never_goes_below_the_early_stop_minimum() -> None:
    """Before: `t` twice from 64 trials gave 16, below the 20 a run needs before it can converge."""
    from tuiprof.session import RunConfig
    from tuiprof.tui.app import precision_step

    c = RunConfig(trials=64, tolerance=0.005)
    for _ in range(3):
        c = precision_step(c, 16, False)
        assert c.trials >= 20


@pytest.mark.parametrize("theme", [t.name for t in load_themes()])
async def test_stale_figures_are_dimmer_than_fresh_ones(theme: str) -> None:
    """A rerun shows the previous results dimmed; before, `$text-muted` spans drew the full
    contrast colour (white, 231) where fresh figures are the foreground (251)."""
    app = fixed_app("spmv-u", theme=theme)
    async with app.run_test(size=(120, 40)) as pilot:
        await patterns_in(pilot)
        view = app.query_one(SourceView)

        def figures() -> float:
            segments = [s for s in view.render_line(row) if any(c.isdigit() for c in s.text)]
            return max(contrast(s.style.color, s.style.bgcolor) for s in segments)

        view.cursor = 0
        row = next(y for y in range(1, view.body_height)
                   if view.rows[view.top + y - 1].op in view.stats and view.top + y - 1 != view.cursor)
        fresh = figures()
        view.set_analysis(app.analysis, stale=True)
        stale = figures()
        assert stale < fresh, (theme, stale, fresh)


async def test_md_chooser_and_model_pane_name_the_two_predictions_alike() -> None:
    """Before: the chooser said `thesis P ... timing P`, the pane `time P rule P` (its "time" a
    throughput ratio): both now say timing, then thesis, and that both are throughputs."""
    from textual.widgets import OptionList

    from tuiprof.tui.panes.md import MdPane

    app = fixed_app("spmv-u")
    async with app.run_test(size=(160, 50)) as pilot:
        await patterns_in(pilot)
        pane = app.query_one(MdPane).render().plain
        assert "time P" not in pane and "rule P" not in pane
        assert re.search(r"MD +miss +L2 +DRAM/CTA +timing +thesis", pane) and "timing, thesis: throughput vs MD 1" in pane
        await pilot.press("m")
        option = str(app.screen.query_one(OptionList).get_option_at_index(0).prompt)
        assert re.search(r"timing +[\d.]+ +thesis +[\d.]+", option), option
        assert "timing, thesis: throughput vs MD 1" in " ".join(screen_text(app).split())


# --- 8. 80x24 -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("width", [20, 24, 30, 40, 60])
def test_histogram_axis_labels_never_run_together(width: int) -> None:
    """Before: `691.8 cyc700.6 c…` in the drill-down's narrow histograms."""
    import numpy as np

    from tuiprof.model.latency import estimate
    from tuiprof.tui.panes.histogram import Series, render_histogram

    v = 691.8 + np.random.default_rng(1).normal(0, 3, 32)
    for ratio, values in ((False, v), (True, v / 1000)):
        s = Series("X", values, estimate(values, 0.0, 1e9), ratio, 32)
        lines = render_histogram(s, width, 12, "").plain.split("\n")
        axis = lines[lines.index(next(x for x in lines if "└" in x)) + 2]
        value = r"\d+(\.\d+)?( cyc|%)?"
        assert re.fullmatch(rf"\s*{value}(\s+{value})?\s*", axis), (width, axis)


async def test_help_fits_80x24_with_its_descriptions_in_their_column() -> None:
    """Before: the help box was wider than the terminal (its CSS matched nothing), cut at the
    right edge, and wrapped lines restarted at column 0."""
    from textual.containers import Vertical

    from tuiprof.tui.screens.modals import KEY_COLUMN, HelpScreen

    app = fixed_app("spmv-u")
    async with app.run_test(size=(80, 24)) as pilot:
        await patterns_in(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        box = app.screen.query_one(Vertical).region
        assert box.x >= 0 and box.right <= 80 and box.y >= 0 and box.bottom <= 24
        text = screen_text(app)
        assert "esc closes" in " ".join(text.split())
        rows = [line for line in text.splitlines() if line.startswith("│ ")]
        key_rows = [r for r in rows if re.match(r"│   \S", r)]
        assert key_rows and all(r[2 + KEY_COLUMN:][:1] != " " for r in key_rows)
        wrapped = [r for r in rows if r.startswith("│" + " " * (KEY_COLUMN + 1)) and r[1:].strip()]
        assert wrapped                                   # continuation lines, in the description column
        assert not [r for r in rows if re.match(r"│ [a-z(]", r) and not re.match(r"│ (tuiprof keys|↑↓|esc)", r)]


async def test_the_arch_picker_fits_24_rows() -> None:
    """Before: its hint and its button were cut at 24 rows."""
    app = fixed_app("spmv-u")
    async with app.run_test(size=(80, 24)) as pilot:
        await patterns_in(pilot)
        await pilot.press("a")
        await pilot.pause()
        text = screen_text(app)
        assert "Apply and rerun" in text and "esc cancels" in text and "L2 associativity" in text


async def test_the_drill_down_leaves_room_for_its_details_at_80x24() -> None:
    """Before: 15 rows of histograms and 5 for the breakdown, coalescing, pattern and advice."""
    from textual.containers import VerticalScroll

    app = fixed_app("spmv-u")
    async with app.run_test(size=(80, 24)) as pilot:
        await patterns_in(pilot)
        await pilot.press("enter")
        await pilot.pause()
        hists = app.screen.query_one("#drill-hists").region.height
        details = app.screen.query_one(VerticalScroll).region.height
        assert 9 <= hists <= 11 and details >= 9, (hists, details)
    app = fixed_app("spmv-u")
    async with app.run_test(size=(120, 50)) as pilot:
        await patterns_in(pilot)
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen.query_one("#drill-hists").region.height == 15


# --- 7. search from the drill-down ----------------------------------------------------------------------

async def test_slash_in_the_drill_down_searches_the_source() -> None:
    """Before: `/` was listed in the drill-down's footer and did nothing there, and the letters
    typed next ran commands (`visited`: t reran at 16 trials, e opened the export dialog)."""
    from textual.widgets import Input

    from tuiprof.tui.screens.drill import DrillScreen

    app = fixed_app("bfs")
    async with app.run_test(size=(120, 40)) as pilot:
        await patterns_in(pilot)
        config, generation = app.config, app.generation
        await pilot.press("enter")
        assert isinstance(app.screen, DrillScreen)
        footer = screen_text(app).splitlines()[-1]
        assert "Zoom" not in footer and "Metric" not in footer   # the main screen's views are not here
        await pilot.press("slash", *"visited")
        await pilot.pause()
        search = app.query_one("#search", Input)
        assert not isinstance(app.screen, DrillScreen) and search.has_focus and search.value == "visited"
        assert app.config == config and app.generation == generation     # no run started, no dialog
        assert "visited" in app.query_one(SourceView).code[app.query_one(SourceView).current_line - 1].plain


# --- 10. an arch without an L2 ---------------------------------------------------------------------------

async def test_no_l2_figures_where_the_arch_has_no_l2() -> None:
    """gtx480 (Yen14's, L2 disabled): before, the status said `L2 -` yet every op showed
    `H2 0.000%` on an invented axis and the X formula printed `t2 120`."""
    from tuiprof.tui.screens.drill import DrillScreen

    app = fixed_app("spmv-u", arch="gtx480")
    async with app.run_test(size=(160, 50)) as pilot:
        await patterns_in(pilot)
        assert not app.session.arch.l2.enabled and app.session.arch.l1.enabled
        view = app.query_one(SourceView)
        status = screen_text(app).splitlines()[0]
        assert "L1 " in status and "L2" not in status
        assert " H1 " in view.detail().plain and "H2" not in view.detail().plain
        seen = set()
        for _ in range(8):                               # ] steps through the metrics there are
            await pilot.press("right_square_bracket")
            seen.add(app.metric)
        assert seen == {"x", "h1", "l1_read"}
        await pilot.press("enter")
        assert isinstance(app.screen, DrillScreen)
        await pilot.pause()
        text = " ".join(screen_text(app).split())
        assert not re.search(r"H2 \(L2|H2 [\d—]|H2·t2|t2 \d|▒ L2", text), text
        assert "X = H1·t1 + (1−H1)·Tm with t1" in text and "H1 (L1 hit ratio)" in text


# --- 9. one number, one rendering ---------------------------------------------------------------------

def test_one_percentage_rule_and_one_cycle_rule() -> None:
    from tuiprof.tui import format as fmt

    assert [fmt.pct(x) for x in (0.4312, 0.0015, 0.00145, 0.0014999, 0.00015, 0.0, 1.0, None)] == \
        ["43.1%", "0.15%", "0.15%", "0.15%", "0.015%", "0.0%", "100.0%", "—"]
    assert fmt.pct(0.87, 0, width=5) == "  87%" and fmt.pct(None, missing="-") == "-"
    assert [fmt.cycles(x) for x in (982.5, 982.46, 8.63, 0.456, 12.0)] == ["983", "982", "8.6", "0.46", "12"]
    assert fmt.cyc(982.5) == "983 cyc"


def test_one_byte_size_rendering() -> None:
    """Three formatters gave '48 KiB', '48.0 KiB' and '48 KiB' (and '49153 B' for a byte more)."""
    from tuiprof import units
    from tuiprof.arch.spec import format_size
    from tuiprof.resources import human_size

    assert format_size is units.size and human_size is units.size
    assert [units.size(n) for n in (49152, 52428800, 1536, 100000, 217 * 1024, 512)] == \
        ["48 KiB", "50 MiB", "1.5 KiB", "97.7 KiB", "217 KiB", "512 B"]


@pytest.mark.parametrize("h1", [0.0015, 0.00145, 0.0015234])
async def test_an_h1_reads_the_same_in_the_op_line_the_drill_down_and_the_report(h1: float) -> None:
    """Before: H1 = 0.0015 was 0.1% in the text report, 0.2% in the op line and 0.150% in the
    drill-down."""
    import dataclasses

    from tests.support.fixed_analysis import fixed
    from tuiprof.report import document, render
    from tuiprof.tui.screens.drill import DrillScreen

    session, analysis = fixed("spmv-u")
    l1 = next(i for i, r in analysis.ranks().items() if r == "#1")
    s = analysis.ops[l1]
    ops = list(analysis.ops)
    ops[l1] = dataclasses.replace(s, h1=dataclasses.replace(s.h1, mean=h1))
    changed = dataclasses.replace(analysis, ops=tuple(ops))
    want = "0.15%"
    row = next(line for line in render(document(session, changed), "text").splitlines()
               if line.strip().startswith("#1 ") and f" {l1} " in line)
    assert f" {want} " in row, row
    app = TuiprofApp(session=session, analysis=changed, show_timing=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await patterns_in(pilot)
        assert f"H1 {want} " in app.query_one(SourceView).detail().plain
        await pilot.press("enter")
        assert isinstance(app.screen, DrillScreen)
        await pilot.pause()
        assert f"mean {want} " in screen_text(app)


def test_the_text_report_never_cuts_advice() -> None:
    """Before: advice over 320 characters ended in "…" mid-word."""
    from tests.support.fixed_analysis import fixed
    from tuiprof.report import document, render

    session, analysis = fixed("spmv-u")
    doc = document(session, analysis)
    tips = [t for o in doc["analysis"]["ops"] for t in (o["advice"] or [])]
    assert max(len(t) for t in tips) > 320
    text = " ".join(render(doc, "text").split())
    for o in doc["analysis"]["ops"]:
        if o["rank"] and int(o["rank"][1:]) <= 3:
            for t in o["advice"] or []:
                assert " ".join(t.split()) in text, t


# --- 5. honest phases; 6. the MD sweep and the arch's MD -------------------------------------------------

KERNEL = 'extern "C" __global__ void k(float *y, const float *x)\n{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n' \
         '    y[i] = 2.0f * x[i];\n}\n'
SCRIPT = ("import numpy as np\nARCH = 'v100'\ndef setup(dev):\n    x = dev.to_device(np.ones(256, np.float32))\n"
          "    y = dev.zeros(256, np.float32)\n    dev.launch('k', 2, 128, (y, x))\n    dev.launch('k', 4, 64, (y, x))\n")


async def test_opening_a_kernel_file_says_each_phase_as_it_happens(tmp_path) -> None:
    """Before: "loading the trace..." for the whole compile and emulation (45 s on stencil.cu),
    and after R the previous run's "✓ 20/64 ..." for 20-34 s."""
    from tuiprof.session import RunConfig
    from tuiprof.tui.messages import LoadProgress

    (tmp_path / "k.cu").write_text(KERNEL)
    (tmp_path / "k_launch.py").write_text(SCRIPT)
    said: list[str] = []

    class Spy(TuiprofApp):
        def on_load_progress(self, message: LoadProgress) -> None:
            super().on_load_progress(message)
            said.append(self._phase()[0])

    app = Spy(str(tmp_path / "k.cu"), RunConfig(trials=2, sweep=False, collect=_launch_index(1)), show_timing=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.phase in ("done", "failed"))
        assert app.phase == "done", app.error
        text = "\n".join(said)
        assert re.search(r"compiling k\.cu with (nvcc|NVRTC)", text) or "cache" in text, text
        assert "emulating launch 1 (k): 2/2 CTAs" in text, text          # a launch before the recorded one
        assert "emulating launch 2 (k, the recorded one): 4/4 CTAs" in text, text
        assert "recording the trace" in text
        said.clear()
        app.action_recollect()                                            # R
        status = str(app.query_one("#status").render())
        assert "recollecting k.cu" in status and "✓" not in status, status   # at once, before any event
        await wait_for(pilot, lambda: app.phase in ("done", "failed"))
        assert any("emulating launch 2" in x for x in said)


def _launch_index(k: int):
    from tuiprof.collect.options import CollectOptions

    return CollectOptions(launch_index=k, backend="emu")


def test_md_sweep_progress_is_a_fraction_of_the_whole_sweep() -> None:
    """Before: `MD sweep 5/6: 4/16` then `2/6: 7/16` (the first number was the MD)."""
    from tests.support.tui_support import DEMO
    from tuiprof.session import RunConfig, Session, SweepProgress

    events: list[SweepProgress] = []
    session = Session.open(DEMO, RunConfig(trials=4, seed=3, sweep_trials=3, tolerance=None))
    session.run(lambda e: events.append(e) if isinstance(e, SweepProgress) else None)
    assert events
    assert [e.sweep_done for e in events] == list(range(1, len(events) + 1))
    assert events[-1].sweep_done == events[-1].sweep_planned == 3 * (len(session.sweep_mds()) - 1)


async def test_the_status_and_model_pane_show_the_sweep_as_a_fraction() -> None:
    from tuiprof.session import SweepProgress
    from tuiprof.tui.panes.md import render_md

    app = fixed_app("spmv-u")
    async with app.run_test(size=(120, 40)) as pilot:
        await patterns_in(pilot)
        app.phase, app.sweep = "sweep", SweepProgress(5, 4, 16, (1, 2, 3, 4, 5, 6), 20, 80)
        assert "MD sweep 20/80 trials (MD 5)" in app._phase()[0]
    d = dataclasses_replace_md_none(app.analysis.decisions)
    pane = render_md(d, app.sweep, 6, 80, "sweep").plain
    assert "MD sweep: 20 of 80 trials (25%)" in pane and "MD 5 at 4/16" in pane


def dataclasses_replace_md_none(decisions):
    import dataclasses

    return dataclasses.replace(decisions, md=None, md_note="")


async def test_picking_an_arch_says_when_it_resets_the_md() -> None:
    """Before: picking h100 silently reset the MD (2 to 8 in the issue)."""
    from textual.widgets import OptionList

    app = fixed_app("spmv-u")
    async with app.run_test(size=(120, 40)) as pilot:
        await patterns_in(pilot)
        before = app.session.md
        await pilot.press("a")
        ol = app.screen.query_one(OptionList)
        ol.highlighted = [ol.get_option_at_index(i).id for i in range(ol.option_count)].index("h100")
        await pilot.press("enter")
        app.action_cancel_run()
        after = app.session.md
        assert after != before
        said = [str(n.message) for n in app._notifications]
        assert any(f"rerun on h100 at MD {after}" in n and f"was {before}" in n for n in said), said
        await wait_for(pilot, lambda: app.phase in ("cancelled", "done", "failed"))


def test_the_text_report_says_when_the_simulator_compiles(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Before: a 25.7 s pause without a word while the simulator compiled for a new geometry."""
    from tuiprof.report import build_report
    from tuiprof.session import RunConfig, Session

    monkeypatch.setattr(Session, "run", lambda self, on_event=None: None)
    monkeypatch.setattr(Session, "compiles", lambda self, arch=None: True)
    build_report("vecadd", RunConfig(trials=2))
    assert "compiling the simulator" in capsys.readouterr().err
    monkeypatch.setattr(Session, "compiles", lambda self, arch=None: False)
    build_report("vecadd", RunConfig(trials=2))
    assert "compiling" not in capsys.readouterr().err


# --- 4. keys during runs ----------------------------------------------------------------------------------

@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="per-thread nice values are Linux's")
async def test_trials_run_below_the_ui_threads_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trial workers (and the thread that analyses their results) yield the CPU to the UI's
    thread: before, they ran at its priority on every core and keys took 0.5-2 s to repaint
    (`benchmarks/bench_tui.py` measures that; tests never time it)."""
    import os

    from tuiprof.sim.montecarlo import MonteCarlo

    seen: list[int] = []
    real = MonteCarlo.run_one

    def spy(self: MonteCarlo, index: int):
        seen.append(os.getpriority(os.PRIO_PROCESS, 0))      # this worker thread's nice value
        return real(self, index)

    monkeypatch.setattr(MonteCarlo, "run_one", spy)
    ui = os.getpriority(os.PRIO_PROCESS, 0)
    app = fixed_app("spmv-u")
    async with app.run_test(size=(120, 40)) as pilot:
        await patterns_in(pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: len(seen) >= 2)
        app.action_cancel_run()
        await wait_for(pilot, lambda: app.phase in ("cancelled", "done"))
    assert os.getpriority(os.PRIO_PROCESS, 0) == ui
    assert seen and all(p > ui for p in seen), (ui, seen)


async def test_a_runs_updates_redraw_only_what_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each analysis a run streams in repaints the source rows whose figures moved and the cursor
    op's detail, and lays nothing out: the SM and model panes, unchanged until the main run ends,
    are left alone. Before, every update laid out the whole screen (the SM and model panes asked
    for it) and redrew every source row (about 12 ms of the UI's thread per update, 10 a second,
    while keys waited). What is drawn stays what a full repaint draws."""
    from dataclasses import replace

    import numpy as np
    from textual.screen import Screen

    from tests.support.fixed_analysis import fixed, made_up_trial
    from tuiprof.session import AnalysisUpdated, TrialDone

    session, _ = fixed("spmv-u")
    rng = np.random.default_rng(11)
    main = [made_up_trial(session, session.md, i, rng) for i in range(14)]
    per_md = {m: [made_up_trial(session, m, i, rng) for i in range(session.sweep_trial_count())]
              for m in session.sweep_mds() if m != session.md}
    updates = [replace(session.analysis_of(main[:k], per_md), decisions=None) for k in range(3, 15)]  # mid-run: no models yet
    layouts, lines = [0], [0]
    real_layout, real_line = Screen._refresh_layout, SourceView.render_line

    def count_layout(self: Screen, *args: object, **kwargs: object) -> None:
        layouts[0] += 1
        real_layout(self, *args, **kwargs)  # type: ignore[arg-type]

    def count_line(self: SourceView, y: int):
        lines[0] += 1
        return real_line(self, y)

    monkeypatch.setattr(Screen, "_refresh_layout", count_layout)
    monkeypatch.setattr(SourceView, "render_line", count_line)
    app = fixed_app("spmv-u")
    async with app.run_test(size=(120, 40)) as pilot:
        await patterns_in(pilot)
        app.phase, app.stale, app.analysis = "running", False, None
        app._handle(AnalysisUpdated(updates[0]))
        app._apply_pending()  # the run's first analysis: drawn whole
        await pilot.pause(0.2)
        view = app.query_one(SourceView)
        op_rows = sum(1 for r in view.rows[view.top: view.top + view.body_height] if r.op is not None)
        layouts[0] = lines[0] = 0
        for k, update in enumerate(updates[1:], 4):
            app._handle(TrialDone(main[k - 1], k, 64))
            app._handle(AnalysisUpdated(update))
            app._apply_pending()
            await pilot.pause(0.15)
        n = len(updates) - 1
        assert layouts[0] <= 1, layouts[0]
        assert lines[0] <= n * (op_rows + view.echo_rows), (lines[0], n, op_rows)
        def source_text() -> list[str]:
            r = view.region
            return [line[r.x: r.right] for line in screen_text(app).split("\n")[r.y: r.bottom]]

        shown = source_text()
        view.refresh()
        await pilot.pause(0.2)
        assert source_text() == shown  # a partial repaint left no row stale


async def test_the_drill_down_redraws_only_the_sections_a_run_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """While a run streams in, the open drill-down's sections whose text did not change (the PTX,
    the coalescing: the same in every trial) are not updated again: each update of a section lays
    out the screen. Before, all of them were, with every analysis."""
    from dataclasses import replace

    import numpy as np
    from textual.widgets import Static

    from tests.support.fixed_analysis import fixed, made_up_trial
    from tuiprof.session import AnalysisUpdated
    from tuiprof.tui.screens.drill import DrillScreen

    session, _ = fixed("spmv-u")
    rng = np.random.default_rng(5)
    main = [made_up_trial(session, session.md, i, rng) for i in range(8)]
    per_md = {m: [made_up_trial(session, m, i, rng) for i in range(session.sweep_trial_count())]
              for m in session.sweep_mds() if m != session.md}
    updates = [replace(session.analysis_of(main[:k], per_md), decisions=None) for k in range(4, 9)]
    updated: list[str] = []
    real = Static.update

    def spy(self: Static, *args: object, **kwargs: object) -> None:
        updated.append(self.id or "")
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    app = fixed_app("spmv-u")
    async with app.run_test(size=(120, 40)) as pilot:
        await patterns_in(pilot)
        await pilot.press("enter")
        assert isinstance(app.screen, DrillScreen)
        app.phase = "running"
        monkeypatch.setattr(Static, "update", spy)
        for update in updates:
            app._handle(AnalysisUpdated(update))
            app._apply_pending()
            await pilot.pause(0.1)
        assert "drill-latency" in updated  # the figures moved: redrawn
        assert "drill-ptx" not in updated and "drill-coalescing" not in updated, updated
