"""Decode a kernel (and the device functions it calls) into the interpreter's int64 table.

Done once per kernel. Every register of every function gets a dense slot (64-bit storage per
lane; predicates as 0/1); immediates, symbol addresses and special registers get slots too,
filled before a CTA runs, so that every operand is a slot. Functions are laid out one after
another (the kernel first), each followed by an implicit ``ret`` so that a label at the very end
has an instruction to name. Device-function parameters live in a per-thread frame in local
memory; the ``.param`` variables of a call block are aliased to the callee's frame, so that
``st.param`` before a call and ``ld.param`` after it need no copying.

Anything the interpreter cannot execute is refused here, with the instruction's source line:
"unsupported PTX instruction X (file.cu:line)".
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tuiprof.collect.emu.kernel.codes import *  # noqa: F403 (the shared numbering)
from tuiprof.collect.emu.kernel.warp import assign_families
from tuiprof.errors import TuiprofError
from tuiprof.ptx.module import (
    TEXTURE_OPCODES,
    TYPE_SIZES,
    Addr,
    Args,
    Function,
    Imm,
    Instruction,
    Label,
    Module,
    NegPred,
    Operand,
    PredDest,
    Reg,
    Sink,
    SourceLoc,
    Special,
    Sym,
    TexAddr,
    Vec,
    param_layout,
)

# Special registers. Per-thread values depend only on the thread's index; per-CTA ones are
# written by the interpreter when a CTA starts; per-launch ones are constants of a launch.
THREAD_SPECIALS = ("tid.x", "tid.y", "tid.z", "laneid", "warpid", "lanemask_eq", "lanemask_lt", "lanemask_le",
                   "lanemask_gt", "lanemask_ge")
CTA_SPECIALS = {"ctaid.x": 0, "ctaid.y": 1, "ctaid.z": 2, "smid": 3, "clusterid.x": 0, "clusterid.y": 1,
                "clusterid.z": 2}
LAUNCH_SPECIALS = ("ntid.x", "ntid.y", "ntid.z", "nctaid.x", "nctaid.y", "nctaid.z", "nsmid", "nwarpid", "gridid",
                   "dynamic_smem_size", "total_smem_size", "nclusterid.x", "nclusterid.y", "nclusterid.z",
                   "cluster_nctaid.x", "cluster_nctaid.y", "cluster_nctaid.z", "cluster_ctaid.x", "cluster_ctaid.y",
                   "cluster_ctaid.z", "cluster_ctarank", "cluster_nctarank", "is_explicit_cluster",
                   "reserved_smem_offset_begin", "reserved_smem_offset_end", "reserved_smem_offset_cap",
                   "reserved_smem_offset_0", "reserved_smem_offset_1", "aggr_smem_size", "current_graph_exec")
CLOCKS = {"clock": CLK_CLOCK, "clock64": CLK_CLOCK64, "clock_hi": CLK_GLOBALTIMER_HI, "globaltimer": CLK_GLOBALTIMER,
          "globaltimer_lo": CLK_GLOBALTIMER_LO, "globaltimer_hi": CLK_GLOBALTIMER_HI}

NO_EFFECT = frozenset({"membar", "fence", "prefetch", "prefetchu", "pmevent", "griddepcontrol",
                       "discard", "applypriority", "createpolicy"})
"""Instructions with no effect on the emulated results (ordering is sequential here)."""

FLOAT_OPS = {"add": OP_FADD, "sub": OP_FSUB, "mul": OP_FMUL, "fma": OP_FFMA, "mad": OP_FFMA, "div": OP_FDIV,
             "abs": OP_FABS, "neg": OP_FNEG, "min": OP_FMIN, "max": OP_FMAX, "rcp": OP_FRCP, "sqrt": OP_FSQRT,
             "rsqrt": OP_FRSQRT, "ex2": OP_FEX2, "lg2": OP_FLG2, "sin": OP_FSIN, "cos": OP_FCOS, "tanh": OP_FTANH,
             "copysign": OP_COPYSIGN}
INT_OPS = {"add": OP_IADD, "sub": OP_ISUB, "mul": OP_IMUL, "mad": OP_IMAD, "div": OP_IDIV, "rem": OP_IREM,
           "abs": OP_IABS, "neg": OP_INEG, "min": OP_IMIN, "max": OP_IMAX, "and": OP_AND, "or": OP_OR,
           "xor": OP_XOR, "not": OP_NOT, "cnot": OP_CNOT, "shl": OP_SHL, "shr": OP_SHR, "bfe": OP_BFE,
           "bfi": OP_BFI, "brev": OP_BREV, "clz": OP_CLZ, "popc": OP_POPC, "bfind": OP_BFIND, "prmt": OP_PRMT,
           "lop3": OP_LOP3, "sad": OP_SAD}
PRMT_MODES = {"f4e": 1, "b4e": 2, "rc8": 3, "ecl": 4, "ecr": 5, "rc16": 6}
TESTP = {"finite": TESTP_FINITE, "infinite": TESTP_INFINITE, "number": TESTP_NUMBER,
         "notanumber": TESTP_NOTANUMBER, "normal": TESTP_NORMAL, "subnormal": TESTP_SUBNORMAL}
REDUX = {"add": REDUX_ADD, "min": REDUX_MIN, "max": REDUX_MAX, "and": REDUX_AND, "or": REDUX_OR, "xor": REDUX_XOR}
FLOAT_TYPES = frozenset({"f16", "bf16", "f32", "f64", "f16x2", "bf16x2"})


class UnsupportedPtx(TuiprofError):
    """An instruction (or construct) of the kernel that the emulator cannot execute."""


@dataclass(frozen=True)
class ParamSlot:
    """One kernel parameter as the launch must pass it: where it sits in the parameter buffer."""

    name: str
    type: str
    offset: int
    size: int
    align: int
    is_pointer: bool


@dataclass(frozen=True)
class GlobalVar:
    """A module ``.global`` variable, placed at a fixed device address."""

    name: str
    address: int
    size: int
    init: bytes


@dataclass(frozen=True)
class DecodedKernel:
    """A kernel decoded for the interpreter (see the module docstring)."""

    kernel: str
    code: np.ndarray
    """int64 [N, N_FIELDS]: one row per instruction (kernel first, then its callees)."""
    n_slots: int
    const_slots: np.ndarray
    """int64 [K, 2]: (slot, value) of every immediate and symbol address."""
    special_slots: tuple[tuple[int, str], ...]
    """(slot, special register name such as ``tid.x``) for every special register read."""
    entry: int
    ptx_lines: tuple[int, ...]
    locs: tuple[SourceLoc | None, ...]
    texts: tuple[str, ...]
    """The instruction as written (opcode and modifiers), for messages."""
    functions: tuple[str, ...]
    """The function each row belongs to."""
    params: tuple[ParamSlot, ...]
    param_size: int
    shared_static: int
    dynamic_shared_offset: int
    local_size: int
    const_image: bytes
    globals_: tuple[GlobalVar, ...]
    n_ops: int
    """Number of StaticOp ids the rows refer to."""
    serial: bool
    """The kernel communicates between CTAs (global or generic atomics, volatile accesses,
    fences): its CTAs must run one after another, in order."""


def _align(x: int, a: int) -> int:
    return -(-x // max(a, 1)) * max(a, 1)


def _float_bits(value: float, ty: str) -> int:
    if ty == "f64":
        return struct.unpack("<q", struct.pack("<d", value))[0]
    if ty == "f32":
        return struct.unpack("<I", struct.pack("<f", value))[0]
    if ty == "f16":
        return int(np.array(value, np.float16).view(np.uint16))
    if ty == "bf16":
        return (struct.unpack("<I", struct.pack("<f", value))[0] + 0x7FFF + ((struct.unpack("<I", struct.pack("<f", value))[0] >> 16) & 1)) >> 16
    return int(value)


def _signed64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def _imm_bits(imm: Imm, ty: str) -> int:
    """The register bits of immediate `imm` used as an operand of type `ty`."""
    if imm.float_bits:
        if imm.float_bits == 32:
            f = struct.unpack("<f", struct.pack("<I", int(imm.value) & 0xFFFFFFFF))[0]
        else:
            f = struct.unpack("<d", struct.pack("<Q", int(imm.value) & ((1 << 64) - 1)))[0]
        if ty in ("f32", "f64", "f16", "bf16"):
            if (imm.float_bits == 32 and ty == "f32") or (imm.float_bits == 64 and ty == "f64"):
                return _signed64(int(imm.value))
            return _signed64(_float_bits(f, ty))
        if ty in ("f16x2", "bf16x2"):
            return int(imm.value) & 0xFFFFFFFF
        return _signed64(int(imm.value))
    if isinstance(imm.value, float):
        if ty in ("f32", "f64", "f16", "bf16"):
            return _signed64(_float_bits(imm.value, ty))
        return _signed64(int(imm.value))
    if ty in ("f32", "f64", "f16", "bf16"):
        return _signed64(_float_bits(float(imm.value), ty))
    return _signed64(int(imm.value))


def _type_of(mods: Sequence[str]) -> list[str]:
    return [m for m in mods if m in TYPE_SIZES]


def _rounding(mods: Sequence[str]) -> int:
    for m in mods:
        if m in ROUND_CODES:
            return ROUND_CODES[m]
    return RND_NONE


@dataclass(frozen=True)
class _Site:
    """One instruction being decoded, with what every decoder reads: its function and index, the
    row being filled, the layout of the functions, and the type and flags read from its modifiers."""

    fn: Function
    idx: int
    inst: Instruction
    r: list[int]
    start: int
    entries: dict[str, int]
    ipd: Sequence[int]
    n: int
    types: list[str]
    ty: str
    tyc: int
    flags: int


class _Decoder:
    """State of one kernel's decoding (slots, layouts, rows)."""

    def __init__(self, module: Module, kernel: str, ipdom: Callable[[Function], Sequence[int]],
                 op_ids: Mapping[tuple[str, int], int | tuple[int, int]], source_name: Callable[[SourceLoc | None], str]):
        self.module = module
        self.kernel = kernel
        self.ipdom_of = ipdom
        self.op_ids = op_ids
        self.where = source_name
        self.slots: dict[tuple[str, str], int] = {}
        self.consts: dict[int, int] = {}
        self.specials: dict[str, int] = {}
        self.n_slots = 0
        self.rows: list[list[int]] = []
        self.ptx_lines: list[int] = []
        self.locs: list[SourceLoc | None] = []
        self.texts: list[str] = []
        self.owner: list[str] = []
        self.serial = False
        self.carry_slot = -1

    # ---------------------------------------------------------------- errors
    def unsupported(self, inst: Instruction, what: str = "", texture: bool = False) -> UnsupportedPtx:
        text = ".".join((inst.opcode,) + inst.mods)
        detail = f": {what}" if what else ""
        if texture:
            return UnsupportedPtx(f"texture/surface instruction {text} is not supported yet ({self.where(inst.loc)}, "
                                  f"PTX line {inst.ptx_line}){detail}",
                                  "the emulator runs tex.1d/2d/3d, tld4.2d and suld.b/sust.b on texture and surface "
                                  "objects (dev.texture, dev.surface); read the data through a pointer instead, or "
                                  "profile on a GPU")
        return UnsupportedPtx(f"unsupported PTX instruction {text} ({self.where(inst.loc)}, PTX line {inst.ptx_line}){detail}",
                              "the emulator covers the PTX that nvcc -O3 emits for sm_75-sm_90; rewrite that "
                              "construct, or profile on a GPU")

    # ---------------------------------------------------------------- slots
    def new_slot(self) -> int:
        self.n_slots += 1
        return self.n_slots - 1

    def reg(self, fn: Function, name: str, inst: Instruction) -> int:
        key = (fn.name, name)
        if key not in self.slots:
            if name not in fn.registers:
                raise self.unsupported(inst, f"register {name} is not declared")
            self.slots[key] = self.new_slot()
        return self.slots[key]

    def const(self, value: int) -> int:
        value = _signed64(value)
        if value not in self.consts:
            self.consts[value] = self.new_slot()
        return self.consts[value]

    def special(self, sp: Special, inst: Instruction) -> int:
        name = sp.name + (f".{sp.component}" if sp.component else "")
        if name not in THREAD_SPECIALS and name not in CTA_SPECIALS and name not in LAUNCH_SPECIALS:
            why = (" (a performance-monitor counter: no emulated value)" if name.startswith("pm") else
                   " (set by the driver: no emulated value)" if name.startswith("envreg") else "")
            raise self.unsupported(inst, f"special register %{name}{why}")
        if name not in self.specials:
            self.specials[name] = self.new_slot()
        return self.specials[name]

    # ---------------------------------------------------------------- layouts
    def layout(self, funcs: list[Function]) -> None:
        """Shared, local (with parameter frames), const and global symbol addresses."""
        self.sym_shared: dict[str, int] = {}
        self.sym_const: dict[str, int] = {}
        self.sym_global: dict[str, int] = {}
        self.sym_local: dict[tuple[str, str], int] = {}
        self.frame: dict[tuple[str, str], int] = {}   # (function, param name) -> local offset
        self.kparams: dict[str, ParamSlot] = {}
        at = 0
        dyn_align = 16
        extern_shared: list[str] = []
        shared_vars = [v for v in self.module.variables if v.space == "shared"]
        for fn in funcs:
            shared_vars += [v for v in fn.variables if v.space == "shared"]
        for v in shared_vars:
            if v.is_dynamic_shared or (v.size_bytes == 0 and v.dims and v.dims[0] == 0):
                extern_shared.append(v.name)
                dyn_align = max(dyn_align, v.align)
                continue
            at = _align(at, v.align)
            self.sym_shared[v.name] = at
            at += v.size_bytes
        self.shared_static = at
        self.dyn_offset = _align(at, dyn_align)
        for name in extern_shared:
            self.sym_shared[name] = self.dyn_offset
        # const bank
        constants = module_constants(self.module)
        self.sym_const = {c.name: c.address for c in constants}
        self.const_image = const_image(constants)
        # module globals
        self.globals_ = module_globals(self.module)
        self.sym_global = {g.name: g.address for g in self.globals_}
        # local memory: each function's .local variables, then each device function's parameter frame
        lat = 0
        for fn in funcs:
            for v in fn.variables:
                if v.space == "local":
                    lat = _align(lat, v.align)
                    self.sym_local[(fn.name, v.name)] = lat
                    lat += v.size_bytes
        for v in self.module.variables:
            if v.space == "local":
                lat = _align(lat, v.align)
                for fn in funcs:
                    self.sym_local[(fn.name, v.name)] = lat
                lat += v.size_bytes
        for fn in funcs:
            if fn.is_entry:
                continue
            for p in tuple(fn.params) + tuple(fn.ret_params):
                lat = _align(lat, max(p.align, 1))
                self.frame[(fn.name, p.name)] = lat
                lat += max(p.size_bytes, 1)
        self.local_size = _align(lat, 8)
        # kernel parameters
        kfn = self.module.functions[self.kernel]
        offsets, self.param_size = param_layout(kfn.params)
        for p, at in zip(kfn.params, offsets):
            self.kparams[p.name] = ParamSlot(p.name, p.type, at, p.size_bytes, p.align, p.is_pointer_hint)

    def alias_call_params(self, funcs: list[Function]) -> None:
        """Map each call block's ``.param`` variables onto the callee's frame."""
        self.call_alias: dict[tuple[str, str], int] = {}
        for fn in funcs:
            for inst in fn.instructions:
                if inst.opcode != "call":
                    continue
                rets, target, args = inst.operands[0], inst.operands[1], inst.operands[2]
                if not isinstance(target, Sym) or target.name not in self.module.functions:
                    continue
                callee = self.module.functions[target.name]
                pairs = []
                if isinstance(rets, Args):
                    pairs += list(zip(rets.items, callee.ret_params))
                if isinstance(args, Args):
                    pairs += list(zip(args.items, callee.params))
                for item, p in pairs:
                    if not isinstance(item, Sym):
                        raise self.unsupported(inst, "call arguments must be .param variables")
                    key = (fn.name, item.name)
                    off = self.frame.get((callee.name, p.name))
                    if off is None:
                        continue
                    if key in self.call_alias and self.call_alias[key] != off:
                        raise self.unsupported(inst, f"parameter {item.name} passed to two different calls")
                    self.call_alias[key] = off
        # call-block parameters with no callee frame (vprintf's arguments): scratch in local memory
        lat = self.local_size
        for fn in funcs:
            for v in fn.variables:
                if v.space == "param" and (fn.name, v.name) not in self.call_alias:
                    lat = _align(lat, max(v.align, 1))
                    self.call_alias[(fn.name, v.name)] = lat
                    lat += max(v.size_bytes, 1)
        self.local_size = _align(lat, 8)

    # ---------------------------------------------------------------- operands
    def sym_value(self, fn: Function, name: str, inst: Instruction, generic: bool) -> int:
        """The address a symbol names (in its own space, or generic when asked)."""
        if name in self.sym_shared:
            return self.sym_shared[name] + (SHARED_WINDOW if generic else 0)
        if (fn.name, name) in self.sym_local:
            return self.sym_local[(fn.name, name)] + (LOCAL_WINDOW if generic else 0)
        if name in self.sym_const:
            return self.sym_const[name] + (CONST_WINDOW if generic else 0)
        if name in self.sym_global:
            return self.sym_global[name]
        raise self.unsupported(inst, f"the address of {name}")

    def src(self, fn: Function, op: Operand, ty: str, inst: Instruction) -> int:
        if isinstance(op, Reg):
            return self.reg(fn, op.name, inst)
        if isinstance(op, Imm):
            return self.const(_imm_bits(op, ty))
        if isinstance(op, Special):
            if op.name in CLOCKS:
                raise self.unsupported(inst, f"%{op.name} as an operand (only mov reads it)")
            return self.special(op, inst)
        if isinstance(op, Sym):
            return self.const(self.sym_value(fn, op.name, inst, generic=False))
        raise self.unsupported(inst, f"operand {op}")

    def dst(self, fn: Function, op: Operand, inst: Instruction) -> int:
        if isinstance(op, Reg):
            return self.reg(fn, op.name, inst)
        if isinstance(op, Sink):
            return -1
        raise self.unsupported(inst, f"destination {op}")

    def reg_bits(self, fn: Function, op: Operand) -> int:
        if isinstance(op, Reg):
            t = fn.registers.get(op.name, "b64")
            return 1 if t == "pred" else 8 * TYPE_SIZES.get(t, 8)
        return 64

    def pred_src(self, fn: Function, op: Operand, inst: Instruction) -> tuple[int, bool]:
        if isinstance(op, NegPred):
            return self.reg(fn, op.reg.name, inst), True
        if isinstance(op, Imm):
            return self.const(1 if op.value else 0), False
        return self.src(fn, op, "pred", inst), False

    def address(self, fn: Function, op: Operand, space: str, inst: Instruction) -> tuple[int, int, int]:
        """(base slot or -1, offset, space code) of a memory operand."""
        if not isinstance(op, Addr):
            raise self.unsupported(inst, f"memory operand {op}")
        if isinstance(op.base, Reg):
            return self.reg(fn, op.base.name, inst), op.offset, SPACE_CODES[space]
        if op.base is None:
            return -1, op.offset, SPACE_CODES[space]
        name = op.base.name
        if space == "param":
            if fn.is_entry and name in self.kparams:
                return -1, self.kparams[name].offset + op.offset, SP_PARAM
            if (fn.name, name) in self.frame:
                return -1, self.frame[(fn.name, name)] + op.offset, SP_FPARAM
            if (fn.name, name) in self.call_alias:
                return -1, self.call_alias[(fn.name, name)] + op.offset, SP_FPARAM
            raise self.unsupported(inst, f"parameter {name}")
        return -1, self.sym_value(fn, name, inst, generic=(space == "generic")) + op.offset, SPACE_CODES[space]

    # ---------------------------------------------------------------- instructions
    def row(self) -> list[int]:
        r = [0] * N_FIELDS
        for f in (F_D0, F_D1, F_D2, F_D3, F_S0, F_S1, F_S2, F_S3, F_S4, F_GUARD, F_TGT, F_IPDOM, F_SOP, F_SOP2,
                  F_ABASE):
            r[f] = -1
        r[F_VEC] = 1
        return r

    def decode_function(self, fn: Function, start: int, entries: dict[str, int]) -> None:
        ipd = self.ipdom_of(fn) if any(i.opcode in ("bra", "brx") and i.guard for i in fn.instructions) else ()
        n = len(fn.instructions)
        for idx, inst in enumerate(fn.instructions):
            r = self.row()
            if inst.guard is not None:
                r[F_GUARD] = self.reg(fn, inst.guard[0], inst)
                r[F_GNEG] = 1 if inst.guard[1] else 0
            self.decode_one(fn, idx, inst, r, start, entries, ipd, n)
            self.rows.append(r)
            self.ptx_lines.append(inst.ptx_line)
            self.locs.append(inst.loc)
            self.texts.append(".".join((inst.opcode,) + inst.mods))
            self.owner.append(fn.name)
        # implicit return at the end of every function
        r = self.row()
        r[F_OP] = OP_EXIT if fn.is_entry else OP_RET
        self.rows.append(r)
        last = fn.instructions[-1] if fn.instructions else None
        self.ptx_lines.append(last.ptx_line if last else fn.ptx_line)
        self.locs.append(last.loc if last else None)
        self.texts.append("ret")
        self.owner.append(fn.name)

    def decode_one(self, fn: Function, idx: int, inst: Instruction, r: list[int], start: int,
                   entries: dict[str, int], ipd: Sequence[int], n: int) -> None:
        """Fill row `r` for instruction `inst`: the common fields here, the rest by the decoder of
        its opcode (`_DECODERS`, one small method per opcode family)."""
        mods = inst.mods
        types = _type_of(mods)
        ty = types[-1] if types else ""
        tyc = TYPE_CODES.get(ty, T_NONE)
        r[F_TY] = tyc
        flags = 0
        if "ftz" in mods:
            flags |= FL_FTZ
        if "sat" in mods or "satfinite" in mods:
            flags |= FL_SAT
        if "approx" in mods or "full" in mods:
            flags |= FL_APPROX
        site = _Site(fn, idx, inst, r, start, entries, ipd, n, types, ty, tyc, flags)
        o = inst.opcode
        if o in NO_EFFECT or (o == "cp" and mods[:1] == ("async",) and any(m in ("commit_group", "wait_group", "wait_all") for m in mods)):
            self._d_no_effect(site)
            return
        decoder = _DECODERS.get(o)
        if decoder is None:
            raise self.unsupported(inst)
        decoder(self, site)

    # ---------------------------------------------------------------- one decoder per opcode family
    def _need(self, c: _Site, count: int) -> None:
        if len(c.inst.operands) < count:
            raise self.unsupported(c.inst, f"expected {count} operands")

    def _D(self, c: _Site, k: int) -> int:
        return self.dst(c.fn, c.inst.operands[k], c.inst)

    def _S(self, c: _Site, k: int, ty: str | None = None) -> int:
        return self.src(c.fn, c.inst.operands[k], c.ty if ty is None else ty, c.inst)

    def _d_no_effect(self, c: _Site) -> None:
        c.r[F_OP] = OP_NOP
        if c.inst.opcode in ("fence", "membar"):
            self.serial = True

    def _d_mov(self, c: _Site) -> None:
        inst, r, ops, ty = c.inst, c.r, c.inst.operands, c.ty
        self._need(c, 2)
        if ty == "b128" or ty == "":
            raise self.unsupported(inst)
        if isinstance(ops[1], Special) and ops[1].name in CLOCKS:
            r[F_OP] = OP_CLOCK
            r[F_SUB] = CLOCKS[ops[1].name]
            r[F_D0] = self._D(c, 0)
        elif isinstance(ops[0], Vec):
            items = ops[0].items
            r[F_OP] = OP_UNPACK
            r[F_AUX] = TYPE_SIZES[ty] * 8 // len(items)
            r[F_AUX2] = len(items)
            for k, it in enumerate(items):
                r[F_D0 + k] = self.dst(c.fn, it, inst)
            r[F_S0] = self._S(c, 1)
        elif isinstance(ops[1], Vec):
            items = ops[1].items
            r[F_OP] = OP_PACK
            r[F_AUX] = TYPE_SIZES[ty] * 8 // len(items)
            r[F_AUX2] = len(items)
            r[F_D0] = self._D(c, 0)
            for k, it in enumerate(items):
                r[F_S0 + k] = self.src(c.fn, it, "b64", inst)
        elif isinstance(ops[1], Sym) and ops[1].name in self.module.functions:
            raise self.unsupported(inst, "function addresses (indirect calls)")
        else:
            r[F_OP] = OP_MOV
            r[F_D0] = self._D(c, 0)
            if isinstance(ops[1], Sym):
                # mov of a variable's address: generic for globals, in-space otherwise
                r[F_S0] = self.const(self.sym_value(c.fn, ops[1].name, inst, generic=False))
            else:
                r[F_S0] = self._S(c, 1)

    def _d_arith(self, c: _Site) -> None:
        self.arith(c.fn, c.inst, c.r, c.inst.opcode, c.inst.mods, c.ty, c.tyc, c.flags)

    def _d_bits(self, c: _Site) -> None:
        inst, r, ops, ty, o, mods = c.inst, c.r, c.inst.operands, c.ty, c.inst.opcode, c.inst.mods
        r[F_OP] = INT_OPS[o]
        r[F_FLAGS] = c.flags
        r[F_D0] = self._D(c, 0)
        nsrc = {"not": 1, "cnot": 1, "brev": 1, "clz": 1, "popc": 1, "bfind": 1, "bfe": 3, "bfi": 4,
                "prmt": 3, "lop3": 3}.get(o, 2)
        self._need(c, 1 + nsrc + (1 if o == "lop3" else 0))
        for k in range(nsrc):
            st = ty if k == 0 or o in ("and", "or", "xor", "bfi") and k < 2 else "u32"
            if o == "bfi" and k >= 2:
                st = "u32"
            r[F_S0 + k] = self.src(c.fn, ops[1 + k], st, inst)
        if o == "shr" and ty.startswith("b"):
            r[F_TY] = TYPE_CODES["u" + ty[1:]]
        if o == "bfind":
            r[F_SUB] = 1 if "shiftamt" in mods else 0
        if o == "prmt":
            r[F_SUB] = next((PRMT_MODES[m] for m in mods if m in PRMT_MODES), 0)
        if o == "lop3":
            lut = ops[4]
            if not isinstance(lut, Imm):
                raise self.unsupported(inst, "lop3 table must be an immediate")
            r[F_SUB] = int(lut.value) & 0xFF

    def _d_mul24(self, c: _Site) -> None:
        r, o = c.r, c.inst.opcode
        self._need(c, 3 if o == "mul24" else 4)
        r[F_OP] = OP_MUL24
        r[F_TY] = TYPE_CODES["s32" if c.ty == "s32" else "u32"]
        r[F_FLAGS] = FL_HI if "hi" in c.inst.mods else 0
        r[F_D0] = self._D(c, 0)
        r[F_S0] = self._S(c, 1)
        r[F_S1] = self._S(c, 2)
        if o == "mad24":
            r[F_S2] = self._S(c, 3)

    def _d_dot(self, c: _Site) -> None:
        r, types = c.r, c.types
        self._need(c, 4)
        if len(types) != 2:
            raise self.unsupported(c.inst)
        r[F_OP] = OP_DP4A if c.inst.opcode == "dp4a" else OP_DP2A
        r[F_SUB] = (1 if types[0] == "s32" else 0) | (2 if types[1] == "s32" else 0) | (4 if "hi" in c.inst.mods else 0)
        r[F_D0] = self._D(c, 0)
        for k in range(3):
            r[F_S0 + k] = self._S(c, 1 + k, "u32")

    def _d_sad(self, c: _Site) -> None:
        self._need(c, 4)
        c.r[F_OP] = OP_SAD
        c.r[F_D0] = self._D(c, 0)
        for k in range(3):
            c.r[F_S0 + k] = self._S(c, 1 + k)

    def _d_shf(self, c: _Site) -> None:
        r = c.r
        self._need(c, 4)
        r[F_OP] = OP_SHF
        r[F_SUB] = 1 if "r" in c.inst.mods else 0
        r[F_FLAGS] = FL_CLAMP if "clamp" in c.inst.mods else 0
        r[F_D0] = self._D(c, 0)
        for k in range(3):
            r[F_S0 + k] = self._S(c, 1 + k, "u32")

    def _d_compare(self, c: _Site) -> None:
        self.compare(c.fn, c.inst, c.r, c.inst.opcode, c.inst.mods, c.types, c.flags)

    def _d_selp(self, c: _Site) -> None:
        r = c.r
        self._need(c, 4)
        r[F_OP] = OP_SELP
        r[F_D0] = self._D(c, 0)
        r[F_S0] = self._S(c, 1)
        r[F_S1] = self._S(c, 2)
        r[F_S2], neg = self.pred_src(c.fn, c.inst.operands[3], c.inst)
        if neg:
            r[F_S0], r[F_S1] = r[F_S1], r[F_S0]

    def _d_slct(self, c: _Site) -> None:
        r, types = c.r, c.types
        self._need(c, 4)
        r[F_OP] = OP_SLCT
        r[F_TY] = TYPE_CODES[types[0]]
        r[F_TY2] = TYPE_CODES[types[-1]]
        r[F_D0] = self._D(c, 0)
        r[F_S0] = self._S(c, 1, types[0])
        r[F_S1] = self._S(c, 2, types[0])
        r[F_S2] = self._S(c, 3, types[-1])

    def _d_testp(self, c: _Site) -> None:
        self._need(c, 2)
        c.r[F_OP] = OP_TESTP
        c.r[F_SUB] = next((TESTP[m] for m in c.inst.mods if m in TESTP), TESTP_FINITE)
        c.r[F_D0] = self._D(c, 0)
        c.r[F_S0] = self._S(c, 1)

    def _d_cvt(self, c: _Site) -> None:
        self.convert(c.fn, c.inst, c.r, c.inst.mods, c.types, c.flags)

    def _d_cvta(self, c: _Site) -> None:
        inst, r, ops = c.inst, c.r, c.inst.operands
        self._need(c, 2)
        space = inst.space
        if space not in ("global", "shared", "local", "const"):
            raise self.unsupported(inst, f"cvta of the {space} space")
        r[F_OP] = OP_CVTA_TO if "to" in inst.mods else OP_CVTA_FROM
        r[F_SPACE] = SPACE_CODES[space]
        r[F_D0] = self._D(c, 0)
        if isinstance(ops[1], Sym):
            r[F_S0] = self.const(self.sym_value(c.fn, ops[1].name, inst, generic=False))
        else:
            r[F_S0] = self._S(c, 1)

    def _d_isspacep(self, c: _Site) -> None:
        self._need(c, 2)
        c.r[F_OP] = OP_ISSPACEP
        c.r[F_SPACE] = SPACE_CODES.get(c.inst.space, SP_GLOBAL)
        c.r[F_D0] = self._D(c, 0)
        c.r[F_S0] = self._S(c, 1, "u64")

    def _d_memory(self, c: _Site) -> None:
        self.memory(c.fn, c.idx, c.inst, c.r, c.inst.opcode, c.inst.mods, c.ty, c.flags)

    def _d_texture(self, c: _Site) -> None:
        self.texture(c.fn, c.idx, c.inst, c.r)

    def _d_atomic(self, c: _Site) -> None:
        self.atomic(c.fn, c.idx, c.inst, c.r, c.inst.opcode, c.inst.mods, c.ty)

    def _d_cp(self, c: _Site) -> None:
        self.cp_async(c.fn, c.idx, c.inst, c.r, c.inst.mods)

    def _d_bra(self, c: _Site) -> None:
        fn, inst, r, ops, idx, n = c.fn, c.inst, c.r, c.inst.operands, c.idx, c.n
        if not ops or not isinstance(ops[0], Label) or ops[0].name not in fn.labels:
            raise self.unsupported(inst, "branch target")
        r[F_OP] = OP_BRA
        r[F_TGT] = c.start + fn.labels[ops[0].name]
        r[F_FLAGS] = FL_UNI if "uni" in inst.mods else 0
        if inst.guard is not None:
            ip = c.ipd[idx] if idx < len(c.ipd) else -1
            if ip is not None and 0 <= ip < n and fn.is_entry and fn.instructions[ip].opcode in ("ret", "exit") \
                    and fn.instructions[ip].guard is None:
                ip = -1   # the lanes meet only to exit: no convergence barrier (collectors.md 3.1 step 4)
            r[F_IPDOM] = c.start + ip if ip is not None and ip >= 0 else -1

    def _d_call(self, c: _Site) -> None:
        self.call(c.fn, c.inst, c.r, c.entries)

    def _d_ret(self, c: _Site) -> None:
        c.r[F_OP] = OP_EXIT if c.fn.is_entry else OP_RET

    def _d_exit(self, c: _Site) -> None:
        c.r[F_OP] = OP_EXIT

    def _d_trap(self, c: _Site) -> None:   # brkpt outside a debugger stops the kernel as a trap does
        c.r[F_OP] = OP_TRAP
        c.r[F_AUX] = TRAP_BREAKPOINT if c.inst.opcode == "brkpt" else 0

    def _d_barrier(self, c: _Site) -> None:
        self.barrier(c.fn, c.inst, c.r, c.inst.mods)

    def _member_dests(self, c: _Site) -> None:
        """A collective's destination, and its predicate destination when written ``d|p``."""
        ops = c.inst.operands
        if isinstance(ops[0], PredDest):
            c.r[F_D0] = self.dst(c.fn, ops[0].reg, c.inst)
            c.r[F_D1] = self.dst(c.fn, ops[0].pred, c.inst)
        else:
            c.r[F_D0] = self._D(c, 0)

    def _d_shfl(self, c: _Site) -> None:
        r, mods = c.r, c.inst.mods
        self._need(c, 5)
        if "sync" not in mods:
            raise self.unsupported(c.inst, "shfl without .sync (removed in PTX 6.4 for sm_70+)")
        r[F_OP] = OP_SHFL
        r[F_SUB] = {"up": SHFL_UP, "down": SHFL_DOWN, "bfly": SHFL_BFLY, "idx": SHFL_IDX}[
            next(m for m in mods if m in ("up", "down", "bfly", "idx"))]
        self._member_dests(c)
        for k in range(4):
            r[F_S0 + k] = self._S(c, 1 + k, "b32")

    def _d_vote(self, c: _Site) -> None:
        r, mods, ops = c.r, c.inst.mods, c.inst.operands
        self._need(c, 2)
        if "sync" not in mods:
            raise self.unsupported(c.inst, "vote without .sync")
        r[F_OP] = OP_VOTE
        r[F_SUB] = {"all": VOTE_ALL, "any": VOTE_ANY, "uni": VOTE_UNI, "ballot": VOTE_BALLOT}[
            next(m for m in mods if m in ("all", "any", "uni", "ballot"))]
        r[F_D0] = self._D(c, 0)
        r[F_S0], neg = self.pred_src(c.fn, ops[1], c.inst)
        r[F_FLAGS] = FL_NEG_S2 if neg else 0
        r[F_S1] = self._S(c, 2, "b32") if len(ops) > 2 else -1

    def _d_match(self, c: _Site) -> None:
        self._need(c, 3)
        c.r[F_OP] = OP_MATCH
        c.r[F_SUB] = MATCH_ALL if "all" in c.inst.mods else MATCH_ANY
        self._member_dests(c)
        c.r[F_S0] = self._S(c, 1)
        c.r[F_S1] = self._S(c, 2, "b32")

    def _d_redux(self, c: _Site) -> None:
        self._need(c, 3)
        if c.ty not in ("u32", "s32", "b32"):
            raise self.unsupported(c.inst)
        c.r[F_OP] = OP_REDUX
        c.r[F_SUB] = next(REDUX[m] for m in c.inst.mods if m in REDUX)
        c.r[F_D0] = self._D(c, 0)
        c.r[F_S0] = self._S(c, 1)
        c.r[F_S1] = self._S(c, 2, "b32")

    def _d_elect(self, c: _Site) -> None:
        # PTX ISA, elect.sync: the leader is chosen "deterministically", but which lane is not
        # said; any choice could differ from the hardware's (cg::invoke_one uses it on sm_90)
        raise self.unsupported(c.inst, "PTX does not say which lane elect.sync elects")

    def _d_activemask(self, c: _Site) -> None:
        c.r[F_OP] = OP_ACTIVEMASK
        c.r[F_D0] = self._D(c, 0)

    def _d_nanosleep(self, c: _Site) -> None:
        c.r[F_OP] = OP_NANOSLEEP

    def arith(self, fn: Function, inst: Instruction, r: list[int], o: str, mods: Sequence[str], ty: str, tyc: int,
              flags: int) -> None:
        ops = inst.operands
        if ty in FLOAT_TYPES:
            if o in ("addc", "subc", "madc") or "cc" in mods:
                raise self.unsupported(inst)
            r[F_OP] = FLOAT_OPS[o]
            rnd = _rounding(mods)
            r[F_SUB] = rnd
            if o == "fma" and ty == "f64" and rnd not in (RND_RN, RND_NONE):
                raise self.unsupported(inst, "fma.f64 with a directed rounding mode")
            if o in ("ex2", "lg2", "sin", "cos", "tanh", "rsqrt") or (o in ("rcp", "sqrt", "div") and "approx" in mods):
                flags |= FL_APPROX
            r[F_FLAGS] = flags
            r[F_D0] = self.dst(fn, ops[0], inst)
            nsrc = 3 if o in ("fma", "mad") else (1 if o in ("abs", "neg", "rcp", "sqrt", "rsqrt", "ex2", "lg2", "sin",
                                                              "cos", "tanh") else 2)
            if len(ops) < 1 + nsrc:
                raise self.unsupported(inst, f"expected {1 + nsrc} operands")
            for k in range(nsrc):
                r[F_S0 + k] = self.src(fn, ops[1 + k], ty, inst)
            return
        if ty not in ("u16", "u32", "u64", "s16", "s32", "s64", "b16", "b32", "b64", "u8", "s8"):
            raise self.unsupported(inst)
        base = o[:-1] if o in ("addc", "subc", "madc") else o
        r[F_OP] = INT_OPS[base]
        if ty.startswith("b"):
            r[F_TY] = TYPE_CODES["u" + ty[1:]]
        if "hi" in mods:
            flags |= FL_HI
        if "wide" in mods:
            flags |= FL_WIDE
        if "cc" in mods:
            flags |= FL_CC_OUT
        if o in ("addc", "subc", "madc"):
            flags |= FL_CC_IN
        if flags & (FL_CC_IN | FL_CC_OUT):
            if base == "mad":
                raise self.unsupported(inst, "mad with carry")
            if self.carry_slot < 0:
                self.carry_slot = self.new_slot()
            r[F_AUX] = self.carry_slot
        if base in ("div", "rem"):
            flags &= ~FL_APPROX
        r[F_FLAGS] = flags & ~(FL_FTZ | FL_APPROX)
        r[F_D0] = self.dst(fn, ops[0], inst)
        nsrc = 3 if base == "mad" else (1 if base in ("abs", "neg") else 2)
        if len(ops) < 1 + nsrc:
            raise self.unsupported(inst, f"expected {1 + nsrc} operands")
        wide_ty = {"u16": "u32", "s16": "s32", "u32": "u64", "s32": "s64"}.get(ty, ty)
        for k in range(nsrc):
            st = wide_ty if (k == 2 and "wide" in mods) else ty
            r[F_S0 + k] = self.src(fn, ops[1 + k], st, inst)

    def compare(self, fn: Function, inst: Instruction, r: list[int], o: str, mods: Sequence[str],
                types: list[str], flags: int) -> None:
        ops = inst.operands
        cmp = next((CMP_CODES[m] for m in mods if m in CMP_CODES), None)
        if cmp is None or not types:
            raise self.unsupported(inst)
        boolop = next((BOOL_CODES[m] for m in mods if m in BOOL_CODES), BOOL_NONE)
        stype = types[-1]
        r[F_OP] = OP_SETP if o == "setp" else OP_SET
        r[F_TY2] = TYPE_CODES[stype] if not stype.startswith("b") else TYPE_CODES["u" + stype[1:]]
        if stype in ("f16x2", "bf16x2"):
            raise self.unsupported(inst)
        r[F_SUB] = cmp | (boolop << 8)
        fl = flags & FL_FTZ
        if o == "set":
            dtype = types[0]
            if dtype not in ("u32", "s32", "b32", "f32"):
                raise self.unsupported(inst)
            r[F_TY] = TYPE_CODES[dtype]
        if isinstance(ops[0], PredDest):
            r[F_D0] = self.dst(fn, ops[0].reg, inst)
            r[F_D1] = self.dst(fn, ops[0].pred, inst)
        else:
            r[F_D0] = self.dst(fn, ops[0], inst)
        r[F_S0] = self.src(fn, ops[1], stype, inst)
        r[F_S1] = self.src(fn, ops[2], stype, inst)
        if boolop != BOOL_NONE:
            if len(ops) < 4:
                raise self.unsupported(inst, "boolean operation without its predicate")
            r[F_S2], neg = self.pred_src(fn, ops[3], inst)
            if neg:
                fl |= FL_NEG_S2
        r[F_FLAGS] = fl

    def convert(self, fn: Function, inst: Instruction, r: list[int], mods: Sequence[str], types: list[str],
                flags: int) -> None:
        ops = inst.operands
        if len(types) < 2:
            raise self.unsupported(inst)
        dty, sty = types[0], types[1]
        if dty not in TYPE_CODES or sty not in TYPE_CODES or dty == "pred" or sty == "pred":
            raise self.unsupported(inst)
        r[F_OP] = OP_CVT
        r[F_TY] = TYPE_CODES[dty]
        r[F_TY2] = TYPE_CODES[sty]
        r[F_SUB] = _rounding(mods)
        if "relu" in mods:
            raise self.unsupported(inst)
        r[F_FLAGS] = flags & (FL_FTZ | FL_SAT)
        r[F_D0] = self.dst(fn, ops[0], inst)
        r[F_AUX2] = max(self.reg_bits(fn, ops[0]), 8 * TYPE_SIZES[dty])
        r[F_S0] = self.src(fn, ops[1], sty, inst)
        if dty in ("f16x2", "bf16x2"):
            if len(ops) < 3 or sty != "f32":
                raise self.unsupported(inst)
            r[F_S1] = self.src(fn, ops[2], sty, inst)
        elif sty in ("f16x2", "bf16x2") or dty in ("f16x2", "bf16x2"):
            raise self.unsupported(inst)

    def op_id(self, fn: Function, idx: int) -> tuple[int, int]:
        v = self.op_ids.get((fn.name, idx))
        if v is None:
            return -1, -1
        if isinstance(v, tuple):
            return v
        return v, -1

    def memory(self, fn: Function, idx: int, inst: Instruction, r: list[int], o: str, mods: Sequence[str], ty: str,
               flags: int) -> None:
        ops = inst.operands
        if len(ops) < 2:
            raise self.unsupported(inst, "expected 2 operands")
        space = inst.space or "generic"
        if space not in SPACE_CODES:
            raise self.unsupported(inst, f"the {space} space")
        if ty not in TYPE_SIZES or ty == "b128" or TYPE_SIZES[ty] > 8:
            raise self.unsupported(inst, f"{ty or 'untyped'} accesses")
        vec = inst.vector
        if vec > 4:
            raise self.unsupported(inst)
        if "volatile" in mods or any(m in ("relaxed", "acquire", "release") for m in mods):
            if space in ("global", "generic"):
                self.serial = True
        r[F_OP] = OP_LD if o in ("ld", "ldu") else OP_ST
        r[F_TY] = TYPE_CODES.get(ty, T_U32)
        r[F_NB] = TYPE_SIZES[ty] if ty != "pred" else 1
        r[F_VEC] = vec
        addr_op = ops[1] if r[F_OP] == OP_LD else ops[0]
        val_op = ops[0] if r[F_OP] == OP_LD else ops[1]
        r[F_ABASE], r[F_AOFF], r[F_SPACE] = self.address(fn, addr_op, space, inst)
        items = val_op.items if isinstance(val_op, Vec) else (val_op,)
        if len(items) != vec:
            raise self.unsupported(inst, "vector width and operand count disagree")
        for k, it in enumerate(items):
            if r[F_OP] == OP_LD:
                r[F_D0 + k] = self.dst(fn, it, inst)
                if k == 0:
                    r[F_AUX2] = self.reg_bits(fn, it)
            else:
                r[F_S0 + k] = self.src(fn, it, ty, inst)
        if r[F_SPACE] in (SP_GLOBAL, SP_SHARED, SP_LOCAL, SP_CONST, SP_GENERIC):
            r[F_SOP] = self.op_id(fn, idx)[0]

    def atomic(self, fn: Function, idx: int, inst: Instruction, r: list[int], o: str, mods: Sequence[str],
               ty: str) -> None:
        ops = inst.operands
        space = inst.space or "generic"
        if space not in ("global", "shared", "generic"):
            raise self.unsupported(inst, f"atomics on the {space} space")
        aop = next((ATOM_CODES[m] for m in mods if m in ATOM_CODES), None)
        if aop is None or ty not in TYPE_CODES or ty == "pred" or inst.vector != 1:
            raise self.unsupported(inst)
        if space in ("global", "generic"):
            self.serial = True
        r[F_OP] = OP_ATOM
        r[F_SUB] = aop
        r[F_TY] = TYPE_CODES[ty] if not ty.startswith("b") else TYPE_CODES["u" + ty[1:]]
        r[F_NB] = TYPE_SIZES[ty]
        if aop in (AT_ADD,) and ty.startswith("b"):
            raise self.unsupported(inst)
        if ty in FLOAT_TYPES and aop != AT_ADD:
            raise self.unsupported(inst, "only add is emulated on floating-point words")
        if o == "atom":
            if len(ops) < 3:
                raise self.unsupported(inst, "expected 3 operands")
            r[F_D0] = self.dst(fn, ops[0], inst)
            a, rest = ops[1], ops[2:]
        else:
            if len(ops) < 2:
                raise self.unsupported(inst, "expected 2 operands")
            a, rest = ops[0], ops[1:]
        r[F_ABASE], r[F_AOFF], r[F_SPACE] = self.address(fn, a, space, inst)
        r[F_S0] = self.src(fn, rest[0], ty, inst)
        if aop == AT_CAS:
            if len(rest) < 2:
                raise self.unsupported(inst, "cas needs two values")
            r[F_S1] = self.src(fn, rest[1], ty, inst)
        r[F_SOP] = self.op_id(fn, idx)[0]

    def texture(self, fn: Function, idx: int, inst: Instruction, r: list[int]) -> None:
        """tex, tld4 (F_SUB: 1 + component), suld.b and sust.b (`tuiprof.collect.emu.kernel.texture`)."""
        from tuiprof.ptx.ops import texture_problem

        problem = texture_problem(inst)
        if problem:
            raise self.unsupported(inst, problem, texture=True)
        ops = inst.operands
        o = inst.opcode
        dims = int(next(m for m in inst.mods if m in ("1d", "2d", "3d"))[0])
        tex = next(x for x in ops if isinstance(x, TexAddr))
        if not isinstance(tex.base, Reg):
            raise self.unsupported(inst, "texture references (bindless texture objects only)", texture=True)
        values = next((x for x in ops if isinstance(x, Vec)), None)
        if values is None or len(tex.coords) < dims:
            raise self.unsupported(inst, "operands", texture=True)
        types = _type_of(inst.mods)
        if o in ("tex", "tld4"):
            if len(types) != 2 or types[0] not in ("f32", "s32", "u32") or types[1] not in ("f32", "s32") \
                    or len(values.items) != 4:
                raise self.unsupported(inst, "result and coordinate types", texture=True)
            r[F_OP] = OP_TEX
            r[F_TY] = {"f32": T_F32, "s32": T_S32, "u32": T_U32}[types[0]]
            r[F_TY2] = T_F32 if types[1] == "f32" else T_S32
            r[F_SUB] = 1 + "rgba".index(next(m for m in inst.mods if m in "rgba")) if o == "tld4" else 0
            for k, it in enumerate(values.items):
                r[F_D0 + k] = self.dst(fn, it, inst)
            ctype = types[1]
        else:
            if len(types) != 1 or types[0] not in ("b8", "b16", "b32", "b64") or len(values.items) > 4:
                raise self.unsupported(inst, "surface element type", texture=True)
            r[F_OP] = OP_SULD if o == "suld" else OP_SUST
            r[F_NB] = TYPE_SIZES[types[0]]
            r[F_VEC] = len(values.items)
            r[F_SUB] = SU_CLAMP if "clamp" in inst.mods else SU_ZERO if "zero" in inst.mods else SU_TRAP
            r[F_TY2] = T_S32
            for k, it in enumerate(values.items):  # sust: the values to store, in the destination slots
                r[F_D0 + k] = self.dst(fn, it, inst) if o == "suld" else self.src(fn, it, types[0], inst)
            ctype = "s32"
        r[F_AUX] = dims
        r[F_ABASE] = self.reg(fn, tex.base.name, inst)
        for k in range(dims):
            r[F_S0 + k] = self.src(fn, tex.coords[k], ctype, inst)
        r[F_SPACE] = SP_GLOBAL
        r[F_SOP] = self.op_id(fn, idx)[0]
        if o == "sust":
            self.serial = True

    def cp_async(self, fn: Function, idx: int, inst: Instruction, r: list[int], mods: Sequence[str]) -> None:
        ops = inst.operands
        if mods[:1] != ("async",) or "bulk" in mods or "shared" not in [m.split("::")[0] for m in mods]:
            raise self.unsupported(inst)
        if len(ops) < 3:
            raise self.unsupported(inst, "expected 3 operands")
        r[F_OP] = OP_CPASYNC
        dbase, doff, _ = self.address(fn, ops[0], "shared", inst)
        r[F_S1] = dbase
        r[F_AUX] = doff
        r[F_ABASE], r[F_AOFF], _ = self.address(fn, ops[1], "global", inst)
        size = ops[2]
        if not isinstance(size, Imm) or int(size.value) not in (4, 8, 16):
            raise self.unsupported(inst, "cp-size must be 4, 8 or 16")
        r[F_NB] = int(size.value)
        if len(ops) > 3 and not isinstance(ops[3], Sym):
            r[F_S2] = self.src(fn, ops[3], "u32", inst)
            r[F_FLAGS] = FL_ZFILL
        r[F_SPACE] = SP_GLOBAL
        r[F_SOP], r[F_SOP2] = self.op_id(fn, idx)

    def call(self, fn: Function, inst: Instruction, r: list[int], entries: dict[str, int]) -> None:
        ops = inst.operands
        target = ops[1] if len(ops) > 1 else None
        if not isinstance(target, Sym) or len(ops) > 3:
            raise self.unsupported(inst, "indirect calls")
        callee = self.module.functions.get(target.name)
        if callee is None:
            raise self.unsupported(inst, f"call of unknown function {target.name}")
        if target.name == "vprintf":
            r[F_OP] = OP_PRINTF
            rets = ops[0].items if isinstance(ops[0], Args) else ()
            r[F_AOFF] = -1
            if rets and isinstance(rets[0], Sym):
                r[F_AOFF] = self.call_alias.get((fn.name, rets[0].name), -1)
            return
        if target.name == "__assertfail":
            r[F_OP] = OP_TRAP
            r[F_AUX] = TRAP_ASSERT
            return
        if not callee.has_body or target.name not in entries:
            raise self.unsupported(inst, f"call of {target.name}, which has no body in this module")
        r[F_OP] = OP_CALL
        r[F_TGT] = entries[target.name]

    def barrier(self, fn: Function, inst: Instruction, r: list[int], mods: Sequence[str]) -> None:
        ops = inst.operands
        o = inst.opcode
        if "warp" in mods:
            r[F_OP] = OP_BARWARP
            r[F_S0] = self.src(fn, ops[0], "b32", inst) if ops else self.const(0xFFFFFFFF)
            return
        r[F_OP] = OP_BAR
        if "red" in mods:
            r[F_SUB] = {"popc": BAR_RED_POPC, "and": BAR_RED_AND, "or": BAR_RED_OR}[
                next(m for m in mods if m in ("popc", "and", "or"))]
            r[F_D0] = self.dst(fn, ops[0], inst)
            rest = ops[1:]
            r[F_S0] = self.src(fn, rest[0], "u32", inst)
            if len(rest) == 3:
                r[F_S1] = self.src(fn, rest[1], "u32", inst)
                pred = rest[2]
            else:
                pred = rest[1]
            r[F_S2], neg = self.pred_src(fn, pred, inst)
            if neg:
                r[F_FLAGS] = FL_NEG_S2
            return
        if "arrive" in mods:
            r[F_SUB] = BAR_ARRIVE
        elif "sync" in mods or o == "bar" or "cta" in mods:
            r[F_SUB] = BAR_SYNC
        else:
            raise self.unsupported(inst)
        r[F_S0] = self.src(fn, ops[0], "u32", inst) if ops else self.const(0)
        if len(ops) > 1:
            r[F_S1] = self.src(fn, ops[1], "u32", inst)


_DECODERS: dict[str, Callable[[_Decoder, _Site], None]] = {
    "mov": _Decoder._d_mov,
    **{o: _Decoder._d_arith for o in ("add", "sub", "mul", "mad", "div", "rem", "abs", "neg", "min", "max", "fma", "rcp",
                                      "sqrt", "rsqrt", "ex2", "lg2", "sin", "cos", "tanh", "copysign", "addc", "subc",
                                      "madc")},
    **{o: _Decoder._d_bits for o in ("and", "or", "xor", "not", "cnot", "shl", "shr", "bfe", "bfi", "brev", "clz",
                                     "popc", "bfind", "prmt", "lop3")},
    "mul24": _Decoder._d_mul24, "mad24": _Decoder._d_mul24,
    "dp4a": _Decoder._d_dot, "dp2a": _Decoder._d_dot,
    "sad": _Decoder._d_sad,
    "shf": _Decoder._d_shf,
    "setp": _Decoder._d_compare, "set": _Decoder._d_compare,
    "selp": _Decoder._d_selp,
    "slct": _Decoder._d_slct,
    "testp": _Decoder._d_testp,
    "cvt": _Decoder._d_cvt,
    "cvta": _Decoder._d_cvta,
    "isspacep": _Decoder._d_isspacep,
    "ld": _Decoder._d_memory, "ldu": _Decoder._d_memory, "st": _Decoder._d_memory,
    **{o: _Decoder._d_texture for o in TEXTURE_OPCODES},
    "atom": _Decoder._d_atomic, "red": _Decoder._d_atomic,
    "cp": _Decoder._d_cp,
    "bra": _Decoder._d_bra,
    "call": _Decoder._d_call,
    "ret": _Decoder._d_ret,
    "exit": _Decoder._d_exit,
    "trap": _Decoder._d_trap, "brkpt": _Decoder._d_trap,
    "bar": _Decoder._d_barrier, "barrier": _Decoder._d_barrier,
    "shfl": _Decoder._d_shfl,
    "vote": _Decoder._d_vote,
    "match": _Decoder._d_match,
    "redux": _Decoder._d_redux,
    "elect": _Decoder._d_elect,
    "activemask": _Decoder._d_activemask,
    "nanosleep": _Decoder._d_nanosleep,
}
"""The decoder of each PTX opcode (the instructions with no effect aside): what the emulator runs."""


def module_globals(module: Module) -> tuple[GlobalVar, ...]:
    """The module's ``.global`` variables at their device addresses (from MODULE_GLOBAL_BASE,
    256-byte aligned, in declaration order), with their initial bytes."""
    at = MODULE_GLOBAL_BASE
    out = []
    for v in module.variables:
        if v.space == "global":
            at = _align(at, max(v.align, 256))
            init = (v.init or b"")[:v.size_bytes]
            out.append(GlobalVar(v.name, at, max(v.size_bytes, 1), init + b"\0" * (v.size_bytes - len(init))))
            at += max(v.size_bytes, 1)
    return tuple(out)


def module_constants(module: Module) -> tuple[GlobalVar, ...]:
    """The module's ``.const`` variables at their offsets in the constant bank (declaration order,
    each at its alignment), with their initial bytes."""
    at = 0
    out = []
    for v in module.variables:
        if v.space == "const":
            at = _align(at, v.align)
            init = (v.init or b"")[:v.size_bytes]
            out.append(GlobalVar(v.name, at, v.size_bytes, init + b"\0" * (v.size_bytes - len(init))))
            at += v.size_bytes
    return tuple(out)


def const_image(constants: Sequence[GlobalVar]) -> bytes:
    """The constant bank holding `constants` (`module_constants`) at their initial values."""
    image = bytearray(max((c.address + c.size for c in constants), default=0))
    for c in constants:
        image[c.address:c.address + c.size] = c.init
    return bytes(image)


def call_tree(module: Module, kernel: str) -> list[Function]:
    """The kernel and every function it calls (transitively), in call order; recursion refused."""
    order: list[Function] = []
    state: dict[str, int] = {}

    def visit(name: str, path: tuple[str, ...]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            raise UnsupportedPtx(f"recursive device functions are not supported ({' -> '.join(path + (name,))})",
                                 "make the recursion iterative; the emulator keeps one frame per function")
        fn = module.functions[name]
        state[name] = 1
        order.append(fn)
        for inst in fn.instructions:
            if inst.opcode == "call" and len(inst.operands) > 1 and isinstance(inst.operands[1], Sym):
                callee = inst.operands[1].name
                if callee in module.functions and module.functions[callee].has_body:
                    visit(callee, path + (name,))
        state[name] = 2

    visit(kernel, ())
    return order


def decode(module: Module, kernel: str, ipdom: Callable[[Function], Sequence[int]],
           op_ids: Mapping[tuple[str, int], int | tuple[int, int]], n_ops: int,
           source_name: Callable[[SourceLoc | None], str]) -> DecodedKernel:
    """Decode `kernel` of `module` for the interpreter.

    `ipdom(function)` gives the immediate post-dominator instruction index of each guarded branch
    (-1: the function's exit); `op_ids` maps (function name, instruction index) to the StaticOp id
    of a recorded access (a pair for cp.async: load id, store id); `source_name(loc)` renders a
    location as ``file.cu:line`` for messages."""
    if kernel not in module.functions or not module.functions[kernel].is_entry:
        raise TuiprofError(f"no kernel named {kernel!r} in the module",
                           "kernels are: " + ", ".join(module.kernels) if module.kernels else "the module has no kernel")
    funcs = call_tree(module, kernel)
    d = _Decoder(module, kernel, ipdom, op_ids, source_name)
    d.layout(funcs)
    d.alias_call_params(funcs)
    entries: dict[str, int] = {}
    at = 0
    for fn in funcs:
        entries[fn.name] = at
        at += len(fn.instructions) + 1
    for fn in funcs:
        d.decode_function(fn, entries[fn.name], entries)
    code = np.array(d.rows, dtype=np.int64).reshape(-1, N_FIELDS)
    assign_families(code)
    consts = np.array(sorted((slot, v) for v, slot in d.consts.items()), dtype=np.int64).reshape(-1, 2)
    return DecodedKernel(
        kernel=kernel, code=code, n_slots=max(d.n_slots, 1), const_slots=consts,
        special_slots=tuple((slot, name) for name, slot in d.specials.items()),
        entry=0, ptx_lines=tuple(d.ptx_lines), locs=tuple(d.locs), texts=tuple(d.texts), functions=tuple(d.owner),
        params=tuple(d.kparams.values()), param_size=d.param_size, shared_static=d.shared_static,
        dynamic_shared_offset=d.dyn_offset, local_size=d.local_size, const_image=d.const_image,
        globals_=d.globals_, n_ops=n_ops, serial=d.serial)
