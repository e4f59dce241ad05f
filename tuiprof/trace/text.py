"""Text from a trace, made safe to show: control characters escaped, length bounded.

A trace is a file people exchange; its kernel name, file names, labels, source text and
provenance are whatever its author wrote, escape sequences included. Everything a view prints
from a trace goes through `printable`, so that nothing reaches a terminal raw (no ``ESC [2J``,
no OSC title change, no bidirectional-override trickery) and no single string can make a view
allocate without bound.
"""

from __future__ import annotations

import re

ELLIPSIS = "…"


def _escape(c: str) -> str:
    o = ord(c)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def printable(text: str, limit: int | None = None, keep: str = "") -> str:
    """`text` with every non-printable character (C0 and C1 controls, DEL, format characters
    such as bidirectional overrides, line and paragraph separators) written as a visible
    backslash escape, except those in `keep` (for example ``"\\n\\t"``); at most `limit`
    characters, the last one an ellipsis when `text` was cut."""
    if limit is not None:
        if len(text) > limit:
            text = text[: limit + 1]  # bounded work however long the input
    if not text.isprintable():
        text = "".join(c if c.isprintable() or c in keep else _escape(c) for c in text)
    if limit is not None and len(text) > limit:
        text = text[: max(0, limit - 1)] + ELLIPSIS
    return text


_FIRST_INK = re.compile(r"\S")


def one_line(text: str, limit: int | None = None) -> str:
    """`text` for one cell of a table: surrounding blanks dropped, tabs as spaces, and then
    `printable` (a newline in it is escaped, never a new line). Copies at most `limit` + 1
    characters of a long input."""
    first = _FIRST_INK.search(text)
    if first is None:
        return ""
    start = first.start()
    if limit is None:
        return printable(text[start:].rstrip().replace("\t", " "))
    cut = len(text) - start > limit + 1
    shown = printable(text[start: start + limit + 1].rstrip().replace("\t", " "), limit)
    if cut and not shown.endswith(ELLIPSIS):
        shown = shown[: max(0, limit - 1)] + ELLIPSIS
    return shown


__all__ = ["ELLIPSIS", "one_line", "printable"]
