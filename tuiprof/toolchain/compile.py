"""CUDA source -> `Program`: one call that finds a compiler, picks the target, compiles in a
private temporary folder (never beside the user's source) and caches the result."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tuiprof.errors import BuildError
from tuiprof.progress import Phase, Progress, ignore
from tuiprof.toolchain import cache as build_cache
from tuiprof.toolchain.child import temp_folder
from tuiprof.toolchain.compilers import Compiled, compile_nvcc, compile_nvrtc, ptx_entries
from tuiprof.toolchain.demangle import demangle
from tuiprof.toolchain.flags import normalize_flags
from tuiprof.toolchain.headers import local_headers, read_source
from tuiprof.toolchain.locate import Nvcc, choose_target, find_compiler
from tuiprof.toolchain.program import InputFile, KernelInfo, KernelResources, Program

DEFAULT_TIMEOUT = 300.0


def build_program(source: str | os.PathLike[str], *, compute_capability: tuple[int, int],
                  flags: Sequence[str] = (), compiler: str = "auto", cache: bool = True,
                  timeout: float = DEFAULT_TIMEOUT, progress: Progress = ignore) -> Program:
    """Compile the CUDA file `source` to PTX with line info, for the GPU of `compute_capability`
    (floored at the oldest target the compiler supports; see `choose_target`).

    `flags` pass through to the compiler (``-I``, ``-D``, ``-std=``...; see `normalize_flags`).
    `compiler` is ``"auto"`` (nvcc when found, else NVRTC), ``"nvcc"`` or ``"nvrtc"``. Either runs
    in a child bounded in memory and by `timeout` (`tuiprof.toolchain.child`). Raises BuildError when
    the file cannot be read, no compiler is found, the source does not compile, or the compiler
    hits one of those limits.
       `progress` hears which compiler runs (not when the build cache has the program).
    """
    if (len(compute_capability) != 2 or not all(isinstance(v, int) and v >= 0 for v in compute_capability)):
        raise BuildError(f"compute capability {compute_capability!r} is not a (major, minor) pair",
                         "for example (8, 0) for an A100")
    path = Path(source).expanduser().resolve()
    text_bytes = read_source(path)
    text = text_bytes.decode("utf-8", "replace")
    norm_flags, include_dirs = normalize_flags(flags)
    found = find_compiler(compiler)
    sm = choose_target(compute_capability, found.archs)
    target = f"sm_{sm}"
    headers = local_headers(path, text, include_dirs)
    src = InputFile(str(path), text)
    compiler_path = found.path if isinstance(found, Nvcc) else "cuda-bindings"
    key = build_cache.cache_key(src, headers, norm_flags, target, found.name, compiler_path)
    if cache:
        hit = build_cache.load(key)
        if hit is not None:
            return hit
    progress(Phase(f"compiling {path.name} with {'nvcc' if isinstance(found, Nvcc) else 'NVRTC'}"))
    with temp_folder() as tmp:
        if isinstance(found, Nvcc):
            compiled = compile_nvcc(found, path, norm_flags, sm, tmp, timeout)
        else:
            compiled = compile_nvrtc(found, path, text_bytes, norm_flags, sm, tmp, timeout)
    program = _program(compiled, found.name, target, compute_capability, norm_flags, src, headers)
    if cache:
        build_cache.store(key, program)
    return program


def load_program(source: str | os.PathLike[str], *, compute_capability: tuple[int, int],
                 flags: Sequence[str] = (), compiler: str = "auto", cache: bool = True,
                 progress: Progress = ignore) -> Program:
    """The `Program` of a kernel file: a CUDA source compiled (`build_program`), or a PTX file
    another compiler made (Triton, Numba, a build's kept PTX) taken as it is (`ptx_program`)."""
    if Path(source).suffix == ".ptx":
        return ptx_program(source, compute_capability=compute_capability)
    return build_program(source, compute_capability=compute_capability, flags=flags, compiler=compiler, cache=cache,
                         progress=progress)


def ptx_program(source: str | os.PathLike[str], *, compute_capability: tuple[int, int],
                timeout: float = DEFAULT_TIMEOUT) -> Program:
    """A PTX file as a `Program`: its kernels (demangled), its ``.target``, and the resources
    ``ptxas -v`` measures when a CUDA toolkit is at hand (else none: occupancy then takes the
    registers its launch bounds imply). Its source lines are the files its ``.loc`` names (a
    ``.py`` file for Triton or Numba), read when the trace is made."""
    import re

    from tuiprof.toolchain.locate import find_nvcc, nvcc_compiler
    from tuiprof.toolchain.wholeprog import ptxas_report

    path = Path(source).expanduser().resolve()
    text = read_source(path).decode("utf-8", "replace")
    m = re.search(r"^\s*\.target\s+(sm_\d+a?)", text, re.M)
    if not re.search(r"^\s*\.version\b", text, re.M) or m is None:
        raise BuildError(f"{path.name} is not a PTX module (no .version and .target sm_XX)",
                         "give the PTX text a compiler wrote (nvcc -ptx, Triton's kernel.asm['ptx'], "
                         "Numba's cuda.compile_ptx)")
    resources: dict[str, KernelResources] = {}
    origin = "none"
    nvcc = find_nvcc()
    if nvcc is not None and nvcc_compiler(nvcc).has_ptxas:
        with temp_folder() as tmp:
            report = ptxas_report(text, m.group(1), Path(tmp), str(nvcc), Path(tmp), timeout, Path(tmp))
        resources = {k: KernelResources(r, s, loc, 0) for k, (r, s, loc) in report.items()}
        origin = "ptxas -v" if report else "none"
    kernels = tuple(KernelInfo(name, demangle(name), resources.get(name)) for name in ptx_entries(text))
    if not kernels:
        raise BuildError(f"{path.name} defines no kernel (no .entry)", "give the PTX of a kernel")
    return Program(ptx=text, compiler="ptx file", target=m.group(1), requested=compute_capability, flags=(),
                   source=InputFile(str(path), ""), headers=(), kernels=kernels, resources_from=origin)


def _program(compiled: Compiled, compiler: str, target: str, requested: tuple[int, int],
             flags: tuple[str, ...], source: InputFile, headers: tuple[InputFile, ...]) -> Program:
    kernels = tuple(KernelInfo(name, demangle(name), compiled.resources.get(name))
                    for name in ptx_entries(compiled.ptx))
    if not kernels:
        raise BuildError(f"{Path(source.path).name} defines no kernel (no __global__ function reached the PTX)",
                         "a kernel is a `__global__ void name(...)` function; templates need an instantiation")
    return Program(ptx=compiled.ptx, compiler=compiler, target=target,
                   requested=(int(requested[0]), int(requested[1])), flags=flags, source=source,
                   headers=headers, kernels=kernels, resources_from=compiled.resources_from, log=compiled.log)
