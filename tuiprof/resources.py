"""Where the shipped data (themes, demo traces) lives, installed or in a checkout; where the
user's cache goes; how much memory one load or run may take here."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tuiprof.units import size

_PACKAGE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """The folder `name` ('themes' or 'demo_traces'): inside the wheel, else the checkout's."""
    installed = _PACKAGE / "_data" / name
    if installed.is_dir():
        return installed
    return _PACKAGE.parent / name


def user_cache_dir() -> Path:
    """A writable per-user cache folder (XDG), used for Numba's compiled kernels."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tuiprof"


@dataclass(frozen=True)
class MemoryBudget:
    """Bytes one trace load, or one run, may take, and what they are half of (for messages)."""

    bytes: int
    of: str


def memory_budget() -> MemoryBudget:
    """Half the machine's physical memory, or half the process's address-space limit
    (``ulimit -v``, RLIMIT_AS) when that is smaller: what is too large for the machine is refused
    before anything is allocated, with a message instead of the OOM killer or a MemoryError."""
    try:
        budget = MemoryBudget(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2, "this machine's memory")
    except (ValueError, OSError, AttributeError):
        budget = MemoryBudget(8 << 30, "an assumed 16 GiB of memory")
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY and soft // 2 < budget.bytes:
            budget = MemoryBudget(soft // 2, "the process's memory limit, ulimit -v")
    except (ImportError, ValueError, OSError):
        pass
    return budget


human_size = size
"""The one byte-size rendering (`tuiprof.units.size`), under the name callers elsewhere import."""
