"""The PTX module as plain data: what `parse_module` produces and the emulator decodes.

One flat register namespace per function: registers declared inside inline-asm `{ }` scopes (and
the `.param` variables of `call.uni` blocks) are renamed by the parser to unique names
``<name>~<scope number>`` (``~`` cannot occur in a PTX identifier, so no clash is possible), and
the scope braces themselves leave no trace in the instruction list.

Conventions the emulator relies on:

- ``Instruction.opcode`` is the base opcode (``ld``, ``mad``, ``call``); ``mods`` are the dotted
  suffixes in order (``ld.global.nc.v4.f32`` -> ``("global", "nc", "v4", "f32")``), ``::`` forms
  kept whole (``"L1::no_allocate"``, ``"shared::cta"``).
- ``call`` always has three operands ``(Args(returns), target, Args(arguments))`` (empty `Args`
  when absent), plus a fourth `Sym` (the prototype) for an indirect call through a register.
  Arguments and returns are `Sym`s naming ``.param`` variables declared in the call's scope (listed
  in ``Function.variables`` with space ``"param"``).
- Destinations with two results (``shfl.sync ... %r1|%p1``, ``setp ... %p1|%p2``) are one
  `PredDest` operand.
- A branch target is a `Label`; ``Function.labels`` maps it to the index of the instruction that
  follows it (``len(instructions)`` for a label at the very end).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from tuiprof.errors import TuiprofError

NEWEST_PTX_ISA = (9, 9)
"""The newest PTX ISA version whose instructions tuiprof reads (PTX ISA 6.x-9.x, sm_75-sm_90)."""


class PtxError(TuiprofError):
    """PTX the front end does not understand, or a query it cannot answer; names the PTX line and,
    when the PTX's ``.loc`` gives one, the source line (`source`, ``file:line``)."""

    def __init__(self, message: str, line: int = 0, hint: str = "", source: str = "") -> None:
        where = f"PTX line {line}{f' ({source})' if source else ''}: " if line else ""
        super().__init__(where + message, hint or "tuiprof does not read this PTX construct yet; please report "
                         "it with the PTX line shown")
        self.line = line
        self.detail = message
        self.source = source


TYPE_SIZES: dict[str, int] = {
    "pred": 1,
    "b8": 1, "u8": 1, "s8": 1,
    "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2, "e4m3": 1, "e5m2": 1,
    "b32": 4, "u32": 4, "s32": 4, "f32": 4, "f16x2": 4, "bf16x2": 4, "tf32": 4,
    "e4m3x2": 2, "e5m2x2": 2,
    "b64": 8, "u64": 8, "s64": 8, "f64": 8,
    "b128": 16,
}
"""Bytes of every PTX fundamental type (a ``.pred`` stored in memory takes one byte)."""

STATE_SPACES = ("global", "shared", "local", "const", "param", "generic")
"""The memory spaces an addressed instruction can name (``generic`` when it names none)."""

MEMORY_OPCODES = frozenset({"ld", "st", "atom", "red", "cp", "prefetch", "prefetchu", "ldu",
                            "cvta", "isspacep"})
TEXTURE_OPCODES = frozenset({"tex", "tld4", "suld", "sust", "sured", "txq", "suq"})
"""Texture and surface instructions (texture fetches go through the L1/texture path)."""
"""Opcodes whose modifiers may carry a state space."""


# --------------------------------------------------------------------------- operands


@dataclass(frozen=True)
class Reg:
    """A register (``%r12``, ``%rd3``, ``%p1``; scoped asm registers renamed ``r0~3``)."""

    name: str


@dataclass(frozen=True)
class Special:
    """A special register: ``%tid.x`` is ``Special("tid", "x")``, ``%laneid`` ``Special("laneid")``."""

    name: str
    component: str | None = None

    @property
    def text(self) -> str:
        return f"%{self.name}" + (f".{self.component}" if self.component else "")


@dataclass(frozen=True)
class Imm:
    """An immediate. ``float_bits`` is 0 for a literal whose ``value`` is the number written
    (int or decimal float), 32 or 64 for a hex float (``0f3F800000``, ``0d3FF0000000000000``)
    whose ``value`` is the raw IEEE bit pattern as an int, so no precision is lost."""

    value: int | float
    text: str
    float_bits: int = 0


@dataclass(frozen=True)
class Sym:
    """A variable, ``.param`` or function name used as a value (``mov.u64 %rd1, tile;``)."""

    name: str


@dataclass(frozen=True)
class Addr:
    """A memory operand ``[base+offset]``: ``[%rd4+8]``, ``[%rd4+-8]``, ``[sym+4]``, ``[0x100]``
    (base None: an absolute address)."""

    base: Reg | Sym | None
    offset: int = 0


@dataclass(frozen=True)
class TexAddr:
    """A texture or surface operand ``[handle, {c0, c1}]``: the texture (surface) object, a
    register holding its handle or a ``.texref`` name, and the coordinates."""

    base: Reg | Sym
    coords: tuple[Operand, ...]


@dataclass(frozen=True)
class Sink:
    """The ``_`` placeholder of a vector destination whose element is discarded."""


@dataclass(frozen=True)
class Vec:
    """A vector operand ``{%f1, %f2, _, %f4}``."""

    items: tuple[Operand, ...]


@dataclass(frozen=True)
class Label:
    """A branch target (``$L__BB0_3``)."""

    name: str


@dataclass(frozen=True)
class PredDest:
    """A two-result destination ``%r1|%p1`` (shfl.sync) or ``%p1|%p2`` (setp)."""

    reg: Reg | Sink
    pred: Reg


@dataclass(frozen=True)
class NegPred:
    """A negated predicate source operand ``!%p2``."""

    reg: Reg


@dataclass(frozen=True)
class Args:
    """The parenthesised return or argument list of ``call`` (``(param0, param1)``)."""

    items: tuple[Operand, ...]


Operand = Reg | Special | Imm | Sym | Addr | TexAddr | Sink | Vec | Label | PredDest | NegPred | Args


# --------------------------------------------------------------------------- locations


@dataclass(frozen=True)
class SourceLoc:
    """A ``.loc`` directive: file number, line, column, and where it was inlined, if it was.

    ``function_name`` is the ``$L__info_string`` label naming the inlined function (not resolved:
    its text lives in the debug sections the parser skips)."""

    file: int
    line: int
    column: int = 0
    inlined_at: SourceLoc | None = None
    function_name: str | None = None

    @property
    def outermost(self) -> SourceLoc:
        """The call site in the function actually compiled (the end of the inlined_at chain)."""
        loc = self
        while loc.inlined_at is not None:
            loc = loc.inlined_at
        return loc

    @property
    def chain(self) -> tuple[SourceLoc, ...]:
        """This location and every call site it was inlined into, innermost first."""
        out = [self]
        while out[-1].inlined_at is not None:
            out.append(out[-1].inlined_at)
        return tuple(out)


_SYSTEM_PATH = re.compile(
    r"^/(?:usr/(?:local/)?include|usr/lib\w*|usr/local/cuda[^/]*|opt/(?:nvidia/)?cuda[^/]*)/"
    r"|/targets/[^/]+/include/|/include/(?:cccl|crt|cub|thrust|nv|cuda/std|cooperative_groups)/"
    r"|/(?:site|dist)-packages/(?:nvidia|cuda|numba|triton|llvmlite)/|^<[^>]*>$")
_SYSTEM_HEADER = re.compile(r"^(?:cuda_\w+|sm_\d+_\w+|device_\w+|texture_\w+|surface_\w+|math_\w+|vector_\w+|"
                            r"cooperative_groups|curand\w*|cuComplex|__clang_cuda\w*)\.(?:h|hpp)$")


def is_system_path(path: str) -> bool:
    """Whether a ``.file`` path is a compiler's or a library's own header (the CUDA toolkit's,
    CCCL's, the C++ library's, a Python package's), never the user's code."""
    norm = os.path.normpath(path.replace("\\", "/")) if path else path
    return bool(_SYSTEM_PATH.search(norm) or _SYSTEM_HEADER.match(os.path.basename(norm)))


@dataclass(frozen=True)
class ResolvedLoc:
    """A location attributed to the user's file: file name, line and column."""

    file: str
    line: int
    column: int = 0


# --------------------------------------------------------------------------- declarations


@dataclass(frozen=True)
class Variable:
    """A ``.global/.shared/.const/.local/.param`` declaration (module or function level).

    ``dims`` holds the array dimensions (``()`` for a scalar; ``(0,)`` for an unsized extern
    array, i.e. dynamic shared memory, whose ``size_bytes`` is 0). ``init`` is the initial value
    as little-endian bytes, None when there is no initialiser."""

    name: str
    space: str
    type: str
    size_bytes: int
    align: int
    init: bytes | None = None
    dims: tuple[int, ...] = ()
    linkage: str = ""
    """``visible``, ``extern``, ``weak``, ``common`` or "" (module-private)."""
    ptx_line: int = 0

    @property
    def is_dynamic_shared(self) -> bool:
        return self.space == "shared" and self.size_bytes == 0 and self.linkage == "extern"


@dataclass(frozen=True)
class Param:
    """A kernel or device-function parameter (or a ``.func`` return value)."""

    name: str
    type: str
    size_bytes: int
    align: int
    is_pointer_hint: bool = False
    """Declared with ``.ptr`` (an address the kernel dereferences)."""
    ptr_space: str = ""
    """The ``.ptr`` state space (``global``, ``shared``...), "" when none was given."""
    dims: tuple[int, ...] = ()
    """Array dimensions (``.param .align 8 .b8 p[16]`` for a struct passed by value)."""


def param_layout(params: tuple[Param, ...]) -> tuple[tuple[int, ...], int]:
    """Each kernel parameter's byte offset in the ``.param`` state space, and the space's size:
    the parameters in declaration order, each at its ``.align`` (else its type's size), with no
    padding after the last. The driver's parameter buffer (``CU_LAUNCH_PARAM_BUFFER_POINTER``, what
    pycuda passes) and the emulator's parameter memory are both laid out so."""
    offsets: list[int] = []
    at = 0
    for p in params:
        a = max(p.align, 1)
        at = -(-at // a) * a
        offsets.append(at)
        at += p.size_bytes
    return tuple(offsets), at


# --------------------------------------------------------------------------- code


@dataclass(frozen=True)
class Instruction:
    """One PTX instruction, as written, with its source location and PTX line number."""

    opcode: str
    mods: tuple[str, ...]
    guard: tuple[str, bool] | None
    """(predicate register name, negated) for ``@%p1`` / ``@!%p1``; None when unguarded."""
    operands: tuple[Operand, ...]
    loc: SourceLoc | None
    ptx_line: int

    @property
    def space(self) -> str:
        """The state space named by a memory instruction (``shared::cta`` -> ``shared``);
        ``generic`` when it names none. For ``cp.async`` this is the destination (``shared``);
        `spaces` gives both. Empty for instructions that do not address memory."""
        spaces = self.spaces
        return spaces[0] if spaces else ""

    @property
    def spaces(self) -> tuple[str, ...]:
        """Every state space named in the modifiers, in order (``cp.async...shared.global`` ->
        ``("shared", "global")``); ``("generic",)`` for a memory instruction naming none."""
        if self.opcode not in MEMORY_OPCODES:
            return ()
        out = tuple(m.split("::", 1)[0] for m in self.mods
                    if m.split("::", 1)[0] in STATE_SPACES)
        return out or ("generic",)

    @property
    def type(self) -> str:
        """The last fundamental-type modifier (``f32`` in ``ld.global.v4.f32``), "" when none."""
        for m in reversed(self.mods):
            if m in TYPE_SIZES:
                return m
        return ""

    @property
    def vector(self) -> int:
        """Vector width from a ``.v2/.v4/.v8`` modifier, else 1."""
        for m in self.mods:
            if m in ("v2", "v4", "v8"):
                return int(m[1:])
        return 1

    @property
    def is_branch(self) -> bool:
        return self.opcode in ("bra", "brx")

    @property
    def is_terminator(self) -> bool:
        """Ends the thread's path through the function (ret, exit, trap) when unguarded."""
        return self.opcode in ("ret", "exit", "trap")


@dataclass(frozen=True)
class Function:
    """An ``.entry`` kernel or a ``.func`` device function (a declaration has no body)."""

    name: str
    is_entry: bool
    params: tuple[Param, ...]
    instructions: tuple[Instruction, ...]
    labels: dict[str, int]
    """Label name -> index of the instruction that follows it."""
    registers: dict[str, str]
    """Register name -> type, ``%r<40>`` ranges expanded, scoped registers renamed."""
    variables: tuple[Variable, ...] = ()
    """Function-level ``.local/.shared/.param/.const`` declarations (call-block ``.param``s too)."""
    ret_params: tuple[Param, ...] = ()
    linkage: str = ""
    """``visible``, ``extern``, ``weak`` or ""."""
    has_body: bool = True
    noreturn: bool = False
    maxntid: tuple[int, ...] | None = None
    reqntid: tuple[int, ...] | None = None
    minnctapersm: int | None = None
    maxnreg: int | None = None
    ptx_line: int = 0
    branch_targets: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """``.branchtargets`` tables for ``brx.idx``: table label -> target labels."""


@dataclass(frozen=True)
class Module:
    """A parsed PTX module."""

    version: str
    target: str
    address_size: int
    files: dict[int, str]
    """``.file`` table: number -> path as nvcc wrote it."""
    variables: tuple[Variable, ...]
    functions: dict[str, Function]

    @property
    def kernels(self) -> dict[str, Function]:
        """The ``.entry`` functions, in module order."""
        return {n: f for n, f in self.functions.items() if f.is_entry}


# --------------------------------------------------------------------------- analysis results


@dataclass(frozen=True)
class BasicBlock:
    """Instructions ``start`` .. ``end - 1`` of a function, entered only at ``start``."""

    index: int
    start: int
    end: int
    succs: tuple[int, ...]
    """Successor block indices; an exiting block has none (its edge goes to the virtual exit)."""
    preds: tuple[int, ...]


@dataclass(frozen=True)
class CFG:
    """The control-flow graph of one function."""

    blocks: tuple[BasicBlock, ...]
    block_of: tuple[int, ...]
    """Instruction index -> block index."""
    back_edges: frozenset[tuple[int, int]]
    """(from block, to block) edges that close a loop (target on the DFS stack)."""
    exits: tuple[int, ...]
    """Blocks that can leave the function (ret/exit/trap, or falling off the end)."""
