"""The demo traces, by their stable CLI names (`spmv-u`, `vecadd`, ...).

Most ship inside the package (``demo_traces/``). The two 128-nonzeros-per-row random SpMV demos
do not (their random gathers do not compress: 15-18 MB each); they are built from their
synthetic model on first use, deterministically, and cached in the user cache folder. The cache
is written atomically (`save_trace`), and a cached demo that fails to load (a disk error, a
half-copied cache, a hand edit) is built again once instead of being reported damaged forever.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tuiprof import __version__
from tuiprof.errors import OutputError, TraceError, UsageError
from tuiprof.resources import data_dir, user_cache_dir
from tuiprof.trace.io import SUFFIX, load_trace, read_header
from tuiprof.trace.model import Trace
from tuiprof.trace.text import printable, shown_path


def demo_dir() -> Path:
    return data_dir("demo_traces")


def _built_names() -> list[str]:
    from tuiprof.trace.synth import DEMOS

    return [n for n, d in DEMOS.items() if not d.shipped]


def demo_names() -> list[str]:
    """Names of every demo (shipped or built on first use), sorted."""
    shipped = {p.name[: -len(SUFFIX)] for p in demo_dir().glob(f"*{SUFFIX}")}
    return sorted(shipped | set(_built_names()))


def _cache_path(name: str) -> Path:
    return user_cache_dir() / "demo_traces" / f"{name}-{__version__}{SUFFIX}"


def _build(name: str, cached: Path) -> None:
    """Build demo `name` from its synthetic model into `cached` (atomically)."""
    from tuiprof.trace.io import save_trace
    from tuiprof.trace.synth import build_demo

    folder = cached.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = "a file is in the way" if isinstance(exc, (FileExistsError, NotADirectoryError)) else \
            (exc.strerror or "it cannot be created").lower()
        raise OutputError(f"cannot build demo {name}: the cache folder {shown_path(folder)} cannot be created ({why})",
                          "set XDG_CACHE_HOME to a writable folder, or use a shipped demo (`tuiprof demos`)") from None
    print(f"building demo {name} from its synthetic model (first use only)...", file=sys.stderr, flush=True)
    try:
        save_trace(build_demo(name), cached)
    except OutputError as exc:
        raise OutputError(f"cannot build demo {name}: {exc.message}",
                          "set XDG_CACHE_HOME to a writable folder, or use a shipped demo (`tuiprof demos`)") from None


def demo_path(name: str, build: bool = True) -> Path:
    """The trace file of demo `name`; an unshipped demo is built and cached first (if `build`)."""
    shipped = demo_dir() / f"{name}{SUFFIX}"
    if shipped.exists():
        return shipped
    cached = _cache_path(name)
    if build and not os.path.exists(cached):
        _build(name, cached)
    return cached


def _cached_demo(path: Path) -> str | None:
    """The demo name when `path` is the cache file of a demo built on first use, else None."""
    for name in _built_names():
        cached = _cache_path(name)
        if path == cached or os.path.abspath(path) == os.path.abspath(cached):
            return name
    return None


def load(path: Path) -> Trace:
    """`load_trace`, except that a cached demo (built on first use) that fails to load is built
    again, once, and loaded from the new file."""
    try:
        return load_trace(path)
    except TraceError:
        name = _cached_demo(path)
        if name is None:
            raise
    print(f"the cached demo {name} cannot be loaded; building it again", file=sys.stderr, flush=True)
    _build(name, path)
    return load_trace(path)


def demo_table() -> str:
    """One line per demo: name, kernel, arch, warp accesses, snapshot."""
    rows = [("demo", "kernel", "arch", "accesses", "snapshot")]
    for name in demo_names():
        path = demo_path(name, build=False)
        header = None
        if path.exists():
            try:
                header = read_header(path)
            except TraceError:
                if _cached_demo(path) is None:
                    raise
        if header is not None:
            rows.append((name, printable(header["launch"]["kernel"], 40), printable(header["provenance"]["arch"], 20),
                         str(header["counts"]["accesses"]), f"{header['counts']['snapshot_ctas']} CTAs"))
        else:
            from tuiprof.trace.synth import DEMOS

            rows.append((name, DEMOS[name].source, DEMOS[name].arch, "-",
                         "built on first use" if not path.exists() else "damaged: built again on next use"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows) + "\n"


def resolve_target(target: str) -> Path:
    """A trace path from a file path or a demo name."""
    path = Path(target)
    if os.path.lexists(target) or target.endswith(SUFFIX) or os.sep in target:  # lexists: no OSError on odd names
        return path
    if target in demo_names():
        return demo_path(target)
    raise UsageError(f"'{shown_path(target)}' is neither a file nor a demo name",
                     "demos are: " + ", ".join(demo_names()))
