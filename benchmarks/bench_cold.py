"""What a first run after an install costs: `tuiprof report` with empty cache folders, paired with
a warm run, against other checkouts measured in the same invocation.

    python benchmarks/bench_cold.py [--baseline PATH ...] [--json OUT] [TARGET ...]

For each target (default: the vecadd demo, the vecadd ``.cu`` source with its launch script, and
transpose-tiled, all with default options) and each tree (this checkout, then every
``--baseline``, e.g. an untouched checkout of main): ``tuiprof report TARGET --format json`` in a
fresh process whose user cache (``XDG_CACHE_HOME``: Numba's compiled kernels, recorded demos,
builds) is a new empty folder, then the same command again with that folder now filled (the warm
run). Timed as CPU seconds (user + system of the process and the compilers it waited for), wall
seconds and peak memory, with the load average; printed per target and tree with the cold/warm
difference (what compiling cost) and each baseline's cold CPU over ours.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from bench_sweep import checkouts, load, run_report  # the same run of a report, timed

TARGETS = ("vecadd", "demo_traces/vecadd.cu", "transpose-tiled")
GOALS_CPU_S = {"demo_traces/vecadd.cu": 15.0, "transpose-tiled": 15.0}
"""Issue 23's goals for a first run, in CPU seconds."""


def report(tree: Path, target: str, cache: Path) -> dict:
    """One ``tuiprof report`` of `target` from `tree` with user cache folder `cache`."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(tree), XDG_CACHE_HOME=str(cache))
    return run_report(tree, target, [], env)[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, action="append", default=[], help="another checkout (repeatable)")
    ap.add_argument("--json", type=Path, default=None, help="write every measurement here")
    ap.add_argument("targets", nargs="*", default=list(TARGETS))
    args = ap.parse_args()
    trees, names = checkouts(args.baseline)
    print(f"cores {os.cpu_count()}; load average {load():.2f}; trees: "
          + "; ".join(f"{n} = {t}" for n, t in zip(names, trees)), flush=True)
    print(f"\n{'target':<22} {'tree':<5} {'cold CPU':>8} {'warm CPU':>8} {'compile':>8} {'cold wall':>9} "
          f"{'warm wall':>9} {'MB':>6} {'load':>5} {'cold ratio':>10}")
    results: dict[str, dict[str, dict]] = {}
    for target in args.targets:
        per: dict[str, dict] = {}
        for n, tree in zip(names, trees):
            with tempfile.TemporaryDirectory(prefix="tuiprof-cold-") as tmp:
                cold = report(tree, target, Path(tmp))
                warm = report(tree, target, Path(tmp))
            per[n] = dict(cold=cold, warm=warm)
            ratio = f"{cold['cpu'] / per['ours']['cold']['cpu']:9.2f}x" if n != "ours" else ""
            print(f"{target:<22} {n:<5} {cold['cpu']:8.1f} {warm['cpu']:8.1f} {cold['cpu'] - warm['cpu']:8.1f} "
                  f"{cold['wall']:9.1f} {warm['wall']:9.1f} {max(cold['rss_mb'], warm['rss_mb']):6.0f} "
                  f"{(cold['load'] + warm['load']) / 2:5.2f} {ratio:>10}", flush=True)
        results[target] = per
    for target, goal in GOALS_CPU_S.items():
        if target in results:
            cpu = results[target]["ours"]["cold"]["cpu"]
            print(f"{target}: first run {cpu:.1f} s CPU (goal < {goal:g} s)")
    if args.json:
        args.json.write_text(json.dumps(dict(trees=dict(zip(names, map(str, trees))), results=results), indent=1))


if __name__ == "__main__":
    main()
