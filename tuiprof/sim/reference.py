"""The reference replay: the trial kernel tuiprof shipped before `tuiprof.sim.replay`, kept as
the oracle the tests compare the product kernel with (counter for counter, batch latency for batch
latency), itself checked against pycachesim. The product never calls it. Every rule the product
models is written here first, as plainly as it can be.

Steps 1-4 are `tuiprof.sim.schedule`'s; steps 5-7 (ARCHITECTURE.md) run here in one pass over the
merged stream:

5. **L1** (private per SM): loads hit per sector; missing sectors are filled and go to L2;
   stores follow ``l1.store_policy`` and always go to L2 (write-through). A write-allocate store
   makes valid only the sectors it wrote entirely (a 4 B store leaves the other 28 bytes of its
   sector unfetched: a later load of the sector misses).
6. **L2** (shared, sectored; inclusive in that every L1 fill also allocates in L2): read misses
   fetch the missing sectors from DRAM, or with an ``l2.fetch_granularity`` above the sector the
   aligned block of that size around each (``cudaLimitMaxL2FetchGranularity``,
   docs/memory-system.md): its other sectors become valid unless they were, each a DRAM read
   charged to the load, and a later read of one is a hit; dirty victims are written back. A Fermi L1 miss (128 B
   line, 32 B L2 lines) thus becomes four L2 accesses (Baghsorkhi12 2.1). A store to a valid sector
   hits and makes it dirty. A store to an invalid sector follows ``l2.write_policy``:
   ``write-through`` (Fermi, Baghsorkhi12 2.1: "it updates the memory and brings the cache block to
   the cache") writes DRAM and makes the sector valid, fetching from DRAM (a read charged to the
   store) the sectors it did not write entirely; ``write-back`` (Volta and later) allocates the
   sector dirty without any DRAM transaction, valid if the store wrote all of it, else
   unreadable until a load fetches it (it stays dirty), and DRAM sees it only when it is
   evicted (or after the snapshot: the write-backs owed at the end). On a write-back L2 every
   stored sector counts as a write hit: the store completes in L2 (Nsight Compute counts L2
   stores so; NVIDIA developer forums, "L2 hit rate always at 100%", 2023). Atomics keep the
   write-through rule on either L2 (their misses go on to DRAM and fetch what they need).
   Lines map to sets (slices and sets) by ``address_hash`` (`tuiprof.sim.addressing`).
7. **DRAM** (3.2.3): the DRAM request queue, in L2 order, is cut into batches of ``sm_count``
   groups of 1..32 consecutive requests (uniform sizes), one group per SM. A batch costs
   ``base_latency + max(busiest bank's service, busiest channel's requests * burst_cycles)``,
   where a bank's service sums ``row_hit_cycles`` / ``row_miss_cycles`` against its open row
   (open rows persist across batches); address -> channel by ``interleave`` and
   ``address_hash``, then bank and row from the channel-local address. Every request of a batch
   sees the batch's latency.

The caches are `tuiprof.sim.cache`'s hash chains; the only queue is the DRAM batch being filled
(``dbuf``), timed as soon as it reaches its drawn size.
"""

from __future__ import annotations

import time

import numpy as np

from tuiprof.arch.spec import Arch
from tuiprof.jit import INLINE, KERNEL, keep, njit, popcount, prefetch
from tuiprof.sim.addressing import HASH_XOR, home_half, target, xor_fold, xor_table
from tuiprof.sim.cache import (
    DIRTY,
    RANDOM,
    VALID,
    cache_alloc,
    cache_fill_slot,
    cache_find,
    cache_invalidate,
    cache_set,
    expand_sectors,
    full_sectors,
    get_mask,
    get_tag,
    hslot,
    placed,
    touch,
    victim,
)
from tuiprof.sim.prepared import (
    OP_STORE,
    P_DR_BANKS,
    P_DR_BASE,
    P_DR_BURST,
    P_DR_CH,
    P_DR_GROUP,
    P_DR_HIT,
    P_DR_IL,
    P_DR_MISS,
    P_DR_POLY,
    P_DR_ROW,
    P_DR_TX,
    P_HASH,
    P_L1_ASSOC,
    P_L1_CPL,
    P_L1_CPS,
    P_L1_LRU,
    P_L1_ON,
    P_L1_PARTS,
    P_L1_SETS,
    P_L1_STORE,
    P_L2_CPF,
    P_L2_HALVES,
    P_L2_ON,
    P_L2_POLY,
    P_L2_WB,
    P_SM,
    STORE_EVICT,
    STORE_NO_ALLOCATE,
    Prepared,
)
from tuiprof.sim.results import (
    C_DR,
    C_DW,
    C_L1_RA,
    C_L1_REQ,
    C_L1_RH,
    C_L1_WA,
    C_L2_LA,
    C_L2_LH,
    C_L2_RA,
    C_L2_RH,
    C_L2_WA,
    C_L2_WH,
    N_COUNTS,
    TrialResult,
)
from tuiprof.sim.rng import rng_below, rng_below_at, rng_new, rng_streams
from tuiprof.sim.schedule import order_accesses


@njit(**INLINE)
def _log2(x):
    k = 0
    while (np.int64(1) << k) < x:
        k += 1
    return k


@njit(**INLINE)
def _leaders(cps, n_sectors):
    """The first chunk of every sector: ``popcount(m & leaders)`` counts the sectors of a mask made
    of whole sectors (every mask the caches hold or compare is), with no division by `cps`."""
    lead = np.int64(0)
    for j in range(n_sectors):
        lead |= np.int64(1) << (j * cps)
    return lead


@njit(**INLINE)
def _level(params, at, copies):
    """One cache level from the parameters at `at` (P_L1_ON or P_L2_ON; both levels' fields run
    in the same order), with its caches allocated (`copies` of them, one when it is absent):
    ``(on, partitions, sets, replacement policy, chunks per sector, chunks per line, sectors per line, sector
    leaders, all sets, assoc, meta, htab, hshift)``."""
    on = params[at] != 0
    sets = params[at + P_L1_SETS - P_L1_ON]
    assoc = params[at + P_L1_ASSOC - P_L1_ON] if on else 1
    parts = params[at + P_L1_PARTS - P_L1_ON]
    cpl = params[at + P_L1_CPL - P_L1_ON]
    cps = params[at + P_L1_CPS - P_L1_ON]
    repl = params[at + P_L1_LRU - P_L1_ON]  # a `Replacement`
    spl = cpl // cps
    nsets = sets * parts if on else 1
    meta, htab, hs = cache_alloc(nsets, assoc, copies if on else 1)
    return on, parts, sets, repl, cps, cpl, spl, _leaders(cps, spl), nsets, assoc, meta, htab, hs


@njit(**INLINE)
def _fill(meta, htab, hbase, hshift, sent, first, assoc, line, repl, rs, k):
    """Fill `line` (absent) into the set closed by `sent` (first slot `first`) under `repl`:
    `tuiprof.sim.cache.victim` then `placed`; RANDOM draws its way from stream `k` of `rs`.
    Returns ``(slot, evicted_line, evicted_dirty_mask)`` as `cache_fill_slot`."""
    way = rng_below_at(rs, k, assoc) if repl == RANDOM else 0
    slot, old, old_dirty = cache_fill_slot(meta, htab, hbase, hshift, sent, line, victim(meta, sent, first, repl, way))
    placed(meta, sent, slot, repl)
    keep(rs)
    return slot, old, old_dirty


@njit(**INLINE)
def _shift_of(d):
    """log2 of `d` when it is a power of two, else -1."""
    k = _log2(d)
    return k if (np.int64(1) << k) == d else -1


@njit(**INLINE)
def _udivmod(x, d, sh, inv):
    """``divmod(x, d)`` of a uint64 `x` by a positive divisor, without a hardware division in the
    usual cases: a shift when ``sh = log2(d) >= 0``, a multiplication by ``inv = 1 / d`` corrected
    to the exact result when ``x < 2**52``, else an exact uint64 division."""
    ud = np.uint64(d)
    if sh >= 0:
        q = x >> np.uint64(sh)
        r = x & (ud - np.uint64(1))
    elif x < np.uint64(1 << 52):
        xi = np.int64(x)
        qi = np.int64(np.float64(xi) * inv)
        ri = xi - qi * d
        while ri < 0:
            qi -= 1
            ri += d
        while ri >= d:
            qi += 1
            ri -= d
        q = np.uint64(qi)
        r = np.uint64(ri)
    else:
        q = x // ud
        r = x - q * ud
    return q, r


# DRAM batcher state (``dst``): requests buffered, size of the batch being filled, batches done,
# write-back transactions.
D_N, D_TARGET, D_BATCHES, D_WB = 0, 1, 2, 3
# DRAM geometry (``dg``, int64): see `_dram_geometry`.
G_TXSH, G_ILSH, G_ROWSH, G_CH, G_CHSH, G_NB, G_NBSH, G_HIT, G_MISS, G_BASE, G_BURST, G_SM, G_GROUP, G_XOR = range(14)
# Columns of the DRAM request buffer (``dbuf``): transaction, op of a read (-1: a write), and,
# once the batch is timed, its bank (channel * banks + bank) and channel.
B_TX, B_OP, B_BANK, B_CH = range(4)


@njit(**KERNEL)
def _dram_geometry(params):
    """The DRAM parameters in the form `_dram_batches` reads: shifts for the power-of-two sizes
    (interleave, row, transaction; channels and banks when they are), whether channels are
    hashed, the reciprocals of the channel and bank counts (for `_udivmod`), and the channel
    hash's table (`tuiprof.sim.addressing`)."""
    dg = np.empty(14, dtype=np.int64)
    dg[G_TXSH] = _log2(params[P_DR_TX])
    dg[G_ILSH] = _log2(params[P_DR_IL])
    dg[G_ROWSH] = _log2(params[P_DR_ROW])
    dg[G_CH] = params[P_DR_CH]
    dg[G_CHSH] = _shift_of(params[P_DR_CH])
    dg[G_NB] = params[P_DR_BANKS]
    dg[G_NBSH] = _shift_of(params[P_DR_BANKS])
    dg[G_HIT] = params[P_DR_HIT]
    dg[G_MISS] = params[P_DR_MISS]
    dg[G_BASE] = params[P_DR_BASE]
    dg[G_BURST] = params[P_DR_BURST]
    dg[G_SM] = params[P_SM]
    dg[G_GROUP] = params[P_DR_GROUP]
    dg[G_XOR] = params[P_HASH] == HASH_XOR
    inv = np.empty(2, dtype=np.float64)
    inv[0] = 1.0 / params[P_DR_CH]
    inv[1] = 1.0 / params[P_DR_BANKS]
    return dg, inv, xor_table(params[P_DR_CH], params[P_DR_POLY])


@njit(**INLINE)
def _draw_batch(st, dg):
    """The size of the next batch: ``sm_count`` groups of 1..group_max requests."""
    target = 0
    for _ in range(dg[G_SM]):
        target += 1 + rng_below(st, dg[G_GROUP])
    keep(dg)
    return target


@njit(**INLINE)
def _dram_batches(st, dbuf, dst, batches, open_row, busy, chn, lat_sum, dg, inv, tabch, final):
    """Time every complete batch in the buffer (step 7) and record it; with `final`, also the
    last, partial batch. Each batch's size was drawn when the previous one closed: ``sm_count``
    groups of 1..32 requests."""
    t_hit = dg[G_HIT]
    t_miss = dg[G_MISS]
    NB = dg[G_NB]
    # Addresses are uint64 (traces may use the whole range); interleave, row and transaction
    # sizes are powers of two; the channel and bank counts need `_udivmod`.
    tx_sh = np.uint64(dg[G_TXSH])
    il_sh = np.uint64(dg[G_ILSH])
    il_mask = (np.uint64(1) << il_sh) - np.uint64(1)
    row_sh = np.uint64(dg[G_ROWSH])
    start = 0
    while dst[D_N] - start >= dst[D_TARGET] or (final and dst[D_N] > start):
        end = min(start + dst[D_TARGET], dst[D_N])
        max_bank = 0
        max_ch = 0
        for i in range(start, end):
            a = np.uint64(dbuf[i, B_TX]) << tx_sh
            q, uch = _udivmod(a >> il_sh, dg[G_CH], dg[G_CHSH], inv[0])
            if dg[G_XOR]:
                uch ^= xor_fold(q, tabch)
            rows = ((q << il_sh) | (a & il_mask)) >> row_sh  # channel-local row-size blocks
            urow, ubank = _udivmod(rows, NB, dg[G_NBSH], inv[1])
            ch = np.int64(uch)
            row = np.int64(urow)
            b = ch * NB + np.int64(ubank)
            dbuf[i, B_BANK] = b
            dbuf[i, B_CH] = ch
            if open_row[b] == row:
                busy[b] += t_hit
            else:
                busy[b] += t_miss
                open_row[b] = row
            max_bank = max(max_bank, busy[b])
            chn[ch] += 1
            max_ch = max(max_ch, chn[ch])
        lat = dg[G_BASE] + max(max_bank, max_ch * dg[G_BURST])
        batches[dst[D_BATCHES]] = lat
        dst[D_BATCHES] += 1
        for i in range(start, end):
            busy[dbuf[i, B_BANK]] = 0
            chn[dbuf[i, B_CH]] = 0
            o = dbuf[i, B_OP]
            if o >= 0:
                lat_sum[o] += lat
        start = end
        dst[D_TARGET] = _draw_batch(st, dg)
    if start > 0:  # keep the requests of the open batch at the front
        rest = dst[D_N] - start
        for i in range(rest):
            dbuf[i, B_TX] = dbuf[start + i, B_TX]
            dbuf[i, B_OP] = dbuf[start + i, B_OP]
        dst[D_N] = rest
    keep(dbuf)
    keep(dst)
    keep(batches)
    keep(open_row)
    keep(busy)
    keep(chn)
    keep(lat_sum)
    keep(dg)
    keep(inv)
    keep(tabch)


@njit(**INLINE)
def _emit(dbuf, dst, base_chunk, m, nchunks, rop, txsh, txmul):
    """Queue the DRAM transactions covering chunks `m` of the line at `base_chunk` (``rop``: the
    op of a read, -1 for a write or write-back); returns how many were queued."""
    last = np.int64(-1)
    n = dst[D_N]
    n0 = n
    for k in range(nchunks):
        if (m >> k) & 1:
            c = base_chunk + k
            for t in range(txmul):
                tx = (c >> txsh) if txmul == 1 else c * txmul + t
                if tx != last:
                    last = tx
                    dbuf[n, B_TX] = tx
                    dbuf[n, B_OP] = rop
                    n += 1
    dst[D_N] = n
    keep(dbuf)
    keep(dst)
    return n - n0


@njit(**KERNEL)
def _owed(meta2, dbuf, dst, n_slots, cpl2, txsh, txmul, kk):
    """The DRAM write transactions the L2's dirty sectors owe, counted as `_emit` would queue
    them (past the requests the buffer holds, which stay). `kk`: keys per line (2 with two halves)."""
    owed = 0
    n = dst[D_N]
    for slot in range(n_slots):
        d = get_mask(meta2, slot, DIRTY)
        if d != 0:
            owed += _emit(dbuf, dst, get_tag(meta2, slot) // kk * cpl2, d, cpl2, -1, txsh, txmul)
            dst[D_N] = n
    return owed


@njit(**KERNEL)
def replay(st, params, lab, order, sm_acc_off, counts, acc_op, op_write, req_off, req_line, req_mask, req_full, n_ops,
           n_warm):
    """Steps 5-7 over the merged stream: per-SM L1s, the shared L2, the DRAM batcher. Returns the
    per-op DRAM read latency sums, the batch latencies, the write-back transactions of evictions
    and those the L2's dirty sectors still owe at the end. The first `n_warm` accesses of the
    stream are the snapshot's warm-up: the batches closed, the write-backs made and the dirty
    sectors owed when the counted accesses begin are not the trial's."""
    S = params[P_SM]
    # RANDOM replacement's draws: stream s for SM s's L1, stream S for the L2, forked from `st`
    # so that the trial's other draws stay where they were.
    rs = rng_streams(st, S + 1)
    # L1: one copy per SM; L2: one shared copy.
    on1, parts1, sets1, repl1, cps1, cpl1, spl1, lead1, nsets1, assoc1, meta1, htab1, hs1 = _level(params, P_L1_ON, S)
    on2, parts2, sets2, repl2, cps2, cpl2, spl2, lead2, nsets2, assoc2, meta2, htab2, hs2 = _level(params, P_L2_ON, 1)
    policy = params[P_L1_STORE]
    cpf2 = params[P_L2_CPF]  # chunks of a read miss's DRAM fill (the fetch granularity)
    # Two L2 partitions (`L2Config.halves`): half h holds sets h * nh2 .. and keys line * 2 + h.
    halves2 = on2 and params[P_L2_HALVES] == 2
    kk2 = 2 if halves2 else 1
    nh2 = nsets2 // 2
    wb2 = on2 and params[P_L2_WB] != 0
    xor2 = params[P_HASH] == HASH_XOR
    tab2 = xor_table(nsets2, params[P_L2_POLY])
    rows1 = nsets1 * (assoc1 + 1)
    buckets1 = np.int64(1) << (64 - hs1)
    sent2 = meta2.shape[0] - nsets2
    psh2 = _shift_of(parts2)
    pinv2 = 1.0 / parts2
    sub = cpl1 // cpl2 if cpl1 > cpl2 else 1  # L2 lines per L1 line
    c2sh = _log2(cpl2)
    low2 = (np.int64(1) << cpl2) - 1
    # DRAM: transactions per 32 B chunk (txmul) or chunks per transaction (2**txsh).
    tx = params[P_DR_TX]
    txmul = 1
    txsh = 0
    if tx < 32:
        txmul = 32 // tx
    else:
        txsh = _log2(tx // 32)
    dg, inv, tabch = _dram_geometry(params)
    # The buffer holds the open batch plus what one L1 request can add: per chunk, a dirty
    # eviction's write-back, a write-through's DRAM write and the fetch of a partial store (3 each).
    dbuf = np.empty((S * params[P_DR_GROUP] + 3 * max(cpl1, cpl2) * txmul + 1, 4), dtype=np.int64)
    dst = np.zeros(4, dtype=np.int64)
    dst[D_TARGET] = _draw_batch(st, dg)
    # Every batch but the last holds at least S requests; np.empty commits only what is written.
    max_dram = req_off[req_off.shape[0] - 1] * 3 * max(cpl1, cpl2) * txmul
    batches = np.empty(max_dram // S + 2, dtype=np.int64)
    CH = params[P_DR_CH]
    NB = params[P_DR_BANKS]
    open_row = np.full(CH * NB, -1, dtype=np.int64)
    busy = np.zeros(CH * NB, dtype=np.int64)
    chn = np.zeros(CH, dtype=np.int64)
    lat_sum = np.zeros(n_ops, dtype=np.int64)

    n_slots = nsets2 * assoc2 if on2 else 0
    wb0 = 0
    bat0 = 0
    owed0 = 0
    taken = n_warm <= 0
    cur = sm_acc_off[:S].copy()
    for i in range(lab.shape[0]):
        if not taken and i == n_warm:
            wb0, bat0, taken = dst[D_WB], dst[D_BATCHES], True
            owed0 = _owed(meta2, dbuf, dst, n_slots, cpl2, txsh, txmul, kk2)
        s = lab[i]
        r = order[cur[s]]
        cur[s] += 1
        o = acc_op[r]
        wr = np.int64(op_write[o])  # 0: load, OP_STORE, OP_ATOMIC
        rop = -1 if wr else o
        row0 = s * rows1 if on1 else 0
        hb1 = s * buckets1 if on1 else 0
        sent1 = row0 + nsets1 * assoc1
        jend = req_off[r + 1]
        for j in range(req_off[r], jend):
            line1 = req_line[j]
            m = np.int64(req_mask[j])
            if on2 and j + 1 < jend:  # the next request's L2 buckets, while this one runs
                nl = (req_line[j + 1] * cpl1) >> c2sh
                for jj in range(sub):
                    prefetch(htab2, hslot(nl + jj, hs2))
            counts[C_L1_REQ, o] += 1
            # Step 5: the SM's L1. `send` is what goes on to L2.
            smask = expand_sectors(m, cps1, spl1)
            nsec = popcount(smask & lead1)
            send = m
            if wr:
                counts[C_L1_WA, o] += nsec
                if on1 and policy != STORE_NO_ALLOCATE:
                    g1 = cache_set(line1, parts1, sets1)
                    sent = sent1 + g1
                    slot = cache_find(meta1, htab1, hb1, hs1, line1)
                    if policy == STORE_EVICT:
                        if slot >= 0:
                            cache_invalidate(meta1, htab1, hb1, hs1, sent, slot)
                    else:  # write-allocate
                        if slot < 0:
                            slot, _, _ = _fill(meta1, htab1, hb1, hs1, sent, row0 + g1 * assoc1, assoc1, line1, repl1,
                                               rs, s)
                        else:
                            touch(meta1, sent, slot, repl1)
                        meta1[slot, VALID] = get_mask(meta1, slot, VALID) | full_sectors(np.int64(req_full[j]), cps1,
                                                                                         spl1)
            else:
                counts[C_L1_RA, o] += nsec
                if on1:
                    g1 = cache_set(line1, parts1, sets1)
                    sent = sent1 + g1
                    slot = cache_find(meta1, htab1, hb1, hs1, line1)
                    if slot >= 0:
                        v1 = get_mask(meta1, slot, VALID)
                        counts[C_L1_RH, o] += popcount(smask & v1 & lead1)
                        send = smask & ~v1
                        touch(meta1, sent, slot, repl1)
                    else:
                        send = smask
                        slot, _, _ = _fill(meta1, htab1, hb1, hs1, sent, row0 + g1 * assoc1, assoc1, line1, repl1, rs, s)
                    meta1[slot, VALID] = get_mask(meta1, slot, VALID) | send
            if send == 0:
                continue
            # Step 6: the L2 lines the request covers, line0 .. line0 + sub - 1, with their
            # partition p and partition-local index q (one division per request).
            base1 = line1 * cpl1
            line0 = base1 >> c2sh
            uq, up = _udivmod(np.uint64(line0), parts2, psh2, pinv2)
            p = np.int64(up)
            q = np.int64(uq)
            fm = np.int64(req_full[j])
            for jj in range(sub):
                if sub == 1:
                    line = line0
                    m2 = (send << (base1 & (cpl2 - 1))) & 0xFFFFFFFF
                    f2 = (fm << (base1 & (cpl2 - 1))) & 0xFFFFFFFF
                else:
                    line = line0 + jj
                    m2 = (send >> (jj * cpl2)) & low2
                    f2 = (fm >> (jj * cpl2)) & low2
                    if jj > 0:
                        p += 1
                        if p == parts2:
                            p = 0
                            q += 1
                if m2 == 0:
                    continue
                smask2 = expand_sectors(m2, cps2, spl2)
                nsec2 = popcount(smask2 & lead2)
                base = line * cpl2
                slot = -1
                v = np.int64(0)
                home = 0  # with two halves: the line's home, the half looked up first, its set over both
                hx = 0
                g0 = 0
                if on2:
                    if xor2:
                        _, g = target(np.uint64(line), nsets2, True, tab2)
                    else:
                        g = p * sets2 + q % sets2
                    if halves2:  # a read looks up its SM's half first, a write goes home
                        home = home_half(line)
                        hx = home if wr else (2 * s) // S
                        # the set over both halves, halved: a linear L2 numbers its sets line mod
                        # sets here (the slices' numbering is a bijection of it, `Geometry`), so
                        # that a half's sets group the same lines as the replay kernel's
                        g0 = g if xor2 else line % nsets2
                        g = hx * nh2 + (g0 >> 1)
                    sent = sent2 + g
                    key = line * kk2 + hx
                    slot = cache_find(meta2, htab2, 0, hs2, key)
                    if slot >= 0:
                        v = get_mask(meta2, slot, VALID)
                        touch(meta2, sent, slot, repl2)
                    else:
                        slot, old, old_dirty = _fill(meta2, htab2, 0, hs2, sent, g * assoc2, assoc2, key, repl2, rs, S)
                        if old >= 0 and old_dirty != 0:
                            nw = _emit(dbuf, dst, old // kk2 * cpl2, old_dirty, cpl2, -1, txsh, txmul)
                            dst[D_WB] += nw
                    if halves2 and wr:  # the other half's copy is dropped (copies are clean)
                        other = line * 2 + 1 - home
                        sc = cache_find(meta2, htab2, 0, hs2, other)
                        if sc >= 0:
                            cache_invalidate(meta2, htab2, 0, hs2, sent2 + (1 - home) * nh2 + (g0 >> 1), sc)
                # Sectors not valid; an absent L2 passes the request itself (no sector rounding).
                miss = (smask2 & ~v) if on2 else m2
                if wr:
                    counts[C_L2_WA, o] += nsec2
                    full2 = full_sectors(f2, cps2, spl2)  # sectors the store wrote entirely
                    if wb2 and wr == OP_STORE:  # write-back: allocate dirty, no DRAM transaction
                        counts[C_L2_WH, o] += nsec2
                        meta2[slot, DIRTY] = get_mask(meta2, slot, DIRTY) | smask2
                        meta2[slot, VALID] = v | (smask2 & full2)
                    else:  # write-through (and atomics): a miss writes DRAM and brings the sector in
                        hit = smask2 & v
                        counts[C_L2_WH, o] += popcount(hit & lead2)
                        if miss != 0:
                            nw = _emit(dbuf, dst, base, m2 & miss, cpl2, rop, txsh, txmul)
                            counts[C_DW, o] += nw
                        if on2:
                            fetch = miss & ~full2  # the bytes it did not write come from DRAM
                            if fetch != 0:
                                nr = _emit(dbuf, dst, base, fetch, cpl2, o, txsh, txmul)
                                counts[C_DR, o] += nr
                            meta2[slot, DIRTY] = get_mask(meta2, slot, DIRTY) | hit
                            meta2[slot, VALID] = v | miss
                else:
                    counts[C_L2_RA, o] += nsec2
                    counts[C_L2_RH, o] += popcount(smask2 & v & lead2)
                    counts[C_L2_LA, o] += nsec2
                    counts[C_L2_LH, o] += popcount(smask2 & v & lead2)
                    if on2 and cpf2 > cps2 and miss != 0:  # the fill: every aligned fetch block a miss touches
                        miss = expand_sectors(miss, cpf2, cpl2 // cpf2) & ~v
                    dram = miss
                    if halves2 and miss != 0 and home != hx:  # homed in the other half: looked up there too
                        gf = home * nh2 + (g0 >> 1)
                        sf = cache_find(meta2, htab2, 0, hs2, line * 2 + home)
                        vf = np.int64(0)
                        if sf >= 0:
                            vf = get_mask(meta2, sf, VALID)
                            touch(meta2, sent2 + gf, sf, repl2)
                        else:
                            sf, old, old_dirty = _fill(meta2, htab2, 0, hs2, sent2 + gf, gf * assoc2, assoc2,
                                                       line * 2 + home, repl2, rs, S)
                            if old >= 0 and old_dirty != 0:
                                nw = _emit(dbuf, dst, old // 2 * cpl2, old_dirty, cpl2, -1, txsh, txmul)
                                dst[D_WB] += nw
                        counts[C_L2_LA, o] += popcount(miss & lead2)
                        counts[C_L2_LH, o] += popcount(miss & vf & lead2)
                        counts[C_L2_RH, o] += popcount(smask2 & miss & vf & lead2)  # served at home
                        meta2[sf, VALID] = vf | miss
                        dram = miss & ~vf
                    if dram != 0:
                        nr = _emit(dbuf, dst, base, dram, cpl2, rop, txsh, txmul)
                        counts[C_DR, o] += nr
                    if on2:
                        meta2[slot, VALID] = v | miss
            if dst[D_N] >= dst[D_TARGET]:
                _dram_batches(st, dbuf, dst, batches, open_row, busy, chn, lat_sum, dg, inv, tabch, False)
    _dram_batches(st, dbuf, dst, batches, open_row, busy, chn, lat_sum, dg, inv, tabch, True)
    # The dirty sectors left in the L2: transactions it owes DRAM after the snapshot.
    owed = _owed(meta2, dbuf, dst, n_slots, cpl2, txsh, txmul, kk2)
    if not taken:  # every access warmed up: nothing counted
        return lat_sum.astype(np.float64), batches[:0].copy(), 0, 0
    return lat_sum.astype(np.float64), batches[bat0:dst[D_BATCHES]].copy(), dst[D_WB] - wb0, owed - owed0


def run_steps(params: np.ndarray, md: int, seed: int, n_ops: int, acc_op: np.ndarray, op_write: np.ndarray,
                 op_cached: np.ndarray, req_off: np.ndarray, req_line: np.ndarray, req_mask: np.ndarray,
                 req_full: np.ndarray, seq_off: np.ndarray, seq_epoch: np.ndarray, warp_seq_off: np.ndarray,
                 warp_cta: np.ndarray, cta_warp_off: np.ndarray, cta_warps: np.ndarray, sm_seq_off: np.ndarray,
                 sm_acc_off: np.ndarray, cta_acc: np.ndarray, split: int, n_warm: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """The whole trial: the schedule's steps (`tuiprof.sim.schedule.order_accesses`, whose kernels
    are called one by one), then `replay`. Returns ``(counts [N_COUNTS, n_ops], DRAM read latency
    sums [n_ops], batch latencies, write-back transactions, write-back transactions owed at the
    end)``."""
    st = rng_new(seed)
    S = int(params[P_SM])
    counts = np.zeros((N_COUNTS, n_ops), dtype=np.int64)
    order, lab = order_accesses(st, S, md, seq_epoch, warp_seq_off, warp_cta, cta_warp_off, cta_warps, sm_seq_off,
                                seq_off, acc_op, op_cached, sm_acc_off, cta_acc, split)
    lat_sum, batches, writebacks, owed = replay(st, params, lab, order, sm_acc_off, counts, acc_op, op_write,
                                                req_off, req_line, req_mask, req_full, n_ops, n_warm)
    return counts, lat_sum, batches, writebacks, owed


def reference_arrays(prepared: Prepared, params: np.ndarray, md: int, seed: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """`tuiprof.sim.trial.trial_arrays` on the reference kernel: the same outputs."""
    co = prepared.coalesced
    counts, lat_sum, batch, writebacks, owed = run_steps(
        params, int(md), seed, prepared.kernel_ops, prepared.acc_op, prepared.op_write, prepared.op_cached,
        co.req_off, co.request_lines(), co.req_mask, co.req_full, prepared.seq_off, prepared.seq_epoch, prepared.warp_seq_off,
        prepared.warp_cta, prepared.cta_warp_off, prepared.cta_warps, prepared.sm_seq_off, prepared.sm_acc_off,
        prepared.cta_acc, prepared.split, prepared.warm_accesses)
    n = prepared.n_ops  # the warm-up CTAs' shadow columns are dropped: replayed, not counted
    return counts[:, :n], lat_sum[:n], batch, int(writebacks), int(owed)


def reference_trial(prepared: Prepared, arch: Arch | np.ndarray | None, md: int, seed: int, *,
                    index: int = 0) -> TrialResult:
    """`tuiprof.sim.trial.run_trial` on the reference kernel: the same arguments, the same result."""
    from tuiprof.sim.trial import normal_seed, params_for, trial_result

    if md < 1:
        raise ValueError(f"MD must be at least 1, got {md}")
    params = params_for(prepared, arch)
    seed = normal_seed(seed)
    t0 = time.perf_counter()
    counts, lat_sum, batch, writebacks, owed = reference_arrays(prepared, params, md, seed)
    return trial_result(prepared, md, seed, index, counts, lat_sum, batch, writebacks, owed, time.perf_counter() - t0)
