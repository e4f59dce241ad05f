"""Record demos with the emulator and save them as ``demo_traces/<name>.tptrace``.

    python benchmarks/make_demo_traces.py [NAME ...] [--out DIR]

Each demo is its kernel file and launch script in ``demo_traces/`` (the catalogue is
``tuiprof.demos.CATALOGUE``). Recording is deterministic and the files carry no date, so
rebuilding leaves a file unchanged unless its content changed. Prints, per demo, the warp
accesses, the file size and the record and save times. Without names: the shipped demos.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuiprof.demos import CATALOGUE, record_demo  # noqa: E402
from tuiprof.trace.io import SUFFIX, save_trace  # noqa: E402

SHIPPED = ("vecadd", "spmv-u", "spmv-b", "spmv-b128", "spmv-vec-u", "spmv-vec-b", "spmv-vec-b128",
           "transpose-naive", "transpose-tiled", "matmul16", "stencil7", "cr", "cr-nbc", "bfs",
           "matmul-tile8", "matmul-tile16", "matmul-tile32")
"""Demos whose traces ship in the package; the others are recorded on first use."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", metavar="NAME", help="demos to record (default: the shipped ones)")
    ap.add_argument("--out", type=Path, default=ROOT / "demo_traces", help="output folder (default: demo_traces/)")
    args = ap.parse_args(argv)
    unknown = [n for n in args.names if n not in CATALOGUE]
    if unknown:
        ap.error(f"unknown demo(s) {', '.join(unknown)}; demos are: {', '.join(CATALOGUE)}")
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"{'demo':16} {'accesses':>10} {'warps':>7} {'CTAs':>6} {'size':>10} {'record':>8} {'save':>7}")
    total = 0
    for name in args.names or SHIPPED:
        t0 = time.perf_counter()
        trace = record_demo(name)
        t1 = time.perf_counter()
        path = save_trace(trace, args.out / f"{name}{SUFFIX}")
        t2 = time.perf_counter()
        size = path.stat().st_size
        total += size
        print(f"{name:16} {trace.n_accesses:>10,} {trace.n_warps:>7,} {trace.snapshot.n_ctas:>6,} "
              f"{size / 1024:>8,.0f} K {t1 - t0:>7.1f}s {t2 - t1:>6.2f}s", flush=True)
    print(f"{'total':16} {'':>10} {'':>7} {'':>6} {total / 1024:>8,.0f} K")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
