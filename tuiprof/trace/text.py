"""Text from a trace, made safe to show: control characters escaped, length bounded.

A trace is a file people exchange; its kernel name, file names, labels, source text and
provenance are whatever its author wrote, escape sequences included. Everything a view prints
from a trace goes through `printable`, so that nothing reaches a terminal raw (no ``ESC [2J``,
no OSC title change, no bidirectional-override trickery) and no single string can make a view
allocate without bound.
"""

from __future__ import annotations

import os
import re

ELLIPSIS = "…"
PATH_CHARS = 300
"""Characters of a file name in a message (a 5,000-character name keeps its start and end)."""


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
    plain = text
    for k in keep:
        plain = plain.replace(k, "")
    if not plain.isprintable():
        if keep:  # split on the kept characters so that each part keeps the fast path
            text = keep[0].join(printable(part, keep=keep[1:]) for part in text.split(keep[0]))
        else:
            text = "".join(c if c.isprintable() else _escape(c) for c in text)
    if limit is not None and len(text) > limit:
        text = text[: max(0, limit - 1)] + ELLIPSIS
    return text


_FIRST_INK = re.compile(r"\S")


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, the last one an ellipsis when it was longer."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + ELLIPSIS


def excerpt(text: str, limit: int) -> str:
    """`text` without surrounding blanks, cut like `clip`; copies at most `limit` + 1
    characters of a long input (a source line of a megabyte costs nothing)."""
    first = _FIRST_INK.search(text)
    if first is None:
        return ""
    start = first.start()
    part = text[start: start + limit + 1].rstrip()
    if len(text) - start > limit + 1 and len(part) <= limit:  # cut inside a run of blanks
        part = part[: max(0, limit - 1)] + ELLIPSIS
    return clip(part, limit)


def one_line(text: str, limit: int | None = None) -> str:
    """`text` for one cell of a table: tabs as spaces, then `printable` (a newline in it is
    escaped, never a new line)."""
    return printable(text.replace("\t", " "), limit)


def shown_path(path: str | os.PathLike[str]) -> str:
    """A file name as a message or report shows it: `printable`, and at most PATH_CHARS
    characters (the start and the end of a longer one)."""
    text = printable(os.fsdecode(path))
    if len(text) > PATH_CHARS:
        half = PATH_CHARS // 2
        text = text[:half] + ELLIPSIS + text[-half:]
    return text


__all__ = ["ELLIPSIS", "PATH_CHARS", "clip", "excerpt", "one_line", "printable", "shown_path"]
