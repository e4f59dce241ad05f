"""The decision models joined for one run: MD decision, MWP/CWP, bottleneck, SM utilisation.

`Decisions` is what the report's decision sections and the UI's MD and SM panes show. It joins
the Analysis (as ``analysis.decisions``) once the main run's trials are in; the MD decision
needs the MD sweep (one simulation per MD, paper 002) and stays None until the sweep ends.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuiprof.model.bottleneck import Bottleneck
from tuiprof.model.md import MdDecision, MdSample
from tuiprof.model.mwp_cwp import MwpCwp
from tuiprof.model.sm_util import SmUtilisation


@dataclass(frozen=True)
class Decisions:
    """The four models' results for one run."""

    sm: SmUtilisation
    """Paper 003 Fig. 6: per-SM busy fraction, measured or modeled."""
    mwp: MwpCwp
    """Paper 004: MWP, CWP, the case and the predicted cycles."""
    bottleneck: Bottleneck
    """Paper 001: component times, the bottleneck and the next one."""
    md_samples: tuple[MdSample, ...] = ()
    """What each simulated MD gave (MD = 1 .. limit as the sweep lands them)."""
    md: MdDecision | None = None
    """Paper 002: both predictions and the recommendation; None until the MD sweep is done."""
