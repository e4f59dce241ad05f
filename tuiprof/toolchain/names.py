"""C++ names as a programmer writes them, matched against the symbols of a PTX module.

A launch script, ``--kernel`` and ``dev.set_symbol`` name kernels and variables the way the
source does: ``axpy<float>``, ``blas::axpy<float, 4>``, ``reduce<256, true>``,
``tone_map<Curve::Gamma>``, a plain ``kern`` when only one instantiation exists, the demangled
signature, or the mangled symbol itself. `find_symbol` resolves such a name to the one symbol it
means; an ambiguous or unknown name is one error listing the candidates, demangled, a few per line.

Both sides are read into the same canonical form (`canonical`): whitespace and the place of
``const`` normalised, ``unsigned`` and the fixed-width integer typedefs spelled as the mangling
spells them, integer literals by value (``4u``, ``(char)65``, ``true``), enumerators by value
(from the enums of the sources), and the namespaces that name no user scope dropped: CCCL's
architecture namespaces (``CUB_300001_SM_900``, which differ between an sm_80 and an sm_90
compile of the same source), libcu++'s ABI namespace (``__4``), nvcc's per-file ``_INTERNAL_...``
namespaces of ``static`` names, and anonymous namespaces. A written name matches a symbol when its
scopes are the last scopes of the symbol's name and its template arguments (and parameter types,
when written) are the same.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tuiprof.errors import TuiprofError
from tuiprof.toolchain.demangle import demangle

HIDDEN_SCOPE = re.compile(r"^(?:(?:CUB|THRUST|CCCL|LIBCUDACXX)_\d+(?:_SM_\d+)*(?:_NS)?|__\d+|_INTERNAL_\w*"
                          r"|\(anonymous namespace\)|_GLOBAL__N\w*)$")
"""Namespaces a programmer never writes (see the module docstring)."""
LINE_WIDTH = 100
"""Characters of a hint line listing candidates (a longer name gets a line of its own)."""
MAX_LISTED = 24
"""Candidates listed in a hint; the rest are counted."""

_TYPE_ALIASES = {
    "unsigned": "unsigned int", "signed": "int", "signed int": "int", "short int": "short",
    "unsigned short int": "unsigned short", "long int": "long", "unsigned long int": "unsigned long",
    "long long int": "long long", "unsigned long long int": "unsigned long long", "signed char": "signed char",
    "int8_t": "signed char", "uint8_t": "unsigned char", "int16_t": "short", "uint16_t": "unsigned short",
    "int32_t": "int", "uint32_t": "unsigned int", "int64_t": "long", "uint64_t": "unsigned long",
    "size_t": "unsigned long", "ptrdiff_t": "long", "intptr_t": "long", "uintptr_t": "unsigned long",
    "uint": "unsigned int", "half": "__half", "nv_bfloat16": "__nv_bfloat16", "half2": "__half2",
    "nv_bfloat162": "__nv_bfloat162", "cudaTextureObject_t": "unsigned long long",
    "cudaSurfaceObject_t": "unsigned long long",
}
_TYPE_WORDS = frozenset({"unsigned", "signed", "short", "long", "int", "char"})
_TOKEN = re.compile(r"\s*(::|[A-Za-z_$][\w$]*|-?\d+[uUlL]*|\.\.\.|\S)")
_ENUM = re.compile(r"\benum\s+(?:class\s+|struct\s+)?([A-Za-z_]\w*)?\s*(?::\s*[\w\s:]+?)?\s*\{([^{}]*)\}")
_ENUMERATOR = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?:=\s*(.+?))?\s*$", re.S)


@dataclass(frozen=True)
class Enums:
    """The enumerators of a program's sources: enum name -> {enumerator: value}; an unnamed enum's
    are under ""."""

    values: Mapping[str, Mapping[str, int]]

    def value(self, path: Sequence[str]) -> int | None:
        """The value of the enumerator `path` names (``Curve::Gamma``, ``img::Curve::Gamma``, or an
        unscoped ``Gamma`` when only one enum has it)."""
        if not path:
            return None
        name = path[-1]
        if len(path) >= 2 and path[-2] in self.values:
            return self.values[path[-2]].get(name)
        found = {vals[name] for vals in self.values.values() if name in vals}
        return found.pop() if len(found) == 1 else None


NO_ENUMS = Enums({})


def source_enums(texts: Sequence[str]) -> Enums:
    """The enums declared in `texts` (C++ sources), with each enumerator's value: the integer it
    is given, else one more than the previous one."""
    out: dict[str, dict[str, int]] = {}
    for text in texts:
        for m in _ENUM.finditer(re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)):
            vals = out.setdefault(m.group(1) or "", {})
            nxt = 0
            for item in m.group(2).split(","):
                em = _ENUMERATOR.match(item)
                if not em:
                    continue
                if em.group(2) is not None:
                    v = _int_value(em.group(2), vals)
                    if v is None:
                        break  # a value tuiprof cannot compute: the rest are unknown
                    nxt = v
                vals[em.group(1)] = nxt
                nxt += 1
    return Enums(out)


def _int_value(text: str, known: Mapping[str, int]) -> int | None:
    t = text.strip().rstrip("uUlL")
    if re.fullmatch(r"[-+]?(?:0[xX][0-9a-fA-F]+|\d+)", t):
        return int(t, 0) if not re.fullmatch(r"[-+]?0\d+", t) else int(t, 8)
    if t in known:
        return known[t]
    m = re.fullmatch(r"(\d+)\s*<<\s*(\d+)", t)
    return int(m.group(1)) << int(m.group(2)) if m else None


# --------------------------------------------------------------------------- canonical form


@dataclass(frozen=True)
class CxxName:
    """A name read from text: its scopes (each with its template arguments, canonical, or None
    when written without), and its parameter types (canonical; None when not written)."""

    scopes: tuple[tuple[str, tuple[str, ...] | None], ...]
    params: tuple[str, ...] | None


def _tokens(text: str) -> list[str]:
    return [m.group(1) for m in _TOKEN.finditer(text)]


def _split_top(tokens: list[str], sep: str) -> list[list[str]]:
    out: list[list[str]] = [[]]
    depth = 0
    for t in tokens:
        if t in "<([":
            depth += 1
        elif t in ">)]":
            depth -= 1
        if t == sep and depth == 0:
            out.append([])
        else:
            out[-1].append(t)
    return out


def _close(tokens: list[str], i: int) -> int:
    """Index of the bracket closing the one at `i`."""
    pairs = {"<": ">", "(": ")", "[": "]"}
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j] in pairs:
            depth += 1
        elif tokens[j] in pairs.values():
            depth -= 1
            if depth == 0:
                return j
    return len(tokens) - 1


def _join(tokens: Sequence[str]) -> str:
    out = ""
    for t in tokens:
        if out and (out[-1].isalnum() or out[-1] in "_$") and (t[0].isalnum() or t[0] in "_$"):
            out += " "
        out += t
    return out


def _is_ident(t: str) -> bool:
    return bool(t) and (t[0].isalpha() or t[0] in "_$")


def canonical(text: str, enums: Enums = NO_ENUMS) -> str:
    """A template argument or type in canonical form (see the module docstring)."""
    return _canon(_tokens(text), enums)


def _canon(tokens: list[str], enums: Enums) -> str:
    toks = [t for t in tokens if t not in ("struct", "class", "enum", "typename")]
    if not toks:
        return ""
    # a literal: (T)123, 123u, -4, true
    if len(toks) == 1 and re.fullmatch(r"-?\d+[uUlL]*", toks[0]):
        return str(int(toks[0].rstrip("uUlL")))
    if len(toks) == 2 and toks[0] == "-" and re.fullmatch(r"\d+[uUlL]*", toks[1]):
        return str(-int(toks[1].rstrip("uUlL")))
    if toks in (["true"], ["false"]):
        return "1" if toks[0] == "true" else "0"
    if toks[0] == "(" and _close(toks, 0) < len(toks) - 1:
        rest = toks[_close(toks, 0) + 1:]
        if len(rest) in (1, 2) and re.fullmatch(r"-?\d+[uUlL]*", "".join(rest)):
            return str(int("".join(rest).rstrip("uUlL")))
    # an enumerator: Curve::Gamma
    if all(_is_ident(t) or t == "::" for t in toks) and toks[-1] != "::":
        path = [t for t in toks if t != "::"]
        v = enums.value(path)
        if v is not None and (len(path) > 1 or path[0] not in _TYPE_ALIASES):
            return str(v)
    # a type: qualifiers after the base, aliases spelled out, hidden scopes dropped
    lead = 0
    while lead < len(toks) and toks[lead] in ("const", "volatile"):
        lead += 1
    quals, body = toks[:lead], toks[lead:]
    out: list[str] = []
    i = 0
    while i < len(body):
        t = body[i]
        if _is_ident(t) and HIDDEN_SCOPE.match(t) and i + 1 < len(body) and body[i + 1] == "::":
            i += 2
            continue
        if t == "<":
            j = _close(body, i)
            args = [_canon(a, enums) for a in _split_top(body[i + 1:j], ",")]
            out += ["<", ",".join(args), ">"]
            i = j + 1
            continue
        out.append(t)
        i += 1
    # the base type's words, aliases resolved (unsigned -> unsigned int, uint32_t -> unsigned int)
    k = 0
    while k < len(out) and out[k] in _TYPE_WORDS:
        k += 1
    if k:
        words = " ".join(out[:k])
        out = _TYPE_ALIASES.get(words, words).split() + out[k:]
    elif out and out[0] in _TYPE_ALIASES and (len(out) == 1 or out[1] != "::"):
        out = _TYPE_ALIASES[out[0]].split() + out[1:]
    if out[:1] == ["std"] and out[1:2] == ["::"] and len(out) > 2 and out[2] in _TYPE_ALIASES:
        out = _TYPE_ALIASES[out[2]].split() + out[3:]
    if quals:
        at = next((j for j, t in enumerate(out) if t in ("*", "&", "&&")), len(out))
        out = out[:at] + quals + out[at:]
    return _join(out)


def read_name(text: str, enums: Enums = NO_ENUMS) -> CxxName:
    """A C++ name or signature as written (``void ns::kern<float, 4>(float*, int)``,
    ``kern<float>``, ``ns::kern``), read into scopes, template arguments and parameters."""
    toks = _tokens(re.sub(r"\[abi:[^\]]*\]", "", text).strip())  # ABI tags are no part of a written name
    while toks and toks[-1] in ("const", "volatile", "&", "&&"):
        toks.pop()
    params: tuple[str, ...] | None = None
    if toks and toks[-1] == ")":
        depth = 0
        for j in range(len(toks) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(toks[j], 0)
            if depth == 0:
                inner = toks[j + 1:-1]
                items = [_canon(p, enums) for p in _split_top(inner, ",")] if inner else []
                params = tuple(p for p in items if p != "void")
                toks = toks[:j]
                break
    # a return type before the name: the last top-level space-separated part is the name
    start = 0
    depth = 0
    for j, t in enumerate(toks):
        if t in "<([":
            depth += 1
        elif t in ">)]":
            depth -= 1
        elif depth == 0 and j > 0 and _is_ident(t) and (_is_ident(toks[j - 1]) or toks[j - 1] in ("*", "&", ">")) \
                and toks[j - 1] != "::":
            start = j
    scopes = []
    for part in _split_top(toks[start:], "::"):
        if not part:
            continue
        name = part[0]
        args: tuple[str, ...] | None = None
        if len(part) > 1 and part[1] == "<":
            inner = part[2:_close(part, 1)]
            args = tuple(_canon(a, enums) for a in _split_top(inner, ",")) if inner else ()
        elif len(part) > 1:
            name = _join(part)
        if HIDDEN_SCOPE.match(name):
            continue
        scopes.append((name, args))
    return CxxName(tuple(scopes), params)


def matches(written: CxxName, symbol: CxxName) -> bool:
    """Whether the name as written names `symbol` (see the module docstring)."""
    n = len(written.scopes)
    if n == 0 or n > len(symbol.scopes):
        return False
    for (wname, wargs), (sname, sargs) in zip(written.scopes, symbol.scopes[-n:]):
        if wname != sname:
            return False
        if wargs is not None and wargs != (sargs or ()):
            return False
    return written.params is None or written.params == symbol.params


# --------------------------------------------------------------------------- resolving


def listing(names: Sequence[str]) -> str:
    """Names for a hint: a few per line, at most `MAX_LISTED`, the rest counted."""
    lines: list[str] = []
    for n in names[:MAX_LISTED]:
        if lines and len(lines[-1]) + 2 + len(n) <= LINE_WIDTH:
            lines[-1] += "; " + n
        else:
            lines.append(n)
    if len(names) > MAX_LISTED:
        lines.append(f"... and {len(names) - MAX_LISTED} more")
    return "\n  ".join(lines)


def find_symbol(name: str, symbols: Sequence[str], *, what: str = "kernel", where: str = "",
                enums: Enums = NO_ENUMS, demangled: Mapping[str, str] | None = None,
                error: type[TuiprofError] = TuiprofError) -> str:
    """The one symbol of `symbols` that `name` names: the symbol itself, its demangled signature,
    or the C++ name as written (see the module docstring; a mangled `name` from another compile
    of the source matches across architecture namespaces). Raises TuiprofError listing the
    candidates (as `error`) when there is none or more than one. `demangled` caches symbol ->
    signature."""
    if name in symbols:
        return name
    sig = {s: (demangled or {}).get(s) or demangle(s) for s in symbols}
    exact = [s for s in symbols if sig[s] == name]
    if len(exact) == 1:
        return exact[0]
    written = read_name(demangle(name) if name.startswith("_Z") else name, enums)
    found = [s for s in symbols if matches(written, read_name(sig[s], enums))]
    if len(found) == 1:
        return found[0]
    at = f" in {where}" if where else ""
    if found:
        raise error(f"{what} name {name!r} is ambiguous{at}: it names {len(found)} {what}s",
                           "name one of them with its template arguments (or its full signature):\n  "
                           + listing([sig[s] for s in found]))
    names = [sig[s] for s in symbols]
    raise error(f"no {what} {name!r}{at}",
                       (f"its {what}s:\n  " + listing(names)) if names else f"it has no {what}")
