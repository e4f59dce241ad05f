"""What a compile produces: the PTX of a CUDA source with the facts the rest of tuiprof needs.

A `Program` is plain, frozen data (it round-trips through JSON for the build cache): the PTX text,
which compiler made it for which target with which flags, the source text (and its local headers,
so that a trace can embed them), and per kernel the resources that bound occupancy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tuiprof.errors import BuildError

if TYPE_CHECKING:
    from tuiprof.toolchain.names import Enums


@dataclass(frozen=True)
class KernelResources:
    """Per-kernel resources as the CUDA occupancy calculator uses them.

    ``registers_per_thread`` and ``static_shared`` (bytes per CTA, ``__shared__`` arrays of fixed
    size) bound how many CTAs fit on an SM; ``local_bytes_per_thread`` is the stack frame including
    callees (local arrays, spills); ``const_bytes`` is the module's user ``__constant__`` memory,
    shared by every kernel of the file (as ``cudaFuncAttributes.constSizeBytes``).
    """

    registers_per_thread: int
    static_shared: int
    local_bytes_per_thread: int
    const_bytes: int


@dataclass(frozen=True)
class KernelInfo:
    """One ``.entry`` of the PTX: its symbol (mangled unless ``extern "C"``), the demangled C++
    signature (equal to ``name`` for ``extern "C"`` kernels), and its resources (None when no
    assembler was available to measure them)."""

    name: str
    demangled: str
    resources: KernelResources | None

    @property
    def base_name(self) -> str:
        """The unqualified function name without template arguments: ``axpy`` for
        ``void ns::axpy<float, 4>(float*, int)``."""
        return base_name(self.demangled)


@dataclass(frozen=True)
class InputFile:
    """A file that went into the compile, with its absolute path and text."""

    path: str
    text: str


@dataclass(frozen=True)
class Program:
    """A compiled CUDA source.

    ``compiler`` names the tool and its version (``"nvcc 13.0.88"``, ``"nvrtc 13.5"``); ``target``
    is the ``sm_XX`` the PTX was generated for (the requested compute capability, floored at the
    oldest the compiler supports and capped at the newest, see `choose_target`); ``requested`` is
    the compute capability that was asked for. ``flags`` are the user's pass-through flags as given
    to the compiler (relative include folders made absolute). ``resources_from`` says where the
    kernel resources come from: ``"ptxas -v"``, ``"cubin"`` (the ELF attributes of the assembled
    kernel) or ``"none"``. ``log`` holds the compiler's warnings, trimmed.
    """

    ptx: str
    compiler: str
    target: str
    requested: tuple[int, int]
    flags: tuple[str, ...]
    source: InputFile
    headers: tuple[InputFile, ...]
    kernels: tuple[KernelInfo, ...]
    resources_from: str
    log: str = ""

    @property
    def kernel_names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.kernels)

    def kernel(self, name: str) -> KernelInfo:
        """The kernel called `name`: its PTX symbol, its demangled signature, or its C++ name as
        written (``spmv``, ``axpy<float, 4>``, ``ns::reduce<256, true>``; `tuiprof.toolchain.names`)."""
        from tuiprof.toolchain.names import find_symbol

        by_name = {k.name: k for k in self.kernels}
        symbol = find_symbol(name, tuple(by_name), where=self.source.path, enums=self.enums,
                             demangled={k.name: k.demangled for k in self.kernels}, error=BuildError)
        return by_name[symbol]

    @property
    def enums(self) -> "Enums":
        """The enumerators of the source and its headers (template arguments by name)."""
        from tuiprof.toolchain.names import source_enums

        return source_enums([f.text for f in self.files])

    @property
    def files(self) -> tuple[InputFile, ...]:
        """The source followed by its local headers."""
        return (self.source, *self.headers)


def base_name(signature: str) -> str:
    """The unqualified name of a demangled C++ function signature (or a plain C name)."""
    text = signature.replace("(anonymous namespace)::", "")
    paren = top_level_paren(text)
    if paren >= 0:
        text = text[:paren]
    # drop template arguments at the end of the name: name<...>
    text = text.rstrip()
    if text.endswith(">"):
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            depth += {">": 1, "<": -1}.get(text[i], 0)
            if depth == 0:
                text = text[:i]
                break
    # drop a return type ("void name") and qualifiers ("ns::name")
    text = text.split(" ")[-1] if " " in text.strip() else text
    return text.split("::")[-1].strip()


def top_level_paren(text: str) -> int:
    """Index of the '(' opening the parameter list (outside any template brackets), or -1."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            return i
    return -1
