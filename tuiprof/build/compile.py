"""CUDA source -> `Program`: one call that finds a compiler, picks the target, compiles in a
private temporary folder (never beside the user's source) and caches the result."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from tuiprof.build import cache as build_cache
from tuiprof.build.child import temp_folder
from tuiprof.build.compilers import Compiled, compile_nvcc, compile_nvrtc, ptx_entries
from tuiprof.build.demangle import demangle
from tuiprof.build.flags import normalize_flags
from tuiprof.build.headers import local_headers, read_source
from tuiprof.build.program import KernelInfo, Program, SourceFile
from tuiprof.build.toolchain import Nvcc, choose_target, find_compiler
from tuiprof.errors import BuildError
from tuiprof.progress import Phase, Progress, ignore

DEFAULT_TIMEOUT = 300.0


def build_program(source: str | os.PathLike[str], *, compute_capability: tuple[int, int],
                  flags: Sequence[str] = (), compiler: str = "auto", cache: bool = True,
                  timeout: float = DEFAULT_TIMEOUT, progress: Progress = ignore) -> Program:
    """Compile the CUDA file `source` to PTX with line info, for the GPU of `compute_capability`
    (floored at the oldest target the compiler supports; see `choose_target`).

    `flags` pass through to the compiler (``-I``, ``-D``, ``-std=``...; see `normalize_flags`).
    `compiler` is ``"auto"`` (nvcc when found, else NVRTC), ``"nvcc"`` or ``"nvrtc"``. Either runs
    in a child bounded in memory and by `timeout` (`tuiprof.build.child`). Raises BuildError when
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
    src = SourceFile(str(path), text)
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


def _program(compiled: Compiled, compiler: str, target: str, requested: tuple[int, int],
             flags: tuple[str, ...], source: SourceFile, headers: tuple[SourceFile, ...]) -> Program:
    kernels = tuple(KernelInfo(name, demangle(name), compiled.resources.get(name))
                    for name in ptx_entries(compiled.ptx))
    if not kernels:
        raise BuildError(f"{Path(source.path).name} defines no kernel (no __global__ function reached the PTX)",
                         "a kernel is a `__global__ void name(...)` function; templates need an instantiation")
    return Program(ptx=compiled.ptx, compiler=compiler, target=target,
                   requested=(int(requested[0]), int(requested[1])), flags=flags, source=source,
                   headers=headers, kernels=kernels, resources_from=compiled.resources_from, log=compiled.log)
