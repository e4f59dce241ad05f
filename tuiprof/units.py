"""One unit style for every view (report, UI): cycles as "cyc", sizes in binary units (KiB, MiB,
GiB) with at most three significant digits, counts of CTAs as "CTAs"."""

from __future__ import annotations

import math

_BINARY = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def size(n: float | None) -> str:
    """Bytes in the largest binary unit below them, the one byte-size rendering of every view:
    exact when the unit divides them (49152 -> '48 KiB', 52428800 -> '50 MiB', 1536 -> '1.5 KiB'),
    else three significant digits (100000 -> '97.7 KiB'); a count under 1 KiB in bytes."""
    if n is None or not math.isfinite(n):
        return "-"
    for unit, div in _BINARY:
        if abs(n) >= div:
            v = n / div
            return f"{v:.0f} {unit}" if v >= 100 or v == int(v) else f"{v:.3g} {unit}"
    return f"{n:.0f} B"


CYC = "cyc"
"""The unit of cycles."""
