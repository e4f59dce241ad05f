"""The quantities the histogram pane can show, and the measured (ncu) value of each."""

from __future__ import annotations

from typing import Any

from tuiprof.tui import format as fmt
from tuiprof.tui.panes.histogram import Series
from tuiprof.tui.text import MAX_LABEL, clean

HEADLINES = {"l1_read": "L1 read hit ratio · kernel", "l2_read": "L2 read hit ratio · kernel",
             "l2_write": "L2 write hit ratio · kernel"}
OP_PARTS = {"h1": "H1 (L1 hit)", "h2": "H2 (L2 hit)", "x": "X cycles"}


def metric_keys(op: int | None) -> list[str]:
    """The kernel-wide ratios, then the selected op's H1, H2 and X."""
    keys = list(HEADLINES)
    if op is not None:
        keys += [f"op{op}.{p}" for p in OP_PARTS]
    return keys


def measured_value(measured: dict[str, float], key: str) -> tuple[float | None, str]:
    """The hardware counter value for `key` if the trace carries one (``l1_read``,
    ``l1_read_hit``, ``l1_read_hit_ratio``; percentages are read as such)."""
    for name in (key, f"{key}_hit", f"{key}_hit_ratio", f"{key}_hit_rate"):
        if name in measured and fmt.finite(measured[name]):
            v = float(measured[name])
            ratio = not key.endswith(".x")
            if ratio and v > 1.0:
                v /= 100.0
            return v, f"({name}, measured on the GPU)"
    return None, ""


def series(analysis: Any, key: str, measured: dict[str, float], trace_ops: Any = None) -> Series | None:
    """The Series of metric `key` in `analysis` (None before the first trial)."""
    if analysis is None or key not in analysis.samples:
        return None
    m, label = measured_value(measured, key)
    if key in HEADLINES:
        return Series(HEADLINES[key], analysis.samples[key], analysis.headline[key], True, analysis.planned,
                      analysis.convergence.get(key, fmt.running_std(analysis.samples[key])), m, label)
    op_part = key.split(".", 1)
    j, part = int(op_part[0][2:]), op_part[1]
    s = analysis.ops[j]
    est = {"h1": s.h1, "h2": s.h2, "x": s.x}[part]
    title = f"{OP_PARTS[part]} · op {j} {clean(s.op.label, MAX_LABEL)} (line {s.op.line})"
    values = analysis.samples[key]
    return Series(title, values, est, part != "x", analysis.planned, fmt.running_std(values), m, label)
