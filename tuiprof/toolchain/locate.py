"""Finding a CUDA compiler: nvcc from a toolkit, else NVRTC from NVIDIA's Python wheels.

nvcc is looked for on PATH, then in ``$CUDA_HOME/bin``, ``$CUDA_PATH/bin`` and the standard
toolkit folders (`STANDARD_ROOTS`), in that order. NVRTC comes from ``cuda-bindings`` (``from
cuda.bindings import nvrtc``) with the ``nvidia-cuda-nvrtc`` wheel; the CUDA headers it needs for
``cuda_fp16.h``, cooperative groups or CUB come from the ``nvidia-cuda-runtime`` and
``nvidia-cuda-cccl`` wheels, located by ``cuda.pathfinder``. Both are imported lazily: nothing
here loads a CUDA library until a compile asks for one.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tuiprof.errors import BuildError

STANDARD_ROOTS: tuple[str, ...] = ("/usr/local/cuda",)
"""Toolkit folders searched after PATH, CUDA_HOME and CUDA_PATH."""

COMPILERS = ("auto", "nvcc", "nvrtc")
INSTALL_HINT = ("install the CUDA toolkit (nvcc), or `pip install nvidia-cuda-nvrtc cuda-bindings` "
                "(with nvidia-cuda-runtime and nvidia-cuda-cccl for the CUDA headers)")


@dataclass(frozen=True)
class Nvcc:
    """An nvcc installation: the driver, whether ptxas sits beside it, its version and targets."""

    path: str
    version: str
    archs: tuple[int, ...]
    """Supported compute capabilities as 10*major+minor (75, 80, ...), oldest first."""
    has_ptxas: bool
    archs_error: str = ""
    """Why ``nvcc --list-gpu-arch`` gave no targets (then `archs` is empty and the target a guess)."""

    @property
    def name(self) -> str:
        return f"nvcc {self.version}"


@dataclass(frozen=True)
class Nvrtc:
    """The NVRTC library of the installed cuda-bindings, and the header folders it is given."""

    version: str
    archs: tuple[int, ...]
    include_dirs: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"nvrtc {self.version}"


Compiler = Nvcc | Nvrtc


def find_nvcc(environ: Mapping[str, str] | None = None) -> Path | None:
    """The nvcc to use: PATH, CUDA_HOME, CUDA_PATH, then `STANDARD_ROOTS`; None when none exists."""
    env = os.environ if environ is None else environ
    on_path = shutil.which("nvcc", path=env.get("PATH") or os.defpath)
    if on_path:
        return Path(on_path)
    roots = [env.get("CUDA_HOME", ""), env.get("CUDA_PATH", ""), *STANDARD_ROOTS]
    for root in roots:
        if root:
            candidate = Path(root) / "bin" / "nvcc"
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
    return None


def _run(cmd: list[str], timeout: float = 30.0) -> str:
    """`cmd`'s standard output, run bounded (`tuiprof.toolchain.child`) with a private TMPDIR (nvcc
    writes temporaries even to list its targets: an unwritable TMPDIR must not change the answer)."""
    from tuiprof.toolchain.child import run_bounded, temp_folder

    with temp_folder() as tmp:
        out = run_bounded(cmd, cwd=tmp, timeout=timeout, what=" ".join(cmd), env=dict(os.environ, TMPDIR=str(tmp)),
                          cleanup=[tmp])
    if out.returncode != 0:
        raise BuildError(f"{' '.join(cmd)} failed: {(out.stderr or out.stdout).strip()[:500]}", INSTALL_HINT)
    return out.stdout


@functools.lru_cache(maxsize=8)
def _nvcc_info(path: str, mtime_ns: int) -> Nvcc:
    text = _run([path, "--version"])
    m = re.search(r"V(\d+\.\d+(?:\.\d+)?)", text) or re.search(r"release (\d+\.\d+)", text)
    version = m.group(1) if m else "unknown"
    archs_error = ""
    try:
        listing = _run([path, "--list-gpu-arch"])
        archs = tuple(sorted({int(a) for a in re.findall(r"compute_(\d+)\b", listing)}))
    except BuildError as exc:  # an nvcc older than --list-gpu-arch: the target is the GPU's own
        archs, archs_error = (), exc.message[:300]
    here = Path(path)
    has_ptxas = any((d / "ptxas").is_file() for d in {here.parent, here.resolve().parent})
    return Nvcc(path=path, version=version, archs=archs, has_ptxas=has_ptxas, archs_error=archs_error)


def nvcc_compiler(path: Path) -> Nvcc:
    """Version, targets and ptxas of the nvcc at `path` (asked once per process)."""
    return _nvcc_info(str(path), path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=1)
def nvrtc_compiler() -> Nvrtc | None:
    """NVRTC through cuda-bindings, or None when the package or its library is missing."""
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        return None
    try:
        err, major, minor = nvrtc.nvrtcVersion()
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return None
        err, archs = nvrtc.nvrtcGetSupportedArchs()
        supported = tuple(sorted(int(a) for a in archs)) if err == nvrtc.nvrtcResult.NVRTC_SUCCESS else ()
    except Exception:  # the library failed to load (cuda.pathfinder's DynamicLibNotFoundError and kin)
        return None
    return Nvrtc(version=f"{major}.{minor}", archs=supported, include_dirs=_nvrtc_include_dirs())


def _nvrtc_include_dirs() -> tuple[str, ...]:
    """The CUDA runtime headers (cuda_fp16.h, cooperative_groups) and CCCL (cub, nv/target)."""
    try:
        from cuda import pathfinder
    except ImportError:
        return ()
    out = []
    for name in ("cudart", "cccl"):
        try:
            found = pathfinder.find_nvidia_header_directory(name)
        except Exception:  # an unknown name on an older pathfinder, or a broken installation
            found = None
        if found and found not in out:
            out.append(str(found))
    return tuple(out)


def find_compiler(kind: str = "auto", environ: Mapping[str, str] | None = None) -> Compiler:
    """The compiler to use: `kind` ``"nvcc"``, ``"nvrtc"``, or ``"auto"`` (nvcc when found, else
    NVRTC). Raises BuildError naming what is missing."""
    if kind not in COMPILERS:
        raise BuildError(f"unknown compiler {kind!r}", "use one of: " + ", ".join(COMPILERS))
    if kind in ("auto", "nvcc"):
        path = find_nvcc(environ)
        if path is not None:
            return nvcc_compiler(path)
        if kind == "nvcc":
            raise BuildError("nvcc not found on PATH, in CUDA_HOME, CUDA_PATH or "
                             + ", ".join(STANDARD_ROOTS), "install the CUDA toolkit or put its bin folder on PATH")
    found = nvrtc_compiler()
    if found is not None:
        return found
    if kind == "nvrtc":
        raise BuildError("NVRTC is not available (the cuda-bindings package or the NVRTC library is missing)",
                         "`pip install nvidia-cuda-nvrtc cuda-bindings`")
    raise BuildError("no CUDA compiler found: no nvcc on PATH, in CUDA_HOME, CUDA_PATH or "
                     + ", ".join(STANDARD_ROOTS) + ", and no NVRTC (cuda-bindings)", INSTALL_HINT)


def choose_target(requested: tuple[int, int], supported: tuple[int, ...]) -> int:
    """The compute capability to compile for, as 10*major+minor: the newest the compiler supports
    that is not newer than `requested`, else (an older GPU than the compiler knows) its oldest.
    With no list of supported targets, `requested` itself."""
    want = requested[0] * 10 + requested[1]
    if not supported:
        return want
    older = [a for a in supported if a <= want]
    return max(older) if older else min(supported)
