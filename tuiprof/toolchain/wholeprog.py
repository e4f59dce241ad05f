"""Instrumented whole programs: nvcc's own build, replayed with probes put into the PTX.

``nvcc -dryrun -keep -keep-dir D ARGS`` prints every step nvcc would run (``#$`` lines: the
environment, then host preprocessing, cudafe++, cicc, ptxas, fatbinary, the host compile, nvlink
and the final link). `build_instrumented` runs those steps itself, and right after each ``cicc``
step (which writes ``D/<name>.ptx``) instruments that PTX in place (`tuiprof.ptx.instrument`,
one module tag per cicc step), so that ptxas and the fatbinary's embedded JIT PTX both take the
instrumented module. The final host link gets the host runtime (``collect/gpu/runtime/tuiprof_rt.cpp``,
compiled on first use and cached) and ``-Wl,--wrap`` for the three launch entry points. The build
leaves beside the binary a folder ``<binary>.tuiprof/`` with ``meta.json`` (per module: tag, the
source it came from, its site table, kernels and their uninstrumented resources) and each
module's original PTX (for the StaticOp table and the source mapping).

The output follows the rules of every file tuiprof writes (`tuiprof.output`), checked before
nvcc runs: ``-o`` never names an input (a source or object on the command line), a read-only
file, a directory, a device or a FIFO (a program must be a regular file), nor a folder that does
not exist or cannot be written; ``<binary>.tuiprof`` must be absent or tuiprof's own metadata
folder (a file, a symlink or a foreign folder there is refused, never removed). The build runs
in a hidden staging folder beside the binary (``.tuiprof-build-<pid>-*``), and the binary and its
metadata are renamed into place only once everything succeeded: a failed or interrupted build
leaves the old ones as they were and nothing else behind.

What this does not do (yet), said in the README: ``-c``/``-ptx``/``-cubin`` builds (nothing to
link the runtime into), NVRTC-only machines (a toolkit's nvcc is needed), launches through
``cudaLaunchKernelEx``/CUDA graphs/driver-API modules (not wrapped). Device functions called
across translation units with ``-rdc`` are recorded with their own module's tag, and
`linked_module` gives the StaticOp table that covers them.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tuiprof.arch import load_arch
from tuiprof.arch.calibrate import base_preset
from tuiprof.arch.occupancy import next_register_cap, register_cap
from tuiprof.errors import BuildError, OutputError
from tuiprof.files import FileRole, read_regular
from tuiprof.ptx.instrument import Site, instrument_capped
from tuiprof.ptx.module import Module, PtxError, SourceLoc
from tuiprof.resources import user_cache_dir
from tuiprof.toolchain.child import ChildResult, limit_words, run_bounded, temp_folder
from tuiprof.toolchain.compilers import parse_ptxas_report
from tuiprof.toolchain.locate import find_nvcc
from tuiprof.toolchain.program import KernelResources

WRAP_FLAGS = ("-Wl,--wrap=__cudaLaunchKernel", "-Wl,--wrap=__cudaLaunchKernel_ptsz", "-Wl,--wrap=cudaLaunchKernel")
"""Linker flags that route every kernel launch through the host runtime."""
RUNTIME_SOURCE = Path(__file__).resolve().parent.parent / "collect" / "gpu" / "runtime" / "tuiprof_rt.cpp"
META_VERSION = 1
NOT_LINKING = {"-c": "compiles without linking", "--compile": "compiles without linking",
               "-ptx": "stops at PTX", "--ptx": "stops at PTX", "-cubin": "stops at a cubin",
               "--cubin": "stops at a cubin", "-fatbin": "stops at a fatbinary", "--fatbin": "stops at a fatbinary",
               "-E": "only preprocesses", "--preprocess": "only preprocesses", "-dryrun": "runs nothing",
               "--dryrun": "runs nothing", "-lib": "builds a library", "--lib": "builds a library",
               "-dlink": "only device-links", "--device-link": "only device-links"}
DEFAULT_TIMEOUT = 900.0


@dataclass(frozen=True)
class Step:
    """One ``#$`` line of ``nvcc -dryrun``: a shell command, the PTX it writes when it is a cicc
    step, whether it is the final host link."""

    command: str
    ptx: str | None = None
    source: str | None = None
    final_link: bool = False


@dataclass(frozen=True)
class Dryrun:
    """nvcc's plan: its environment assignments and its steps, in order."""

    environment: tuple[tuple[str, str], ...]
    steps: tuple[Step, ...]


_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_CICC_OUT = re.compile(r"cicc\"?\s.*\s-o\s+\"([^\"]+\.ptx)\"\s*$")
_ORIG_SRC = re.compile(r"--orig_src_path_name\s+\"([^\"]+)\"")
_LINKER = re.compile(r"^\"?\S*(g\+\+|gcc|clang\+\+|clang|c\+\+|cl(?:\.exe)?)\"?\s")


def parse_dryrun(text: str) -> Dryrun:
    """The ``#$`` lines of nvcc's -dryrun output as environment assignments and steps; the last
    compiler-driver line that is not a compile (``-c``/``-E``) is the final host link."""
    env: list[tuple[str, str]] = []
    steps: list[Step] = []
    for raw in text.splitlines():
        if not raw.startswith("#$ "):
            continue
        line = raw[3:].strip()
        m = _ASSIGN.match(line)
        if m and not line.startswith(("\"", "'")) and " " not in m.group(1):
            env.append((m.group(1), m.group(2)))
            continue
        ptx = _CICC_OUT.search(line)
        src = _ORIG_SRC.search(line)
        steps.append(Step(line, ptx.group(1) if ptx else None, src.group(1) if (ptx and src) else None))
    for i in range(len(steps) - 1, -1, -1):
        s = steps[i].command
        if _LINKER.match(s) and " -c " not in f" {s} " and " -E " not in f" {s} ":
            steps[i] = Step(s, final_link=True)
            break
    return Dryrun(tuple(env), tuple(steps))


def _script_prefix(dry: Dryrun) -> str:
    """Shell lines that recreate nvcc's environment. Its printed values are already expanded and
    not always valid shell (``SYSTEM_INCLUDES="-isystem" "/path"``), so each is one quoted word."""
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in dry.environment)


# --------------------------------------------------------------------------- the host runtime


def runtime_object(cxx: str = "g++", include_dirs: Sequence[str] = (), timeout: float = 300.0) -> Path:
    """The host runtime compiled to an object file, cached per source, compiler and include folders
    in the user cache (compiled on first use)."""
    source = RUNTIME_SOURCE.read_bytes()
    compiler = shutil.which(cxx) or cxx
    key = hashlib.sha256(source + b"\0" + compiler.encode() + b"\0" + "\0".join(include_dirs).encode()).hexdigest()[:20]
    folder = user_cache_dir() / "runtime"
    obj = folder / f"tuiprof_rt-{key}.o"
    if obj.is_file():
        return obj
    folder.mkdir(parents=True, exist_ok=True)
    with temp_folder(folder, ".rt-") as tmp:
        out = tmp / "rt.o"
        cmd = [compiler, "-std=c++17", "-O2", "-fPIC", "-c", str(RUNTIME_SOURCE), "-o", str(out),
               *(f"-I{d}" for d in include_dirs)]
        r = _run(cmd, tmp, timeout, f"{cxx} on tuiprof's host runtime", tmp)
        if r.returncode != 0:
            raise BuildError(f"tuiprof's host runtime does not compile with {cxx}:\n{(r.stdout + r.stderr)[-2000:]}",
                             "check the CUDA toolkit's headers (cuda.h, cuda_runtime.h) are installed")
        os.replace(out, obj)
    return obj


def _include_dirs(dry: Dryrun) -> list[str]:
    """The CUDA include folders nvcc passes (``-I...``/``-isystem ...`` of its INCLUDES)."""
    out: list[str] = []
    for name, value in dry.environment:
        if name in ("INCLUDES", "SYSTEM_INCLUDES"):
            words = shlex.split(value)
            for i, w in enumerate(words):
                if w.startswith("-I") and len(w) > 2:
                    out.append(w[2:])
                elif w == "-isystem" and i + 1 < len(words):
                    out.append(words[i + 1])
    return out


def _host_compiler(dry: Dryrun) -> str:
    link = next((s.command for s in dry.steps if s.final_link), "")
    word = shlex.split(link)[0] if link else "g++"
    return "g++" if word.endswith("gcc") else word


# --------------------------------------------------------------------------- the build


@dataclass(frozen=True)
class ModuleMeta:
    """One instrumented PTX module of a whole program."""

    tag: int
    source: str
    """The .cu file it was compiled from (absolute)."""
    ptx: str
    """File name (in the program's metadata folder) of its original, uninstrumented PTX."""
    target: str
    sites: tuple[Site, ...]
    kernels: tuple[str, ...]
    resources: dict[str, KernelResources]
    probe_registers: dict[str, int] = dataclasses.field(default_factory=dict)
    """Registers per thread of each instrumented kernel (``ptxas -v`` of the built PTX)."""
    plain_kernels: tuple[str, ...] = ()
    """Every kernel of the module, probed or not (library kernels are probed only when chosen)."""


@dataclass(frozen=True)
class WholeProgram:
    """An instrumented binary and what tuiprof needs to decode its records."""

    binary: Path
    folder: Path
    modules: tuple[ModuleMeta, ...]
    nvcc_args: tuple[str, ...]

    def module_with(self, kernel: str) -> ModuleMeta:
        """The module defining `kernel` (a PTX symbol); the first when several archs define it."""
        for m in self.modules:
            if kernel in m.kernels:
                return m
        raise BuildError(f"no instrumented module defines kernel {kernel}",
                         "the kernel comes from a library tuiprof did not compile; profile one of the program's own")

    def module_by_tag(self, tag: int) -> ModuleMeta:
        for m in self.modules:
            if m.tag == tag:
                return m
        raise BuildError(f"no module with tag {tag} in {self.folder}", "rebuild the program with `tuiprof build`")

    def ptx_text(self, module: ModuleMeta) -> str:
        return (self.folder / module.ptx).read_text()

    @property
    def kernels(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for m in self.modules:
            for k in m.kernels:
                seen.setdefault(k, None)
        return tuple(seen)


_COMMENT_OR_LITERAL = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_MAIN_DEFINITION = re.compile(r"(?<![\w.:>])main\s*\([^;{}()]*\)\s*(?:->\s*[\w:]+\s*)?\{")


def defines_main(source_text: str) -> bool:
    """Whether a CUDA source defines ``main`` (a body follows ``main(...)``; comments and string
    literals ignored): such a file is a whole program, built and run as it is; a file without one
    is a kernel file, run by a launch script."""
    return _MAIN_DEFINITION.search(_COMMENT_OR_LITERAL.sub(" ", source_text)) is not None


def check_args(args: Sequence[str]) -> None:
    """Refuse nvcc arguments that do not make a linked program (one clear message each)."""
    for a in args:
        if a in NOT_LINKING:
            raise BuildError(f"nvcc {a} {NOT_LINKING[a]}; tuiprof needs a linked program to run",
                             "give the nvcc command line that builds the executable (sources and -o)")
    if not any(a.endswith((".cu", ".o", ".obj", ".a", ".cpp", ".cc", ".cxx")) for a in args):
        raise BuildError("no source file on the nvcc command line", "for example: tuiprof build app.cu -o app.instr")


def _output_of(args: list[str]) -> tuple[list[str], Path | None]:
    """The nvcc arguments without -o, and the -o path (None when absent)."""
    out: Path | None = None
    rest: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-o", "--output-file") and i + 1 < len(args):
            out = Path(args[i + 1])
            i += 2
            continue
        if a.startswith("--output-file="):
            out = Path(a.split("=", 1)[1])
        elif a.startswith("-o") and len(a) > 2 and not a.startswith("-opt"):
            out = Path(a[2:])
        else:
            rest.append(a)
        i += 1
    return rest, out


PROGRESS_AFTER = 2.0
"""Seconds a build runs before its steps are said on stderr."""


class _Progress:
    """Says each step of a build on stderr once it has run `PROGRESS_AFTER` seconds."""

    def __init__(self, total: int) -> None:
        import time

        self.clock = time.monotonic
        self.start = self.clock()
        self.total = total
        self.done = 0

    def step(self, what: str) -> None:
        from tuiprof.output import note

        self.done += 1
        if self.clock() - self.start >= PROGRESS_AFTER:
            note(f"tuiprof build: step {self.done}/{self.total} ({self.clock() - self.start:.0f} s): {what}")


def build_instrumented(args: Sequence[str], output: str | os.PathLike[str] | None = None, *,
                       cwd: str | os.PathLike[str] | None = None, nvcc: str | None = None,
                       timeout: float = DEFAULT_TIMEOUT, kernels: Sequence[str] = ()) -> WholeProgram:
    """Build the program nvcc `args` describe (sources, flags, optionally ``-o``), instrumented;
    `output` overrides ``-o`` (default ``a.out`` as nvcc's). ``-lineinfo`` is added when missing.
    `kernels` (C++ names as written, `tuiprof.toolchain.names`) limits the probes to those kernels and
    the functions they call (a program's other kernels, Thrust's and CUB's, run as they are).
    Steps are said on stderr once the build has run two seconds. The output is checked first and
    renamed into place last (module docstring). Raises BuildError naming the failing step with its
    output, OutputError for an output it refuses."""
    args = list(args)
    check_args(args)
    rest, out = _output_of(args)
    workdir = Path(cwd) if cwd is not None else Path.cwd()
    named = Path(output) if output is not None else (out or Path("a.out"))
    named = named if named.is_absolute() else workdir / named
    binary = check_program_output(named, _inputs(rest, workdir))
    folder = binary.with_name(binary.name + ".tuiprof")
    if "-lineinfo" not in rest and "--generate-line-info" not in rest and "-G" not in rest:
        rest.append("-lineinfo")
    nvcc_path = nvcc or (str(find_nvcc()) if find_nvcc() else None)
    if nvcc_path is None:
        raise BuildError("whole programs need nvcc (a CUDA toolkit), and none was found",
                         "install the CUDA toolkit, or set CUDA_HOME; kernel files with a launch script work with NVRTC")
    with temp_folder(binary.parent, STAGE_PREFIX) as stage:
        staged = stage / binary.name
        meta_folder = stage / folder.name
        keep = meta_folder / "build"
        keep.mkdir(parents=True)
        dry_cmd = [nvcc_path, "-dryrun", "-keep", "-keep-dir", str(keep), *rest, "-o", str(staged)]
        r = _run(dry_cmd, workdir, timeout, "nvcc -dryrun", stage)
        if r.returncode != 0:
            raise BuildError(f"nvcc refused the command line:\n{_tail(r.stdout + r.stderr)}", "fix the nvcc arguments")
        dry = parse_dryrun(r.stdout + "\n" + r.stderr)
        if not any(s.final_link for s in dry.steps):
            raise BuildError("nvcc's plan has no final link step", "give the command line that builds the executable")
        if not any(s.ptx for s in dry.steps):
            raise BuildError("nvcc's plan compiles no device code (no cicc step)",
                             "tuiprof instruments CUDA sources (.cu); the program has none")
        prefix = _script_prefix(dry)
        rt = runtime_object(_host_compiler(dry), _include_dirs(dry))

        reports: dict[tuple[str, str], dict[str, tuple[int, int, int]]] = {}

        def report(ptx: str, arch: str) -> dict[str, tuple[int, int, int]]:
            if (ptx, arch) not in reports:  # the last capped compile is the build's PTX
                reports[(ptx, arch)] = ptxas_report(ptx, arch, meta_folder, nvcc_path, workdir, timeout, stage)
            return reports[(ptx, arch)]

        modules: list[ModuleMeta] = []
        progress = _Progress(len(dry.steps))
        for step in dry.steps:
            command = step.command
            progress.step(_describe(command, step))
            if command.startswith("rm "):
                command = "rm -f " + command[3:]
            if step.final_link:
                command = f"{command} {shlex.quote(str(rt))} {' '.join(WRAP_FLAGS)}"
            res = _run(["bash", "-c", prefix + command], workdir, timeout, command.split()[0], stage)
            if res.returncode != 0:
                what = shlex.split(command)[0] if command else "?"
                output = res.stdout + res.stderr
                raise BuildError(f"the instrumented build failed at {os.path.basename(what.strip(chr(34)))}:\n"
                                 f"{_tail(output)}", _failure_hint(step, output))
            if step.ptx:
                modules.append(_instrument_file(Path(step.ptx) if Path(step.ptx).is_absolute() else workdir / step.ptx,
                                                len(modules), step.source or "", meta_folder, report, kernels))
        if kernels and not any(m.kernels for m in modules):
            raise BuildError(f"no kernel of the program is named {', '.join(kernels)}",
                             "give --kernel the name of one of its kernels (without --kernel, `tuiprof build` probes "
                             "the kernels of the program's own files)")
        left = sorted({k for m in modules for k in m.plain_kernels} - {k for m in modules for k in m.kernels})
        if left and not kernels:
            from tuiprof.output import note
            from tuiprof.toolchain.demangle import demangle

            note(f"tuiprof build: {len(left)} library kernel(s) (Thrust, CUB...) run without probes, e.g. "
                 f"{demangle(left[0])[:100]}; `tuiprof build --kernel NAME ...` probes one of them")
        meta = [_module_json(m) for m in modules]
        (meta_folder / "meta.json").write_text(json.dumps({"version": META_VERSION, "binary": binary.name,
                                                           "nvcc_args": rest, "modules": meta}, indent=1))
        shutil.rmtree(keep, ignore_errors=True)
        _put_in_place(staged, binary, meta_folder, folder, stage)
    return load_whole_program(binary)


STAGE_PREFIX = ".tuiprof-build-"
"""The hidden staging folder of a build, beside its binary (``.tuiprof-build-<pid>-*``)."""


def _inputs(args: Sequence[str], workdir: Path) -> list[Path]:
    """The files an nvcc command line reads (its words that name an existing file): ``-o`` must
    never name one of them."""
    out = []
    for a in args:
        for word in (a, a.split("=", 1)[-1]) if a.startswith("-") else (a,):
            p = Path(word) if Path(word).is_absolute() else workdir / word
            try:
                if word and p.is_file():
                    out.append(p)
            except (OSError, ValueError):
                continue
    return out


def check_program_output(binary: Path, inputs: Sequence[Path]) -> Path:
    """The real path the program will be written to, once `binary` passes the rules of
    `tuiprof.output.check_output` (never an input, a read-only file, a directory; its folder
    exists and is writable) and those of a program: a regular file (a device or a FIFO is
    refused: nvcc's linker would replace it), with no file, symlink or foreign folder at
    ``<binary>.tuiprof``. Raises OutputError."""
    from tuiprof.files import kind_of_file
    from tuiprof.output import check_output, shown

    st = check_output(os.fspath(binary), inputs)
    name = shown(binary)
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OutputError(f"{name} is {kind_of_file(st.st_mode)}; a program must be a regular file",
                          "give a file name for the binary with -o")
    real = Path(os.path.realpath(binary))
    folder = real.with_name(real.name + ".tuiprof")
    try:
        fst = os.lstat(folder)
    except FileNotFoundError:
        return real
    except OSError as exc:
        raise OutputError(f"cannot use {shown(folder)}: {(exc.strerror or str(exc)).lower()}",
                          "choose another output path") from None
    where = f"{shown(folder)}, where tuiprof keeps the program's metadata,"
    hint = "remove it or move it away, or choose another -o"
    if stat.S_ISLNK(fst.st_mode):
        raise OutputError(f"{where} is a symbolic link; tuiprof neither follows nor removes it", hint)
    if not stat.S_ISDIR(fst.st_mode):
        raise OutputError(f"{where} is {kind_of_file(fst.st_mode).replace('not a regular file', 'a file')}, "
                          "not its folder", hint)
    try:
        entries = set(os.listdir(folder))
    except OSError as exc:
        raise OutputError(f"cannot use {shown(folder)}: {(exc.strerror or str(exc)).lower()}", hint) from None
    if entries and "meta.json" not in entries:
        raise OutputError(f"{where} is a folder tuiprof did not make (it holds no meta.json); tuiprof does not "
                          "remove it", hint)
    return real


def _put_in_place(staged: Path, binary: Path, meta_folder: Path, folder: Path, stage: Path) -> None:
    """The built binary and its metadata folder renamed over the old ones (the old folder moved
    into the staging folder, which goes away)."""
    try:
        os.replace(staged, binary)
        if os.path.lexists(folder):
            os.replace(folder, stage / "old.tuiprof")
        os.replace(meta_folder, folder)
    except OSError as exc:
        raise OutputError(f"cannot put the program in place at {binary}: {(exc.strerror or str(exc)).lower()}",
                          "check the folder's permissions and free space") from None


def _failure_hint(step: Step, output: str) -> str:
    if step.final_link and re.search(r"undefined reference to [`']?main\b", output):
        return ("no source defines main(): a kernel file is profiled with a launch script instead "
                "(`tuiprof init KERNEL.cu` writes one, then `tuiprof KERNEL.cu`); `tuiprof build` is for programs")
    return "the same command line builds with plain nvcc? then please report it with the output"


def _describe(command: str, step: Step) -> str:
    """A step of nvcc's plan in a few words (``cicc app.cu``, ``ptxas``, ``link``)."""
    words = shlex.split(command) if command else ["?"]
    tool = os.path.basename(words[0].strip('"')) if words else "?"
    if step.ptx:
        return f"{tool} {os.path.basename(step.source or '')}, then tuiprof's probes"
    return "final link with tuiprof's runtime" if step.final_link else tool


def _instrument_file(ptx_path: Path, tag: int, source: str, folder: Path,
                     report: Callable[[str, str], dict[str, tuple[int, int, int]]],
                     kernels: Sequence[str] = ()) -> ModuleMeta:
    """Instrument one translation unit's PTX in place (the plain text kept in `folder`), its
    kernels capped at the registers that keep their plain occupancy where ptxas need not spill
    for it (`tuiprof.collect.gpu.device.instrument_for` on the GPU path); the plain kernels' resources
    (registers, shared and local memory: ``ptxas -v``) go into the metadata."""
    text = ptx_path.read_text()
    found = re.search(r"^\.target\s+(\S+)", text, re.M)
    target = found.group(1).rstrip(",") if found else ""
    sm = target if re.fullmatch(r"sm_\d+[a-z]?", target) else "sm_75"
    only = _chosen(text, kernels) | _user_functions(text, exported_only=True) if kernels else _user_functions(text)
    from tuiprof.toolchain.compilers import ptx_entries

    every = ptx_entries(text)
    if not only:  # no chosen kernel and none of the user's functions here: the module runs as it is
        name = f"m{tag}.ptx"
        (folder / name).write_text(text)
        return ModuleMeta(tag, source, name, target, (), (), {}, {}, every)
    plain = report(text, sm)
    number = int(re.sub(r"\D", "", sm))
    arch = load_arch(base_preset((number // 10, number % 10)))
    try:
        result = instrument_capped(text, tag=tag, plain=plain, cap=functools.partial(register_cap, arch),
                                   next_cap=functools.partial(next_register_cap, arch),
                                   compiler=functools.partial(report, arch=sm),  # type: ignore[call-arg]
                                   only=only)
    except PtxError as exc:
        raise BuildError(f"cannot instrument the PTX of {source or ptx_path.name}: {exc.message}", exc.hint) from None
    name = f"m{tag}.ptx"
    (folder / name).write_text(text)
    ptx_path.write_text(result.ptx)
    resources = {k: KernelResources(*plain[k], 0) for k in result.kernels if k in plain}
    built = report(result.ptx, sm)
    return ModuleMeta(tag, source, name, target, result.sites, result.kernels, resources,
                      {k: built[k][0] for k in result.kernels if k in built}, every)


def _user_functions(ptx: str, exported_only: bool = False) -> set[str]:
    """The kernels and device functions of a module defined in the user's own files, not in a
    library's headers (Thrust's and CUB's kernels, whose probes would cost ptxas minutes;
    `--kernel` probes one of them); with `exported_only`, the device functions another translation
    unit may call (``-rdc``)."""
    from tuiprof.ptx.module import is_system_path
    from tuiprof.ptx.parse import parse_module

    module = parse_module(ptx)
    out = set()
    for name, fn in module.functions.items():
        if not fn.has_body or exported_only and (fn.is_entry or fn.linkage not in ("visible", "weak")):
            continue
        loc = next((i.loc for i in fn.instructions if i.loc is not None), None)
        path = module.files.get(loc.outermost.file, "") if loc is not None else ""
        if not path or not is_system_path(path):
            out.add(name)
    return out


def _chosen(ptx: str, kernels: Sequence[str]) -> set[str]:
    """The kernels of a module's PTX that the written names `kernels` name (none when it has none
    of them)."""
    from tuiprof.errors import TuiprofError
    from tuiprof.toolchain.compilers import ptx_entries
    from tuiprof.toolchain.names import find_symbol

    entries = ptx_entries(ptx)
    out = set()
    for name in kernels:
        try:
            out.add(find_symbol(name, entries))
        except TuiprofError as exc:
            if "ambiguous" in exc.message:
                raise BuildError(exc.message, exc.hint) from None
    return out


def ptxas_report(ptx: str, arch: str, folder: Path, nvcc_path: str, cwd: Path,
                 timeout: float, stage: Path) -> dict[str, tuple[int, int, int]]:
    """Kernel -> (registers, static shared, local bytes per thread) of `ptx` compiled for `arch`
    (``ptxas -v``); empty when ptxas refuses it (the build's own ptxas step then says why)."""
    ptxas = Path(nvcc_path).with_name("ptxas")
    src, cubin = folder / "resources.ptx", folder / "resources.cubin"
    src.write_text(ptx)
    r = _run([str(ptxas), "-v", f"-arch={arch}", str(src), "-o", str(cubin)], cwd, timeout, "ptxas", stage)
    src.unlink(missing_ok=True)
    cubin.unlink(missing_ok=True)
    return parse_ptxas_report(r.stdout + r.stderr) if r.returncode == 0 else {}


def _module_json(m: ModuleMeta) -> dict[str, object]:
    return {"tag": m.tag, "source": m.source, "ptx": m.ptx, "target": m.target,
            "sites": [[s.function, s.index, s.part] for s in m.sites], "kernels": list(m.kernels),
            "resources": {k: [r.registers_per_thread, r.static_shared, r.local_bytes_per_thread, r.const_bytes]
                          for k, r in m.resources.items()},
            "probe_registers": m.probe_registers, "plain_kernels": list(m.plain_kernels)}


META_FILE = FileRole(noun="", expected="a regular file", error=BuildError,
                     missing_hint="build the program with `tuiprof build ... -o BINARY`",
                     other_hint="build the program again with `tuiprof build`", folder_hint="build the program again")
MAX_META_BYTES = 64 << 20
"""A program's meta.json (its site tables): megabytes at most for the largest programs."""


def load_whole_program(binary: str | os.PathLike[str]) -> WholeProgram:
    """The metadata `tuiprof build` left beside `binary`; BuildError when it is missing or damaged."""
    path = Path(os.path.realpath(binary))
    folder = path.with_name(path.name + ".tuiprof")
    try:
        data = json.loads(read_regular(folder / "meta.json", META_FILE, MAX_META_BYTES))
        if data.get("version") != META_VERSION:
            raise ValueError("version")
        modules = tuple(ModuleMeta(
            tag=int(m["tag"]), source=str(m["source"]), ptx=str(m["ptx"]), target=str(m["target"]),
            sites=tuple(Site(str(f), int(i), int(p)) for f, i, p in m["sites"]),
            kernels=tuple(str(k) for k in m["kernels"]),
            resources={str(k): KernelResources(*(int(x) for x in v)) for k, v in m["resources"].items()},
            probe_registers={str(k): int(v) for k, v in m.get("probe_registers", {}).items()},
            plain_kernels=tuple(str(k) for k in m.get("plain_kernels", ())))
            for m in data["modules"])
    except (OSError, ValueError, KeyError, TypeError, BuildError) as exc:
        raise BuildError(f"{path} has no readable tuiprof metadata ({folder}/meta.json: {exc})",
                         "build it with `tuiprof build ... -o BINARY`") from None
    return WholeProgram(path, folder, modules, tuple(str(a) for a in data.get("nvcc_args", [])))


FILE_STRIDE = 1000
"""Another module's ``.file`` numbers are shifted by tag x FILE_STRIDE in a linked module."""


def linked_module(prog: WholeProgram, main: ModuleMeta) -> tuple[Module, dict[int, tuple[Site, ...]]]:
    """`main`'s PTX module with the bodies of the device functions it only declares taken from
    the program's other modules (``-rdc`` programs call across translation units), their
    ``.file`` numbers shifted apart; and the site tables of the modules that lent a body, by tag.
    `tuiprof.ptx.ops.static_ops` on it gives ops for the borrowed functions too."""
    from tuiprof.ptx import parse_module

    base = parse_module(prog.ptx_text(main))
    functions = dict(base.functions)
    files = dict(base.files)
    lent: dict[int, tuple[Site, ...]] = {}
    missing = {n for n, f in functions.items() if not f.has_body}
    for other in prog.modules:
        if other.tag == main.tag or not missing or other.target != main.target:
            continue
        mod = parse_module(prog.ptx_text(other))
        shift = FILE_STRIDE * other.tag
        for name in sorted(missing):
            fn = mod.functions.get(name)
            if fn is None or not fn.has_body:
                continue
            functions[name] = dataclasses.replace(fn, instructions=tuple(
                dataclasses.replace(i, loc=_shift_loc(i.loc, shift)) for i in fn.instructions))
            missing.discard(name)
            lent[other.tag] = other.sites
            files.update({k + shift: v for k, v in mod.files.items()})
    return dataclasses.replace(base, functions=functions, files=files), lent


def _shift_loc(loc: SourceLoc | None, shift: int) -> SourceLoc | None:
    if loc is None:
        return None
    return dataclasses.replace(loc, file=loc.file + shift, inlined_at=_shift_loc(loc.inlined_at, shift))


def _run(cmd: list[str], cwd: Path, timeout: float, what: str, stage: Path) -> ChildResult:
    """Run a build step bounded and killed with tuiprof (`tuiprof.toolchain.child`), its temporaries
    in the staging folder (removed with it, by the guard too if tuiprof is killed)."""
    r = run_bounded(cmd, cwd=cwd, timeout=timeout, what=what, env=dict(os.environ, TMPDIR=str(stage)), cleanup=[stage])
    if r.limit is not None:
        raise limit_words(r.limit, what, timeout)
    return r


def _tail(text: str, limit: int = 3000) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


__all__ = ["Dryrun", "ModuleMeta", "Step", "WRAP_FLAGS", "WholeProgram", "build_instrumented", "check_args",
           "linked_module", "load_whole_program", "parse_dryrun", "runtime_object"]
