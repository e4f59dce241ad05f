"""UI responsiveness in a real terminal (tmux), measured as a user sees it: first paint from
process start, the first trial's figures, and key-to-repaint while trials run on every core,
each key timed until the screen shows the change it makes; with `--sweep`, `q` to process exit
and `c` to the status saying so, both pressed during the MD sweep. Prints figures; run on demand (never in
the tests). `python benchmarks/bench_tui.py --help` explains the arguments.

It measures the `tuiprof` of each `--tree` (a checkout, put first on PYTHONPATH; default: the one
this interpreter imports), the trees taking turns within each repeat, so that a before/after
comparison shares the machine's load; the load average is printed with every run.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field

KEYS: tuple[tuple[str, str, str], ...] = (
    ("Enter", "Latency breakdown", "the drill-down of the op under the cursor"),
    ("Escape", "costliest load", "back from the drill-down to the source (its legend)"),
    ("m", "Simulate at which MD", "the MD chooser"),
    ("a", "GPU model and what-if", "the arch picker"),
    ("e", "Export the report", "the export dialog"),
    ("?", "tuiprof keys", "the help screen"),
    ("C-p", "Search for commands", "the command palette"),
)
"""(tmux key, text that appears when the key has taken effect, what it opens). A dialog key is
followed by Escape, timed until its text is gone ("Escape (close)")."""
MAIN = "costliest load"
"""On the main screen only (the legend under the source)."""
POLL = 0.005
"""Seconds between two reads of the screen."""


class Terminal:
    """A private tmux server with one `cols` x `rows` window."""

    def __init__(self, cols: int, rows: int) -> None:
        self.socket = f"bench-tui-{uuid.uuid4().hex[:8]}"
        self.cols, self.rows = cols, rows

    def __call__(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30).stdout

    def start(self, command: str) -> float:
        """Run `command` in the window; the monotonic time just before the process is started."""
        t0 = time.monotonic()
        self("new-session", "-d", "-s", "b", "-x", str(self.cols), "-y", str(self.rows), command)
        return t0

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "b")

    def pid(self) -> int:
        return int(self("display-message", "-p", "-t", "b", "#{pane_pid}").strip() or 0)

    def wait(self, present: str | None = None, absent: str | None = None, timeout: float = 60.0) -> float:
        """The monotonic time at which the screen first shows `present` and not `absent`."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            text = self.screen()
            if (present is None or present in text) and (absent is None or absent not in text):
                return time.monotonic()
            time.sleep(POLL)
        raise TimeoutError(f"the screen never showed {present!r} without {absent!r}:\n{self.screen()}")

    def key(self, key: str, present: str | None = None, absent: str | None = None, timeout: float = 30.0) -> float:
        """Seconds from sending `key` to the screen showing its change."""
        t0 = time.monotonic()
        self("send-keys", "-t", "b", key)
        return self.wait(present, absent, timeout) - t0

    def close(self) -> None:
        self("kill-server")


def command(tree: str | None, demo: str, args: list[str]) -> str:
    """The shell command that runs `tuiprof demo` of `tree` (None: this interpreter's) from a
    folder holding no tuiprof (`python -m` puts the working folder first on sys.path), its
    bytecode cached outside the tree (a checkout measured read-only stays untouched)."""
    cache = os.path.join(tempfile.gettempdir(), "tuiprof-bench-pycache")
    env = f"PYTHONPYCACHEPREFIX={shlex.quote(cache)} " + (f"PYTHONPATH={shlex.quote(tree)} " if tree else "")
    argv = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "tuiprof", "demo", demo, *args))
    return f"cd {shlex.quote(tempfile.gettempdir())} && exec env {env}{argv}"


@dataclass
class Figures:
    """One tree's measurements over the repeats."""

    first_paint: list[float] = field(default_factory=list)
    first_trial: list[float] = field(default_factory=list)
    keys: dict[str, list[float]] = field(default_factory=dict)
    idle: dict[str, list[float]] = field(default_factory=dict)
    quit_in_sweep: list[float] = field(default_factory=list)
    cancel_in_sweep: list[float] = field(default_factory=list)
    load: list[tuple[float, float]] = field(default_factory=list)
    """The 1-minute load average before and after each run."""


def press_keys(term: Terminal, into: dict[str, list[float]], running: str | None) -> None:
    """Each key of KEYS (and Escape after a dialog), timed; with `running`, kept only if the status
    line still holds that text once they are all pressed (the trials ran throughout)."""
    got: dict[str, list[float]] = {}
    for key, shown, _ in KEYS:
        if key == "Escape":
            got.setdefault(key, []).append(term.key("Escape", MAIN, "Latency breakdown"))
        else:
            got.setdefault(key, []).append(term.key(key, shown))
        if key not in ("Enter", "Escape"):
            got.setdefault(f"Escape (close {key})", []).append(term.key("Escape", None, shown))
        time.sleep(0.1)
    if running is None or running in term.screen().split("\n", 1)[0]:
        for key, values in got.items():
            into.setdefault(key, []).extend(values)
    else:
        print("  (the run ended while the keys were timed: not counted)", file=sys.stderr)


def trials_shown(screen: str) -> int:
    """The trials the status line says have landed (0 before the first)."""
    found = re.search(r"trial (\d+)/", screen.split("\n", 1)[0])
    return int(found.group(1)) if found else 0


def run_once(tree: str | None, demo: str, trials: int, cols: int, rows: int, out: Figures, after: int = 0) -> None:
    """One launch of the UI: first paint, first trial, the keys during a long main run (once
    `after` trials have landed), the keys once it is cancelled (idle), then quit."""
    term = Terminal(cols, rows)
    before = os.getloadavg()[0]
    try:
        t0 = term.start(command(tree, demo, ["--trials", str(trials), "--tolerance", "0", "--no-sweep"]))
        out.first_paint.append(term.wait(f"tuiprof {demo}", timeout=120) - t0)
        out.first_trial.append(term.wait("trial ", timeout=600) - t0)
        while after and trials_shown(term.screen()) < after:
            time.sleep(0.2)
        term.wait(MAIN, timeout=60)
        press_keys(term, out.keys, "trial ")
        term.key("c", "cancelled at", timeout=60)
        time.sleep(0.5)
        press_keys(term, out.idle, None)
        term("send-keys", "-t", "b", "q")
    finally:
        term.close()
        out.load.append((before, os.getloadavg()[0]))


def _gone(pid: int) -> bool:
    """The process has ended (a zombie counts: its exit is what is measured)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def in_sweep(tree: str | None, demo: str, key: str, trials: int) -> float:
    """Seconds from `key` (one second into the MD sweep) to the process's end (q) or to the
    status line saying the run is cancelling or cancelled (c), in a 160x50 window."""
    term = Terminal(160, 50)
    try:
        term.start(command(tree, demo, ["--trials", str(trials), "--sweep-trials", str(max(8, trials // 2))]))
        pid = term.pid()
        term.wait("MD sweep", timeout=600)
        time.sleep(1.0)
        k0 = time.monotonic()
        term("send-keys", "-t", "b", key)
        while not (_gone(pid) if key == "q" else "cancel" in term.screen().split("\n", 1)[0]):
            if time.monotonic() - k0 > 60:
                return float("inf")
            time.sleep(POLL)
        return time.monotonic() - k0
    finally:
        term.close()


def summary(values: list[float]) -> str:
    """'median p95 max (n)' in milliseconds."""
    v = sorted(values)
    p95 = v[min(len(v) - 1, int(round(0.95 * (len(v) - 1))))]
    return f"{1000 * statistics.median(v):7.0f} {1000 * p95:7.0f} {1000 * v[-1]:7.0f}  ({len(v)})"


def report(name: str, f: Figures) -> None:
    print(f"\n== {name}")
    loads = ", ".join(f"{a:.2f}->{b:.2f}" for a, b in f.load)
    print(f"  load average (1 min) before->after each run: {loads}")
    print(f"  {'':38s} {'median':>7} {'p95':>7} {'max':>7}  (n)   [ms]")
    print(f"  {'first paint, from process start':38s} {summary(f.first_paint)}")
    print(f"  {'first trial on screen, from start':38s} {summary(f.first_trial)}")
    for title, table in (("while trials run", f.keys), ("idle (run cancelled)", f.idle)):
        every = [x for v in table.values() for x in v]
        if not every:
            continue
        print(f"  key to repaint, {title}:")
        for key, values in table.items():
            print(f"    {key:36s} {summary(values)}")
        print(f"    {'every key':36s} {summary(every)}")
    if f.quit_in_sweep:
        print(f"  {'q to exit during the MD sweep':38s} {summary(f.quit_in_sweep)}")
        print(f"  {'c to status during the MD sweep':38s} {summary(f.cancel_in_sweep)}")


def main() -> None:
    ap = argparse.ArgumentParser(
        description="Time the terminal UI as a user meets it, in a real terminal (tmux): first paint "
                    "from process start, the first trial on screen, and key to repaint (the screen change "
                    "the key makes: the drill-down's text for Enter, the source's legend for Escape, each "
                    "dialog's title for m, a, e, ? and ctrl+p, its absence for the Escape that closes it) "
                    "while the trials run on every core and again once the run is cancelled; with --sweep, "
                    "q to exit and c to the status line during the MD sweep.",
        epilog="Example, before and after on one machine: python benchmarks/bench_tui.py --tree /work/base "
               "--tree . --repeat 3")
    ap.add_argument("demo", nargs="?", default="spmv-u", help="the demo to open (default spmv-u)")
    ap.add_argument("--tree", action="append", default=[],
                    help="a tuiprof checkout to measure, put first on PYTHONPATH (repeatable; the trees take "
                         "turns within each repeat); default: the tuiprof this interpreter imports")
    ap.add_argument("--trials", type=int, default=2048,
                    help="trials of the main run (tolerance 0, no MD sweep): enough that it is still running "
                         "while every key is timed (default 2048)")
    ap.add_argument("--after", type=int, default=0,
                    help="press the keys once this many trials have landed (default 0: at the first); the "
                         "analysis the run makes ten times a second grows with the trials")
    ap.add_argument("--repeat", type=int, default=3, help="launches per tree (default 3)")
    ap.add_argument("--size", default="120x40", help="terminal columns x rows (default 120x40)")
    ap.add_argument("--sweep", action="store_true",
                    help="also time q to exit and c to the status during the MD sweep (a 32-trial run each)")
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("bench_tui needs tmux")
    cols, rows = (int(x) for x in args.size.split("x"))
    trees = [os.path.abspath(t) for t in args.tree] or [None]
    figures = {t: Figures() for t in trees}
    for r in range(args.repeat):
        for tree in trees:
            print(f"repeat {r + 1}/{args.repeat}: {tree or 'this interpreter'}", file=sys.stderr, flush=True)
            run_once(tree, args.demo, args.trials, cols, rows, figures[tree], args.after)
            if args.sweep:
                figures[tree].quit_in_sweep.append(in_sweep(tree, args.demo, "q", 32))
                figures[tree].cancel_in_sweep.append(in_sweep(tree, args.demo, "c", 32))
    print(f"demo {args.demo}, {cols}x{rows} tmux, main run of {args.trials} trials (tolerance 0, no sweep), "
          + (f"keys from trial {args.after} on, " if args.after else "")
          + f"{os.cpu_count()} cores; key to repaint includes tmux's send-keys and a {1000 * POLL:.0f} ms screen poll")
    for tree, f in figures.items():
        report(tree or "this interpreter", f)


if __name__ == "__main__":
    main()
