"""One profiling run: a trace (file or demo) and a configuration, resolved into what the
simulator needs. The Monte Carlo run itself and its events build on this."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from tuiprof.arch.model import Arch
from tuiprof.arch.occupancy import Occupancy, occupancy
from tuiprof.errors import UsageError
from tuiprof.trace.model import Trace


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
    tolerance: float | None = None
    threads: int | None = None


def resolve_arch(trace: Trace, config: RunConfig) -> Arch:
    """The Arch to simulate: the requested one (or the trace's), with overrides applied."""
    from tuiprof.arch.presets import load_arch

    return load_arch(config.arch or trace.provenance.arch, config.overrides)


def kernel_occupancy(trace: Trace, arch: Arch) -> Occupancy:
    L = trace.launch
    return occupancy(arch, L.threads_per_cta, L.registers_per_thread, L.static_shared, L.dynamic_shared)


def resolve_md(trace: Trace, arch: Arch, config: RunConfig) -> int:
    """MD to simulate: the requested one, checked against what the occupancy allows."""
    limit = kernel_occupancy(trace, arch).ctas_per_sm
    if config.md is None:
        return limit
    if config.md > limit:
        raise UsageError(f"--md {config.md} exceeds the {limit} CTAs per SM that {arch.name} can hold for this kernel",
                         f"choose --md between 1 and {limit}")
    return config.md
