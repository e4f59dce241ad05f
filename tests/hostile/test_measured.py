"""Issue 21 item 3 and its minor twin: measured (ncu) values are bounded by what they mean when a
trace is loaded (ratios in [0, 1], ``*_rate`` percentages in [0, 100], latencies in cycles a GPU
could take), and every view draws any value the loader accepts: the histogram pane crashed the UI
on ``op0.x = 1.797e308``; the report printed -500.0%."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import hostile as H
from tests.support.hostile_run import assert_clean_error, run_cli, snapshot
from tuiprof.errors import TraceError
from tuiprof.trace.data import MAX_MEASURED_CYCLES, measured_range
from tuiprof.trace.io import load_trace

RUN = ("--trials", "2", "--no-sweep")


def with_measured(path: Path, measured: dict[str, float]) -> Path:
    t = H.TraceFile()
    t.header["provenance"]["measured"] = measured
    return t.save(path)


@pytest.mark.parametrize("key, value, needle", [
    ("op0.x", 1.797e308, "provenance.measured.op0.x is 1.797e+308, outside 0..1e+07 (a latency in cycles)"),
    ("op0.x", -1.0, "outside 0..1e+07"),
    ("l1_read", -5.0, "provenance.measured.l1_read is -5, outside 0..1 (a ratio)"),
    ("l2_read", 1.5, "outside 0..1 (a ratio)"),
    ("l1_read_hit_rate", 250.0, "outside 0..100 (a percentage)"),
    ("sectors_per_request", 1e9, "outside 0..64 (sectors per request)"),
])
def test_the_loader_bounds_measured_values_by_meaning(tmp_path: Path, key: str, value: float, needle: str) -> None:
    with pytest.raises(TraceError, match="is not a valid .tptrace file") as exc:
        load_trace(with_measured(tmp_path / "t.tptrace", {key: value}))
    assert needle in exc.value.message


@pytest.mark.usefixtures("warm_numba")
def test_the_report_never_prints_an_impossible_ratio(tmp_path: Path) -> None:
    # Before: accepted, and printed as "measured (ncu) -500.0%".
    path = with_measured(tmp_path / "t.tptrace", {"l1_read": -5.0})
    before = snapshot(tmp_path)
    run = run_cli(["report", str(path), *RUN], tmp_path, timeout=120)
    assert_clean_error(run, "provenance.measured.l1_read is -5, outside 0..1")
    assert snapshot(tmp_path) == before


KEYS = ["l1_read", "l2_read", "l2_write", "l1_read_hit", "l2_read_hit_ratio", "l1_read_hit_rate", "op0.x", "op1.x",
        "op2.x", "op0.h1", "op1.h2"]


@st.composite
def accepted(draw: st.DrawFn) -> tuple[str, float]:
    """A key and a value the loader accepts for it, the bounds themselves included."""
    key = draw(st.sampled_from(KEYS))
    lo, hi, _ = measured_range(key)
    value = draw(st.one_of(st.sampled_from([lo, hi, math.nextafter(hi, lo), (lo + hi) / 2]),
                           st.floats(lo, hi, allow_nan=False)))
    return key, value


@settings(max_examples=150, deadline=None)
@given(kv=accepted(), width=st.integers(12, 140), height=st.integers(3, 40),
       spread=st.sampled_from(["one value", "narrow", "wide", "with NaN"]))
def test_the_histogram_draws_every_value_the_loader_accepts(kv: tuple[str, float], width: int, height: int,
                                                            spread: str) -> None:
    """The pane that crashed (`np.histogram` on a range of [-8.99e306, inf]) over the loader's
    whole accepted range, beside samples of every shape the simulator gives."""
    from tuiprof.model.latency import estimate
    from tuiprof.tui.metrics import measured_value
    from tuiprof.tui.panes.histogram import Series, render_histogram

    key, value = kv
    assert measured_value({key: value}, key)[0] is not None
    m, label = measured_value({key: value}, key)
    ratio = not key.endswith(".x")
    top = 1.0 if ratio else 2000.0
    rng = np.random.default_rng(width * 1000 + height)
    samples = {"one value": np.full(8, 0.3 * top), "narrow": 0.5 * top + rng.normal(0, 1e-6, 8) * top,
               "wide": rng.uniform(0, top, 8), "with NaN": np.array([np.nan, 0.2 * top, np.nan, 0.9 * top])}[spread]
    series = Series("metric", samples, estimate(samples, 0.0, 1.0 if ratio else np.inf), ratio, 64,
                    np.zeros(samples.size), m, label)
    text = render_histogram(series, width, height, "").plain
    assert text and ("┊" in text or height < 5 or width < 30)  # a narrow pane may cut the marker off


def test_a_measured_latency_at_the_top_of_its_range_is_drawn() -> None:
    from tuiprof.model.latency import estimate
    from tuiprof.tui.metrics import measured_value
    from tuiprof.tui.panes.histogram import Series, render_histogram

    v = np.array([400.0, 420.0, 410.0])
    m, label = measured_value({"op0.x": MAX_MEASURED_CYCLES}, "op0.x")
    text = render_histogram(Series("X", v, estimate(v, 0.0), False, 8, np.zeros(3), m, label), 80, 16, "").plain
    assert "┊ measured" in text, text


# --- the UI in a real terminal ------------------------------------------------------------------

pytestmark_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@pytestmark_tmux
@pytest.mark.usefixtures("warm_numba")
@pytest.mark.parametrize("value, status", [(1.797e308, 2), (MAX_MEASURED_CYCLES, 0)])
def test_the_ui_with_extreme_measured_values(tmp_path: Path, value: float, status: int) -> None:
    """A huge measured latency is refused when the trace loads (the UI says so, q exits 2); the
    largest accepted one is drawn (q exits 0); either way the terminal comes back sane. Before:
    `ValueError: supplied range of [-8.99e306, inf] is not finite` when the histogram opened."""
    from tests.support.terminal_run import assert_sane, read_pid, script
    from tests.support.tui_support import Tmux, wait_gone

    path = with_measured(tmp_path / "m.tptrace", {"op0.x": value, "op1.x": value, "op2.x": value,
                                                  "l1_read": 0.0, "l2_read": 1.0})
    text, pidfile = script(tmp_path, str(path), "--trials", "4", "--no-sweep")
    tmux = Tmux()
    try:
        tmux.start(text)
        if status:
            tmux.wait_screen("cannot open", 120)
        else:
            tmux.wait_screen("Histogram", 120)
            tmux("send-keys", "-t", tmux.name, "2")  # the histogram pane, at the costliest load's X
            tmux.wait_screen("measured", 60)
        tmux("send-keys", "-t", tmux.name, "q")
        wait_gone(read_pid(pidfile), 30)
        screen = assert_sane(tmux, status)
        if status:
            assert "outside 0..1e+07 (a latency in cycles)" in screen.replace("\n", "")
    finally:
        tmux.close()
