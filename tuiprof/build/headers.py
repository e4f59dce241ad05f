"""The local headers a CUDA source includes: their texts go into the Program (and so into a
trace, for the source view) and into the build cache key.

``#include "x.h"`` is looked for beside the including file, then in the ``-I`` folders;
``#include <x.h>`` in the ``-I`` folders only. What is not found there is a system or CUDA
header and is left out. Directives are read without preprocessing, so an include under a false
``#if`` still counts: at worst a header too many is recorded. Bounded: at most `MAX_HEADERS`
files of at most `MAX_HEADER_BYTES` each.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from tuiprof.build.program import SourceFile

MAX_HEADERS = 64
MAX_HEADER_BYTES = 1 << 20
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)


def read_text(path: Path) -> str:
    """A source file's text; bytes that are not UTF-8 are replaced rather than refused."""
    return path.read_bytes().decode("utf-8", "replace")


def local_headers(source: Path, text: str, include_dirs: Sequence[Path]) -> tuple[SourceFile, ...]:
    """The local headers `source` (whose text is `text`) includes, directly or not, in the order
    first met."""
    found: dict[Path, str] = {}
    pending: list[tuple[Path, str]] = [(source.resolve(), text)]
    seen = {source.resolve()}
    while pending and len(found) < MAX_HEADERS:
        including, body = pending.pop(0)
        for kind, name in _INCLUDE.findall(_strip_comments(body)):
            path = _resolve(name.strip(), kind, including.parent, include_dirs)
            if path is None or path in seen:
                continue
            seen.add(path)
            try:
                if path.stat().st_size > MAX_HEADER_BYTES:
                    continue
                header_text = read_text(path)
            except OSError:
                continue
            found[path] = header_text
            pending.append((path, header_text))
            if len(found) >= MAX_HEADERS:
                break
    return tuple(SourceFile(str(p), t) for p, t in found.items())


def _resolve(name: str, kind: str, here: Path, include_dirs: Sequence[Path]) -> Path | None:
    folders = ([here] if kind == '"' else []) + list(include_dirs)
    for folder in folders:
        candidate = folder / name
        if candidate.is_file():
            return candidate.resolve()
    return None


def _strip_comments(text: str) -> str:
    """`text` without /* */ and // comments (strings are not special-cased: an include
    directive never sits inside one)."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)
