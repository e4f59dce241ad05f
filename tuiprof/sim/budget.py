"""How much memory a run will take, estimated before it starts (issue 9 item 7).

An absurd what-if (``--set l2.size=6GiB`` took 4 GB, ``sm_count = 1000000`` 12 GB) must be refused
with a hint before any allocation, not end in the kernel's OOM killer. The estimate is an upper
bound of the simulator's per-trial state, per worker thread: every cache line of every L1 (one per
SM) and of the L2 holds tag, valid, dirty, recency and hash-chain state, and every warp access of the
snapshot has its issue order and per-request bookkeeping.
"""

from __future__ import annotations

import os

from tuiprof.arch.model import Arch, CacheConfig
from tuiprof.errors import UsageError

BYTES_PER_LINE = 64
"""Upper bound of one simulated cache line's state: a 32-byte metadata row plus up to 16 bytes of
hash buckets (load factor at least 1/2, 4-byte heads) plus one sentinel row per set, rounded up."""
BYTES_PER_ACCESS = 512
"""Upper bound of one warp access's per-trial state: issue and replay order (16 B) plus its L1
requests (up to 32, 12 B each) and their L2/DRAM queue entries."""
_BUDGET_FRACTION = 0.5


def _lines(c: CacheConfig, copies: int) -> int:
    return copies * (c.size // c.line) if c.enabled else 0


def trial_bytes(arch: Arch, n_accesses: int) -> int:
    """Upper bound of one trial's working memory on `arch` for a snapshot of `n_accesses`."""
    lines = _lines(arch.l1, arch.sm_count) + _lines(arch.l2, 1)
    return lines * BYTES_PER_LINE + n_accesses * BYTES_PER_ACCESS


def memory_budget() -> int:
    """Half the machine's physical memory (the rest is the trace, the UI and everyone else)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 8 << 30
    return int(total * _BUDGET_FRACTION)


def check_run_memory(arch: Arch, n_accesses: int, threads: int) -> None:
    """Refuse a run whose trials would not fit in the memory budget, before it starts."""
    need = trial_bytes(arch, n_accesses) * max(threads, 1)
    budget = memory_budget()
    if need > budget:
        raise UsageError(
            f"simulating {arch.name} would need about {need / (1 << 30):.1f} GiB "
            f"({threads} trial thread(s)), more than the {budget / (1 << 30):.1f} GiB budget (half this machine's memory)",
            "use smaller what-if cache sizes or SM counts (--set), or a smaller snapshot")
