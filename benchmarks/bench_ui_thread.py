"""What a run costs the UI's thread, in CPU seconds (load-independent, unlike `bench_tui.py`'s
wall-clock key-to-repaint): the analysis the run's thread makes about ten times a second over the
trials so far (it holds the GIL, so a key waits for it), and the UI thread's work per analysis
update (repaint included), with the screen layouts and source rows drawn per update. Prints
figures; run on demand (never in the tests). `--help` explains the arguments.

Each `--tree` (a checkout, put first on PYTHONPATH) is measured in a child process of its own,
the trees taking turns within each repeat, so that a before/after comparison shares the
machine; the figures are each thread's CPU time (`time.thread_time`), not wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r'''
import asyncio, dataclasses, json, sys, time
import numpy as np
demo, counts, updates = sys.argv[1], [int(x) for x in sys.argv[2].split(",")], int(sys.argv[3])
from tests.support.fixed_analysis import fixed, fixed_app, made_up_trial
from tuiprof.session import AnalysisUpdated, RunConfig, Session, TrialDone
from tuiprof.sim.montecarlo import MonteCarlo
out = {}
# 1. The run thread's analysis over n trials (one simulated trial repeated: its DRAM batches are real).
s = Session.open(demo, RunConfig(trials=2, tolerance=None, sweep=False))
s.run()
mc = MonteCarlo(s.trace, s.arch, trials=2, md=s.md, prepared=s.prepared)
r = mc.run_one(0)
s._listening = True
for n in counts:
    res = [dataclasses.replace(r, index=i) for i in range(n)]
    t = time.thread_time(); s._analyse(res); out[f"analysis of {n} trials"] = time.thread_time() - t
# 2. The UI thread per analysis update (made-up trials: fixed data), layouts and source rows drawn.
from textual.screen import Screen
from tuiprof.tui.panes.source import SourceView
seen = {"layouts": 0, "rows": 0}
real_layout, real_line = Screen._refresh_layout, SourceView.render_line
def layout(self, *a, **k):
    seen["layouts"] += 1
    return real_layout(self, *a, **k)
def line(self, y):
    seen["rows"] += 1
    return real_line(self, y)
Screen._refresh_layout, SourceView.render_line = layout, line
session, _ = fixed(demo)
rng = np.random.default_rng(7)
trials = [made_up_trial(session, session.md, i, rng) for i in range(updates + 2)]
per_md = {m: [made_up_trial(session, m, i, rng) for i in range(session.sweep_trial_count())]
          for m in session.sweep_mds() if m != session.md}
analyses = [dataclasses.replace(session.analysis_of(trials[:k], per_md), decisions=None) for k in range(2, updates + 2)]
async def ui():
    app = fixed_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.5)
        app.phase, app.stale = "running", False
        cpu = []
        seen["layouts"] = seen["rows"] = 0
        for k, a in enumerate(analyses):
            t = time.thread_time()
            app._handle(TrialDone(trials[k], k + 2, 64))
            app._handle(AnalysisUpdated(a))
            app._apply_pending()
            await pilot.pause(0.12)  # a tick and a frame
            cpu.append(time.thread_time() - t)
        out["UI thread per update (median)"] = float(np.median(cpu))
        out["screen layouts per update"] = seen["layouts"] / len(analyses)
        out["source rows drawn per update"] = seen["rows"] / len(analyses)
asyncio.run(ui())
print(json.dumps(out))
'''


def run_child(tree: str, child: str, *args: str) -> dict:
    """The JSON that Python source `child` prints last, run with `args` in a fresh process that
    imports tuiprof from `tree`."""
    env = {**os.environ, "PYTHONPATH": tree}
    done = subprocess.run([sys.executable, "-c", child, *args], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=3600)
    if done.returncode:
        raise SystemExit(f"{tree}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def demo_and_trees(ap: argparse.ArgumentParser) -> None:
    """The arguments the UI-thread benchmarks share: the demo, and the checkouts to compare."""
    ap.add_argument("demo", nargs="?", default="spmv-u", help="the demo (default spmv-u)")
    ap.add_argument("--tree", action="append", default=[],
                    help="a tuiprof checkout (with its tests/), put first on PYTHONPATH (repeatable); default: .")


def measure(tree: str, demo: str, counts: str, updates: int) -> dict[str, float]:
    return run_child(tree, CHILD, demo, counts, str(updates))


def main() -> None:
    ap = argparse.ArgumentParser(
        description="CPU time a run costs the UI's thread: the run thread's analysis over n trials (it "
                    "holds the GIL) and the UI thread's work, layouts and source rows drawn per analysis "
                    "update; each thread's CPU time, so that a loaded machine changes little.",
        epilog="Example, before and after: python benchmarks/bench_ui_thread.py --tree /work/base --tree .")
    demo_and_trees(ap)
    ap.add_argument("--trials", default="16,256,2048",
                    help="trial counts to analyse, comma-separated (default 16,256,2048)")
    ap.add_argument("--updates", type=int, default=24, help="analysis updates fed to the UI (default 24)")
    ap.add_argument("--repeat", type=int, default=1, help="measurements per tree (default 1)")
    args = ap.parse_args()
    trees = [os.path.abspath(t) for t in args.tree] or [os.path.abspath(".")]
    figures: dict[str, list[dict[str, float]]] = {t: [] for t in trees}
    for r in range(args.repeat):
        for tree in trees:
            print(f"repeat {r + 1}/{args.repeat}: {tree}", file=sys.stderr, flush=True)
            figures[tree].append(measure(tree, args.demo, args.trials, args.updates))
    print(f"demo {args.demo}; load average {os.getloadavg()[0]:.2f}; CPU seconds of the thread named (ms)")
    for tree, runs in figures.items():
        print(f"\n== {tree}")
        for key in runs[0]:
            values = [run[key] for run in runs]
            scale = 1000 if "per update (" in key or key.startswith("analysis") else 1
            unit = " ms" if scale == 1000 else ""
            print(f"  {key:36s} " + " ".join(f"{scale * v:9.1f}{unit}" for v in values))
    if len(trees) == 2:
        a, b = figures[trees[0]], figures[trees[1]]
        print("\nratio first/second tree (min over repeats):")
        for key in a[0]:
            lo_b = min(run[key] for run in b)
            print(f"  {key:36s} {min(run[key] for run in a) / lo_b:9.1f}x" if lo_b else f"  {key:36s}       n/a")


if __name__ == "__main__":
    main()
