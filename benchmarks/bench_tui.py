"""UI responsiveness: time to first paint, time to the first histogram update (warm Numba
cache), and key-to-repaint latency while trials run on every core. Prints figures; run on demand:

    python benchmarks/bench_tui.py [DEMO] [--trials N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("demo", nargs="?", default="spmv-u")
    ap.add_argument("--trials", type=int, default=64)
    args = ap.parse_args()
    warm(args.demo)
    figures = asyncio.run(measure(args.demo, args.trials))
    print(f"demo {args.demo}, {args.trials} trials, 120x40 (headless Textual pilot)")
    for k, v in figures.items():
        print(f"  {k:34s} {v:.3f}" if isinstance(v, float) else f"  {k:34s} {v}")


if __name__ == "__main__":
    main()
