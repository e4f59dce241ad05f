"""The user's pass-through compiler flags, checked and made independent of the working folder.

Any flag nvcc or NVRTC understands passes through in order (``-I``, ``-D``, ``-U``, ``-std=``,
``--use_fast_math``, ``-maxrregcount=N``, ``-Xptxas ...``), with three changes:

- include folders (``-Idir``, ``-I dir``, ``--include-path=dir``, ``-isystem dir``) become
  ``-I<absolute dir>``, because the compiler runs in a private temporary folder and the cache key
  must not depend on where tuiprof was started;
- line information is always on, so ``-lineinfo`` / ``--generate-line-info`` are dropped;
- flags that choose the target, the output or the compilation phase are refused: tuiprof sets
  them itself (the target comes from the GPU model).

With NVRTC, flags that only steer nvcc's host compiler (``-O3``, ``-Xcompiler ...``, ``-ccbin``)
are left out (`compilers.nvrtc_flags`); other flags NVRTC does not know fail the build with its
own message.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tuiprof.errors import BuildError

_RESERVED = {
    "-arch": "the target comes from the GPU model (--arch); the compiler's nearest sm_XX is used",
    "--gpu-architecture": "the target comes from the GPU model (--arch)",
    "-gencode": "the target comes from the GPU model (--arch)",
    "--generate-code": "the target comes from the GPU model (--arch)",
    "-code": "the target comes from the GPU model (--arch)",
    "--gpu-code": "the target comes from the GPU model (--arch)",
    "-o": "tuiprof compiles into a private temporary folder",
    "--output-file": "tuiprof compiles into a private temporary folder",
    "-odir": "tuiprof compiles into a private temporary folder",
    "--output-directory": "tuiprof compiles into a private temporary folder",
    "-ptx": "tuiprof chooses the compilation phase", "--ptx": "tuiprof chooses the compilation phase",
    "-cubin": "tuiprof chooses the compilation phase", "--cubin": "tuiprof chooses the compilation phase",
    "-fatbin": "tuiprof chooses the compilation phase", "--fatbin": "tuiprof chooses the compilation phase",
    "-c": "tuiprof chooses the compilation phase", "--compile": "tuiprof chooses the compilation phase",
    "-E": "tuiprof chooses the compilation phase", "--preprocess": "tuiprof chooses the compilation phase",
    "-M": "tuiprof chooses the compilation phase", "-MM": "tuiprof chooses the compilation phase",
    "-MD": "tuiprof chooses the compilation phase", "-MMD": "tuiprof chooses the compilation phase",
    "-lib": "tuiprof chooses the compilation phase", "-link": "tuiprof chooses the compilation phase",
    "-dlink": "tuiprof chooses the compilation phase", "--device-link": "tuiprof chooses the compilation phase",
    "-run": "tuiprof runs the kernel in its own emulator", "--run": "tuiprof runs the kernel in its own emulator",
    "-dryrun": "tuiprof needs a real compile", "--dryrun": "tuiprof needs a real compile",
    "-keep": "tuiprof keeps its own temporary files private", "--keep": "tuiprof keeps its own temporary files private",
    "-keep-dir": "tuiprof keeps its own temporary files private",
    "--keep-dir": "tuiprof keeps its own temporary files private",
}
_LINEINFO = {"-lineinfo", "--generate-line-info"}
_INCLUDE_SEPARATE = {"-I", "--include-path", "-isystem", "--system-include"}
_INCLUDE_JOINED = ("--include-path=", "--system-include=", "-isystem=", "-isystem", "-I")


def normalize_flags(flags: Sequence[str], cwd: Path | None = None) -> tuple[tuple[str, ...], tuple[Path, ...]]:
    """(the flags to pass, the include folders they name), relative folders resolved against
    `cwd` (default: the current folder). Raises BuildError on a refused or malformed flag."""
    base = Path.cwd() if cwd is None else cwd
    out: list[str] = []
    includes: list[Path] = []
    items = list(flags)
    i = 0
    while i < len(items):
        flag = items[i]
        i += 1
        if not isinstance(flag, str) or not flag.strip():
            raise BuildError(f"empty compiler flag in {list(flags)!r}", "give each flag as one word, e.g. -DN=4")
        name = flag.split("=", 1)[0]
        if name in _RESERVED:
            raise BuildError(f"compiler flag {flag} is set by tuiprof", _RESERVED[name])
        if flag in _LINEINFO:
            continue
        if flag in _INCLUDE_SEPARATE:
            if i >= len(items):
                raise BuildError(f"compiler flag {flag} needs a folder after it", "for example -Iinclude")
            folder = items[i]
            i += 1
        elif flag.startswith(_INCLUDE_JOINED):
            prefix = next(p for p in _INCLUDE_JOINED if flag.startswith(p))
            folder = flag[len(prefix):]
            if not folder:
                raise BuildError(f"compiler flag {flag} names no folder", "for example -Iinclude")
        else:
            out.append(flag)
            continue
        path = (base / Path(folder).expanduser()).resolve()
        includes.append(path)
        out.append(f"-I{path}")
    return tuple(out), tuple(includes)
