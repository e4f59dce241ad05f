"""The stochastic memory-hierarchy model (Baghsorkhi12 sec. 3) and its Monte Carlo driver.

Names are loaded lazily so that importing ``tuiprof.sim`` does not start Numba.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "MonteCarlo": "tuiprof.sim.montecarlo",
    "TrialPool": "tuiprof.sim.montecarlo",
    "Prepared": "tuiprof.sim.prepared",
    "OpCoalescing": "tuiprof.sim.prepared",
    "default_md": "tuiprof.sim.prepared",
    "prepare": "tuiprof.sim.prepared",
    "pack_arch": "tuiprof.sim.prepared",
    "TrialResult": "tuiprof.sim.results",
    "run_trial": "tuiprof.sim.trial",
    "Coalesced": "tuiprof.sim.coalesce",
    "coalesce_trace": "tuiprof.sim.coalesce",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'tuiprof.sim' has no attribute {name!r}")
