"""Memory instructions of a kernel as `StaticOp`s: kind, space, width, source location, label,
and the bulk-sequence starts of paper 000 sec. 2.

*Which instructions*: global, shared, local and generic ``ld``/``ldu``/``st``/``atom``/``red``,
and ``cp.async`` (a global load plus a shared store). ``ld.param`` and ``ld.const`` are not ops:
they are not in the cache model.

*Source location*: nvcc's ``.loc`` column is the start of the statement, not of the accessed
expression, and inlined code carries an ``inlined_at`` chain. An op is attributed to the
innermost location of its chain that lies in the user's file (the ``.file`` entry named like the
compiled source, else file 1): code inlined from a header (``__ldg``, ``atomicAdd``) lands on its
call site, code of the user's own device functions on their own lines.

*Label*: the accessed expression, found in the source line: the subscript (``y[ind]``,
``tile[ty][tx]``) or ``->`` chain on the side of the assignment that matches the op's kind,
whose base names the array the address comes from (traced back through the registers to a
kernel parameter or a shared variable). When several remain, the k-th instruction of a line
takes the k-th candidate; with none, the trimmed line. The StaticOp's column is the label's
(as the synthetic models give it), or the ``.loc`` column when the label is the whole line.

*Merging*: the copies of one access that unrolling creates (same source location, kind, space,
width and label) share one StaticOp, as the synthetic models of ``tuiprof.trace.synth`` count
them; its ``starts_sequence`` is true when any copy starts a sequence. Instructions without line
information are never merged.

*Bulk sequences*: an op starts a new sequence when, on some path reaching it, a loop back-edge
or a CTA barrier lies between it and the previous op, or its address depends (through registers)
on a value read by an op of the current sequence; the first op of a kernel starts one.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from tuiprof.ptx.cfg import build_cfg
from tuiprof.ptx.model import (TYPE_SIZES, Addr, Args, Function, Imm, Instruction, Module,
                               NegPred, Operand, PredDest, PtxError, Reg, ResolvedLoc, SourceLoc,
                               Sym, Vec)
from tuiprof.trace.model import StaticOp

LOAD_OPCODES = frozenset({"ld", "ldu"})
STORE_OPCODES = frozenset({"st"})
ATOMIC_OPCODES = frozenset({"atom", "red"})
OP_SPACES = frozenset({"global", "shared", "local", "generic"})
NO_DEST_OPCODES = frozenset({
    "st", "red", "bra", "brx", "ret", "exit", "trap", "bar", "barrier", "membar", "fence", "call",
    "prefetch", "prefetchu", "cp", "nanosleep", "pmevent", "brkpt", "griddepcontrol", "setmaxnreg",
    "stmatrix", "discard", "applypriority",
})
"""Opcodes whose first operand is not a register they write."""


@dataclass(frozen=True)
class MemOp:
    """One memory access of one instruction (``cp.async`` makes two)."""

    index: int
    kind: str
    space: str
    bytes: int
    address: Addr


def is_barrier(ins: Instruction) -> bool:
    """A CTA-wide barrier that waits (``bar.sync``, ``barrier.sync``, ``bar.red``,
    ``barrier.cta.sync``...), not ``bar.warp.sync`` nor an ``arrive``."""
    return ins.opcode in ("bar", "barrier") and "warp" not in ins.mods and "arrive" not in ins.mods


def memory_ops(ins: Instruction, index: int) -> tuple[MemOp, ...]:
    """The cache-model accesses an instruction makes (empty for non-memory and param/const)."""
    op = ins.opcode
    if op in LOAD_OPCODES or op in STORE_OPCODES or op in ATOMIC_OPCODES:
        space = ins.space
        if space not in OP_SPACES:
            return ()
        kind = "load" if op in LOAD_OPCODES else "store" if op in STORE_OPCODES else "atomic"
        addr_pos = 0 if op in STORE_OPCODES or op == "red" else 1
        if len(ins.operands) <= addr_pos or not isinstance(ins.operands[addr_pos], Addr):
            raise PtxError(f"{op} without an address operand", ins.ptx_line)
        t = ins.type
        if not t:
            raise PtxError(f"{op} without a type", ins.ptx_line)
        size = TYPE_SIZES[t] * ins.vector
        return (MemOp(index, kind, "global" if space == "generic" else space, size,
                      ins.operands[addr_pos]),)  # type: ignore[arg-type]
    if op == "cp" and ins.mods[:1] == ("async",):
        if len(ins.mods) > 1 and ins.mods[1] in ("commit_group", "wait_group", "wait_all"):
            return ()
        if len(ins.mods) > 1 and ins.mods[1] in ("bulk", "mbarrier"):
            raise PtxError(f"cp.{'.'.join(ins.mods)} (bulk asynchronous copies) is not supported",
                           ins.ptx_line)
        if (len(ins.operands) < 3 or not isinstance(ins.operands[0], Addr)
                or not isinstance(ins.operands[1], Addr) or not isinstance(ins.operands[2], Imm)):
            raise PtxError("malformed cp.async", ins.ptx_line)
        size = int(ins.operands[2].value)
        dst, src = ins.operands[0], ins.operands[1]
        return (MemOp(index, "load", "global", size, src),  # type: ignore[arg-type]
                MemOp(index, "store", "shared", size, dst))  # type: ignore[arg-type]
    return ()


# --------------------------------------------------------------------------- registers


def _regs(o: Operand) -> list[str]:
    if isinstance(o, Reg):
        return [o.name]
    if isinstance(o, Vec):
        return [r for it in o.items for r in _regs(it)]
    if isinstance(o, Addr):
        return [o.base.name] if isinstance(o.base, Reg) else []
    if isinstance(o, NegPred):
        return [o.reg.name]
    if isinstance(o, PredDest):
        return _regs(o.reg) + [o.pred.name]
    if isinstance(o, Args):
        return [r for it in o.items for r in _regs(it)]
    return []


def defs_uses(ins: Instruction) -> tuple[list[str], list[str]]:
    """(registers written, registers read) by an instruction."""
    ops = ins.operands
    if not ops or ins.opcode in NO_DEST_OPCODES:
        uses = [r for o in ops for r in _regs(o)]
        if ins.guard:
            uses.append(ins.guard[0])
        return [], uses
    first = ops[0]
    if isinstance(first, (Reg, Vec, PredDest)):
        defs = _regs(first)
        rest = ops[1:]
    else:
        defs, rest = [], ops
    uses = [r for o in rest for r in _regs(o)]
    if ins.guard:
        uses.append(ins.guard[0])
    return defs, uses


# --------------------------------------------------------------------------- bulk sequences


def barrier_functions(module: Module) -> frozenset[str]:
    """Functions that may execute a CTA barrier, themselves or through the functions they call."""
    calls: dict[str, set[str]] = {}
    out: set[str] = set()
    for name, f in module.functions.items():
        calls[name] = {i.operands[1].name for i in f.instructions
                       if i.opcode == "call" and len(i.operands) > 1 and isinstance(i.operands[1], Sym)}
        if any(is_barrier(i) for i in f.instructions):
            out.add(name)
    changed = True
    while changed:
        changed = False
        for name, callees in calls.items():
            if name not in out and callees & out:
                out.add(name)
                changed = True
    return frozenset(out)


def sequence_starts(fn: Function, entry_starts: bool | None = None,
                    barrier_calls: frozenset[str] = frozenset()) -> dict[int, bool]:
    """For every memory instruction of `fn` (index -> flag): does it start a bulk sequence?

    A forward data-flow over the CFG whose state is (a back-edge or barrier was crossed since the
    last op on some path; the registers holding values read by an op of the current sequence),
    joined by union. `entry_starts` says whether the function's first op starts a sequence
    (default: for kernels, yes; for device functions, no); a call to one of `barrier_calls`
    (see `barrier_functions`) counts as a barrier.
    """
    g = build_cfg(fn)
    if not g.blocks:
        return {}
    if entry_starts is None:
        entry_starts = fn.is_entry
    instrs = fn.instructions
    mem = {i: memory_ops(ins, i) for i, ins in enumerate(instrs)}
    mem = {i: m for i, m in mem.items() if m}
    du = [defs_uses(ins) for ins in instrs]
    barrier = [is_barrier(ins) or (ins.opcode == "call" and len(ins.operands) > 1
                                   and isinstance(ins.operands[1], Sym)
                                   and ins.operands[1].name in barrier_calls) for ins in instrs]
    nb = len(g.blocks)
    in_p = [False] * nb
    in_t: list[frozenset[str]] = [frozenset()] * nb
    reached = [False] * nb
    in_p[0] = entry_starts
    reached[0] = True

    def run(b: int, record: dict[int, bool] | None) -> tuple[bool, set[str]]:
        p, t = in_p[b], set(in_t[b])
        blk = g.blocks[b]
        for i in range(blk.start, blk.end):
            if barrier[i]:
                p = True
            ops = mem.get(i)
            if ops:
                addr_regs = {r for m in ops for r in _regs(m.address)}
                start = p or bool(addr_regs & t)
                if record is not None:
                    record[i] = start
                if start:
                    t = set()
                    p = False
                if any(m.kind != "store" for m in ops) and instrs[i].opcode != "cp":
                    t.update(du[i][0])
                continue
            defs, uses = du[i]
            if defs:
                if any(u in t for u in uses):
                    t.update(defs)
                elif instrs[i].guard is None:
                    t.difference_update(defs)
        return p, t

    work = [0]
    queued = {0}
    while work:
        b = work.pop()
        queued.discard(b)
        p, t = run(b, None)
        for s in g.blocks[b].succs:
            sp = p or (b, s) in g.back_edges
            new_p = in_p[s] or sp
            new_t = in_t[s] | t
            if not reached[s] or new_p != in_p[s] or new_t != in_t[s]:
                reached[s] = True
                in_p[s], in_t[s] = new_p, frozenset(new_t)
                if s not in queued:
                    queued.add(s)
                    work.append(s)
    out: dict[int, bool] = {}
    for b in range(nb):
        if reached[b]:
            run(b, out)
    for i in mem:
        out.setdefault(i, False)  # unreachable code
    return out


# --------------------------------------------------------------------------- source mapping


def user_file(module: Module, source_name: str) -> int:
    """The ``.file`` number of the compiled source: the entry named like `source_name` (whole
    path first, then the base name), else 1."""
    want = os.path.normpath(source_name)
    for num, path in module.files.items():
        if os.path.normpath(path) == want:
            return num
    base = os.path.basename(source_name)
    for num, path in sorted(module.files.items()):
        if os.path.basename(path) == base:
            return num
    return 1


def resolve_loc(loc: SourceLoc, user: int) -> SourceLoc:
    """The innermost location of `loc`'s inlined_at chain in file `user` (else the outermost)."""
    for at in loc.chain:
        if at.file == user:
            return at
    return loc.outermost


_IDENT_RE = re.compile(r"[A-Za-z_]\w*")
_ASSIGN_RE = re.compile(r"(?<![=!<>+\-*/%&|^])([+\-*/%&|^]|<<|>>)?=(?!=)")


@dataclass(frozen=True)
class _Candidate:
    text: str
    base: str
    start: int
    end: int
    side: str
    """"lhs" (assigned), "rhs" (read), "both" (compound assignment target), "arg" (argument of an
    atomic* call)."""


def _match_bracket(text: str, i: int) -> int:
    """Index just past the bracket closing the one at `i`, or -1."""
    pairs = {"[": "]", "(": ")"}
    close = pairs[text[i]]
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


def _strip_comment(line: str) -> str:
    return line.split("//", 1)[0]


_CONTROL_RE = re.compile(r"\b(if|for|while|switch)\s*\(")
_TYPE_WORDS = frozenset({"unsigned", "signed", "int", "float", "double", "char", "long", "short",
                         "const", "volatile", "void", "bool", "size_t", "half", "__half",
                         "uint", "int2", "int4", "float2", "float4", "uint2", "uint4"})


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
                close = _match_bracket(text, m.end() - 1)
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


def _assignment(text: str, lo: int, hi: int) -> re.Match[str] | None:
    """The first assignment operator at bracket depth 0 in ``text[lo:hi]``."""
    for m in _ASSIGN_RE.finditer(text, lo, hi):
        pre = text[lo:m.start()]
        if pre.count("(") - pre.count(")") <= 0 and pre.count("[") - pre.count("]") <= 0:
            return m
    return None


def _access_end(text: str, j: int) -> int:
    """End of the subscript / ``->`` chain starting at `j` (just after an identifier); `j` if none."""
    end = j
    is_access = False
    n = len(text)
    while True:
        k = end
        while k < n and text[k] == " ":
            k += 1
        if k < n and text[k] == "[":
            close = _match_bracket(text, k)
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
        if is_access and k < n and text[k] == ".":
            mm = _IDENT_RE.match(text, k + 1)
            if not mm:
                break
            end = mm.end()
            continue
        break
    return end if is_access else j


def candidates(line: str) -> list[_Candidate]:
    """Accessed expressions of a source line with their side of the assignment: subscripts and
    ``->`` chains (``y[ind]``, ``tile[ty][tx]``, ``p->next``), dereferences (``*flag``), and
    ``atomic*()`` calls whose target has no subscript (``atomicAdd(out, s)``)."""
    text = _strip_comment(line)
    out: list[_Candidate] = []
    for lo, hi in _segments(text):
        assign = _assignment(text, lo, hi)

        def side_of(start: int, end: int) -> str:
            before = text[lo:start].rstrip()
            after = text[end:hi]
            if re.match(r"\s*(\+\+|--)", after) or before.endswith(("++", "--")):
                return "both"
            call = re.search(r"(\w+)\s*\(\s*&?\s*$", before)
            if call and call.group(1).startswith("atomic"):
                return "arg"
            if assign is not None and end <= assign.start():
                return "both" if assign.group(1) else "lhs"
            return "rhs"

        for m in _IDENT_RE.finditer(text, lo, hi):
            start = m.start()
            if start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_."):
                continue
            if start > 1 and text[start - 2:start] == "->":
                continue
            name = m.group(0)
            if name.startswith("atomic") and text[m.end():hi].lstrip().startswith("("):
                k = text.index("(", m.end())
                close = _match_bracket(text, k)
                if close > 0:
                    args = text[k + 1:close - 1]
                    first = re.split(r",", args, maxsplit=1)[0]
                    if "[" not in first:
                        ids = [x for x in _IDENT_RE.findall(first) if x not in _TYPE_WORDS]
                        out.append(_Candidate(text[start:close], ids[-1] if ids else "",
                                              start, close, "arg"))
                continue
            end = _access_end(text, m.end())
            if end > m.end():
                out.append(_Candidate(text[start:end], name, start, end, side_of(start, end)))
                continue
            before = text[lo:start].rstrip()
            if before.endswith("*"):  # unary: `*p`, not `float *p` nor `a * b`
                prior = before[:-1].rstrip()
                if not prior or prior[-1] in "(=,!&|+-<>?:*" or re.search(r"\breturn$", prior):
                    star = lo + len(before) - 1
                    out.append(_Candidate("*" + name, name, star, m.end(), side_of(star, m.end())))
    return out


def _plain_name(name: str) -> str:
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


def source_params(source: str, function: str) -> list[str]:
    """Parameter names of `function`'s definition in the CUDA source (empty if not found)."""
    name = _plain_name(function)
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.S)
    for m in re.finditer(rf"\b{re.escape(name)}\s*\(", text):
        head = text[max(0, m.start() - 300):m.start()]
        head = re.split(r"[;}]", head)[-1]
        if "__global__" not in head and "__device__" not in head:
            continue
        close = _match_bracket(text, m.end() - 1)
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
        return params
    return []


def _split_params(text: str) -> list[str]:
    out, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "(<[":
            depth += 1
        elif c in ")>]":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    if text[start:].strip():
        out.append(text[start:])
    return out


class _Origins:
    """Where an address comes from: kernel parameters and variables its registers derive from."""

    ARITH = frozenset({"add", "sub", "mov", "cvta", "cvt", "mad", "selp", "and", "or", "shl",
                       "mul", "xor"})

    def __init__(self, fn: Function) -> None:
        self.fn = fn
        self.defs: dict[str, list[Instruction]] = {}
        for ins in fn.instructions:
            for r in defs_uses(ins)[0]:
                self.defs.setdefault(r, []).append(ins)
        self.param_index = {p.name: i for i, p in enumerate(fn.params)}
        self.memo: dict[str, frozenset[tuple[str, str]]] = {}

    def of_address(self, addr: Addr) -> frozenset[tuple[str, str]]:
        if isinstance(addr.base, Sym):
            return frozenset({("sym", addr.base.name)})
        if isinstance(addr.base, Reg):
            return self.of_reg(addr.base.name)
        return frozenset()

    def of_reg(self, reg: str) -> frozenset[tuple[str, str]]:
        if reg in self.memo:
            return self.memo[reg]
        self.memo[reg] = frozenset()  # cycles (loop-carried pointers) end here
        out: set[tuple[str, str]] = set()
        for ins in self.defs.get(reg, []):
            if ins.opcode == "ld" and ins.space == "param" and len(ins.operands) > 1:
                a = ins.operands[1]
                if isinstance(a, Addr) and isinstance(a.base, Sym) and a.base.name in self.param_index:
                    p = self.fn.params[self.param_index[a.base.name]]
                    if p.size_bytes == 8 or p.is_pointer_hint:
                        out.add(("param", str(self.param_index[a.base.name])))
                continue
            if ins.opcode == "cvta" and "to" not in ins.mods:
                sp = ins.space
                if sp in ("shared", "local"):
                    out.add(("space", sp))
            if ins.opcode not in self.ARITH:
                continue
            for o in ins.operands[1:]:
                if isinstance(o, Reg):
                    out |= self.of_reg(o.name)
                elif isinstance(o, Sym):
                    out.add(("sym", o.name))
        res = frozenset(out)
        self.memo[reg] = res
        return res


def _sides_for(kind: str) -> tuple[tuple[str, ...], ...]:
    """Candidate sides to try in order for an op kind."""
    if kind == "store":
        return (("lhs", "both"), ("lhs", "both", "arg", "rhs"))
    if kind == "atomic":
        return (("arg",), ("both",), ("arg", "both", "lhs", "rhs"))
    return (("rhs", "both"), ("rhs", "both", "arg", "lhs"))


@dataclass(frozen=True)
class _RawOp:
    function: str
    index: int
    kind: str
    space: str
    bytes: int
    file: str
    line: int
    column: int
    ptx_line: int
    starts: bool
    bases: frozenset[str]
    """Source-level names the address may derive from (parameters, variables)."""
    excluded: frozenset[str]
    """Names that cannot be this op's base (a pointer parameter for a shared or local op, a
    shared array for a global op)."""


def _read_source(module: Module, file_no: int) -> str | None:
    path = module.files.get(file_no)
    if not path:
        return None
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


def _called(module: Module, fn: Function) -> list[str]:
    """Module functions with bodies that `fn` calls, transitively, in module order."""
    seen: set[str] = set()
    stack = [fn.name]
    while stack:
        f = module.functions.get(stack.pop())
        if f is None:
            continue
        for ins in f.instructions:
            if ins.opcode == "call" and len(ins.operands) > 1 and isinstance(ins.operands[1], Sym):
                name = ins.operands[1].name
                callee = module.functions.get(name)
                if callee is not None and callee.has_body and name not in seen and name != fn.name:
                    seen.add(name)
                    stack.append(name)
    return [n for n in module.functions if n in seen]


def static_ops(module: Module, kernel: str, source_name: str,
               source_text: str | None = None) -> tuple[tuple[str, int, StaticOp], ...]:
    """The StaticOp table of `kernel` and of the device functions it calls.

    Returns ``(function name, instruction index, StaticOp)`` for every memory access, the
    kernel's first, then each called ``.func``'s in module order; ids count from 0 in that
    order of first appearance. Several instructions share one StaticOp when they are unrolled
    copies of one source access; ``cp.async`` gives two entries at one index (the global load,
    then the shared store). Generic accesses get space ``global`` unless their address provably
    comes from ``cvta.shared``/``cvta.local`` (the emulator resolves the rest at run time).
    `source_text` is the compiled source (read from the ``.file`` path when not given); without
    it the labels are empty.
    """
    fn = module.functions.get(kernel)
    if fn is None or not fn.is_entry:
        names = ", ".join(module.kernels) or "none"
        raise PtxError(f"no kernel named {kernel!r} in the PTX", 0, f"kernels in this module: {names}")
    user = user_file(module, source_name)
    text = source_text if source_text is not None else _read_source(module, user)
    lines = text.splitlines() if text is not None else []
    display = os.path.basename(source_name) if source_name else module.files.get(user, "")
    raws: list[_RawOp] = []
    shared_names = {_plain_name(v.name) for v in module.variables if v.space == "shared"}
    with_barriers = barrier_functions(module)
    for fname in [kernel] + _called(module, fn):
        f = module.functions[fname]
        starts = sequence_starts(f, barrier_calls=with_barriers)
        origins = _Origins(f)
        params = source_params(text, fname) if text is not None else []
        pointer_params = {params[k] for k, p in enumerate(f.params)
                          if k < len(params) and (p.size_bytes == 8 or p.is_pointer_hint)}
        f_shared = shared_names | {_plain_name(v.name) for v in f.variables if v.space == "shared"}
        for i, ins in enumerate(f.instructions):
            for mo in memory_ops(ins, i):
                bases: set[str] = set()
                ori = origins.of_address(mo.address)
                for kind_, val in ori:
                    if kind_ == "param":
                        k = int(val)
                        if k < len(params) and params[k]:
                            bases.add(params[k])
                    elif kind_ == "sym":
                        bases.add(_plain_name(val))
                spaces = {v for k_, v in ori if k_ == "space"}
                proved = ""
                if ins.space == "generic" and len(spaces) == 1 and all(k_ != "param" for k_, _ in ori):
                    proved = spaces.pop()
                space = proved or mo.space
                file_, line, col = _where(module, f, i, user, display, lines, bases)
                excluded = f_shared if space == "global" else pointer_params if space in (
                    "shared", "local") else set()
                raws.append(_RawOp(fname, i, mo.kind, space, mo.bytes, file_, line, col,
                                   ins.ptx_line, starts.get(i, False), frozenset(bases),
                                   frozenset(excluded - bases)))
    labels = _labels(raws, lines, display)
    out: list[tuple[str, int, StaticOp]] = []
    ids: dict[tuple[object, ...], int] = {}
    ops: list[StaticOp] = []
    for raw, (label, label_col) in zip(raws, labels):
        key = _merge_key(raw, label)
        if key not in ids:
            ids[key] = len(ops)
            ops.append(StaticOp(id=len(ops), kernel=kernel, kind=raw.kind, space=raw.space,
                                bytes=raw.bytes, file=raw.file, line=raw.line,
                                column=label_col or raw.column,
                                ptx_line=raw.ptx_line, starts_sequence=raw.starts, label=label))
        elif raw.starts and not ops[ids[key]].starts_sequence:
            o = ops[ids[key]]
            ops[ids[key]] = StaticOp(id=o.id, kernel=o.kernel, kind=o.kind, space=o.space,
                                     bytes=o.bytes, file=o.file, line=o.line, column=o.column,
                                     ptx_line=o.ptx_line, starts_sequence=True, label=o.label)
    for raw, (label, _) in zip(raws, labels):
        key = _merge_key(raw, label)
        out.append((raw.function, raw.index, ops[ids[key]]))
    return tuple(out)


def _where(module: Module, fn: Function, i: int, user: int, display: str, lines: list[str],
           bases: set[str]) -> tuple[str, int, int]:
    """(file, line, column) of instruction `i`, attributed to the user's file.

    nvcc gives line 0 to code it merged from several places (an access hoisted out of both
    sides of an if/else); such an op takes the nearest following (else preceding) instruction's
    line, preferring one whose text names the op's base array."""
    def at(j: int) -> tuple[str, int, int] | None:
        loc = fn.instructions[j].loc
        if loc is None:
            return None
        r = resolve_loc(loc, user)
        if r.file == user:
            return display, r.line, r.column
        return os.path.basename(module.files.get(r.file, "")), r.line, r.column

    here = at(i)
    if here is None:
        return display, 0, 0
    if here[1] != 0:
        return here
    n = len(fn.instructions)
    order = list(range(i + 1, n)) + list(range(i - 1, -1, -1))
    first = None
    for j in order:
        w = at(j)
        if w is None or w[1] == 0 or w[0] != display:
            continue
        if first is None:
            first = w
        if 1 <= w[1] <= len(lines) and any(c.base in bases for c in candidates(lines[w[1] - 1])):
            return w
    return first or here


def instruction_location(module: Module, fn: Function, index: int, source_name: str) -> ResolvedLoc:
    """Where instruction `index` of `fn` comes from, attributed to the user's file as for the
    StaticOps (file is `source_name`'s base name there, a header's base name otherwise; line 0
    when the PTX has no line information), e.g. for "unsupported PTX instruction X (file.cu:12)"."""
    user = user_file(module, source_name)
    display = os.path.basename(source_name)
    file_, line, col = _where(module, fn, index, user, display, [], set())
    return ResolvedLoc(file_, line, col)


def _merge_key(raw: _RawOp, label: str) -> tuple[object, ...]:
    """Ops with equal keys are copies of one source access; without line information an
    instruction is only a copy of itself."""
    if raw.line == 0:
        return (raw.function, raw.index, raw.kind)
    return (raw.file, raw.line, raw.column, raw.kind, raw.space, raw.bytes, label)


def _labels(raws: list[_RawOp], lines: list[str], display: str) -> list[tuple[str, int]]:
    """The accessed expression of every raw op and its 1-based column on the line (0 when the
    label is the whole line or there is no source; see the module docstring)."""
    out: list[tuple[str, int]] = [("", 0)] * len(raws)
    groups: dict[tuple[str, int, str, tuple[_Candidate, ...]], list[int]] = {}
    per_line: dict[int, list[_Candidate]] = {}
    for n, raw in enumerate(raws):
        if raw.file != display or not (1 <= raw.line <= len(lines)):
            continue
        text = lines[raw.line - 1]
        cands = per_line.get(raw.line)
        if cands is None:
            cands = per_line[raw.line] = candidates(text)
        chosen: list[_Candidate] = []
        usable = [c for c in cands if c.base not in raw.excluded]
        for sides in _sides_for(raw.kind):
            side_c = [c for c in usable if c.side in sides]
            named = [c for c in side_c if c.base in raw.bases]
            if named:
                chosen = named
                break
            if raw.bases and any(c.base in raw.bases for c in usable):
                continue
            if side_c:
                chosen = side_c
                break
        if not chosen:
            out[n] = (_strip_comment(text).strip().rstrip(";").strip(), 0)
            continue
        if len(chosen) == 1:
            out[n] = (chosen[0].text, chosen[0].start + 1)
            continue
        key = (raw.function, raw.line, raw.kind, tuple(chosen))
        groups.setdefault(key, []).append(n)
    for key, members in groups.items():
        chosen_c = key[3]
        # several expressions fit: the k-th such instruction of the line takes the k-th
        for k, n in enumerate(members):
            c = chosen_c[k % len(chosen_c)]
            out[n] = (c.text, c.start + 1)
    return out
