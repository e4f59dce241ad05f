"""Oracles for the per-load results that no schedule can fool (issue 20 part 1).

- `guaranteed_misses`: per op, the L1 and L2 read sectors that miss under *every* valid schedule:
  a sector that no other warp touches (on its SM for the L1, anywhere for the L2) and that no
  earlier access of its own warp touched cannot be in a cache when the warp asks for it. Counted
  from the trace alone, in program order per warp, with no scheduler and no cache code, so an op's
  simulated hits can never exceed its accesses less these.
- `program_order_counts`: the counters of the reference kernel's caches replaying one warp's
  accesses in program order, with no scheduler: what every trial of a one-warp trace must give.
"""

from __future__ import annotations

import numpy as np
from cachesim import Cache, CacheSimulator, MainMemory

from tuiprof.arch import Arch
from tuiprof.sim.coalesce import CHUNK, Coalesced
from tuiprof.sim.prepared import OP_LOAD, Prepared, pack_arch
from tuiprof.sim.results import C_DR, C_DW, C_L1_RA, C_L1_REQ, C_L1_RH, C_L1_WA, C_L2_RA, C_L2_RH, C_L2_WA, C_L2_WH

HIT_COUNTERS = (C_L1_REQ, C_L1_RA, C_L1_RH, C_L1_WA, C_L2_RA, C_L2_RH, C_L2_WA, C_L2_WH, C_DR, C_DW)
"""The counters a cache decides (DRAM latencies depend on the batches' random sizes as well)."""


def _touches(co: Coalesced, masks: np.ndarray, unit_chunks: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (request, sector) pair that the requests' chunk `masks` cover, sectors `unit_chunks`
    chunks wide: ``(request index, sector)``, a sector numbered densely (by the request's dense
    line id and its place in the line)."""
    cpl = co.line // CHUNK
    spl = max(1, cpl // unit_chunks)
    reqs, sectors = [], []
    for k in range(0, cpl, unit_chunks):
        group = ((1 << unit_chunks) - 1) << k
        req = np.flatnonzero(masks.astype(np.int64) & group)
        reqs.append(req)
        sectors.append(co.req_id[req].astype(np.int64) * spl + k // unit_chunks)
    return np.concatenate(reqs), np.concatenate(sectors)


def _first_and_alone(key: np.ndarray, warp: np.ndarray, access: np.ndarray) -> np.ndarray:
    """For touches of (scope and sector, or fetch block) `key` by `warp` at `access`: whether each
    is in its warp's first access touching the key (accesses are numbered warp by warp in program
    order; one access may touch a block's sectors together) and no other warp touches the key."""
    n_acc = int(access.max()) + 1 if access.size else 1
    order = np.argsort(key * n_acc + access, kind="stable")
    k, w, a = key[order], warp[order], access[order]
    new_key = np.ones(order.size, dtype=bool)
    new_key[1:] = k[1:] != k[:-1]
    new_warp = new_key.copy()
    new_warp[1:] |= w[1:] != w[:-1]
    group = np.cumsum(new_key) - 1
    warps_in_group = np.bincount(group, weights=new_warp)
    first = a == a[np.flatnonzero(new_warp)][np.cumsum(new_warp) - 1]
    out = np.empty(order.size, dtype=bool)
    out[order] = first & (warps_in_group[group] == 1)
    return out


def guaranteed_misses(prepared: Prepared, arch: Arch) -> tuple[np.ndarray, np.ndarray]:
    """Per op, the load sectors that miss in the L1 and in the L2 under any schedule (int64
    [n_ops] each, in the units of ``l1_read_accesses`` and ``l2_read_accesses``).

    Touches count every cached access (loads, stores, atomics), at the L1's sector size for the L1
    and, for the L2, at its sector size after widening each request to whole L1 sectors (an L1
    miss asks the L2 for whole L1 sectors; an absent L1 passes the request as it is). A load's own
    L2 sectors are those it asks for when its L1 sectors miss."""
    co = prepared.coalesced
    access = np.repeat(np.arange(co.req_off.shape[0] - 1, dtype=np.int64), np.diff(co.req_off))
    acc_warp = np.repeat(np.arange(prepared.warp_cta.shape[0], dtype=np.int64),
                         np.diff(prepared.seq_off[prepared.warp_seq_off]))
    cpl = co.line // CHUNK
    cps1 = max(1, min(arch.l1.sector, arch.l1.line) // CHUNK)
    cps2 = max(1, min(arch.l2.sector, arch.l2.line) // CHUNK)
    out = []
    for level in (1, 2):
        if level == 1 and not arch.l1.enabled:
            out.append(np.zeros(prepared.n_ops, dtype=np.int64))
            continue
        masks = co.req_mask.astype(np.int64)
        if level == 2 and arch.l1.enabled and cps1 > 1:
            widened = np.zeros_like(masks)
            for k in range(0, cpl, cps1):
                group = ((1 << cps1) - 1) << k
                widened |= np.where(masks & group, group, 0)
            masks = widened
        unit = cps1 if level == 1 else min(cps2, cpl)
        req, sector = _touches(co, masks, unit)
        acc = access[req]
        warp = acc_warp[acc]
        scope = prepared.warp_cta.astype(np.int64)[warp] % prepared.sm_count if level == 1 else 0
        n_sectors = co.lines.shape[0] * max(1, cpl // unit)
        if level == 2:  # a read miss fills its fetch block: a first touch of a block is the miss
            block = max(1, min(arch.l2.fetch, arch.l2.line) // CHUNK // unit)
            sector = sector // block
        alone = _first_and_alone(scope * n_sectors + sector, warp, acc)
        op = prepared.acc_op[acc]
        counted = alone & (prepared.op_write[op] == OP_LOAD)
        # a snapshot's warm-up CTAs count in shadow ops (o + n_ops), which the trial drops too
        out.append(np.bincount(op[counted], minlength=prepared.kernel_ops)[:prepared.n_ops].astype(np.int64))
    return out[0], out[1]


def program_order_counts(prepared: Prepared, arch: Arch) -> np.ndarray:
    """The cache counters (`HIT_COUNTERS` rows of ``[N_COUNTS, n_ops]``) of the reference kernel's
    caches replaying the trace's single warp in program order, on SM 0."""
    from tuiprof.sim.reference import replay
    from tuiprof.sim.results import N_COUNTS
    from tuiprof.sim.rng import rng_new

    assert prepared.warp_cta.shape[0] == 1, "one warp only"
    co = prepared.coalesced
    params = pack_arch(arch)
    order = np.flatnonzero(prepared.op_cached[prepared.acc_op]).astype(np.int64)
    S = prepared.sm_count
    sm_acc_off = np.full(S + 1, order.size, dtype=np.int64)
    sm_acc_off[0] = 0
    lab = np.zeros(order.size, dtype=np.int64)
    counts = np.zeros((N_COUNTS, prepared.n_ops), dtype=np.int64)
    replay(rng_new(0), params, lab, order, sm_acc_off, counts, prepared.acc_op, prepared.op_write, co.req_off,
           co.request_lines(), co.req_mask, co.req_full, prepared.n_ops, 0)
    return counts


def pycachesim_hits(lines: np.ndarray, sets: int, ways: int, line: int, policy: str = "LRU") -> int:
    mem = MainMemory()
    cache = Cache("L", sets, ways, line, policy)
    mem.load_to(cache)
    mem.store_from(cache)
    sim = CacheSimulator(cache, mem)
    sim.load([int(x) * line for x in lines], length=1)
    return int(cache.stats()["HIT_count"])
