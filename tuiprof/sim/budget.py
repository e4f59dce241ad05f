"""How much memory a run will take, estimated before it starts (issue 9 items 7 and 10).

An absurd what-if (``--set l2.size=6GiB`` took 4 GB, ``sm_count = 1000000`` 12 GB) or a 4 KB
trace declaring 2^24 CTAs (1.3 GB of per-CTA model state) must be refused with a hint before any
allocation, not end in the kernel's OOM killer or a MemoryError. The estimate adds up, from
measured peaks (`benchmarks/bench_hostile.py` prints them beside it), what the run holds at
once:

- the process itself (interpreter, NumPy, Numba and the compiled kernels) and the loaded trace;
- the trace packed for the simulator: the L1 requests of each global or local warp access;
- per trial thread, the caches' state: every L2 line, and the L1 lines held at once (the replay
  kernel runs the L1s SM by SM once all of them exceed `L1_BY_SM_LINES` lines, so then one
  SM's), plus each access's issue order;
- the SM-utilisation model's per-CTA arrays: one entry per CTA of the whole grid when the trace
  carries per-CTA records (measured clocks, or modeled work), else one per snapshot CTA (the grid
  repeats the snapshot's costs, `tuiprof.sim.dispatch`, which itself needs memory in the SMs only).

It errs high: 1.1-1.5x the measured peak on 12 demos and what-ifs, 1.3x on a 2^24-CTA grid. The
budget is half the machine's memory or half the process's address-space limit
(`tuiprof.resources.memory_budget`), like the loader's.
"""

from __future__ import annotations

import numpy as np

from tuiprof import units
from tuiprof.arch.spec import Arch, CacheConfig
from tuiprof.errors import UsageError
from tuiprof.resources import memory_budget
from tuiprof.trace.data import Trace

PROCESS_BYTES = 192 << 20
"""The process before any trace: measured 156-165 MiB (vecadd, whose trace is 1,920 accesses)."""
TRACE_BYTES_PER_ACCESS = 352
"""One loaded warp access: 32 lane addresses (256 B), op id, mask and their share of the per-warp
arrays; measured 330-345 B (spmv-u, cr, matmul16)."""
PACKED_BYTES_PER_ACCESS = 32
"""One warp access packed for the simulator: its sequence start, op and prefix sums."""
REQUEST_BYTES_PER_CACHED_ACCESS = 480
"""One global or local warp access's L1 requests (line, sector mask, id; up to 32 for a
scattered gather), at most: measured 436 B with `PACKED_BYTES_PER_ACCESS` for spmv-u's gathers.
Shared-memory accesses make none."""
BYTES_PER_LINE = 16
"""One simulated cache line's state in the replay kernel (tag, valid and dirty masks, recency
links, its share of the hash table); measured 8 B (a 768 MiB L2)."""
TRIAL_BYTES_PER_ACCESS = 32
"""One warp access's per-trial state (issue order, the L1's sends)."""
BYTES_PER_GRID_CTA = 96
"""One CTA with per-CTA records in the SM-utilisation model (Farooqui11: cost, SM, start, end and
their sorts); measured 76 B (2^24 CTAs: 1.3 GB)."""
BYTES_PER_SNAPSHOT_CTA = 24
"""One snapshot CTA without records: its id as loaded, and its cost when the CTAs' costs differ."""
L1_BY_SM_LINES = 8192
"""All SMs' L1 lines above which the replay kernel runs the L1s SM by SM (Volta and later: 80-132
SMs of 1-2K lines); below it (Fermi: 14 x 128) one walk of the merged stream does every level.
Defined here, where no Numba is imported; `tuiprof.sim.replay` uses it."""


def _lines(c: CacheConfig) -> int:
    return c.size // c.line if c.enabled else 0


def trial_bytes(arch: Arch, n_accesses: int) -> int:
    """One trial's working memory on `arch` for a snapshot of `n_accesses` (an upper bound)."""
    l1 = _lines(arch.l1)
    l1_held = min(arch.sm_count * l1, max(l1, L1_BY_SM_LINES))
    return (l1_held + _lines(arch.l2)) * BYTES_PER_LINE + n_accesses * TRIAL_BYTES_PER_ACCESS


def run_bytes(arch: Arch, n_accesses: int, n_cached: int, threads: int, grid_ctas: int,
              snapshot_ctas: int = 0) -> int:
    """The run's peak for a snapshot of `n_accesses` warp accesses, `n_cached` of them global or
    local: the process, the trace loaded and packed, `threads` trials at once and the per-CTA
    models over `grid_ctas` CTAs with records and `snapshot_ctas` without (an upper bound, see
    the module docstring)."""
    return (PROCESS_BYTES + n_accesses * (TRACE_BYTES_PER_ACCESS + PACKED_BYTES_PER_ACCESS)
            + n_cached * REQUEST_BYTES_PER_CACHED_ACCESS + max(threads, 1) * trial_bytes(arch, n_accesses)
            + grid_ctas * BYTES_PER_GRID_CTA + snapshot_ctas * BYTES_PER_SNAPSHOT_CTA)


def cached_accesses(trace: Trace) -> int:
    """The warp accesses of `trace` that go through the caches (global or local memory)."""
    cached = np.array([o.is_cached for o in trace.ops], dtype=bool)
    return int(trace.accesses_per_op(counted=False)[cached].sum())


def recorded_ctas(trace: Trace) -> int:
    """The CTAs with per-CTA records the SM-utilisation model holds an entry for: the grid's when
    the trace has records, else none (the grid repeats the snapshot's costs)."""
    c = trace.ctas
    records = any(a is not None for a in (c.insts, c.accesses, c.sm, c.start, c.end))
    return trace.launch.grid_ctas if records else 0


def check_run_memory(arch: Arch, trace: Trace, threads: int) -> None:
    """Refuse a run of `trace` that would not fit in the memory budget, before it starts."""
    n_accesses, grid_ctas = trace.n_accesses, recorded_ctas(trace)
    need = run_bytes(arch, n_accesses, cached_accesses(trace), threads, grid_ctas, trace.snapshot.n_ctas)
    budget = memory_budget()
    if need > budget.bytes:
        grid = f", {grid_ctas:,} CTAs" if grid_ctas * BYTES_PER_GRID_CTA > need // 4 else ""
        raise UsageError(
            f"simulating {arch.name} would need about {units.size(need)} ({n_accesses:,} warp accesses{grid}, "
            f"{threads} trial thread(s)), more than the {units.size(budget.bytes)} budget (half {budget.of})",
            "use smaller what-if cache sizes or SM counts (--set), a smaller snapshot or grid, or a machine with "
            "more memory")
