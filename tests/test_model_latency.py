"""The latency equation of paper 000 sec. 6.1 and the interval of sec. 5.2, by hand."""

from __future__ import annotations

import math

import numpy as np

from tuiprof.model.latency import estimate, expected_latency, ratio


def test_expected_latency_by_hand() -> None:
    # Tesla C2050 figures: t1 = 52, t2 = 288; Tm = 600.
    # H1 = 0.5, H2 = 0.25: X = 0.5*52 + 0.5*(0.25*288 + 0.75*600) = 26 + 0.5*(72 + 450) = 287.
    assert expected_latency(np.array(0.5), np.array(0.25), 52, 288, np.array(600.0)) == 287.0
    # All L1 hits: X = t1 whatever H2 and Tm are.
    assert expected_latency(np.array(1.0), np.array(0.0), 52, 288, np.array(1e9)) == 52.0
    # All misses: X = Tm.
    assert expected_latency(np.array(0.0), np.array(0.0), 52, 288, np.array(600.0)) == 600.0


def test_ratio_undefined_without_accesses() -> None:
    r = ratio(np.array([1, 0, 3]), np.array([2, 0, 3]))
    assert r[0] == 0.5 and math.isnan(r[1]) and r[2] == 1.0


def test_estimate_interval_is_mean_pm_196_std() -> None:
    x = np.array([0.1, 0.2, 0.3, 0.4, np.nan])
    e = estimate(x, 0.0, 1.0)
    std = np.std([0.1, 0.2, 0.3, 0.4], ddof=1)
    assert e.n == 4 and math.isclose(e.mean, 0.25) and math.isclose(e.std, std)
    assert math.isclose(e.lo, max(0.0, 0.25 - 1.96 * std)) and math.isclose(e.hi, 0.25 + 1.96 * std)
    assert math.isclose(e.stderr, std / 2)


def test_estimate_clips_and_handles_empty() -> None:
    e = estimate(np.array([0.99, 1.0, 0.98, 1.0]), 0.0, 1.0)
    assert e.hi == 1.0
    assert not estimate(np.array([np.nan])).defined
