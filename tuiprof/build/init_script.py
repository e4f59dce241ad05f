"""``tuiprof init kernel.cu``: a starting launch script written from the kernels' signatures.

The script defines ``setup(dev)``, which builds inputs with NumPy and launches every kernel of
the file once through the launch-script API (``dev.to_device``, ``dev.zeros``, ``dev.launch``;
see the emulator's ``EmuDevice``). It runs as written: sizes are small, every pointer parameter
gets an array of its element's dtype (``float*`` -> float32, ``double*`` -> float64, ``int*`` ->
int32, ``half*`` -> float16, ``float4*`` -> float32 with 4 lanes...), inputs (``const``
pointees) get random floats or zero integers (zeros keep index arrays in bounds), outputs get
zeros, and comments say what to adapt.

Signatures come from the source text (`signature.kernel_signatures`) and are checked against
the compiled PTX's ``.entry`` parameter lists, which also give the exact kernel symbol to launch
(C++ kernels are mangled) and the instantiations of template kernels.
"""

from __future__ import annotations

import keyword
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from tuiprof.build.program import Program
from tuiprof.build.signature import (ITEMSIZE, EntryParam, KernelParam, KernelSignature, classify,
                                     demangled_params, entry_params, kernel_signatures, strip_comments,
                                     type_aliases)
from tuiprof.errors import BuildError, OutputError
from tuiprof.output import write_bytes_to


_RESERVED_NAMES = {"dev", "np", "rng", "n", "size", "block", "grid", "shared", "setup"}
_PTX_SCALAR = {"f32": "float32", "f64": "float64", "f16": "float16", "u8": "uint8", "s8": "int8",
               "b8": "uint8", "u16": "uint16", "s16": "int16", "b16": "uint16", "u32": "uint32",
               "s32": "int32", "b32": "uint32", "u64": "uint64", "s64": "int64", "b64": "uint64"}
_SMALL_INTS = {"int8", "uint8", "int16", "uint16"}
_FLOATS = {"float32", "float64", "float16", "bfloat16"}


@dataclass(frozen=True)
class LaunchPlan:
    """What the script does for one kernel: the symbol to launch and the arguments to build."""

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


def plan_launches(source_name: str, text: str, program: Program | None,
                  headers: Sequence[tuple[str, str]] = ()) -> tuple[tuple[LaunchPlan, ...], tuple[str, ...]]:
    """(one plan per launchable kernel, notes on what was left out), for the source `text` named
    `source_name`, its local `headers` as (name, text), and its compiled `program` (None when no
    compiler was available: then names are not checked and C++ kernels are named unmangled)."""
    signatures: list[tuple[str, KernelSignature, dict[str, str]]] = []
    for name, body in ((source_name, text), *headers):
        aliases = type_aliases(strip_comments(body))
        signatures += [(name, sig, aliases) for sig in kernel_signatures(body)]
    entries = entry_params(program.ptx) if program is not None else {}
    kernels = program.kernels if program is not None else ()
    used: set[str] = set()
    plans: list[LaunchPlan] = []
    notes: list[str] = []
    for file_name, sig, aliases in signatures:
        where = f"{file_name} line {sig.line}"
        title = f"{sig.name}({', '.join(_param_text(p) for p in sig.params)})"
        if program is None:
            if sig.template:
                notes.append(f"{sig.name} ({where}) is a template kernel: without a compiler tuiprof init "
                             "cannot see its instantiations; launch one by its PTX name")
                continue
            plans.append(LaunchPlan(sig.name, title, sig.params, None, where, sig.dims, sig.dynamic_shared,
                                    sig.max_threads))
            continue
        if sig.template:
            instances = [k for k in kernels if k.name.startswith("_Z") and k.base_name == sig.name
                         and k.name not in used]
            if not instances:
                notes.append(f"{sig.name} ({where}) is a template kernel with no instantiation in the PTX: "
                             f"instantiate it, e.g. `template __global__ void {sig.name}<float>(...);`")
                continue
            first = instances[0]
            params = demangled_params(first.demangled, aliases) or ()
            if len(params) == len(sig.params):
                params = tuple(replace(p, name=s.name) for p, s in zip(params, sig.params))
            extra = tuple(f"other instantiation: {k.name} = {k.demangled}" for k in instances[1:])
            used.update(k.name for k in instances)
            plans.append(_checked(LaunchPlan(first.name, first.demangled, params, None, where, sig.dims,
                                             sig.dynamic_shared, sig.max_threads, extra), entries))
            continue
        if sig.extern_c:
            match = sig.name if sig.name in entries else None
        else:
            match = next((k.name for k in kernels if k.name.startswith("_Z") and k.base_name == sig.name
                          and k.name not in used and len(entries.get(k.name, ())) == len(sig.params)), None)
        if match is None:
            notes.append(f"{sig.name} ({where}) is not in the compiled PTX (excluded by the preprocessor?); "
                         "no launch written for it")
            continue
        used.add(match)
        plans.append(_checked(LaunchPlan(match, title, sig.params, None, where, sig.dims, sig.dynamic_shared,
                                         sig.max_threads), entries))
    for k in kernels:
        if k.name not in used and k.name not in {p.launch_name for p in plans}:
            notes.append(f"{k.demangled} is in the PTX but tuiprof init could not read its definition "
                         f"(made by a macro?); launch it as {k.name!r} with arguments of these PTX types: "
                         + ", ".join(f"{e.type}[{e.size}]" for e in entries.get(k.name, ())))
    return tuple(plans), tuple(notes)


def _param_text(p: KernelParam) -> str:
    return f"{p.type_text} {p.name}".strip()


def _checked(plan: LaunchPlan, entries: dict[str, tuple[EntryParam, ...]]) -> LaunchPlan:
    """`plan` with the PTX sizes attached, unknown value types filled from them, and a note for
    every disagreement between the source and the PTX."""
    ptx = entries.get(plan.launch_name, ())
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


def _scalar(p: KernelParam, ptx_size: int | None) -> tuple[str, str]:
    """(expression, comment) for a by-value parameter."""
    what = _param_text(p)
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
    """The lines setting n, size, block and grid for a 1-, 2- or 3-D kernel."""
    limit = plan.max_threads or 1024
    if plan.dims == 1:
        bx = min(256, limit)
        return ["n = 4096  # problem size: every integer parameter gets it (adapt)",
                "size = 2 * n  # elements per array: twice n, so reads a little past n stay in bounds (adapt)",
                f"block = ({bx}, 1, 1)  # threads per CTA (adapt)",
                "grid = ((n + block[0] - 1) // block[0], 1, 1)  # CTAs: one thread per element (adapt)"]
    if plan.dims == 2:
        bx, by = (16, 16) if limit >= 256 else (16, max(1, limit // 16)) if limit >= 16 else (limit, 1)
        return ["n = 128  # problem size (an n x n grid of elements): every integer parameter gets it (adapt)",
                "size = 2 * n * n  # elements per array, with room to spare (adapt)",
                f"block = ({bx}, {by}, 1)  # threads per CTA (adapt)",
                "grid = ((n + block[0] - 1) // block[0], (n + block[1] - 1) // block[1], 1)  # CTAs (adapt)"]
    bx, by, bz = (8, 8, 4) if limit >= 256 else (8, 8, max(1, limit // 64)) if limit >= 64 else (limit, 1, 1)
    return ["n = 32  # problem size (an n x n x n grid of elements): every integer parameter gets it (adapt)",
            "size = 2 * n * n * n  # elements per array, with room to spare (adapt)",
            f"block = ({bx}, {by}, {bz})  # threads per CTA (adapt)",
            "grid = ((n + block[0] - 1) // block[0], (n + block[1] - 1) // block[1], "
            "(n + block[2] - 1) // block[2])  # CTAs (adapt)"]


def _function_name(plan: LaunchPlan, taken: set[str]) -> str:
    from tuiprof.build.program import base_name

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
            expr, comment = _scalar(p, ptx_size)
            args.append((expr, comment))
    launch_extra = ""
    if plan.dynamic_shared is not None:
        dtype, lanes = classify(plan.dynamic_shared)
        item = (ITEMSIZE[dtype] * lanes) if dtype is not None else 4
        body.append(f"    shared = 4 * block[0] * block[1] * block[2] * {item}  # dynamic shared memory in bytes: "
                    f"4 {plan.dynamic_shared} per thread (adapt to what the kernel indexes)")
        launch_extra = ", shared=shared"
    body.append(f"    dev.launch({plan.launch_name!r}, grid, block, (")
    for expr, comment in args:
        body.append(f"        {expr},  # {comment}")
    body.append(f"    ){launch_extra})")
    return body


def _docstring_safe(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"""', "'''")


def launch_script(source_name: str, plans: Sequence[LaunchPlan], notes: Sequence[str], compiled_by: str | None,
                  arch: str | None = None) -> str:
    """The text of the launch script for `plans` (see `plan_launches`); `arch` its ``ARCH``."""
    from tuiprof import __version__

    how = (f"kernel signatures read from the source and checked against the PTX ({compiled_by})"
           if compiled_by else "kernel signatures read from the source only (no CUDA compiler was found, "
                               "so nothing was checked against the PTX and C++ kernels are named unmangled)")
    lines = [
        f'"""Launch script for {_docstring_safe(source_name)}, written by `tuiprof init` (tuiprof {__version__}).',
        "",
        "tuiprof calls setup(dev): it builds the inputs with NumPy and launches the kernels through dev",
        "(to_device, empty, zeros, launch, from_device). Every launch runs; the first is profiled unless",
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
    lines += [f"    {name}(dev)" for name in names] or ["    pass  # no kernel to launch: see the notes above"]
    for plan, name in zip(plans, names):
        lines += ["", ""] + _launch_function(plan, name)
    return "\n".join(lines) + "\n"


def write_launch_script(kernel: str | os.PathLike[str], output: str | os.PathLike[str] | None = None, *,
                        force: bool = False, flags: Sequence[str] = (), compiler: str = "auto",
                        arch: str | None = None) -> Path:
    """Write the starting launch script of the CUDA file `kernel` to `output` (default
    ``<stem>_launch.py`` beside it), atomically, refusing to overwrite unless `force`. The file is
    compiled to check the signatures, for the GPU model `arch` (a preset; default the one `tuiprof
    report` profiles for, so that both read the same PTX), which the script then names as its
    ``ARCH`` when given; with no compiler at all, the source alone is used."""
    from tuiprof.arch.presets import load_arch
    from tuiprof.build.compile import build_program
    from tuiprof.build.headers import read_text
    from tuiprof.collect.options import DEFAULT_CU_ARCH

    source = Path(kernel).expanduser()
    target = Path(output).expanduser() if output is not None else source.with_name(f"{source.stem}_launch.py")
    if target.exists() and not force:
        raise OutputError(f"{target} already exists", "use --force to overwrite it, or -o to write elsewhere")
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
        try:
            text = read_text(source)
        except OSError as exc:
            raise BuildError(f"cannot read {source}: {exc.strerror}", "check the path of the .cu file") from None
        headers = ()
    plans, notes = plan_launches(source.name, text, program, headers)
    if not plans:
        raise BuildError(f"found no kernel to launch in {source.name}" + ("".join(f"\n  {n}" for n in notes)),
                         "a kernel is a `__global__ void name(...)` function definition")
    script = launch_script(source.name, plans, notes, program.compiler if program is not None else None, arch)
    data = script.encode("utf-8")
    write_bytes_to(os.fspath(target), lambda fh: fh.write(data), protect=[source])
    return target
