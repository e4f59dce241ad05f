"""The source pane: CUDA source highlighted by pygments through `textual.highlight`, with an
annotation gutter on every line that holds memory ops (paper 000 sec. 6.1: H1, H2 and the
expected latency X with its 95% interval, plus sectors per request).

Lines with several ops get one gutter row per op (continuation rows name the op), up to
`MAX_OPS_PER_LINE`; hot ops are ranked by cost share and marked with a glyph and their rank, so
heat never rests on colour. Everything drawn from the trace is cleaned and capped
(`tuiprof.tui.text`): a hostile trace cannot write to the terminal or make layout unbounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from rich.segment import Segment
from textual import events
from textual.binding import Binding
from textual.content import Content
from textual.highlight import highlight
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from tuiprof.tui import format as fmt
from tuiprof.tui.text import MAX_LABEL, MAX_OPS_PER_LINE, clean, clean_source

HOT = 3
"""Ops ranked 1..HOT by cost share get the hot marker ▶."""
FULL_GUTTER_WIDTH = 110
"""Pane width from which the gutter shows bars and the full [lo–hi] interval."""
GUTTER_FULL = 51
"""Cells of the full annotation: H1 and H2 (percent and bar, 14 each), X with its interval (18),
sectors per request (5)."""
GUTTER_COMPACT = 25
"""Cells of the compact annotation: H1 and H2 (cell and percent, 6 each), X ± half-interval (9),
sectors per request (4)."""
MAX_HIGHLIGHT = 200_000
"""Characters of (capped) source text highlighted with pygments (about a second); a longer
text is shown plain, so that opening it never stalls the UI."""
MAX_SOURCE_LINES = 200_000
"""Source lines shown; ops on later lines still get their rows, after the text."""


@dataclass(frozen=True)
class Row:
    """One display row: a source line, or a continuation row for a further op on that line."""

    line: int
    """1-based source line."""
    op: int | None
    first: bool
    hidden: int = 0
    """On a summary row: how many further ops of this line have no row of their own."""


def build_rows(n_lines: int, ops: Sequence[Any], per_line: int = MAX_OPS_PER_LINE) -> list[Row]:
    """Display rows for `n_lines` source lines and the ops on them (by line, then column, then
    id): at most `per_line` op rows per line, then one summary row for the rest. Ops on lines
    past the text (or on line 0) get rows after it, so the row count is bounded by the text and
    the op table, never by a line number read from a file."""
    by_line: dict[int, list[Any]] = {}
    for o in ops:
        by_line.setdefault(o.line, []).append(o)
    rows: list[Row] = []
    extra = sorted(line for line in by_line if not 1 <= line <= n_lines)
    for line in [*range(1, n_lines + 1), *extra]:
        here = sorted(by_line.get(line, []), key=lambda o: (o.column, o.id))
        rows.append(Row(line, here[0].id if here else None, True))
        rows.extend(Row(line, o.id, False) for o in here[1:per_line])
        if len(here) > per_line:
            rows.append(Row(line, None, False, len(here) - per_line))
    return rows


class SourceView(Widget, can_focus=True):
    """Annotated source with a row cursor; enter drills into the op under the cursor."""

    BINDINGS = [
        Binding("up,k", "move(-1)", "Up", show=False, id="source.up"),
        Binding("down,j", "move(1)", "Down", show=False, id="source.down"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="source.page-up"),
        Binding("pagedown", "page(1)", "Page down", show=False, id="source.page-down"),
        Binding("home,g", "edge(-1)", "Top", show=False, id="source.top"),
        Binding("end,G", "edge(1)", "Bottom", show=False, id="source.bottom"),
        Binding("left,h", "pan(-4)", "Scroll left", show=False, id="source.left"),
        Binding("right,l", "pan(4)", "Scroll right", show=False, id="source.right"),
        Binding("enter", "drill", "Drill down", tooltip="Drill into the op under the cursor", id="source.drill"),
    ]
    COMPONENT_CLASSES = {"source-view--cursor", "source-view--header", "source-view--hot"}
    DEFAULT_CSS = """
    SourceView { height: 1fr; width: 1fr; }
    SourceView > .source-view--cursor { background: $block-cursor-blurred-background; text-style: bold; }
    SourceView:focus > .source-view--cursor { background: $block-cursor-background; color: $block-cursor-foreground; }
    SourceView > .source-view--header { background: $panel; color: $text-muted; }
    SourceView > .source-view--hot { background: $warning 12%; }
    """

    cursor: reactive[int] = reactive(0, init=False)

    class CursorMoved(Message):
        """The cursor is on another row; `op` is the op id of that row's gutter (or None)."""

        def __init__(self, op: int | None) -> None:
            super().__init__()
            self.op = op

    class DrillRequested(Message):
        def __init__(self, op: int) -> None:
            super().__init__()
            self.op = op

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[Row] = []
        self.code: list[Content] = []
        self.ops: dict[int, Any] = {}
        self.stats: dict[int, Any] = {}
        self.rank: dict[int, int] = {}
        self.top = 0
        self.pan = 0
        self._hot: int | None = None
        self.file = ""
        self.labels: dict[int, str] = {}
        """Each op's label, cleaned and capped for drawing."""
        self.row_of: dict[int, int] = {}
        """Row index of each op that has a row of its own."""
        self._shared: set[int] = set()
        """Lines drawn on more than one row."""
        self._width = 0

    # --- data -------------------------------------------------------------------------------

    def set_source(self, name: str, text: str, ops: Sequence[Any]) -> None:
        """Show source file `name` with its ops (only ops of that file). The text is cleaned and
        capped first (`clean_source`), so that a hostile trace costs bounded time and memory."""
        self.file = clean(name)
        lines = clean_source(text).split("\n")[:MAX_SOURCE_LINES]
        if lines and lines[-1] == "":
            lines.pop()  # a final newline ends the last line, it does not start one
        shown = "\n".join(lines)
        code: list[Content] = []
        if len(shown) <= MAX_HIGHLIGHT:
            try:
                code = highlight(shown, language="cuda", path=self.file).split("\n")
            except Exception:  # an unknown lexer must not hide the source
                code = []
        if len(lines) - 1 <= len(code) <= len(lines):  # pygments drops a final empty line
            code = (code + [Content("")])[: len(lines)]
        else:
            code = [Content(line) for line in lines]
        self.code = code
        self._width = max((c.cell_length for c in code), default=0)
        self.ops = {o.id: o for o in ops}
        self.labels = {o.id: clean(o.label, MAX_LABEL) for o in ops}
        self.rows = build_rows(len(lines), ops)
        self.row_of = {r.op: k for k, r in enumerate(self.rows) if r.op is not None}
        counts: dict[int, int] = {}
        for r in self.rows:
            counts[r.line] = counts.get(r.line, 0) + 1
        self._shared = {line for line, n in counts.items() if n > 1}
        first = next((k for k, r in enumerate(self.rows) if r.op is not None), 0)
        self.top = max(0, first - 3)
        self.set_reactive(SourceView.cursor, first)
        self._scroll_to_cursor()
        self.refresh()

    def set_analysis(self, analysis: Any | None) -> None:
        """Annotate with an Analysis (None clears the figures but keeps the ops)."""
        if analysis is None:
            self.stats, self.rank = {}, {}
        else:
            self.stats = {s.op.id: s for s in analysis.ops}
            if self.stats.keys() != self.ops.keys() and not set(self.ops) <= set(self.stats):
                self._hot = None
            ranked = [s for s in analysis.by_cost() if fmt.finite(s.cost) and s.cost > 0]
            self.rank = {s.op.id: i + 1 for i, s in enumerate(ranked)}
        self.refresh()

    @property
    def current_line(self) -> int:
        """The source line (1-based) under the cursor; 0 when there is none."""
        return self.rows[self.cursor].line if self.rows else 0

    def go_to_line(self, line: int) -> None:
        """Put the cursor on the first row of source line `line` (the nearest earlier one if the
        file got shorter): a recollect after an edit keeps the user where they were."""
        rows = [k for k, r in enumerate(self.rows) if r.line <= line]
        if rows:
            best = max(rows, key=lambda k: (self.rows[k].line, -k))
            self.cursor = best

    @property
    def current_op(self) -> int | None:
        return self.rows[self.cursor].op if self.rows else None

    def loads_by_cost(self) -> list[int]:
        """Load op ids on this file, most expensive first (n/N order)."""
        ids = [i for i, r in sorted(self.rank.items(), key=lambda kv: kv[1])]
        return [i for i in ids if i in self.row_of and self.ops[i].kind == "load"]

    def go_to_op(self, op: int) -> None:
        if op in self.row_of:
            self.cursor = self.row_of[op]

    def jump_hot(self, step: int) -> int | None:
        """Move to the next (step 1) or previous (-1) load by cost rank; returns its op id."""
        order = self.loads_by_cost()
        if not order:
            return None
        cur = self.current_op
        if cur is not None and cur == self._hot and cur in order:
            nxt = order[(order.index(cur) + step) % len(order)]
        else:  # the first n goes to the hottest load, the first N to the coolest
            nxt = order[0] if step > 0 else order[-1]
        self.go_to_op(nxt)
        self._hot = nxt
        return nxt

    def search(self, text: str, forward: bool = True) -> bool:
        """Move to the next row (after the cursor, wrapping) whose source or op label holds `text`."""
        needle = text.lower()
        if not needle or not self.rows:
            return False
        n = len(self.rows)
        for k in range(1, n + 1):
            i = (self.cursor + (k if forward else -k)) % n
            r = self.rows[i]
            hay = self.code[r.line - 1].plain if r.first and r.line - 1 < len(self.code) else ""
            if r.op is not None:
                hay += " " + self.labels[r.op]
            if needle in hay.lower():
                self.cursor = i
                return True
        return False

    # --- movement ---------------------------------------------------------------------------

    def watch_cursor(self, old: int, new: int) -> None:
        self._scroll_to_cursor()
        if old >= len(self.rows) or new >= len(self.rows) or self.rows[old].op != self.rows[new].op:
            self.post_message(self.CursorMoved(self.current_op))
        self.refresh()

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, len(self.rows) - 1)) if self.rows else 0

    @property
    def body_height(self) -> int:
        return max(1, self.size.height - 1)

    def _scroll_to_cursor(self) -> None:
        h = self.body_height
        if self.cursor < self.top:
            self.top = self.cursor
        elif self.cursor >= self.top + h:
            self.top = self.cursor - h + 1
        self.top = max(0, min(self.top, max(0, len(self.rows) - h)))

    def on_resize(self, event: events.Resize) -> None:
        self._scroll_to_cursor()
        self.refresh()

    def action_move(self, step: int) -> None:
        self.cursor += step

    def action_page(self, step: int) -> None:
        self.top = max(0, min(self.top + step * self.body_height, max(0, len(self.rows) - self.body_height)))
        self.cursor += step * self.body_height

    def action_edge(self, step: int) -> None:
        self.cursor = 0 if step < 0 else len(self.rows) - 1

    def action_pan(self, step: int) -> None:
        self.pan = max(0, min(self.pan + step, max(0, self._width - 8)))
        self.refresh()

    def action_drill(self) -> None:
        op = self.current_op
        if op is None:
            self.notify("No memory op on this line: move to an annotated line (n jumps to the hottest load).",
                        severity="warning", timeout=3)
            return
        self.post_message(self.DrillRequested(op))

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self.top = max(0, min(self.top + 3, max(0, len(self.rows) - self.body_height)))
        self.refresh()

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self.top = max(0, self.top - 3)
        self.refresh()

    def on_click(self, event: events.Click) -> None:
        if event.y >= 1:
            self.cursor = self.top + event.y - 1

    # --- rendering --------------------------------------------------------------------------

    @property
    def full(self) -> bool:
        return self.size.width >= FULL_GUTTER_WIDTH

    def header(self) -> Content:
        if self.full:
            cols = f"  rank │ {'H1 (L1 hit)':<14}{'H2 (L2 hit)':<14}{'X cycles [95%]':<18}{'s/r':>5} │ "
        else:
            cols = f"  rank │ {'H1':>5} {'H2':>5} {'X ±95%':>9}{'s/r':>4} │ "
        where = f"{self.file}  {self.top + 1}–{min(len(self.rows), self.top + self.body_height)}/{len(self.rows)}"
        return Content(cols + where)

    def _gutter(self, row: Row) -> Content:
        """The annotation of `row`'s op (blank when the row has none)."""
        width = GUTTER_FULL if self.full else GUTTER_COMPACT
        if row.op is None:
            return Content(" " * width)
        op, s = self.ops[row.op], self.stats.get(row.op)
        if s is None:
            return Content.styled(f"{op.kind} {self.labels[row.op]}"[: width - 1].ljust(width), "$text-muted")
        store = op.kind != "load"
        h1 = None if store else (s.h1.mean if s.h1.defined else None)
        h2 = s.h2.mean if s.h2.defined else None
        x = s.x.mean if s.x.defined else None
        lo, hi = (s.x.lo, s.x.hi) if s.x.defined else (None, None)
        spr = s.sectors_per_request
        if self.full:
            interval = f"[{fmt.cycles(lo)}–{fmt.cycles(hi)}]"
            parts = [
                (fmt.pct(h1, width=5) + " ", ""), (fmt.hbar(h1, 7), "$primary"), (" ", ""),
                (fmt.pct(h2, width=5) + " ", ""), (fmt.hbar(h2, 7), "$secondary"), (" ", ""),
                (f"{fmt.cycles(x, 5)} {interval:<12}", "bold"), (fmt.num(spr, 1, 5), ""),
            ]
        else:
            half = (hi - lo) / 2 if fmt.finite(lo) and fmt.finite(hi) else None
            parts = [
                (fmt.vcell(h1), "$primary"), (fmt.pct(h1, width=4) + " ", ""),
                (fmt.vcell(h2), "$secondary"), (fmt.pct(h2, width=4) + " ", ""),
                (f"{fmt.cycles(x, 4)}±{fmt.cycles(half):<4}", "bold"), (fmt.num(spr, 1, 4), ""),
            ]
        content = Content.assemble(*parts)
        return content.pad_right(max(0, width - content.cell_length))[:width]

    def _lineno(self, row: Row) -> Content:
        rank = self.rank.get(row.op) if row.op is not None else None
        if rank is not None and rank <= HOT:
            mark = Content.styled(f"▶{rank}", "bold $text-warning")
        elif rank is not None:
            mark = Content.styled(f"{rank:>2}", "$text-muted")
        else:
            mark = Content("  ")
        num = Content.styled(f"{row.line:>4}" if row.first else "   ·", "$text-muted")
        return Content.assemble(mark, num, " │ ")

    def _code(self, row: Row) -> Content:
        if not row.first:
            op = self.ops[row.op] if row.op is not None else None
            if op is not None:
                text = f"  ↳ {self.labels[op.id] or 'op ' + str(op.id)} ({op.kind}, {op.bytes} B/lane)"
            else:
                text = f"  ↳ … {row.hidden:,} more ops on this line (the drill-down's n/N steps through every load)"
            return Content.styled(text, "$text-muted italic")
        code = self.code[row.line - 1] if 0 < row.line <= len(self.code) else Content("")
        if row.line in self._shared and row.op is not None:
            code = Content.assemble(code, Content.styled(f"  ◂ {self.labels[row.op]}", "$text-muted italic"))
        return code

    def _strip(self, content: Content, base: Any) -> Strip:
        return Strip([Segment(t, s.rich_style) for t, s in content.render(base, end="", parse_style=self._get_style)])

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0:
            base = self.get_visual_style("source-view--header")
            return self._strip(self.header(), base).extend_cell_length(width, base.rich_style).crop(0, width)
        index = self.top + y - 1
        if index >= len(self.rows):
            return Strip.blank(width, self.visual_style.rich_style)
        row = self.rows[index]
        rank = self.rank.get(row.op) if row.op is not None else None
        if index == self.cursor:
            base = self.get_visual_style("source-view--cursor")
        elif rank is not None and rank <= HOT:
            base = self.get_visual_style("source-view--hot")
        else:
            base = self.visual_style
        left = Content.assemble(self._lineno(row), self._gutter(row), Content.styled(" │ ", "$text-muted"))
        left_strip = self._strip(left, base)
        room = max(0, width - left_strip.cell_length)
        code_strip = self._strip(self._code(row), base).crop(self.pan, self.pan + room)
        return Strip.join([left_strip, code_strip]).extend_cell_length(width, base.rich_style).crop(0, width)
