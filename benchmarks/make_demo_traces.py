"""Build every synthetic demo and save it as ``demo_traces/<name>.tptrace``.

    python benchmarks/make_demo_traces.py [NAME ...] [--out DIR]

Prints, per demo, the warp accesses, the file size and the build and save times. The demos are
deterministic (fixed seeds), so rebuilding changes only the provenance date.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuiprof.trace.io import SUFFIX, save_trace  # noqa: E402
from tuiprof.trace.synth import DEMOS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", metavar="NAME",
                    help="demos to build (default: the shipped ones; the others are built on first use)")
    ap.add_argument("--out", type=Path, default=ROOT / "demo_traces", help="output folder (default: demo_traces/)")
    args = ap.parse_args(argv)
    unknown = [n for n in args.names if n not in DEMOS]
    if unknown:
        ap.error(f"unknown demo(s) {', '.join(unknown)}; demos are: {', '.join(DEMOS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"{'demo':16} {'accesses':>10} {'warps':>7} {'CTAs':>6} {'size':>10} {'build':>7} {'save':>7}")
    total = 0
    for name in args.names or [n for n, d in DEMOS.items() if d.shipped]:
        t0 = time.perf_counter()
        trace = DEMOS[name].build()
        t1 = time.perf_counter()
        path = save_trace(trace, args.out / f"{name}{SUFFIX}")
        t2 = time.perf_counter()
        size = path.stat().st_size
        total += size
        print(f"{name:16} {trace.n_accesses:>10,} {trace.n_warps:>7,} {trace.snapshot.n_ctas:>6,} "
              f"{size / 1024:>8,.0f} K {t1 - t0:>6.2f}s {t2 - t1:>6.2f}s", flush=True)
    print(f"{'total':16} {'':>10} {'':>7} {'':>6} {total / 1024:>8,.0f} K")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
