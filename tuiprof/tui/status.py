"""The status bar and the footer: one line each, both keeping what matters most at any width.

The status bar is a list of fields in display order, each with a priority: when the line is too
narrow the least important go first (issue 25: the run's phase, the arch with its what-if `*`,
the MD and the kernel outlast the hit ratios, the seed, the tolerance and the trace's origin),
and separators are drawn only between the fields kept, never dangling. The footer keeps `? Help`
and `q Quit` on the right at every width, beside Textual's `^p palette`.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import HorizontalGroup
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from tuiprof.tui.themes import MUTED

GROUP_SEP, FIELD_SEP = " │ ", " · "
"""Between fields of different groups, and between fields of one group."""


@dataclass(frozen=True)
class Field:
    """One part of the status line: its text as (text, style) pieces, its `priority` (0 is kept
    longest) and its `group` (fields of one group are joined by " · ", groups by " │ ")."""

    pieces: tuple[tuple[str, str], ...]
    priority: int
    group: int

    @property
    def width(self) -> int:
        return sum(Content(t).cell_length for t, _ in self.pieces)


def fit(fields: list[Field], width: int) -> Content:
    """`fields` in their order on one line of at most `width` cells: the fields of the highest
    priority numbers are left out until the rest fit; a lone field that is still too long is cut
    with an ellipsis."""
    kept = [f for f in fields if f.width]

    def total(fs: list[Field]) -> int:
        return sum(f.width for f in fs) + sum(len(GROUP_SEP if a.group != b.group else FIELD_SEP)
                                              for a, b in zip(fs, fs[1:]))

    while len(kept) > 1 and total(kept) > width:
        worst = max(kept, key=lambda f: f.priority)
        kept.remove(worst)
    pieces: list[tuple[str, str]] = []
    for i, f in enumerate(kept):
        if i:
            pieces.append((GROUP_SEP if f.group != kept[i - 1].group else FIELD_SEP, MUTED))
        pieces.extend(f.pieces)
    line = Content.assemble(*pieces)
    return line.truncate(max(1, width), ellipsis=True) if line.cell_length > width else line


class StatusBar(Widget):
    """One line: target, the run's phase, the headline ratios, then arch, MD, kernel, seed,
    tolerance and the trace's origin; fitted to its width whenever it is drawn (a resize
    included)."""

    DEFAULT_CSS = "StatusBar { height: 1; background: $panel; color: $foreground; padding: 0 1; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.fields: list[Field] = []

    def show(self, fields: list[Field]) -> None:
        """Show `fields` (redrawn only when they changed: the app calls this with every trial)."""
        if fields == self.fields:
            return
        self.fields = fields
        self.refresh()

    def render(self) -> Content:
        return fit(self.fields, self.content_size.width or 80)


PINNED = ("help", "quit")
"""Footer actions kept on the right at every width (the others are cut first)."""


class AppFooter(Footer):
    """Textual's footer with `? Help`, `q Quit` and `^p palette` in one group docked right, so
    that a narrow terminal cuts the other keys, never these."""

    DEFAULT_CSS = """
    AppFooter .pinned { dock: right; width: auto; height: 1; background: $footer-background; }
    AppFooter .pinned FooterKey.-command-palette { dock: none; }
    """

    def __init__(self, *children: Widget, **kwargs: object) -> None:
        super().__init__(*children, **kwargs)  # type: ignore[arg-type]
        self._composed: tuple[object, ...] | None = None
        """What the keys shown were composed from (`_keys`)."""

    def _keys(self) -> tuple[object, ...]:
        """Everything `compose` reads: the screen's active bindings as shown (key, its display,
        description, action, group, whether enabled, tooltip) and the palette's key."""
        if not self._bindings_ready:
            return ()
        return (self.show_command_palette, tuple(
            (b.key, self.app.get_key_display(b), b.description, b.action, b.group, b.show, enabled, tooltip)
            for _, b, enabled, tooltip in self.screen.active_bindings.values()))

    async def recompose(self) -> None:
        """Rebuilt only when the keys it shows changed: Textual recomposes the footer on every
        bindings change (each focus change, each screen closed over it), and removing and
        mounting its ~25 keys cost ~20 ms of the UI thread for each dialog closed. Nor is it
        rebuilt while its screen is covered by another (the drill-down's focus change would have
        it rebuilt twice, for nobody): the bindings change that comes when its screen is shown
        again brings it up to date."""
        if not self.is_attached or self.screen is not self.app.screen:
            return
        if self._composed is not None and self._composed == self._keys():
            return
        await super().recompose()

    def compose(self) -> ComposeResult:
        self._composed = self._keys()
        pinned: list[FooterKey] = []
        for widget in super().compose():
            if isinstance(widget, FooterKey) and (widget.action in PINNED or widget.has_class("-command-palette")):
                pinned.append(widget)
            else:
                yield widget
        if pinned:
            with HorizontalGroup(classes="pinned"):  # a class: Footer recomposes on every bindings change, and two recomposes in flight would clash on an id
                yield from pinned
