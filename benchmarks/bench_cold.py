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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ("vecadd", "demo_traces/vecadd.cu", "transpose-tiled")
GOALS_CPU_S = {"demo_traces/vecadd.cu": 15.0, "transpose-tiled": 15.0}
"""Issue 23's goals for a first run, in CPU seconds."""


def load() -> float:
    return os.getloadavg()[0]


def report(tree: Path, target: str, cache: Path) -> dict:
    """One ``tuiprof report`` of `target` from `tree` with user cache folder `cache`."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(tree), XDG_CACHE_HOME=str(cache))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "tuiprof", "report", target, "--format", "json", "-o", str(out)],
                                cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise SystemExit(f"{tree}: tuiprof report {target} failed ({code}):\n{err[-2000:]}")
    return dict(cpu=usage.ru_utime + usage.ru_stime, wall=wall, rss_mb=usage.ru_maxrss / 1024, load=load())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, action="append", default=[], help="another checkout (repeatable)")
    ap.add_argument("--json", type=Path, default=None, help="write every measurement here")
    ap.add_argument("targets", nargs="*", default=list(TARGETS))
    args = ap.parse_args()
    trees = [ROOT, *[b.resolve() for b in args.baseline]]
    names = ["ours", *[f"base{i + 1}" if len(args.baseline) > 1 else "base" for i in range(len(args.baseline))]]
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
