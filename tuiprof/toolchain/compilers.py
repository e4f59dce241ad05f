"""The two ways to compile a CUDA source to PTX and a cubin: nvcc and NVRTC (through
cuda-bindings), each in a child process bounded in memory and time that dies with tuiprof
(`tuiprof.toolchain.child`).

Each returns a `Compiled`: the PTX text, the kernel resources and where they came from, and the
compiler's warnings. Both run with line info on and write only into the private `workdir` they
are given. A failure is a BuildError carrying the compiler's own first errors, or saying which of
tuiprof's limits stopped the compiler.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from tuiprof.errors import BuildError
from tuiprof.toolchain import nvrtc_child
from tuiprof.toolchain.child import limit_words, run_bounded
from tuiprof.toolchain.cubin import kernel_resources
from tuiprof.toolchain.diagnostics import missing_include, summarize_errors, warnings_of
from tuiprof.toolchain.locate import Nvcc, Nvrtc
from tuiprof.toolchain.program import KernelResources

MAX_OUTPUT_BYTES = 1 << 20
"""How much of a compiler's log is read back."""
MAX_PTX_BYTES = 256 << 20

_ENTRY = re.compile(r"^\s*(?:\.(?:visible|weak)\s+)*\.entry\s+([\w$.]+)", re.M)


@dataclass(frozen=True)
class Compiled:
    ptx: str
    resources: dict[str, KernelResources]
    resources_from: str
    log: str


def ptx_entries(ptx: str) -> tuple[str, ...]:
    """The kernel (``.entry``) names of a PTX module, in order."""
    return tuple(_ENTRY.findall(ptx))


def _failure(compiler: str, source: Path, target: str, output: str, flags: tuple[str, ...],
             archs_error: str = "") -> BuildError:
    header = f"{source.name} does not compile ({compiler}, {target}):\n"
    missing = missing_include(output)
    if archs_error and re.search(r"Unsupported gpu architecture", output, re.I):
        return BuildError(header + summarize_errors(output),
                          f"{target} was a guess: asking nvcc which targets it supports failed ({archs_error}); "
                          "fix that first (is TMPDIR a writable folder?)")
    if missing is not None:
        hint = (f"the header {missing!r} was not found: add its folder with --cflag=-I<folder>"
                + (", or install the CUDA headers (`pip install nvidia-cuda-runtime nvidia-cuda-cccl`)"
                   if compiler.startswith("nvrtc") else ""))
    elif re.search(r"unrecognized option|Unknown option|invalid value for|invalid option", output, re.I):
        hint = (f"a compiler flag was refused (flags: {' '.join(flags) or 'none'}); "
                + ("NVRTC accepts only a subset of nvcc's flags" if compiler.startswith("nvrtc")
                   else "see `nvcc --help`"))
    else:
        hint = "fix the source at the line shown; the message is the compiler's own"
    return BuildError(header + summarize_errors(output), hint)


# --------------------------------------------------------------------------- nvcc


def compile_nvcc(nvcc: Nvcc, source: Path, flags: tuple[str, ...], sm: int, workdir: Path,
                 timeout: float) -> Compiled:
    """``nvcc -cubin -keep -Xptxas -v -lineinfo``: the kept PTX, registers and shared memory from
    ptxas's report, user constant bytes from the cubin. Without ptxas, ``nvcc -ptx`` and no
    resources."""
    target = f"sm_{sm}"
    out_dir = workdir / "out"
    out_dir.mkdir()
    if nvcc.has_ptxas:
        cmd = [nvcc.path, "-cubin", f"-arch={target}", "-lineinfo", "-Xptxas", "-v", "-keep",
               "-keep-dir", str(out_dir), *flags, str(source), "-o", str(out_dir / "kernel.cubin")]
    else:
        cmd = [nvcc.path, "-ptx", f"-arch={target}", "-lineinfo", *flags, str(source),
               "-o", str(out_dir / f"{source.stem}.ptx")]
    env = dict(os.environ, TMPDIR=str(workdir))
    what = f"{nvcc.name} on {source.name}"
    run = run_bounded(cmd, cwd=workdir, env=env, timeout=timeout, what=what, cleanup=[workdir])
    output = run.output
    if run.limit is not None:
        raise limit_words(run.limit, what, timeout)
    if run.returncode != 0:
        raise _failure(nvcc.name, source, target, output, flags, nvcc.archs_error)
    ptx_path = out_dir / f"{source.stem}.ptx"
    if not ptx_path.is_file():
        candidates = sorted(out_dir.glob("*.ptx"))
        if len(candidates) != 1:
            raise BuildError(f"{nvcc.name} wrote no single PTX file for {source.name}",
                             "this is a tuiprof bug or an unexpected nvcc; please report it")
        ptx_path = candidates[0]
    if ptx_path.stat().st_size > MAX_PTX_BYTES:
        raise BuildError(f"the PTX of {source.name} is larger than {MAX_PTX_BYTES >> 20} MiB",
                         "profile a smaller source file")
    ptx = ptx_path.read_text(encoding="utf-8", errors="replace")
    entries = ptx_entries(ptx)
    if not nvcc.has_ptxas:
        return Compiled(ptx, {}, "none", warnings_of(output))
    cubin = (out_dir / "kernel.cubin").read_bytes()
    from_elf = kernel_resources(cubin, entries, sm)
    reported = parse_ptxas_report(output)
    resources = {}
    for name in entries:
        elf = from_elf[name]
        reg, shared, stack = reported.get(name, (elf.registers_per_thread, elf.static_shared,
                                                 elf.local_bytes_per_thread))
        resources[name] = KernelResources(reg, shared, stack, elf.const_bytes)
    origin = "ptxas -v" if all(name in reported for name in entries) else "cubin"
    return Compiled(ptx, resources, origin, warnings_of(output))


_PTXAS_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_PROPS = re.compile(r"Function properties for (\S+)")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame")
_PTXAS_USED = re.compile(r"Used (\d+) registers")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")
_PTXAS_STACK = re.compile(r"(\d+) bytes cumulative stack size")


def parse_ptxas_report(output: str) -> dict[str, tuple[int, int, int]]:
    """Kernel -> (registers, static shared bytes, local bytes per thread) from ``ptxas -v``
    output. The local bytes are the cumulative stack size (callees included) when ptxas prints
    one, else the kernel's own stack frame."""
    out: dict[str, tuple[int, int, int]] = {}
    frames: dict[str, int] = {}
    current: str | None = None
    props: str | None = None
    for line in output.splitlines():
        if m := _PTXAS_ENTRY.search(line):
            current = m.group(1)
            continue
        if m := _PTXAS_PROPS.search(line):
            props = m.group(1)
            continue
        if (m := _PTXAS_FRAME.search(line)) and props is not None:
            frames[props] = int(m.group(1))
            continue
        if (m := _PTXAS_USED.search(line)) and current is not None:
            smem = _PTXAS_SMEM.search(line)
            stack = _PTXAS_STACK.search(line)
            local = int(stack.group(1)) if stack else frames.get(current, 0)
            out[current] = (int(m.group(1)), int(smem.group(1)) if smem else 0, local)
            current = None
    return out


# --------------------------------------------------------------------------- NVRTC


def compile_nvrtc(nvrtc_info: Nvrtc, source: Path, text: bytes, flags: tuple[str, ...], sm: int, workdir: Path,
                  timeout: float) -> Compiled:
    """NVRTC in a child process (`tuiprof.toolchain.nvrtc_child`, bounded like nvcc): the PTX and the
    cubin of ``-arch=sm_XX --generate-line-info``; the kernel resources from the cubin. The
    program is named by the source's absolute path, so quoted includes resolve beside it and the
    PTX ``.file`` table names it."""
    target = f"sm_{sm}"
    options = [f"-arch={target}", "--generate-line-info", *nvrtc_flags(flags),
               *(f"-I{d}" for d in nvrtc_info.include_dirs)]
    (workdir / "source.cu").write_bytes(text)
    (workdir / nvrtc_child.REQUEST).write_text(json.dumps({
        "name": str(source), "options": options, "source": "source.cu", "max_log": MAX_OUTPUT_BYTES,
        "max_ptx": MAX_PTX_BYTES}), encoding="utf-8")
    what = f"{nvrtc_info.name} on {source.name}"
    run = run_bounded([sys.executable, nvrtc_child.__file__, str(workdir)], cwd=workdir, timeout=timeout, what=what,
                      env=dict(os.environ, TMPDIR=str(workdir)), cleanup=[workdir])
    log = _read_limited(workdir / nvrtc_child.LOG, MAX_OUTPUT_BYTES)
    if run.limit is not None:
        raise limit_words(run.limit, what, timeout)
    try:
        result = json.loads((workdir / nvrtc_child.RESULT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        signal_note = f" (ended by signal {-run.returncode})" if run.returncode < 0 else ""
        raise BuildError(f"{what} ended without a result{signal_note}:\n{summarize_errors(run.output) or run.output[-2000:]}",
                         "check the NVRTC installation (cuda-bindings, nvidia-cuda-nvrtc)") from None
    stage, err = result.get("stage"), result.get("error", "")
    if stage == "create":
        raise BuildError(f"NVRTC cannot create a program for {source.name}: {err}",
                         "this is a tuiprof bug or a broken NVRTC installation; please report it")
    if stage == "compile":
        raise _failure(nvrtc_info.name, source, target, log or err, flags)
    if stage == "ptx":
        raise BuildError(f"NVRTC returned no usable PTX for {source.name} ({err}, {result.get('size', 0)} bytes)",
                         "profile a smaller source file, or report it")
    ptx = (workdir / nvrtc_child.PTX).read_bytes().decode("utf-8", "replace")
    cubin_path = workdir / nvrtc_child.CUBIN
    cubin = cubin_path.read_bytes() if cubin_path.is_file() else b""
    entries = ptx_entries(ptx)
    if not cubin:
        return Compiled(ptx, {}, "none", warnings_of(log))
    return Compiled(ptx, kernel_resources(cubin, entries, sm), "cubin", warnings_of(log))


def _read_limited(path: Path, limit: int) -> str:
    """The first `limit` bytes of a file the child wrote, as text ("" when it wrote none)."""
    from tuiprof.files import read_regular_quietly

    data = read_regular_quietly(path, limit)
    return "" if data is None else data[:limit].decode("utf-8", "replace")


_HOST_ONLY = re.compile(r"^(?:-O[0-3s]?|--optimize(?:=\d)?)$")
_HOST_ONLY_WITH_VALUE = ("-Xcompiler", "--compiler-options", "-Xlinker", "--linker-options", "-ccbin",
                         "--compiler-bindir")


def nvrtc_flags(flags: tuple[str, ...]) -> list[str]:
    """`flags` without those that only steer nvcc's host compiler or linker (``-O3``,
    ``-Xcompiler ...``, ``-ccbin ...``): they do not change device code, and NVRTC refuses them."""
    out: list[str] = []
    skip_next = False
    for flag in flags:
        if skip_next:
            skip_next = False
            continue
        name = flag.split("=", 1)[0]
        if _HOST_ONLY.match(flag):
            continue
        if name in _HOST_ONLY_WITH_VALUE:
            skip_next = "=" not in flag
            continue
        out.append(flag)
    return out
