"""The two ways to compile a CUDA source to PTX and a cubin: nvcc (a subprocess) and NVRTC (in
process, through cuda-bindings).

Each returns a `Compiled`: the PTX text, the kernel resources and where they came from, and the
compiler's warnings. Both run with line info on and write only into the private `workdir` they
are given. A failure is a BuildError carrying the compiler's own first errors.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tuiprof.build.cubin import kernel_resources
from tuiprof.build.diagnostics import missing_include, summarize_errors, warnings_of
from tuiprof.build.program import KernelResources
from tuiprof.build.toolchain import Nvcc, Nvrtc
from tuiprof.errors import BuildError

MAX_OUTPUT_BYTES = 1 << 20
"""How much of a compiler's stdout/stderr is read back."""
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


def _failure(compiler: str, source: Path, target: str, output: str, flags: tuple[str, ...]) -> BuildError:
    header = f"{source.name} does not compile ({compiler}, {target}):\n"
    missing = missing_include(output)
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


def _read_bounded(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(MAX_OUTPUT_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def _run_bounded(cmd: list[str], cwd: Path, env: dict[str, str], stdout_path: Path, stderr_path: Path,
                 timeout: float, what: str) -> int:
    """Run `cmd` with its output in files, in its own process group so that a timeout (or an
    interrupt) ends the compiler's children too. Returns the exit status."""
    try:
        with open(stdout_path, "wb") as so, open(stderr_path, "wb") as se:
            proc = subprocess.Popen(cmd, stdout=so, stderr=se, stdin=subprocess.DEVNULL, cwd=cwd, env=env,
                                    start_new_session=True)
    except OSError as exc:
        raise BuildError(f"cannot run {cmd[0]}: {exc.strerror}", "check the CUDA toolkit installation") from None
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BuildError(f"{what} took longer than {timeout:g} s",
                         "simplify the source, or check that the compiler is not stuck") from None
    finally:
        if proc.poll() is None:
            _kill_group(proc)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except OSError:
        pass
    proc.wait()


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
    stdout_path, stderr_path = workdir / "stdout.txt", workdir / "stderr.txt"
    returncode = _run_bounded(cmd, workdir, env, stdout_path, stderr_path, timeout, f"{nvcc.name} on {source.name}")
    output = _read_bounded(stdout_path) + _read_bounded(stderr_path)
    if returncode != 0:
        raise _failure(nvcc.name, source, target, output, flags)
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


def compile_nvrtc(nvrtc_info: Nvrtc, source: Path, text: bytes, flags: tuple[str, ...], sm: int) -> Compiled:
    """NVRTC in process: the PTX and the cubin of ``-arch=sm_XX --generate-line-info``; the
    kernel resources from the cubin. The program is named by the source's absolute path, so
    quoted includes resolve beside it and the PTX ``.file`` table names it."""
    from cuda.bindings import nvrtc

    target = f"sm_{sm}"
    options = [f"-arch={target}", "--generate-line-info", *nvrtc_flags(flags),
               *(f"-I{d}" for d in nvrtc_info.include_dirs)]
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    err, prog = nvrtc.nvrtcCreateProgram(text, str(source).encode(), 0, [], [])
    if err != ok:
        raise BuildError(f"NVRTC cannot create a program for {source.name}: {err.name}",
                         "this is a tuiprof bug or a broken NVRTC installation; please report it")
    try:
        encoded = [o.encode() for o in options]
        err, = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
        log = _nvrtc_log(nvrtc, prog)
        if err != ok:
            raise _failure(nvrtc_info.name, source, target, log or err.name, flags)
        err, size = nvrtc.nvrtcGetPTXSize(prog)
        if err != ok or size > MAX_PTX_BYTES:
            raise BuildError(f"NVRTC returned no usable PTX for {source.name} ({err.name}, {size} bytes)",
                             "profile a smaller source file, or report it")
        buf = b" " * size
        nvrtc.nvrtcGetPTX(prog, buf)
        ptx = buf.rstrip(b"\0").decode("utf-8", "replace")
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        cubin = b""
        if err == ok and size > 0:
            cubin = b" " * size
            nvrtc.nvrtcGetCUBIN(prog, cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    entries = ptx_entries(ptx)
    if not cubin:
        return Compiled(ptx, {}, "none", warnings_of(log))
    return Compiled(ptx, kernel_resources(cubin, entries, sm), "cubin", warnings_of(log))


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


def _nvrtc_log(nvrtc: object, prog: object) -> str:
    """The program's compile log, its first `MAX_OUTPUT_BYTES` bytes."""
    err, size = nvrtc.nvrtcGetProgramLogSize(prog)  # type: ignore[attr-defined]
    if size <= 1:
        return ""
    buf = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, buf)  # type: ignore[attr-defined]
    return buf[:MAX_OUTPUT_BYTES].rstrip(b"\0").decode("utf-8", "replace")
