"""Strings from a trace (kernel and file names, labels, source text, provenance) made safe to draw.

A trace is a file users exchange, so every string in it is untrusted: a kernel name holding
``ESC [2J`` would clear the user's terminal, a bidi override would reorder what is shown, and a
1 MB source line would cost gigabytes to lay out. Everything the UI draws from a trace goes
through `clean` (control characters made visible, length capped) and is put into a `Content`
as plain text, never parsed as markup.
"""

from __future__ import annotations

import re

MAX_LINE = 1000
"""Characters of one source line drawn in the source pane; the rest is cut with an ellipsis."""
MAX_SOURCE = 4_000_000
"""Characters of source text highlighted in all (after the per-line cap); beyond, shown plain."""
MAX_NAME = 120
"""Characters of a kernel, file or arch name drawn anywhere."""
MAX_LABEL = 80
"""Characters of an op's label (the expression it accesses) drawn in the gutter and titles."""
MAX_OPS_PER_LINE = 24
"""Gutter rows one source line gets; further ops on that line are summed up in one row (the
drill-down's n/N still steps through every load)."""
MAX_MESSAGE = 2000
"""Characters of an error message or hint drawn in a modal."""
ELLIPSIS = "…"

# C0 controls except tab and newline, DEL, C1 controls, and the Unicode format characters that
# reorder or hide text (bidi embeddings, overrides and isolates, zero-width marks, BOM).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]")


def _visible(match: re.Match[str]) -> str:
    """A visible stand-in: the Unicode control picture for C0 and DEL (ESC -> ␛), else U+FFFD."""
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    return "\ufffd"


def clean(text: object, limit: int = MAX_NAME, *, newlines: bool = False) -> str:
    """`text` with every control and reordering character replaced by a visible stand-in, tabs
    expanded, at most `limit` characters (cut with an ellipsis); newlines are kept only when
    `newlines` is true (else shown as ␊)."""
    s = str(text)
    if len(s) > limit:
        s = s[: max(0, limit - 1)] + ELLIPSIS
    if not newlines:
        s = s.replace("\n", "\u240a")
    s = s.expandtabs(4) if "\t" in s else s
    return _UNSAFE.sub(_visible, s)


def clean_source(text: str) -> str:
    """Source text safe to highlight and draw: each line cleaned and capped at `MAX_LINE`
    characters, the line count unchanged (op line numbers still point at the right lines)."""
    lines = text.split("\n")
    return "\n".join(clean(line.rstrip("\r"), MAX_LINE) for line in lines)


def file_part(text: str, limit: int = 40) -> str:
    """`text` reduced to characters safe in a file name ([A-Za-z0-9._-], others '_'), at most
    `limit` long, for the export's default name."""
    s = re.sub(r"[^A-Za-z0-9._-]", "_", text)[:limit].lstrip(".")
    return s or "kernel"
