"""Numba, with its on-disk cache pointed at a writable per-user folder.

Import `njit` from here, never from numba directly: the cache folder must be set before numba is
first imported, so that ``cache=True`` works when tuiprof is installed read-only.
"""

from __future__ import annotations

import os

from tuiprof.resources import user_cache_dir

os.environ.setdefault("NUMBA_CACHE_DIR", str(user_cache_dir() / "numba"))

from numba import njit  # noqa: E402

__all__ = ["njit"]
