"""The MD sweep (paper 002) against the main run it follows, measured in the same process.

    python benchmarks/bench_sweep.py [--trials 64] [DEMO ...]

For each demo: one Session with the default configuration (up to ``--trials`` trials at the
occupancy limit with the default early stop, then the sweep over MD = 1 .. limit with up to a
quarter of the trials each, reusing the main run for its own MD). Prints the main run's wall time, the sweep's, and their ratio against the
target (the sweep takes at most 4x one full run). A warm-up run compiles the kernels first.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_RATIO = 4.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("demos", nargs="*", default=["spmv-u", "spmv-vec-u", "transpose-tiled", "matmul16", "vecadd"])
    args = ap.parse_args()
    from tuiprof.session import RunConfig, Session

    Session.open("vecadd", RunConfig(trials=2, sweep_trials=2)).run()   # compile outside the timings
    print(f"{'demo':<16} {'MDs':>4} {'main s':>8} {'sweep s':>8} {'ratio':>6}  target <= {TARGET_RATIO:g}x   decision")
    for name in args.demos:
        s = Session.open(name, RunConfig(trials=args.trials))
        t0 = time.perf_counter()
        a = s.run()
        total = time.perf_counter() - t0
        d = a.decisions
        main_s = total - d.sweep_elapsed
        ratio = d.sweep_elapsed / main_s
        verdict = "met" if ratio <= TARGET_RATIO else "MISSED"
        advice = d.md.advice if d.md else d.md_note
        print(f"{name:<16} {len(s.sweep_mds()):>4} {main_s:8.2f} {d.sweep_elapsed:8.2f} {ratio:6.2f}  {verdict:<14} {advice}")


if __name__ == "__main__":
    main()
