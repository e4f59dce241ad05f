"""What each key costs the UI's thread, in CPU milliseconds (load-independent, unlike
`bench_tui.py`'s wall-clock key-to-repaint): under Pilot, on the fixed analysis of a demo at
120x40, each of Enter/Esc (drill-down), m, a, e, ?, ctrl+p and the Esc that closes each is
pressed in turn; the figure is the main thread's CPU time (`time.thread_time`) from the press
until the screen has settled (0.25 s later: less than the 0.4 s after which a full garbage
collection may run), with what Textual did meanwhile: screen layouts, widget line renders,
recomposes, widgets composed, full (generation 2) garbage collections and their CPU. The first
round warms caches up and is not kept, except its Enter: the session's first, shown apart. Prints figures; run on
demand (never in the tests). `--help` explains the arguments.

Each `--tree` (a checkout, put first on PYTHONPATH) is measured in a child process of its own,
the trees taking turns within each repeat.
"""

from __future__ import annotations

import argparse
import os
import sys

from bench_ui_thread import demo_and_trees, run_child  # one way to run a measuring child per tree, one set of arguments

CHILD = r'''
import asyncio, gc, json, statistics, sys, time
from collections import Counter
demo, presses = sys.argv[1], int(sys.argv[2])
from tests.support.fixed_analysis import fixed, fixed_app
from textual.screen import Screen
from textual.widget import Widget
seen = Counter()
def counted(cls, name, label):
    real = getattr(cls, name)
    if asyncio.iscoroutinefunction(real):
        async def f(self, *a, **k):
            seen[label] += 1
            return await real(self, *a, **k)
    else:
        def f(self, *a, **k):
            seen[label] += 1
            return real(self, *a, **k)
    setattr(cls, name, f)
counted(Screen, "_refresh_layout", "layouts")
counted(Widget, "render_lines", "line renders")
counted(Widget, "recompose", "recomposes")
counted(Widget, "_compose", "composes")
started = {}
def on_gc(phase, info):
    if info["generation"] != 2:
        return
    if phase == "start":
        started["t"] = time.thread_time()
    else:
        seen["full collections"] += 1
        seen["full collection ms"] += 1000 * (time.thread_time() - started["t"])
gc.callbacks.append(on_gc)
KEYS = [("enter", "Enter (drill-down)"), ("escape", "Esc from drill-down"), ("m", "m"), ("escape", "Esc from m"),
        ("a", "a"), ("escape", "Esc from a"), ("e", "e"), ("escape", "Esc from e"), ("question_mark", "?"),
        ("escape", "Esc from ?"), ("ctrl+p", "ctrl+p"), ("escape", "Esc from ctrl+p")]
fixed(demo)
rows = {}
first = []
async def main():
    app = fixed_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(1.0)
        for rep in range(presses + 1):  # the first round warms caches up and is not kept
            for key, name in KEYS:
                seen.clear()
                t = time.thread_time()
                await pilot.press(key)
                await pilot.pause(0.25)
                cpu = 1000 * (time.thread_time() - t)
                await pilot.pause(0.6)
                if rep:
                    rows.setdefault(name, []).append({"cpu ms": cpu, **seen})
                elif key == "enter":  # the session's first Enter: whatever opening the drill-down builds once
                    first.append({"cpu ms": cpu, **seen})
asyncio.run(main())
rows = {"first Enter of session": first, **rows}
out = {}
for name, rs in rows.items():
    cpu = [r["cpu ms"] for r in rs]
    out[name] = {"cpu ms median": statistics.median(cpu), "cpu ms max": max(cpu),
                 **{k: sum(r.get(k, 0) for r in rs) / len(rs) for k in ("layouts", "line renders", "recomposes", "composes",
                                                                        "full collections", "full collection ms")}}
print(json.dumps(out))
'''


def measure(tree: str, demo: str, presses: int) -> dict[str, dict[str, float]]:
    return run_child(tree, CHILD, demo, str(presses))


def main() -> None:
    ap = argparse.ArgumentParser(
        description="CPU time each key costs the UI's thread under Pilot (Enter and Esc of the drill-down, "
                    "m, a, e, ?, ctrl+p and the Esc closing each), with the layouts, line renders, footer "
                    "recomposes and full garbage collections it caused; thread CPU time, so that a loaded "
                    "machine changes little.",
        epilog="Example, before and after: python benchmarks/bench_keys_cpu.py --tree /work/base --tree .")
    demo_and_trees(ap)
    ap.add_argument("--presses", type=int, default=5, help="presses of each key kept per tree (default 5)")
    args = ap.parse_args()
    trees = [os.path.abspath(t) for t in args.tree] or [os.path.abspath(".")]
    figures = {}
    for tree in trees:
        print(f"measuring {tree}", file=sys.stderr, flush=True)
        figures[tree] = measure(tree, args.demo, args.presses)
    print(f"demo {args.demo} at 120x40; load average {os.getloadavg()[0]:.2f}; per key, mean over "
          f"{args.presses} presses unless said")
    for tree, keys in figures.items():
        print(f"\n== {tree}")
        print(f"  {'key':22s} {'CPU ms med':>10s} {'max':>7s} {'layouts':>8s} {'renders':>8s} {'recomp.':>8s} "
              f"{'composes':>8s} {'full GCs':>8s} {'GC ms':>7s}")
        for name, f in keys.items():
            print(f"  {name:22s} {f['cpu ms median']:10.1f} {f['cpu ms max']:7.1f} {f['layouts']:8.1f} "
                  f"{f['line renders']:8.0f} {f['recomposes']:8.1f} {f.get('composes', 0):8.1f} {f['full collections']:8.1f} "
                  f"{f['full collection ms']:7.1f}")


if __name__ == "__main__":
    main()
