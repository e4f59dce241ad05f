"""``tuiprof init kernel.cu``: a starting launch script written from the kernels' signatures.

The script defines ``setup(dev)``, which builds inputs with NumPy and launches every kernel of
the file once through the launch-script API (``dev.to_device``, ``dev.zeros``, ``dev.launch``,
``dev.set_symbol``, ``dev.texture``; see the emulator's ``EmuDevice``). It runs as written, in
bounds, with the kernels' own types:

- each kernel is launched by the name a C++ programmer writes (``blas::axpy<float, 4>``);
- parameter types come from the compiled kernel's mangled name where it has them (typedefs and
  template arguments resolved: ``T* x`` of ``axpy<double>`` is a float64 array, a
  ``__nv_bfloat16*`` bfloat16 bits), else from the source; every pointer gets an array of its
  element's dtype, inputs (``const`` pointees) random floats or zero integers (zeros keep index
  arrays in bounds), outputs zeros; a ``cudaTextureObject_t`` a texture of random floats;
- the block and the CTAs each cover come from the code (`tuiprof.toolchain.geometry`: the tile that
  ``blockIdx`` is scaled by, ``__launch_bounds__`` with the template arguments and macros in
  scope, the fixed shared arrays), the grid covers the problem size, and every array is sized
  from it with room for the 16-byte vector loads the kernel may make;
- dynamic shared memory gets 32 bytes per thread; the file's ``__constant__`` and
  ``__device__`` variables are set once (``dev.set_symbol``);
- comments say what the user must still choose (lines marked 'adapt').

Signatures come from the source text (`signature.kernel_signatures`) and are checked against
the compiled PTX's ``.entry`` parameter lists, which also give the exact kernel symbol to launch
(C++ kernels are mangled) and the instantiations of template kernels.
"""

from __future__ import annotations

import keyword
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tuiprof.errors import BuildError, OutputError
from tuiprof.output import check_output, shown, write_bytes_to
from tuiprof.toolchain.geometry import Geometry, evaluate, launch_geometry
from tuiprof.toolchain.program import KernelInfo, Program
from tuiprof.toolchain.signature import (
    ITEMSIZE,
    EntryParam,
    KernelParam,
    KernelSignature,
    classify,
    demangled_params,
    entry_params,
    kernel_signatures,
    strip_comments,
    type_aliases,
)

if TYPE_CHECKING:
    from tuiprof.toolchain.names import Enums

_RESERVED_NAMES = {"dev", "np", "rng", "n", "size", "block", "grid", "shared", "setup"}
_PTX_SCALAR = {"f32": "float32", "f64": "float64", "f16": "float16", "u8": "uint8", "s8": "int8",
               "b8": "uint8", "u16": "uint16", "s16": "int16", "b16": "uint16", "u32": "uint32",
               "s32": "int32", "b32": "uint32", "u64": "uint64", "s64": "int64", "b64": "uint64"}
_SMALL_INTS = {"int8", "uint8", "int16", "uint16"}
_FLOATS = {"float32", "float64", "float16", "bfloat16"}
_TEXTURE_TYPES = {"cudaTextureObject_t", "cudaSurfaceObject_t"}
_WIDE_ACCESS = re.compile(r"\b(?:float4|int4|uint4|double2|longlong2|ulonglong2|double4|reinterpret_cast|memcpy)\b")
SHARED_PER_THREAD = 32
"""Bytes of dynamic shared memory per thread a written script launches with (8 KiB for 256 threads)."""
_CONSTANT = re.compile(r"\b(__constant__|__device__)\s+((?:const\s+)?[A-Za-z_][\w:]*(?:\s*<[^;{}()]*>)?)\s+"
                       r"([A-Za-z_]\w*)\s*((?:\[[^\[\];]+\]\s*)*)\s*(?:=[^;]*)?;")


@dataclass(frozen=True)
class LaunchPlan:
    """What the script does for one kernel: the name to launch it by and the arguments to build."""

    launch_name: str
    title: str
    """The signature as the user wrote it (or the demangled instantiation)."""
    params: tuple[KernelParam, ...]
    ptx_sizes: tuple[int, ...] | None
    """Byte size of each PTX parameter, None when there is no PTX to compare with."""
    where: str
    """``file.cu line N``."""
    dims: int
    dynamic_shared: str | None
    max_threads: int | None
    notes: tuple[str, ...] = ()
    geometry: Geometry | None = None
    """The block and the elements per CTA the code implies (None: the defaults)."""
    wide: bool = False
    """The code makes vector (16-byte) accesses: arrays get room for them."""
    texture_dims: int = 2
    """Dimensions of the textures it fetches from (``tex1Dfetch``/``tex1D``: 1, ``tex3D``: 3)."""


@dataclass(frozen=True)
class DeviceVariable:
    """A ``__constant__`` or ``__device__`` variable of the source that a script sets."""

    name: str
    qualifier: str
    type_text: str
    dtype: str | None
    count: int | None
    """Elements (None: a scalar)."""


def plan_launches(source_name: str, text: str, program: Program | None,
                  headers: Sequence[tuple[str, str]] = ()) -> tuple[tuple[LaunchPlan, ...], tuple[str, ...]]:
    """(one plan per launchable kernel, notes on what was left out), for the source `text` named
    `source_name`, its local `headers` as (name, text), and its compiled `program` (None when no
    compiler was available: then names are not checked and C++ kernels are named unmangled)."""
    from tuiprof.ptx.labels import source_scope
    from tuiprof.toolchain.names import source_enums

    signatures: list[tuple[str, str, KernelSignature, dict[str, str]]] = []
    for name, body in ((source_name, text), *headers):
        aliases = type_aliases(strip_comments(body))
        signatures += [(name, body, sig, aliases) for sig in kernel_signatures(body)]
    entries = entry_params(program.ptx) if program is not None else {}
    kernels = program.kernels if program is not None else ()
    enums = source_enums([text, *(t for _, t in headers)])
    used: set[str] = set()
    plans: list[LaunchPlan] = []
    notes: list[str] = []
    for file_name, file_text, sig, aliases in signatures:
        where = f"{file_name} line {sig.line}"
        title = f"{sig.name}({', '.join(_param_text(p) for p in sig.params)})"
        scope = {k: int(v.const) for k, v in source_scope(file_text, sig.name).env.items() if not v.terms}
        if program is None:
            if sig.template:
                notes.append(f"{sig.name} ({where}) is a template kernel: without a compiler tuiprof init "
                             "cannot see its instantiations; launch one by its PTX name")
                continue
            plans.append(_shaped(LaunchPlan(sig.name, title, sig.params, None, where, sig.dims, sig.dynamic_shared,
                                            sig.max_threads), sig, file_text, scope))
            continue
        if sig.template:
            instances = [k for k in kernels if k.name.startswith("_Z") and k.base_name == sig.name
                         and k.name not in used]
            if not instances:
                notes.append(f"{sig.name} ({where}) is a template kernel with no instantiation in the PTX: "
                             f"instantiate it, e.g. `template __global__ void {sig.name}<float>(...);`")
                continue
            first = instances[0]
            extra = tuple(f"other instantiation: {written_name(k, kernels, enums)} = {k.demangled}" for k in instances[1:])
            used.update(k.name for k in instances)
            consts = {**scope, **_template_args(sig, first)}
            plans.append(_shaped(_checked(LaunchPlan(written_name(first, kernels, enums), first.demangled,
                                                     _typed(sig.params, first, aliases), None, where, sig.dims,
                                                     sig.dynamic_shared, sig.max_threads, extra), entries, first.name),
                                 sig, file_text, consts))
            continue
        if sig.extern_c:
            match = next((k for k in kernels if k.name == sig.name), None)
        else:
            match = next((k for k in kernels if k.name.startswith("_Z") and k.base_name == sig.name
                          and k.name not in used and len(entries.get(k.name, ())) == len(sig.params)), None)
        if match is None:
            notes.append(f"{sig.name} ({where}) is not in the compiled PTX (excluded by the preprocessor?); "
                         "no launch written for it")
            continue
        used.add(match.name)
        plans.append(_shaped(_checked(LaunchPlan(written_name(match, kernels, enums), title, _typed(sig.params, match, aliases),
                                                 None, where, sig.dims, sig.dynamic_shared, sig.max_threads),
                                      entries, match.name), sig, file_text, scope))
    for k in kernels:
        if k.name not in used and not any(p.title == k.demangled for p in plans) and k.name not in {
                p.launch_name for p in plans}:
            notes.append(f"{k.demangled} is in the PTX but tuiprof init could not read its definition "
                         f"(made by a macro?); launch it as {written_name(k, kernels, enums)!r} with arguments of these "
                         "PTX types: " + ", ".join(f"{e.type}[{e.size}]" for e in entries.get(k.name, ())))
    return tuple(plans), tuple(notes)


def written_name(kernel: KernelInfo, kernels: Sequence[KernelInfo], enums: "Enums | None" = None) -> str:
    """The shortest C++ name that launches `kernel` among `kernels` (`tuiprof.toolchain.names`): its
    qualified name with its template arguments (``blas::axpy<float, 4>``, an enum argument by its
    enumerator, ``img::tone_map<img::Curve::Gamma>``, when `enums` knows it), else its whole
    demangled signature (overloads), else the symbol."""
    from tuiprof.toolchain.names import NO_ENUMS, find_symbol

    if kernel.name == kernel.demangled:
        return kernel.name
    enums = enums or NO_ENUMS
    symbols = tuple(k.name for k in kernels)
    sigs = {k.name: k.demangled for k in kernels}
    head = _without_params(kernel.demangled)

    def enumerator(m: re.Match[str]) -> str:
        names = [k for k, v in enums.values.get(m.group(1).rsplit("::", 1)[-1], {}).items() if v == int(m.group(2))]
        return f"{m.group(1)}::{names[0]}" if names else m.group(0)

    named = re.sub(r"\(([A-Za-z_][\w:]*)\)(-?\d+)", enumerator, head)
    for candidate in dict.fromkeys((named, head, kernel.demangled)):
        try:
            if find_symbol(candidate, symbols, demangled=sigs, enums=enums) == kernel.name:
                return candidate
        except Exception:  # noqa: BLE001 - an ambiguous or unreadable candidate: try the next
            continue
    return kernel.name


def _without_params(signature: str) -> str:
    """``void ns::k<float, 4>(float*, int)`` -> ``ns::k<float, 4>``."""
    from tuiprof.toolchain.program import top_level_paren

    cut = top_level_paren(signature)
    head = signature[:cut if cut >= 0 else len(signature)].strip()
    depth, start = 0, 0
    for i, ch in enumerate(head):  # a return type before the name: the last top-level word is the name
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == " " and depth == 0 and not head[i - 1] == ",":
            start = i + 1
    return head[start:]


def _template_args(sig: KernelSignature, kernel: KernelInfo) -> dict[str, int]:
    """The instantiation's integer template arguments by their parameters' names."""
    from tuiprof.toolchain.names import read_name

    scopes = read_name(kernel.demangled).scopes
    args = scopes[-1][1] if scopes and scopes[-1][1] else ()
    out = {}
    for name, value in zip(sig.template_params, args):
        if name and re.fullmatch(r"-?\d+", value):
            out[name] = int(value)
    return out


def _typed(params: Sequence[KernelParam], kernel: KernelInfo, aliases: dict[str, str]) -> tuple[KernelParam, ...]:
    """The source's parameters with the types the mangled name gives them, where it gives a known
    one (typedefs and template arguments resolved), the source's names kept."""
    mangled = demangled_params(kernel.demangled, aliases) if kernel.name.startswith("_Z") else None
    if not mangled or len(mangled) != len(params):
        return tuple(params)
    out = []
    for p, m in zip(params, mangled):
        keep_texture = not p.pointer and p.base in _TEXTURE_TYPES
        if m.dtype is not None and not keep_texture and m.pointer == p.pointer:
            out.append(replace(m, name=p.name, type_text=p.type_text if p.dtype == m.dtype else m.type_text))
        else:
            out.append(p)
    return tuple(out)


def _shaped(plan: LaunchPlan, sig: KernelSignature, text: str, consts: dict[str, int]) -> LaunchPlan:
    """`plan` with the geometry its code implies (`tuiprof.toolchain.geometry`)."""
    bound = evaluate(sig.bounds[0], consts) if sig.bounds else None
    max_threads = bound if bound and 0 < bound <= 1024 else plan.max_threads
    geo = launch_geometry(sig.body, text, plan.dims, consts, max_threads)
    tex = 1 if re.search(r"\btex1D(?:fetch|Lod|Grad)?\b", sig.body) else 3 if re.search(r"\btex3D", sig.body) else 2
    return replace(plan, geometry=geo, max_threads=max_threads, wide=bool(_WIDE_ACCESS.search(text)), texture_dims=tex)


def device_variables(texts: Sequence[str]) -> tuple[DeviceVariable, ...]:
    """The ``__constant__`` and ``__device__`` variables the sources declare (not ``extern``)."""
    out: dict[str, DeviceVariable] = {}
    for text in texts:
        code = strip_comments(text)
        consts: dict[str, int] = {}
        for m in re.finditer(r"#\s*define\s+([A-Za-z_]\w*)\s+([^\n]+)|\b(?:constexpr|const)\s+(?:unsigned\s+)?"
                             r"(?:int|long|size_t|unsigned)\s+([A-Za-z_]\w*)\s*=\s*([^;]+);", code):
            v = evaluate(m.group(2) or m.group(4), consts)
            if v is not None:
                consts[m.group(1) or m.group(3)] = v
        for m in _CONSTANT.finditer(code):
            if re.search(r"\bextern\s*$", code[max(0, m.start() - 20):m.start()]):
                continue
            type_text = m.group(2).replace("const ", "").strip()
            dtype, lanes = classify(" ".join(type_text.replace("std::", "").split()))
            count: int | None = None
            dims = re.findall(r"\[([^\[\]]+)\]", m.group(4))
            if dims:
                count = 1
                for d in dims:
                    v = evaluate(d, consts)
                    if v is None:
                        count = None
                        break
                    count *= v
                if count is None:
                    continue
            if lanes > 1 and dtype is not None:
                count = (count or 1) * lanes
            out.setdefault(m.group(3), DeviceVariable(m.group(3), m.group(1), type_text, dtype, count))
    return tuple(out.values())


def _param_text(p: KernelParam) -> str:
    return f"{p.type_text} {p.name}".strip()


def _checked(plan: LaunchPlan, entries: dict[str, tuple[EntryParam, ...]], symbol: str) -> LaunchPlan:
    """`plan` with the PTX sizes of kernel `symbol` attached, unknown value types filled from them,
    and a note for every disagreement between the source and the PTX."""
    ptx = entries.get(symbol, ())
    notes = list(plan.notes)
    params = list(plan.params)
    if len(ptx) != len(params):
        notes.append(f"the source shows {len(params)} parameters but the PTX entry has {len(ptx)}: "
                     "check the arguments against the kernel")
    for i, (p, e) in enumerate(zip(params, ptx)):
        if not p.pointer and p.dtype is None and e.type in _PTX_SCALAR and e.size == ITEMSIZE[_PTX_SCALAR[e.type]]:
            params[i] = replace(p, dtype=_PTX_SCALAR[e.type])
            continue
        expected = params[i].value_bytes
        if expected is not None and expected != e.size:
            notes.append(f"parameter {i} ({_param_text(p)}) takes {e.size} bytes in the PTX, not {expected}")
    return replace(plan, params=tuple(params), ptx_sizes=tuple(e.size for e in ptx), notes=tuple(notes))


# --------------------------------------------------------------------------- code generation


def _np(dtype: str) -> str:
    return "np.uint16" if dtype == "bfloat16" else f"np.{dtype}"


def _identifier(name: str, index: int, taken: set[str]) -> str:
    base = name or f"arg{index}"
    if keyword.iskeyword(base) or base in _RESERVED_NAMES or not base.isidentifier():
        base = f"{base}_" if base.isidentifier() else f"arg{index}"
    out, k = base, 2
    while out in taken:
        out, k = f"{base}{k}", k + 1
    taken.add(out)
    return out


def _shape(p: KernelParam) -> str:
    return "size" if p.lanes == 1 else f"(size, {p.lanes})"


def _buffer(p: KernelParam) -> tuple[str, str]:
    """(expression making the device buffer, comment) for a pointer parameter."""
    what = _param_text(p)
    if p.indirection > 1:
        return ("dev.zeros(size, np.uint64)",
                f"{what}: an array of device pointers; fill it with buffer addresses before launching")
    if p.dtype is None:
        return ("dev.zeros(size * 16, np.uint8)",
                f"{what}: element type {p.base!r} unknown to tuiprof init, 16 bytes per element assumed; "
                "give it its real dtype")
    shape = _shape(p)
    if not p.const:
        note = " (bfloat16 bits)" if p.dtype == "bfloat16" else ""
        return f"dev.zeros({shape}, {_np(p.dtype)})", f"{what}: written by the kernel (starts at zero){note}"
    if p.dtype == "float32" or p.dtype == "float64":
        return f"dev.to_device(rng.random({shape}, dtype={_np(p.dtype)}))", f"{what}: input, random in [0, 1)"
    if p.dtype == "float16":
        return (f"dev.to_device(rng.random({shape}, dtype=np.float32).astype(np.float16))",
                f"{what}: input, random in [0, 1)")
    if p.dtype == "bfloat16":
        return (f"dev.to_device((rng.random({shape}, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16))",
                f"{what}: input, random bfloat16 bits (NumPy has no bfloat16)")
    return (f"dev.to_device(np.zeros({shape}, dtype={_np(p.dtype)}))",
            f"{what}: input; zeros keep index arrays in bounds, fill in your data")


def _scalar(p: KernelParam, ptx_size: int | None, texture_dims: int = 2) -> tuple[str, str]:
    """(expression, comment) for a by-value parameter."""
    what = _param_text(p)
    if p.base == "cudaTextureObject_t":
        shape = {1: "(4 * n,)", 2: "(64, 64)", 3: "(16, 16, 16)"}[texture_dims]
        return (f"dev.texture(rng.random({shape}, dtype=np.float32), filter='point', address_mode='clamp')",
                f"{what}: a texture of random floats, point-sampled and clamped at its edges (adapt its data, "
                "filter='linear', address_mode='wrap'|'mirror'|'border', normalized=True)")
    if p.dtype is None:
        size = ptx_size or 8
        return f"np.void(bytes({size}))", f"{what}: {size} zero bytes stand in; build it with a structured dtype"
    if p.lanes > 1:
        return (f"np.void(np.ones({p.lanes}, dtype={_np(p.dtype) if p.dtype != 'bfloat16' else 'np.uint16'}).tobytes())",
                f"{what}: a vector passed by value, as its bytes")
    if p.dtype == "bfloat16":
        return "np.uint16(0x3F80)", f"{what}: 1.0 as bfloat16 bits"
    if p.dtype in _FLOATS:
        return f"{_np(p.dtype)}(1.0)", what
    if p.dtype == "bool_":
        return "np.bool_(True)", what
    if p.dtype in _SMALL_INTS:
        return f"{_np(p.dtype)}(1)", what
    return f"{_np(p.dtype)}(n)", f"{what}: the problem size"


def _geometry(plan: LaunchPlan) -> list[str]:
    """The lines setting n, block, grid and size for a 1-, 2- or 3-D kernel: the block and the
    elements each CTA covers from the code (`tuiprof.toolchain.geometry`), the grid covering n (or n x
    n...) elements, and the arrays sized from it."""
    geo = plan.geometry or launch_geometry("", "", plan.dims, {}, plan.max_threads)
    ints = sum(1 for p in plan.params if not p.pointer and p.dtype is not None and p.dtype not in _FLOATS
               and p.dtype != "bool_" and p.dtype not in _SMALL_INTS and p.lanes == 1)
    square = plan.dims == 1 and ints >= 2  # sizes like rows x cols: indices reach n * n
    n = {1: 256 if square else 4096, 2: 128, 3: 32}[plan.dims]
    power = plan.dims + (1 if square else 0)
    room = 16 if plan.wide else 2
    why = {1: "threads per CTA", 2: "threads per CTA", 3: "threads per CTA"}[plan.dims]
    reasons = []
    if plan.max_threads:
        reasons.append(f"__launch_bounds__({plan.max_threads})")
    block_note = f"{why}{' within ' + reasons[0] if reasons else ''}, as the code indexes them (adapt)"
    axes = range(plan.dims)
    cover = geo.per_cta
    grid = ", ".join([f"(n + {cover[k] - 1}) // {cover[k]}" if cover[k] > 1 else "n" for k in axes]
                     + ["1"] * (3 - plan.dims))
    per = " x ".join(str(cover[k]) for k in axes)
    what = {1: "n elements", 2: "an n x n grid of elements", 3: "an n x n x n grid of elements"}[plan.dims]
    size = " * ".join(["n"] * power)
    return [f"n = {n}  # problem size ({what}): every integer parameter gets it (adapt)",
            f"block = {geo.block}  # {block_note}",
            f"grid = ({grid})  # CTAs: each covers {per} elements, as the code indexes them (adapt)",
            f"size = {room} * {size}  # elements per array: the grid's elements with room for reads past them"
            + (" and 16-byte vector loads" if plan.wide else "") + " (adapt)"]


def _function_name(plan: LaunchPlan, taken: set[str]) -> str:
    from tuiprof.toolchain.program import base_name

    stem = "".join(c if c.isalnum() or c == "_" else "_" for c in base_name(plan.title)) or "kernel"
    name, k = f"launch_{stem}", 2
    while name in taken:
        name, k = f"launch_{stem}_{k}", k + 1
    taken.add(name)
    return name


def _launch_function(plan: LaunchPlan, fname: str) -> list[str]:
    body = [f"def {fname}(dev):", f'    """{_docstring_safe(plan.title)} ({plan.where})."""']
    body += [f"    # note: {n}" for n in plan.notes]
    body += ["    " + line for line in _geometry(plan)]
    taken: set[str] = set()
    args: list[tuple[str, str]] = []
    for i, p in enumerate(plan.params):
        ptx_size = plan.ptx_sizes[i] if plan.ptx_sizes is not None and i < len(plan.ptx_sizes) else None
        if p.pointer:
            var = _identifier(p.name, i, taken)
            expr, comment = _buffer(p)
            body.append(f"    {var} = {expr}  # {comment}")
            args.append((var, _param_text(p)))
        else:
            expr, comment = _scalar(p, ptx_size, plan.texture_dims)
            args.append((expr, comment))
    launch_extra = ""
    if plan.dynamic_shared is not None:
        dtype, lanes = classify(plan.dynamic_shared)
        item = (ITEMSIZE[dtype] * lanes) if dtype is not None else 4
        per_thread = max(SHARED_PER_THREAD, 4 * item)
        body.append(f"    shared = {per_thread} * block[0] * block[1] * block[2]  # dynamic shared memory in bytes: "
                    f"{per_thread} per thread, room for the kernel's {plan.dynamic_shared} array and what it casts it to "
                    "(adapt to what the kernel indexes)")
        launch_extra = ", shared=shared"
    body.append(f"    dev.launch({plan.launch_name!r}, grid, block, (")
    for expr, comment in args:
        body.append(f"        {expr},  # {comment}")
    body.append(f"    ){launch_extra})")
    return body


def _docstring_safe(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"""', "'''")


def launch_script(source_name: str, plans: Sequence[LaunchPlan], notes: Sequence[str], compiled_by: str | None,
                  arch: str | None = None, variables: Sequence[DeviceVariable] = ()) -> str:
    """The text of the launch script for `plans` (see `plan_launches`); `arch` its ``ARCH``;
    `variables` the ``__constant__`` and ``__device__`` variables it sets first."""
    from tuiprof import __version__

    how = (f"kernel signatures read from the source and checked against the PTX ({compiled_by})"
           if compiled_by else "kernel signatures read from the source only (no CUDA compiler was found, "
                               "so nothing was checked against the PTX and C++ kernels are named unmangled)")
    lines = [
        f'"""Launch script for {_docstring_safe(source_name)}, written by `tuiprof init` (tuiprof {__version__}).',
        "",
        "tuiprof calls setup(dev): it builds the inputs with NumPy and launches the kernels through dev",
        "(to_device, zeros, launch, from_device, set_symbol, texture). Every launch runs; the first is profiled unless",
        "--kernel NAME or --launch-index K picks another. The sizes, grids, blocks and input values below",
        "are small placeholders that run as written: adapt them to your problem (lines marked 'adapt').",
        f"Written from {how}.",
        '"""',
        "",
        "import numpy as np",
        "",
        "rng = np.random.default_rng(0)  # fixed seed: the same inputs, hence the same trace, on every run",
    ]
    if arch and not arch.endswith(".toml"):
        lines += [f"ARCH = {arch!r}  # the GPU model profiled (and compiled for) unless --arch names another"]
    if notes:
        lines += ["", *(f"# note: {n}" for n in notes)]
    taken: set[str] = {"setup"}
    names = [_function_name(p, taken) for p in plans]
    lines += ["", "", "def setup(dev):", '    """Launch every kernel of the file once (delete the launches you do not need)."""']
    if variables:
        lines += ["    # the file's __constant__ and __device__ variables (cudaMemcpyToSymbol): give them your values (adapt)"]
        lines += [f"    {_set_symbol(v)}" for v in variables]
    lines += [f"    {name}(dev)" for name in names] or ["    pass  # no kernel to launch: see the notes above"]
    for plan, name in zip(plans, names):
        lines += ["", ""] + _launch_function(plan, name)
    return "\n".join(lines) + "\n"


def _set_symbol(v: DeviceVariable) -> str:
    """The ``dev.set_symbol`` line of one variable: random floats, ones for a float scalar, zeros
    for integers (in bounds as indices), raw zero bytes for a type tuiprof init does not know."""
    what = f"{v.qualifier} {v.type_text} {v.name}{f'[{v.count}]' if v.count is not None else ''}"
    if v.dtype is None:
        return f"# dev.set_symbol({v.name!r}, ...)  # {what}: a type tuiprof init does not know; set its bytes"
    dt = "np.uint16" if v.dtype == "bfloat16" else f"np.{v.dtype}"
    if v.count is None:
        value = f"{dt}(1.0)" if v.dtype in _FLOATS and v.dtype != "bfloat16" else f"{dt}(0)"
    elif v.dtype in ("float32", "float64"):
        value = f"rng.random({v.count}, dtype={dt})"
    elif v.dtype == "float16":
        value = f"rng.random({v.count}, dtype=np.float32).astype(np.float16)"
    else:
        value = f"np.zeros({v.count}, {dt})"
    return f"dev.set_symbol({v.name!r}, {value})  # {what}"


def write_launch_script(kernel: str | os.PathLike[str], output: str | os.PathLike[str] | None = None, *,
                        force: bool = False, flags: Sequence[str] = (), compiler: str = "auto",
                        arch: str | None = None) -> Path:
    """Write the starting launch script of the CUDA file `kernel` to `output` (default
    ``<stem>_launch.py`` beside it), atomically, refusing to overwrite unless `force`. The file is
    compiled to check the signatures, for the GPU model `arch` (a preset; default the one `tuiprof
    report` profiles for, so that both read the same PTX), which the script then names as its
    ``ARCH`` when given; with no compiler at all, the source alone is used."""
    from tuiprof.arch.presets import load_arch
    from tuiprof.collect.options import DEFAULT_CU_ARCH
    from tuiprof.toolchain.compile import build_program
    from tuiprof.toolchain.headers import read_text

    source = Path(kernel).expanduser()
    target = Path(output).expanduser() if output is not None else source.with_name(f"{source.stem}_launch.py")
    if os.path.lexists(target) and not force:
        raise OutputError(f"{shown(target)} already exists", "use --force to overwrite it, or -o to write elsewhere")
    check_output(os.fspath(target), [source])  # the rules of every output, before the compile
    program: Program | None
    try:
        cc = load_arch(arch or DEFAULT_CU_ARCH).cc
        program = build_program(source, compute_capability=cc, flags=flags, compiler=compiler)
    except BuildError as exc:
        if not exc.message.startswith("no CUDA compiler found"):
            raise
        program = None
    if program is not None:
        text = program.source.text
        headers = tuple((Path(h.path).name, h.text) for h in program.headers)
    else:
        text = read_text(source)
        headers = ()
    plans, notes = plan_launches(source.name, text, program, headers)
    if not plans:
        raise BuildError(f"found no kernel to launch in {source.name}" + ("".join(f"\n  {n}" for n in notes)),
                         "a kernel is a `__global__ void name(...)` function definition")
    variables = device_variables([text, *(t for _, t in headers)])
    script = launch_script(source.name, plans, notes, program.compiler if program is not None else None, arch,
                           variables)
    data = script.encode("utf-8")
    write_bytes_to(os.fspath(target), lambda fh: fh.write(data), protect=[source])
    return target
