"""What the user asked of a collection: which launch script, kernel and launch, snapshot, compiler,
backend; for a whole program, its nvcc arguments and its own arguments."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_CU_ARCH = "a100"
"""The GPU model a CUDA source is profiled for when neither --arch nor the launch script's ARCH
names one."""
COMPILERS = ("auto", "nvcc", "nvrtc")
BACKENDS = ("auto", "gpu", "emu")
CUDA_LIBRARIES = ("cuda-bindings", "pycuda")
KERNEL_FILE_SUFFIXES = (".cu", ".ptx")
"""Targets that are compiled (or taken as PTX), launched by a launch script and recorded."""
DEFAULT_STEP_LIMIT = 1 << 26
"""Warp instructions one CTA may execute in the emulator before it is declared a runaway (about
half a minute of emulation)."""


@dataclass(frozen=True)
class CollectOptions:
    """How a `.cu` target becomes a trace (issue 10 items 4-6)."""

    launch: Path | None = None
    """The launch script; None = ``launch.py`` or ``<stem>_launch.py`` beside the source."""
    kernel: str | None = None
    """The kernel whose launch is profiled; None = the first launched."""
    launch_index: int = 0
    """Which launch of that kernel (0 = its first)."""
    snapshot: int | None = None
    """CTAs in the snapshot; None = Baghsorkhi12's 4 x the CTAs resident at once on the target."""
    snapshot_start: int | None = 0
    """The snapshot's first counted CTA (linear id); None = after the warm-up, where the grid
    leaves room for the whole snapshot (the command line's default)."""
    snapshot_warm: int | None = 0
    """CTAs just before the snapshot's first recorded too, replayed only to warm the caches
    (`tuiprof.trace.snapshot.choose_snapshot`); None = one resident set
    (`tuiprof.trace.snapshot.default_warm`: the command line's default). The fields' own
    defaults (0, 0) are the cold snapshot from CTA 0 that a program asking for exact CTAs gets."""
    cflags: tuple[str, ...] = ()
    """Flags passed through to the compiler (-I, -D, -std=...)."""
    compiler: str = "auto"
    """nvcc when found, else NVRTC; or one of them by name."""
    backend: str = "emu"
    """Where a kernel file runs: ``emu`` (the emulator, any machine), ``gpu``, or ``auto`` (the GPU
    when one is usable, else the emulator: the command line's default)."""
    cuda: str = "cuda-bindings"
    """The Python CUDA library of the GPU backend (`CUDA_LIBRARIES`)."""
    nvcc_args: tuple[str, ...] = ()
    """A whole program's nvcc arguments after the source (``tuiprof app.cu -arch=sm_80 -O3``)."""
    compile_command: tuple[str, ...] = ()
    """``tuiprof -- nvcc -o app a.cu b.cu``: a multi-file program's whole compiler command line."""
    program_args: tuple[str, ...] = ()
    """A whole program's own arguments (after ``--``)."""
    step_limit: int = DEFAULT_STEP_LIMIT
    """The emulator's runaway bound: warp instructions per CTA (`--step-limit`)."""
