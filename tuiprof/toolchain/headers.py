"""The local headers a CUDA source includes: their texts go into the Program (and so into a
trace, for the source view) and into the build cache key.

``#include "x.h"`` is looked for beside the including file, then in the ``-I`` folders;
``#include <x.h>`` in the ``-I`` folders only. What is not found there is a system or CUDA
header and is left out. Directives are read without preprocessing, so an include under a false
``#if`` still counts: at worst a header too many is recorded. Bounded: at most `MAX_HEADERS`
files of at most `MAX_HEADER_BYTES` each.

An include that names a device, a FIFO or a socket (``#include "/dev/zero"``) is refused here,
before any compiler runs: the compiler would read it until memory or patience ran out. Sources
and headers are read with `tuiprof.files`, the one bounded regular-file reader.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from tuiprof.errors import BuildError
from tuiprof.files import FileRole, read_regular, read_regular_text, regular_file_problem
from tuiprof.toolchain.program import InputFile
from tuiprof.trace.data import MAX_SOURCE_CHARS

MAX_HEADERS = 64
MAX_HEADER_BYTES = 1 << 20
MAX_SOURCE_BYTES = MAX_SOURCE_CHARS
"""A source tuiprof compiles: no larger than the text a trace may embed (`trace.data`), so that
whatever compiles can be recorded."""
CUDA_SOURCE = FileRole(noun="", expected="a CUDA source file", error=BuildError,
                       missing_hint="check the path of the .cu file", other_hint="give the path of a .cu file",
                       folder_hint="give a .cu file", too_large=" (the most source text a trace keeps)")
"""How `tuiprof.files` names a CUDA source (or a header it includes) in its messages."""
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)


def read_source(path: Path) -> bytes:
    """A CUDA source file's bytes: a regular file of at most MAX_SOURCE_BYTES (BuildError otherwise)."""
    return read_regular(path, CUDA_SOURCE, MAX_SOURCE_BYTES)


def read_text(path: Path) -> str:
    """A CUDA source file's text (`read_source`); bytes that are not UTF-8 are replaced rather than refused."""
    return read_regular_text(path, CUDA_SOURCE, MAX_SOURCE_BYTES)


def local_headers(source: Path, text: str, include_dirs: Sequence[Path]) -> tuple[InputFile, ...]:
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
            problem = regular_file_problem(path, CUDA_SOURCE)
            if problem is not None:
                raise BuildError(f"{including.name} includes {name.strip()!r}: {problem.message}",
                                 "include regular files only: the compiler would read a device or a FIFO without end")
            try:
                if path.stat().st_size > MAX_HEADER_BYTES:
                    continue
                header_text = read_regular_text(path, CUDA_SOURCE, MAX_HEADER_BYTES)
            except (OSError, BuildError):
                continue
            found[path] = header_text
            pending.append((path, header_text))
            if len(found) >= MAX_HEADERS:
                break
    return tuple(InputFile(str(p), t) for p, t in found.items())


def _resolve(name: str, kind: str, here: Path, include_dirs: Sequence[Path]) -> Path | None:
    """The file an include names, where it exists (a regular file or not: the caller refuses a
    device or a FIFO); None for a system or CUDA header."""
    folders = ([here] if kind == '"' else []) + list(include_dirs)
    for folder in folders:
        candidate = folder / name
        try:
            if candidate.exists() and not candidate.is_dir():
                return candidate.resolve()
        except (OSError, ValueError):
            continue
    return None


def _strip_comments(text: str) -> str:
    """`text` without /* */ and // comments (strings are not special-cased: an include
    directive never sits inside one)."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)
