"""Kernel signatures read from CUDA source text, and the ``.entry`` parameter lists of PTX.

A small, careful reader for what ``tuiprof init`` needs, not a C++ parser: it finds every
``__global__`` function definition (``extern "C"`` or not, inside ``extern "C" { }`` blocks,
with ``__launch_bounds__`` and other attributes, templates marked as such), splits its parameter
list, and classifies each parameter: pointer or value, the pointee's ``const``-ness,
``__restrict__``, and the NumPy dtype of the element (simple ``typedef``/``using`` aliases of
the file are followed). What it cannot classify keeps ``dtype = None`` and a note; the generator
then falls back on the PTX parameter size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SCALAR_DTYPES: dict[str, str] = {
    "float": "float32", "double": "float64",
    "half": "float16", "__half": "float16",
    "__nv_bfloat16": "bfloat16", "nv_bfloat16": "bfloat16", "__bfloat16": "bfloat16",
    "bool": "bool_",
    "char": "int8", "signed char": "int8", "unsigned char": "uint8",
    "short": "int16", "short int": "int16", "signed short": "int16", "signed short int": "int16",
    "unsigned short": "uint16", "unsigned short int": "uint16",
    "int": "int32", "signed": "int32", "signed int": "int32",
    "unsigned": "uint32", "unsigned int": "uint32",
    "long": "int64", "long int": "int64", "signed long": "int64", "signed long int": "int64",
    "unsigned long": "uint64", "unsigned long int": "uint64",
    "long long": "int64", "long long int": "int64", "signed long long": "int64", "signed long long int": "int64",
    "unsigned long long": "uint64", "unsigned long long int": "uint64",
    "size_t": "uint64", "ssize_t": "int64", "ptrdiff_t": "int64", "intptr_t": "int64", "uintptr_t": "uint64",
    "int8_t": "int8", "uint8_t": "uint8", "int16_t": "int16", "uint16_t": "uint16",
    "int32_t": "int32", "uint32_t": "uint32", "int64_t": "int64", "uint64_t": "uint64",
}
"""C/CUDA scalar types -> NumPy dtype names (LP64: ``long`` is 64-bit, as on Linux). ``bfloat16``
has no NumPy type; the generator stores its raw bits as ``uint16``."""

ITEMSIZE: dict[str, int] = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "bool_": 1, "int8": 1,
                            "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8}
"""Bytes of one element of each dtype name `SCALAR_DTYPES` uses."""

_VECTOR_BASES = {
    "char": "int8", "uchar": "uint8", "short": "int16", "ushort": "uint16", "int": "int32",
    "uint": "uint32", "long": "int64", "ulong": "uint64", "longlong": "int64", "ulonglong": "uint64",
    "float": "float32", "double": "float64",
}
_VECTOR = re.compile(r"^(char|uchar|short|ushort|int|uint|long|ulong|longlong|ulonglong|float|double)([1-4])$")
_HALF2 = {"half2": "float16", "__half2": "float16", "__nv_bfloat162": "bfloat16", "nv_bfloat162": "bfloat16"}

_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct", "class", "enum",
               "typename", "__grid_constant__", "register"}
_ATTRIBUTE_CALLS = ("__launch_bounds__", "__maxnreg__", "__cluster_dims__", "__attribute__", "__declspec",
                    "alignas", "__align__")
_TOKEN = re.compile(r"[A-Za-z_]\w*|::|\d+|\S")


@dataclass(frozen=True)
class KernelParam:
    """One parameter of a kernel as written in the source."""

    name: str
    """The parameter's name, "" when the declaration leaves it unnamed."""
    type_text: str
    """The declared type, e.g. ``const float* __restrict__``."""
    base: str
    """The element (pointer) or value type after following aliases, e.g. ``float``, ``float4``."""
    pointer: bool
    const: bool
    """The pointee is ``const`` (an input the kernel only reads)."""
    restrict: bool
    dtype: str | None
    """NumPy dtype name of one element (``float32``; ``bfloat16`` for raw bf16), None if unknown."""
    lanes: int = 1
    """Components of a CUDA vector type (``float4``: 4), 1 otherwise."""
    indirection: int = 0
    """Pointer depth: 0 for a value, 1 for ``float*``, 2 for ``float**``."""

    @property
    def value_bytes(self) -> int | None:
        """Bytes the parameter takes in the kernel's parameter list, None if unknown."""
        if self.pointer:
            return 8
        if self.dtype is None:
            return None
        return ITEMSIZE[self.dtype] * self.lanes


@dataclass(frozen=True)
class KernelSignature:
    """A ``__global__`` function definition found in the source."""

    name: str
    params: tuple[KernelParam, ...]
    extern_c: bool
    template: bool
    line: int
    """1-based line of the ``__global__`` keyword."""
    dims: int
    """1, 2 or 3: the highest thread/block index component the body uses (``threadIdx.y`` -> 2)."""
    dynamic_shared: str | None
    """Element type of the ``extern __shared__`` array the body uses, None when it uses none."""
    max_threads: int | None
    """``__launch_bounds__`` maximum threads per block, None when not given (or not a number)."""
    bounds: tuple[str, ...] = ()
    """``__launch_bounds__``'s arguments as written (``BLOCK_THREADS``, ``BX * BY, 4``)."""
    template_params: tuple[str, ...] = ()
    """The template parameters' names, in order (``T``, ``TILE``)."""
    body: str = ""
    """The function body, comments blanked."""


@dataclass(frozen=True)
class EntryParam:
    """One parameter of a PTX ``.entry``: its PTX type (``u64``, ``f32``, ``b8``) and size."""

    name: str
    type: str
    size: int


_PTX_SIZES = {"pred": 1, "b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2,
              "b32": 4, "u32": 4, "s32": 4, "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8, "b128": 16}
_ENTRY_HEAD = re.compile(r"\.entry\s+([\w$.]+)\s*\(")
_ENTRY_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)(?:\s+\.ptr(?:\s*\.\w+)*)?(?:\s+\.align\s+\d+)?"
                          r"\s+([\w$.]+)(?:\s*\[(\d+)\])?")


def entry_params(ptx: str) -> dict[str, tuple[EntryParam, ...]]:
    """Kernel name -> its PTX parameters, for every ``.entry`` of `ptx`, in module order."""
    out: dict[str, tuple[EntryParam, ...]] = {}
    for m in _ENTRY_HEAD.finditer(ptx):
        end = ptx.find(")", m.end())
        body = ptx[m.end():end if end >= 0 else len(ptx)]
        params = []
        for p in _ENTRY_PARAM.finditer(body):
            typ, name, count = p.group(1), p.group(2), p.group(3)
            params.append(EntryParam(name, typ, _PTX_SIZES.get(typ, 0) * (int(count) if count else 1)))
        out[m.group(1)] = tuple(params)
    return out


# --------------------------------------------------------------------------- source


def strip_comments(text: str) -> str:
    """`text` with comments and string/char literals blanked (newlines kept, so offsets and
    line numbers still match), except ``extern "C"`` whose literal matters."""
    out = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif ch in "\"'":
            j = i + 1
            while j < n and text[j] != ch and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            literal = text[i:j]
            out.append(literal if literal == '"C"' else ch + " " * (len(literal) - 2) + ch if len(literal) >= 2 else literal)
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _blank_preprocessor(text: str) -> str:
    """Preprocessor lines (with their continuations) blanked: they are not declarations."""
    lines = text.split("\n")
    out = []
    continued = False
    for line in lines:
        if continued or line.lstrip().startswith("#"):
            continued = line.rstrip().endswith("\\")
            out.append(" " * len(line))
        else:
            out.append(line)
    return "\n".join(out)


def _match(text: str, start: int, open_ch: str, close_ch: str) -> int:
    """Index just past the bracket closing the one at `start` (len(text) when unbalanced)."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_ch:
            depth += 1
        elif text[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def type_aliases(code: str) -> dict[str, str]:
    """``typedef T name;`` and ``using name = T;`` of the file, T a plain (possibly qualified) type."""
    out = {}
    for m in re.finditer(r"\btypedef\s+([\w\s:]+?)\s+(\w+)\s*;", code):
        out[m.group(2)] = " ".join(m.group(1).split())
    for m in re.finditer(r"\busing\s+(\w+)\s*=\s*([\w\s:]+?)\s*;", code):
        out[m.group(1)] = " ".join(m.group(2).split())
    return out


def _extern_c_ranges(code: str) -> list[tuple[int, int]]:
    ranges = []
    for m in re.finditer(r'\bextern\s+"C"\s*\{', code):
        ranges.append((m.end() - 1, _match(code, m.end() - 1, "{", "}")))
    return ranges


def _decl_start(code: str, pos: int) -> int:
    """Start of the declaration holding `pos`: just after the previous ``;``, ``{`` or ``}``
    that is not inside the template or attribute brackets right before it."""
    depth = 0
    for i in range(pos - 1, -1, -1):
        ch = code[i]
        if ch in ")>]":
            depth += 1
        elif ch in "(<[":
            depth -= 1
        elif ch in ";{}" and depth <= 0:
            return i + 1
    return 0


def resolve_type(words: str, aliases: dict[str, str]) -> str:
    """`words` (a type without qualifiers) with the file's aliases followed and ``std::`` dropped."""
    seen = set()
    t = " ".join(words.replace("std::", "").split())
    while t in aliases and t not in seen:
        seen.add(t)
        t = " ".join(aliases[t].replace("std::", "").split())
    return t


def classify(base: str) -> tuple[str | None, int]:
    """(NumPy dtype of one element, lanes) of a resolved C/CUDA type; (None, 1) if unknown."""
    if base in SCALAR_DTYPES:
        return SCALAR_DTYPES[base], 1
    if base in _HALF2:
        return _HALF2[base], 2
    m = _VECTOR.match(base)
    if m:
        return _VECTOR_BASES[m.group(1)], int(m.group(2))
    return None, 1


_TYPE_KEYWORDS = {"void", "bool", "char", "short", "int", "long", "float", "double", "signed", "unsigned"}


def parse_param(text: str, aliases: dict[str, str]) -> KernelParam:
    """One parameter declaration (``const float* __restrict__ x``, ``float const*``, ``int n = 4``,
    ``float a[]``)."""
    text = " ".join(text.split("=", 1)[0].split())
    tokens = _TOKEN.findall(text)
    array = "[" in tokens
    if array:
        tokens = tokens[:tokens.index("[")]
    name = ""
    last = tokens[-1] if tokens else ""
    earlier_types = [t for t in tokens[:-1] if re.match(r"[A-Za-z_]", t) and t not in _QUALIFIERS]
    if re.match(r"[A-Za-z_]", last) and last not in _QUALIFIERS and last not in _TYPE_KEYWORDS and earlier_types:
        name = last
        tokens = tokens[:-1]
    depth = tokens.count("*") + (1 if array else 0)
    first_star = tokens.index("*") if "*" in tokens else len(tokens)
    before = tokens[:first_star]
    words = [t for t in before if (re.match(r"[A-Za-z_]", t) and t not in _QUALIFIERS) or t == "::"]
    base = resolve_type(" ".join(words).replace(" :: ", "::"), aliases)
    if depth <= 1:
        dtype, lanes = classify(base)
    else:
        dtype, lanes = "uint64", 1  # an array of device pointers
    type_text = text[:text.rfind(name)].strip() if name else text
    return KernelParam(name=name, type_text=type_text + ("*" if array else ""), base=base, pointer=depth > 0,
                       const=depth > 0 and "const" in before,
                       restrict=any(t in ("__restrict__", "__restrict", "restrict") for t in tokens),
                       dtype=dtype, lanes=lanes, indirection=depth)


def split_params(text: str) -> list[str]:
    """A parameter list split at its top-level commas (template and call brackets respected)."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch in "(<[{":
            depth += 1
        elif ch in ")>]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    parts = [p.strip() for p in parts]
    if parts == ["void"] or parts == [""]:
        return []
    return parts


def kernel_signatures(text: str) -> tuple[KernelSignature, ...]:
    """Every ``__global__`` function *definition* in `text`, in order (declarations and explicit
    template instantiations are not definitions and are skipped)."""
    code = _blank_preprocessor(strip_comments(text))
    aliases = type_aliases(code)
    extern_blocks = _extern_c_ranges(code)
    shared_arrays = {m.group(2): " ".join(m.group(1).split())
                     for m in re.finditer(r"\bextern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?"
                                          r"([\w\s:]+?)\s+(\w+)\s*\[\s*\]", code)}
    out = []
    for m in re.finditer(r"\b__global__\b", code):
        start = _decl_start(code, m.start())
        prefix = code[start:m.start()]
        i = m.end()
        name = None
        params_text = ""
        max_threads = None
        bounds: tuple[str, ...] = ()
        while i < len(code):
            t = re.compile(r"\s*([A-Za-z_]\w*|::|\S)").match(code, i)
            if t is None:
                break
            word = t.group(1)
            i = t.end()
            if word in _ATTRIBUTE_CALLS:
                paren = code.find("(", i)
                close = _match(code, paren, "(", ")")
                if word == "__launch_bounds__":
                    bounds = tuple(split_params(code[paren + 1:close - 1]))
                    bound = re.fullmatch(r"\s*(\d+)\s*", bounds[0]) if bounds else None
                    max_threads = int(bound.group(1)) if bound else None
                i = close
                continue
            if word == "<" and name is not None:
                i = _match(code, i - 1, "<", ">")  # explicit template arguments after the name
                continue
            if word == "(":
                close = _match(code, i - 1, "(", ")")
                params_text = code[i:close - 1]
                i = close
                break
            if re.match(r"[A-Za-z_]", word):
                name = word
        if name is None:
            continue
        after = re.compile(r"\s*(\S)").match(code, i)
        if after is None or after.group(1) != "{":
            continue  # a declaration or an explicit instantiation, not a definition
        body_end = _match(code, after.start(1), "{", "}")
        body = code[after.start(1):body_end]
        extern_c = bool(re.search(r'\bextern\s+"C"', prefix)) or any(a < m.start() < b for a, b in extern_blocks)
        template = bool(re.search(r"\btemplate\s*<", prefix))
        tparams: tuple[str, ...] = ()
        tm = re.search(r"\btemplate\s*<", prefix)
        if tm:
            inner = prefix[tm.end():_match(prefix, tm.end() - 1, "<", ">") - 1]
            tparams = tuple((re.findall(r"[A-Za-z_]\w*", p.split("=", 1)[0]) or [""])[-1] for p in split_params(inner))
        dims = 3 if re.search(r"\b(?:threadIdx|blockIdx|blockDim|gridDim)\s*\.\s*z\b", body) else \
            2 if re.search(r"\b(?:threadIdx|blockIdx|blockDim|gridDim)\s*\.\s*y\b", body) else 1
        dynamic = next((t for n, t in shared_arrays.items() if re.search(rf"\b{re.escape(n)}\b", body)), None)
        params = tuple(parse_param(p, aliases) for p in split_params(params_text))
        out.append(KernelSignature(name=name, params=params, extern_c=extern_c, template=template,
                                   line=code.count("\n", 0, m.start()) + 1, dims=dims,
                                   dynamic_shared=dynamic, max_threads=max_threads, bounds=bounds,
                                   template_params=tparams, body=body))
    return tuple(out)


def demangled_params(signature: str, aliases: dict[str, str] | None = None) -> tuple[KernelParam, ...] | None:
    """The parameter types of a demangled signature (``void axpy<float, 4>(float, float const*,
    float*, int)``), unnamed; None when it has no parameter list."""
    from tuiprof.toolchain.program import top_level_paren

    open_at = top_level_paren(signature.replace("(anonymous namespace)", " " * 21))
    if open_at < 0:
        return None
    close = _match(signature, open_at, "(", ")")
    return tuple(parse_param(p, aliases or {}) for p in split_params(signature[open_at + 1:close - 1]))
