"""The latency equation of Baghsorkhi12 sec. 6.1 and the interval of sec. 5.2, by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

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


def test_estimate_spread_and_confidence_interval_by_hand() -> None:
    # Four trials 0.1 .. 0.4: mean 0.25, std (ddof 1) = sqrt(0.05 / 3) = 0.129099.
    # Spread of trials: 0.25 +- 1.96 x 0.129099 = [0 (clipped from -0.0030), 0.50303];
    # confidence interval of the mean, Student's t with 3 df (3.182, a printed t table):
    # 0.25 +- 3.182 x 0.129099 / 2 = [0.04460, 0.45540].
    x = np.array([0.1, 0.2, 0.3, 0.4, np.nan])
    e = estimate(x, 0.0, 1.0)
    assert e.n == 4 and math.isclose(e.mean, 0.25) and math.isclose(e.std, 0.1290994, rel_tol=1e-6)
    assert e.spread_lo == 0.0 and math.isclose(e.spread_hi, 0.50303, rel_tol=1e-4)
    assert math.isclose(e.ci_lo, 0.04460, rel_tol=1e-3) and math.isclose(e.ci_hi, 0.45540, rel_tol=1e-4)
    assert math.isclose(e.stderr, 0.0645497, rel_tol=1e-6)


@pytest.mark.parametrize("n, t", [(2, 12.706), (20, 2.093), (41, 2.021), (64, 1.998), (1001, 1.962)])
def test_confidence_interval_is_students_t_times_the_standard_error(n: int, t: float) -> None:
    # The CI of the mean against NumPy and a printed t table (n - 1 df); the spread of trials
    # keeps the normal 1.96 (where one run falls, not where the mean is).
    x = np.random.default_rng(n).normal(0.6, 0.03, n)
    e = estimate(x)
    mean, se = float(np.mean(x)), float(np.std(x, ddof=1)) / np.sqrt(n)
    assert e.ci_lo == pytest.approx(mean - t * se, abs=6e-4 * se)
    assert e.ci_hi == pytest.approx(mean + t * se, abs=6e-4 * se)
    assert e.spread_hi - e.spread_lo == pytest.approx(2 * 1.96 * float(np.std(x, ddof=1)))


def test_confidence_interval_narrows_with_trials_while_the_spread_does_not() -> None:
    rng = np.random.default_rng(7)
    few, many = estimate(rng.normal(0.5, 0.02, 20)), estimate(rng.normal(0.5, 0.02, 2000))
    assert (few.ci_hi - few.ci_lo) > 5 * (many.ci_hi - many.ci_lo)
    # The spread of trials stays about 2 x 1.96 x 0.02 = 0.078 whatever n is.
    for e in (few, many):
        assert 0.055 < e.spread_hi - e.spread_lo < 0.1


def test_estimate_clips_and_handles_empty() -> None:
    e = estimate(np.array([0.99, 1.0, 0.98, 1.0]), 0.0, 1.0)
    assert e.spread_hi == 1.0 and e.ci_hi == 1.0
    assert not estimate(np.array([np.nan])).defined
