"""Everything a trial needs from a (Trace, Arch), computed once and packed into flat arrays.

`prepare` coalesces the warp accesses (`coalesce`), cuts each warp's stream into bulk sequences,
groups warps by CTA and places CTAs on SMs (snapshot CTA k -> SM ``k % sm_count``, Baghsorkhi12
sec. 2: round-robin in the order of the CTA ids; or, when the trace carries each CTA's measured
SM, on that SM in the order it ran them: `measured_placement`). `pack_arch` turns an Arch into the int64
parameter vector the Numba kernel reads. A `Prepared` depends on the Arch only through the L1
line size (coalescing) and the SM count (placement): the same one serves every MD and every
cache or DRAM variant of that GPU.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from tuiprof.arch.spec import Arch
from tuiprof.errors import ArchError
from tuiprof.jit import KERNEL, njit
from tuiprof.sim.addressing import HASH_CODES, hash_polynomial
from tuiprof.sim.cache import Replacement
from tuiprof.sim.coalesce import CHUNK, Coalesced, coalesce_trace, dense_ids
from tuiprof.trace.data import Trace

# Indices into the parameter vector of `pack_arch`. The L1 and L2 fields run in the same order
# (`_pack_level`, `tuiprof.sim.reference._level`, `tuiprof.sim.replay.Geometry`).
P_SM = 0
P_L1_ON, P_L1_SETS, P_L1_ASSOC, P_L1_PARTS, P_L1_CPL, P_L1_CPS, P_L1_LRU, P_L1_STORE = range(1, 9)
P_L2_ON, P_L2_SETS, P_L2_ASSOC, P_L2_PARTS, P_L2_CPL, P_L2_CPS, P_L2_LRU = range(9, 16)
(P_DR_CH, P_DR_BANKS, P_DR_IL, P_DR_ROW, P_DR_BASE, P_DR_HIT, P_DR_MISS, P_DR_BURST, P_DR_TX,
 P_DR_GROUP) = range(16, 26)
P_L1_LINE = 26
P_L2_WB, P_HASH, P_L2_POLY, P_DR_POLY = range(27, 31)
P_L1_WAYS_MAX = 31
P_L2_CPF = 32
"""Chunks of an L2 read miss's DRAM fill (`L2Config.fetch`: the fetch granularity over 32 B)."""
P_L2_HALVES = 33
"""1, or 2 for the L2's two partitions (`L2Config.halves`)."""
N_PARAMS = 34

STORE_EVICT, STORE_NO_ALLOCATE, STORE_ALLOCATE = 0, 1, 2
_STORE_CODES = {"write-evict": STORE_EVICT, "write-no-allocate": STORE_NO_ALLOCATE,
                "write-allocate": STORE_ALLOCATE}
OP_LOAD, OP_STORE, OP_ATOMIC = 0, 1, 2
"""``Prepared.op_write`` codes: a store writes; an atomic reads and writes (on a write-back L2 it
keeps the write-through rule: its misses go on to DRAM, see `tuiprof.sim.reference`)."""
DRAM_GROUP_MAX = 32
"""Largest group of DRAM requests one SM issues at once: the memory vector size (Baghsorkhi12 3.2.3)."""


def _check_level(arch: Arch, label: str, line: int, sector: int, enabled: bool) -> None:
    if line < CHUNK or line > 32 * CHUNK or (enabled and sector < CHUNK):
        raise ArchError(f"arch {arch.name!r}: {label} lines of {line} B with {sector} B sectors are not modeled",
                        f"the simulator needs lines of {CHUNK}..{32 * CHUNK} B and sectors of at least {CHUNK} B")


def _pack_level(p: np.ndarray, at: int, c) -> None:
    """The fields one cache level shares with the other, from index `at` (P_L1_ON or P_L2_ON):
    on, sets, assoc, partitions, chunks per line, chunks per sector, LRU."""
    p[at:at + 7] = (int(c.enabled), c.sets, c.assoc, c.partitions, c.line // CHUNK,
                    max(1, min(c.sector, c.line) // CHUNK), int(Replacement[c.replacement.upper()]))


def pack_arch(arch: Arch) -> np.ndarray:
    """The int64 parameter vector of `arch` for the trial kernel (see the P_* indices)."""
    l1, l2, d = arch.l1, arch.l2, arch.dram
    _check_level(arch, "l1", l1.line, l1.sector, l1.enabled)
    _check_level(arch, "l2", l2.line, l2.sector, l2.enabled)
    p = np.zeros(N_PARAMS, dtype=np.int64)
    p[P_SM] = arch.sm_count
    _pack_level(p, P_L1_ON, l1)
    p[P_L1_STORE] = _STORE_CODES[l1.store_policy]
    _pack_level(p, P_L2_ON, l2)
    p[P_DR_CH] = d.channels
    p[P_DR_BANKS] = d.banks
    p[P_DR_IL] = d.interleave
    p[P_DR_ROW] = d.row_size
    p[P_DR_BASE] = d.base_latency
    p[P_DR_HIT] = d.row_hit_cycles
    p[P_DR_MISS] = d.row_miss_cycles
    p[P_DR_BURST] = d.burst_cycles
    p[P_DR_TX] = d.transaction
    p[P_DR_GROUP] = DRAM_GROUP_MAX
    p[P_L1_LINE] = l1.line
    p[P_L2_WB] = int(l2.write_policy == "write-back")
    p[P_HASH] = HASH_CODES[arch.address_hash]
    p[P_L2_POLY] = hash_polynomial(max(1, l2.sets * l2.partitions))
    p[P_DR_POLY] = hash_polynomial(d.channels)
    p[P_L1_WAYS_MAX] = l1_ways_max(arch)
    p[P_L2_CPF] = max(1, min(l2.fetch, l2.line) // CHUNK)
    p[P_L2_HALVES] = l2.halves if l2.enabled else 1
    return p


def l1_ways_max(arch: Arch) -> int:
    """The most ways `arch`'s L1 can take: its own, or on Volta and later (the driver sizes the L1
    beside each kernel's shared-memory carve-out, `tuiprof.arch.occupancy.carveout_arch`) what the
    unified L1/shared array leaves beside the smallest carve-out."""
    from tuiprof.arch.occupancy import carveout

    l1 = arch.l1
    if carveout(arch, 0) is None:
        return l1.assoc
    return max(l1.assoc, (arch.unified_l1_shared - arch.shared_carveouts[0]) // (l1.line * l1.sets * l1.partitions))


@dataclass(frozen=True)
class OpCoalescing:
    """Per-op figures that do not vary between trials (int64 / float64 [n_ops])."""

    accesses: np.ndarray
    """Dynamic warp accesses of the op in the snapshot (every space)."""
    requests: np.ndarray
    """L1 line requests after coalescing (0 for shared-memory ops)."""
    sectors: np.ndarray
    """32 B sectors requested."""
    requests_per_access: np.ndarray
    """Mean requests per warp access of a cached op (nan for shared-memory ops)."""
    sectors_per_request: np.ndarray
    """Mean 32 B sectors per request (nan without requests)."""


@dataclass(frozen=True)
class Prepared:
    """A trace packed for the trial kernel (``R`` accesses, ``W`` warps, ``C`` snapshot CTAs,
    ``Q`` sequences, ``S`` SMs).

    - ``acc_op`` int32 [R]; ``op_write`` uint8 [K] (``OP_LOAD``, ``OP_STORE`` or
      ``OP_ATOMIC``); ``op_cached`` uint8 [K] (global or local space). The accesses of the
      snapshot's warm-up CTAs (`Snapshot.warm`) name *shadow* op ``o + n_ops``, so ``K`` is
      ``kernel_ops``: the kernels count them in columns the trial then drops (replayed, not counted)
    - ``coalesced``: the L1 requests of every access (`Coalesced`)
    - ``seq_off`` int64 [Q+1]: accesses of bulk sequence q; sequences are numbered warp by warp
    - ``warp_seq_off`` int64 [W+1]: sequences of warp w; ``warp_cta`` int32 [W]
    - ``cta_warp_off`` int64 [C+1] / ``cta_warps`` int32 [W]: warps of each CTA, by warp index;
      ``C`` counts only the snapshot CTAs that have warps, numbered so that each keeps its SM and
      its order among the SM's CTAs (`cta_layout`): a CTA without warps changes nothing in a
      trial, and a trace declaring millions of them costs nothing
    - ``snapshot_ctas``: the snapshot's CTAs, all of them
    - ``sm_seq_off`` int64 [S+1]: slice of a trial's issue order owned by each SM
    - ``sm_requests`` int64 [S]: L1 requests per SM
    - ``sm_acc_off`` int64 [S+1]: slice of a trial's merged access order owned by each SM (its
      cached warp accesses)
    - ``cta_acc`` int64 [C]: cached warp accesses of each CTA (what one resident set weighs)
    - ``seq_epoch`` int32 [Q]: the barrier interval of each sequence within its warp (the CTA
      barriers its warp has passed before it: `tuiprof.trace.data.StaticOp.barrier_after`)
    """

    arch: Arch
    n_ops: int
    acc_op: np.ndarray
    op_write: np.ndarray
    op_cached: np.ndarray
    coalesced: Coalesced
    seq_off: np.ndarray
    warp_seq_off: np.ndarray
    warp_cta: np.ndarray
    cta_warp_off: np.ndarray
    cta_warps: np.ndarray
    sm_seq_off: np.ndarray
    sm_requests: np.ndarray
    sm_acc_off: np.ndarray
    cta_acc: np.ndarray
    seq_epoch: np.ndarray
    snapshot_ctas: int = 0
    split: int = 0
    """The first counted CTA (renumbered); the CTAs below it are the snapshot's warm-up, which the
    schedule runs to the end before the counted ones (0: no warm-up)."""
    _wide_ids: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False, compare=False)

    def line_ids(self, shift: int) -> tuple[np.ndarray, np.ndarray]:
        """Dense ids of the lines of ``2**shift`` L1 lines that hold each request, and those
        lines: ``(ids int32 [Q], lines int64 [N])``, for an L2 whose lines are longer than the L1's.
        Computed on first use and kept (``shift`` 0 is the coalescing's own ids)."""
        co = self.coalesced
        if shift == 0:
            return co.req_id, co.lines
        ids = self._wide_ids.get(shift)
        if ids is None:
            # The L1 lines are numbered in order of first appearance, so numbering their wide lines
            # in the order of the L1 lines numbers them in order of first appearance too.
            of_line, wide = dense_ids(co.lines >> shift)
            ids = self._wide_ids[shift] = (of_line[co.req_id], wide)
        return ids

    @property
    def kernel_ops(self) -> int:
        """Op columns the trial kernels count: the ops, and their warm-up shadows when the
        snapshot has warm-up CTAs."""
        return int(self.op_write.shape[0])

    @property
    def warm_accesses(self) -> int:
        """Cached warp accesses of the warm-up CTAs: the first this many of a trial's merged stream
        (`tuiprof.sim.schedule.order_accesses` runs the warm-up first), whose DRAM batches,
        write-backs and dirty sectors the trial does not count."""
        return int(self.cta_acc[:self.split].sum()) if self.split > 0 else 0

    @property
    def sm_count(self) -> int:
        return int(self.sm_seq_off.shape[0] - 1)

    @property
    def n_sequences(self) -> int:
        return int(self.seq_off.shape[0] - 1)

    @property
    def n_ctas(self) -> int:
        return int(self.cta_warp_off.shape[0] - 1)

    def used_ops(self) -> np.ndarray:
        """The ids of the ops some access names, in order (computed once)."""
        used = self._wide_ids.get(-1)
        if used is None:
            counts = np.bincount(self.acc_op, minlength=self.kernel_ops)[:self.n_ops]
            used = self._wide_ids[-1] = (np.flatnonzero(counts), counts)
        return used[0]

    def op_stats(self) -> "OpCoalescing":
        """Per-op warp accesses and coalescing statistics (the same in every trial) of the counted
        CTAs: the snapshot's warm-up CTAs (shadow ops) are replayed, not counted, so a warm
        snapshot's figures are those of its counted CTAs recorded alone."""
        co = self.coalesced
        n = self.n_ops
        accesses = np.bincount(self.acc_op, minlength=self.kernel_ops).astype(np.int64)[:n]
        if self.kernel_ops > n:
            counted = self.acc_op < n
            per_access = np.diff(co.req_off)
            of_request = np.repeat(self.acc_op, per_access)
            keep = of_request < n
            cached = self.op_cached[:n].astype(bool)
            op_accesses = np.where(cached, np.bincount(self.acc_op[counted], minlength=n), 0).astype(np.int64)
            requests = np.bincount(of_request[keep], minlength=n).astype(np.int64)
            sectors = np.bincount(of_request[keep], weights=np.bitwise_count(co.req_mask[keep]),
                                  minlength=n).astype(np.int64)
            co = dataclasses.replace(co, op_accesses=op_accesses, op_requests=requests, op_sectors=sectors)
        return OpCoalescing(accesses=accesses,
                            requests=co.op_requests, sectors=co.op_sectors,
                            requests_per_access=co.requests_per_access(),
                            sectors_per_request=co.sectors_per_request())

    def working_set_lines(self) -> float:
        """Mean distinct L1 lines one snapshot CTA touches (Yen14's working set per CTA):
        `tuiprof.model.decisions.working_set_lines`, counted in one pass over the dense line ids."""
        co = self.coalesced
        distinct = _distinct_per_cta(self.cta_warp_off, self.cta_warps, self.warp_seq_off, self.seq_off, self.acc_op,
                                     self.op_cached, co.req_off, co.req_id, co.lines.shape[0])
        return distinct / max(self.snapshot_ctas, 1)

    def compatible(self, arch: Arch) -> bool:
        """Whether `arch` can run on this preparation (same L1 line and SM count)."""
        return arch.l1.line == self.arch.l1.line and arch.sm_count == self.arch.sm_count


@njit(**KERNEL)
def _distinct_per_cta(cta_warp_off, cta_warps, warp_seq_off, seq_off, acc_op, op_cached, req_off, req_id, n_ids):
    """Distinct (CTA, line) pairs over the cached accesses' requests: a per-line stamp of the last
    CTA that touched it, CTA by CTA."""
    stamp = np.full(max(n_ids, 1), -1, dtype=np.int64)
    count = 0
    for c in range(cta_warp_off.shape[0] - 1):
        for k in range(cta_warp_off[c], cta_warp_off[c + 1]):
            w = cta_warps[k]
            for r in range(seq_off[warp_seq_off[w]], seq_off[warp_seq_off[w + 1]]):
                if op_cached[acc_op[r]]:
                    for j in range(req_off[r], req_off[r + 1]):
                        i = req_id[j]
                        if stamp[i] != c:
                            stamp[i] = c
                            count += 1
    return count


_PAIR_TABLE = 1 << 24
"""Most (op, next op) pairs `_epochs` marks in a table (16 MiB); beyond, it searches the pairs."""


def _epochs(trace: Trace, seq_starts: np.ndarray, warp_seq_off: np.ndarray) -> np.ndarray:
    """Each sequence's barrier interval in its warp (int32 [Q]): how many of the warp's accesses up
    to its first follow an access of an op after which a CTA barrier always lies
    (`StaticOp.barrier_after`). A barrier starts a sequence, so intervals change only there."""
    n_ops = len(trace.ops)
    pairs = np.array([p * n_ops + q for q, o in enumerate(trace.ops) for p in o.barrier_after], dtype=np.int64)
    op = trace.op.astype(np.int64)
    crossed = np.zeros(op.size, dtype=np.int64)
    if pairs.size and op.size > 1:
        keys = op[:-1] * n_ops + op[1:]
        if n_ops * n_ops <= _PAIR_TABLE:  # a lookup per access, far cheaper than np.isin's sort
            table = np.zeros(n_ops * n_ops, dtype=bool)
            table[pairs] = True
            crossed[1:] = table[keys]
        else:
            crossed[1:] = np.isin(keys, pairs)
        del keys  # 8 bytes an access: not alive beside the sums below
        crossed[trace.warp_offsets[:-1][trace.warp_offsets[:-1] < op.size]] = 0  # a warp's first access
    total = np.cumsum(crossed)
    before_warp = np.concatenate([[0], total])[trace.warp_offsets[:-1]]
    per_access = total - np.repeat(before_warp, np.diff(trace.warp_offsets))
    return per_access[seq_starts].astype(np.int32)


def default_md(trace: Trace, arch: Arch) -> int:
    """The launch's CTAs per SM, or the occupancy limit of `arch` when the trace does not say."""
    if trace.launch.ctas_per_sm > 0:
        return trace.launch.ctas_per_sm
    from tuiprof.arch.occupancy import occupancy

    L = trace.launch
    return occupancy(arch, L.threads_per_cta, L.registers_per_thread, L.static_shared, L.dynamic_shared).ctas_per_sm


def prepare(trace: Trace, arch: Arch) -> Prepared:
    """Pack `trace` for trials on `arch` (coalescing, bulk sequences, CTA placement)."""
    pack_arch(arch)  # refuses geometries the kernel cannot model
    S = arch.sm_count
    n_acc = trace.n_accesses
    n_ctas = trace.snapshot.n_ctas
    co = coalesce_trace(trace, arch.l1.line)
    starts_op = np.array([o.starts_sequence for o in trace.ops], dtype=bool)
    cached_op = np.array([o.is_cached for o in trace.ops], dtype=bool)
    write_op = np.array([{"load": OP_LOAD, "store": OP_STORE}.get(o.kind, OP_ATOMIC) for o in trace.ops], dtype=np.uint8)
    wo = trace.warp_offsets
    starts = starts_op[trace.op] if n_acc else np.zeros(0, bool)
    nonempty = wo[:-1] < wo[1:]
    starts[wo[:-1][nonempty]] = True
    seq_starts = np.flatnonzero(starts).astype(np.int64)
    seq_off = np.append(seq_starts, np.int64(n_acc))
    warp_seq_off = np.searchsorted(seq_starts, wo).astype(np.int64)
    seq_epoch = _epochs(trace, seq_starts, warp_seq_off)
    warp_cta, cta_warp_off, split = cta_layout(trace.warp_cta, n_ctas, S, measured_placement(trace, S),
                                               trace.snapshot.warm, snapshot_sms(trace, arch))
    warp_sm = warp_cta.astype(np.int64) % S
    seqs_per_warp = np.diff(warp_seq_off)
    sm_seq = np.bincount(warp_sm, weights=seqs_per_warp, minlength=S).astype(np.int64)
    sm_seq_off = np.zeros(S + 1, dtype=np.int64)
    np.cumsum(sm_seq, out=sm_seq_off[1:])
    req_per_warp = co.req_off[wo[1:]] - co.req_off[wo[:-1]]
    counted_warp = trace.warp_cta >= trace.snapshot.warm  # the warm-up's requests are not counted
    sm_requests = np.bincount(warp_sm[counted_warp], weights=req_per_warp[counted_warp],
                              minlength=S).astype(np.int64)
    cached_acc = np.zeros(n_acc + 1, dtype=np.int64)
    np.cumsum(cached_op[trace.op], out=cached_acc[1:])
    warp_cached = cached_acc[wo[1:]] - cached_acc[wo[:-1]]
    sm_accesses = np.bincount(warp_sm, weights=warp_cached, minlength=S).astype(np.int64)
    cta_acc = np.bincount(warp_cta, weights=warp_cached, minlength=cta_warp_off.size - 1).astype(np.int64)
    sm_acc_off = np.zeros(S + 1, dtype=np.int64)
    np.cumsum(sm_accesses, out=sm_acc_off[1:])
    cta_warps = np.lexsort((trace.warp_index, warp_cta)).astype(np.int32)
    acc_op = trace.op
    warm = trace.snapshot.warm
    if warm > 0:  # warm-up CTAs' accesses name shadow ops, counted apart and dropped
        n_ops = len(trace.ops)
        warm_acc = np.repeat(trace.warp_cta < warm, np.diff(wo))
        acc_op = (trace.op + np.where(warm_acc, n_ops, 0)).astype(np.int32)
        write_op, cached_op = np.tile(write_op, 2), np.tile(cached_op, 2)
    return Prepared(arch=arch, n_ops=len(trace.ops), acc_op=acc_op,
                    op_write=write_op, op_cached=cached_op.astype(np.uint8), coalesced=co,
                    seq_off=seq_off, warp_seq_off=warp_seq_off, warp_cta=warp_cta,
                    cta_warp_off=cta_warp_off, cta_warps=cta_warps, sm_seq_off=sm_seq_off,
                    sm_requests=sm_requests, sm_acc_off=sm_acc_off, cta_acc=cta_acc, seq_epoch=seq_epoch,
                    snapshot_ctas=n_ctas, split=split)


def measured_placement(trace: Trace, sm_count: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(sm, rank)`` of every snapshot CTA (by its index in the snapshot) when the trace carries
    each CTA's measured SM (a GPU recording's ``%smid``, `CtaRecords.sm`) and every one of them
    exists on an arch of `sm_count` SMs; else None (the model's placement, CTA k on SM
    ``k % sm_count``). ``rank`` orders each SM's CTAs as the SM ran them: by measured start time
    where the trace has it, then by CTA id.

    Why: the hardware's CTA scheduler does not deal CTAs round-robin over SM ids. On the H100 it
    hands them out in TPC pairs across the GPCs (stencil7 recorded on an H100: CTAs 0 and 1 on SMs
    124 and 125, CTAs 8 and 9 on SMs 0 and 1, CTA 0's SM next running CTAs 80, 180, 280, 386), so
    which CTAs share an SM's L1 is the hardware's, not ``k % sm_count``'s."""
    records = trace.ctas
    ids = trace.snapshot.cta_ids
    if records.sm is None or ids.size == 0:
        return None
    sm = records.sm[ids]
    if sm.min() < 0 or sm.max() >= sm_count:
        return None
    key = records.start[ids] if records.start is not None else np.zeros(ids.size, dtype=np.int64)
    order = np.lexsort((ids, key, sm))                       # by SM, then start, then CTA id
    rank = np.empty(ids.size, dtype=np.int64)
    sorted_sm = sm[order]
    rank[order] = np.arange(ids.size) - np.searchsorted(sorted_sm, sorted_sm)
    return sm.astype(np.int64), rank


def snapshot_sms(trace: Trace, arch: Arch) -> int:
    """The SMs the model places `trace`'s snapshot CTAs on (`tuiprof.arch.occupancy.snapshot_spread`)."""
    from tuiprof.arch.occupancy import snapshot_spread

    counted = trace.snapshot.n_ctas - trace.snapshot.warm
    return snapshot_spread(arch.sm_count, default_md(trace, arch), trace.launch.grid_ctas, counted)


def cta_layout(warp_cta: np.ndarray, n_ctas: int, sm_count: int,
               placement: tuple[np.ndarray, np.ndarray] | None = None, warm: int = 0, spread: int = 0
               ) -> tuple[np.ndarray, np.ndarray, int]:
    """(warp_cta, cta_warp_off, split) for the trial kernels: the snapshot CTAs that have warps,
    renumbered so that each keeps its SM and its order among that SM's CTAs (the kernels run CTA
    k on SM ``k % sm_count``). The SM and order are `placement`'s (`measured_placement`: SM and
    rank per snapshot CTA) when given, else the model's (snapshot CTA k on SM ``k % spread``, in
    snapshot order: `spread` SMs, `snapshot_sms`, or all when 0). The first `warm` snapshot CTAs (warm-up, `Snapshot.warm`) come first on
    their SMs and take the ids below `split` (a multiple of ``sm_count``), the counted ones the ids
    from it, so that the schedule runs the two apart (`tuiprof.sim.schedule.order_accesses`).
    A CTA without warps draws no random number and takes no slot in a trial
    (`tuiprof.sim.schedule`), so leaving it out changes no result; it keeps the kernels' work and
    memory in the warps the trace holds, not in the CTAs it declares. Without such CTAs, without
    a placement and without warm-up, the snapshot's own numbering."""
    used, counts = np.unique(warp_cta, return_counts=True)
    spread = sm_count if spread <= 0 else min(spread, sm_count)
    if placement is None and warm == 0 and used.size == n_ctas and spread == sm_count:
        off = np.zeros(n_ctas + 1, dtype=np.int64)
        np.cumsum(counts, out=off[1:])
        return warp_cta, off, 0
    if placement is not None:
        sm, key = placement[0][used], placement[1][used]
    else:
        sm, key = used.astype(np.int64) % spread, used.astype(np.int64)
    counted = (used >= warm).astype(np.int64)
    order = np.lexsort((key, counted, sm))                   # by SM, warm-up first, each in order
    group = (sm * 2 + counted)[order]
    rank = np.empty(used.size, dtype=np.int64)
    rank[order] = np.arange(used.size) - np.searchsorted(group, group)
    warm_per_sm = np.bincount(sm[counted == 0], minlength=sm_count) if warm else np.zeros(1, np.int64)
    lead = int(warm_per_sm.max()) if used.size else 0         # ranks the warm-up takes on the busiest SM
    new_id = sm + (rank + counted * lead) * sm_count
    n_new = int(new_id.max()) + 1 if used.size else 0
    off = np.zeros(n_new + 1, dtype=np.int64)
    off[new_id + 1] = counts
    np.cumsum(off, out=off)
    return new_id[np.searchsorted(used, warp_cta)].astype(np.int32), off, lead * sm_count
