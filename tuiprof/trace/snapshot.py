"""The snapshot: which consecutive CTAs a trace records (Baghsorkhi12 sec. 3.1).

The paper traces 4 x the threads that run at once on all SMs ("the snapshot"): enough CTAs for
every SM to start, finish and replace its resident CTAs a few times, few enough to record and
replay in seconds. Every collector (emulator, GPU) and the synthetic models choose it here, and
the rule is recorded in words in the trace.
"""

from __future__ import annotations

import numpy as np

from tuiprof.arch.spec import Arch
from tuiprof.errors import UsageError
from tuiprof.trace.data import MAX_GRID_CTAS, MAX_NAME_CHARS, Launch, Snapshot
from tuiprof.trace.text import printable

PAPER_WAVES = 4.0
"""Baghsorkhi12 sec. 3.1 / 5.3: the snapshot is 4 x the threads running at once on all SMs."""


def max_snapshot_ctas(arch: Arch, waves: float = PAPER_WAVES, ctas: int | None = None) -> int:
    """The most CTAs `choose_snapshot` takes for any launch on `arch` (at most `max_ctas_per_sm`
    resident per SM): a counting run that must come before the launch is known counts no more."""
    return ctas if ctas is not None else max(1, int(round(waves * arch.sm_count * arch.max_ctas_per_sm)))


def snapshot_span(arch: Arch, ctas: int | None = None, start: int | None = 0, warm: int | None = 0
                  ) -> tuple[int, int]:
    """``(lo, hi)``: CTAs ``lo .. hi - 1`` hold every CTA `choose_snapshot` may take, warm-up
    included, with these options on `arch` for any launch (at most `max_ctas_per_sm` resident per
    SM): what a counting run that must come before the launch is known counts."""
    warm_max = warm if warm is not None else arch.sm_count * arch.max_ctas_per_sm
    n_max = max_snapshot_ctas(arch, ctas=ctas)
    if start is None:
        return 0, warm_max + n_max
    return max(start - warm_max, 0), start + n_max


def check_recordable(launch: Launch) -> None:
    """Refuse (UsageError), when the recorded launch starts and before any of its work, a launch
    whose trace the .tptrace format could not hold: the caps of `trace.data`, the same the
    loader and the writer check."""
    if launch.grid_ctas > MAX_GRID_CTAS:
        raise UsageError(f"the launch of {printable(launch.kernel, 80)} has a grid of {launch.grid_ctas:,} CTAs, more than "
                         f"the {MAX_GRID_CTAS:,} a tuiprof trace holds (tuiprof's limit, not CUDA's)",
                         "record a smaller launch of the kernel (fewer CTAs), or another launch with --launch-index")
    if len(launch.kernel) > MAX_NAME_CHARS:
        raise UsageError(f"the kernel's name is {len(launch.kernel):,} characters long, more than the {MAX_NAME_CHARS:,} a "
                         f"tuiprof trace holds: {printable(launch.kernel, 80)}",
                         "give the kernel a shorter name (extern \"C\", or fewer template arguments)")


def default_warm(launch: Launch, arch: Arch) -> int:
    """The default warm-up: one resident set, the CTAs that run at once on all the SMs of `arch`
    (`launch.ctas_per_sm` each). Every SM the snapshot covers then starts with its MD CTAs' lines
    in its L1, as after the CTAs it ran before on the hardware, and the shared L2 holds what all
    the SMs ran (the snapshot alone, replayed cold, counts the grid's cold misses once per
    snapshot instead of once per kernel). A multiple of the SM count, so the counted CTAs keep
    the SMs the model deals them (`tuiprof.sim.prepared.cta_layout`). `choose_snapshot` bounds it
    by the CTAs before the snapshot's start: none when the snapshot is the whole grid."""
    return arch.sm_count * max(launch.ctas_per_sm, 1)


def choose_snapshot(launch: Launch, arch: Arch, waves: float = PAPER_WAVES, ctas: int | None = None,
                    why: str = "", start: int | None = 0, warm: int | None = 0) -> Snapshot:
    """Consecutive CTAs from CTA `start`: `waves` x the CTAs resident at once on all SMs (or exactly
    `ctas`), capped by the grid; the rule is recorded in words.

    `warm`: as many of the CTAs just before `start` as there are (at most `warm`) are recorded
    too, first, and only warm the caches (`Snapshot.warm`: replayed, not counted). On the
    hardware the CTAs before the snapshot's ran first and left their lines in the L1s and the L2;
    a snapshot replayed from cold caches counts cold misses that the kernel's steady state does
    not have (a 128-CTA snapshot of a 4096-CTA matrix product reads B cold once in 2 grid rows,
    the whole kernel once in 64).

    None is the command line's default (`default_warm`): `warm` None warms with one resident set,
    and `start` None starts the counted CTAs after that warm-up where the grid leaves room for
    the whole snapshot after it (so `start` None with `warm` 0 is the cold snapshot from CTA 0)."""
    grid = launch.grid_ctas
    check_recordable(launch)
    if ctas is not None and ctas < 1:
        raise UsageError(f"--snapshot must be at least 1 CTA, got {ctas}", "for example --snapshot 64")
    auto = warm is None
    per_sm = max(launch.ctas_per_sm, 1)
    resident = arch.sm_count * per_sm
    want = ctas if ctas is not None else max(1, int(round(waves * resident)))
    if warm is None:
        warm = default_warm(launch, arch)
    if start is None:
        start = min(max(warm, 0), max(grid - want, 0))
    if not 0 <= start < grid:
        raise UsageError(f"--snapshot-start {start} is outside the grid of {grid} CTAs",
                         f"choose a CTA between 0 and {grid - 1}")
    if warm < 0:
        raise UsageError(f"--snapshot-warm must be at least 0 CTAs, got {warm}", "for example --snapshot-warm 128")
    n = min(want, grid - start)
    first = "CTA 0" if start == 0 else f"CTA {start}"
    rule = (f"{n} consecutive CTAs from {first} (Baghsorkhi12 sec. 3.1): "
            f"{f'{n / resident:.3g} x' if n >= resident else f'{n / resident:.1%} of'} the {resident} CTAs "
            f"({resident * launch.threads_per_cta} threads) that run at once on the {arch.sm_count} SMs of the "
            f"{arch.name} at {per_sm} CTAs/SM")
    if want > grid - start:
        rule += f"; the whole grid (the rule asked for {want} CTAs)" if start == 0 else \
            f"; up to the end of the grid (the rule asked for {want} CTAs)"
    w = min(warm, start)
    if w:
        rule += (f"; after {w} CTAs from CTA {start - w} that warm the caches, replayed and not counted "
                 f"(the steady state, not a cold start{'; the default warm-up: one resident set' if auto else ''})")
    if why:
        rule += f"; {why}"
    return Snapshot(cta_ids=np.arange(start - w, start + n, dtype=np.int64), rule=rule, warm=w)
