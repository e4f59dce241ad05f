"""Is a difference between two runs larger than the model's randomness? Welch's t-test over the
trials, with the Student t distribution computed here (no SciPy).

Every per-trial quantity of a run (an op's H1, H2 and X, a headline hit ratio, the kernel time of
the timing model) is a sample of independent trials (`tuiprof.sim.rng.trial_seed`: each trial
has its own seed). Two runs are two samples with possibly different variances and sizes (early
stop), so the test is Welch's (unequal variances, Welch-Satterthwaite degrees of freedom),
two-sided. Like every figure of tuiprof it covers only the model's randomness, never its
assumptions: "significant" says the change is not an artefact of which trials were drawn.

The t distribution's tail is the regularized incomplete beta function, evaluated by its
continued fraction (modified Lentz; Numerical Recipes 6.4), so no table and no library is needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

ALPHA = 0.05
"""The significance level of every test tuiprof reports (two-sided)."""
TEST_NAME = "Welch's t-test over the trials (two-sided, unequal variances)"

_EPS = 1e-15
_TINY = 1e-300
_MAX_ITER = 500


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (NR's betacf), converging for x < (a + 1) / (a + b + 2)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_ITER + 1):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), a, b > 0, 0 <= x <= 1."""
    if not (a > 0 and b > 0):
        raise ValueError(f"betainc needs a, b > 0, got {a}, {b}")
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"betainc needs 0 <= x <= 1, got {x}")
    if x == 0.0 or x == 1.0:
        return x
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's T with `df` degrees of freedom (df may be fractional: Welch)."""
    if math.isnan(t) or not df > 0:
        return math.nan
    if math.isinf(t):
        return 0.0
    return min(1.0, betainc(df / 2.0, 0.5, df / (df + t * t)))


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's T with `df` degrees of freedom."""
    p = t_two_sided(t, df) / 2.0
    return p if t < 0 else 1.0 - p


@dataclass(frozen=True)
class Welch:
    """Welch's t-test of `b` against `a`: the difference of the means (b - a), t, the degrees of
    freedom, the two-sided p-value and the sample sizes. ``p`` is None when a side has fewer than
    two trials (no variance to test against)."""

    delta: float
    t: float
    df: float
    p: float | None
    n_a: int
    n_b: int

    def significant(self, alpha: float = ALPHA) -> bool:
        return self.p is not None and self.p < alpha


NOISE = 1e-9
"""Relative size below which a difference or a spread is floating-point rounding, not a change:
a figure that is the same in every trial (an op that always hits) differs between two runs by
the order of its sums (1e-16), which a test against a zero variance would call significant."""


def _mean_var(x: "Sequence[float] | np.ndarray") -> tuple[float, float, int]:
    v = [float(s) for s in x if not math.isnan(float(s))]
    n = len(v)
    if n == 0:
        return math.nan, math.nan, 0
    if min(v) == max(v):
        return v[0], 0.0 if n > 1 else math.nan, n
    m = math.fsum(v) / n
    var = math.fsum((s - m) ** 2 for s in v) / (n - 1) if n > 1 else math.nan
    return m, var, n


def welch(a: "Sequence[float] | np.ndarray", b: "Sequence[float] | np.ndarray") -> Welch:
    """Welch's t-test of the trials `b` against the trials `a` (NaN trials left out).

    Both samples constant (to `NOISE`): the difference is exact (p = 0 when the means differ by
    more than rounding, 1 when not), as it is where the model has no randomness (an op that
    always hits)."""
    ma, va, na = _mean_var(a)
    mb, vb, nb = _mean_var(b)
    delta = mb - ma
    if na < 2 or nb < 2:
        return Welch(delta, math.nan, math.nan, None, na, nb)
    sa, sb = va / na, vb / nb
    se2 = sa + sb
    floor = NOISE * max(abs(ma), abs(mb))
    if math.sqrt(se2) <= floor:  # no randomness to speak of: the difference is exact, or rounding
        same = abs(delta) <= floor
        return Welch(delta, 0.0 if same else math.copysign(math.inf, delta), math.inf, 1.0 if same else 0.0, na, nb)
    t = delta / math.sqrt(se2)
    df = se2 * se2 / (sa * sa / (na - 1) + sb * sb / (nb - 1))
    return Welch(delta, t, df, t_two_sided(t, df), na, nb)


def holm(pvalues: Sequence[float | None], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down correction: which of the tests are significant when the family of all of
    them may make a false claim with probability at most `alpha` (None: untested, never)."""
    order = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    out = [False] * len(pvalues)
    m = len(order)
    for k, (p, i) in enumerate(order):
        if p > alpha / (m - k):
            break
        out[i] = True
    return out
