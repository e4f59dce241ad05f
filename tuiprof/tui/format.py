"""Plain-text formatting shared by the panes and the text report (`tuiprof.report`): percentages,
cycles, bars and sparklines (units as `tuiprof.units` writes them). One number has one rendering
wherever it is shown (issue 25: an H1 of 0.0015 was 0.1% in the report, 0.2% in the op line and
0.150% in the drill-down). Imports nothing of Textual, so that the report may use it.

Every figure is drawn with a glyph *and* a number, so nothing depends on colour (NO_COLOR).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import TypeGuard

import numpy as np

from tuiprof import units

EIGHTHS_H = " ▏▎▍▌▋▊▉█"
"""Horizontal bar cells, 0/8 .. 8/8."""
EIGHTHS_V = " ▁▂▃▄▅▆▇█"
"""Vertical bar cells, 0/8 .. 8/8."""
SPARK = "▁▂▃▄▅▆▇█"


def finite(x: float | None) -> TypeGuard[float]:
    return x is not None and isinstance(x, (int, float, np.floating, np.integer)) and math.isfinite(float(x))


def _rounded(x: float, digits: int) -> str:
    """`x` with `digits` decimals, rounded half away from zero on its shortest decimal form
    (0.145 -> '0.15' as a reader rounds it, where binary floating point gives '0.14')."""
    q = Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return f"{q:.{digits}f}"


def pct_digits(x: float) -> int:
    """Decimals of a percentage: one, or two significant digits below 1% (0.15%, 0.015%)."""
    v = abs(100.0 * float(x))
    return 1 if v >= 1 or v == 0 else min(6, 1 - math.floor(math.log10(v)))


def pct(x: float | None, digits: int | None = None, width: int = 0, missing: str = "—") -> str:
    """A ratio as a percentage, the one rendering of the UI and the text report: 0.4312 ->
    '43.1%', 0.0015 -> '0.15%' (`pct_digits`; `digits` fixes them where a column needs it);
    `missing` when undefined; right-aligned to `width`."""
    if not finite(x):
        return missing.rjust(width)
    v = 100.0 * float(x)
    return f"{_rounded(v, pct_digits(float(x)) if digits is None else digits)}%".rjust(width)


def cycles(x: float | None, width: int = 0, missing: str = "—") -> str:
    """Cycles, the one rendering of latencies and their spreads (UI and text report): a whole
    number from 10 on, two significant digits below (an 8.6-cycle half-width)."""
    if not finite(x):
        return missing.rjust(width)
    v = abs(float(x))
    digits = 0 if v >= 10 or v == 0 else min(3, 1 - math.floor(math.log10(v)))
    return _rounded(float(x), digits).rjust(width)


def cyc(x: float | None, missing: str = "—") -> str:
    """Cycles with their unit: '812 cyc'."""
    return f"{cycles(x)} {units.CYC}" if finite(x) else missing


def short(x: float | None, width: int = 4) -> str:
    """A count in at most `width` (>= 4) cells: 812, 9999, 12k, 1.2M; '-' when undefined."""
    if not finite(x):
        return "-".rjust(width)
    v = float(x)
    if abs(v) < 10 ** width - 0.5:
        return f"{v:.0f}".rjust(width)
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            text = f"{v / div:.0f}{unit}"
            if len(text) > width:
                text = f"{v / div / 1000:.1f}{'kMG'['kMG'.index(unit) + 1] if unit != 'G' else 'T'}"
            return text.rjust(width)
    return f"{v:.0f}".rjust(width)


def decimals_for(scale: float | None, ratio: bool, lo: int = 0, hi: int = 4) -> int:
    """Decimals that show `scale` (a std or a span) with two significant digits, in percent for
    a ratio: std 0.00003 of a ratio -> 4 (0.0030%), std 2.5 cycles -> 1."""
    if not finite(scale) or float(scale) <= 0:
        return lo if not ratio else 1
    v = float(scale) * (100.0 if ratio else 1.0)
    return int(max(lo, min(hi, 1 - math.floor(math.log10(v)))))


def num(x: float | None, digits: int = 1, width: int = 0) -> str:
    text = f"{float(x):.{digits}f}" if finite(x) else "—"
    return text.rjust(width)


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
