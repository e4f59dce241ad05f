"""Plain-text formatting shared by the panes: percentages, cycles, bars and sparklines.

Every figure is drawn with a glyph *and* a number, so nothing depends on colour (NO_COLOR).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

EIGHTHS_H = " ▏▎▍▌▋▊▉█"
"""Horizontal bar cells, 0/8 .. 8/8."""
EIGHTHS_V = " ▁▂▃▄▅▆▇█"
"""Vertical bar cells, 0/8 .. 8/8."""
SPARK = "▁▂▃▄▅▆▇█"


def finite(x: float | None) -> bool:
    return x is not None and isinstance(x, (int, float, np.floating, np.integer)) and math.isfinite(float(x))


def pct(x: float | None, digits: int = 0, width: int = 0) -> str:
    """0.4312 -> '43%' ('—' when undefined), right-aligned to `width`."""
    text = f"{100.0 * float(x):.{digits}f}%" if finite(x) else "—"
    return text.rjust(width)


def cycles(x: float | None, width: int = 0) -> str:
    text = f"{float(x):.0f}" if finite(x) else "—"
    return text.rjust(width)


def num(x: float | None, digits: int = 1, width: int = 0) -> str:
    text = f"{float(x):.{digits}f}" if finite(x) else "—"
    return text.rjust(width)


def count(n: float) -> str:
    """12345 -> '12.3k'."""
    n = float(n)
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= div:
            return f"{n / div:.1f}{unit}"
    return f"{n:.0f}"


def hbar(frac: float | None, width: int) -> str:
    """A left-aligned horizontal bar of `width` cells in eighths (blank when undefined)."""
    if width <= 0:
        return ""
    if not finite(frac):
        return " " * width
    eighths = int(round(max(0.0, min(1.0, float(frac))) * width * 8))
    full, part = divmod(eighths, 8)
    return ("█" * full + (EIGHTHS_H[part] if part else "")).ljust(width)[:width]


def vcell(frac: float | None) -> str:
    """One cell whose height shows `frac` in eighths (a blank for 0 or undefined)."""
    if not finite(frac):
        return " "
    return EIGHTHS_V[int(round(max(0.0, min(1.0, float(frac))) * 8))]


def sparkline(values: Sequence[float] | np.ndarray, width: int) -> str:
    """`values` resampled to `width` cells, scaled between their min and max (NaN = blank)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0 or width <= 0:
        return ""
    idx = np.unique(np.linspace(0, v.size - 1, min(width, v.size)).round().astype(np.int64))
    v = v[idx]
    ok = np.isfinite(v)
    if not ok.any():
        return " " * v.size
    lo, hi = float(v[ok].min()), float(v[ok].max())
    span = hi - lo
    out = []
    for x in v:
        if not math.isfinite(x):
            out.append(" ")
        else:
            k = 0 if span <= 0 else int(round((x - lo) / span * (len(SPARK) - 1)))
            out.append(SPARK[k])
    return "".join(out)


def running_std(x: np.ndarray) -> np.ndarray:
    """Std (ddof=1) of the first n non-NaN values, n = 2..: the convergence curve of paper 000
    Fig. 7 for a per-op quantity (the Analysis carries it only for the headline ratios)."""
    v = np.asarray(x, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size < 2:
        return np.zeros(0)
    n = np.arange(1, v.size + 1, dtype=np.float64)
    mean = np.cumsum(v) / n
    sq = np.cumsum(v * v)
    var = (sq - n * mean * mean) / np.maximum(n - 1, 1)
    return np.sqrt(np.maximum(var, 0.0))[1:]


def trial_count_steps(current: int, up: bool, lo: int = 4, hi: int = 4096) -> int:
    """The next trial count for t/T: halve or double, within [lo, hi]."""
    return max(lo, current // 2) if not up else min(hi, current * 2)
