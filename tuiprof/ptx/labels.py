"""Labels of memory ops: the expression of the user's source that each memory instruction accesses.

*Candidates* (`candidates`): the accessed expressions of a source line with their side of the
assignment: subscripts and ``->`` chains (``y[ind]``, ``tile[ty][tx]``, ``p->next``),
dereferences (``*flag``, ``*reinterpret_cast<float4 *>(&a[i])``), subscripts of a cast
(``reinterpret_cast<const float4 *>(in)[i]``), and ``atomic*()`` calls whose target has no
subscript (``atomicAdd(out, s)``). An address taken (``&a[i]``, outside an atomic's target) is no
access; a subscript inside another's brackets is read, whichever side its host is on.

*Choosing among them* (`label_accesses`), for one instruction:

1. the side that matches its kind (a load reads: right-hand side or a compound target; a store
   writes: left-hand side or a compound target; an atomic: its call's target). A load is never
   labelled with an assigned expression nor a store with a read one: with no candidate on its
   side, the label is the statement;
2. the base: the candidates whose array the address provably derives from (a kernel parameter or
   a variable, traced through the PTX registers), never a pointer parameter for a shared access
   nor a shared array for a global one;
3. the statement: nvcc's ``.loc`` column is where the statement starts (a ``for`` header is one
   statement, its increment another), so only candidates of that statement remain;
4. the address: when several remain, each instruction's address form (`tuiprof.ptx.address`:
   the dataflow from the parameters, special registers and loaded values) is compared with each
   candidate's index expression, parsed into the same form (``threadIdx.x`` is ``%tid.x``, a
   parameter its PTX parameter, a local defined once by its definition, every other name a term
   of its own) and scaled by the element size: operators, indirection (an index that is itself
   loaded), the coefficients of what both sides know, and the constant (after the one shift that
   agrees with most pairs, since a compiler may fold ``&a[i - 1]`` into a base register). Only on
   a tie does the k-th instruction of the line take the k-th candidate.

A label is always a candidate's whole text or the whole statement: never cut, never another
side's. `static_ops` then merges instructions into one op only when they access the same
candidate (copies of one source access, such as a loop's unrolled or rotated copies), or, with no
candidate, the same address form.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tuiprof.ptx.address import AddressForm

_IDENT_RE = re.compile(r"[A-Za-z_]\w*")
_ASSIGN_RE = re.compile(r"(?<![=!<>+\-*/%&|^])([+\-*/%&|^]|<<|>>)?=(?!=)")
_CONTROL_RE = re.compile(r"\b(if|for|while|switch)\s*\(")
_CASTS = ("reinterpret_cast", "static_cast", "const_cast")
_TEXTURE_CALL = re.compile(r"(?:tex(?:1D|2D|3D|1Dfetch|2Dgather|1DLayered|2DLayered|Cubemap)\w*|surf[123]D(?:read|write)"
                           r"|surf[12]DLayered(?:read|write))\s*(?:<[^<>()]*>)?\s*\(")
"""Texture fetches and surface accesses of the CUDA API (their object is the first argument, a
surface read's second when it reads into a pointer)."""
_LOAD_CALLS = frozenset({"__ldg", "__ldca", "__ldcg", "__ldcs", "__ldlu", "__ldcv"})
"""Intrinsics that read through the address they are given (``__ldg(&in[i])``)."""
_STORE_CALLS = frozenset({"__stwb", "__stcg", "__stcs", "__stwt"})
"""Intrinsics that write through their first argument (``__stcs(&out[i], v)``)."""
_TYPE_WORDS = frozenset({"unsigned", "signed", "int", "float", "double", "char", "long", "short",
                         "const", "volatile", "void", "bool", "size_t", "half", "__half", "uint",
                         "__restrict__", "__nv_bfloat16", "__half2", "__nv_bfloat162",
                         *(f"{t}{n}" for t in ("int", "uint", "float", "double", "char", "uchar", "short",
                                               "ushort", "long", "ulong", "longlong", "ulonglong")
                           for n in (1, 2, 3, 4)),
                         *_CASTS})


@dataclass(frozen=True)
class Candidate:
    """One accessed expression of a source line."""

    text: str
    base: str
    """The array or pointer the access goes through (a parameter or variable name)."""
    start: int
    end: int
    side: str
    """"lhs" (assigned), "rhs" (read), "both" (compound assignment target), "arg" (the target of
    an atomic* call), "call" (an element whose address a function is handed: ``sum3(&buf[i])``)."""
    index: str = ""
    """The subscripts as written (``[ty][tx]``), or a dereferenced pointer expression."""


def match_bracket(text: str, i: int) -> int:
    """Index just past the bracket closing the one at `i` (``[``, ``(`` or ``<``), or -1."""
    close = {"[": "]", "(": ")", "<": ">"}[text[i]]
    depth = 0
    for j in range(i, len(text)):
        c = text[j]
        if c == text[i]:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return j + 1
    return -1


def strip_comment(line: str) -> str:
    return line.split("//", 1)[0]


def statement_text(line: str) -> str:
    """A line as a label of last resort: without its comment, trimmed."""
    return strip_comment(line).strip().rstrip(";").strip()


def _segments(text: str) -> list[tuple[int, int]]:
    """(start, end) of the statements and control-flow conditions of a source line."""
    out: list[tuple[int, int]] = []
    i, start, depth, n = 0, 0, 0, len(text)
    while i < n:
        c = text[i]
        if depth == 0:
            m = _CONTROL_RE.match(text, i)
            if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
                if text[start:i].strip():
                    out.append((start, i))
                close = match_bracket(text, m.end() - 1)
                if close < 0:
                    close = n
                pos = m.end()
                for part in text[m.end():close - 1].split(";"):
                    out.append((pos, pos + len(part)))
                    pos += len(part) + 1
                i = start = close
                continue
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif depth <= 0 and c in ";{}":
            if text[start:i].strip():
                out.append((start, i))
            start = i + 1
        i += 1
    if text[start:].strip():
        out.append((start, n))
    return out


def statement_span(text: str, column: int) -> tuple[int, int] | None:
    """The characters of the statement that starts at 1-based `column` (how nvcc's ``.loc``
    columns point: a whole ``for``/``if``/``while`` header, or up to the statement's ``;``);
    None when no statement starts there."""
    p = column - 1
    if p < 0 or p >= len(text) or not text[p:].strip() or text[p].isspace():
        return None
    if p > 0 and (text[p - 1].isalnum() or text[p - 1] == "_"):
        return None
    m = _CONTROL_RE.match(text, p)
    if m:
        close = match_bracket(text, m.end() - 1)
        return p, close if close > 0 else len(text)
    depth = 0
    for j in range(p, len(text)):
        c = text[j]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
            if depth < 0:
                return p, j
        elif depth == 0 and c in ";{}":
            return p, j
    return p, len(text)


def _assignment(text: str, lo: int, hi: int) -> re.Match[str] | None:
    """The first assignment operator at bracket depth 0 in ``text[lo:hi]``."""
    for m in _ASSIGN_RE.finditer(text, lo, hi):
        pre = text[lo:m.start()]
        if pre.count("(") - pre.count(")") <= 0 and pre.count("[") - pre.count("]") <= 0:
            return m
    return None


def _access_end(text: str, j: int, is_access: bool = False) -> int:
    """End of the subscript / ``->`` / member chain starting at `j` (just after a primary
    expression); `j` if it accesses nothing (and `is_access` is false): ``p.width`` is a value,
    ``p.in[i]`` and ``s.next->v`` are accesses."""
    end = j
    n = len(text)
    while True:
        k = end
        while k < n and text[k] == " ":
            k += 1
        if k < n and text[k] == "[":
            close = match_bracket(text, k)
            if close < 0:
                break
            end, is_access = close, True
            continue
        if text.startswith("->", k):
            mm = _IDENT_RE.match(text, k + 2)
            if not mm:
                break
            end, is_access = mm.end(), True
            continue
        if k < n and text[k] == ".":  # a member: an access once a subscript or -> follows (p.in[i])
            mm = _IDENT_RE.match(text, k + 1)
            if not mm:
                break
            end = mm.end()
            continue
        break
    return end if is_access else j


def _cast_end(text: str, start: int) -> int:
    """End of a C++ cast expression ``xxx_cast<T>(e)`` starting at `start`, or -1."""
    m = re.compile(r"(reinterpret_cast|static_cast|const_cast)\s*<").match(text, start)
    if not m:
        return -1
    close = match_bracket(text, m.end() - 1)
    if close < 0:
        return -1
    k = close
    while k < len(text) and text[k] == " ":
        k += 1
    if k >= len(text) or text[k] != "(":
        return -1
    return match_bracket(text, k)


def _base_of(expr: str) -> str:
    """The array or pointer an expression goes through: its first name that is not a type, a
    cast or a call."""
    for m in _IDENT_RE.finditer(expr):
        name = m.group(0)
        if name in _TYPE_WORDS:
            continue
        if expr[m.end():].lstrip().startswith(("(", "<")):  # a call or a template
            continue
        return name
    return ""


def _unary_star(text: str, lo: int, start: int) -> int:
    """Position of a unary ``*`` just before `start` (``*p``, not ``float *p`` nor ``a * b``); -1."""
    before = text[lo:start].rstrip()
    if not before.endswith("*"):
        return -1
    prior = before[:-1].rstrip()
    if not prior or prior[-1] in "(=,!&|+-<>?:*" or re.search(r"\breturn$", prior):
        return lo + len(before) - 1
    return -1


def candidates(line: str, scalars: frozenset[str] = frozenset()) -> list[Candidate]:
    """Accessed expressions of a source line with their side of the assignment (see the module
    docstring); `scalars` names the module's variables, whose bare use (``x * g_scale``) reads or
    writes them."""
    text = strip_comment(line)
    out: list[Candidate] = []
    for lo, hi in _segments(text):
        assign = _assignment(text, lo, hi)
        found: list[Candidate] = []

        def side_of(start: int, end: int) -> str:
            before = text[lo:start].rstrip()
            after = text[end:hi]
            if re.match(r"\s*(\+\+|--)", after) or before.endswith(("++", "--")):
                return "both"
            call = re.search(r"(\w+)\s*\(\s*&?\s*$", before)
            if call and call.group(1).startswith("atomic"):
                return "arg"
            if call and call.group(1) in _STORE_CALLS:
                return "lhs"
            if call and call.group(1) in _LOAD_CALLS or re.search(r"\b(memcpy_async|__pipeline_memcpy_async)\s*\("
                                                               r"[^,]*,\s*&?\s*$", before):
                return "rhs"
            if re.search(r"\b(memcpy_async|__pipeline_memcpy_async)\s*\(\s*&?\s*$", before):
                return "lhs"
            if assign is not None and end <= assign.start():
                return "both" if assign.group(1) else "lhs"
            return "rhs"

        def add(start: int, end: int, base: str, index: str) -> None:
            found.append(Candidate(text[start:end], base, start, end, side_of(start, end), index))

        covered = -1  # end of the last cast expression taken whole
        for m in _IDENT_RE.finditer(text, lo, hi):
            start = m.start()
            if start < covered:
                continue
            if start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_."):
                continue
            if start > 1 and text[start - 2:start] == "->":
                continue
            name = m.group(0)
            if name.startswith("atomic") and text[m.end():hi].lstrip().startswith("("):
                k = text.index("(", m.end())
                close = match_bracket(text, k)
                if close > 0:
                    first = re.split(r",", text[k + 1:close - 1], maxsplit=1)[0]
                    if "[" not in first:
                        ids = [x for x in _IDENT_RE.findall(first) if x not in _TYPE_WORDS]
                        found.append(Candidate(text[start:close], ids[-1] if ids else "", start, close, "arg",
                                               first.strip()))
                continue
            fetch = _TEXTURE_CALL.match(text, start)
            if fetch and fetch.end() <= hi:
                close = match_bracket(text, fetch.end() - 1)
                if close > 0:
                    args = _split_params(text[fetch.end():close - 1])
                    handle = 1 if name.startswith("surf") and name.endswith("write") or name.startswith("surf") and \
                        name.endswith("read") and args and args[0].lstrip().startswith("&") else 0
                    ids = _IDENT_RE.findall(args[handle]) if len(args) > handle else []
                    found.append(Candidate(text[start:close], ids[-1] if ids else "", start, close,
                                           "lhs" if name.endswith("write") else "rhs", ""))
                    covered = close
                continue
            if name in _CASTS:
                cast_end = _cast_end(text, start)
                if cast_end < 0:
                    continue
                end = _access_end(text, cast_end)
                star = _unary_star(text, lo, start)
                inner = text[text.index("(", text.index(">", start)) + 1:cast_end - 1]
                if end > cast_end:  # reinterpret_cast<float4 *>(in)[i]
                    add(start, end, _base_of(inner), text[cast_end:end])
                    covered = end
                elif star >= 0:  # *reinterpret_cast<float4 *>(&a[i])
                    add(star, cast_end, _base_of(inner), inner)
                    covered = cast_end
                continue
            end = _access_end(text, m.end())
            if end > m.end():
                before = text[lo:start].rstrip()
                through = re.search(rf"\b({'|'.join(_LOAD_CALLS | _STORE_CALLS)}|memcpy_async|__pipeline_memcpy_async)"
                                    r"\s*\(([^()]*,)?\s*&\s*$", before)
                if before.endswith("&") and not before.endswith("&&") and side_of(start, end) != "arg" and not through:
                    # An address taken: no access, unless it is handed to a function, which
                    # reads or writes through it (its accesses land on this line when inlined).
                    if re.search(r"[\w>]\s*\(([^()]*,)?\s*&\s*$", before):
                        found.append(Candidate(text[start:end], name, start, end, "call", text[m.end():end]))
                    continue
                add(start, end, name, text[m.end():end])
                continue
            star = _unary_star(text, lo, start)
            if star >= 0:
                add(star, m.end(), name, "")
            elif name in scalars and not re.match(r"\s*(\(|\.|->)", text[m.end():hi]):
                add(start, m.end(), name, "")
        # a variable used bare is a candidate only when nothing else on the line accesses it
        found = [c for c in found if c.index or c.text.startswith("*") or c.base not in scalars
                 or c.text != c.base or not any(o.base == c.base and o is not c for o in found)]
        # A subscript inside another candidate's brackets is read, whichever side its host is on.
        for c in found:
            host = any(o is not c and o.start < c.start and c.end <= o.end for o in found)
            out.append(Candidate(c.text, c.base, c.start, c.end, "rhs", c.index) if host and c.side in ("lhs", "both")
                       else c)
    return out


def plain_name(name: str) -> str:
    """The source-level name inside an Itanium-mangled one (``_ZZ8matmul16E2As`` -> ``As``,
    ``_Z4axpyIfLi4EEvPT_`` -> ``axpy``); the name itself when not mangled."""
    if not name.startswith("_Z"):
        return name
    m = re.search(r"E(\d+)([A-Za-z_]\w*)$", name)
    if name.startswith("_ZZ") and m and len(m.group(2)) >= int(m.group(1)):
        return m.group(2)[:int(m.group(1))]
    pos = 2
    if name.startswith("_ZN", 0):
        pos = 3
    last = name
    while pos < len(name):
        mm = re.match(r"(\d+)", name[pos:])
        if not mm:
            break
        ln = int(mm.group(1))
        pos += len(mm.group(1))
        last = name[pos:pos + ln]
        pos += ln
        if not name.startswith("_ZN"):
            break
    return last


def _uncommented(source: str) -> str:
    """`source` with its comments blanked (same length, so positions still match)."""
    return re.sub(r"//[^\n]*|/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), source, flags=re.S)


def _definition(text: str, function: str) -> tuple[list[str], int, int] | None:
    """Parameter names and the body's span of `function`'s definition in uncommented `text`."""
    name = plain_name(function)
    for m in re.finditer(rf"\b{re.escape(name)}\s*\(", text):
        head = text[max(0, m.start() - 300):m.start()]
        head = re.split(r"[;}]", head)[-1]
        if "__global__" not in head and "__device__" not in head:
            continue
        close = match_bracket(text, m.end() - 1)
        if close < 0:
            continue
        after = text[close:close + 200].lstrip()
        if after.startswith(";"):
            continue  # a declaration
        params = []
        for p in _split_params(text[m.end():close - 1]):
            p = p.split("=", 1)[0]
            p = re.sub(r"\[[^\]]*\]", "", p)
            ids = _IDENT_RE.findall(p)
            params.append(ids[-1] if ids else "")
        body = text.find("{", close)
        end = _brace_end(text, body) if body >= 0 else -1
        return params, body, end
    return None


def _brace_end(text: str, i: int) -> int:
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def source_params(source: str, function: str) -> list[str]:
    """Parameter names of `function`'s definition in the CUDA source (empty if not found)."""
    found = _definition(_uncommented(source), function)
    return found[0] if found else []


def definition_lines(source: str, function: str) -> tuple[int, int] | None:
    """The lines (1-based, first and last) of the body of `function`'s definition in the CUDA
    source, from its opening brace to its closing one; None when it is not found."""
    found = _definition(_uncommented(source), function)
    if found is None or found[1] < 0:
        return None
    _, body, end = found
    return source.count("\n", 0, body) + 1, source.count("\n", 0, max(body, end - 1)) + 1


def _split_params(text: str) -> list[str]:
    from tuiprof.ptx.parse import split_nested

    out = split_nested(text, "(<[", ")>]")
    return out if out[-1].strip() else out[:-1]


# --------------------------------------------------------------------------- index expressions

_BUILTINS = {"threadIdx": "tid", "blockIdx": "ctaid", "blockDim": "ntid", "gridDim": "nctaid"}
_TOKEN_RE = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|\d+)[uUlL]*(?![\w.])|(\d*\.\d+|\d+\.)\w*|"
                       r"([A-Za-z_]\w*(?:\s*(?:\.|::)\s*[A-Za-z_]\w*)*)|(<<|>>|->|&&|\|\||[-+*/%&|^~()\[\]<>?:,!]))")
_BINARY = {"|": (1, "or"), "^": (2, "xor"), "&": (3, "mask"), "<<": (4, "shift"), ">>": (4, "div"),
           "+": (5, ""), "-": (5, ""), "*": (6, "mul"), "/": (6, "div"), "%": (6, "mask")}
_INDIRECT = -1
"""`AddressForm.loads` mark of a source expression that reads memory (``a[b[i]]``)."""


def _leaf(leaf: tuple[str, ...], ops: frozenset[str] = frozenset(), loads: frozenset[int] = frozenset()
          ) -> AddressForm:
    return AddressForm(((leaf, 1),), 0, ops, loads)


def _opaque(family: str, parts: Sequence[AddressForm]) -> AddressForm:
    ops = frozenset({family}).union(*(p.ops for p in parts))
    loads = frozenset().union(*(p.loads for p in parts))
    return _leaf(("op", family) + tuple(repr(p.key) for p in parts), ops, loads)


class _Expr:
    """A C index expression as an `AddressForm` over the environment's names (None when it is
    not understood)."""

    def __init__(self, text: str, env: dict[str, AddressForm]) -> None:
        self.toks: list[str] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN_RE.match(text, pos)
            if not m or m.end() == pos:
                if text[pos:].strip():
                    raise ValueError(text[pos:])
                break
            self.toks.append(re.sub(r"\s+", "", m.group(0)) if not m.group(1) else m.group(0).strip())
            pos = m.end()
        self.i = 0
        self.env = env

    def parse(self) -> AddressForm:
        f = self.ternary()
        if self.i != len(self.toks):
            raise ValueError(self.toks[self.i])
        return f

    def peek(self) -> str:
        return self.toks[self.i] if self.i < len(self.toks) else ""

    def take(self, want: str | None = None) -> str:
        t = self.peek()
        if not t or (want is not None and t != want):
            raise ValueError(t)
        self.i += 1
        return t

    def ternary(self) -> AddressForm:
        c = self.binary(1)
        if self.peek() == "?":
            self.take()
            a = self.ternary()
            self.take(":")
            b = self.ternary()
            return _opaque("select", [c, a, b])
        return c

    def binary(self, level: int) -> AddressForm:
        left = self.unary()
        while self.peek() in _BINARY and _BINARY[self.peek()][0] >= level:
            op = self.take()
            prec, family = _BINARY[op]
            right = self.binary(prec + 1)
            left = _combine(op, family, left, right)
        return left

    def unary(self) -> AddressForm:
        t = self.peek()
        if t in ("-", "+"):
            self.take()
            f = self.unary()
            return f.scaled(-1) if t == "-" else f
        if t in ("~", "!"):
            self.take()
            return _opaque("not", [self.unary()])
        if t == "*":
            self.take()
            inner = self.unary()
            return AddressForm(((("load", "*"), 1),), 0, inner.ops, inner.loads | {_INDIRECT})
        if t == "&":
            self.take()
            return _opaque("addr", [self.unary()])
        if t == "(" and self._is_cast():
            close = self.toks.index(")", self.i)
            self.i = close + 1
            return self.unary()
        return self.postfix()

    def _template_call(self) -> list[AddressForm] | None:
        """At ``<`` after a name: the arguments of a template call ``<...>(...)`` (None, and
        nothing taken, when it is not one)."""
        depth, j = 0, self.i
        while j < len(self.toks):
            depth += {"<": 1, ">": -1, ">>": -2}.get(self.toks[j], 0)
            j += 1
            if depth <= 0:
                break
        if depth != 0 or j >= len(self.toks) or self.toks[j] != "(":
            return None
        self.i = j
        self.take("(")
        return self._call_args()

    def _call_args(self) -> list[AddressForm]:
        """The arguments of a call whose `(` is taken, through its `)`."""
        args = []
        while self.peek() != ")":
            args.append(self.ternary())
            if self.peek() == ",":
                self.take()
        self.take(")")
        return args

    def _is_cast(self) -> bool:
        j = self.i + 1
        words = []
        while j < len(self.toks) and self.toks[j] != ")":
            words.append(self.toks[j])
            j += 1
        return bool(words) and all(w in _TYPE_WORDS or w == "*" for w in words)

    def postfix(self) -> AddressForm:
        f = self.primary()
        while self.peek() in ("[", "->", "("):
            t = self.take()
            if t == "[":
                self.ternary()
                self.take("]")
                f = AddressForm(((("load", "[]"), 1),), 0, f.ops, f.loads | {_INDIRECT})
            elif t == "->":
                self.take()
                f = AddressForm(((("load", "->"), 1),), 0, f.ops, f.loads | {_INDIRECT})
            else:
                f = _opaque("call", [f, *self._call_args()])
        return f

    def primary(self) -> AddressForm:
        t = self.take()
        if t == "(":
            f = self.ternary()
            self.take(")")
            return f
        if t.isdigit() or t[:2] in ("0x", "0X"):
            return AddressForm((), int(t.rstrip("uUlL"), 0))
        if t in _CASTS:
            self.take("<")
            depth = 1
            while depth:
                x = self.take()
                depth += {"<": 1, ">": -1, ">>": -2}.get(x, 0)
            self.take("(")
            f = self.ternary()
            self.take(")")
            return f
        if _IDENT_RE.fullmatch(t.split(".")[0].split("::")[-1] or "_"):
            if self.peek() == "<":
                args = self._template_call()
                if args is not None:
                    return _opaque("call", [_name(t), *args])
            return self.env.get(t) or _name(t)
        raise ValueError(t)


def _name(t: str) -> AddressForm:
    head, _, comp = t.partition(".")
    if head in _BUILTINS and comp in ("x", "y", "z"):
        return _leaf(("special", f"{_BUILTINS[head]}.{comp}"))
    if t == "warpSize":
        return AddressForm((), 32)
    return _leaf(("name", t))


def _combine(op: str, family: str, a: AddressForm, b: AddressForm) -> AddressForm:
    ka = a.const if not a.terms else None
    kb = b.const if not b.terms else None
    if op == "+":
        return a.plus(b)
    if op == "-":
        return a.plus(b, -1)
    if ka is not None and kb is not None:
        try:
            value = {"*": ka * kb, "/": int(ka / kb) if kb else None, "%": ka % kb if kb else None, "<<": ka << kb,
                     ">>": ka >> kb, "&": ka & kb, "|": ka | kb, "^": ka ^ kb}[op]
        except (ValueError, OverflowError):
            value = None
        if value is not None:
            return AddressForm((), value)
    if op == "*" and (ka is not None or kb is not None):
        return b.scaled(ka) if ka is not None else a.scaled(kb)  # type: ignore[arg-type]
    if op == "<<" and kb is not None and 0 <= kb < 63:
        return a.scaled(1 << kb)
    return _opaque(family, [a, b])


def index_form(text: str, env: dict[str, AddressForm]) -> AddressForm | None:
    """The form of a C index expression (element units), or None when it is not understood."""
    try:
        return _Expr(text, env).parse()
    except (ValueError, IndexError, RecursionError):
        return None


_MEMBERS_RE = re.compile(r"(?:\s*\.\s*[A-Za-z_]\w*)+(?=\s*\[)")
"""The members before a subscript (``.in`` of ``p.in[i]``, ``.q.v`` of ``s.q.v[k]``)."""


def _subscripts(index: str) -> list[str] | None:
    """The expressions of ``[a][b]...`` (None when `index` is something else)."""
    out = []
    i = 0
    index = index.strip()
    while i < len(index):
        if index[i] != "[":
            return None
        close = match_bracket(index, i)
        if close < 0:
            return None
        out.append(index[i + 1:close - 1])
        i = close
        while i < len(index) and index[i] == " ":
            i += 1
    return out or None


@dataclass(frozen=True)
class SourceScope:
    """What a function's index expressions can be resolved with: its parameters (as the PTX
    parameters they are), the locals it defines once, and the array dimensions declared in the
    source."""

    env: dict[str, AddressForm]
    dims: dict[str, tuple[int, ...]]


_DECL_RE = re.compile(r"(?:^|[;{}(])\s*(?:const\s+)?(?:unsigned\s+|signed\s+)?(?:int|long|short|size_t|uint|"
                      r"unsigned|int64_t|uint32_t|int32_t|uint64_t|auto)\s+(?:const\s+)?([A-Za-z_]\w*)\s*=\s*([^;{}]+);")
_DEFINE_RE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)\s+([^\n]+)$", re.M)
_CONST_RE = re.compile(r"\b(?:static\s+)?(?:constexpr|const)\s+(?:unsigned\s+)?(?:int|long|size_t|unsigned)\s+"
                       r"([A-Za-z_]\w*)\s*=\s*([^;]+);")
_ARRAY_RE = re.compile(r"\b([A-Za-z_]\w*)\s*((?:\[[^\]\[]+\]\s*){2,})\s*;")


def source_scope(source: str, function: str) -> SourceScope:
    """The `SourceScope` of `function` in `source`: parameter k is ``("param", k)``; a local
    ``int tid = blockIdx.x * 512 + threadIdx.x;`` that is never assigned again is its definition;
    `#define`\\ d and ``constexpr`` integers are their values."""
    text = _uncommented(source)
    consts: dict[str, AddressForm] = {}
    for m in list(_DEFINE_RE.finditer(text)) + list(_CONST_RE.finditer(text)):
        f = index_form(m.group(2).strip(), consts)
        if f is not None and not f.terms:
            consts[m.group(1)] = f
    env = dict(consts)
    found = _definition(text, function)
    if found:
        params, lo, hi = found
        for k, p in enumerate(params):
            if p:
                env[p] = _leaf(("param", str(k)))
        body = text[lo:hi] if lo >= 0 else ""
        for m in _DECL_RE.finditer(body):
            name = m.group(1)
            if re.search(rf"(?<![\w.]){re.escape(name)}\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|\+\+\s*{re.escape(name)}\b|"
                         rf"\b{re.escape(name)}\s*(\+\+|--)|--\s*{re.escape(name)}\b", body[m.end():]):
                continue  # assigned again: a variable, not a definition
            f = index_form(m.group(2).strip(), env)
            if f is not None:
                env[name] = f
    dims: dict[str, tuple[int, ...]] = {}
    for m in _ARRAY_RE.finditer(text):
        sizes = [index_form(s, consts) for s in re.findall(r"\[([^\]]+)\]", m.group(2))]
        if all(s is not None and not s.terms for s in sizes):
            dims[m.group(1)] = tuple(s.const for s in sizes)  # type: ignore[union-attr]
    return SourceScope(env, dims)


def expected_offset(c: Candidate, scope: SourceScope, elem: int) -> AddressForm | None:
    """The byte offset from its base that candidate `c` accesses, as a form (None when its index
    is not understood)."""
    if c.text.startswith("*") and not c.index:
        return AddressForm()
    member = _MEMBERS_RE.match(c.index)  # p.in[i]: the member holds the array, the subscript indexes it
    subs = _subscripts(c.index[member.end():] if member else c.index) if c.index else None
    if subs is None:
        f = index_form(c.index, scope.env) if c.index and not c.index.startswith("->") else None
        return f.scaled(elem) if f is not None else None
    forms = [index_form(s, scope.env) for s in subs]
    if any(f is None for f in forms):
        return None
    dims = scope.dims.get(c.base)
    total = forms[0]
    for k, f in enumerate(forms[1:], start=1):
        if dims is not None and len(dims) == len(forms):
            total = total.scaled(dims[k]).plus(f)  # type: ignore[union-attr,arg-type]
        else:
            total = _opaque("row", [total]).plus(f)  # type: ignore[arg-type,list-item]
    return total.scaled(elem)  # type: ignore[union-attr]  # no form is None: tested above


# --------------------------------------------------------------------------- matching


@dataclass(frozen=True)
class Access:
    """One memory access of one instruction, as labelling sees it."""

    function: str
    index: int
    kind: str
    space: str
    bytes: int
    file: str
    line: int
    column: int
    """The ``.loc`` column (1-based; 0 when none)."""
    ptx_line: int
    starts: bool
    bases: frozenset[str]
    """Source-level names the address may derive from (parameters, variables)."""
    excluded: frozenset[str]
    """Names that cannot be this op's base (a pointer parameter for a shared or local op, a
    shared array for a global op)."""
    form: AddressForm
    """The address's form (`tuiprof.ptx.address`)."""
    base_leaves: frozenset[tuple[str, ...]] = frozenset()
    call_site: tuple[tuple[int, int, int], ...] = ()
    """Where the code of the access was inlined: the (file, line, column) of each call site
    above its location (empty when it is in the function compiled)."""
    """The leaves of `form` that are array bases (pointer parameters, variables)."""


def _sides_for(kind: str) -> tuple[tuple[str, ...], ...]:
    """Candidate sides to try in order for an op kind (never the other side of an assignment)."""
    if kind == "store":
        return (("lhs", "both"), ("call",))
    if kind == "atomic":
        return (("arg",), ("both", "lhs"), ("call",))
    return (("rhs", "both"), ("call",))


TIE = 0.2
"""Evidence costs within this of the best are a tie (see `_assign`)."""
UNKNOWN = 0.5
"""The cost of a candidate whose index is not understood: no evidence either way."""


def _cost(offset: AddressForm, want: AddressForm | None) -> float:
    """How badly an instruction's address offset (its form less its base) fits a candidate's
    expected offset, constants aside: an index read from memory on one side only (1), each
    coefficient of a thread index or parameter that differs (1; 0.25 when the candidate's index
    has names the source did not resolve, which may stand for it), each operator family on one
    side only: 0.5 for one the source writes and the PTX lacks, 0.25 the other way (the base's
    own arithmetic and inlined helpers add operators; compilers rewrite ``i % 4`` as ``and``, and a
    call of the user's may compile to anything, so calls are not compared)."""
    if want is None:
        return UNKNOWN
    source_ops = want.ops - {"call"}
    cost = 1.0 * (bool(offset.loads) != bool(want.loads)) + 0.5 * len(source_ops - offset.ops) \
        + 0.25 * len(offset.ops - source_ops)
    known = ("special", "param")
    a = {leaf: c for leaf, c in offset.terms if leaf[0] in known}
    b = {leaf: c for leaf, c in want.terms if leaf[0] in known}
    loose = any(leaf[0] in ("name", "op", "load") for leaf, _ in want.terms)
    for leaf in a.keys() | b.keys():
        if a.get(leaf) != b.get(leaf):
            cost += 0.25 if loose else 1.0
    return cost


def _assign(members: list[Access], chosen: list[Candidate], scope: SourceScope, text: str) -> list[Candidate]:
    """The candidate of each member instruction of line `text` (see the module docstring, steps
    3 and 4): the lowest evidence cost (`_cost`; plus 1 for a constant that differs, after the
    shift most pairs agree on, from that of a candidate whose index differs from another's in its
    constant alone; plus 0.25 outside the ``.loc``'s statement); among candidates within `TIE` of
    it, the k-th distinct address of the line takes the k-th."""
    offsets = []
    for a in members:
        acc = {leaf: c for leaf, c in a.form.terms if leaf not in a.base_leaves}
        offsets.append(AddressForm(tuple(sorted(acc.items())), a.form.const, a.form.ops, a.form.loads))
    wants = [expected_offset(c, scope, members[0].bytes) for c in chosen]
    cost = []
    for a, o in zip(members, offsets):
        span = statement_span(text, a.column)
        # nvcc may put a later statement's access under an earlier one's .loc (one address
        # computation serving both): outside the .loc's statement is a mild cost, not a bar.
        cost.append([_cost(o, w) + (0.25 if span is not None and not span[0] <= c.start < max(span[1], span[0] + 1)
                                    else 0.0) for c, w in zip(chosen, wants)])
    # Constants tell candidates apart only among those whose indices differ in nothing else
    # (``row_ptr[tid]`` and ``row_ptr[tid + 1]``, a stencil's ``in[i - 1]``, ``in[i]``, ``in[i + 1]``).
    family = Counter(w.terms for w in wants if w is not None)
    informative = [w is not None and family[w.terms] > 1 and len({x.const for x in wants if x is not None
                                                                   and x.terms == w.terms}) > 1 for w in wants]
    votes: Counter[int] = Counter()
    for i, o in enumerate(offsets):
        best = min(cost[i])
        for j, w in enumerate(wants):
            if informative[j] and cost[i][j] <= best + TIE:
                votes[o.const - w.const] += 1  # type: ignore[union-attr]
    shift = max(votes, key=lambda d: (votes[d], d == 0)) if votes else 0
    out: list[Candidate] = []
    classes: dict[tuple[object, ...], int] = {}
    for i, o in enumerate(offsets):
        total = [cost[i][j] + (1.0 if informative[j] and o.const - w.const != shift else 0.0)  # type: ignore[union-attr]
                 for j, w in enumerate(wants)]
        ties = [j for j, t in enumerate(total) if t <= min(total) + TIE]
        k = classes.setdefault(members[i].form.key, len(classes))
        out.append(chosen[ties[k % len(ties)]])
    return out


def label_accesses(accesses: Sequence[Access], lines_of: Mapping[str, list[str]], texts: Mapping[str, str],
                   scalars: frozenset[str] = frozenset()) -> list[Candidate | None]:
    """The candidate each access reads or writes (None: its label is the whole statement), from
    the line of its own file (`lines_of`: file name -> lines, `texts`: file name -> text);
    `scalars` names the module's variables (see `candidates`)."""
    out: list[Candidate | None] = [None] * len(accesses)
    per_line: dict[tuple[str, int], list[Candidate]] = {}
    scopes: dict[tuple[str, str], SourceScope] = {}
    groups: dict[tuple[str, str, int, str, tuple[Candidate, ...]], list[int]] = {}
    for n, a in enumerate(accesses):
        lines = lines_of.get(a.file, [])
        if not (1 <= a.line <= len(lines)):
            continue
        text = lines[a.line - 1]
        cands = per_line.get((a.file, a.line))
        if cands is None:
            cands = per_line[(a.file, a.line)] = candidates(text, scalars)
        usable = [c for c in cands if c.base not in a.excluded]
        chosen: list[Candidate] = []
        for sides in _sides_for(a.kind):
            side_c = [c for c in usable if c.side in sides]
            named = [c for c in side_c if c.base in a.bases]
            if named:
                chosen = named
                break
            if a.bases and any(c.base in a.bases for c in usable):
                continue
            if side_c:
                chosen = side_c
                break
        if len(chosen) == 1:
            out[n] = chosen[0]
        elif chosen:
            groups.setdefault((a.file, a.function, a.line, a.kind, tuple(chosen)), []).append(n)
    for (file_, function, line, _, chosen_c), members in groups.items():
        scope = scopes.get((file_, function))
        if scope is None:
            scope = scopes[(file_, function)] = source_scope(texts.get(file_, ""), function)
        text = strip_comment(lines_of[file_][line - 1])
        for n, c in zip(members, _assign([accesses[n] for n in members], list(chosen_c), scope, text)):
            out[n] = c
    return out
