"""UI responsiveness: time to first paint, time to the first histogram update (warm Numba
cache), key-to-repaint latency while trials run on every core (headless Textual pilot); and, in a
real terminal (tmux), `q` to process exit and `c` to the status saying so, both pressed during the
MD sweep. Prints figures; run on demand:

    python benchmarks/bench_tui.py [DEMO] [--trials N] [--repeat K]

It measures whatever `tuiprof` the interpreter imports (PYTHONPATH), so the same script gives the
figures of another checkout: `PYTHONPATH=/tmp/ui-before python benchmarks/bench_tui.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

from textual import events

from tuiprof.session import RunConfig, Session
from tuiprof.tui.app import StatusBar, TuiprofApp
from tuiprof.tui.panes.source import SourceView


def warm(demo: str) -> None:
    """One short run so that the Numba cache is warm (the figures below assume it)."""
    Session.open(demo, RunConfig(trials=2, sweep=False)).run()


async def measure(demo: str, trials: int) -> dict[str, float]:
    t0 = time.perf_counter()
    app = TuiprofApp(demo, RunConfig(trials=trials), clock=time.perf_counter)
    out: dict[str, float] = {}
    async with app.run_test(size=(120, 40)) as pilot:
        # First paint: the status bar has been drawn (the trace loads in a worker thread).
        while not str(app.query_one(StatusBar).render()).strip():
            await asyncio.sleep(0.005)
        out["first_paint_s"] = time.perf_counter() - t0
        while app.t_first_update is None:
            await asyncio.sleep(0.01)
        out["first_histogram_update_s"] = time.perf_counter() - t0
        out["trace_load_and_first_trial_s"] = app.t_first_update
        view = app.query_one(SourceView)
        painted: list[float] = []
        display = app._display

        def timed_display(*args, **kwargs):  # every frame the app writes to the terminal
            result = display(*args, **kwargs)
            painted.append(time.perf_counter())
            return result

        app._display = timed_display  # type: ignore[method-assign]
        lat = []
        while app.phase in ("preparing", "running", "sweep") and len(lat) < 60:
            before = view.cursor
            key = "j" if before < len(view.rows) - 1 else "g"
            k0 = time.perf_counter()
            # The key goes in as the driver would deliver it (pilot.press would also wait for the
            # whole process to be idle, which never happens while trials run).
            app.post_message(events.Key(key, key))
            while not (view.cursor != before and painted and painted[-1] > k0):
                await asyncio.sleep(0.001)
                if time.perf_counter() - k0 > 5:
                    break
            lat.append((time.perf_counter() - k0) * 1000)
            await asyncio.sleep(0.1)
        out["keys_measured_while_running"] = len(lat)
        if lat:
            out["key_to_repaint_ms_median"] = statistics.median(lat)
            out["key_to_repaint_ms_p95"] = sorted(lat)[int(0.95 * (len(lat) - 1))]
            out["key_to_repaint_ms_max"] = max(lat)
        app.cancel_everything()
    return out


def _gone(pid: int) -> bool:
    """The process has ended (a zombie counts: its exit is what is measured)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def in_terminal(demo: str, key: str, trials: int) -> float:
    """Seconds from `key` (pressed one second into the MD sweep) to the process's end (q) or to
    the status bar saying the run is cancelling or cancelled (c), in a 160x50 tmux window."""
    sock = f"bench-tui-{uuid.uuid4().hex[:8]}"

    def tmux(*args: str) -> str:
        return subprocess.run(["tmux", "-L", sock, *args], capture_output=True, text=True, timeout=30).stdout

    cmd = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "tuiprof", "demo", demo, "--trials", str(trials),
                                            "--sweep-trials", str(max(8, trials // 2))))
    env = f"PYTHONPATH={shlex.quote(os.environ.get('PYTHONPATH', ''))}"
    # From a folder holding no tuiprof: `python -m` puts the working folder first on sys.path.
    where = shlex.quote(tempfile.gettempdir())
    tmux("new-session", "-d", "-s", "b", "-x", "160", "-y", "50", f"cd {where} && exec env {env} {cmd}")
    try:
        pid = int(tmux("display-message", "-p", "-t", "b", "#{pane_pid}").strip())
        t0 = time.monotonic()
        while "MD sweep" not in tmux("capture-pane", "-p", "-t", "b"):
            if time.monotonic() - t0 > 600:
                raise RuntimeError("the MD sweep never started")
            time.sleep(0.05)
        time.sleep(1.0)
        k0 = time.monotonic()
        tmux("send-keys", "-t", "b", key)
        while not (_gone(pid) if key == "q" else "cancel" in tmux("capture-pane", "-p", "-t", "b").split("\n", 1)[0]):
            if time.monotonic() - k0 > 60:
                return float("inf")
            time.sleep(0.005)
        return time.monotonic() - k0
    finally:
        tmux("kill-server")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("demo", nargs="?", default="spmv-u")
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3, help="runs of the terminal measurements (median)")
    args = ap.parse_args()
    warm(args.demo)
    figures: dict[str, float] = asyncio.run(measure(args.demo, args.trials))
    if shutil.which("tmux"):
        for key, name in (("q", "q_to_exit_during_sweep_s"), ("c", "c_to_status_during_sweep_s")):
            runs = [in_terminal(args.demo, key, 32) for _ in range(args.repeat)]
            figures[f"{name}_median"] = statistics.median(runs)
            figures[f"{name}_max"] = max(runs)
    print(f"demo {args.demo}, {args.trials} trials, 120x40 (headless Textual pilot); terminal: 160x50 tmux, 32 trials")
    for k, v in figures.items():
        print(f"  {k:34s} {v:.3f}" if isinstance(v, float) else f"  {k:34s} {v}")


if __name__ == "__main__":
    main()
