"""The adaptive MD sweep (issue 23 item 4) against the full sweep, demo by demo: the default
report's settings with and without adaptation recommend the same MD, and the adaptive sweep's
gain interval is no wider (the recommended MD and the default both run every trial whenever the
decision is close). Every demo is slow; one small demo runs in CI."""

from __future__ import annotations

import pytest

from tuiprof.demos import SUFFIX, demo_dir, load
from tuiprof.session import RunConfig, Session

CHEAP = "transpose-tiled"
"""82K warp accesses, 8 MDs on its preset, a gain worth recommending."""


SHIPPED = sorted(p.name[: -len(SUFFIX)] for p in demo_dir().glob(f"*{SUFFIX}"))
"""The recorded demos (those built on first use need the emulator)."""


def width(gain_range: tuple[float, float] | None) -> float:
    return 0.0 if gain_range is None else gain_range[1] - gain_range[0]


@pytest.mark.parametrize("demo", [pytest.param(d, marks=() if d == CHEAP else pytest.mark.slow) for d in SHIPPED])
def test_the_adaptive_sweep_decides_as_the_full_sweep_on_every_demo(demo: str) -> None:
    trace = load(demo_dir() / f"{demo}{SUFFIX}")
    full = Session(trace, RunConfig(sweep_adaptive=False)).run()
    fast = Session(trace, RunConfig()).run()
    assert full is not None and fast is not None
    a, b = fast.decisions, full.decisions
    assert a is not None and b is not None
    assert (a.md is None) == (b.md is None)
    if a.md is None or b.md is None:
        return
    assert a.md.recommended_md == b.md.recommended_md, (a.md, b.md)
    assert width(a.md.gain_range) <= width(b.md.gain_range) + 1e-9, (a.md.gain_range, b.md.gain_range)
    assert a.sweep_trials <= b.sweep_trials
