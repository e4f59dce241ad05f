"""The demo traces, by their stable CLI names (`spmv-u`, `vecadd`, ...).

Most ship inside the package (``demo_traces/``). The two 128-nonzeros-per-row random SpMV demos
do not (their random gathers do not compress: 15-18 MB each); they are built from their
synthetic model on first use, deterministically, and cached in the user cache folder.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tuiprof import __version__
from tuiprof.errors import UsageError
from tuiprof.resources import data_dir, user_cache_dir
from tuiprof.trace.io import SUFFIX, read_header


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


def demo_path(name: str, build: bool = True) -> Path:
    """The trace file of demo `name`; an unshipped demo is built and cached first (if `build`)."""
    shipped = demo_dir() / f"{name}{SUFFIX}"
    if shipped.exists():
        return shipped
    cached = _cache_path(name)
    if build and not cached.exists():
        from tuiprof.trace.io import save_trace
        from tuiprof.trace.synth import build_demo

        print(f"building demo {name} from its synthetic model (first use only)...", file=sys.stderr, flush=True)
        cached.parent.mkdir(parents=True, exist_ok=True)
        save_trace(build_demo(name), cached)
    return cached


def demo_table() -> str:
    """One line per demo: name, kernel, arch, warp accesses, snapshot."""
    rows = [("demo", "kernel", "arch", "accesses", "snapshot")]
    for name in demo_names():
        path = demo_path(name, build=False)
        if path.exists():
            h = read_header(path)
            rows.append((name, h["launch"]["kernel"], h["provenance"]["arch"], str(h["counts"]["accesses"]),
                         f"{h['counts']['snapshot_ctas']} CTAs"))
        else:
            from tuiprof.trace.synth import DEMOS

            rows.append((name, DEMOS[name].source, DEMOS[name].arch, "-", "built on first use"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows) + "\n"


def resolve_target(target: str) -> Path:
    """A trace path from a file path or a demo name."""
    path = Path(target)
    if path.exists() or target.endswith(SUFFIX) or os.sep in target:
        return path
    if target in demo_names():
        return demo_path(target)
    raise UsageError(f"{target!r} is neither a file nor a demo name",
                     "demos are: " + ", ".join(demo_names()))
