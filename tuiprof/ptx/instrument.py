"""PTX instrumentation for the GPU collector (Baghsorkhi12 sec. 4.2, Farooqui11 sec. 3).

`instrument(ptx)` returns the same module with a *probe* inserted before every memory access that
the StaticOp table counts (global, shared, local and generic ``ld``/``ldu``/``st``/``atom``/``red``
and ``cp.async``), a prologue at every kernel entry, and an epilogue before every kernel
``ret``/``exit``. Kernel signatures are unchanged: the probes find their buffers through one
module variable, ``.weak .global .u64 __tuiprof_ctl[8]`` (weak, so that several instrumented
translation units link with ``-rdc``), which the host fills before a launch. All zero (the
default) turns every probe off: an instrumented program runs as the plain one.

Probe placement: *before* the access, because a pointer-chasing load overwrites its own address
register. The guard predicate of a guarded access is folded into the recorded mask with
``vote.sync.ballot``. Branches inside probes depend only on values uniform across the lanes that
execute them, so probes never change how a warp diverges or reconverges; they are written
``bra.uni``, which tells ptxas so (it then needs fewer of its divergent fallbacks for the
shuffles and votes, whose code and registers every probe site paid for).

Registers: every CTA pays for the probes' registers in occupancy, recorded or not, so a kernel
keeps one register of its own (the warp's snapshot index) and a probe reads the other words of
the control block where it needs them, keeping few values live at once; `instrument_capped`
then holds each kernel to the registers that keep its plain occupancy (``.maxnreg``) wherever
the compiler need not spill for it. On the 14 demo kernels (ptxas, sm_80; plain 12-32
registers) the earlier probes took 32-50 registers and left 1 kernel at its plain occupancy on
an H100 (256-thread CTAs); now 11 keep it and 3 lose one step (``benchmarks/bench_gpu.py
--static-only``).

Control block (`CTL_*`, 8 x u64):

    [0] WCOUNT  device pointer to u64[snapshot warps]: words reserved per warp (0 = no recording)
    [1] RANGE   snapshot CTAs: linear ids lo (low 32 bits) .. hi (high 32 bits), hi exclusive
    [2] WOFF    device pointer to u64[snapshot warps + 1]: each warp's region in BUF, in words;
                0 = counting pass (records are only counted, never written)
    [3] BUF     device pointer to the record buffer (u64 words)
    [4] CTA     device pointer to u64[3 x grid CTAs]: per CTA first start and last end
                %globaltimer (host initialises start to 2^64-1, end to 0) and %smid; 0 = off

Sizing (nothing lost, nothing deadlocks): the launch runs twice. The counting pass adds the
*uncompressed* size of every record (1 + active lanes words) to its warp's WCOUNT; the host then
allocates exactly that per warp (WOFF is the prefix sum) and runs the recording pass, whose
records are never larger, so every record fits. Counting the uncompressed size makes the
allocation depend on control flow and masks only, not on addresses (device pointers may differ
between the two runs of a whole program). A warp that reserves past its region (the two runs
took different paths) writes nothing further; the host sees WCOUNT > region and says so. No
probe ever waits for the host, so no launch can deadlock on a full buffer (NVBit's channel can).

Record layout (little-endian u64 words, each warp's records back to back in program order):

    word 0      mask (low 32 bits) | site word (high 32): site id (bits 0-22), module tag
                (bits 23-30), bit 31 set for the compressed form
    compressed  word 1: base = address of the lowest active lane; then one signed 32-bit offset
                (address - base) per active lane, in lane order, padded to whole words:
                2 + ceil(n / 2) words for n active lanes (144 bytes for a full warp)
    full        one u64 address per active lane, in lane order: 1 + n words (264 bytes)

A record is compressed when every active lane's offset fits in 32 signed bits and it has at least
three active lanes (below that the full form is no larger), so no record is ever larger than the
1 + n words the counting pass reserved for it. Addresses carry
their space in the top bits: shared addresses (explicit ``.shared``, or generic ones that
``isspacep.shared`` finds in the shared window, converted with ``cvta.to.shared``) are tagged
`SHARED_TAG`, local ones `LOCAL_TAG` (per-thread local addresses), constant ones `CONST_TAG`
(offsets in the constant bank, as ``ld.const`` addresses them); global addresses are as the
kernel uses them. Site ids count every probed access of the module (`Site`); ``cp.async`` has two
sites, its global source and its shared destination, recorded in that order as two records.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from tuiprof.ptx.module import TYPE_SIZES, Addr, Function, Instruction, Module, PtxError, Reg, Sym
from tuiprof.ptx.ops import memory_ops
from tuiprof.ptx.parse import _FUNC_RE, _TOKEN, _blank_comments, parse_module

CTL_SYMBOL = "__tuiprof_ctl"
CTL_WORDS = 8
CTL_WCOUNT, CTL_RANGE, CTL_WOFF, CTL_BUF, CTL_CTA = 0, 1, 2, 3, 4
CTA_WORDS = 3
"""Per-CTA record: start, end (%globaltimer, ns), %smid."""

SITE_BITS = 23
TAG_BITS = 8
MAX_SITES = 1 << SITE_BITS
MAX_TAG = (1 << TAG_BITS) - 1
COMPRESSED_BIT = 1 << 31

SHARED_TAG = 1 << 62
LOCAL_TAG = 1 << 63
CONST_TAG = SHARED_TAG | LOCAL_TAG
"""A constant-memory address (its offset in the constant bank) carries both tag bits."""
SPACE_TAGS = SHARED_TAG | LOCAL_TAG
MARKER = "// tuiprof instrumentation v1"
"""First line of the inserted declarations; a module carrying it is not instrumented twice."""


@dataclass(frozen=True)
class Site:
    """One probed access: instruction `index` of `function`; `part` 1 is the shared destination of
    a ``cp.async`` (0 its global source, and every other access)."""

    function: str
    index: int
    part: int = 0


@dataclass(frozen=True)
class Instrumented:
    """An instrumented module: its PTX, the site table (site id -> Site) and the module tag the
    probes write (to tell the translation units of a whole program apart)."""

    ptx: str
    sites: tuple[Site, ...]
    tag: int = 0
    kernels: tuple[str, ...] = ()

    def site_ids(self) -> dict[tuple[str, int, int], int]:
        """(function, instruction index, part) -> site id."""
        return {(s.function, s.index, s.part): i for i, s in enumerate(self.sites)}


# --------------------------------------------------------------------------- locating statements


@dataclass(frozen=True)
class _Body:
    name: str
    open_end: int
    """Offset just past the body's opening brace."""
    statements: tuple[tuple[int, int], ...]
    """(offset, PTX line) of each instruction statement, in the parser's order."""


def _bodies(text: str) -> tuple[list[_Body], int]:
    """Every function body of `text` with the offsets of its instruction statements (the scan of
    `tuiprof.ptx.parse`, so that statement k is the parser's instruction k), and where the control
    block's declaration goes: before the first function definition, after the module's own
    variables (so that they keep their places, as the emulator lays them out in order), else
    just past the module header (``.address_size``, else ``.target``)."""
    blank = _blank_comments(text)
    bodies: list[_Body] = []
    header_end = -1
    pos, n = 0, len(blank)
    line, counted = 1, 0
    name: str | None = None
    open_end = 0
    depth = 0
    stmts: list[tuple[int, int]] = []
    first_body = -1
    while pos < n:
        m = _TOKEN.match(blank, pos)
        if m is None:
            raise PtxError("cannot scan the PTX for instrumentation", line + blank.count("\n", counted, pos))
        kind = m.lastgroup
        start = m.start()
        pos = m.end()
        if kind is None:
            continue
        line += blank.count("\n", counted, start)
        counted = start
        if kind == "dir":
            word = m.group("dir").split(None, 1)[0]
            if name is None and (word == ".address_size" or (word == ".target" and header_end < 0)):
                header_end = pos
        elif kind == "section":
            end = blank.find("}", pos)
            pos = n if end < 0 else end + 1
        elif kind == "func":
            head = m.group("func")
            if head.rstrip().endswith("{"):
                fm = _FUNC_RE.match(head.strip())
                if fm is None:
                    raise PtxError("malformed function header", line)
                name, open_end, depth, stmts = fm.group("name"), pos, 1, []
                if first_body < 0:
                    first_body = start
        elif name is not None:
            if kind == "lbrace":
                depth += 1
            elif kind == "rbrace":
                depth -= 1
                if depth == 0:
                    bodies.append(_Body(name, open_end, tuple(stmts)))
                    name = None
            elif kind == "stmt" and not m.group("stmt").lstrip().startswith("."):
                stmts.append((start, line))
    if header_end < 0:
        raise PtxError("no .target / .address_size directive", 1, "pass the PTX nvcc or NVRTC produced")
    return bodies, first_body if first_body >= 0 else header_end


# --------------------------------------------------------------------------- probe text


class _Emitter:
    """PTX text of the probes; unique labels across the module."""

    def __init__(self, tag: int) -> None:
        self.labels = 0
        self.tag = tag

    def label(self) -> str:
        self.labels += 1
        return f"$L__tuiprof_{self.labels}"

    # ---------------------------------------------------------------- shared pieces

    @staticmethod
    def _cta_id(dst: str, tmp: tuple[str, str]) -> list[str]:
        """Linear CTA id: ctaid.x + nctaid.x * (ctaid.y + nctaid.y * ctaid.z)."""
        a, b = tmp
        return [f"mov.u32 {dst}, %ctaid.z;", f"mov.u32 {a}, %nctaid.y;", f"mov.u32 {b}, %ctaid.y;",
                f"mad.lo.u32 {dst}, {dst}, {a}, {b};", f"mov.u32 {a}, %nctaid.x;",
                f"mov.u32 {b}, %ctaid.x;", f"mad.lo.u32 {dst}, {dst}, {a}, {b};"]

    @staticmethod
    def _snapshot_warp(sw: str, skip: str) -> list[str]:
        """`sw` = the warp's index among the snapshot's warps, or -1 (and a branch to `skip`) when
        recording is off or the CTA is not in the snapshot (uniform over the CTA)."""
        return [
            "{",
            ".reg .b64 %tpc_w, %tpc_r;",
            ".reg .b32 %tpc_c, %tpc_x, %tpc_y, %tpc_z, %tpc_n;",
            ".reg .pred %tpc_q, %tpc_o;",
            f"mov.u32 {sw}, -1;",
            f"ld.global.v2.u64 {{%tpc_w, %tpc_r}}, [{CTL_SYMBOL}];",
            "setp.eq.u64 %tpc_q, %tpc_w, 0;",
            *_Emitter._cta_id("%tpc_c", ("%tpc_x", "%tpc_y")),
            "mov.b64 {%tpc_x, %tpc_y}, %tpc_r;",
            "setp.lt.u32 %tpc_o, %tpc_c, %tpc_x;",
            "or.pred %tpc_q, %tpc_q, %tpc_o;",
            "setp.ge.u32 %tpc_o, %tpc_c, %tpc_y;",
            "or.pred %tpc_q, %tpc_q, %tpc_o;",
            f"@%tpc_q bra.uni {skip};",
            "sub.u32 %tpc_c, %tpc_c, %tpc_x;",
            # warps per CTA, and the warp's index in its CTA (linear thread id / 32)
            "mov.u32 %tpc_x, %ntid.x;", "mov.u32 %tpc_y, %ntid.y;", "mov.u32 %tpc_z, %ntid.z;",
            "mul.lo.u32 %tpc_n, %tpc_x, %tpc_y;", "mul.lo.u32 %tpc_n, %tpc_n, %tpc_z;",
            "add.u32 %tpc_n, %tpc_n, 31;", "shr.u32 %tpc_n, %tpc_n, 5;",
            "mov.u32 %tpc_z, %tid.z;", "mov.u32 %tpc_x, %tid.y;",
            "mad.lo.u32 %tpc_z, %tpc_z, %tpc_y, %tpc_x;",
            "mov.u32 %tpc_y, %ntid.x;", "mov.u32 %tpc_x, %tid.x;",
            "mad.lo.u32 %tpc_z, %tpc_z, %tpc_y, %tpc_x;",
            "shr.u32 %tpc_z, %tpc_z, 5;",
            f"mad.lo.u32 {sw}, %tpc_c, %tpc_n, %tpc_z;",
            "}",
        ]

    def _cta_pointer(self, dst: str) -> list[str]:
        """`dst` = this CTA's per-CTA record, or 0 when per-CTA records are off."""
        skip = self.label()
        return [
            "{",
            ".reg .b32 %tpt_c, %tpt_x, %tpt_y;",
            ".reg .b64 %tpt_p;",
            ".reg .pred %tpt_q;",
            f"mov.u64 {dst}, 0;",
            f"ld.global.u64 %tpt_p, [{CTL_SYMBOL}+{8 * CTL_CTA}];",
            "setp.eq.u64 %tpt_q, %tpt_p, 0;",
            f"@%tpt_q bra.uni {skip};",
            *self._cta_id("%tpt_c", ("%tpt_x", "%tpt_y")),
            f"mad.wide.u32 {dst}, %tpt_c, {8 * CTA_WORDS}, %tpt_p;",
            f"{skip}:",
            "}",
        ]

    @staticmethod
    def _leader(mask: str, lead: str, k: str, tmp: str) -> list[str]:
        """`lead`: this lane is the lowest lane of `mask` (whose index goes to `k`)."""
        return [f"neg.s32 {tmp}, {mask};", f"and.b32 {tmp}, {tmp}, {mask};", f"bfind.u32 {k}, {tmp};",
                f"mov.u32 {tmp}, %laneid;", f"setp.eq.u32 {lead}, {tmp}, {k};"]

    # ---------------------------------------------------------------- kernel entry and exit

    OFF = "%tuiprof_off"
    """Kernel-wide predicate: this warp records nothing (SW is -1), so every probe is one branch."""
    SW = "%tuiprof_sw"
    """The one kernel-wide register the probes add: the warp's snapshot index, -1 when off."""

    def kernel_declarations(self) -> str:
        return f"\n\t.reg .b32 {self.SW};\n\t.reg .pred {self.OFF};\n"

    def prologue(self) -> list[str]:
        """At kernel entry: the warp's snapshot index (`_snapshot_warp`) in the kernel-wide
        register, and the CTA's start time and SM (lowest lane of each warp, atom.min)."""
        sw_done = self.label()
        skip = self.label()
        return [
            "// tuiprof: kernel prologue",
            *self._snapshot_warp(self.SW, sw_done),
            f"{sw_done}:",
            f"setp.eq.u32 {self.OFF}, {self.SW}, -1;",
            "{",
            ".reg .b32 %tpe_m, %tpe_k, %tpe_x;",
            ".reg .b64 %tpe_t, %tpe_s, %tpe_c;",
            ".reg .pred %tpe_q, %tpe_l;",
            *self._cta_pointer("%tpe_c"),
            "setp.eq.u64 %tpe_q, %tpe_c, 0;",
            f"@%tpe_q bra.uni {skip};",
            "activemask.b32 %tpe_m;",
            *self._leader("%tpe_m", "%tpe_l", "%tpe_k", "%tpe_x"),
            "mov.u64 %tpe_t, %globaltimer;",
            "mov.u32 %tpe_x, %smid;",
            "cvt.u64.u32 %tpe_s, %tpe_x;",
            "@%tpe_l atom.global.min.u64 %tpe_t, [%tpe_c], %tpe_t;",
            "@%tpe_l st.global.u64 [%tpe_c+16], %tpe_s;",
            f"{skip}:",
            "}",
        ]

    def epilogue(self, guard: tuple[str, bool] | None) -> list[str]:
        """Before a ret/exit that ends the thread: the CTA's end time (atom.max, lowest exiting
        lane of each warp)."""
        skip = self.label()
        out = ["// tuiprof: exit", "{",
               ".reg .b32 %tpx_m, %tpx_a, %tpx_k, %tpx_x;",
               ".reg .b64 %tpx_t, %tpx_c;",
               ".reg .pred %tpx_q, %tpx_l;",
               *self._cta_pointer("%tpx_c"),
               "setp.eq.u64 %tpx_q, %tpx_c, 0;", f"@%tpx_q bra.uni {skip};", "activemask.b32 %tpx_a;"]
        out += self._guarded_mask("%tpx_m", "%tpx_a", guard)
        out += ["setp.eq.u32 %tpx_q, %tpx_m, 0;", f"@%tpx_q bra.uni {skip};",
                *self._leader("%tpx_m", "%tpx_l", "%tpx_k", "%tpx_x"),
                "mov.u64 %tpx_t, %globaltimer;",
                "@%tpx_l atom.global.max.u64 %tpx_t, [%tpx_c+8], %tpx_t;",
                f"{skip}:", "}"]
        return out

    @staticmethod
    def _guarded_mask(dst: str, active: str, guard: tuple[str, bool] | None) -> list[str]:
        if guard is None:
            return [f"mov.b32 {dst}, {active};"]
        reg, negated = guard
        return [f"vote.sync.ballot.b32 {dst}, {'!' if negated else ''}{_reg_text(reg)}, {active};"]

    # ---------------------------------------------------------------- the access probe

    def probe(self, site: int, address: list[str], space: str, guard: tuple[str, bool] | None,
              in_kernel: bool) -> list[str]:
        """Record one warp access of `site`: `address` computes the lane address into %tp_a;
        `space` is the instruction's (global, shared, local or generic). A warp outside the
        snapshot passes with one test and a uniform branch; the recording keeps few values live at
        once (the control block is read where each word is needed), so that the kernel's register
        count grows little."""
        skip = self.label()
        count = self.label()
        word = site | (self.tag << SITE_BITS)
        out = [f"// tuiprof: probe {site}", "{",
               ".reg .b64 %tp_a, %tp_e, %tp_r, %tp_g, %tp_h;",
               ".reg .b32 %tp_am, %tp_m, %tp_k, %tp_n, %tp_x, %tp_y, %tp_o;",
               ".reg .pred %tp_q, %tp_l, %tp_i, %tp_f, %tp_ok, %tp_p;"]
        if in_kernel:
            sw = self.SW
            out.append(f"@{self.OFF} bra.uni {skip};")
        else:  # a device function keeps no kernel-wide state: it finds the warp's index (or skips) here
            sw = "%tp_sw"
            out += [".reg .b32 %tp_sw;", *self._snapshot_warp(sw, skip)]
        out += address
        if space == "shared":
            out.append(f"or.b64 %tp_a, %tp_a, {SHARED_TAG};")
        elif space == "local":
            out.append(f"or.b64 %tp_a, %tp_a, {LOCAL_TAG};")
        elif space == "const":
            out.append(f"or.b64 %tp_a, %tp_a, {CONST_TAG};")
        elif space == "generic":
            out += ["isspacep.shared %tp_p, %tp_a;",
                    "@%tp_p cvta.to.shared.u64 %tp_a, %tp_a;",
                    f"@%tp_p or.b64 %tp_a, %tp_a, {SHARED_TAG};",
                    "isspacep.local %tp_p, %tp_a;",
                    "@%tp_p cvta.to.local.u64 %tp_a, %tp_a;",
                    f"@%tp_p or.b64 %tp_a, %tp_a, {LOCAL_TAG};"]
        counter = [f"ld.global.u64 %tp_r, [{CTL_SYMBOL}];", f"mad.wide.u32 %tp_r, {sw}, 8, %tp_r;"]
        out += ["activemask.b32 %tp_am;", *self._guarded_mask("%tp_m", "%tp_am", guard),
                "setp.eq.u32 %tp_q, %tp_m, 0;", f"@%tp_q bra.uni {skip};",
                *self._leader("%tp_m", "%tp_l", "%tp_k", "%tp_x"),
                "popc.b32 %tp_n, %tp_m;",
                # is this lane in the (guarded) mask
                "mov.u32 %tp_x, %lanemask_eq;", "and.b32 %tp_x, %tp_x, %tp_m;", "setp.ne.u32 %tp_i, %tp_x, 0;",
                # WOFF = 0: the counting pass
                f"ld.global.u64 %tp_g, [{CTL_SYMBOL}+{8 * CTL_WOFF}];",
                "setp.eq.u64 %tp_q, %tp_g, 0;", f"@%tp_q bra.uni {count};",
                # recording pass: the base is the leader's address; compressed if every offset fits
                "mov.b64 {%tp_x, %tp_y}, %tp_a;",
                "shfl.sync.idx.b32 %tp_x, %tp_x, %tp_k, 31, %tp_am;",
                "shfl.sync.idx.b32 %tp_y, %tp_y, %tp_k, 31, %tp_am;",
                "mov.b64 %tp_e, {%tp_x, %tp_y};",
                "sub.s64 %tp_e, %tp_a, %tp_e;",
                "mov.b64 {%tp_o, %tp_y}, %tp_e;",
                "cvt.s64.s32 %tp_r, %tp_o;",
                "setp.eq.s64 %tp_f, %tp_r, %tp_e;",
                "not.pred %tp_p, %tp_i;", "or.pred %tp_f, %tp_f, %tp_p;",
                "vote.sync.all.pred %tp_f, %tp_f, %tp_am;",
                # ... and if that is smaller: 2 + ceil(n / 2) < 1 + n from 3 lanes on
                "setp.ge.u32 %tp_p, %tp_n, 3;", "and.pred %tp_f, %tp_f, %tp_p;",
                # words: compressed 2 + (n + 1) / 2, full 1 + n
                "add.u32 %tp_y, %tp_n, 1;", "shr.u32 %tp_x, %tp_y, 1;", "add.u32 %tp_x, %tp_x, 2;",
                "selp.b32 %tp_x, %tp_x, %tp_y, %tp_f;",
                "cvt.u64.u32 %tp_e, %tp_x;",
                # the leader reserves them; every lane learns where they start
                *counter,
                "mov.u64 %tp_h, 0;",
                "@%tp_l atom.global.add.u64 %tp_h, [%tp_r], %tp_e;",
                "mov.b64 {%tp_x, %tp_y}, %tp_h;",
                "shfl.sync.idx.b32 %tp_x, %tp_x, %tp_k, 31, %tp_am;",
                "shfl.sync.idx.b32 %tp_y, %tp_y, %tp_k, 31, %tp_am;",
                "mov.b64 %tp_h, {%tp_x, %tp_y};",
                # the record's first word in BUF (the warp's region starts at WOFF[sw]) and whether
                # it ends within the region (before WOFF[sw + 1])
                f"mad.wide.u32 %tp_g, {sw}, 8, %tp_g;",
                "ld.global.u64 %tp_r, [%tp_g];", "ld.global.u64 %tp_g, [%tp_g+8];",
                "add.s64 %tp_h, %tp_h, %tp_r;",
                "add.s64 %tp_r, %tp_h, %tp_e;",
                "setp.le.u64 %tp_ok, %tp_r, %tp_g;",
                f"ld.global.u64 %tp_r, [{CTL_SYMBOL}+{8 * CTL_BUF}];",
                "shl.b64 %tp_h, %tp_h, 3;", "add.s64 %tp_h, %tp_r, %tp_h;",
                # header and, compressed, the base (the leader's own address)
                f"selp.b32 %tp_x, {word | COMPRESSED_BIT}, {word}, %tp_f;",
                "and.pred %tp_p, %tp_ok, %tp_l;",
                "@%tp_p st.global.v2.u32 [%tp_h], {%tp_m, %tp_x};",
                "and.pred %tp_p, %tp_p, %tp_f;",
                "@%tp_p st.global.u64 [%tp_h+8], %tp_a;",
                # payload: each lane of the mask at its slot (its rank among the mask's lanes)
                "and.pred %tp_ok, %tp_ok, %tp_i;",
                "mov.u32 %tp_x, %lanemask_lt;", "and.b32 %tp_x, %tp_x, %tp_m;", "popc.b32 %tp_x, %tp_x;",
                "and.pred %tp_p, %tp_ok, %tp_f;",
                "mul.wide.u32 %tp_e, %tp_x, 4;", "add.s64 %tp_e, %tp_h, %tp_e;",
                "@%tp_p st.global.u32 [%tp_e+16], %tp_o;",
                "not.pred %tp_f, %tp_f;",
                "and.pred %tp_p, %tp_ok, %tp_f;",
                "mul.wide.u32 %tp_e, %tp_x, 8;", "add.s64 %tp_e, %tp_h, %tp_e;",
                "@%tp_p st.global.u64 [%tp_e+8], %tp_a;",
                f"bra.uni {skip};",
                # counting pass: the uncompressed size
                f"{count}:",
                "add.u32 %tp_x, %tp_n, 1;", "cvt.u64.u32 %tp_e, %tp_x;",
                *counter,
                "@%tp_l atom.global.add.u64 %tp_e, [%tp_r], %tp_e;",
                f"{skip}:", "}"]
        return out


# --------------------------------------------------------------------------- addresses


def _reg_text(name: str) -> str:
    """The register's name as written (the parser renames scoped registers ``r0`` -> ``r0~3``)."""
    return name.split("~", 1)[0]


def _address(fn: Function, addr: Addr, line: int) -> list[str]:
    """Instructions computing `addr` (as the access uses it) into %tp_a."""
    base = addr.base
    out: list[str]
    if base is None:
        out = [f"mov.u64 %tp_a, {addr.offset & ((1 << 64) - 1)};"]
        return out
    if isinstance(base, Sym):
        out = [f"mov.u64 %tp_a, {base.name};"]
    elif isinstance(base, Reg):
        typ = fn.registers.get(base.name, "")
        size = TYPE_SIZES.get(typ, 0)
        text = _reg_text(base.name)
        if size == 8:
            out = [f"mov.b64 %tp_a, {text};"]
        elif size == 4:
            out = [f"cvt.u64.u32 %tp_a, {text};"]
        else:
            raise PtxError(f"address register {text} of type .{typ or '?'} cannot be probed", line)
    else:
        raise PtxError("unexpected address operand", line)
    if addr.offset:
        out.append(f"add.s64 %tp_a, %tp_a, {addr.offset};")
    return out


def _ends_thread(fn: Function, ins: Instruction) -> bool:
    """A kernel ``ret`` or any ``exit``: the thread ends there."""
    return ins.opcode == "exit" or (ins.opcode == "ret" and fn.is_entry)


def _exit_joins(fn: Function) -> set[int]:
    """The kernel's unguarded ``ret``/``exit`` instructions that branches jump to (``@%p bra L``
    ... ``L: ret``, an early return): lanes split by such a branch meet there only to end, so
    they must not meet at an epilogue in front of it; their epilogues go before each branch to
    it and at the end of the code that falls into it. (A CTA whose other lanes wait at a
    bar.sync would otherwise wait for lanes held at the epilogue, for ever: the emulator, like
    ptxas, keeps no convergence barrier at an exit.) Targets of branch tables keep the epilogue."""
    if not fn.is_entry:
        return set()
    tabled = {fn.labels[lab] for labels in fn.branch_targets.values() for lab in labels if lab in fn.labels}
    return {i for i in fn.labels.values() if i < len(fn.instructions) and i not in tabled
            and fn.instructions[i].guard is None and _ends_thread(fn, fn.instructions[i])}


def _branch_target(fn: Function, ins: Instruction) -> int | None:
    """The instruction a ``bra`` jumps to."""
    if ins.opcode != "bra" or not ins.operands:
        return None
    target = ins.operands[0]
    return fn.labels.get(getattr(target, "name", ""))


def _falls_through(ins: Instruction) -> bool:
    return ins.guard is not None or not (ins.is_branch or ins.is_terminator)


# --------------------------------------------------------------------------- the pass


def instrument(ptx: str, module: Module | None = None, *, tag: int = 0,
               max_registers: Mapping[str, int] | None = None, only: Collection[str] | None = None) -> Instrumented:
    """Insert the probes, kernel prologues and exit epilogues into `ptx` (see the module
    docstring); `module` is `ptx` parsed, when the caller has it. `tag` (0-255) identifies this
    module's records among a whole program's translation units. `max_registers` caps kernels'
    registers per thread (``.maxnreg``; `tuiprof.arch.occupancy.register_cap` says how many keep
    the plain kernel's occupancy); a kernel that already bounds its registers (``.maxnreg``,
    ``.minnctapersm``) keeps its own bound. `only` names the kernels to probe (with the functions
    they call; the others run as they are): a build that profiles one kernel of a library-heavy
    program probes only it. Raises PtxError on PTX the probes cannot handle, and when `ptx` is
    already instrumented."""
    if MARKER in ptx:
        raise PtxError("the PTX is already instrumented", 0, "instrument the PTX the compiler produced")
    if not 0 <= tag <= MAX_TAG:
        raise PtxError(f"module tag {tag} is outside 0..{MAX_TAG}", 0, "a whole program has at most 256 PTX modules")
    mod = module if module is not None else parse_module(ptx)
    if mod.address_size != 64:
        raise PtxError(".address_size 32 modules cannot be instrumented", 0, "compile for 64-bit addresses (the default)")
    bodies, header_end = _bodies(ptx)
    blank = _blank_comments(ptx)
    emit = _Emitter(tag)
    inserts: list[tuple[int, int, str]] = []
    sites: list[Site] = []
    kernels: list[str] = []
    probed = None if only is None else _reachable(mod, only)
    for body in bodies:
        if probed is not None and body.name not in probed:
            continue
        fn = mod.functions.get(body.name)
        if fn is None or len(fn.instructions) != len(body.statements):
            raise PtxError(f"instrumentation lost track of function {body.name}'s instructions", 0,
                           "please report it with the PTX")
        for ins, (_, line) in zip(fn.instructions, body.statements):
            if ins.ptx_line != line:
                raise PtxError(f"instrumentation lost track of {body.name} at PTX line {line}", line,
                               "please report it with the PTX")
        if fn.is_entry:
            kernels.append(fn.name)
            inserts.append((body.open_end, 0, emit.kernel_declarations() + _block(emit.prologue())))
            cap = (max_registers or {}).get(fn.name, 0)
            if cap > 0 and fn.maxnreg is None and fn.minnctapersm is None:
                inserts.append((body.open_end - 1, 0, f".maxnreg {cap}\n"))
        joins = _exit_joins(fn)
        for i, (ins, (offset, line)) in enumerate(zip(fn.instructions, body.statements)):
            lines: list[str] = []
            if i + 1 in joins and _falls_through(ins):  # at the end of the code that falls into an exit join
                inserts.append((blank.index(";", offset) + 1, 1, _block(emit.epilogue(None))))
            for part, mo in enumerate(memory_ops(ins, i)):
                if mo.space == "texture":  # a texture object's texels are where the driver put them: not probed
                    continue
                if len(sites) >= MAX_SITES:
                    raise PtxError(f"more than {MAX_SITES} memory accesses in one module", line)
                site = len(sites)
                sites.append(Site(fn.name, i, part))
                space = "shared" if ins.opcode == "cp" and part == 1 else \
                    "global" if ins.opcode == "cp" else ins.space
                if space not in ("global", "shared", "local", "const", "generic"):
                    raise PtxError(f"{ins.opcode} in space .{space} cannot be probed", line)
                lines += emit.probe(site, _address(fn, mo.address, line), space, ins.guard, fn.is_entry)
            if _branch_target(fn, ins) in joins:
                lines += emit.epilogue(ins.guard)
            elif _ends_thread(fn, ins) and i not in joins:
                lines += emit.epilogue(ins.guard)
            if lines:
                inserts.append((offset, 1, _block(lines)))
    header = f"{MARKER}\n.weak .global .align 16 .u64 {CTL_SYMBOL}[{CTL_WORDS}];\n\n"
    inserts.append((header_end, 0, header))
    pieces: list[str] = []
    at = 0
    # one pass (a splice per insert was quadratic: 20 s for a Thrust module); at one offset the
    # inserts go in the order the splices gave them: by kind, and the later first
    for offset, _, text in reversed(sorted(inserts, key=lambda t: (t[0], t[1]), reverse=True)):
        pieces += [ptx[at:offset], text]
        at = offset
    pieces.append(ptx[at:])
    return Instrumented(ptx="".join(pieces), sites=tuple(sites), tag=tag, kernels=tuple(kernels))


Resources = Mapping[str, tuple[int, int, int]]
"""Kernel -> (registers per thread, static shared bytes, local bytes per thread), as compiled."""


def instrument_capped(ptx: str, module: Module | None = None, *, tag: int = 0, plain: Resources,
                      cap: Callable[[int], int], next_cap: Callable[[int], int], compiler: Callable[[str], Resources],
                      rounds: int = 3, only: Collection[str] | None = None) -> Instrumented:
    """`instrument` keeping each kernel within `cap` of its `plain` registers (the registers that
    keep the plain kernel's occupancy), but never where that makes the compiler spill: compiled
    (`compiler`), a kernel that needs more local memory than its plain kernel gets `next_cap` of
    its cap (the next occupancy step down), for at most `rounds` compiles, and then no cap: a
    spill costs local-memory traffic on every CTA, where a register costs occupancy."""
    caps = {k: c for k, r in plain.items() if (c := cap(r[0])) > 0 and (only is None or k in only)}
    spilled: set[str] = set()
    for _ in range(rounds):
        result = instrument(ptx, module, tag=tag, max_registers=caps, only=only)
        if not caps:
            return result
        compiled = compiler(result.ptx)
        spilled = {k for k in caps if compiled.get(k, (0, 0, 0))[2] > plain[k][2]}
        if not spilled:
            return result
        caps = {k: v for k, v in ((k, next_cap(v) if k in spilled else v) for k, v in caps.items()) if v > 0}
    return instrument(ptx, module, tag=tag, max_registers={k: v for k, v in caps.items() if k not in spilled},
                      only=only)


def _reachable(module: Module, kernels: Collection[str]) -> set[str]:
    """`kernels` and every function they call, transitively."""
    out: set[str] = set()
    stack = [k for k in kernels if k in module.functions]
    while stack:
        name = stack.pop()
        if name in out:
            continue
        out.add(name)
        for ins in module.functions[name].instructions:
            if ins.opcode == "call" and len(ins.operands) > 1 and isinstance(ins.operands[1], Sym):
                stack.append(ins.operands[1].name)
    return out


def _block(lines: list[str]) -> str:
    """Inserted lines, each on its own line, ending where the next statement begins."""
    return "\n" + "\n".join("\t" + ln if not ln.endswith(":") else ln for ln in lines) + "\n\t"


def is_instrumented(ptx: str) -> bool:
    """Whether `ptx` carries tuiprof probes."""
    return MARKER in ptx


_SITE_RE = re.compile(r"// tuiprof: probe (\d+)")


def probe_count(ptx: str) -> int:
    """Number of access probes in an instrumented module."""
    return len(_SITE_RE.findall(ptx))
