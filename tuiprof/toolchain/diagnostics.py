"""The compiler's own messages, made readable: the first errors with file:line, trimmed.

nvcc (cudafe/cicc) and NVRTC both write ``path(LINE): error: text`` followed by the source line
and a caret; ptxas writes ``ptxas error : text``; the drivers write ``nvcc fatal : text`` or
``nvrtc: error: text``; the host preprocessor (gcc) writes ``path:LINE:COL: fatal error: text``.
`summarize_errors` rewrites the located forms as ``path:LINE: error: text``,
keeps the context lines under each error, and stops after a few errors and a bounded length.
"""

from __future__ import annotations

import re

MAX_ERRORS = 4
MAX_CONTEXT_LINES = 2
MAX_LINE = 200
MAX_CHARS = 2000
MAX_LOG_CHARS = 4000

_LOCATED = re.compile(r"^(?P<path>[^\s(:][^(:]*?)(?:\((?P<line>\d+)\)|:(?P<gline>\d+)(?::\d+)?):"
                      r" (?P<kind>(?:catastrophic |fatal )?error|warning)(?P<rest>.*)$")
_TOOL = re.compile(r"^\s*(?:ptxas|nvcc|nvrtc|nvlink|cicc|fatbinary)[^:]*?(?:error|fatal)\s*:", re.I)
_INFO = re.compile(r"^\s*ptxas(?: info)?\s*(?::|\.)|^\s*\d+ bytes stack frame")


def _trim(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= MAX_LINE else line[:MAX_LINE - 3] + "..."


def summarize_errors(output: str) -> str:
    """The first errors of a failed compile's output, located as file:line, bounded."""
    lines = [ln for ln in output.splitlines() if not _INFO.match(ln)]
    picked: list[str] = []
    count = 0
    i = 0
    while i < len(lines) and count < MAX_ERRORS:
        m = _LOCATED.match(lines[i])
        if m and "error" in m.group("kind"):
            line = m.group("line") or m.group("gline")
            picked.append(_trim(f"{m.group('path')}:{line}: {m.group('kind')}{m.group('rest')}"))
            context = 0
            i += 1
            while i < len(lines) and context < MAX_CONTEXT_LINES and lines[i].strip() \
                    and not _LOCATED.match(lines[i]) and not _TOOL.match(lines[i]):
                picked.append("  " + _trim(lines[i]))
                context += 1
                i += 1
            count += 1
            continue
        if _TOOL.match(lines[i]):
            picked.append(_trim(lines[i].strip()))
            count += 1
        i += 1
    if not picked:
        picked = [_trim(ln) for ln in lines if ln.strip()][:8]
    total = sum(1 for ln in lines if (m := _LOCATED.match(ln)) and "error" in m.group("kind"))
    if total > MAX_ERRORS:
        picked.append(f"... and {total - MAX_ERRORS} more errors")
    text = "\n".join(picked)
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS - 4] + "\n..."


def warnings_of(output: str) -> str:
    """The compiler's messages of a successful compile, without ptxas's resource report."""
    lines = [_trim(ln) for ln in output.splitlines() if ln.strip() and not _INFO.match(ln)]
    text = "\n".join(lines)
    return text if len(text) <= MAX_LOG_CHARS else text[:MAX_LOG_CHARS - 4] + "\n..."


def missing_include(output: str) -> str | None:
    """The header named by a 'cannot open source file' error, if there is one."""
    m = (re.search(r'(?:cannot|could not) open source file "([^"]+)"', output)
         or re.search(r"fatal error: ([^\s:]+): No such file or directory", output))
    return m.group(1) if m else None
