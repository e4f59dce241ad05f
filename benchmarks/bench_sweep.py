"""What a user waits for: the default `tuiprof report` of every demo, end to end, against other
checkouts measured in the same invocation.

    python benchmarks/bench_sweep.py [--runs 2] [--baseline PATH ...] [--json OUT] [DEMO ...]

For each demo (default: all), `--runs` times, each tree in turn (this checkout, then every
``--baseline``, e.g. an untouched checkout of main): ``tuiprof report DEMO --format json`` in a
fresh process, timed as CPU seconds (user + system of that process), wall seconds and peak memory,
with the load average. Printed per demo and tree: the medians, the ratio of each baseline's
CPU to ours, and the MD decision (recommended MD, gain and its interval, the thesis rules' pick,
trials of the main run and of each sweep MD). ``agree`` says whether a baseline recommends the
same MD; ``range`` whether ours is no wider. Before the timings every tree runs every demo once
with two trials per MD, so that each geometry's kernels are compiled (or loaded) first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DEMOS = ("bfs", "cr", "cr-nbc", "matmul-tile16", "matmul-tile32", "matmul-tile8", "matmul16", "spmv-b", "spmv-b128",
         "spmv-u", "spmv-u128", "spmv-vec-b", "spmv-vec-b128", "spmv-vec-u", "spmv-vec-u128", "stencil7",
         "transpose-naive", "transpose-tiled", "vecadd")
GOAL_SPMV_U_CPU_S = 12.0


def load() -> float:
    return os.getloadavg()[0]


def checkouts(baselines: list[Path]) -> tuple[list[Path], list[str]]:
    """This checkout and the `--baseline` ones, with the names the tables give them."""
    names = ["ours", *[f"base{i + 1}" if len(baselines) > 1 else "base" for i in range(len(baselines))]]
    return [ROOT, *[b.resolve() for b in baselines]], names


def run_report(tree: Path, target: str, extra: list[str], env: dict[str, str]) -> tuple[dict, dict]:
    """One ``tuiprof report TARGET --format json`` from `tree` in a fresh process with `env`: its
    CPU, wall, peak memory and the load after it; and its JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "tuiprof", "report", target, "--format", "json", "-o", str(out),
                                 *extra], cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""  # before the wait: a full pipe blocks
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise SystemExit(f"{tree}: tuiprof report {target} failed ({code}):\n{err[-2000:]}")
        doc = json.loads(out.read_text())
    return dict(cpu=usage.ru_utime + usage.ru_stime, wall=wall, rss_mb=usage.ru_maxrss / 1024, load=load()), doc


def report(tree: Path, demo: str, extra: list[str]) -> dict:
    """One ``tuiprof report`` of `demo` from `tree` in a fresh process: its CPU, wall, peak
    memory and the MD decision of its JSON output."""
    figures, doc = run_report(tree, demo, extra, dict(os.environ, PYTHONPATH=str(tree)))
    run, d = doc["run"], doc["analysis"]["decisions"]
    md = d.get("md") or {}
    return dict(figures, trials=doc["analysis"]["trials"], md=run["md"], recommended=md.get("recommended_md"),
                gain=md.get("gain"), gain_range=md.get("gain_range"), thesis=md.get("thesis_md"),
                low=md.get("low_confidence"), md_trials={r["md"]: (r.get("simulated") or {}).get("trials") for r in md.get("rows", [])},
                note=d.get("md_note", ""))


def width(r: dict) -> float:
    g = r["gain_range"]
    return 0.0 if not g else g[1] - g[0]


def decision(r: dict) -> str:
    g = r["gain_range"]
    rng = f" [{g[0]:+.1%}..{g[1]:+.1%}]" if g else ""
    gain = f" {r['gain']:+.1%}" if r["gain"] is not None else ""
    per = ",".join(str(r["md_trials"][m]) for m in sorted(r["md_trials"]) if r["md_trials"][m] is not None)
    return (f"MD {r['recommended']}{gain}{rng} thesis {r['thesis']}{' low' if r['low'] else ''}; "
            f"trials {r['trials']}" + (f" / per MD {per}" if per else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--baseline", type=Path, action="append", default=[], help="another checkout (repeatable)")
    ap.add_argument("--json", type=Path, default=None, help="write every measurement here")
    ap.add_argument("--no-warm", action="store_true", help="skip the compile pass")
    ap.add_argument("demos", nargs="*", default=list(DEMOS))
    args = ap.parse_args()
    trees, names = checkouts(args.baseline)
    print(f"cores {os.cpu_count()}; load average {load():.2f}; trees: "
          + "; ".join(f"{n} = {t}" for n, t in zip(names, trees)), flush=True)
    if not args.no_warm:
        for tree in trees:
            for demo in args.demos:
                report(tree, demo, ["--trials", "2", "--sweep-trials", "2"])
        print(f"compiled every geometry (load average {load():.2f})", flush=True)
    results: dict[str, dict[str, list[dict]]] = {}
    print(f"\n{'demo':<16} {'tree':<6} {'CPU s':>7} {'wall s':>7} {'MB':>6} {'load':>5} {'CPU ratio':>9}  decision")
    for demo in args.demos:
        per: dict[str, list[dict]] = {n: [] for n in names}
        for _ in range(args.runs):
            for n, tree in zip(names, trees):
                per[n].append(report(tree, demo, []))
        results[demo] = per
        ours_cpu = statistics.median(r["cpu"] for r in per["ours"])
        for n in names:
            rs = per[n]
            cpu = statistics.median(r["cpu"] for r in rs)
            ratio = f"{cpu / ours_cpu:8.2f}x" if n != "ours" else ""
            agree = ""
            if n != "ours":
                same = rs[0]["recommended"] == per["ours"][0]["recommended"]
                narrow = width(per["ours"][0]) <= width(rs[0]) + 1e-9
                agree = f"  agree={'yes' if same else 'NO'} range={'ok' if narrow else 'WIDER'}"
            print(f"{demo:<16} {n:<6} {cpu:7.1f} {statistics.median(r['wall'] for r in rs):7.1f} "
                  f"{max(r['rss_mb'] for r in rs):6.0f} {statistics.mean(r['load'] for r in rs):5.2f} {ratio:>9}  "
                  f"{decision(rs[0])}{agree}", flush=True)
    if "spmv-u" in results:
        cpu = statistics.median(r["cpu"] for r in results["spmv-u"]["ours"])
        print(f"\nspmv-u: {cpu:.1f} s CPU (goal < {GOAL_SPMV_U_CPU_S:g} s)")
    if args.json:
        args.json.write_text(json.dumps(dict(trees=dict(zip(names, map(str, trees))), results=results), indent=1))


if __name__ == "__main__":
    main()
