"""Which registers a PTX instruction writes and reads: the dataflow that address forms
(`tuiprof.ptx.address`) and bulk sequences (`tuiprof.ptx.ops`) both walk. Its own module, so that
neither of those imports the other for it."""

from __future__ import annotations

from tuiprof.ptx.module import Addr, Args, Instruction, NegPred, Operand, PredDest, Reg, TexAddr, Vec

NO_DEST_OPCODES = frozenset({
    "st", "red", "sust", "sured", "bra", "brx", "ret", "exit", "trap", "bar", "barrier", "membar", "fence", "call",
    "prefetch", "prefetchu", "cp", "nanosleep", "pmevent", "brkpt", "griddepcontrol", "setmaxnreg",
    "stmatrix", "discard", "applypriority",
})
"""Opcodes whose first operand is not a register they write."""


def registers_of(o: Operand) -> list[str]:
    """The registers an operand names (a predicate destination: both)."""
    if isinstance(o, Reg):
        return [o.name]
    if isinstance(o, Vec):
        return [r for it in o.items for r in registers_of(it)]
    if isinstance(o, Addr):
        return [o.base.name] if isinstance(o.base, Reg) else []
    if isinstance(o, NegPred):
        return [o.reg.name]
    if isinstance(o, PredDest):
        return registers_of(o.reg) + [o.pred.name]
    if isinstance(o, Args):
        return [r for it in o.items for r in registers_of(it)]
    if isinstance(o, TexAddr):
        return registers_of(o.base) + [r for it in o.coords for r in registers_of(it)]
    return []


def defs_uses(ins: Instruction) -> tuple[list[str], list[str]]:
    """(registers written, registers read) by an instruction."""
    ops = ins.operands
    if not ops or ins.opcode in NO_DEST_OPCODES:
        uses = [r for o in ops for r in registers_of(o)]
        if ins.guard:
            uses.append(ins.guard[0])
        return [], uses
    first = ops[0]
    if isinstance(first, (Reg, Vec, PredDest)):
        defs = registers_of(first)
        rest = ops[1:]
    else:
        defs, rest = [], ops
    uses = [r for o in rest for r in registers_of(o)]
    if ins.guard:
        uses.append(ins.guard[0])
    return defs, uses
