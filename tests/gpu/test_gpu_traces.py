"""A trace recorded on a real GPU (demo_traces/gpu/, issue 12's H100 session), on any machine: it
loads as a GPU trace with every CTA's SM and times measured and ncu's values; the report labels
the SM utilisation measured and prints ncu's value and the prediction's distance beside each
headline; the UI's SM pane says measured."""

from __future__ import annotations

import json

import pytest

from tests.support.ptx_support import DEMO_DIR

TRACE = DEMO_DIR / "gpu" / "stencil7-h100.tptrace"


def test_the_gpu_trace_carries_what_the_gpu_measured() -> None:
    from tuiprof.trace.io import load_trace

    t = load_trace(TRACE)
    P = t.provenance
    assert (P.backend, P.gpu, P.generator["sm_count"]) == ("gpu", "NVIDIA H100 80GB HBM3", 132)
    assert t.ctas.measured_timing and (t.ctas.end >= t.ctas.start).all()
    assert 0 <= t.ctas.sm.min() and t.ctas.sm.max() < 132 and len(set(t.ctas.sm.tolist())) > 100
    assert set(P.measured) == {"l1_read", "l2_read", "l2_write", "sectors_per_request"}
    assert {o.file for o in t.ops} == {s.name for s in t.sources} == {"stencil.cu"}


def test_the_report_puts_ncu_beside_the_prediction() -> None:
    from tuiprof.report import build_report, render
    from tuiprof.session import RunConfig
    from tuiprof.trace.io import load_trace

    measured = load_trace(TRACE).provenance.measured
    doc = build_report(TRACE, RunConfig(trials=4, sweep=False))
    text = render(doc, "text")
    assert "SM utilisation (measured, Farooqui11" in text
    assert "sum += in[idx + nx * ny];" in next(x for x in text.splitlines() if x.strip().startswith("5 ") and "load" in x)
    for key, label in (("l1_read", "L1 read hit ratio"), ("l2_read", "L2 read hit ratio")):
        mean = doc["analysis"]["headline"][key]["mean"]
        line = next(x for x in text.splitlines() if x.strip().startswith(label))
        assert f"measured (ncu) {100 * measured[key]:.1f}%, {100 * abs(mean - measured[key]):.1f} pts off" in line
    assert json.loads(render(doc, "json"))["trace"]["provenance"]["measured"] == measured
    assert "| measured (ncu) |" in render(doc, "md")


async def test_the_ui_says_the_sm_times_are_measured() -> None:
    pytest.importorskip("textual")
    from tests.support.tui_support import screen_text, wait_for
    from tuiprof.session import RunConfig
    from tuiprof.tui.app import TuiprofApp

    app = TuiprofApp(str(TRACE), RunConfig(trials=2, sweep=False), show_timing=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_for(pilot, lambda: app.trace is not None or app.phase == "failed")
        await wait_for(pilot, lambda: "SM utilisation [measured]" in screen_text(app))
        assert "gpu trace" in screen_text(app).splitlines()[0]
