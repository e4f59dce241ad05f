"""Memory instructions of a kernel as `StaticOp`s: kind, space, width, source location, label,
and the bulk-sequence starts of Baghsorkhi12 sec. 2.

*Which instructions*: global, shared, local, constant and generic ``ld``/``ldu``/``st``/``atom``/``red``,
and ``cp.async`` (a global load plus a shared store). ``ld.param`` is not an op. Constant loads
(``__constant__`` variables) are ops of space ``const``: the constant cache, kept out of the L1/L2
model like shared memory (`tuiprof.model.constant`).

*Source location*: nvcc's ``.loc`` column is the start of the statement, not of the accessed
expression, and inlined code carries an ``inlined_at`` chain. An op is attributed to the
innermost location of its chain that lies in one of the user's files (every ``.file`` entry but
the toolkit's, CCCL's and the C++ library's headers, `tuiprof.ptx.module.is_system_path`): code
inlined from a CUDA header (``__ldg``, ``atomicAdd``) lands on its call site, code of the user's
own device functions on their own lines, in whichever of the user's files they are (a kernel in a
``.cuh`` on that header's lines). `SourceMap` names the user's files as the ops and the trace's
sources name them (the compiled source by the name it was given, the others by their file names)
and holds their texts, from which the labels come.

*Label*: the accessed expression of the source line, chosen for each instruction from its own
address computation (`tuiprof.ptx.labels`: side of the assignment, base array, the ``.loc``
statement, then the address form of `tuiprof.ptx.address` against each candidate's index); with
none, the statement. The StaticOp's column is the label's (as the synthetic models give it), or
the ``.loc`` column when the label is the statement. Each StaticOp lists the PTX instructions
behind it (``ptx``), so that a user can check the attribution.

*Merging*: instructions share one StaticOp only when they are copies of one source access: the
same candidate expression of one statement (a loop's unrolled copies, the copy a rotated loop
keeps before its first iteration), or, with no candidate, the same address form; same kind,
space and width. Its ``starts_sequence`` is true when any copy starts a sequence. Instructions
without line information are never merged.

*Bulk sequences*: an op starts a new sequence when, on some path reaching it, a loop back-edge
or a CTA barrier lies between it and the previous op, or its address depends (through registers)
on a value read by an op of the current sequence; the first op of a kernel starts one.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import cast

from tuiprof.ptx.address import AddressForms, instruction_text
from tuiprof.ptx.cfg import build_cfg
from tuiprof.ptx.dataflow import defs_uses, registers_of
from tuiprof.ptx.labels import Access, Candidate, candidates, label_accesses, plain_name, source_params, statement_text
from tuiprof.ptx.module import (
    TYPE_SIZES,
    Addr,
    Function,
    Imm,
    Instruction,
    Module,
    PtxError,
    Reg,
    ResolvedLoc,
    SourceLoc,
    Sym,
    TexAddr,
    is_system_path,
)
from tuiprof.trace.data import MAX_OP_PTX, MAX_SOURCE_CHARS, OpKind, SourceFile, Space, StaticOp

LOAD_OPCODES = frozenset({"ld", "ldu"})
STORE_OPCODES = frozenset({"st"})
ATOMIC_OPCODES = frozenset({"atom", "red"})
OP_SPACES = frozenset({"global", "shared", "local", "const", "generic"})
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


TEXTURE_GEOMETRIES = ("1d", "2d", "3d")


def texture_problem(ins: Instruction) -> str:
    """Why a texture or surface instruction is one the emulator does not run ("" when it does:
    ``tex.1d/2d/3d`` with float or integer coordinates, ``tld4.2d``, ``suld.b``/``sust.b`` on 1-3
    dimensions)."""
    mods = set(ins.mods)
    geo = [m for m in ins.mods if m in TEXTURE_GEOMETRIES]
    if ins.opcode in ("txq", "suq", "sured"):
        return "texture and surface queries and reductions"
    if not geo or len(geo) != 1:
        return "texture arrays, cube maps and multisample textures"
    if mods & {"level", "grad", "base"}:
        return "mipmapped fetches (tex.level, tex.grad)"
    if ins.opcode == "tld4" and geo[0] != "2d":
        return "tld4 on other than 2-D textures"
    if ins.opcode in ("suld", "sust") and "b" not in mods:
        return "formatted surface access (.p)"
    if not any(isinstance(o, TexAddr) for o in ins.operands):
        return "texture references (bindless texture objects only)"
    return ""


def memory_ops(ins: Instruction, index: int) -> tuple[MemOp, ...]:
    """The memory accesses an instruction makes that tuiprof records (empty for non-memory
    instructions and ``.param`` accesses). A texture fetch or surface access is one of space
    ``texture`` (its bytes: 4 per component fetched, the element for a surface), addressed through
    its texture object (where the texels are is known only when it runs)."""
    op = ins.opcode
    if op in ("tex", "tld4", "suld", "sust"):
        tex = next((o for o in ins.operands if isinstance(o, TexAddr)), None)
        if tex is None or texture_problem(ins):
            return ()
        size = 4 if op in ("tex", "tld4") else TYPE_SIZES.get(ins.type, 4) * ins.vector
        return (MemOp(index, "store" if op == "sust" else "load", "texture", size, Addr(tex.base, 0)),)
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
        return (MemOp(index, "load", "global", size, src),
                MemOp(index, "store", "shared", size, dst))
    return ()


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
    barrier = _barriers(instrs, barrier_calls)
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
                addr_regs = {r for m in ops for r in registers_of(m.address)}
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


def _barriers(instrs: tuple[Instruction, ...], barrier_calls: frozenset[str]) -> list[bool]:
    """Which instructions are CTA barriers (or calls of functions that may execute one)."""
    return [is_barrier(ins) or (ins.opcode == "call" and len(ins.operands) > 1 and isinstance(ins.operands[1], Sym)
                                and ins.operands[1].name in barrier_calls) for ins in instrs]


def barrier_predecessors(fn: Function, barrier_calls: frozenset[str] = frozenset()
                         ) -> dict[int, tuple[frozenset[int], frozenset[int]]]:
    """For every memory instruction i of `fn`: the memory instructions j that can come just before
    it (no other memory instruction between), as ``(with a CTA barrier on every path from j to
    i, the rest)``.

    A dynamic access of i right after one of j (same warp) has then crossed a barrier for certain:
    it begins a new barrier interval (`tuiprof.sim.schedule`). Where only some paths cross one (the
    first load of an inner loop, reached from a barrier before the loop and, without one, from its
    own back-edge), the pair is in the rest: an interval counted where none began would hold every
    warp of the CTA in lock-step at each iteration, while one left uncounted only lets warps drift
    as they do without barriers."""
    g = build_cfg(fn)
    instrs = fn.instructions
    mem = {i for i, ins in enumerate(instrs) if memory_ops(ins, i)}
    barrier = _barriers(instrs, barrier_calls)
    block_of = {i: b for b in g.blocks for i in range(b.start, b.end)}
    seen: dict[int, dict[int, set[bool]]] = {i: {} for i in mem}
    for j in mem:
        stack = [(j + 1, False)]
        visited: set[tuple[int, bool]] = set()
        while stack:
            i, crossed = stack.pop()
            while (i, crossed) not in visited and i in block_of:
                visited.add((i, crossed))
                if i in mem:
                    seen[i].setdefault(j, set()).add(crossed)
                    break
                crossed = crossed or barrier[i]
                blk = block_of[i]
                if i + 1 < blk.end:
                    i += 1
                    continue
                stack.extend((g.blocks[succ].start, crossed) for succ in blk.succs)
                break
    return {i: (frozenset(j for j, f in by.items() if f == {True}), frozenset(j for j, f in by.items() if False in f))
            for i, by in seen.items()}


# --------------------------------------------------------------------------- source mapping


def user_file(module: Module, source_name: str) -> int | None:
    """The ``.file`` number of the compiled source: the entry named like `source_name` (whole
    path first, then the base name); None when the PTX names no such file (a kernel defined in a
    header has no line in the file that includes it)."""
    want = os.path.normpath(source_name)
    for num, path in module.files.items():
        if os.path.normpath(path) == want:
            return num
    base = os.path.basename(source_name)
    for num, path in sorted(module.files.items()):
        if os.path.basename(path) == base:
            return num
    return None


def resolve_loc(loc: SourceLoc, users: int | Collection[int] | None) -> SourceLoc:
    """The innermost location of `loc`'s inlined_at chain in one of the files `users` (else the
    outermost)."""
    wanted = {users} if isinstance(users, int) else set(users or ())
    for at in loc.chain:
        if at.file in wanted:
            return at
    return loc.outermost


MAX_SOURCE_BYTES = MAX_SOURCE_CHARS
"""What tuiprof reads of the user's files a module names, all together (what a trace may embed):
a header of a few MiB is generated code, not something to label, and a hostile ``.file`` table
costs no more than this."""


@dataclass(frozen=True)
class SourceMap:
    """The user's files of a module's ``.file`` table (see the module docstring): the name each
    is shown by, and the text of those that could be read."""

    names: dict[int, str]
    """``.file`` number -> display name, for the user's files."""
    texts: dict[str, str]
    """Display name -> text."""
    main: str
    """Display name of the compiled source."""

    def name_of(self, module: Module, file_no: int) -> str:
        """The display name of any file of the table (a system header by its file name)."""
        return self.names.get(file_no) or os.path.basename(module.files.get(file_no, ""))


def source_map(module: Module, source_name: str, source_text: str | None = None,
               headers: Mapping[str, str] | None = None) -> SourceMap:
    """The `SourceMap` of `module` compiled from `source_name` (whose text is `source_text`, read
    from its ``.file`` path when not given), with the texts of its local `headers` (path -> text;
    other user files are read from their ``.file`` paths)."""
    main_no = user_file(module, source_name) if source_name else None
    main = os.path.basename(source_name) if source_name else ""
    users = {n: p for n, p in module.files.items() if n == main_no or not is_system_path(p)}
    base_count: dict[str, int] = {}
    for n, p in users.items():
        if n != main_no:
            base_count[os.path.basename(p)] = base_count.get(os.path.basename(p), 0) + 1
    names: dict[int, str] = {}
    for n, p in users.items():
        if n == main_no:
            names[n] = main
        elif base_count[os.path.basename(p)] > 1 or os.path.basename(p) == main:
            folder = os.path.dirname(os.path.abspath(source_name)) if source_name else ""
            names[n] = os.path.relpath(p, folder) if folder and os.path.isabs(p) else p
        else:
            names[n] = os.path.basename(p)
    by_path = {os.path.normpath(k): v for k, v in (headers or {}).items()}
    by_base: dict[str, list[str]] = {}
    for k, v in (headers or {}).items():
        by_base.setdefault(os.path.basename(k), []).append(v)
    texts: dict[str, str] = {}
    if main and source_text is not None:
        texts[main] = source_text
    budget = MAX_SOURCE_BYTES
    for n, p in users.items():
        name = names[n]
        if name in texts:
            continue
        text = by_path.get(os.path.normpath(p))
        if text is None and len(by_base.get(os.path.basename(p), [])) == 1:
            text = by_base[os.path.basename(p)][0]
        if text is None and budget > 0:
            text = _read_text(p, budget)
            budget -= len(text or "")
        if text is not None:
            texts[name] = text
    return SourceMap(names, texts, main)


def op_sources(module: Module, source_name: str, source_text: str | None, headers: Mapping[str, str] | None,
               ops: Sequence[StaticOp]) -> tuple[SourceFile, ...]:
    """The files a trace of `ops` embeds, named as the ops name them: the compiled source first
    (empty when its text is unknown), then every other user file an op names, in op order."""
    smap = source_map(module, source_name, source_text, headers)
    named = [n for n in dict.fromkeys(o.file for o in ops) if n]
    main = smap.main if smap.main in smap.texts or not named else named[0]  # a PTX file: its .loc files
    names = [main] + [n for n in named if n != main]
    return tuple(SourceFile(n, smap.texts.get(n, "")) for n in names if n == main or n in smap.texts)


def _read_text(path: str, limit: int) -> str | None:
    """A regular file's text, when it holds at most `limit` bytes (never a device or a FIFO a
    ``.file`` entry names: it could block)."""
    from tuiprof.files import read_regular_quietly

    data = read_regular_quietly(path, limit)
    return data.decode("utf-8", "replace") if data is not None and len(data) <= limit else None


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


def static_ops(module: Module, kernel: str, source_name: str, source_text: str | None = None,
               headers: Mapping[str, str] | None = None) -> tuple[tuple[str, int, StaticOp], ...]:
    """The StaticOp table of `kernel` and of the device functions it calls.

    Returns ``(function name, instruction index, StaticOp)`` for every memory access, the
    kernel's first, then each called ``.func``'s in module order; ids count from 0 in that
    order of first appearance. Several instructions share one StaticOp when they are unrolled
    copies of one source access; ``cp.async`` gives two entries at one index (the global load,
    then the shared store). Generic accesses get space ``global`` unless their address provably
    comes from ``cvta.shared``/``cvta.local`` (the emulator resolves the rest at run time).
    `source_text` is the compiled source (read from the ``.file`` path when not given) and
    `headers` the texts of its local headers by path (other user files are read from their
    ``.file`` paths, `source_map`); without a file's text its ops' labels are empty.
    """
    fn = module.functions.get(kernel)
    if fn is None or not fn.is_entry:
        names = ", ".join(module.kernels) or "none"
        raise PtxError(f"no kernel named {kernel!r} in the PTX", 0, f"kernels in this module: {names}")
    smap = source_map(module, source_name, source_text, headers)
    users = set(smap.names)
    lines_of = {name: text.splitlines() for name, text in smap.texts.items()}
    raws: list[Access] = []
    shared_names = {plain_name(v.name) for v in module.variables if v.space == "shared"}
    with_barriers = barrier_functions(module)
    preds: dict[tuple[str, int], tuple[frozenset[int], frozenset[int]]] = {}
    for fname in [kernel] + _called(module, fn):
        f = module.functions[fname]
        starts = sequence_starts(f, barrier_calls=with_barriers)
        preds.update(((fname, i), p) for i, p in barrier_predecessors(f, with_barriers).items())
        origins = _Origins(f)
        forms = AddressForms(f)
        params = _source_params(smap, fname)
        pointers = {k for k, p in enumerate(f.params) if p.size_bytes == 8 or p.is_pointer_hint}
        pointer_params = {params[k] for k in pointers if k < len(params)}
        f_shared = shared_names | {plain_name(v.name) for v in f.variables if v.space == "shared"}
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
                        bases.add(plain_name(val))
                spaces = {v for k_, v in ori if k_ == "space"}
                proved = ""
                if ins.space == "generic" and len(spaces) == 1 and all(k_ != "param" for k_, _ in ori):
                    proved = spaces.pop()
                space = proved or mo.space
                file_, line, col = _where(module, f, i, smap, users, lines_of, bases)
                site = _call_site(ins.loc, users)
                excluded = f_shared if space == "global" else pointer_params if space in (
                    "shared", "local", "const") else set()
                form = forms.of_address(mo.address)
                base_leaves = frozenset(leaf for leaf, c in form.terms  # a struct's member as a pointer: p.in[i]
                                        if leaf[0] == "sym" or leaf[0] == "param" and (int(leaf[1]) in pointers
                                                                                      or len(leaf) == 3 and c == 1))
                raws.append(Access(fname, i, mo.kind, space, mo.bytes, file_, line, col, ins.ptx_line,
                                   starts.get(i, False), frozenset(bases), frozenset(excluded - bases), form,
                                   base_leaves, site))
    scalars = frozenset(plain_name(v.name) for v in module.variables if v.space in ("global", "const"))
    chosen = label_accesses(raws, lines_of, smap.texts, scalars)
    out: list[tuple[str, int, StaticOp]] = []
    ids: dict[tuple[object, ...], int] = {}
    ops: list[StaticOp] = []
    keys = []
    for raw, cand in zip(raws, chosen):
        label, label_col = _label(raw, cand, lines_of)
        key = _merge_key(raw, cand, label)
        keys.append(key)
        ins = module.functions[raw.function].instructions[raw.index]
        if key not in ids:
            ids[key] = len(ops)
            ops.append(StaticOp(id=len(ops), kernel=kernel, kind=cast("OpKind", raw.kind), space=cast("Space", raw.space),
                                bytes=raw.bytes, file=raw.file, line=raw.line,
                                column=label_col or raw.column,
                                ptx_line=raw.ptx_line, starts_sequence=raw.starts, label=label,
                                ptx=((ins.ptx_line, instruction_text(ins)),)))
            continue
        o = ops[ids[key]]
        entry = (ins.ptx_line, instruction_text(ins))
        more = entry not in o.ptx and len(o.ptx) < MAX_OP_PTX
        ops[ids[key]] = replace(o, starts_sequence=o.starts_sequence or raw.starts,
                                ptx=o.ptx + (entry,) if more else o.ptx)
    op_of = {(raw.function, raw.index): ids[key] for raw, key in zip(raws, keys)}
    for q, after in _barrier_pairs(preds, op_of).items():
        ops[q] = replace(ops[q], barrier_after=after)
    for raw, key in zip(raws, keys):
        out.append((raw.function, raw.index, ops[ids[key]]))
    return tuple(out)


def _barrier_pairs(preds: dict[tuple[str, int], tuple[frozenset[int], frozenset[int]]],
                   op_of: dict[tuple[str, int], int]) -> dict[int, tuple[int, ...]]:
    """Op q -> the ops p such that every path from an instruction of p just before one of q
    crosses a CTA barrier (`barrier_predecessors`, merged over the ops' instructions: a pair seen
    once without a barrier is left out)."""
    always: dict[int, set[int]] = {}
    without: dict[int, set[int]] = {}
    for (fname, i), (yes, no) in preds.items():
        q = op_of.get((fname, i))
        if q is None:
            continue
        always.setdefault(q, set()).update(op_of[(fname, j)] for j in yes if (fname, j) in op_of)
        without.setdefault(q, set()).update(op_of[(fname, j)] for j in no if (fname, j) in op_of)
    return {q: tuple(sorted(ps - without.get(q, set()))) for q, ps in always.items() if ps - without.get(q, set())}


def _call_site(loc: SourceLoc | None, users: Collection[int]) -> tuple[tuple[int, int, int], ...]:
    """The call sites above the user's location of `loc` (`resolve_loc`): accesses of one inlined
    function called from two places are two ops."""
    if loc is None:
        return ()
    chain = loc.chain
    at = resolve_loc(loc, users)
    k = next((j for j, c in enumerate(chain) if c is at), len(chain) - 1)
    return tuple((c.file, c.line, c.column) for c in chain[k + 1:])


def _source_params(smap: SourceMap, function: str) -> list[str]:
    """Parameter names of `function`'s definition, in whichever of the user's files has it."""
    for name in sorted(smap.texts, key=lambda n: n != smap.main):
        params = source_params(smap.texts[name], function)
        if params:
            return params
    return []


def _label(raw: Access, cand: Candidate | None, lines_of: Mapping[str, list[str]]) -> tuple[str, int]:
    """The label of an access and its 1-based column (0 when the label is the whole statement or
    there is no source)."""
    if cand is not None:
        return cand.text, cand.start + 1
    lines = lines_of.get(raw.file, [])
    if 1 <= raw.line <= len(lines):
        return statement_text(lines[raw.line - 1]), 0
    return "", 0


def _merge_key(raw: Access, cand: Candidate | None, label: str) -> tuple[object, ...]:
    """Instructions with equal keys are copies of one source access: they access the same
    candidate expression of one statement, or, with none, compute the same address (up to the
    constant and the loop's induction, `tuiprof.ptx.address`). Without line information an
    instruction is only a copy of itself."""
    if raw.line == 0:
        return (raw.function, raw.index, raw.kind)
    where = (raw.file, raw.line, raw.column, raw.kind, raw.space, raw.bytes, label, raw.call_site)
    if cand is not None:
        return where + (cand.start,)
    return where + (raw.form.terms,)


def _where(module: Module, fn: Function, i: int, smap: SourceMap, users: Collection[int],
           lines_of: Mapping[str, list[str]], bases: set[str]) -> tuple[str, int, int]:
    """(file, line, column) of instruction `i`, attributed to the user's files.

    nvcc gives line 0 to code it merged from several places (an access hoisted out of both
    sides of an if/else); such an op takes the nearest following (else preceding) instruction's
    line in a user's file, preferring one whose text names the op's base array."""
    def at(j: int) -> tuple[str, int, int] | None:
        loc = fn.instructions[j].loc
        if loc is None:
            return None
        r = resolve_loc(loc, users)
        return smap.name_of(module, r.file), r.line, r.column

    here = at(i)
    if here is None:
        return smap.main, 0, 0
    if here[1] != 0:
        return here
    n = len(fn.instructions)
    order = list(range(i + 1, n)) + list(range(i - 1, -1, -1))
    first = None
    known = set(smap.names.values())
    for j in order:
        w = at(j)
        if w is None or w[1] == 0 or w[0] not in known:
            continue
        if first is None:
            first = w
        lines = lines_of.get(w[0], [])
        if 1 <= w[1] <= len(lines) and any(c.base in bases for c in candidates(lines[w[1] - 1])):
            return w
    return first or here


def instruction_location(module: Module, fn: Function, index: int, source_name: str) -> ResolvedLoc:
    """Where instruction `index` of `fn` comes from, attributed to the user's files as for the
    StaticOps (the compiled source by `source_name`'s base name, a user's header by its file
    name; line 0 when the PTX has no line information), e.g. for "unsupported PTX instruction X
    (file.cu:12)"."""
    smap = source_map(module, source_name, "")
    file_, line, col = _where(module, fn, index, smap, set(smap.names), {}, set())
    return ResolvedLoc(file_, line, col)
