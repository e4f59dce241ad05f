"""Student's t for the 95% confidence interval of a mean (tuiprof.stats), against a printed t table."""

from __future__ import annotations

import math

import pytest

from tuiprof.stats import Z975, ci_half_width, t975

# Two-sided 95% (one-sided 97.5%) quantiles of Student's t, from a printed table (3 decimals).
PRINTED = {1: 12.706, 2: 4.303, 5: 2.571, 10: 2.228, 19: 2.093, 30: 2.042, 40: 2.021, 63: 1.998,
           120: 1.980, 1000: 1.962}


@pytest.mark.parametrize("df", sorted(PRINTED))
def test_t975_matches_a_printed_t_table(df: int) -> None:
    assert abs(t975(df) - PRINTED[df]) <= 0.0005


def test_t975_joins_the_table_smoothly_and_tends_to_the_normal_quantile() -> None:
    # Past the table (30 df) the expansion continues it without a step, decreasing, to 1.96.
    values = [t975(df) for df in range(1, 5001)]
    assert all(a > b for a, b in zip(values, values[1:]))
    assert abs(t975(31) - 2.040) <= 0.0005  # t(31) = 2.040 in a printed table
    assert t975(10**9) == pytest.approx(1.96, abs=1e-4) and t975(10**9) > Z975


def test_t975_needs_a_degree_of_freedom() -> None:
    with pytest.raises(ValueError, match="degree of freedom"):
        t975(0)


def test_ci_half_width_is_t_times_the_standard_error() -> None:
    # 20 trials, std 0.02: 2.093 x 0.02 / sqrt(20) = 0.009360 (1.96 would give 0.008765, 7% less).
    assert ci_half_width(0.02, 20) == pytest.approx(2.093 * 0.02 / math.sqrt(20), rel=1e-9)
    assert ci_half_width(0.02, 20) / (1.96 * 0.02 / math.sqrt(20)) == pytest.approx(1.068, abs=0.001)
