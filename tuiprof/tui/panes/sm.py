"""SM utilisation (Farooqui11 Fig. 6): one bar per SM with its busy fraction and CTAs, the
measured/modeled label, the imbalance (max / mean busy) and the idle SMs called out. With many
SMs (an H100 has 132) each SM becomes one cell whose height is its busy fraction."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.content import Content
from textual.widget import Widget

from tuiprof.tui import format as fmt
from tuiprof.tui.themes import MUTED

if TYPE_CHECKING:
    from tuiprof.model.sm_util import SmUtilisation

CELL = 27
"""Width of one SM's bar cell in the detailed layout."""


def render_sm(sm: "SmUtilisation | None", width: int, height: int, waiting: str) -> Content:
    """Farooqui11 Fig. 6 for an SmUtilisation, in `width` x `height` cells."""
    if sm is None:
        return Content.assemble(("SM utilisation", "bold"), ("  (Farooqui11 Fig. 6)\n", MUTED),
                                (waiting, MUTED))
    n = sm.sm_count
    idle = sm.idle_sms
    head = Content.assemble(
        ("SM utilisation ", "bold"), (f"[{sm.source}]", "bold $text-accent"),
        (f"  {n} SMs  (Farooqui11 Fig. 6)", MUTED))
    figures = Content.assemble(("imbalance ", MUTED), (fmt.num(sm.imbalance, 2), "bold"),
                               (" (max/mean busy) · mean busy ", MUTED), (fmt.pct(sm.utilisation), "bold"),
                               (f" · busy in {sm.unit}", MUTED))
    idle_line = (Content.styled(f"⚠ {len(idle)} idle SM{'s' * (len(idle) != 1)}: "
                                + _ranges(idle), "bold $text-warning") if idle
                 else Content.styled("no idle SM", MUTED))
    lines = [head, figures, idle_line]
    if sm.caveat:
        lines.append(Content.styled(f"⚠ {sm.caveat}", "$text-warning"))
    room = max(1, height - len(lines))
    cols = max(1, width // CELL)
    if n <= room * cols and n <= 48:
        per_col = -(-n // cols)
        for r in range(per_col):
            cells: list[Content] = []
            for c in range(cols):
                k = c * per_col + r
                if k >= n:
                    break
                frac = float(sm.busy_fraction[k])
                ctas = int(sm.ctas[k])
                mark = "×" if k in idle else " "
                cells.append(Content.assemble((f"{k:>3}{mark}", MUTED), (fmt.hbar(frac, 8), "$primary"),
                                              (f"{fmt.pct(frac, 0, width=5)} {ctas:>3} CTAs ", "")))
            lines.append(Content("").join(cells))
    else:
        # Compact: one cell per SM, its height the busy fraction; × marks an idle SM.
        per_row = max(8, min(width - 6, 66))
        for start in range(0, n, per_row):
            seg = range(start, min(n, start + per_row))
            glyphs = "".join("×" if k in idle else fmt.vcell(float(sm.busy_fraction[k])) for k in seg)
            lines.append(Content.assemble((f"{start:>4} ", MUTED), (glyphs, "$primary")))
        busy = sm.busy_fraction
        lines.append(Content.styled(f"busy min {fmt.pct(float(busy.min()))} · max {fmt.pct(float(busy.max()))} · "
                                    f"CTAs {int(sm.ctas.min())}–{int(sm.ctas.max())} per SM · × = idle", MUTED))
    return Content("\n").join(line.truncate(max(1, width), ellipsis=True) for line in lines[:height])


def _ranges(ids: tuple[int, ...]) -> str:
    """(0, 1, 2, 5) -> '0–2, 5'."""
    out, start, prev = [], None, None
    for i in ids:
        if start is None:
            start = prev = i
        elif i == prev + 1:  # type: ignore[operator]  # prev is set with start
            prev = i
        else:
            out.append(f"{start}–{prev}" if prev != start else f"{start}")
            start = prev = i
    if start is not None:
        out.append(f"{start}–{prev}" if prev != start else f"{start}")
    return ", ".join(out)


class SmPane(Widget):
    DEFAULT_CSS = """
    SmPane { height: auto; max-height: 20; padding: 0 1; }
    SmPane.-stale { text-opacity: 60%; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.sm: "SmUtilisation | None" = None
        self.waiting = "waiting for the main run…"

    def show(self, sm: "SmUtilisation | None", waiting: str | None = None) -> None:
        """Show `sm` (or `waiting` while there is none); nothing is redrawn when neither changed
        (the app calls this with every analysis of a run, and a redraw here lays out the screen)."""
        waiting = self.waiting if waiting is None else waiting
        if sm is self.sm and waiting == self.waiting:
            return
        self.sm, self.waiting = sm, waiting
        self.refresh(layout=True)

    def render(self) -> Content:
        return render_sm(self.sm, self.content_size.width or 80, 16, self.waiting)
