"""The demos, by their stable CLI names (`spmv-u`, `vecadd`, ...): real CUDA kernels in
``demo_traces/`` with their launch scripts, and their traces recorded by the emulator.

Most traces ship inside the package (``demo_traces/<name>.tptrace``, made by
``benchmarks/make_demo_traces.py``). The others (large: random gathers do not compress) are
recorded from their kernel and launch script on first use, deterministically, and cached in the
user cache folder. The cache
is written atomically (`save_trace`), and a cached demo that fails to load (a disk error, a
half-copied cache, a hand edit) is built again once instead of being reported damaged forever.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tuiprof import __version__
from tuiprof.errors import OutputError, TraceError, UsageError
from tuiprof.resources import data_dir, user_cache_dir
from tuiprof.trace.data import Trace
from tuiprof.trace.io import SUFFIX, load_trace, read_header
from tuiprof.trace.text import printable, shown_path

if TYPE_CHECKING:
    from tuiprof.collect.options import CollectOptions


def demo_dir() -> Path:
    return data_dir("demo_traces")


@dataclass(frozen=True)
class Demo:
    """A demo: its kernel file and launch script in ``demo_traces/``, and its snapshot size when
    it is not Baghsorkhi12's default (4 x the CTAs resident at once), to keep a shipped file small."""

    name: str
    source: str
    script: str
    snapshot: int | None = None
    kernel: str | None = None
    """The kernel whose launch is recorded (None: the first launched) ..."""
    launch_index: int = 0
    """... and which of its launches."""
    start: int = 0
    """The snapshot's first counted CTA ..."""
    warm: int = 0
    """... and how many CTAs before it are recorded to warm the caches (replayed, not counted)."""


CATALOGUE: dict[str, Demo] = {d.name: d for d in (
    Demo("vecadd", "vecadd.cu", "vecadd_launch.py"),
    *(Demo(f"spmv-{m}", "spmv.cu", "spmv_launch.py" if m == "u" else f"spmv_launch_{m}.py")
      for m in ("u", "b", "u128", "b128")),
    *(Demo(f"spmv-vec-{m}", "spmv.cu", f"spmv_launch_vec_{m}.py") for m in ("u", "b", "u128", "b128")),
    Demo("transpose-naive", "transpose.cu", "transpose_launch.py", snapshot=640),
    Demo("transpose-tiled", "transpose.cu", "transpose_launch_tiled.py", snapshot=640),
    Demo("matmul16", "matmul.cu", "matmul_launch.py", snapshot=128, start=128, warm=128),
    Demo("stencil7", "stencil.cu", "stencil_launch.py", snapshot=1280),
    Demo("matmul-tile8", "matmul_tiles.cu", "matmul_tiles_launch_8.py", snapshot=512, start=512, warm=512),
    Demo("matmul-tile16", "matmul_tiles.cu", "matmul_tiles_launch.py", snapshot=128, start=128, warm=128),
    Demo("matmul-tile32", "matmul_tiles.cu", "matmul_tiles_launch_32.py", snapshot=40, start=40, warm=40),
    Demo("cr", "cyclic_reduction.cu", "cyclic_reduction_launch.py"),
    Demo("cr-nbc", "cyclic_reduction.cu", "cyclic_reduction_launch_nbc.py"),
    Demo("bfs", "bfs.cu", "bfs_launch.py", kernel="bfs_expand", launch_index=5),  # the busiest BFS level
)}
"""Every demo. The synthetic models of `tuiprof.trace.synth` stay as the test oracles of the
emulator's recordings (tests/collect/test_collect_pipeline.py)."""


def _built_names() -> list[str]:
    shipped = {p.name[: -len(SUFFIX)] for p in demo_dir().glob(f"*{SUFFIX}")}
    return [n for n in CATALOGUE if n not in shipped]


def demo_names() -> list[str]:
    """Names of every demo (shipped or built on first use), sorted."""
    shipped = {p.name[: -len(SUFFIX)] for p in demo_dir().glob(f"*{SUFFIX}")}
    return sorted(shipped | set(CATALOGUE))


def demo_collection(name: str) -> tuple[Path, "CollectOptions"]:
    """Demo `name` as a kernel file and the collect options that record it (in the emulator)."""
    from tuiprof.collect.options import CollectOptions

    d = CATALOGUE[name]
    return demo_dir() / d.source, CollectOptions(launch=demo_dir() / d.script, snapshot=d.snapshot, kernel=d.kernel,
                                                 launch_index=d.launch_index, snapshot_start=d.start,
                                                 snapshot_warm=d.warm)


def record_demo(name: str) -> Trace:
    """Record demo `name` with the emulator from its kernel and launch script (no date: the same
    demo gives the same bytes)."""
    import dataclasses

    from tuiprof.collect.pipeline import collect_trace
    from tuiprof.config import RunConfig

    source, options = demo_collection(name)
    trace = collect_trace(source, RunConfig(collect=options))
    return dataclasses.replace(trace, provenance=dataclasses.replace(trace.provenance, date=""))


def _cache_path(name: str) -> Path:
    return user_cache_dir() / "demo_traces" / f"{name}-{__version__}{SUFFIX}"


def _build(name: str, cached: Path, why: str = "first use only") -> None:
    """Record demo `name` with the emulator into `cached` (atomically), saying so and `why`."""
    import tempfile

    from tuiprof.output import note
    from tuiprof.trace.io import save_trace

    folder = cached.parent
    try:  # before the recording (a minute): a cache that cannot take the result fails at once
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        cause = "a file is in the way" if isinstance(exc, (FileExistsError, NotADirectoryError)) else \
            (exc.strerror or "it cannot be written").lower()
        raise OutputError(f"cannot build demo {name}: the cache folder {shown_path(folder)} cannot be created or "
                          f"written ({cause})",
                          "set XDG_CACHE_HOME to a writable folder, or use a shipped demo (`tuiprof demos`)") from None
    note(f"recording demo {name} with the emulator ({why})...")
    try:
        save_trace(record_demo(name), cached)
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
    except TraceError as exc:
        name = _cached_demo(path)
        if name is None:
            raise
        damage = exc.message
    _build(name, path, f"the cached copy cannot be loaded: {damage}")
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
            rows.append((name, CATALOGUE[name].source, "-", "-",
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
