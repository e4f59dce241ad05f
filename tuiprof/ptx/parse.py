"""`parse_module`: PTX text (nvcc 12/13, NVRTC; ISA 8.x-9.x) -> `Module`.

The text is cut into statements by one regular expression over the whole module (comments
blanked first, line numbers kept), then each statement is decoded by a handful of per-statement
regexes. Anything not understood raises `PtxError` naming the PTX line: an instruction is never
skipped silently. The ``.section .debug_*`` blocks are skipped whole (the ``.file`` table and the
``.loc`` directives carry all the line information tuiprof uses).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

from tuiprof.ptx.module import (
    NEWEST_PTX_ISA,
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
    Param,
    PredDest,
    PtxError,
    Reg,
    Sink,
    SourceLoc,
    Special,
    Sym,
    TexAddr,
    Variable,
    Vec,
    is_system_path,
)

# --------------------------------------------------------------------------- lexical pieces

_COMMENTS = re.compile(r'"[^"\n]*"|//[^\n]*|/\*.*?\*/', re.S)

_TOKEN = re.compile(r"""
    \s+
  | (?P<lbrace>\{)
  | (?P<rbrace>\})
  | (?P<dir>\.(?:loc|file|version|target|address_size)\b(?:"[^"]*"|[^\n;"])*;?)
  | (?P<section>\.section\b[^{;]*\{)
  | (?P<func>(?:\.(?:visible|weak|extern)\s+)*\.(?:entry|func)\b[^{;]*[{;])
  | (?P<label>[A-Za-z_$%][\w$]*)\s*:(?!:)
  | (?P<stmt>(?:[^;{}"]|\{(?:[^{}]|\{[^{}]*\})*\}|"[^"]*")+;)
""", re.X)

_IDENT = r"[A-Za-z_$%][\w$]*"
_NAME_RE = re.compile(rf"^{_IDENT}$")
_REG_RANGE = re.compile(rf"^({_IDENT})<(\d+)>$")
_INT_RE = re.compile(r"^(-)?(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]+|\d+)[uU]?$")
_FLOAT_RE = re.compile(r"^-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?$")
_HEXFLOAT_RE = re.compile(r"^(-)?0([fFdD])([0-9a-fA-F]+)$")
_ADDR_RE = re.compile(rf"^\[\s*({_IDENT})?\s*(?:([+-])?\s*(-?\s*(?:0[xX][0-9a-fA-F]+|\d+)))?\s*\]$")
_LOC_RE = re.compile(r"^\.loc\s+(\d+)\s+(\d+)\s+(\d+)\s*(.*)$", re.S)
_LOC_EXTRA = re.compile(rf"^,\s*function_name\s+({_IDENT})(?:\s*\+\s*\d+)?"
                        r"(?:\s*,\s*inlined_at\s+(\d+)\s+(\d+)\s+(\d+))?\s*;?\s*$")
_FILE_RE = re.compile(r'^\.file\s+(\d+)\s+"([^"]*)"(?:\s*,\s*\d+\s*,\s*\d+)?\s*;?\s*$')
_FUNC_RE = re.compile(rf"""^((?:\.(?:visible|weak|extern)\s+)*)\.(entry|func)\s*
    (?:\((?P<ret>[^()]*)\)\s*)?
    (?P<name>{_IDENT})\s*
    (?:\((?P<params>[^()]*)\))?
    (?P<perf>[^{{;]*)(?P<end>[{{;])$""", re.X | re.S)
_PERF_RE = re.compile(r"\.(maxntid|reqntid|minnctapersm|maxnreg|maxclusterrank|reqnctapercluster"
                      r"|explicitcluster|noreturn|blocksareclusters)\b([\s\d,]*)")
_DECL_RE = re.compile(r"""^((?:\.(?:visible|extern|weak|common)\s+)*)
    \.(global|shared|const|local|param)(?:::\w+)?\s+
    (?P<rest>.*);$""", re.X | re.S)
_VAR_NAME_RE = re.compile(rf"^({_IDENT})((?:\s*\[\s*\d*\s*\])*)$")
_INSTR_RE = re.compile(rf"^(?:@\s*(!)?\s*({_IDENT})\s+)?([A-Za-z_][\w.:]*)\s*(.*)$", re.S)

SPECIAL_VECTOR = frozenset({"tid", "ntid", "ctaid", "nctaid", "clusterid", "nclusterid",
                            "cluster_ctaid", "cluster_nctaid"})
"""Special registers with .x/.y/.z components."""
SPECIAL_SCALAR = frozenset({
    "laneid", "warpid", "nwarpid", "smid", "nsmid", "gridid", "lanemask_eq", "lanemask_le",
    "lanemask_lt", "lanemask_ge", "lanemask_gt", "clock", "clock_hi", "clock64", "globaltimer",
    "globaltimer_lo", "globaltimer_hi", "dynamic_smem_size", "total_smem_size",
    "aggr_smem_size", "cluster_ctarank", "cluster_nctarank", "is_explicit_cluster",
    "current_graph_exec", "reserved_smem_offset_begin", "reserved_smem_offset_end",
    "reserved_smem_offset_cap", "reserved_smem_offset_0", "reserved_smem_offset_1",
    *(f"pm{i}" for i in range(8)), *(f"pm{i}_64" for i in range(8)),
    *(f"envreg{i}" for i in range(32)),
})
"""Special registers read whole."""
PREDEFINED_CONSTANTS = {"WARP_SZ": 32}
"""The PTX ISA's predefined constants (``warpSize`` compiles to ``WARP_SZ``)."""

PTX_OPCODES = frozenset("""
abs activemask add addc alloca and applypriority atom bar barrier bfe bfi bfind bmsk bra brev brkpt
brx call clusterlaunchcontrol clz cnot copysign cos cp createpolicy cvt cvta discard div dp2a dp4a
elect ex2 exit fence fma fns getctarank griddepcontrol isspacep istypep ld ldmatrix ldu lg2 lop3
mad mad24 madc mapa match max mbarrier membar min mma mov movmatrix mul mul24 multimem nanosleep
neg not or pmevent popc prefetch prefetchu prmt rcp red redux rem ret rsqrt sad selp set
setmaxnreg setp shf shfl shl shr sin slct sqrt st stackrestore stacksave stmatrix sub subc suld
suq sured sust szext tanh tcgen05 tensormap testp tex tld4 trap txq vabsdiff vabsdiff2 vabsdiff4
vadd vadd2 vadd4 vavrg2 vavrg4 vmad vmax vmax2 vmax4 vmin vmin2 vmin4 vote vset vset2 vset4 vshl
vshr vsub vsub2 vsub4 wgmma wmma xor
""".split())
"""Base opcodes of the PTX ISA up to 9.x; anything else is refused with its line."""

_IGNORED_BODY_DIRECTIVES = ("pragma",)
_TARGET_SPACES = ("global", "shared", "const", "local", "param")


_GLUED_DIRECTIVE = re.compile(r"(?<=\w)\.(?=[A-Za-z])")


def _unglue(text: str) -> str:
    """``.reg.b32 f`` -> ``.reg .b32 f`` (inline asm from headers glues directive words)."""
    head, eq, tail = text.partition("=")
    return _GLUED_DIRECTIVE.sub(" .", head) + eq + tail


def _blank_comments(text: str) -> str:
    """Comments replaced by spaces (newlines kept, so offsets and line numbers stay valid)."""
    def repl(m: re.Match[str]) -> str:
        s = m.group(0)
        if s[0] == '"':
            return s
        return re.sub(r"[^\n]", " ", s)
    return _COMMENTS.sub(repl, text)


def parse_int(text: str, line: int = 0) -> int:
    """A PTX integer literal (decimal, hex, octal, binary, optional sign and U suffix)."""
    t = text.replace(" ", "")
    m = _INT_RE.match(t)
    if not m:
        raise PtxError(f"expected an integer, found {text!r}", line)
    body = m.group(2)
    if body[:2] in ("0x", "0X"):
        v = int(body, 16)
    elif body[:2] in ("0b", "0B"):
        v = int(body[2:], 2)
    elif len(body) > 1 and body[0] == "0":
        v = int(body, 8)
    else:
        v = int(body)
    return -v if m.group(1) else v


def _imm(text: str, line: int) -> Imm | None:
    m = _HEXFLOAT_RE.match(text)
    if m:
        bits = 32 if m.group(2) in "fF" else 64
        digits = m.group(3)
        if len(digits) != bits // 4:
            raise PtxError(f"hex float {text!r} needs {bits // 4} hex digits", line)
        v = int(digits, 16)
        if m.group(1):
            v ^= 1 << (bits - 1)
        return Imm(v, text, bits)
    if _INT_RE.match(text):
        return Imm(parse_int(text, line), text)
    if _FLOAT_RE.match(text):
        return Imm(float(text), text)
    return None


_TOP_COMMA = re.compile(r",(?![^{\[(]*[}\])])")


def _split_top(text: str) -> list[str]:
    """`text` split at the commas outside (), [] and {} (one level of nesting, as PTX operands
    have); items stripped; empty text -> []."""
    if "[" in text and "{" in text:  # a texture operand [tex, {x, y}]: braces inside brackets
        parts = split_nested(text, "{[(", "}])")
    elif "(" in text or "[" in text or "{" in text:
        parts = _TOP_COMMA.split(text)
    else:
        parts = text.split(",")
    out = [p.strip() for p in parts]
    if out == [""]:
        return []
    return out


def split_nested(text: str, opens: str, closes: str) -> list[str]:
    """`text` split at the commas outside any bracket pair of `opens`/`closes`, at any depth."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in opens:
            depth += 1
        elif ch in closes:
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


# --------------------------------------------------------------------------- declarations


def _dims(text: str, line: int) -> tuple[int, ...]:
    out = []
    for d in re.findall(r"\[\s*(\d*)\s*\]", text):
        out.append(parse_int(d, line) if d else 0)
    return tuple(out)


def _parse_param(text: str, line: int) -> Param:
    """``.param .u64 .ptr .global .align 16 name`` / ``.param .align 8 .b8 name[16]``."""
    toks = _unglue(text).split()
    if not toks or toks[0] not in (".param", ".reg"):
        raise PtxError(f"malformed parameter {text.strip()!r}", line)
    align = 0
    type_ = ""
    ptr = False
    ptr_space = ""
    i = 1
    while i < len(toks) - 1:
        t = toks[i]
        if t == ".align":
            align = parse_int(toks[i + 1], line)
            i += 2
            continue
        if t == ".ptr":
            ptr = True
        elif t[1:] in _TARGET_SPACES and ptr:
            ptr_space = t[1:]
        elif t[1:] in TYPE_SIZES:
            type_ = t[1:]
        else:
            raise PtxError(f"unknown parameter attribute {t!r} in {text.strip()!r}", line)
        i += 1
    if i != len(toks) - 1 or not type_:
        raise PtxError(f"malformed parameter {text.strip()!r}", line)
    m = _VAR_NAME_RE.match(toks[-1])
    if not m:
        raise PtxError(f"malformed parameter name {toks[-1]!r}", line)
    dims = _dims(m.group(2), line)
    count = 1
    for d in dims:
        count *= d
    size = TYPE_SIZES[type_] * count
    return Param(m.group(1), type_, size, align or TYPE_SIZES[type_], ptr, ptr_space, dims)


def _pack_init(values: list[str], type_: str, count: int, line: int) -> bytes:
    size = TYPE_SIZES[type_]
    out = bytearray()
    for v in values:
        imm = _imm(v.strip(), line)
        if imm is None:
            raise PtxError(f"unsupported initialiser value {v.strip()!r} (symbol addresses in "
                           "initialisers are not supported)", line)
        if imm.float_bits:
            if imm.float_bits == 64 and type_ == "f32":
                val = struct.unpack("<d", struct.pack("<Q", int(imm.value)))[0]
                out += struct.pack("<f", val)
            elif imm.float_bits == 32 and type_ == "f64":
                val = struct.unpack("<f", struct.pack("<I", int(imm.value)))[0]
                out += struct.pack("<d", val)
            else:
                out += int(imm.value).to_bytes(size, "little")
        elif isinstance(imm.value, float) or type_ in ("f32", "f64"):
            out += struct.pack("<f" if size == 4 else "<d", float(imm.value))
        else:
            out += (int(imm.value) & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    total = size * count
    if len(out) > total:
        raise PtxError(f"initialiser has more elements than the array ({len(values)})", line)
    return bytes(out) + bytes(total - len(out))


def _parse_var(linkage: str, space: str, rest: str, line: int) -> list[Variable]:
    """The names of one ``.global/.shared/.const/.local/.param`` declaration."""
    init_text = None
    if "=" in rest:
        rest, init_text = rest.split("=", 1)
    toks = rest.split()
    align = 0
    type_ = ""
    vec = 1
    i = 0
    while i < len(toks) and toks[i].startswith("."):
        t = toks[i][1:]
        if t == "align":
            align = parse_int(toks[i + 1], line)
            i += 2
            continue
        if t in ("v2", "v4", "v8"):
            vec = int(t[1:])
        elif t in TYPE_SIZES:
            type_ = t
        elif t in ("ptr",):
            pass
        else:
            raise PtxError(f"unknown attribute .{t} in a .{space} declaration", line)
        i += 1
    names = _split_top(" ".join(toks[i:]))
    if not type_ or not names:
        raise PtxError(f"malformed .{space} declaration", line)
    if init_text is not None and len(names) != 1:
        raise PtxError("an initialiser may follow only a single declared name", line)
    out = []
    for n in names:
        m = _VAR_NAME_RE.match(n)
        if not m:
            raise PtxError(f"malformed variable name {n!r}", line)
        dims = _dims(m.group(2), line)
        count = vec
        for d in dims:
            count *= d
        init = None
        if init_text is not None:
            flat = init_text.replace("{", " ").replace("}", " ").strip()
            values = _split_top(flat)
            if dims and dims[0] == 0:  # x[] = {...}: the initialiser gives the outer size
                inner = vec
                for d in dims[1:]:
                    inner *= d
                dims = (-(-len(values) // max(1, inner)),) + dims[1:]
                count = dims[0] * inner
            init = _pack_init(values, type_, count, line)
        elem = TYPE_SIZES[type_]
        out.append(Variable(m.group(1), space, type_, elem * count, align or elem * vec, init,
                            dims, linkage, line))
    return out


# --------------------------------------------------------------------------- functions


@dataclass
class _FuncBuilder:
    name: str
    is_entry: bool
    params: tuple[Param, ...]
    ret_params: tuple[Param, ...]
    linkage: str
    noreturn: bool
    perf: dict[str, tuple[int, ...]]
    ptx_line: int
    instructions: list[Instruction] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    registers: dict[str, str] = field(default_factory=dict)
    variables: list[Variable] = field(default_factory=list)
    branch_targets: dict[str, tuple[str, ...]] = field(default_factory=dict)
    scopes: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    """Open `{ }` scopes below the function body: (scope number, declared name -> unique name)."""
    scope_count: int = 0
    loc: SourceLoc | None = None
    inlined: dict[tuple[int, int, int], SourceLoc] = field(default_factory=dict)
    """Latest location seen with inlining info, by (file, line, column), to chain inlined_at."""
    label_lines: dict[str, int] = field(default_factory=dict)
    memo: dict[tuple[str, bool], Operand] = field(default_factory=dict)
    """Operands already decoded outside any scope (registers are per function)."""
    sym_uses: list[tuple[str, int]] = field(default_factory=list)
    label_uses: list[tuple[str, int]] = field(default_factory=list)

    def resolve(self, name: str) -> str:
        """The unique name a declared (possibly scoped) name refers to here."""
        for _, scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return name

    def declare(self, name: str) -> str:
        """The unique name for `name` declared here (renamed inside a `{ }` scope)."""
        if self.scopes:
            number, scope = self.scopes[-1]
            unique = f"{name}~{number}"
            scope[name] = unique
            return unique
        return name

    def build(self) -> Function:
        p = self.perf
        return Function(
            name=self.name, is_entry=self.is_entry, params=self.params,
            instructions=tuple(self.instructions), labels=dict(self.labels),
            registers=dict(self.registers), variables=tuple(self.variables),
            ret_params=self.ret_params, linkage=self.linkage, has_body=True,
            noreturn=self.noreturn, maxntid=p.get("maxntid"), reqntid=p.get("reqntid"),
            minnctapersm=p["minnctapersm"][0] if "minnctapersm" in p else None,
            maxnreg=p["maxnreg"][0] if "maxnreg" in p else None,
            ptx_line=self.ptx_line, branch_targets=dict(self.branch_targets))


def _parse_header(text: str, line: int) -> tuple[_FuncBuilder, bool]:
    """A function header -> (builder, has a body)."""
    m = _FUNC_RE.match(text.strip())
    if not m:
        raise PtxError(f"malformed function header {' '.join(text.split())[:80]!r}", line)
    linkage = " ".join(w[1:] for w in m.group(1).split())
    ret = tuple(_parse_param(p, line) for p in _split_top(m.group("ret") or ""))
    params = tuple(_parse_param(p, line) for p in _split_top(m.group("params") or ""))
    perf: dict[str, tuple[int, ...]] = {}
    noreturn = False
    rest = m.group("perf")
    pos = 0
    for pm in _PERF_RE.finditer(rest):
        if rest[pos:pm.start()].strip():
            break
        pos = pm.end()
        key = pm.group(1)
        if key == "noreturn":
            noreturn = True
        elif key in ("explicitcluster", "blocksareclusters"):
            perf[key] = ()
        else:
            perf[key] = tuple(parse_int(v, line) for v in _split_top(pm.group(2)))
    if rest[pos:].strip():
        raise PtxError(f"unknown function directive {rest[pos:].strip()[:40]!r}", line)
    is_entry = m.group(2) == "entry"
    fb = _FuncBuilder(m.group("name"), is_entry, params, ret, linkage, noreturn, perf, line)
    return fb, m.group("end") == "{"


class _Parser:
    """One pass over a module's statements, building functions as their bodies close."""

    def __init__(self, text: str) -> None:
        self.text = _blank_comments(text)
        self.version = ""
        self.target = ""
        self.address_size = 64
        self.files: dict[int, str] = {}
        self.variables: list[Variable] = []
        self.functions: dict[str, Function] = {}
        self.func: _FuncBuilder | None = None
        self.pending_labels: list[str] = []
        self._all_function_names: frozenset[str] | None = None

    # ---------------------------------------------------------------- driver

    def run(self) -> Module:
        try:
            return self._run()
        except PtxError as exc:
            raise self._located(exc) from None

    def _located(self, exc: PtxError) -> PtxError:
        """`exc` with the source line of the function being read (its latest ``.loc``) and a hint
        that says whether the PTX's version is one tuiprof reads."""
        f = self.func
        source = exc.source
        if not source and f is not None and f.loc is not None and exc.line:
            files = {int(m.group(1)): m.group(2) for m in re.finditer(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', self.text, re.M)}
            chain = f.loc.chain
            loc = next((at for at in chain if not is_system_path(files.get(at.file, ""))), chain[-1])
            path = files.get(loc.file, "")
            if path:
                source = f"{path.replace(chr(92), '/').rsplit('/', 1)[-1]}:{loc.line}"
        hint = exc.hint
        if hint == PtxError("").hint and re.match(r"^\d+\.\d+$", self.version):
            version = tuple(int(v) for v in self.version.split("."))
            if version > NEWEST_PTX_ISA:
                hint = (f"this is PTX ISA {self.version}, newer than tuiprof reads (up to "
                        f"{NEWEST_PTX_ISA[0]}.x): compile for an older PTX version, or report it")
            else:
                hint = (f"PTX ISA {self.version} is a version tuiprof reads, but not this construct yet; "
                        "please report it with the PTX line shown")
        return PtxError(exc.detail, exc.line, hint, source)

    def _run(self) -> Module:
        text = self.text
        if not re.search(r"^\s*\.version\b", text, re.M):
            raise PtxError("not a PTX module: no .version directive", 1,
                           "pass the text nvcc -ptx or NVRTC produced")
        pos = 0
        n = len(text)
        scan = _TOKEN.match
        count = text.count
        line, counted = 1, 0  # line number of offset `counted`
        while pos < n:
            m = scan(text, pos)
            if m is None:
                line += count("\n", counted, pos)
                snippet = text[pos:pos + 40].split("\n")[0]
                raise PtxError(f"cannot parse {snippet!r} (an unterminated statement?)", line)
            kind = m.lastgroup
            start = m.start()
            pos = m.end()
            if kind is None:
                continue
            line += count("\n", counted, start)
            counted = start
            if kind == "stmt":
                body = m.group("stmt")
                self.statement(body[:-1].strip(), line)
            elif kind == "label":
                self.label(m.group("label"), line)
            elif kind == "dir":
                self.directive(m.group("dir").rstrip(";").strip(), line)
            elif kind == "lbrace":
                self.open_scope(line)
            elif kind == "rbrace":
                self.close_scope(line)
            elif kind == "func":
                self.function_header(m.group("func"), line)
            elif kind == "section":
                end = text.find("}", pos)
                if end < 0:
                    raise PtxError("unterminated .section block", line)
                pos = end + 1
        if self.func is not None:
            raise PtxError(f"function {self.func.name} is not closed with '}}'", self.func.ptx_line)
        if not self.version or not self.target:
            raise PtxError("not a PTX module: .version and .target are missing", 1,
                           "pass the text nvcc -ptx or NVRTC produced")
        module = Module(self.version, self.target, self.address_size, dict(self.files),
                        tuple(self.variables), dict(self.functions))
        return module

    # ---------------------------------------------------------------- module level

    def directive(self, text: str, line: int) -> None:
        word = text.split(None, 1)[0]
        if word == ".loc":
            self.loc(text, line)
            return
        if self.func is not None:
            raise PtxError(f"{word} inside a function body", line)
        if word == ".version":
            self.version = text.split()[1] if len(text.split()) > 1 else ""
            if not re.match(r"^\d+\.\d+$", self.version):
                raise PtxError(f"malformed .version {text!r}", line)
        elif word == ".target":
            self.target = " ".join(text.split()[1:])
            if not self.target:
                raise PtxError("empty .target", line)
        elif word == ".address_size":
            self.address_size = parse_int(text.split()[1], line)
            if self.address_size not in (32, 64):
                raise PtxError(f".address_size {self.address_size} (expected 32 or 64)", line)
        elif word == ".file":
            fm = _FILE_RE.match(text)
            if not fm:
                raise PtxError(f"malformed .file directive {text!r}", line)
            self.files[int(fm.group(1))] = fm.group(2)

    def function_header(self, text: str, line: int) -> None:
        if self.func is not None:
            raise PtxError("function header inside a function body", line)
        fb, has_body = _parse_header(text, line)
        if fb.name in self.functions and self.functions[fb.name].has_body:
            if has_body:
                raise PtxError(f"function {fb.name} is defined twice", line)
            return
        if has_body:
            self.func = fb
        else:
            self.functions[fb.name] = Function(
                fb.name, fb.is_entry, fb.params, (), {}, {}, (), fb.ret_params, fb.linkage,
                has_body=False, noreturn=fb.noreturn, ptx_line=line)

    def open_scope(self, line: int) -> None:
        f = self.func
        if f is None:
            raise PtxError("'{' outside a function", line)
        f.scope_count += 1
        f.scopes.append((f.scope_count, {}))

    def close_scope(self, line: int) -> None:
        f = self.func
        if f is None:
            raise PtxError("unbalanced '}'", line)
        if f.scopes:
            f.scopes.pop()
            return
        self.finish_function(line)

    def finish_function(self, line: int) -> None:
        f = self.func
        assert f is not None
        for lab in self.pending_labels:
            f.labels[lab] = len(f.instructions)
        self.pending_labels = []
        for name, at in f.label_uses:
            if name not in f.labels and name not in f.branch_targets:
                raise PtxError(f"branch to undefined label {name}", at)
        known = ({p.name for p in f.params} | {p.name for p in f.ret_params}
                 | {v.name for v in f.variables} | {v.name for v in self.variables}
                 | set(self.functions) | {f.name})
        for name, at in f.sym_uses:
            if name not in known and name not in self._later_names():
                raise PtxError(f"undeclared symbol {name}", at)
        self.functions[f.name] = f.build()
        self.func = None

    def _later_names(self) -> frozenset[str]:
        """Function names declared anywhere in the module (calls may precede definitions)."""
        if self._all_function_names is None:
            self._all_function_names = frozenset(re.findall(
                rf"\.(?:entry|func)\s*(?:\([^()]*\)\s*)?({_IDENT})", self.text))
        return self._all_function_names

    # ---------------------------------------------------------------- statements

    def statement(self, text: str, line: int) -> None:
        if self.func is None:
            self.module_statement(text, line)
            return
        if text.startswith("."):
            self.body_directive(_unglue(text), line)
            return
        self.instruction(text, line)

    def module_statement(self, text: str, line: int) -> None:
        if self.pending_labels:
            raise PtxError(f"label {self.pending_labels[0]} outside a function", line)
        m = _DECL_RE.match(_unglue(text) + ";")
        if m:
            linkage = " ".join(w[1:] for w in m.group(1).split())
            self.variables.extend(_parse_var(linkage, m.group(2), m.group("rest"), line))
            return
        word = text.split(None, 1)[0] if text else ""
        if word == ".pragma":
            return
        raise PtxError(f"unknown module-level statement {text[:60]!r}", line)

    def label(self, name: str, line: int) -> None:
        f = self.func
        if f is None:
            raise PtxError(f"label {name} outside a function", line)
        if name in f.labels or name in self.pending_labels:
            raise PtxError(f"label {name} defined twice", line)
        self.pending_labels.append(name)
        f.label_lines[name] = line

    def body_directive(self, text: str, line: int) -> None:
        f = self.func
        assert f is not None
        word = text.split(None, 1)[0][1:]
        if word == "reg":
            self.reg_decl(text, line)
            return
        if word in _IGNORED_BODY_DIRECTIVES:
            return
        if word == "branchtargets":
            if len(self.pending_labels) != 1:
                raise PtxError(".branchtargets needs exactly one label", line)
            targets = tuple(f.resolve(t) for t in _split_top(text.split(None, 1)[1]))
            for t in targets:
                f.label_uses.append((t, line))
            f.branch_targets[self.pending_labels.pop()] = targets
            return
        if word == "callprototype":
            raise PtxError("indirect calls (.callprototype) are not supported", line,
                           "call device functions directly (no function pointers)")
        m = _DECL_RE.match(text + ";")
        if m:
            if m.group(1).strip() and m.group(2) != "shared":
                raise PtxError(f"linkage on a function-level .{m.group(2)} declaration", line)
            linkage = " ".join(w[1:] for w in m.group(1).split())
            for v in _parse_var(linkage, m.group(2), m.group("rest"), line):
                unique = f.declare(v.name)
                f.variables.append(Variable(unique, v.space, v.type, v.size_bytes, v.align,
                                            v.init, v.dims, v.linkage, v.ptx_line))
            return
        raise PtxError(f"unknown directive .{word} in a function body", line)

    def reg_decl(self, text: str, line: int) -> None:
        f = self.func
        assert f is not None
        toks = text.split(None, 2)
        if len(toks) < 3:
            raise PtxError(f"malformed .reg declaration {text!r}", line)
        type_ = toks[1][1:]
        rest = toks[2]
        if type_ in ("v2", "v4", "v8"):
            raise PtxError("vector registers (.reg .v4 ...) are not supported", line)
        if type_ not in TYPE_SIZES:
            raise PtxError(f"unknown register type .{type_}", line)
        for item in _split_top(rest):
            rm = _REG_RANGE.match(item)
            if rm:
                base, count = rm.group(1), int(rm.group(2))
                if f.scopes:
                    for i in range(count):
                        f.registers[f.declare(f"{base}{i}")] = type_
                else:
                    for i in range(count):
                        f.registers[f"{base}{i}"] = type_
            elif _NAME_RE.match(item):
                f.registers[f.declare(item)] = type_
            else:
                raise PtxError(f"malformed register name {item!r}", line)

    def loc(self, text: str, line: int) -> None:
        m = _LOC_RE.match(text)
        if not m:
            raise PtxError(f"malformed .loc directive {text!r}", line)
        f = self.func
        if f is None:
            raise PtxError(".loc outside a function", line)
        file_, ln, col = int(m.group(1)), int(m.group(2)), int(m.group(3))
        extra = m.group(4).strip()
        if not extra:
            f.loc = SourceLoc(file_, ln, col)
            return
        em = _LOC_EXTRA.match(extra)
        if not em:
            raise PtxError(f"malformed .loc directive {text!r}", line)
        at = None
        if em.group(2):
            key = (int(em.group(2)), int(em.group(3)), int(em.group(4)))
            at = f.inlined.get(key) or SourceLoc(*key)
        loc = SourceLoc(file_, ln, col, at, em.group(1))
        f.inlined[(file_, ln, col)] = loc
        f.loc = loc

    def instruction(self, text: str, line: int) -> None:
        f = self.func
        assert f is not None
        im = _INSTR_RE.match(text)
        if not im:
            raise PtxError(f"cannot parse instruction {text[:60]!r}", line)
        negated, gname, head, rest = im.groups()
        rest = rest.strip()
        guard = None
        if gname is not None:
            name = f.resolve(gname)
            if name not in f.registers:
                raise PtxError(f"guard predicate {gname} is not a declared register", line)
            guard = (name, bool(negated))
        parts = head.split(".")
        opcode, mods = parts[0], tuple(parts[1:])
        if opcode not in PTX_OPCODES:
            raise PtxError(f"unknown PTX instruction {head!r}", line)
        if "" in mods:
            raise PtxError(f"malformed opcode {head!r}", line)
        if opcode == "call":
            operands = self.call_operands(rest, line)
        else:
            branch = opcode in ("bra", "brx")
            if f.scopes:  # scoped names may shadow: no memo
                operands = tuple(self.operand(o, line, branch) for o in _split_top(rest))
            else:
                memo = f.memo
                ops = []
                for o in _split_top(rest):
                    key = (o, branch)
                    val = memo.get(key)
                    if val is None:
                        val = memo[key] = self.operand(o, line, branch)
                    ops.append(val)
                operands = tuple(ops)
        if self.pending_labels:
            for lab in self.pending_labels:
                f.labels[lab] = len(f.instructions)
            self.pending_labels = []
        f.instructions.append(Instruction(opcode, mods, guard, operands, f.loc, line))

    def call_operands(self, rest: str, line: int) -> tuple[Operand, ...]:
        items = _split_top(rest)
        ops: list[Operand] = []
        for it in items:
            if it.startswith("("):
                if not it.endswith(")"):
                    raise PtxError(f"malformed call argument list {it!r}", line)
                ops.append(Args(tuple(self.operand(a, line) for a in _split_top(it[1:-1]))))
            else:
                ops.append(self.operand(it, line))
        if not ops or isinstance(ops[0], Args) is False:
            ops.insert(0, Args(()))
        if len(ops) < 2 or isinstance(ops[1], Args):
            raise PtxError("call without a target", line)
        if len(ops) == 2:
            ops.append(Args(()))
        if not isinstance(ops[2], Args) or len(ops) > 4:
            raise PtxError(f"malformed call {rest!r}", line)
        if isinstance(ops[1], Reg):
            raise PtxError("indirect calls through a register are not supported", line,
                           "call device functions directly (no function pointers)")
        return tuple(ops)

    def operand(self, text: str, line: int, branch: bool = False) -> Operand:
        f = self.func
        assert f is not None
        if not text:
            raise PtxError("empty operand", line)
        c = text[0]
        if c == "%" or c.isalpha() or c in "_$":
            if "|" in text:
                a, b = (t.strip() for t in text.split("|", 1))
                first = self.operand(a, line)
                second = self.operand(b, line)
                if not isinstance(first, (Reg, Sink)) or not isinstance(second, Reg):
                    raise PtxError(f"malformed two-result destination {text!r}", line)
                return PredDest(first, second)
            if text == "_":
                return Sink()
            if text in PREDEFINED_CONSTANTS:
                return Imm(PREDEFINED_CONSTANTS[text], text)
            if c == "%" and "." in text:
                name, comp = text[1:].split(".", 1)
                if name in SPECIAL_VECTOR and comp in ("x", "y", "z"):
                    return Special(name, comp)
                raise PtxError(f"unknown special register {text}", line)
            name = f.resolve(text)
            if name in f.registers:
                return Reg(name)
            if c == "%":
                if text[1:] in SPECIAL_SCALAR:
                    return Special(text[1:])
                raise PtxError(f"undeclared register {text}", line)
            if not _NAME_RE.match(text):
                raise PtxError(f"cannot parse operand {text!r}", line)
            if branch:
                f.label_uses.append((name, line))
                return Label(name)
            f.sym_uses.append((name, line))
            return Sym(name)
        if c == "[":
            return self.address(text, line)
        if c == "{":
            if not text.endswith("}"):
                raise PtxError(f"malformed vector operand {text!r}", line)
            return Vec(tuple(self.operand(t, line) for t in _split_top(text[1:-1])))
        if c == "!":
            inner = self.operand(text[1:].strip(), line)
            if not isinstance(inner, Reg):
                raise PtxError(f"'!' applies to a predicate register, not {text!r}", line)
            return NegPred(inner)
        imm = _imm(text.replace(" ", ""), line)
        if imm is not None:
            return imm
        raise PtxError(f"cannot parse operand {text!r}", line)

    def texture_address(self, text: str, line: int) -> TexAddr:
        """``[%rd1, {%f1, %f2}]``: a texture or surface object and its coordinates."""
        parts = _split_top(text[1:-1] if text.endswith("]") else text[1:])
        if not text.endswith("]") or len(parts) != 2 or not parts[1].startswith("{"):
            raise PtxError(f"unsupported address operand {text!r} (a texture with a separate sampler?)", line)
        base = self.operand(parts[0], line)
        coords = self.operand(parts[1], line)
        if not isinstance(base, (Reg, Sym)) or not isinstance(coords, Vec):
            raise PtxError(f"malformed texture operand {text!r}", line)
        return TexAddr(base, coords.items)

    def address(self, text: str, line: int) -> Addr | TexAddr:
        f = self.func
        assert f is not None
        if "," in text:
            return self.texture_address(text, line)
        m = _ADDR_RE.match(text)
        if not m:
            raise PtxError(f"unsupported address operand {text!r}", line)
        base_text, sign, off_text = m.groups()
        offset = parse_int(off_text, line) if off_text else 0
        if sign == "-":
            offset = -offset
        if base_text is None:
            if sign is not None:
                raise PtxError(f"malformed address {text!r}", line)
            return Addr(None, offset)
        if off_text is None and _INT_RE.match(base_text):
            return Addr(None, parse_int(base_text, line))
        if off_text is not None and sign is None:
            raise PtxError(f"malformed address {text!r}", line)
        name = f.resolve(base_text)
        if name in f.registers:
            return Addr(Reg(name), offset)
        if base_text[0] == "%":
            raise PtxError(f"undeclared register {base_text} in an address", line)
        f.sym_uses.append((name, line))
        return Addr(Sym(name), offset)


def parse_module(text: str) -> Module:
    """Parse a PTX module; `PtxError` (with the PTX line) on anything not understood."""
    return _Parser(text).run()
