"""The source pane: CUDA source highlighted by pygments through `textual.highlight`, with a compact
fixed gutter on every line that holds memory ops (Baghsorkhi12 sec. 6.1: H1 and the expected latency
X; Nsight Compute's sectors per request with an ideal mark) and, below the code, the cursor op in
full and the cursor line whole when the pane cuts it.

The gutter does not grow with the terminal: every column beyond it is the code's. Lines longer
than the code area end in "…"; ←/→ scroll the code under a fixed gutter. Lines with several ops
get one gutter row per op (continuation rows name the op), up to `MAX_OPS_PER_LINE`; loads and
stores are ranked apart by cost (#1, #2, ... and w1, ...; the three costliest loads in bold),
so heat never rests on colour alone. Everything drawn from the trace is cleaned and capped
(`tuiprof.tui.text`): a hostile trace cannot write to the terminal or make layout unbounded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.content import Content
from textual.geometry import Region
from textual.highlight import highlight
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from tuiprof.model.advice import hot_reason, kernel_tm
from tuiprof.model.analysis import STORE_RANK, load_rank
from tuiprof.tui import delta
from tuiprof.tui import format as fmt
from tuiprof.tui.metrics import Levels
from tuiprof.tui.text import ELLIPSIS, MAX_LABEL, MAX_OPS_PER_LINE, clean, clean_source
from tuiprof.tui.themes import MUTED

if TYPE_CHECKING:
    from textual.style import Style as VisualStyle

    from tuiprof.model.analysis import Analysis, OpStats
    from tuiprof.model.pattern import AddressPattern
    from tuiprof.trace.data import StaticOp
    from tuiprof.tui.delta import Against

HOT = 3
"""Loads ranked 1..HOT by cost are hot (#1 is the costliest load): their rank and row stand out."""
CODE_WANT = 100
"""Code columns the layout gives the source before it gives the side panes any."""
MAX_ECHO_ROWS = 3
"""Rows below the code that echo a cut cursor line (a longer line ends in "…" there too)."""
MAX_HIGHLIGHT = 200_000
"""Characters of (capped) source text highlighted with pygments (about a second); a longer
text is shown plain, so that opening it never stalls the UI."""
MAX_SOURCE_LINES = 200_000
"""Source lines shown; ops on later lines still get their rows, after the text."""
LEGENDS = ("#1 costliest load (w1 the costliest store) · H1% L1 hits · cyc expected latency X · "
           "s/r sectors per request as ncu counts them (shm: shared memory, wavefronts per request; cst: constant memory, "
           "requests per warp access), ✓ at the "
           "ideal · enter drill-down · ? keys",
           "#1 costliest load (w1 the costliest store) · H1% L1 hits · cyc expected latency X · "
           "s/r sectors per request as ncu counts them, ✓ at the ideal · enter drill-down · ? keys",
           "#1 costliest load, w1 store · H1% L1 hits · cyc latency X · s/r sectors/request (ncu), ✓ ideal",
           "#1 costliest load · H1% L1 hits · cyc latency X · s/r sectors/req, ✓ ideal")
"""The legend line under the code, longest first: the widest that fits is shown."""


@dataclass(frozen=True)
class Row:
    """One display row: a source line, or a continuation row for a further op on that line."""

    line: int
    """1-based source line."""
    op: int | None
    first: bool
    hidden: int = 0
    """On a summary row: how many further ops of this line have no row of their own."""


def build_rows(n_lines: int, ops: Sequence["StaticOp"], per_line: int = MAX_OPS_PER_LINE) -> list[Row]:
    """Display rows for `n_lines` source lines and the ops on them (by line, then column, then
    id): at most `per_line` op rows per line, then one summary row for the rest. Ops on lines
    past the text (or on line 0) get rows after it, so the row count is bounded by the text and
    the op table, never by a line number read from a file."""
    by_line: dict[int, list["StaticOp"]] = {}
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


def rank_mark(label: str | None) -> str:
    """The gutter's two cells for a rank label: #1..#9 for loads, then the number alone (10..99,
    then ··); w1..w9 for stores and atomics, then w+."""
    if not label:
        return "  "
    n = int(label[1:])
    if load_rank(label) is not None:
        return label if n < 10 else f"{n:>2}" if n < 100 else "··"
    return label if n < 10 else f"{STORE_RANK}+"


def source_language(name: str) -> str:
    """The lexer a source file is highlighted with: Python for the ``.py`` files Triton's and
    Numba's PTX name, C++ for headers, CUDA otherwise."""
    suffix = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return {"py": "python", "h": "cpp", "hpp": "cpp", "hh": "cpp", "cpp": "cpp", "cc": "cpp", "c": "c"}.get(suffix, "cuda")


def gutter_cells(stats: "OpStats | None", load: bool, l1: bool = True) -> tuple[str, str, str, str]:
    """H1 (3 cells, percent), X (4 cells, cycles), sectors per request (2 cells) and the ideal
    mark (1 cell) of an op, as plain text; a shared-memory op has ``shm`` for H1 (no cache) and
    its wavefronts per request for the sectors (bank conflicts, as ncu counts them), a constant op
    ``cst`` and its constant-cache requests per warp access; without an L1 (`l1` false) there is
    no H1."""
    if stats is None:
        return "   ", "    ", "  ", " "
    sh = stats.passes
    if sh is not None:
        return ("shm" if sh.space == "shared" else "cst", fmt.short(sh.latency, 4),
                f"{sh.passes:>2.0f}" if sh.passes < 99.5 else "99", "✓" if sh.passes <= sh.ideal * 1.05 else " ")
    h1 = stats.h1.mean if load and l1 and stats.h1.defined else None
    x = stats.x.mean if stats.x.defined else None
    spa = stats.sectors_per_access
    ideal = fmt.finite(spa) and spa <= stats.ideal_sectors * 1.05
    return (f"{round(100 * h1):>3}" if h1 is not None else "  -", fmt.short(x, 4),
            f"{spa:>2.0f}" if fmt.finite(spa) and spa < 99.5 else (" -" if not fmt.finite(spa) else "99"),
            "✓" if ideal else " ")


class SourceView(Widget, can_focus=True):
    """Annotated source with a row cursor; enter drills into the op under the cursor."""

    BINDINGS = [
        Binding("up,k", "move(-1)", "Up", show=False, id="source.up"),
        Binding("down,j", "move(1)", "Down", show=False, id="source.down"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="source.page-up"),
        Binding("pagedown", "page(1)", "Page down", show=False, id="source.page-down"),
        Binding("home,g", "edge(-1)", "Top", show=False, id="source.top"),
        Binding("end,G", "edge(1)", "Bottom", show=False, id="source.bottom"),
        Binding("left,h", "pan(-8)", "Scroll left", tooltip="Scroll the code left (the gutter stays)", show=False,
                id="source.left"),
        Binding("right,l", "pan(8)", "Scroll right", tooltip="Scroll the code right (the gutter stays)", show=False,
                id="source.right"),
        Binding("enter", "drill", "Drill down", tooltip="Drill into the op under the cursor", id="source.drill"),
    ]
    COMPONENT_CLASSES = {"source-view--cursor", "source-view--header", "source-view--hot", "source-view--echo"}
    DEFAULT_CSS = """
    SourceView { height: 1fr; width: 1fr; }
    SourceView > .source-view--cursor { background: $block-cursor-blurred-background;
        color: $block-cursor-blurred-foreground; text-style: bold; }
    SourceView:focus > .source-view--cursor { background: $block-cursor-background; color: $block-cursor-foreground; }
    SourceView > .source-view--header { background: $panel; color: $text-muted; }
    SourceView > .source-view--hot { background: $warning 12%; }
    SourceView > .source-view--echo { background: $panel; }
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
        self.ops: dict[int, "StaticOp"] = {}
        self.stats: dict[int, "OpStats"] = {}
        self.ranks: dict[int, str] = {}
        """Each ranked op's label: #1, #2, ... for loads, w1, ... for stores (`Analysis.ranks`)."""
        self.analysis: "Analysis | None" = None
        self.patterns: dict[int, "AddressPattern"] = {}
        self.stale = False
        """The figures are the previous run's (a rerun is computing): drawn dimmed."""
        self.levels = Levels()
        """The cache levels of the GPU the figures are for."""
        self.top = 0
        self.pan = 0
        self.moved = False
        """The user has moved the cursor (the first analysis then does not move it to L1)."""
        self.file = ""
        self.labels: dict[int, str] = {}
        """Each op's label, cleaned and capped for drawing."""
        self.row_of: dict[int, int] = {}
        """Row index of each op that has a row of its own."""
        self._shared: set[int] = set()
        """Lines drawn on more than one row."""
        self.longest = 0
        """Cells of the longest source line."""
        self.n_lines = 0
        """Lines of the source text (the header counts lines, not the rows ops add)."""
        self._digits = 3
        self._reasons: dict[int, str] = {}
        self.pinned = False
        """A baseline is pinned: the gutter has its ΔX column (`tuiprof.tui.delta`)."""
        self.against: "Against | None" = None

    # --- data -------------------------------------------------------------------------------

    def set_source(self, name: str, text: str, ops: Sequence["StaticOp"]) -> None:
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
                code = highlight(shown, language=source_language(self.file), path=self.file).split("\n")
            except Exception:  # an unknown lexer must not hide the source
                code = []
        if len(lines) - 1 <= len(code) <= len(lines):  # pygments drops a final empty line
            code = (code + [Content("")])[: len(lines)]
        else:
            code = [Content(line) for line in lines]
        self.code = code
        self.longest = max((c.cell_length for c in code), default=0)
        self.ops = {o.id: o for o in ops}
        self.labels = {o.id: clean(o.label, MAX_LABEL) for o in ops}
        self.rows = build_rows(len(lines), ops)
        self.n_lines = len(lines)
        self.row_of = {r.op: k for k, r in enumerate(self.rows) if r.op is not None}
        counts: dict[int, int] = {}
        for r in self.rows:
            counts[r.line] = counts.get(r.line, 0) + 1
        self._shared = {line for line, n in counts.items() if n > 1}
        self._digits = max(3, len(str(max((r.line for r in self.rows), default=0))))
        self.stats, self.ranks, self.analysis, self._reasons, self.moved, self.pan = {}, {}, None, {}, False, 0
        first = next((k for k, r in enumerate(self.rows) if r.op is not None), 0)
        self.top = max(0, first - 3)
        self.set_reactive(SourceView.cursor, first)
        self._scroll_to_cursor()
        self.refresh()

    def set_analysis(self, analysis: "Analysis | None", stale: bool = False, levels: Levels = Levels()) -> None:
        """Annotate with an Analysis (None clears the figures but keeps the ops); `stale`: it is
        the previous run's, shown dimmed while a rerun computes; `levels`: the cache levels of the
        GPU it simulated (an absent one's figures are not shown). The first analysis puts the
        cursor on #1, the costliest load, unless the user has moved."""
        first = self.analysis is None and analysis is not None
        whole = analysis is None or first or (stale, levels) != (self.stale, self.levels)
        before = {} if whole else self._shown_figures()
        self.analysis, self.stale, self.levels = analysis, stale, levels
        self._reasons = {}
        if analysis is None:
            self.stats, self.ranks = {}, {}
        else:
            self.stats = {s.op.id: s for s in analysis.ops if s.op.id in self.ops}
            self.ranks = {i: r for i, r in analysis.ranks().items() if i in self.ops}
            if first and not self.moved:
                order = self.loads_by_cost()
                if order:
                    self.set_reactive(SourceView.cursor, self.row_of[order[0]])
                    self._scroll_to_cursor(centre=True)
                    self.post_message(self.CursorMoved(self.current_op))
        if whole:
            self.refresh()
        else:  # a run's next analysis: only the rows whose figures moved, and the cursor op's detail
            after = self._shown_figures()
            self._refresh_rows([k for k, figures in after.items() if before.get(k) != figures])

    def _shown_figures(self) -> dict[int, tuple[object, ...]]:
        """What each row on screen draws from the analysis (its op's rank and gutter cells), by row index."""
        out: dict[int, tuple[object, ...]] = {}
        for k in range(self.top, min(len(self.rows), self.top + self.body_height)):
            op = self.rows[k].op
            if op is not None and op in self.ops:
                stats = self.stats.get(op)
                out[k] = (self.ranks.get(op), stats is None,
                          gutter_cells(stats, self.ops[op].kind == "load", self.levels.l1) if stats is not None else ())
        return out

    def _refresh_rows(self, rows: Sequence[int]) -> None:
        """Repaint the code rows `rows` (row indices) and the rows below the code (the cursor op's
        detail); the other rows keep what they drew (Textual re-renders only the dirty lines)."""
        width = self.size.width
        regions = [Region(0, k - self.top + 1, width, 1) for k in rows if self.top <= k < self.top + self.body_height]
        self.refresh(*regions, Region(0, self.body_height + 1, width, self.echo_rows))

    def set_against(self, against: "Against | None", pinned: bool) -> None:
        """The run shown against the pinned baseline (`pinned`: the ΔX column is drawn)."""
        if against is self.against and pinned == self.pinned:
            return  # the app calls this with every analysis; nothing pinned, nothing to redraw
        self.against, self.pinned = against, pinned
        self.refresh()

    def set_patterns(self, patterns: dict[int, "AddressPattern"]) -> None:
        """The ops' address patterns (for the one word saying why an op is hot)."""
        self.patterns, self._reasons = patterns, {}
        self.refresh()

    def reason(self, op: int) -> str:
        """Why op `op` is hot, in a word ("" when nothing stands out or not known yet)."""
        if op not in self._reasons:
            s, a = self.stats.get(op), self.analysis
            if s is None or a is None or op not in self.patterns or not s.warp_accesses:
                return ""
            self._reasons[op] = hot_reason(s, self.patterns[op], kernel_tm(a))
        return self._reasons[op]

    @property
    def gutter_width(self) -> int:
        """Cells left of the code: rank 2, line number, H1 3, X 4, sectors per request 3, and the
        separators (20 with three-digit line numbers)."""
        return 2 + 1 + self._digits + 1 + 3 + 1 + 4 + 1 + 3 + 1 + (delta.GUTTER if self.pinned else 0)

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
            self.moved = True
            self.cursor = best

    @property
    def current_op(self) -> int | None:
        return self.rows[self.cursor].op if self.rows else None

    def loads_by_cost(self) -> list[int]:
        """Load op ids on this file, most expensive first (L1, L2, ...: the n/N order)."""
        loads = [(load_rank(r) or 0, i) for i, r in self.ranks.items() if load_rank(r) is not None and i in self.row_of]
        return [i for _, i in sorted(loads)]

    def go_to_op(self, op: int) -> None:
        if op in self.row_of:
            self.moved = True
            self.cursor = self.row_of[op]

    def jump_hot(self, step: int) -> int | None:
        """Move to the next (step 1) or previous (-1) load by cost rank from the load under the
        cursor (the first analysis puts it on L1, so the first `n` goes to L2); from a row with no
        ranked load, `n` goes to the hottest load and `N` to the coolest. Returns its op id."""
        order = self.loads_by_cost()
        if not order:
            return None
        cur = self.current_op
        if cur is not None and cur in order:
            nxt = order[(order.index(cur) + step) % len(order)]
        else:
            nxt = order[0] if step > 0 else order[-1]
        self.go_to_op(nxt)
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
                self.moved = True
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
    def code_width(self) -> int:
        """Cells the code gets on a row."""
        return max(1, self.size.width - self.gutter_width)

    @property
    def echo_rows(self) -> int:
        """Rows below the code: the cursor op in full, then the cursor line whole when lines are
        cut (as many rows as the longest needs, up to MAX_ECHO_ROWS) or else the legend."""
        if self.size.height < 10:
            return 1
        if self.longest <= self.code_width:
            return 2
        return 1 + min(MAX_ECHO_ROWS, -(-self.longest // max(1, self.size.width)))

    @property
    def body_height(self) -> int:
        return max(1, self.size.height - 1 - self.echo_rows)

    def _scroll_to_cursor(self, centre: bool = False) -> None:
        h = self.body_height
        if centre:
            self.top = self.cursor - h // 3
        if self.cursor < self.top:
            self.top = self.cursor
        elif self.cursor >= self.top + h:
            self.top = self.cursor - h + 1
        self.top = max(0, min(self.top, max(0, len(self.rows) - h)))

    def on_resize(self, event: events.Resize) -> None:
        self._scroll_to_cursor(centre=not self.moved)
        self.refresh()

    def action_move(self, step: int) -> None:
        self.moved = True
        self.cursor += step

    def action_page(self, step: int) -> None:
        self.moved = True
        self.top = max(0, min(self.top + step * self.body_height, max(0, len(self.rows) - self.body_height)))
        self.cursor += step * self.body_height

    def action_edge(self, step: int) -> None:
        self.moved = True
        self.cursor = 0 if step < 0 else len(self.rows) - 1

    def action_pan(self, step: int) -> None:
        self.pan = max(0, min(self.pan + step, max(0, self.longest - self.code_width + 1)))
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
        if 1 <= event.y <= self.body_height:
            self.moved = True
            self.cursor = self.top + event.y - 1

    # --- rendering --------------------------------------------------------------------------

    def header(self) -> Content:
        cols = f"{'#':>2} {'ln':>{self._digits}} H1% {'cyc':>4} s/r" + (f"{'ΔX':>{delta.GUTTER}}" if self.pinned else "") + "│ "
        shown = self.rows[self.top: self.top + self.body_height]
        where = f"{self.file}  {shown[0].line}–{shown[-1].line}/{self.n_lines}" if shown else self.file
        if self.pan:
            where += f"  ←{self.pan}"
        return Content(cols + where)

    def _gutter(self, row: Row) -> Content:
        """Rank, line number, H1, X and sectors per request of `row`'s op (blanks when none)."""
        rank = self.ranks.get(row.op) if row.op is not None else None
        hot = (load_rank(rank) or HOT + 1) <= HOT
        mark = Content.styled(rank_mark(rank), "bold $text-warning" if hot else MUTED)
        num = Content.styled(f" {row.line:>{self._digits}} " if row.first else f" {'·':>{self._digits}} ", MUTED)
        op = self.ops.get(row.op) if row.op is not None else None
        h1, x, spr, ideal = gutter_cells(self.stats.get(row.op) if op is not None else None,  # type: ignore[arg-type]
                                         op is not None and op.kind == "load", self.levels.l1)
        if op is not None and row.op not in self.stats:
            figures = Content.styled(f"{op.kind[:12]:<12}", MUTED)
        else:
            dim = MUTED if self.stale else ""
            figures = Content.assemble((h1 + " ", dim), (x, dim or "bold"), (" " + spr, dim), (ideal, "$text-success"))
        if self.pinned:
            has = op is not None and row.op is not None and self.against is not None and row.op in self.stats
            d = self.against.op(row.op) if has and self.against is not None and row.op is not None else None
            figures = Content.assemble(figures, delta.gutter_cell(d, has))
        return Content.assemble(mark, num, figures, Content.styled("│", MUTED))

    def _code(self, row: Row) -> Content:
        if not row.first:
            op = self.ops[row.op] if row.op is not None else None
            if op is not None:
                text = f"  ↳ {self.labels[op.id] or 'op ' + str(op.id)} ({op.kind}, {op.bytes} B/lane)"
            else:
                text = f"  ↳ … {row.hidden:,} more ops on this line (the drill-down's n/N steps through every load)"
            return Content.styled(text, f"{MUTED} italic")
        code = self.code[row.line - 1] if 0 < row.line <= len(self.code) else Content("")
        if row.line in self._shared and row.op is not None:
            code = Content.assemble(code, Content.styled(f"  ◂ {self.labels[row.op]}", f"{MUTED} italic"))
        return code

    def _strip(self, content: Content, base: VisualStyle) -> Strip:
        return Strip([Segment(t, s.rich_style) for t, s in content.render(base, end="", parse_style=self._get_style)])

    def _fitted(self, code: Content, room: int) -> Content:
        """`code` scrolled by `pan` into `room` cells, with "…" where it is cut."""
        n = code.cell_length
        left = self.pan > 0 and n > 0
        start = min(self.pan, n)
        shown = code[start:] if start else code
        if shown.cell_length > room:
            shown = shown.truncate(room, ellipsis=True)
        if left and shown.cell_length:
            shown = Content.assemble(Content.styled(ELLIPSIS, MUTED), shown[1:])
        return shown

    def detail(self) -> Content:
        """The cursor op in full: rank, id, label, why, H1, H2, X with the spread of its trials,
        sectors per request against the ideal, share of the cost."""
        op_id = self.current_op
        if op_id is None:
            return Content.styled(f"line {self.current_line} · no memory op (n: the costliest load)", MUTED)
        op, s = self.ops[op_id], self.stats.get(op_id)
        rank = self.ranks.get(op_id)
        head = Content.assemble((f"{rank} " if rank else "", "bold $text-warning"),
                                (f"op {op_id} {op.kind} ", "bold"), (self.labels[op_id], "bold $text-accent"))
        if s is None:
            return Content.assemble(head, (" · waiting for the first trial", MUTED))
        why = self.reason(op_id)
        parts: list[tuple[str, str]] = [(f" · {why}", "bold $text-error")] if why else []
        if s.passes is not None:
            sh = s.passes
            parts += [(f" · shared: {sh.passes:.1f} wavefronts/request, ideal {sh.ideal:.0f}", "")
                      if sh.space == "shared" else (f" · constant: {sh.passes:.1f} requests/warp access", ""),
                      (f" ({sh.ways:.1f}-way)" if sh.extra > 0 else
                       " (no bank conflict)" if sh.space == "shared" else " (a broadcast)", ""),
                      (f" · X {fmt.cyc(sh.latency)}", "bold"),
                      (f" · {fmt.pct(s.cost_share)} of the cost", MUTED)]
            if self.stale:
                parts.append((" · previous run", f"{MUTED} italic"))
            return Content.assemble(head, *parts)
        if op.kind == "load" and self.levels.l1:
            parts.append((f" · H1 {fmt.pct(s.h1.mean if s.h1.defined else None)}", ""))
        if self.levels.l2:
            parts.append((f" H2 {fmt.pct(s.h2.mean if s.h2.defined else None)}", ""))
        parts += [(f" · X {fmt.cyc(s.x.mean if s.x.defined else None)}", "bold"),
                  (f" [trials {fmt.cycles(s.x.spread_lo)}–{fmt.cycles(s.x.spread_hi)}]" if s.x.defined else "",
                   MUTED)]
        if self.against is not None:
            parts += delta.op_summary(self.against.op(op_id), op.kind == "load" and self.levels.l1)
        if fmt.finite(s.sectors_per_access):
            parts.append((f" · {s.sectors_per_access:.1f} sect/req, ideal {s.ideal_sectors:.0f}", ""))
        parts.append((f" · {fmt.pct(s.cost_share)} of the cost", MUTED))
        if self.stale:
            parts.append((" · previous run", f"{MUTED} italic"))
        return Content.assemble(head, *parts)

    def _bottom(self, k: int, width: int) -> Content:
        """Row `k` below the code: the detail line, then the echo of a cut cursor line or the legend."""
        if k == 0:
            return self.detail().truncate(width, ellipsis=True)
        line = self.current_line
        code = self.code[line - 1] if 0 < line <= len(self.code) else Content("")
        if code.cell_length > self.code_width or self.pan:
            lines = code.fold(max(1, width)) if code.cell_length else [Content("")]
            if len(lines) > self.echo_rows - 1:  # longer than the echo: its last row ends in "…"
                keep = lines[self.echo_rows - 2]
                lines[self.echo_rows - 2] = keep.truncate(max(1, keep.cell_length - 1)).append(ELLIPSIS)
            return lines[k - 1] if k - 1 < len(lines) else Content("")
        if k > 1:
            return Content("")
        legend = next((text for text in LEGENDS if len(text) <= width), LEGENDS[-1])
        return Content.styled(legend, MUTED)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        body = self.body_height
        if y == 0:
            base = self.get_visual_style("source-view--header")
            return self._strip(self.header(), base).extend_cell_length(width, base.rich_style).crop(0, width)
        if y > body:
            base = self.get_visual_style("source-view--echo")
            return self._strip(self._bottom(y - body - 1, width), base).extend_cell_length(
                width, base.rich_style).crop(0, width)
        index = self.top + y - 1
        if index >= len(self.rows):
            return Strip.blank(width, self.visual_style.rich_style)
        row = self.rows[index]
        rank = self.ranks.get(row.op) if row.op is not None else None
        if index == self.cursor:
            base = self.get_visual_style("source-view--cursor")
        elif (load_rank(rank) or HOT + 1) <= HOT:
            base = self.get_visual_style("source-view--hot")
        else:
            base = self.visual_style
        left_strip = self._strip(self._gutter(row), base)
        room = max(0, width - left_strip.cell_length)
        code_strip = self._strip(self._fitted(self._code(row), room), base)
        strip = Strip.join([left_strip, code_strip]).extend_cell_length(width, base.rich_style).crop(0, width)
        return self._cursor_colours(strip, base) if index == self.cursor else strip

    def _cursor_colours(self, strip: Strip, base: "VisualStyle") -> Strip:
        """The cursor row in the cursor's own colours: syntax and gutter colours would sit on the
        cursor's background at contrasts down to 1.0:1, so every cell takes the cursor's
        foreground and background, keeping only bold, italic and underline; under NO_COLOR it is
        reverse video (the README's promise: every line already has bold parts)."""
        b = base.rich_style
        reverse = self.app.no_color or None

        def own(style: Style | None) -> Style:
            kept = style or Style()
            return Style(color=b.color, bgcolor=b.bgcolor, bold=b.bold or kept.bold, italic=kept.italic,
                         underline=kept.underline, reverse=reverse)

        return Strip([Segment(seg.text, own(seg.style)) for seg in strip], strip.cell_length)
