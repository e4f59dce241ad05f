"""Where the shipped data (themes, demo traces) lives, installed or in a checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """The folder `name` ('themes' or 'demo_traces'): inside the wheel, else the checkout's."""
    installed = _PACKAGE / "_data" / name
    if installed.is_dir():
        return installed
    return _PACKAGE.parent / name


def user_cache_dir() -> Path:
    """A writable per-user cache folder (XDG), used for Numba's compiled kernels."""
    import os

    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tuiprof"
