"""Small modal screens: help, error, export, MD picker, arch picker."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.geometry import Size
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from tuiprof import units
from tuiprof.errors import TuiprofError
from tuiprof.tui import format as fmt
from tuiprof.tui.text import MAX_MESSAGE, clean

if TYPE_CHECKING:
    from tuiprof.model.md import MdDecision

def modal_css(screen: str) -> str:
    """The CSS every modal shares, for the screen class named `screen`: a centred box within the
    terminal. Written with the class's own name because Textual scopes a widget's DEFAULT_CSS
    under that name (a rule for `ModalScreen > Vertical` there would match nothing)."""
    return f"""
    {screen} {{ align: center middle; background: $background 60%; }}
    {screen} > Vertical {{ width: 76; max-width: 100%; height: auto; max-height: 100%;
        border: round $primary; background: $surface; padding: 0 1; }}
    {screen} .title {{ text-style: bold; color: $text-primary; padding-bottom: 1; }}
    {screen} .hint {{ color: $text-muted; width: 100%; }}
    {screen} .error {{ color: $text-error; text-style: bold; }}
    """


KEY_COLUMN = 18
"""Cells of the help's key column (two of indent, then the key): descriptions wrap beside it."""
KeyGroups = list[tuple[str, list[tuple[str, str]]]]
"""The help's groups: (title, [(key, what it does)])."""


def key_lines(groups: KeyGroups, width: int) -> list[Content]:
    """The help's lines at `width` cells: each group's title, then its keys, every description
    wrapped in its own column (a hanging indent: no wrapped line restarts under the keys)."""
    room = max(12, width - KEY_COLUMN)
    lines: list[Content] = []
    for title, keys in groups:
        lines.append(Content.styled(title, "bold $text-accent"))
        for key, what in keys:
            parts = textwrap.wrap(what, room) or [""]
            if len(key) > KEY_COLUMN - 3:  # a long term: alone on its line, its meaning below
                lines.append(Content.styled(f"  {key}", "bold"))
                parts.insert(0, "")
                lines += [Content(" " * KEY_COLUMN + part) for part in parts[1:]]
                continue
            lines.append(Content.assemble((f"  {key:<{KEY_COLUMN - 3}} ", "bold"), parts[0]))
            lines += [Content(" " * KEY_COLUMN + part) for part in parts[1:]]
        lines.append(Content(""))
    return lines


class KeyTable(Widget):
    """The keys and what they do, laid out for the width it gets (see `key_lines`)."""

    DEFAULT_CSS = "KeyTable { height: auto; }"

    def __init__(self, groups: KeyGroups, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.groups = groups

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(key_lines(self.groups, width))

    def render(self) -> Content:
        return Content("\n").join(key_lines(self.groups, self.content_size.width or 80))


class HelpScreen(ModalScreen[None]):
    """Every key of the app, generated from the action registry so it cannot drift; it scrolls
    (↑↓, PgUp/PgDn, home/end) when it is taller than the terminal, and its descriptions wrap
    within their column at any width."""

    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close", id="help.close"),
                Binding("up,k", "scroll(-1)", "Up", show=False, id="help.up"),
                Binding("down,j", "scroll(1)", "Down", show=False, id="help.down"),
                Binding("pageup", "scroll(-10)", "Page up", show=False, id="help.page-up"),
                Binding("pagedown,space", "scroll(10)", "Page down", show=False, id="help.page-down"),
                Binding("home,g", "scroll(-100000)", "Top", show=False, id="help.top"),
                Binding("end,G", "scroll(100000)", "Bottom", show=False, id="help.bottom")]
    DEFAULT_CSS = modal_css("HelpScreen") + """
    HelpScreen > Vertical { width: 96; max-width: 100%; height: 90%; }
    HelpScreen VerticalScroll { height: 1fr; }
    """

    def __init__(self, groups: Iterable[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__()
        self.groups = list(groups)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("tuiprof keys and terms", classes="title")
            with VerticalScroll():
                yield KeyTable(self.groups, id="help-text")
            yield Label("↑↓ PgUp PgDn scroll · ctrl+p: command palette (tuiprof commands, themes) · esc closes",
                        classes="hint")

    def action_scroll(self, rows: int) -> None:
        view = self.query_one(VerticalScroll)
        view.scroll_to(y=max(0, min(view.max_scroll_y, view.scroll_y + rows)), animate=False)


class ErrorScreen(ModalScreen[None]):
    """A run failure or a bad configuration: the message and its hint, never a traceback.

    `fatal` (the target could not be opened): nothing else can be done, so every closing key
    quits the app (which then prints the error and exits 2)."""

    BINDINGS = [Binding("escape,enter", "close", "Close", id="error.close"),
                Binding("q", "app.quit", "Quit", id="error.quit"),
                Binding("r", "then('rerun')", "Rerun", show=False, id="error.rerun"),
                Binding("a", "then('arch')", "Arch", show=False, id="error.arch")]
    DEFAULT_CSS = modal_css("ErrorScreen") + "ErrorScreen > Vertical { border: round $error; }"

    def __init__(self, error: TuiprofError, context: str = "", *, fatal: bool = False) -> None:
        super().__init__()
        self.error = error
        self.context = context
        self.fatal = fatal

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Content(clean(self.context or "tuiprof could not finish", MAX_MESSAGE)), classes="title")
            yield Static(Content.styled(f"error: {clean(self.error.message, MAX_MESSAGE, newlines=True)}",
                                        "bold $text-error"), id="error-message")
            if self.error.hint:
                yield Static(Content(f"hint: {clean(self.error.hint, MAX_MESSAGE, newlines=True)}"), id="error-hint")
            keys = "q, esc or enter: quit" if self.fatal else "esc: close · r: rerun · a: another arch · q: quit"
            yield Label(keys, classes="hint")

    async def action_close(self) -> None:
        if self.fatal:
            await self.app.action_quit()
        else:
            self.dismiss()

    async def action_then(self, action: str) -> None:
        """Close, then run the app's `action` (r, a); with nothing opened, quit instead."""
        if self.fatal:
            await self.app.action_quit()
            return
        self.dismiss()
        await self.app.run_action(action)


def working_folder() -> str:
    """The folder a relative export name is written in, as the export dialog shows it."""
    try:
        return clean(Path.cwd(), MAX_MESSAGE)
    except OSError:  # removed from under the process
        return "the current folder (which no longer exists)"


class ExportScreen(ModalScreen[Path | None]):
    """Ask where to write the report; the suffix picks the format (.txt, .md, .json)."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="export.cancel")]
    DEFAULT_CSS = modal_css("ExportScreen")

    def __init__(self, default: str) -> None:
        super().__init__()
        self.default = default

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Export the report", classes="title")
            yield Input(value=self.default, id="export-path", select_on_focus=False)
            yield Label(Content.assemble(("a relative name is written in ", ""), (working_folder(), "bold")),
                        id="export-folder")
            yield Label("enter writes it (atomically) · .json / .md / .txt choose the format · esc cancels",
                        classes="hint")

    def on_mount(self) -> None:
        """The name is edited, not replaced: the cursor at its end, nothing selected (backspace
        changes the suffix instead of erasing the name)."""
        field = self.query_one(Input)
        field.focus()
        field.cursor_position = len(field.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        value = event.value.strip()
        self.dismiss(Path(value) if value else None)


class MdScreen(ModalScreen[int | None]):
    """Pick the MD (resident CTAs per SM) to simulate; the predictions are shown when known."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="md.cancel")]
    DEFAULT_CSS = modal_css("MdScreen")

    def __init__(self, limit: int, current: int, decision: "MdDecision | None") -> None:
        super().__init__()
        self.limit, self.current, self.decision = limit, current, decision

    def compose(self) -> ComposeResult:
        d = self.decision
        options = []
        for md in range(1, self.limit + 1):
            text = f"MD {md:>2}"
            if d is not None:
                t = d.thesis.row(md).relative_performance if md <= d.thesis.max_md else None
                s = d.timing.relative_performance(md) if d.timing and md <= len(d.timing.times) else None
                text += f"   timing {fmt.num(s, 2, 5)}   thesis {fmt.num(t, 2, 5)}"
                text += "   default" * (md == d.default_md) + "   ★ recommended" * (md == d.recommended_md)
            text += "   ▸ now" * (md == self.current)
            options.append(Option(text, id=str(md)))
        with Vertical():
            yield Label("Simulate at which MD (CTAs per SM)?", classes="title")
            yield OptionList(*options, id="md-options")
            yield Label("timing, thesis: throughput vs MD 1 (timing model, Yen14's rules) · enter reruns at that "
                        "MD · esc cancels" + ("" if d is not None else " · predictions appear after the MD sweep"),
                        classes="hint")

    def on_mount(self) -> None:
        self.query_one(OptionList).highlighted = self.current - 1

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(int(event.option.id or self.current))


WHAT_IF = (("l1.size", "L1 size"), ("l1.assoc", "L1 associativity"), ("l2.size", "L2 size"),
           ("l2.assoc", "L2 associativity"))


class ArchScreen(ModalScreen[tuple[str, dict[str, str]] | None]):
    """Pick a GPU preset and, optionally, what-if L1/L2 sizes and associativities, validated
    exactly as `--arch` / `--set` are before the picker closes."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="arch.cancel")]
    DEFAULT_CSS = modal_css("ArchScreen") + """
    ArchScreen > Vertical { width: 100; }
    ArchScreen OptionList { height: auto; max-height: 10; }
    ArchScreen .field { height: 1; }
    ArchScreen #arch-list { margin-bottom: 1; }
    ArchScreen .field Label { width: 20; padding: 0 1 0 0; }
    ArchScreen .field Input { width: 1fr; }
    ArchScreen #arch-error { height: auto; }
    ArchScreen #arch-buttons { height: 1; margin-top: 1; align-horizontal: right; }
    """

    def __init__(self, presets: list[tuple[str, str]], current: str, overrides: dict[str, str]) -> None:
        super().__init__()
        self.presets, self.current, self.overrides = presets, current, dict(overrides)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("GPU model and what-if cache edits", classes="title")
            yield OptionList(*[Option(f"{name:<12} {desc}", id=name) for name, desc in self.presets], id="arch-list")
            for key, label in WHAT_IF:
                with Horizontal(classes="field"):
                    yield Label(label)
                    yield Input(value=self.overrides.get(key, ""), placeholder="preset value (e.g. 48KiB, 4)",
                                id=f"set-{key.replace('.', '-')}", compact=True)
            yield Static("", id="arch-error", classes="error")
            with Horizontal(id="arch-buttons"):
                yield Button("Apply and rerun", variant="primary", id="arch-apply", compact=True)
            yield Label("↑↓ preset · tab to the fields · enter applies · esc cancels", classes="hint")

    def on_mount(self) -> None:
        ol = self.query_one(OptionList)
        names = [n for n, _ in self.presets]
        ol.highlighted = names.index(self.current) if self.current in names else 0
        ol.focus()

    @property
    def chosen(self) -> str:
        ol = self.query_one(OptionList)
        i = ol.highlighted if ol.highlighted is not None else 0
        return self.presets[i][0]

    def values(self) -> dict[str, str]:
        out = {}
        for key, _ in WHAT_IF:
            text = self.query_one(f"#set-{key.replace('.', '-')}", Input).value.strip()
            if text:
                out[key] = text
        return out

    def apply(self) -> None:
        from tuiprof.arch.presets import load_arch

        name, overrides = self.chosen, self.values()
        try:
            load_arch(name, overrides)
        except TuiprofError as exc:
            self.query_one("#arch-error", Static).update(
                Content(clean(f"error: {exc.message}" + (f"\nhint: {exc.hint}" if exc.hint else ""), MAX_MESSAGE,
                              newlines=True)))
            return
        self.dismiss((name, overrides))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.apply()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        """Each what-if field shows the highlighted preset's own value as its placeholder."""
        from tuiprof.arch.presets import load_arch

        arch = load_arch(self.chosen)
        values = {"l1.size": arch.l1.size, "l1.assoc": arch.l1.assoc, "l2.size": arch.l2.size,
                  "l2.assoc": arch.l2.assoc}
        for key, value in values.items():
            text = units.size(value) if key.endswith("size") else str(value)
            self.query_one(f"#set-{key.replace('.', '-')}", Input).placeholder = f"{self.chosen}: {text}"

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.apply()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.apply()
