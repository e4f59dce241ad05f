"""Builders and checks shared by the replay tests: a trace whose hits depend on the schedule
(`contended_trace`), one that stores and reloads (`rewrite_trace`), the geometries that reach each
special path of the replay kernel (`EDGE`), and the trial-for-trial comparison of the replay kernel
with the sequential reference (`differences`, `assert_identical`)."""

from __future__ import annotations

import numpy as np

from tests.support.sim_traces import FULL, lanes, op, trace_of
from tuiprof.arch import Arch
from tuiprof.sim.prepared import prepare
from tuiprof.sim.reference import reference_trial
from tuiprof.sim.results import COUNTER_FIELDS, TrialResult
from tuiprof.sim.trial import run_trial


def contended_trace(seed: int = 0):
    """8 CTAs of 2 warps, random gathers over 32 KiB plus a private stream per warp, so that
    hits depend on the order of warps and SMs."""
    rng = np.random.default_rng(seed)
    warps = []
    for w in range(16):
        acc = []
        for k in range(40):
            gather = np.uint64(0x100000) + rng.integers(0, 8192, 32).astype(np.uint64) * np.uint64(4)
            acc.append((0, gather, FULL))
            acc.append((0, np.uint64(0x800000 + w * 0x10000 + (k % 12) * 128) + np.arange(32, dtype=np.uint64) * 4, FULL))
        warps.append(acc)
    return trace_of(warps, warps_per_cta=2, ctas_per_sm=2)


def differences(a: TrialResult, b: TrialResult) -> list[str]:
    """The outputs on which two trials differ (none: identical)."""
    out = [f for f in COUNTER_FIELDS if not np.array_equal(getattr(a, f), getattr(b, f))]
    if not np.array_equal(a.dram_batch_latencies, b.dram_batch_latencies):
        out.append("dram_batch_latencies")
    if not np.array_equal(a.dram_latency, b.dram_latency, equal_nan=True):
        out.append("dram_latency")
    out += [f for f in ("dram_writebacks", "dram_writebacks_owed") if getattr(a, f) != getattr(b, f)]
    return out


def assert_identical(trace, arch: Arch, mds, seeds) -> list[TrialResult]:
    p = prepare(trace, arch)
    runs = []
    for md in mds:
        for seed in seeds:
            fast, ref = run_trial(p, arch, md, seed), reference_trial(p, arch, md, seed)
            assert differences(fast, ref) == [], (arch.name, md, seed)
            runs.append(fast)
    return runs


# Geometries that reach each special path; every one also runs loads and stores of random masks.
EDGE = {
    "write-allocate, FIFO L1 and L2, 16 B DRAM transactions, rows shorter than the interleave, "
    "3 channels of 5 banks, 3 L2 partitions":
        dict(l1__store_policy="write-allocate", l1__replacement="fifo", l2__replacement="fifo", l2__size="6KiB",
             l2__assoc=2, l2__partitions=3, dram__transaction=16, dram__row_size=128, dram__interleave=1024,
             dram__channels=3, dram__banks=5),
    "Fermi-like lockstep L2 (32 B lines under unsectored 128 B L1 lines), write-evict, 128 B transactions":
        dict(l1__sector=128, l1__assoc=4, l1__store_policy="write-evict", l2__line=32, l2__sector=32,
             l2__size="6KiB", l2__assoc=4, l2__partitions=3, dram__transaction=128, dram__interleave=64),
    "lockstep over 2-chunk L2 lines (256 B L1 lines of 64 B sectors, 64 B L2 lines), hashed 256-way L1":
        dict(l1__line=256, l1__sector=64, l1__size="64KiB", l1__assoc=256, l1__store_policy="write-allocate",
             l2__line=64, l2__sector=64, l2__size="8KiB", l2__assoc=4, l2__partitions=2),
    "L2 lines longer than L1 lines (256 B over 128 B), 64 B L2 sectors":
        dict(l2__line=256, l2__sector=64, l2__size="16KiB", l2__assoc=4, l1__store_policy="write-allocate"),
    "no lockstep: 4 blocks per L1 line over 3 sets":
        dict(l1__sector=128, l2__line=32, l2__sector=32, l2__size="3KiB", l2__assoc=32, l2__partitions=3),
    "no L1, 4 L2 partitions": dict(l1__size=0, l2__size="4KiB", l2__partitions=4, l2__assoc=2),
    "no L2, 2 L1 partitions": dict(l2__size=0, l1__partitions=2, l1__size="2KiB", l1__assoc=2),
    "neither cache": dict(l1__size=0, l2__size=0),
    "write-back L2 hashed (xor) over 3 slices of 8 sets and 6 channels, write-allocate L1":
        dict(l2__write_policy="write-back", address_hash="xor", l1__store_policy="write-allocate", l2__size="12KiB",
             l2__assoc=4, l2__partitions=3, dram__channels=6),
    "write-back lockstep L2 (32 B lines under unsectored 128 B L1 lines)":
        dict(l1__sector=128, l1__assoc=4, l1__store_policy="write-evict", l2__line=32, l2__sector=32,
             l2__size="6KiB", l2__assoc=4, l2__partitions=3, l2__write_policy="write-back"),
    "hashed L2 of 32 B lines, 4 per L1 line (no lockstep), write-back, 4 channels":
        dict(l1__sector=128, l2__line=32, l2__sector=32, l2__size="4KiB", l2__assoc=4, l2__partitions=2,
             address_hash="xor", l2__write_policy="write-back", dram__channels=4),
    "write-back, hashed L2 lines longer than L1 lines (256 B, 64 B sectors)":
        dict(l2__line=256, l2__sector=64, l2__size="16KiB", l2__assoc=4, l1__store_policy="write-allocate",
             l2__write_policy="write-back", address_hash="xor"),
    "hashed 256-way L1s (SM by SM with 3 SMs), write-back hashed L2":
        dict(l1__size="512KiB", l1__assoc=256, l1__store_policy="write-allocate", l2__write_policy="write-back",
             address_hash="xor"),
    "write-through hashed L2, 3 channels (no power-of-two factor)":
        dict(address_hash="xor", l2__partitions=2, l2__size="16KiB", dram__channels=3, l1__store_policy="write-allocate"),
    "64 B fills (l2.fetch_granularity) on a write-through linear L2 of 3 partitions, write-allocate L1":
        dict(l2__fetch_granularity=64, l2__size="12KiB", l2__assoc=4, l2__partitions=3,
             l1__store_policy="write-allocate"),
    "128 B fills on a write-back hashed L2, write-allocate L1":
        dict(l2__fetch_granularity=128, l2__write_policy="write-back", address_hash="xor", l2__size="16KiB",
             l2__assoc=4, l2__partitions=2, l1__store_policy="write-allocate"),
    "64 B fills on 64 B L2 lines of 32 B sectors under 128 B L1 lines (lockstep's geometry, run per set)":
        dict(l1__sector=128, l1__assoc=4, l1__store_policy="write-evict", l2__line=64, l2__sector=32,
             l2__fetch_granularity=64, l2__size="6KiB", l2__assoc=4, l2__partitions=3),
    "MRU L1 and L2, write-allocate L1, linear L2 of 3 partitions":
        dict(l1__replacement="mru", l2__replacement="mru", l1__store_policy="write-allocate", l2__size="6KiB",
             l2__assoc=4, l2__partitions=3),
    "MRU lockstep L2 (32 B lines under unsectored 128 B L1 lines), MRU write-evict L1":
        dict(l1__sector=128, l1__assoc=4, l1__store_policy="write-evict", l1__replacement="mru", l2__line=32,
             l2__sector=32, l2__size="6KiB", l2__assoc=4, l2__partitions=3, l2__replacement="mru"),
    "MRU hashed 256-way L1s, MRU write-back hashed L2":
        dict(l1__size="512KiB", l1__assoc=256, l1__store_policy="write-allocate", l1__replacement="mru",
             l2__write_policy="write-back", address_hash="xor", l2__replacement="mru"),
    "two L2 halves (A100/H100 partitions), 64 B fills, write-back hashed L2, write-allocate L1":
        dict(l2__halves=2, l2__fetch_granularity=64, l2__write_policy="write-back", address_hash="xor",
             l2__size="16KiB", l2__assoc=4, l2__partitions=2, l1__store_policy="write-allocate"),
    "two L2 halves, write-through linear L2 of 3 slices, 32 B L2 lines under 128 B L1 lines":
        dict(l2__halves=2, l1__sector=128, l2__line=32, l2__sector=32, l2__size="6KiB", l2__assoc=4,
             l2__partitions=3),
    "two RANDOM L2 halves, write-back linear L2, hashed 256-way L1s":
        dict(l2__halves=2, l2__replacement="random", l2__write_policy="write-back", l2__size="8KiB", l2__assoc=4,
             l1__size="512KiB", l1__assoc=256, l1__store_policy="write-allocate"),
    "RANDOM L1 and L2, write-allocate L1, write-back linear L2 of 3 partitions":
        dict(l1__replacement="random", l2__replacement="random", l1__store_policy="write-allocate",
             l2__write_policy="write-back", l2__size="6KiB", l2__assoc=4, l2__partitions=3),
    "RANDOM on the lockstep geometry (32 B L2 lines under 128 B L1 lines: run per set), write-evict":
        dict(l1__sector=128, l1__assoc=4, l1__store_policy="write-evict", l1__replacement="random", l2__line=32,
             l2__sector=32, l2__size="6KiB", l2__assoc=4, l2__partitions=3, l2__replacement="random"),
    "RANDOM hashed 256-way L1s (SM by SM with 3 SMs), RANDOM hashed L2":
        dict(l1__size="512KiB", l1__assoc=256, l1__store_policy="write-allocate", l1__replacement="random",
             address_hash="xor", l2__replacement="random"),
}


def rewrite_trace(seed: int):
    """Warps that store (whole lines, single lanes, 2 B lanes) and reload a 24 KiB region, with
    atomics: dirty evictions, reloads of partly written sectors, atomics on a write-back L2."""
    rng = np.random.default_rng(seed)
    warps = []
    for _w in range(6):
        acc = []
        for _ in range(120):
            line = int(rng.integers(0, 192))
            kind = int(rng.integers(0, 3))
            mask = FULL if rng.random() < 0.6 else int(rng.integers(1, 2**32))
            stride = 4 if rng.random() < 0.7 else 2
            acc.append((kind, lanes(line * 128 + int(rng.integers(0, 3)) * 2, stride), mask))
        warps.append(acc)
    return trace_of(warps, ops=(op("load"), op("store"), op("atomic")), warps_per_cta=2, ctas_per_sm=2)
