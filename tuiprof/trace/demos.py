"""The shipped demo traces, by their stable CLI names (`spmv-u`, `vecadd`, ...)."""

from __future__ import annotations

from pathlib import Path

import os

from tuiprof.errors import UsageError
from tuiprof.resources import data_dir
from tuiprof.trace.io import SUFFIX, read_header


def demo_dir() -> Path:
    return data_dir("demo_traces")


def demo_names() -> list[str]:
    """Names of the demo traces present, sorted."""
    return sorted(p.name[: -len(SUFFIX)] for p in demo_dir().glob(f"*{SUFFIX}"))


def demo_path(name: str) -> Path:
    return demo_dir() / f"{name}{SUFFIX}"


def demo_table() -> str:
    """One line per demo: name, kernel, arch, warp accesses, what it models."""
    rows = [("demo", "kernel", "arch", "accesses", "snapshot")]
    for name in demo_names():
        h = read_header(demo_path(name))
        rows.append((name, h["launch"]["kernel"], h["provenance"]["arch"], str(h["counts"]["accesses"]),
                     f"{h['counts']['snapshot_ctas']} CTAs"))
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
                     "demos are: " + (", ".join(demo_names()) or "(none installed)"))
