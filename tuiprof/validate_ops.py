"""`tuiprof validate --per-op`: each memory op's prediction against Nsight Compute's source page.

ncu's source page (``ncu --import REPORT --csv --page source --print-source cuda,sass``, from a
report collected with the ``SourceCounters`` section) gives counters per SASS instruction, each
listed under the CUDA source line it was compiled from (a build with ``-lineinfo``). The layout
read here was checked against ncu 2025.3.1's exports of three demos on an H100 (kept in
tests/ncu/, described in its README): a ``"File Path","<file>"`` row and a ``"Function Name"`` row
(``"Kernel Name"`` is read too), one header row ``"Line No","Source","Address","Source",`` and
the counters by name (64 to 68 columns, depending on the kernel), then for each source line with
code a row with its number, its CUDA text and the line's totals (``"-"`` in Address and the SASS
Source), followed by the SASS instructions compiled from it (Line No and Source empty, Address a
``0x...`` hex, the instruction text); a row whose Address is ``"..."`` marks a gap (instructions
other lines own) and is skipped. ``"-"`` or an empty cell stands for a count that does not apply.
Every cell is in double quotes and no quote is escaped, so CUDA text such as ``extern "C"`` is
split by `split_row`, not by Python's csv. The columns read, by name (others, and their order,
do not matter):

====================================  ===========================================================
Instructions Executed                 warp instructions executed (requests, one per warp)
L1 Tag Requests Global                L1 tag lookups: one per 128 B line a request touches
L2 Theoretical Sectors Global         32 B sectors the instruction's addresses touch
L2 Theoretical Sectors Global Ideal   the fewest sectors each request's active lanes could take
L2 Theoretical Sectors Global Excessive  the difference (uncoalesced sectors)
====================================  ===========================================================

The source page has no per-instruction hit or miss counters (the L1 and L2 count those per
kernel only): per op, the comparison is of what each op moves (sectors per request, 128 B lines
per request, excessive sectors, the op's share of the kernel's sectors and requests), with
tuiprof's predicted L1 and L2 hit ratios and L1 miss sectors beside it, and the kernel's misses
stay the headline comparison. ncu's counts cover the whole grid and tuiprof's the snapshot, so
only ratios and shares are compared (a data-dependent access differs by what the snapshot's CTAs
hold: spmv-u's loop loads, 21.63 sectors per request in its 336 CTAs, 21.62 in the grid's 512).
SASS instructions are grouped by (source file, line, kind) and matched to tuiprof's ops with the
same key: one row per group (a line with two loads of one kind is one row, its ops listed), so
that unrolled or rotated copies of an access fall together.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING

from tuiprof.collect.gpu.ncu import ValidateError

if TYPE_CHECKING:
    from tuiprof.model.analysis import Analysis

EXECUTED = "Instructions Executed"
REQUESTS = "L1 Tag Requests Global"
SECTORS = "L2 Theoretical Sectors Global"
IDEAL = "L2 Theoretical Sectors Global Ideal"
EXCESSIVE = "L2 Theoretical Sectors Global Excessive"
GAP = "..."
"""The Address (and SASS) cell of a gap row: instructions between a line's own that other lines own."""
SOURCE_HINT = ("export the page with `ncu --import REPORT.ncu-rep --csv --page source --print-source cuda,sass` "
               "from a report with the SourceCounters section, of a kernel built with -lineinfo")

_LINE_HEADERS = {"Line No": "Line No", "Line": "Line No", "Line Number": "Line No"}
"""The first header cell of the source view, as ncu versions spell it (a leading "#" dropped)."""
_GLOBAL = {"load": re.compile(r"^(LDG|LD|LDGSTS)\b"), "store": re.compile(r"^(STG|ST)\b"),
           "atomic": re.compile(r"^(ATOMG|ATOM|RED|REDG)\b")}


@dataclass(frozen=True)
class SassRow:
    """One SASS instruction of the source page: where it came from, what it is, its counters."""

    file: str
    line: int
    address: str
    instruction: str
    executed: float
    requests: float
    sectors: float
    ideal: float
    excessive: float

    @property
    def kind(self) -> str | None:
        """load, store or atomic for a global (or generic) memory instruction, else None."""
        text = self.instruction.strip()
        if text.startswith("@"):  # a predicate guard: "@P0 LDG.E ..."
            text = text.split(None, 1)[1] if " " in text else ""
        for kind, pattern in _GLOBAL.items():
            if pattern.match(text):
                return kind
        return None


def _count(text: str, where: str) -> float:
    t = text.strip().replace(",", "")
    if t in ("", "-", "n/a", "N/A"):
        return 0.0
    try:
        value = float(t)
    except ValueError:
        raise ValidateError(f"ncu's source page has {text!r} where a count belongs ({where})", SOURCE_HINT) from None
    if not math.isfinite(value) or value < 0:
        raise ValidateError(f"ncu's source page has {text!r} where a count belongs ({where})", SOURCE_HINT)
    return value


def _cell(row: list[str], header: dict[str, int], name: str, where: str) -> float:
    """Column `name` of `row` as a count (0 where the page has no such column)."""
    i = header.get(name)
    return 0.0 if i is None else _count(row[i], where)


def split_row(line: str, width: int, text_at: int | None) -> list[str] | None:
    """The `width` cells of one row of ncu's CSV, or None where the row cannot have them.

    ncu writes every cell in double quotes and escapes none (a CUDA line ``extern "C" ...`` is
    written as it stands), so a row that starts and ends with a quote is split at ``","``. The
    CUDA source cell, column `text_at`, is the only one that can hold a quote; a line row (its first
    cell filled) whose source text holds ``","`` splits into extra pieces, so the cells before that
    column are split off from the left and the cells after it from the right, and whatever lies
    between is the source text. An instruction row has an empty source cell: it must split into
    exactly `width` cells. A row that is not so framed is read as ordinary CSV, exactly `width`
    cells."""
    framed = len(line) >= 2 and line[0] == '"' and line[-1] == '"'
    if framed:
        inner = line[1:-1]
        if text_at is None or not 0 <= text_at < width:
            cells = inner.split('","')
        else:
            head = inner.split('","', text_at)
            tail = head.pop().rsplit('","', width - text_at - 1) if len(head) > text_at else []
            cells = head + tail
            if len(cells) == width and '","' in cells[text_at] and not cells[0].strip():
                return None  # an instruction row with a cell too many
        if len(cells) == width:
            return cells
    try:
        cells = next(csv.reader([line]), [])
    except csv.Error:
        return None
    return cells if len(cells) == width else None


def _head_cells(line: str) -> list[str]:
    """The cells of a row split at every ``","`` of ncu's quoted framing (else as ordinary CSV):
    right for the "File Path", "Function Name" and header rows, whose cells hold no quote, and
    the count a ragged row is reported with."""
    if len(line) >= 2 and line[0] == '"' and line[-1] == '"':
        return line[1:-1].split('","')
    try:
        return next(csv.reader([line]), [])
    except csv.Error:
        return [line]


def parse_source_page(text: str) -> list[SassRow]:
    """The SASS instructions of an ``ncu --page source --print-source cuda,sass --csv`` export
    (module docstring), each with the source line it sits under. One row per text line; the
    cells of each row by `split_row`. Raises `ValidateError` for a page without source lines
    (``--print-source sass`` alone, or no ``-lineinfo``), without the counters, or with a
    malformed row."""
    if "\0" in text:
        raise ValidateError("the source page is not text (it holds NUL bytes)", SOURCE_HINT)
    out: list[SassRow] = []
    file = ""
    header: dict[str, int] | None = None
    width = sass_source = 0
    text_at: int | None = None
    line: int | None = None
    saw_header = saw_sass_header = False
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        row = _head_cells(raw)
        first = row[0].strip().lstrip("#").strip() if row else ""
        if header is None or first in ("File Path", "Function Name", "Kernel Name", "Address", *_LINE_HEADERS):
            if first == "File Path" and len(row) >= 2:
                file, header, line = '","'.join(row[1:]).strip(), None, None
                continue
            if first in ("Function Name", "Kernel Name"):
                continue
            if first == "Address" and "Source" in row:
                saw_sass_header = True
                continue
            if first in _LINE_HEADERS:
                names = [_LINE_HEADERS.get(n, n) for n in (c.strip().lstrip("#").strip() for c in row)]
                missing = [c for c in (SECTORS, REQUESTS, EXECUTED) if c not in names]
                if "Address" not in names or missing:
                    raise ValidateError("ncu's source page lacks the columns " + ", ".join(missing or ["Address"]),
                                        "collect the report with --section SourceCounters; " + SOURCE_HINT)
                header = {n: i for i, n in reversed(list(enumerate(names)))}  # the first of a repeated name
                width = len(names)
                sources = [i for i, n in enumerate(names) if n == "Source"]
                text_at = sources[0] if sources and sources[0] < header["Address"] else None
                sass_source = sources[1] if len(sources) > 1 else header["Address"] + 1
                saw_header = True
                continue
            if header is None:
                continue
        cells = split_row(raw, width, text_at)
        if cells is None:
            raise ValidateError(f"row {number} of ncu's source page has {len(row)} cells, its header {width}",
                                "the export was cut or edited; " + SOURCE_HINT)
        lineno = cells[header["Line No"]].strip()
        if lineno:
            try:
                line = int(lineno.replace(",", ""))
            except ValueError:
                raise ValidateError(f"row {number} of ncu's source page has the line number {lineno!r}",
                                    SOURCE_HINT) from None
            if line < 0:
                raise ValidateError(f"row {number} of ncu's source page has the line number {lineno!r}", SOURCE_HINT)
            continue
        address = cells[header["Address"]].strip()
        if not address or address == GAP:
            continue
        if line is None:
            raise ValidateError(f"row {number} of ncu's source page is an instruction under no source line",
                                SOURCE_HINT)
        counts = [_cell(cells, header, name, f"row {number}") for name in (EXECUTED, REQUESTS, SECTORS, IDEAL, EXCESSIVE)]
        out.append(SassRow(file, line, address, cells[sass_source] if sass_source < len(cells) else "", *counts))
    if not saw_header:
        if saw_sass_header:
            raise ValidateError("ncu's source page has SASS only, no source lines to match tuiprof's ops with",
                                SOURCE_HINT)
        raise ValidateError("this is not ncu's source page (no \"Line No\" header row)", SOURCE_HINT)
    if not any(r.kind for r in out):
        raise ValidateError("ncu's source page lists no global memory instruction", SOURCE_HINT)
    return out


# --------------------------------------------------------------------------- comparing


@dataclass(frozen=True)
class OpRow:
    """One (source line, kind) group: ncu's counters over its SASS instructions and tuiprof's
    prediction over its ops (None where one side has nothing)."""

    file: str
    line: int
    kind: str
    ops: tuple[int, ...]
    label: str
    sass: int
    measured_sectors_per_request: float | None
    measured_lines_per_request: float | None
    """L1 tag requests per warp instruction: the 128 B lines a request touches."""
    measured_excessive: float | None
    measured_sector_share: float | None
    measured_request_share: float | None
    predicted_sectors_per_request: float | None
    predicted_lines_per_request: float | None
    predicted_excessive: float | None
    predicted_sector_share: float | None
    predicted_request_share: float | None
    h1: float | None
    h2: float | None
    l1_miss_sectors_per_request: float | None


def _key(file: str, line: int, kind: str) -> tuple[str, int, str]:
    return PurePath(file.replace("\\", "/")).name, line, kind


def compare_ops(analysis: Analysis, rows: list[SassRow]) -> list[OpRow]:
    """Group ncu's global instructions and tuiprof's global ops by (file name, line, kind) and
    set their per-request figures and shares of the kernel side by side."""
    measured: dict[tuple[str, int, str], list[SassRow]] = {}
    for r in rows:
        if r.kind is not None:
            measured.setdefault(_key(r.file, r.line, r.kind), []).append(r)
    predicted: dict[tuple[str, int, str], list] = {}
    for s in analysis.ops:
        if s.op.space == "global" and s.op.kind in _GLOBAL:
            predicted.setdefault(_key(s.op.file, s.op.line, s.op.kind), []).append(s)
    m_sectors = sum(r.sectors for g in measured.values() for r in g) or 0.0
    m_requests = sum(r.executed for g in measured.values() for r in g) or 0.0
    p_sectors = sum(s.warp_accesses * s.sectors_per_access for g in predicted.values() for s in g)
    p_requests = sum(s.warp_accesses for g in predicted.values() for s in g)
    out: list[OpRow] = []
    for key in sorted(set(measured) | set(predicted), key=lambda k: (k[0], k[1], k[2])):
        m, p = measured.get(key, []), predicted.get(key, [])
        ex = sum(r.executed for r in m)
        se = sum(r.sectors for r in m)
        acc = sum(s.warp_accesses for s in p)
        psec = sum(s.warp_accesses * s.sectors_per_access for s in p)
        pideal = sum(s.warp_accesses * s.ideal_sectors for s in p)
        reads = [s for s in p if s.warp_accesses and s.h1.mean == s.h1.mean]
        h1 = sum(s.warp_accesses * s.sectors_per_access * float(s.h1.mean) for s in reads)
        h2_w = [(s.warp_accesses * s.sectors_per_access * (1 - float(s.h1.mean)), float(s.h2.mean)) for s in reads
                if s.h2.mean == s.h2.mean]
        rsec = sum(s.warp_accesses * s.sectors_per_access for s in reads)
        h2_den = sum(w for w, _ in h2_w)
        out.append(OpRow(
            file=key[0], line=key[1], kind=key[2], ops=tuple(s.op.id for s in p),
            label=", ".join(dict.fromkeys(s.op.label for s in p if s.op.label)), sass=len(m),
            measured_sectors_per_request=se / ex if m and ex else None,
            measured_lines_per_request=sum(r.requests for r in m) / ex if m and ex else None,
            measured_excessive=sum(r.excessive for r in m) / se if m and se else None,
            measured_sector_share=se / m_sectors if m and m_sectors else None,
            measured_request_share=ex / m_requests if m and m_requests else None,
            predicted_sectors_per_request=psec / acc if acc else None,
            predicted_lines_per_request=sum(s.warp_accesses * s.requests_per_access for s in p) / acc if acc else None,
            predicted_excessive=(psec - pideal) / psec if psec else None,
            predicted_sector_share=psec / p_sectors if acc and p_sectors else None,
            predicted_request_share=acc / p_requests if acc and p_requests else None,
            h1=h1 / rsec if rsec else None,
            h2=sum(w * v for w, v in h2_w) / h2_den if h2_den else None,
            l1_miss_sectors_per_request=(rsec - h1) / sum(s.warp_accesses for s in reads) if rsec else None))
    return out


def _f(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def render_ops(rows: list[OpRow]) -> str:
    """The per-op table: measured (ncu) against predicted per source line and kind."""
    table = [["line", "kind", "ops", "SASS", "sectors/req ncu", "tuiprof", "excess ncu", "tuiprof",
              "sector share ncu", "tuiprof", "lines/req ncu", "tuiprof", "L1 hit (pred.)", "L2 hit (pred.)",
              "L1 miss sect./req (pred.)"]]
    for r in rows:
        table.append([f"{r.file}:{r.line}", r.kind, ",".join(map(str, r.ops)) or "-", str(r.sass),
                      _f(r.measured_sectors_per_request, ".2f"), _f(r.predicted_sectors_per_request, ".2f"),
                      _pct(r.measured_excessive), _pct(r.predicted_excessive),
                      _pct(r.measured_sector_share), _pct(r.predicted_sector_share),
                      _f(r.measured_lines_per_request, ".2f"), _f(r.predicted_lines_per_request, ".2f"),
                      _pct(r.h1), _pct(r.h2), _f(r.l1_miss_sectors_per_request, ".2f")])
    widths = [max(len(t[i]) for t in table) for i in range(len(table[0]))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(t, widths)).rstrip() for t in table]
    both = [r for r in rows if r.measured_sectors_per_request is not None and r.predicted_sectors_per_request is not None]
    if both:
        err = sum(abs(r.measured_sectors_per_request - r.predicted_sectors_per_request) for r in both) / len(both)  # type: ignore[operator]
        share = sum(abs((r.measured_sector_share or 0) - (r.predicted_sector_share or 0)) for r in both) / len(both)
        lines.append(f"{len(both)} of {len(rows)} line(s) on both sides: mean |sectors/request error| {err:.2f}, "
                     f"mean |sector share error| {100 * share:.1f} points")
    only_ncu = [r for r in rows if r.sass and not r.ops]
    only_us = [r for r in rows if r.ops and not r.sass]
    if only_ncu:
        lines.append("in ncu only (no tuiprof op on that line): " + ", ".join(f"{r.file}:{r.line} {r.kind}" for r in only_ncu))
    if only_us:
        lines.append("in tuiprof only (no SASS on that line: inlined elsewhere, or not executed): "
                     + ", ".join(f"{r.file}:{r.line} {r.kind}" for r in only_us))
    lines.append("ncu's source page counts no hits per instruction: the hit columns are tuiprof's prediction (ncu's "
                 "hits are per kernel: the headline comparison)")
    return "\n".join(lines) + "\n"


def source_page_commands(ncu: str, program: list[str], *, kernel: str | None, launch_index: int,
                         report: str) -> tuple[list[str], list[str]]:
    """The two ncu runs of ``--per-op``: collect the SourceCounters section of the chosen launch
    (caches flushed) into `report` (a path without ``.ncu-rep``), then print its source page."""
    collect = [ncu, "--section", "SourceCounters", "--import-source", "yes", "--cache-control", "all",
               "--launch-skip", str(launch_index), "--launch-count", "1", "--export", report, "--force-overwrite"]
    if kernel:
        collect += ["--kernel-name-base", "mangled", "--kernel-name", kernel]
    page = [ncu, "--import", report + ".ncu-rep", "--csv", "--page", "source", "--print-source", "cuda,sass"]
    return collect + ["--", *program], page


__all__ = ["OpRow", "SassRow", "compare_ops", "parse_source_page", "render_ops", "source_page_commands", "split_row"]
