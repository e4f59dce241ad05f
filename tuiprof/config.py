"""What the user asked one profiling run for (`RunConfig`): a plain frozen dataclass of its own, so
that the collector, the demos and the CLI can name it without importing the session."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from tuiprof.collect.options import CollectOptions

DEFAULT_TOLERANCE = 0.01
"""The default early-stop tolerance: a half-width of 1 percentage point. The SpMV kernels' L2 read
hit ratio spreads by about 2 points from trial to trial (Baghsorkhi12 Fig. 7: 0.02, its noisiest
case), so +-0.5 points would take about 80 trials and +-1 point takes the minimum 20; the model's
own error against hardware counters for reads is larger still (Baghsorkhi12 sec. 5: 3.4 points
for L1, 1.9 for L2, on average), so a tighter interval buys precision the model does not have.
``--tolerance 0.005`` (or `T` in the UI) asks for +-0.5 points."""


@dataclass(frozen=True)
class RunConfig:
    """What the user asked for: GPU model, what-if overrides, trials, seed, MD."""

    arch: str | None = None
    """Preset name or TOML path; None = the arch the trace was made for."""
    overrides: Mapping[str, str] = field(default_factory=dict)
    trials: int = 64
    seed: int = 0
    md: int | None = None
    """Resident CTAs per SM; None = the occupancy limit."""
    tolerance: float | None = DEFAULT_TOLERANCE
    """Stop early once every headline hit ratio's 95% confidence interval (of the mean: t std /
    sqrt(n), Student's t with n - 1 degrees of freedom) has a half-width below this (a ratio: 0.01 = 1 percentage point), after at least 20 trials (Baghsorkhi12 Fig. 7; the MD
    sweep after 8); None runs every trial."""
    threads: int | None = None
    sweep: bool = True
    """Run the MD sweep (Yen14) for the MD decision: its trials share the main run's workers
    from the main run's last trials on."""
    sweep_trials: int | None = None
    """Trials per MD in the sweep; None = a quarter of `trials` (at least 8), adaptive."""
    sweep_adaptive: bool | None = None
    """Whether the sweep's MDs that cannot change the decision run fewer trials than
    `sweep_trials` (`Session.sweep_adaptive`); None = when `sweep_trials` is not given."""

    @property
    def adaptive_sweep(self) -> bool:
        """`sweep_adaptive` resolved."""
        return self.sweep_trials is None if self.sweep_adaptive is None else self.sweep_adaptive
    sweep_tolerance: float | None | Literal["same"] = "same"
    """The sweep's early-stop tolerance: "same" = `tolerance` (the UI pins it when `T` tightens the
    main run's, so that the sweep, cached, is not run again for nothing)."""
    collect: CollectOptions = field(default_factory=CollectOptions)
    """How a `.cu` target is compiled, launched and recorded (unused for a recorded trace)."""
