"""Numba, with its on-disk cache pointed at a writable per-user folder.

Import `njit` from here, never from numba directly: the cache folder must be set before numba is
first imported, so that ``cache=True`` works when tuiprof is installed read-only. The folder is
``<user cache>/numba/<digest of the simulator's sources>``: Numba validates a cached kernel
against its own file only, and the trial kernel inlines helpers from other files, so a change to
any of them must not reuse stale machine code. An explicit ``NUMBA_CACHE_DIR`` wins.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from tuiprof.resources import user_cache_dir


def _sources_digest() -> str:
    h = hashlib.sha1()
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def kernel_cache_dir() -> Path:
    """Where compiled kernels are cached (NUMBA_CACHE_DIR, or the per-version default)."""
    return Path(os.environ.get("NUMBA_CACHE_DIR") or user_cache_dir() / "numba" / _sources_digest())


os.environ.setdefault("NUMBA_CACHE_DIR", str(user_cache_dir() / "numba" / _sources_digest()))

from numba import njit  # noqa: E402

KERNEL = dict(nogil=True, cache=True, error_model="numpy")
"""Options of every kernel: releases the GIL, cached on disk; integer division by zero does not
raise (no exception path, which would also defeat reference-count pruning, see `INLINE`)."""

INLINE = dict(KERNEL, inline="always")
"""Options of the small helpers called inside hot loops: inlined at the Numba IR level. A call
that is not inlined keeps an error-return path, and around it Numba's reference-count pruning
cannot remove the caller's atomic incref/decref pairs on its arrays (measured: 20-40 ns per call
instead of 2). Helpers must also not return arrays into a loop variable, for the same reason."""


@njit(nogil=True, cache=True)
def keep(a):
    """Call at the very end of a kernel that branches, once per array argument.

    Numba increfs each array argument on entry and decrefs it where the variable dies; when it
    dies on several branches, the reference-count pruning pass leaves the atomic updates in
    place and every call pays them. A last use in the exit block lets the pass remove the pair.
    """
    return 0


__all__ = ["INLINE", "KERNEL", "keep", "kernel_cache_dir", "njit"]
