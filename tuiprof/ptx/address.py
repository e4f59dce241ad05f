"""What a memory instruction's address is made of: the dataflow from the kernel's parameters,
special registers and loaded values to the address operand, as a linear form.

An address ``[%rd4+4]`` whose register is ``cvta(param 0) + (sext(%ctaid.x * 512 + %tid.x) << 2)``
has the form ``param0 + 2048 * ctaid.x + 4 * tid.x + 4``. Two instructions with equal forms
compute the same address; forms that differ only in their constant (``row_ptr[tid]`` and
``row_ptr[tid + 1]``) are neighbouring elements of one expression. `tuiprof.ptx.labels` matches
these forms with the accessed expressions of the source line, so that each op is labelled from its
own address computation, not from its position on the line.

Linear steps: ``mov``, ``cvt``/``cvta`` (width and space conversions are taken as the identity),
``add``, ``sub``, ``neg``, ``mul``/``mad``/``shl`` by a constant. Anything else (a product of two
registers, ``xor``, ``and``, ``shr``, ``div``, ``rem``, ``min``/``max``, ``selp``) is an opaque term
keyed by its operator and operands, and the operator is remembered (`AddressForm.ops`). A
register written by several instructions (a loop's induction variable, a pointer advanced each
iteration) is a term of its own: forms are equal "up to the loop's induction".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from tuiprof.ptx.dataflow import defs_uses
from tuiprof.ptx.module import Addr, Function, Imm, Instruction, Reg, Special, Sym

Leaf = tuple[str, ...]
"""A term of a form: ``("param", "0")``, ``("param", "0", "8")`` (the member at byte 8 of a struct
passed by value), ``("special", "tid.x")``, ``("load", "17")`` (the
value instruction 17 loads), ``("reg", "%rd30")`` (a register with several definitions),
``("sym", "tile")``, ``("op", "xor", ...)`` (an opaque computation)."""

OP_FAMILY = {"xor": "xor", "and": "mask", "rem": "mask", "or": "or", "shr": "div", "div": "div",
             "mul": "mul", "mad": "mul", "min": "minmax", "max": "minmax", "selp": "select", "shl": "shift"}
"""Operator families shared with the source side (`tuiprof.ptx.labels`): a compiler turns
``i % 4`` into ``and`` and ``i / 4`` into ``shr``, so those count as one family each."""

_MAX_DEPTH = 64


@dataclass(frozen=True)
class AddressForm:
    """``const + sum(coef * leaf)``, with the operator families and the loads met on the way."""

    terms: tuple[tuple[Leaf, int], ...] = ()
    """Sorted (leaf, coefficient) pairs, no zero coefficient."""
    const: int = 0
    ops: frozenset[str] = field(default_factory=frozenset)
    """Families (`OP_FAMILY`) of the opaque operators the address depends on."""
    loads: frozenset[int] = field(default_factory=frozenset)
    """Instructions whose loaded value the address depends on (an indirect access)."""

    @property
    def key(self) -> tuple[object, ...]:
        """Equal for two instructions computing the same address."""
        return self.terms, self.const

    def plus(self, other: AddressForm, sign: int = 1) -> AddressForm:
        acc = dict(self.terms)
        for leaf, c in other.terms:
            acc[leaf] = acc.get(leaf, 0) + sign * c
        return AddressForm(_sorted(acc), self.const + sign * other.const, self.ops | other.ops,
                           self.loads | other.loads)

    def scaled(self, k: int) -> AddressForm:
        return AddressForm(_sorted({leaf: c * k for leaf, c in self.terms}), self.const * k, self.ops, self.loads)

    def shifted(self, k: int) -> AddressForm:
        return AddressForm(self.terms, self.const + k, self.ops, self.loads)


def _sorted(acc: dict[Leaf, int]) -> tuple[tuple[Leaf, int], ...]:
    return tuple(sorted((leaf, c) for leaf, c in acc.items() if c != 0))


def _leaf(leaf: Leaf, *, ops: frozenset[str] = frozenset(), loads: frozenset[int] = frozenset()) -> AddressForm:
    return AddressForm(((leaf, 1),), 0, ops, loads)


class AddressForms:
    """The forms of a function's registers and memory operands, computed on demand."""

    def __init__(self, fn: Function) -> None:
        self.fn = fn
        self.defs: dict[str, list[int]] = {}
        for i, ins in enumerate(fn.instructions):
            for r in defs_uses(ins)[0]:
                self.defs.setdefault(r, []).append(i)
        self.params = {p.name: k for k, p in enumerate(fn.params)}
        self.aggregates = {k for k, p in enumerate(fn.params) if p.dims}
        """Parameters passed by value as bytes (a struct): each member read is a leaf of its own."""
        self.memo: dict[str, AddressForm] = {}

    def of_address(self, addr: Addr) -> AddressForm:
        """The form of a memory operand ``[base+offset]``."""
        if isinstance(addr.base, Reg):
            base = self.of_reg(addr.base.name, 0)
        elif isinstance(addr.base, Sym):
            base = _leaf(("sym", addr.base.name))
        else:
            base = AddressForm()
        return base.shifted(addr.offset)

    def of_reg(self, reg: str, depth: int) -> AddressForm:
        hit = self.memo.get(reg)
        if hit is not None:
            return hit
        where = self.defs.get(reg, [])
        if len(where) != 1 or depth > _MAX_DEPTH:
            return _leaf(("reg", reg))
        self.memo[reg] = _leaf(("reg", reg))  # a cycle through this register ends here
        form = self._of_def(self.fn.instructions[where[0]], where[0], depth + 1)
        self.memo[reg] = form
        return form

    def _operand(self, o: object, depth: int) -> AddressForm | None:
        if isinstance(o, Reg):
            return self.of_reg(o.name, depth)
        if isinstance(o, Imm) and isinstance(o.value, int) and not o.float_bits:
            return AddressForm((), o.value)
        if isinstance(o, Special):
            return _leaf(("special", o.text.lstrip("%")))
        if isinstance(o, Sym):
            return _leaf(("sym", o.name))
        return None

    def _of_def(self, ins: Instruction, index: int, depth: int) -> AddressForm:
        op = ins.opcode
        args = ins.operands[1:]
        if op in ("ld", "ldu"):
            src = args[0] if args else None
            if ins.space == "param" and isinstance(src, Addr) and isinstance(src.base, Sym) and src.base.name in self.params:
                param = self.params[src.base.name]
                if param in self.aggregates:  # p.a and p.b of a struct: two arrays, not one
                    return _leaf(("param", str(param), str(src.offset)))
                return _leaf(("param", str(param)))
            return _leaf(("load", str(index)), loads=frozenset({index}))
        vals = [self._operand(o, depth) for o in args]
        if op in ("mov", "cvt", "cvta") and len(vals) == 1 and vals[0] is not None:
            return vals[0]
        if op in ("add", "sub") and len(vals) == 2 and None not in vals:
            return vals[0].plus(vals[1], 1 if op == "add" else -1)  # type: ignore[union-attr,arg-type]
        if op == "neg" and len(vals) == 1 and vals[0] is not None:
            return vals[0].scaled(-1)
        if "hi" in ins.mods and op in ("mul", "mad"):
            return _opaque("div", [v for v in vals if v is not None])  # a division by a constant
        if op in ("mul", "shl") and len(vals) == 2 and vals[0] is not None and vals[1] is not None:
            a, b = cast("list[AddressForm]", vals)
            k = _power(b) if op == "shl" else _constant(b)
            if k is not None:
                return a.scaled(k)
            k = _constant(a) if op == "mul" else None
            if k is not None:
                return b.scaled(k)
        if op == "mad" and len(vals) == 3 and None not in vals:
            a, b, c = cast("list[AddressForm]", vals)
            k = _constant(b)
            if k is not None:
                return a.scaled(k).plus(c)
            k = _constant(a)
            if k is not None:
                return b.scaled(k).plus(c)
            return _opaque("mul", [a, b]).plus(c)
        return _opaque(op, [v for v in vals if v is not None])


def _constant(f: AddressForm) -> int | None:
    return f.const if not f.terms else None


def _power(f: AddressForm) -> int | None:
    k = _constant(f)
    return 1 << k if k is not None and 0 <= k < 63 else None


def _opaque(op: str, parts: list[AddressForm]) -> AddressForm:
    """A term standing for ``op(parts)``, equal for equal computations."""
    family = OP_FAMILY.get(op, op)
    ops = frozenset({family}).union(*(p.ops for p in parts)) if parts else frozenset({family})
    loads = frozenset().union(*(p.loads for p in parts)) if parts else frozenset()
    return _leaf(("op", op) + tuple(repr(p.key) for p in parts), ops=ops, loads=loads)


def instruction_text(ins: Instruction) -> str:
    """The instruction as PTX (``@%p1 ld.global.u32 %r17, [%rd4+4];``), for display."""
    guard = f"@{'!' if ins.guard[1] else ''}{ins.guard[0]} " if ins.guard else ""
    head = ".".join((ins.opcode,) + ins.mods)
    ops = ", ".join(_operand_text(o) for o in ins.operands)
    return f"{guard}{head} {ops};" if ops else f"{guard}{head};"


def _operand_text(o: object) -> str:
    from tuiprof.ptx.module import Args, Label, NegPred, PredDest, Sink, Vec

    if isinstance(o, Reg):
        return o.name
    if isinstance(o, Special):
        return o.text
    if isinstance(o, Imm):
        return o.text
    if isinstance(o, (Sym, Label)):
        return o.name
    if isinstance(o, Addr):
        base = o.base.name if o.base is not None else ""
        if not base:
            return f"[{o.offset}]"
        return f"[{base}+{o.offset}]" if o.offset else f"[{base}]"
    if isinstance(o, Sink):
        return "_"
    if isinstance(o, Vec):
        return "{" + ", ".join(_operand_text(x) for x in o.items) + "}"
    if isinstance(o, Args):
        return "(" + ", ".join(_operand_text(x) for x in o.items) + ")"
    if isinstance(o, NegPred):
        return "!" + o.reg.name
    if isinstance(o, PredDest):
        return f"{_operand_text(o.reg)}|{o.pred.name}"
    return str(o)
