"""Which op of one version of a kernel is which op of the other.

Line numbers move when lines are inserted, and labels change when a variable is renamed, so
neither alone identifies an op across two versions. The two sources are aligned line by line
(difflib, on lines with their white space folded); each line of A then has its line in B: the
same text (`SAME`) or, inside a block of lines that was edited, the most similar line of B's
block, in order (`EDITED`). Ops are matched in three passes:

1. on a line of the same text: same kind and label, in column order;
2. anywhere: same kind and label when the pair names exactly one op left on each side (an access
   moved to another line, or a line edited around it); `EDITED` when its line maps to the other
   op's line, else `MOVED`;
3. on a line of the same text or an edited one: same kind, in column order (a renamed variable
   changes the label, not the access).

What is left is removed (only in A) or added (only in B). When the two versions are different
kernels (`spmv_csr_scalar` against `spmv_csr_vector4`, both in one file), their bodies are
aligned with each other, not the file with itself.
"""

from __future__ import annotations

import difflib
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tuiprof.trace.data import Trace

SAME, EDITED, MOVED = "same line", "edited line", "moved"


@dataclass(frozen=True)
class OpRef:
    """What matching needs of an op: its identity in its own version and where it is."""

    id: int
    kernel: str
    kind: str
    file: str
    line: int
    label: str
    column: int = 0


def refs_of_trace(trace: "Trace") -> list[OpRef]:
    """The ops of a trace, as matching sees them."""
    return [OpRef(o.id, o.kernel, o.kind, o.file, o.line, o.label, o.column) for o in trace.ops]


def refs_of_ops(ops: Sequence[Mapping[str, Any]]) -> list[OpRef]:
    """The ops of a run record (plain data: `tuiprof.compare.record.RunRecord.ops`)."""
    return [OpRef(o["id"], o["kernel"], o["kind"], o["file"], o["line"], o["label"], o["column"]) for o in ops]


@dataclass(frozen=True)
class Pair:
    a: int
    b: int
    how: str
    """`SAME`, `EDITED` or `MOVED`."""


@dataclass(frozen=True)
class Matching:
    pairs: tuple[Pair, ...]
    removed: tuple[int, ...]
    """Ops of A with no counterpart in B (ids of A)."""
    added: tuple[int, ...]
    """Ops of B with no counterpart in A (ids of B)."""


def _folded(line: str) -> str:
    return " ".join(line.split())


SIMILAR = 0.5
"""Least difflib ratio at which an edited line of A is paired with a line of B's block."""
PAIRING_LIMIT = 10_000
"""Largest edited block (lines of A x lines of B) paired by similarity; a larger one by position."""


def _pair_block(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int]]:
    """(i, j) pairs of an edited block: each line of A with the most similar line of B after the
    previous pair's, when similar enough; by position in a block too large to compare."""
    if len(a) * len(b) > PAIRING_LIMIT:
        return [(k, k) for k in range(min(len(a), len(b)))]
    out, start = [], 0
    for i, line in enumerate(a):
        scores = [(difflib.SequenceMatcher(None, line, b[j], autojunk=False).ratio(), -j) for j in range(start, len(b))]
        if not scores:
            break
        best, neg = max(scores)
        if best >= SIMILAR:
            out.append((i, -neg))
            start = -neg + 1
    return out


def align_lines(a: Sequence[str], b: Sequence[str], a_first: int = 1, b_first: int = 1) -> dict[int, tuple[int, str]]:
    """Line of A (numbered from `a_first`) -> (its line in B, `SAME` or `EDITED`)."""
    out: dict[int, tuple[int, str]] = {}
    fa, fb = [_folded(x) for x in a], [_folded(x) for x in b]
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, fa, fb, autojunk=False).get_opcodes():
        if tag == "equal":
            out.update({a_first + i1 + k: (b_first + j1 + k, SAME) for k in range(i2 - i1)})
        elif tag == "replace":
            out.update({a_first + i1 + i: (b_first + j1 + j, EDITED) for i, j in _pair_block(fa[i1:i2], fb[j1:j2])})
    return out


def _body(text: str, kernel: str) -> tuple[int, int] | None:
    from tuiprof.ptx.labels import definition_lines

    return definition_lines(text, kernel)


def file_map(a_text: str, b_text: str, a_kernel: str = "", b_kernel: str = "") -> dict[int, tuple[int, str]]:
    """`align_lines` of two versions of a source file; when the kernels differ and both are found,
    their bodies are aligned with each other and the rest of the files apart."""
    a, b = a_text.splitlines(), b_text.splitlines()
    whole = align_lines(a, b)
    if a_kernel == b_kernel:
        return whole
    ra, rb = _body(a_text, a_kernel), _body(b_text, b_kernel)
    if ra is None or rb is None:
        return whole
    inside = align_lines(a[ra[0] - 1:ra[1]], b[rb[0] - 1:rb[1]], ra[0], rb[0])
    outside = {la: m for la, m in whole.items()
               if not (ra[0] <= la <= ra[1]) and not (rb[0] <= m[0] <= rb[1])}
    return {**outside, **inside}


def _file_pairs(a_files: Sequence[str], b_files: Sequence[str]) -> dict[str, str]:
    """A's file -> B's: by name; a lone file on each side (two versions under two names) pairs."""
    pairs = {f: f for f in a_files if f in b_files}
    rest_a = [f for f in a_files if f not in pairs]
    rest_b = [f for f in b_files if f not in pairs.values()]
    if len(rest_a) == 1 and len(rest_b) == 1:
        pairs[rest_a[0]] = rest_b[0]
    return pairs


def _order(o: OpRef) -> tuple[int, int, int]:
    return (o.line, o.column, o.id)


def match_ops(a_ops: Sequence[OpRef], a_sources: Mapping[str, str],
              b_ops: Sequence[OpRef], b_sources: Mapping[str, str]) -> Matching:
    """Match the ops of two versions (see the module docstring)."""
    files = _file_pairs(sorted({o.file for o in a_ops}), sorted({o.file for o in b_ops}))
    a_kernel = a_ops[0].kernel if a_ops else ""
    b_kernel = b_ops[0].kernel if b_ops else ""
    same_text = {fa for fa, fb in files.items() if a_kernel == b_kernel and a_sources.get(fa) == b_sources.get(fb)}
    maps = {fa: file_map(a_sources.get(fa, ""), b_sources.get(fb, ""), a_kernel, b_kernel)
            for fa, fb in files.items() if fa not in same_text}

    def mapped(o: OpRef) -> tuple[str, int, str] | None:
        """Where A's op `o` is in B: (file, line, SAME or EDITED)."""
        if o.file in same_text:  # every line is itself, those past the text included
            return files[o.file], o.line, SAME
        if o.file in maps and o.line in maps[o.file]:
            return (files[o.file], *maps[o.file][o.line])
        return None

    b_at: dict[tuple[str, int], list[OpRef]] = defaultdict(list)
    for o in sorted(b_ops, key=_order):
        b_at[(o.file, o.line)].append(o)
    left_a = sorted(a_ops, key=_order)
    taken: set[int] = set()
    pairs: list[Pair] = []

    def on_line(passed: str, same_label: bool) -> None:
        nonlocal left_a
        rest = []
        for o in left_a:
            where = mapped(o)
            pick = None
            if where is not None and (passed == EDITED or where[2] == SAME):
                pick = next((x for x in b_at[where[:2]] if x.id not in taken and x.kind == o.kind
                             and (x.label == o.label or not same_label)), None)
            if pick is None:
                rest.append(o)
                continue
            taken.add(pick.id)
            pairs.append(Pair(o.id, pick.id, where[2]))  # type: ignore[index]
        left_a = rest

    on_line(SAME, same_label=True)
    left_b = [o for o in b_ops if o.id not in taken]
    count_a = Counter((o.kind, o.label) for o in left_a)
    count_b = Counter((o.kind, o.label) for o in left_b)
    unique_b = {(o.kind, o.label): o for o in left_b if count_b[(o.kind, o.label)] == 1}
    rest = []
    for o in left_a:
        k = (o.kind, o.label)
        if o.label and count_a[k] == 1 and k in unique_b:
            b, where = unique_b[k], mapped(o)
            taken.add(b.id)
            pairs.append(Pair(o.id, b.id, where[2] if where is not None and where[:2] == (b.file, b.line) else MOVED))
        else:
            rest.append(o)
    left_a = rest
    on_line(EDITED, same_label=False)
    added = tuple(o.id for o in sorted(b_ops, key=_order) if o.id not in taken)
    return Matching(tuple(sorted(pairs, key=lambda p: p.a)), tuple(o.id for o in left_a), added)
