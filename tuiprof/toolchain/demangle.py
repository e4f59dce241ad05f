"""C++ symbol demangling for kernel and variable names (Itanium ABI, as nvcc and NVRTC mangle them).

The C++ runtime's own ``__cxa_demangle`` is used through ctypes (libstdc++ is present wherever
NumPy and Numba run on Linux), then ``cu++filt`` or ``c++filt``, then `itanium_demangle`, a small
demangler of tuiprof's own that reads what CUDA kernels and variables are made of (namespaces,
templates with type, integer, bool and enum arguments, substitutions, pointers and qualifiers,
local names) and writes it as ``c++filt`` does. A name none of them can read is returned as it
is, so a kernel is never lost, only shown mangled.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import shutil
import subprocess
from collections.abc import Callable
from typing import Any


def demangle(name: str) -> str:
    """The demangled signature of `name`, or `name` itself when it is not a mangled C++ name."""
    if not name.startswith("_Z"):
        return name
    return _demangler()(name) or itanium_demangle(name) or name


ANONYMOUS = "(anonymous namespace)"


def display_name(symbol: str, qualified: bool = True) -> str:
    """A kernel's name as its source and launch code write it: `symbol` demangled, without the
    return type of a template's instance and without the parameter list (``sum_vec4<256>`` for
    ``_Z8sum_vec4ILi256EEvPK6float4Pfi``, ``ns::A<int>::run``), and without its namespaces and
    classes unless `qualified` (``run``: a short name for a file); `symbol` itself for an
    ``extern "C"`` kernel or a name no demangler can read."""
    signature = demangle(symbol)
    if signature == symbol:
        return symbol
    head = signature.replace(ANONYMOUS, "\0")  # its parentheses and space are not the signature's
    depth, start = 0, 0
    for i, ch in enumerate(head):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0 and ch == " ":  # "void k<4>": a template instance's return type
            start = i + 1
        elif depth == 0 and not qualified and head.startswith("::", i):
            start = i + 2
        elif depth == 0 and ch == "(":  # the parameter list
            head = head[:i]
            break
    return head[start:].strip().replace("\0", ANONYMOUS) or symbol


@functools.lru_cache(maxsize=1)
def _demangler() -> Callable[[str], str | None]:
    return _cxa_demangler() or _cxxfilt_demangler


def _cxa_demangler() -> Callable[[str], str | None] | None:
    """``abi::__cxa_demangle`` from libstdc++ (or libc++), None when neither can be loaded."""
    for lib in ("stdc++", "c++"):
        path = ctypes.util.find_library(lib)
        candidates = [path] if path else []
        candidates += {"stdc++": ["libstdc++.so.6"], "c++": ["libc++.so.1", "libc++.dylib"]}[lib]
        for candidate in candidates:
            try:
                dll = ctypes.CDLL(candidate)
                fn = dll.__cxa_demangle
            except (OSError, AttributeError):
                continue
            fn.restype = ctypes.c_void_p
            fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t),
                           ctypes.POINTER(ctypes.c_int)]
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
            free = libc.free
            free.argtypes = [ctypes.c_void_p]

            def run(name: str, fn: Callable[..., Any] = fn, free: Callable[..., Any] = free) -> str | None:
                status = ctypes.c_int(0)
                ptr = fn(name.encode(), None, None, ctypes.byref(status))
                if not ptr or status.value != 0:
                    return None
                try:
                    return ctypes.string_at(ptr).decode("utf-8", "replace")
                finally:
                    free(ptr)

            if run("_Z1fi") == "f(int)":
                return run
    return None


def _cxxfilt_demangler(name: str) -> str | None:
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if tool is None:
        return None
    try:
        out = subprocess.run([tool, name], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    text = out.stdout.strip()
    return text if out.returncode == 0 and text and text != name else None


# --------------------------------------------------------------------------- tuiprof's own demangler

_BUILTIN = {
    "v": "void", "w": "wchar_t", "b": "bool", "c": "char", "a": "signed char", "h": "unsigned char",
    "s": "short", "t": "unsigned short", "i": "int", "j": "unsigned int", "l": "long", "m": "unsigned long",
    "x": "long long", "y": "unsigned long long", "n": "__int128", "o": "unsigned __int128", "f": "float",
    "d": "double", "e": "long double", "g": "__float128", "z": "...",
}
_BUILTIN_D = {"Dh": "half", "Dn": "decltype(nullptr)", "Da": "auto", "Ds": "char16_t", "Di": "char32_t",
              "Du": "char8_t", "Dc": "decltype(auto)"}
_STD_SUBS = {"St": "std", "Sa": "std::allocator", "Sb": "std::basic_string", "Ss": "std::string",
             "Si": "std::istream", "So": "std::ostream", "Sd": "std::iostream"}
_LITERAL_SUFFIX = {"j": "u", "l": "l", "m": "ul", "x": "ll", "y": "ull"}
_OPERATORS = {"nw": "new", "na": "new[]", "dl": "delete", "da": "delete[]", "ps": "+", "ng": "-", "ad": "&",
              "de": "*", "co": "~", "pl": "+", "mi": "-", "ml": "*", "dv": "/", "rm": "%", "an": "&", "or": "|",
              "eo": "^", "aS": "=", "pL": "+=", "mI": "-=", "mL": "*=", "dV": "/=", "rM": "%=", "aN": "&=",
              "oR": "|=", "eO": "^=", "ls": "<<", "rs": ">>", "lS": "<<=", "rS": ">>=", "eq": "==", "ne": "!=",
              "lt": "<", "gt": ">", "le": "<=", "ge": ">=", "ss": "<=>", "nt": "!", "aa": "&&", "oo": "||",
              "pp": "++", "mm": "--", "cm": ",", "pm": "->*", "pt": "->", "cl": "()", "ix": "[]", "qu": "?"}


class _Fail(Exception):
    """The name uses a construct this demangler does not read."""


class _Reader:
    """One pass over a mangled name, with the substitution table and the template arguments in scope."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.subs: list[str] = []
        self.targs: list[str] = []

    def peek(self, k: int = 0) -> str:
        return self.s[self.i + k] if self.i + k < len(self.s) else ""

    def take(self, prefix: str) -> bool:
        if self.s.startswith(prefix, self.i):
            self.i += len(prefix)
            return True
        return False

    def number(self) -> int:
        neg = self.take("n")
        j = self.i
        while self.peek().isdigit():
            self.i += 1
        if j == self.i:
            raise _Fail
        v = int(self.s[j:self.i])
        return -v if neg else v

    def seq_id(self, close: str = "_") -> int:
        """``_`` -> 0, ``<base 36>_`` -> n + 1."""
        if self.take(close):
            return 0
        j = self.i
        while self.peek().isalnum() and self.peek().upper() == self.peek():
            self.i += 1
        if j == self.i or not self.take(close):
            raise _Fail
        return int(self.s[j:self.i - 1], 36) + 1

    # ---------------------------------------------------------------- names

    def encoding(self, show_return: bool = True) -> str:
        name, is_template, cv = self.name()
        if not self.peek() or self.peek() in "E.":
            return name
        params = []
        ret = ""
        if is_template and not _is_ctor(name) and "operator " not in name:
            ret = self.type()
        while self.peek() and self.peek() not in "E.":
            params.append(self.type())
        args = "" if params == ["void"] else ", ".join(params)
        out = f"{name}({args}){cv}"
        return f"{ret} {out}" if ret and show_return else out

    def name(self) -> tuple[str, bool, str]:
        """(name, ends in template arguments, cv qualifiers of a member function)."""
        if self.take("N"):
            return self.nested()
        if self.take("Z"):
            outer = self.encoding(show_return=False)
            if not self.take("E"):
                raise _Fail
            if self.take("s"):
                inner = "string literal"
            else:
                inner, _, _ = self.name()
            if self.take("_"):
                if self.peek() == "_":
                    self.i += 1
                    self.number()
                    self.take("_")
                else:
                    self.number()
            return f"{outer}::{inner}", False, ""
        if self.peek() == "S" and self.peek(1) == "t":
            self.i += 2
            base = "std::" + self.unqualified()
        elif self.peek() == "S":
            base = self.substitution()
            if self.peek() != "I":
                return base, False, ""
        else:
            base = self.unqualified()
        if self.peek() == "I":
            self.subs.append(base)
            args = self.template_args()
            self.targs = args
            return f"{base}<{', '.join(args)}>".replace(">>", "> >"), True, ""
        return base, False, ""

    def nested(self) -> tuple[str, bool, str]:
        cv = ""
        while self.peek() in ("r", "V", "K"):
            cv = {"r": " restrict", "V": " volatile", "K": " const"}[self.s[self.i]] + cv
            self.i += 1
        self.take("R") or self.take("O")
        parts = ""
        is_template = False
        while not self.take("E"):
            if not self.peek():
                raise _Fail
            from_sub = False
            if self.peek() == "S" and self.peek(1) == "t":
                self.i += 2
                parts = "std"
                continue
            if self.peek() == "S":
                parts = self.substitution()
                from_sub = True
                is_template = False
            elif self.peek() == "I":
                args = self.template_args()
                self.targs = args
                parts = f"{parts}<{', '.join(args)}>".replace(">>", "> >")
                is_template = True
            elif self.peek() == "T":
                parts = self.template_param()
                is_template = False
            elif self.take("M"):
                continue
            else:
                comp = self.unqualified(parts)
                parts = f"{parts}::{comp}" if parts else comp
                is_template = False
            if not from_sub and self.peek() != "E":
                self.subs.append(parts)
        return parts, is_template, cv

    def unqualified(self, scope: str = "") -> str:
        c = self.peek()
        if c.isdigit():
            n = self.number()
            text = self.s[self.i:self.i + n]
            if len(text) != n:
                raise _Fail
            self.i += n
            out = "(anonymous namespace)" if text.startswith("_GLOBAL__N") else text
        elif c == "C" and self.peek(1) in "123":
            self.i += 2
            out = scope.rsplit("::", 1)[-1].split("<", 1)[0]
        elif c == "D" and self.peek(1) in "012":
            self.i += 2
            out = "~" + scope.rsplit("::", 1)[-1].split("<", 1)[0]
        elif c == "U" and self.peek(1) == "t":
            self.i += 2
            out = f"{{unnamed type#{self.seq_id() + 1}}}"
        elif c == "U" and self.peek(1) == "l":
            self.i += 2
            params = []
            while not self.take("E"):
                params.append(self.type())
            n = self.seq_id()
            args = "" if params == ["void"] else ", ".join(params)
            out = f"{{lambda({args})#{n + 1}}}"
        elif c == "L":
            self.i += 1
            return self.unqualified(scope)
        elif self.s[self.i:self.i + 2] in _OPERATORS:
            out = "operator" + _OPERATORS[self.s[self.i:self.i + 2]]
            self.i += 2
        elif c == "c" and self.peek(1) == "v":
            self.i += 2
            out = "operator " + self.type()
        else:
            raise _Fail
        while self.take("B"):
            n = self.number()
            out += f"[abi:{self.s[self.i:self.i + n]}]"
            self.i += n
        return out

    def substitution(self) -> str:
        for key, text in _STD_SUBS.items():
            if self.take(key):
                return text
        if not self.take("S"):
            raise _Fail
        k = self.seq_id()
        if k >= len(self.subs):
            raise _Fail
        return self.subs[k]

    def template_param(self) -> str:
        if not self.take("T"):
            raise _Fail
        k = self.seq_id()
        if k >= len(self.targs):
            raise _Fail
        return self.targs[k]

    def template_args(self) -> list[str]:
        if not self.take("I"):
            raise _Fail
        out = []
        while not self.take("E"):
            if not self.peek():
                raise _Fail
            out.append(self.template_arg())
        return out

    def template_arg(self) -> str:
        if self.take("L"):
            if self.take("_Z"):
                text = self.encoding()
                if not self.take("E"):
                    raise _Fail
                return text.split("(", 1)[0]
            return self.literal()
        if self.take("J"):
            items = []
            while not self.take("E"):
                items.append(self.template_arg())
            return ", ".join(items)
        if self.peek() == "X":
            raise _Fail
        return self.type()

    def literal(self) -> str:
        c = self.peek()
        if c == "b" and self.peek(1) in "01" and self.peek(2) == "E":
            self.i += 3
            return "true" if self.s[self.i - 2] == "1" else "false"
        if c in _BUILTIN and c not in "fdeg":
            self.i += 1
            v = self.number()
            if not self.take("E"):
                raise _Fail
            if c == "i":
                return str(v)
            if c in _LITERAL_SUFFIX:
                return f"{v}{_LITERAL_SUFFIX[c]}"
            return f"({_BUILTIN[c]}){v}"
        if c in "fdeg":
            raise _Fail
        t = self.type()
        v = self.number()
        if not self.take("E"):
            raise _Fail
        return f"({t}){v}"

    # ---------------------------------------------------------------- types

    def type(self) -> str:
        c = self.peek()
        if c in _BUILTIN and not (c == "S"):
            self.i += 1
            return _BUILTIN[c]
        two = self.s[self.i:self.i + 2]
        if two in _BUILTIN_D:
            self.i += 2
            return _BUILTIN_D[two]
        if two == "DF":
            self.i += 2
            bits = self.number()
            self.take("_")
            return f"_Float{bits}"
        if c == "u":
            self.i += 1
            return self.unqualified()
        if c in "PROKVr":
            self.i += 1
            inner = self.type()
            if c == "P":
                out = _suffix(inner, "*")
            elif c == "R":
                out = _suffix(inner, "&")
            elif c == "O":
                out = _suffix(inner, "&&")
            else:
                quals = {"K": "const", "V": "volatile", "r": "restrict"}[c]
                out = f"{inner} {quals}"
            self.subs.append(out)
            return out
        if c == "A":
            self.i += 1
            dim = str(self.number()) if self.peek().isdigit() else ""
            if not self.take("_"):
                raise _Fail
            inner = self.type()
            out = f"{inner} [{dim}]"
            self.subs.append(out)
            return out
        if c == "F":
            self.i += 1
            ret = self.type()
            params = []
            while not self.take("E"):
                params.append(self.type())
            args: str | list[str] = "" if params == ["void"] else ", ".join(params)
            out = f"{ret} ({args})"
            self.subs.append(out)
            return out
        if c == "T":
            out = self.template_param()
            self.subs.append(out)
            if self.peek() == "I":
                args = self.template_args()
                out = f"{out}<{', '.join(args)}>"
                self.subs.append(out)
            return out
        if c == "S" and two not in ("St",):
            out = self.substitution()
            if self.peek() == "I":
                args = self.template_args()
                out = f"{out}<{', '.join(args)}>".replace(">>", "> >")
                self.subs.append(out)
            return out
        if c == "D" and self.peek(1) in "tT":
            raise _Fail
        saved_targs = self.targs
        out, _, _ = self.name()
        self.targs = saved_targs
        self.subs.append(out)
        return out


def _suffix(inner: str, mark: str) -> str:
    return inner + mark if inner.endswith(("*", "&")) else f"{inner}{mark}"


def _is_ctor(name: str) -> bool:
    last = name.rsplit("::", 1)[-1].split("<", 1)[0]
    scope = name.rsplit("::", 2)[-2].split("<", 1)[0] if "::" in name else ""
    return bool(scope) and (last == scope or last == "~" + scope)


def itanium_demangle(name: str) -> str | None:
    """`name` demangled by tuiprof's own reader (see the module docstring), or None when it is not
    a mangled name or uses a construct the reader does not know."""
    if not name.startswith("_Z"):
        return None
    r = _Reader(name)
    r.i = 2
    try:
        out = r.encoding()
    except (_Fail, IndexError, ValueError, RecursionError):
        return None
    if r.peek() == ".":  # a compiler's clone suffix (.constprop.0)
        out += f" [clone {r.s[r.i:]}]"
        r.i = len(r.s)
    return out if r.i == len(r.s) else None
