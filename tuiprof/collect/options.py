"""What the user asked of a collection: which launch script, kernel and launch, snapshot, compiler."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_CU_ARCH = "a100"
"""The GPU model a CUDA source is profiled for when neither --arch nor the launch script's ARCH
names one."""
COMPILERS = ("auto", "nvcc", "nvrtc")
BACKENDS = ("emu",)
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
    """CTAs in the snapshot; None = paper 000's 4 x the CTAs resident at once on the target."""
    snapshot_start: int = 0
    """The snapshot's first CTA (linear id)."""
    cflags: tuple[str, ...] = ()
    """Flags passed through to the compiler (-I, -D, -std=...)."""
    compiler: str = "auto"
    """nvcc when found, else NVRTC; or one of them by name."""
    backend: str = "emu"
    """Where the kernel runs: the emulator (any machine)."""
    step_limit: int = DEFAULT_STEP_LIMIT
    """The emulator's runaway bound: warp instructions per CTA (`--step-limit`)."""
