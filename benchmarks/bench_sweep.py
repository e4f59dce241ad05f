"""What a user waits for: `tuiprof report` end to end, and the MD sweep against the main run.

    python benchmarks/bench_sweep.py [--runs 3] [--baseline PATH] [--trials 64] [DEMO ...]

1. ``tuiprof report spmv-u`` with its defaults (early stop, the MD sweep), in a fresh process,
   `--runs` times: wall seconds from start to exit, with the load average. With ``--baseline
   PATH`` (another checkout, e.g. the main branch), the same command runs from there too,
   interleaved run by run, and the ratio is printed.
2. For each demo: one Session with the default configuration. The sweep's trials run in the
   main run's pool beside its last trials (past its minimum, the main run keeps one trial in
   flight and the other worker serves the sweep); printed are the main
   run's wall time, the time from its end to the MD decision, and the moment the first MD
   decision (every MD at its minimum trials) was shown. A warm-up run compiles the kernels
   first.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GOAL_REPORT_S = 15.0
BAR_REPORT_S = 25.0


def load() -> str:
    return f"load average {os.getloadavg()[0]:.2f}"


def report_once(tree: Path, demo: str) -> float:
    env = dict(os.environ, PYTHONPATH=str(tree))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tuiprof", "report", demo], cwd=tree, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout to time the same command from")
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--skip-report", action="store_true")
    ap.add_argument("demos", nargs="*", default=["spmv-u", "spmv-vec-u", "transpose-tiled", "matmul16", "vecadd"])
    args = ap.parse_args()

    if not args.skip_report:
        report_once(ROOT, "vecadd")  # compile or load the kernels outside the timings
        print(f"1. tuiprof report spmv-u, defaults, end to end ({load()})")
        ours, base = [], []
        for k in range(args.runs):
            ours.append(report_once(ROOT, "spmv-u"))
            line = f"   run {k + 1}: {ours[-1]:6.1f} s ({load()})"
            if args.baseline is not None:
                base.append(report_once(args.baseline, "spmv-u"))
                line += f"   baseline {base[-1]:6.1f} s ({load()}) ratio {base[-1] / ours[-1]:.2f}x"
            print(line, flush=True)
        print(f"   median {sorted(ours)[len(ours) // 2]:.1f} s; goal < {GOAL_REPORT_S:g} s, bar {BAR_REPORT_S:g} s")

    from tuiprof.session import AnalysisUpdated, RunConfig, Session

    Session.open("vecadd", RunConfig(trials=2, sweep_trials=2)).run()  # compile outside the timings
    print(f"\n2. main run and MD sweep per demo ({load()})")
    print(f"   {'demo':<16} {'MDs':>4} {'main s':>7} {'sweep s':>8} {'first MD decision s':>20}  decision")
    for name in args.demos:
        s = Session.open(name, RunConfig(trials=args.trials))
        t0 = time.perf_counter()
        first: list[float] = []

        def on_event(e, t0=t0, first=first) -> None:
            if isinstance(e, AnalysisUpdated) and not first and e.analysis.decisions is not None \
                    and e.analysis.decisions.md is not None:
                first.append(time.perf_counter() - t0)

        a = s.run(on_event)
        total = time.perf_counter() - t0
        d = a.decisions
        main_s = total - d.sweep_elapsed
        first_s = f"{first[0]:.1f}" if first else "-"
        advice = d.md.advice if d.md else d.md_note
        print(f"   {name:<16} {len(s.sweep_mds()):>4} {main_s:7.1f} {d.sweep_elapsed:8.1f} {first_s:>20}  {advice}",
              flush=True)
    print(f"   ({load()})")


if __name__ == "__main__":
    main()
