"""Steps 5-7 of a trial (ARCHITECTURE.md: the L1s, the L2, the DRAM batches) over the merged stream:
the product's replay kernel, compiled once per cache and DRAM geometry.

It gives exactly the results of the reference kernel (`tuiprof.sim.reference`, the tests' oracle)
at 4-5x its speed, by the design of ``shared/research/sim-speed.md``:

- **Dense line ids** (`tuiprof.sim.coalesce.dense_ids`, once per trace): caches hold int32 ids,
  not 64-bit addresses; the L2 lines of L1 line ``id`` are ``id * sub + k`` (``sub`` L2 lines per
  L1 line), so a line's blocks are adjacent entries of the L2's ``way_of`` map.
- **Flat narrow-typed per-set arrays**: per way a tag (int32 id, -1 invalid) and valid/dirty chunk
  masks; per set a circular recency list of way numbers (uint8 while the associativity allows)
  with a sentinel at index ``assoc``: the sentinel's next is the most recent way, its previous the
  victim. Under LRU and FIFO invalid ways sit at the back, so a fill takes an invalid way while
  one is left; MRU leaves a fill at the back, RANDOM replaces a drawn way (`tuiprof.sim.cache`).
- **L1**: a branch-free tag scan over the set with unsigned indices (LLVM vectorises it; signed
  indices turn it into gathers, 8x slower), then a list splice. Above `SCAN_MAX_ASSOC` ways (the
  512-way H100 L1 reads 2 KiB of tags per scan), a per-SM open-addressing table of line id -> way
  instead. An L1 sees its own SM's stream only, whatever the merge, so when all SMs' L1s are too
  large to stay in the CPU's caches as the merge jumps from SM to SM (Volta and later: 80-132 SMs
  of 1-2K lines), the L1s run first, SM by SM, and record what each request sends on to L2; the
  merged walk then does the L2 and DRAM only (`Geometry.l1_by_sm`: 5x on H100).
- **L2**: ``way_of[id]`` says which way holds a line (or that none does): one byte load per access,
  no hashing, no chain walk.
- **Class lockstep** (sectored-by-blocks L2s such as Fermi's: 32 B L2 lines under 128 B L1
  lines): block x lives in set ``x mod sets``, so when ``sub`` divides the set count, the blocks
  of L1 line l fall in sets ``sub * (l mod classes) + k`` and each of those sets only ever holds
  block k of the lines of one class. While every access to a class touches all ``sub`` blocks of
  its line, the class's ``sub`` sets hold the same lines in the same recency order, so one LRU
  operation on a per-class *super-set* (tags = L1 ids, masks over the whole L1 line) gives every
  block's outcome. The first access that touches only some blocks of a line *splits* that class:
  its super-set is copied into its ``sub`` sets, which go on per set. Exact either way.
- **DRAM**: each L1 request's transactions are queued locally (write-backs before the reads of
  each block, as the reference orders them) and fed to the open batch in *runs* of equal
  (channel, bank, row, op): a run costs one miss (or hit) plus row hits for the rest; channel,
  bank and row are recomputed only when ``address >> log2(min(interleave, row))`` changes; a
  batch is closed as soon as it holds its drawn size, so there is no second pass.
- **Per-access counters in locals**, added to the op's counters once per warp access; no array
  is reassigned in the walk (a reassigned array variable costs reference counting per batch and
  worse code: 15-25% of a trial).
- **One kernel per family of geometries** (`Family`): what shapes the code (which levels exist,
  line and sector chunks, policies, the L2's mode, the address hash, the DRAM transaction and
  geometry, a scanned L1's ways) is frozen into each compiled kernel, and kernels are cached in
  memory and on disk per family. Set counts, a hashed L1's ways (the shared-memory carve-out
  scales them MD by MD) and the L2's ways are run-time values (`runtime_params`): a set is found
  with a mask, or a multiplication by a precomputed reciprocal (`tuiprof.sim.addressing.udivmod`)
  where the count is not a power of two, so an MD sweep or a size what-if compiles nothing new.
  Latencies, the SM count and the group size are run-time values too. (The DRAM's geometry stays
  compiled in: run-time shifts and divisions in the batching loop cost 6-10% of a trial.)
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from tuiprof.jit import INLINE, KERNEL, built_kernel, find_tag, keep, njit, plain_kernel, popcount, prefetch
from tuiprof.sim.addressing import HASH_XOR, divider, hash_polynomial, home_half, udivmod, xor_fold, xor_table
from tuiprof.sim.budget import L1_BY_SM_LINES
from tuiprof.sim.cache import LRU, MRU, RANDOM, expand_sectors, full_sectors
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
    P_L1_WAYS_MAX,
    P_L2_ASSOC,
    P_L2_CPF,
    P_L2_CPL,
    P_L2_CPS,
    P_L2_HALVES,
    P_L2_LRU,
    P_L2_ON,
    P_L2_PARTS,
    P_L2_SETS,
    P_L2_WB,
    P_SM,
    STORE_EVICT,
    STORE_NO_ALLOCATE,
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
)
from tuiprof.sim.rng import rng_below, rng_below_at, rng_streams

WRITEBACK = -2
"""Op code of a queued write-back transaction (a store's write-through is -1, a read its op)."""
SCAN_MAX_ASSOC = 128
"""Largest L1 associativity whose sets are scanned; above it (the 256-512-way L1s of Volta and
later, where one scan reads 1-2 KiB of tags) each SM's L1 keeps a hash table of line id -> way."""
_FIB = np.uint64(0x9E3779B97F4A7C15)


def _log2(x: int) -> int:
    return max(0, int(x).bit_length() - 1)


def _index_dtype(assoc: int) -> type:
    """The narrowest unsigned type holding way numbers 0..assoc (the sentinel) and a 'none' mark
    above them."""
    return np.uint8 if assoc <= 254 else np.uint16 if assoc <= 65534 else np.uint32


def _mask_dtype(chunks: int) -> type:
    return np.uint8 if chunks <= 8 else np.uint16 if chunks <= 16 else np.uint32


def _leaders(cps: int, n_sectors: int) -> int:
    """The first chunk of every sector: ``popcount(m & leaders)`` counts the sectors of a mask of
    whole sectors."""
    return sum(1 << (j * cps) for j in range(n_sectors))


@dataclass(frozen=True)
class Family:
    """The compile-time constants of a replay kernel: what shapes its code (which levels exist,
    line and sector chunks, policies, the L2's mode, the address hash, the DRAM transaction, how an
    L1 set is searched). Every geometry of one family runs on one compiled kernel: set counts,
    ways, channels, banks, interleave, row size and the SM count are run-time values
    (`runtime_params`), so the MD sweep (the L1's ways follow the shared-memory carve-out) and
    what-ifs on sizes compile nothing new."""

    l1_on: bool
    l1_chunks: int
    l1_sector_chunks: int
    l1_policy: int
    """The L1's `tuiprof.sim.cache.Replacement`, as an int."""
    l1_store: int
    l1_hashed: bool
    """Each SM's L1 keeps a hash table of line id -> way (it may take more than `SCAN_MAX_ASSOC`
    ways); else its sets are scanned."""
    l1_ways: int
    """Ways a set's arrays hold: a scanned L1's own (the scan's width), a hashed L1's most (its
    ways beside a carve-out are a run-time value; the arrays keep this stride)."""
    l1_index: str
    """The dtype of the L1's recency lists (way numbers)."""
    l2_on: bool
    l2_chunks: int
    l2_sector_chunks: int
    l2_policy: int
    l2_write_back: bool
    l2_fetch_chunks: int
    """Chunks of a read miss's DRAM fill (the fetch granularity); above the sector's, each miss
    fills the aligned block around it."""
    l2_index: str
    lockstep: bool
    xor_hash: bool
    transaction: int
    l1_by_sm: bool
    """See `Geometry.l1_by_sm`: it decides the walk's shape, so it is compiled in (all carve-outs of
    one GPU fall on one side of `L1_BY_SM_LINES`)."""
    one_run: bool
    """A lockstep L2 with 32 B DRAM transactions whose L1 lines cross no interleave or row."""
    pow2_sets: tuple[bool, bool, bool]
    """Whether the L1's sets, the L2's sets and the L2's lockstep classes are powers of two: a
    mask then finds a set, else a multiplication (`tuiprof.sim.addressing.udivmod`)."""
    channels: int
    banks: int
    interleave: int
    row_size: int
    """The DRAM's shape stays compiled in: as run-time values its shifts and divisions in the
    batching loop cost 6-10% of a trial (spmv-u on the Tesla C2050), and no MD changes it."""
    l2_halves: bool = False
    """The L2's two partitions (`tuiprof.arch.spec.L2Config.halves`): a read looks up its SM's
    half, then a line homed in the other half there too."""

    @property
    def digest(self) -> str:
        """A short name of these values, stable across processes (for the kernel's cache files)."""
        return _digest(self)


def _digest(values: Any) -> str:
    return hashlib.sha1(repr(astuple(values)).encode()).hexdigest()[:12]


def _sub(l1_chunks: int, l2_chunks: int) -> int:
    """L2 lines per L1 line (1 when an L2 line holds one or more whole L1 lines)."""
    return l1_chunks // l2_chunks if l1_chunks > l2_chunks else 1


@dataclass(frozen=True)
class Geometry:
    """The cache and DRAM shapes of a `pack_arch` vector (a level that is absent keeps only its
    line and sector chunks, which still cut requests): its `Family` and the values the kernel of
    that family reads at run time. Set counts cover all partitions: a level of P partitions of S
    sets maps line l to partition ``l % P``, set ``(l // P) % S``, a bijection of ``l mod P*S``, so
    the kernel indexes sets by ``l mod P*S`` with the same results (hashed:
    `tuiprof.sim.addressing.target` over ``P*S``, as the reference)."""

    l1_on: bool
    l1_sets: int
    l1_assoc: int
    l1_chunks: int
    l1_sector_chunks: int
    l1_policy: int
    """The L1's `tuiprof.sim.cache.Replacement` (as packed, an int)."""
    l1_store: int
    l2_on: bool
    l2_sets: int
    l2_assoc: int
    l2_chunks: int
    l2_sector_chunks: int
    l2_policy: int
    l2_write_back: bool
    """A write-back L2 (stores allocate dirty without DRAM; false when the L2 is absent)."""
    xor_hash: bool
    """L2 sets and DRAM channels by the ``xor`` hash (`tuiprof.sim.addressing`), not linearly."""
    channels: int
    banks: int
    interleave: int
    row_size: int
    transaction: int
    l1_by_sm: bool
    """Whether the L1s run SM by SM before the merged walk (all SMs' L1s hold more than
    `L1_BY_SM_LINES` lines: too much state to stay in the CPU's caches when the merge jumps from
    SM to SM)."""
    l2_fetch_chunks: int = 1
    """Chunks of an L2 read miss's DRAM fill (`tuiprof.arch.spec.L2Config.fetch` over 32 B)."""
    l1_ways_max: int = 0
    """The most ways this GPU's L1 takes (its own, or what the unified L1/shared array leaves
    beside the smallest carve-out): with the line size it chooses how the L1 is searched, so that
    every carve-out of one GPU runs on one kernel."""
    l2_halves: bool = False
    """The L2's two partitions (`tuiprof.arch.spec.L2Config.halves`); its sets, even in number,
    are split between them."""

    @classmethod
    def of(cls, params: np.ndarray) -> "Geometry":
        """The geometry of a `pack_arch` vector."""
        p = [int(x) for x in params]
        on1, on2 = p[P_L1_ON] != 0, p[P_L2_ON] != 0
        return cls(l1_on=on1, l1_sets=p[P_L1_SETS] * p[P_L1_PARTS] if on1 else 1,
                   l1_assoc=p[P_L1_ASSOC] if on1 else 1, l1_chunks=p[P_L1_CPL], l1_sector_chunks=p[P_L1_CPS],
                   l1_policy=p[P_L1_LRU], l1_store=p[P_L1_STORE],
                   l2_on=on2, l2_sets=p[P_L2_SETS] * p[P_L2_PARTS] if on2 else 1,
                   l2_assoc=p[P_L2_ASSOC] if on2 else 1, l2_chunks=p[P_L2_CPL], l2_sector_chunks=p[P_L2_CPS],
                   l2_policy=p[P_L2_LRU], l2_write_back=on2 and p[P_L2_WB] != 0, xor_hash=p[P_HASH] == HASH_XOR,
                   channels=p[P_DR_CH], banks=p[P_DR_BANKS], interleave=p[P_DR_IL],
                   row_size=p[P_DR_ROW], transaction=p[P_DR_TX],
                   l1_by_sm=on1 and p[P_SM] * p[P_L1_SETS] * p[P_L1_PARTS] * p[P_L1_ASSOC] > L1_BY_SM_LINES,
                   l1_ways_max=max(p[P_L1_ASSOC], p[P_L1_WAYS_MAX]) if on1 else 1,
                   l2_fetch_chunks=max(p[P_L2_CPF], p[P_L2_CPS]) if on2 else p[P_L2_CPS],
                   l2_halves=on2 and p[P_L2_HALVES] == 2)

    @property
    def family(self) -> Family:
        """The compiled kernel this geometry runs on."""
        ways = max(self.l1_assoc, self.l1_ways_max)
        hashed = self.l1_on and ways > SCAN_MAX_ASSOC
        return Family(l1_on=self.l1_on, l1_chunks=self.l1_chunks, l1_sector_chunks=self.l1_sector_chunks,
                      l1_policy=self.l1_policy, l1_store=self.l1_store,
                      l1_hashed=hashed, l1_ways=ways if hashed else self.l1_assoc,
                      l1_index=np.dtype(_index_dtype(max(ways, 255) if hashed else ways)).name,
                      l2_on=self.l2_on, l2_chunks=self.l2_chunks, l2_sector_chunks=self.l2_sector_chunks,
                      l2_policy=self.l2_policy, l2_write_back=self.l2_write_back, l2_fetch_chunks=self.l2_fetch_chunks,
                      l2_index=np.dtype(_index_dtype(self.l2_assoc)).name, lockstep=self.lockstep,
                      xor_hash=self.xor_hash, transaction=self.transaction, l1_by_sm=self.l1_on and self.l1_by_sm,
                      one_run=self.lockstep and self.transaction == 32
                      and min(self.interleave, self.row_size) >= self.l1_chunks * 32,
                      pow2_sets=cast("tuple[bool, bool, bool]",
                                     tuple(n & (n - 1) == 0 for n in (self.l1_sets, self.l2_sets, self.classes))),
                      channels=self.channels, banks=self.banks, interleave=self.interleave, row_size=self.row_size,
                      l2_halves=self.l2_halves)

    @property
    def digest(self) -> str:
        """A short name of these values, stable across processes."""
        return _digest(self)

    @property
    def sub(self) -> int:
        """L2 lines per L1 line (1 when an L2 line holds one or more whole L1 lines)."""
        return _sub(self.l1_chunks, self.l2_chunks)

    @property
    def wide_l2(self) -> bool:
        """L2 lines longer than L1 lines: the L2 needs dense ids of its own lines."""
        return self.l2_chunks > self.l1_chunks

    @property
    def lockstep(self) -> bool:
        """Whether the L2 runs in class lockstep (see the module docstring; a hashed L2 does not
        put the blocks of a line in adjacent sets; a fill wider than a sector runs per set; RANDOM
        replacement draws a victim per set, so its sets do not stay alike)."""
        return (self.l2_on and self.sub > 1 and self.l2_sets % self.sub == 0 and not self.xor_hash
                and self.l2_fetch_chunks == self.l2_sector_chunks and self.l2_policy != RANDOM and not self.l2_halves)

    @property
    def classes(self) -> int:
        """The L2's lockstep classes (1 without lockstep)."""
        return self.l2_sets // self.sub if self.lockstep else 1


# The run-time values of a replay kernel (`runtime_params`), by index.
R_SM, R_BASE, R_HIT, R_MISS, R_BURST, R_GROUP = range(6)
R_L1_SETS, R_L1_ASSOC, R_L1_BITS, R_L2_SETS, R_L2_ASSOC, R_L2_POLY = range(6, 12)
R_L1_DIV, R_L2_DIV, R_CLS_DIV = range(12, 21, 3)
"""Each a `divider`'s three values."""


def runtime_params(params: np.ndarray, geometry: Geometry | None = None) -> np.ndarray:
    """The values a kernel reads at run time (the R_* indices): SM count, DRAM base latency,
    row-hit and row-miss cycles, burst cycles, largest group of one SM's requests; then the
    caches' set counts and ways (the L1's hash table bits, the L2 hash's polynomial) and the
    `divider` of each set count and of the lockstep classes."""
    g = geometry or Geometry.of(params)
    ways = g.l1_assoc if g.l1_on else 1
    values = [params[P_SM], params[P_DR_BASE], params[P_DR_HIT], params[P_DR_MISS], params[P_DR_BURST],
              params[P_DR_GROUP], g.l1_sets, ways, _log2(2 * g.l1_sets * ways - 1) + 1,
              g.l2_sets, g.l2_assoc, hash_polynomial(g.l2_sets)]
    for d in (g.l1_sets, g.l2_sets, g.classes):
        values += divider(d)
    return np.array(values, dtype=np.int64)


# --- helpers: straight-line calls (LLVM inlines them; no reference counting in the hot loop) ----

@plain_kernel
def lists_init(nxt, prv, n_sets, assoc, stride):
    """Every set's recency list (`stride` entries apart, at least assoc + 1): sentinel, way 0
    (front) .. way assoc-1 (back)."""
    for s in range(n_sets):
        L = s * stride
        for k in range(assoc):
            nxt[L + k] = k + 1
            prv[L + k] = k - 1 if k > 0 else assoc
        nxt[L + assoc] = 0
        prv[L + assoc] = assoc - 1


@njit(**KERNEL)
def to_front(nxt, prv, L, w, assoc):
    """Make way `w` the most recent of the set whose list starts at `L` (a no-op for the front)."""
    uL = np.uint64(L)
    uw = uL + np.uint64(w)
    us = uL + np.uint64(assoc)
    p = prv[uw]
    n = nxt[uw]
    nxt[uL + np.uint64(p)] = n
    prv[uL + np.uint64(n)] = p
    h = nxt[us]
    nxt[us] = w
    prv[uw] = assoc
    nxt[uw] = h
    prv[uL + np.uint64(h)] = w
    return 0


@njit(**KERNEL)
def to_back(nxt, prv, L, w, assoc):
    """Make way `w` the next victim of its set."""
    uL = np.uint64(L)
    uw = uL + np.uint64(w)
    us = uL + np.uint64(assoc)
    p = prv[uw]
    n = nxt[uw]
    nxt[uL + np.uint64(p)] = n
    prv[uL + np.uint64(n)] = p
    t = prv[us]
    prv[us] = w
    nxt[uw] = assoc
    prv[uw] = t
    nxt[uL + np.uint64(t)] = w
    return 0


@njit(**KERNEL)
def hfind(tab, base, bits, key):
    """The way of line id `key` in the open-addressing table of ``2**bits`` entries at `base`, or
    -1. Entries are ``key << 32 | way`` (-1: empty); linear probing from a Fibonacci hash."""
    mask = (np.int64(1) << bits) - 1
    h = np.int64((np.uint64(key) * _FIB) >> np.uint64(64 - bits))
    while True:
        e = tab[base + h]
        if e < 0:
            return np.int64(-1)
        if (e >> 32) == key:
            return e & 0xFFFFFFFF
        h = (h + 1) & mask


@njit(**KERNEL)
def hput(tab, base, bits, key, way):
    """Add `key` (absent) with `way` to the table at `base`."""
    mask = (np.int64(1) << bits) - 1
    h = np.int64((np.uint64(key) * _FIB) >> np.uint64(64 - bits))
    while tab[base + h] >= 0:
        h = (h + 1) & mask
    tab[base + h] = (key << 32) | way
    return 0


@njit(**KERNEL)
def hdel(tab, base, bits, key):
    """Remove `key` (present) from the table at `base`, shifting later entries of its probe run
    back so that no lookup ever needs a tombstone."""
    mask = (np.int64(1) << bits) - 1
    i = np.int64((np.uint64(key) * _FIB) >> np.uint64(64 - bits))
    while (tab[base + i] >> 32) != key:
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        e = tab[base + j]
        if e < 0:
            break
        k = np.int64((np.uint64(e >> 32) * _FIB) >> np.uint64(64 - bits))  # e's home slot
        if (k <= i or k > j) if i <= j else (k <= i and k > j):  # e may move back to i
            tab[base + i] = e
            i = j
    tab[base + i] = -1
    return 0


@plain_kernel
def locate(x, channels, banks, il_shift, row_shift, xor, tab):
    """``(channel, channel * banks + bank, row)`` of the transactions whose address shifted right by
    ``min(il_shift, row_shift)`` is `x` (uint64): channel by interleave (hashed with `xor`: `tab`
    is the channels' `xor_table`), then bank and row from the channel-local address (the
    reference's mapping)."""
    if row_shift >= il_shift:
        y = x
        q = y // np.uint64(channels)
        rows = q >> np.uint64(row_shift - il_shift)
    else:
        d = np.uint64(il_shift - row_shift)
        y = x >> d
        q = y // np.uint64(channels)
        rows = (q << d) | (x & ((np.uint64(1) << d) - np.uint64(1)))
    uch = y % np.uint64(channels)
    if xor:
        uch ^= xor_fold(q, tab)
    ch = np.int64(uch)
    bank = np.int64(rows % np.uint64(banks))
    row = np.int64(rows // np.uint64(banks))
    return ch, ch * banks + bank, row


@njit(**KERNEL)
def draw_batch(st, sm_count, group):
    """The size of the next DRAM batch: ``sm_count`` groups of 1..group requests."""
    target = np.int64(0)
    for _ in range(sm_count):
        target += 1 + rng_below(st, group)
    return target


@njit(**INLINE)
def push(qtx, qop, nq, cbase, mask, rop, nchunks, txmul, txsh):
    """Queue the DRAM transactions of chunks `mask` of the line whose first chunk is `cbase`
    (``rop``: the op of a read, -1 for a store's write-through, WRITEBACK); returns the new queue
    length. One transaction per 32 B chunk, ``txmul`` per chunk below 32 B, one per ``2**txsh``
    chunks above (consecutive duplicates dropped, as the reference does)."""
    last = np.int64(-1)
    for k in range(nchunks):
        if (mask >> k) & 1:
            c = cbase + k
            if txmul == 1 and txsh == 0:  # 32 B transactions: one per chunk, all distinct
                qtx[nq] = c
                qop[nq] = rop
                nq += 1
            elif txmul == 1:
                tx = c >> txsh
                if tx != last:
                    last = tx
                    qtx[nq] = tx
                    qop[nq] = rop
                    nq += 1
            else:
                for t in range(txmul):
                    qtx[nq] = c * txmul + t
                    qop[nq] = rop
                    nq += 1
    keep(qtx)
    keep(qop)
    return nq


@njit(**INLINE)
def l2_line_chunk(id2, lines, lines2, wide, sub, cpl1, cpl2):
    """The first chunk (address / 32) of the L2 line with dense id `id2`: its own line when the
    L2's lines are longer than the L1's (`wide`), else block ``id2 % sub`` of L1 line
    ``id2 // sub`` (`sub` a power of two, 1 when an L2 line holds a whole L1 line)."""
    if wide:
        out = lines2[id2] * cpl2
    else:
        out = lines[id2 // sub] * cpl1 + (id2 % sub) * cpl2
    keep(lines)
    keep(lines2)
    return out


@njit(**KERNEL)
def split_class(c, sub, assoc, chunks, tagS, valS, dtyS, nxtS, prvS, tag2, val2, dty2, nxt2, prv2, way2):
    """End class `c`'s lockstep: copy its super-set into its `sub` sets (block k of the lines of
    the class to set ``sub * c + k``), which the kernel then runs one by one."""
    low = (np.int64(1) << chunks) - 1
    aa = assoc + 1
    for k in range(sub):
        r = sub * c + k
        for w in range(assoc):
            t = np.int64(tagS[c * assoc + w])
            i = r * assoc + w
            if t >= 0:
                id2 = t * sub + k
                tag2[i] = id2
                way2[id2] = w
                val2[i] = (np.int64(valS[c * assoc + w]) >> (k * chunks)) & low
                dty2[i] = (np.int64(dtyS[c * assoc + w]) >> (k * chunks)) & low
            else:
                tag2[i] = -1
                val2[i] = 0
                dty2[i] = 0
        for w in range(aa):
            nxt2[r * aa + w] = nxtS[c * aa + w]
            prv2[r * aa + w] = prvS[c * aa + w]
    return 0


@plain_kernel
def dirty_transactions(dty2, tag2, lines, lines2, wide, sub, cpl1, cpl2, lock, split, dtyS, tagS, a2, low2,
                       qtx, qop, txmul, txsh):
    """The DRAM write transactions the L2's dirty sectors owe (a write-back each), as `push`
    would queue them (in the scratch queue ``qtx``/``qop``): the sets' lines, and the lines of
    the classes still in lockstep. Called only where there is an L2 (a kernel without one never
    compiles it)."""
    owed = np.int64(0)
    for i in range(dty2.shape[0]):
        od = np.int64(dty2[i])
        if od != 0:
            ob = l2_line_chunk(np.int64(tag2[i]), lines, lines2, wide, sub, cpl1, cpl2)
            owed += push(qtx, qop, 0, ob, od, WRITEBACK, cpl2, txmul, txsh)
    for c in range(split.shape[0] if lock else 0):  # the classes still in lockstep
        if split[c] == 0:
            for w in range(a2):
                od = np.int64(dtyS[c * a2 + w])
                if od != 0:
                    ob = lines[np.int64(tagS[c * a2 + w])] * cpl1
                    for jj in range(sub):
                        odj = (od >> (jj * cpl2)) & low2
                        if odj != 0:
                            owed += push(qtx, qop, 0, ob + jj * cpl2, odj, WRITEBACK, cpl2, txmul, txsh)
    return owed


def _build(g: Family) -> Callable:
    """The replay kernel with `g`'s values frozen in (Numba treats closure variables as constants;
    its disk cache keys a closure by their values, so each family has its own machine code)."""
    ON1 = g.l1_on
    CPL1 = g.l1_chunks
    CPS1 = g.l1_sector_chunks
    SPL1 = CPL1 // CPS1
    LEAD1 = _leaders(CPS1, SPL1)
    TOUCH1 = g.l1_policy == LRU or g.l1_policy == MRU  # a hit makes its way the front
    MRU1 = g.l1_policy == MRU  # a fill leaves its way at the back
    RAND1 = g.l1_policy == RANDOM  # a fill replaces a drawn way
    EVICT1 = g.l1_store == STORE_EVICT
    STORES1 = ON1 and g.l1_store != STORE_NO_ALLOCATE  # stores update the L1
    HASH1 = ON1 and g.l1_hashed
    W1 = g.l1_ways  # a set's tags (compiled in: the scan's width, the sets' stride)
    AW1 = W1 + 1  # a set's recency list, sentinel included
    P1, P2, PC = g.pow2_sets
    LT1 = np.dtype(g.l1_index).type
    VT1 = _mask_dtype(CPL1)
    ON2 = g.l2_on
    CPL2 = g.l2_chunks
    CPS2 = g.l2_sector_chunks
    SPL2 = CPL2 // CPS2
    LEAD2 = _leaders(CPS2, SPL2)
    CPF2 = g.l2_fetch_chunks
    FPL2 = CPL2 // CPF2
    FETCH2 = ON2 and CPF2 > CPS2  # a read miss fills its whole aligned fetch block
    TOUCH2 = g.l2_policy == LRU or g.l2_policy == MRU
    MRU2 = g.l2_policy == MRU
    RAND2 = g.l2_policy == RANDOM
    HALVES2 = g.l2_halves  # the L2's two partitions: a far read is looked up at home too
    LT2 = np.dtype(g.l2_index).type
    NONE2 = int(np.iinfo(LT2).max)
    VT2 = _mask_dtype(CPL2)
    SUB = _sub(CPL1, CPL2)
    SUBSH = _log2(SUB)
    C2SH = _log2(CPL2)
    LOW2 = (1 << CPL2) - 1
    WIDE = CPL2 > CPL1  # L2 lines longer than L1 lines
    LOCK = g.lockstep
    SPW = CPL1 // CPS2 if LOCK else 1  # L2 sectors across an L1 line
    LEADW = _leaders(CPS2, SPW)
    VTS = _mask_dtype(CPL1)
    TX = g.transaction
    TXSHA = _log2(TX)
    TXMUL = 32 // TX if TX < 32 else 1
    TXSH = _log2(TX // 32) if TX >= 32 else 0
    # One L1 request queues at most, per chunk it covers: a dirty eviction's write-back, a
    # write-through store's DRAM write and the fetch of what it did not write entirely (3 each).
    QMAX = 3 * max(CPL1, CPL2) * TXMUL + 2
    MASK32 = 0xFFFFFFFF
    WB2 = g.l2_write_back
    XOR = g.xor_hash
    BY_SM = g.l1_by_sm
    ILSH = _log2(g.interleave)
    ROWSH = _log2(g.row_size)
    KEYSH = min(ILSH, ROWSH)
    CH = g.channels
    NB = g.banks
    POLYCH = hash_polynomial(CH)
    # A lockstep read with no write-back sends DRAM the missed 32 B chunks of one L1 line, which
    # share their (channel, bank, row) key when the line does not cross an interleave or a row:
    # one run, fed to the batch without the queue.
    ONE_RUN = g.one_run
    PF = 48  # accesses ahead that the merged walk prefetches

    def replay(st, lab, order, sm_acc_off, acc_op, op_write, req_off, req_id, req_mask, req_full, req_id2,
               lines, lines2, n_ids2, n_ops, rt, n_warm):
        S = rt[R_SM]
        BASE = rt[R_BASE]
        THIT = rt[R_HIT]
        TMISS = rt[R_MISS]
        BURST = rt[R_BURST]
        GROUP = rt[R_GROUP]
        NSETS1 = rt[R_L1_SETS]
        A1 = rt[R_L1_ASSOC] if HASH1 else W1  # the ways in use (a hashed L1's sentinel at A1)
        HB1 = rt[R_L1_BITS]  # the hash table's bits: load factor at most 1/2
        HT1 = np.int64(1) << HB1
        NSETS2 = rt[R_L2_SETS]
        A2 = rt[R_L2_ASSOC]
        AA2 = A2 + 1
        NCLS = NSETS2 // SUB if LOCK else 1
        NH2 = NSETS2 >> 1  # sets per half (two partitions)
        NIDS2 = n_ids2 if HALVES2 else 0  # half h's way map starts at h * NIDS2
        DM1, DA1, DB1 = rt[R_L1_DIV], rt[R_L1_DIV + 1], rt[R_L1_DIV + 2]
        DM2, DA2, DB2 = rt[R_L2_DIV], rt[R_L2_DIV + 1], rt[R_L2_DIV + 2]
        DMC, DAC, DBC = rt[R_CLS_DIV], rt[R_CLS_DIV + 1], rt[R_CLS_DIV + 2]
        counts = np.zeros((N_COUNTS, n_ops), dtype=np.int64)
        tab2 = xor_table(NSETS2, rt[R_L2_POLY])  # the hash's tables (unused when linear)
        tabch = xor_table(CH, POLYCH)
        # L1: every SM's (one SM's when they run SM by SM), a hash table per SM when hashed
        n_l1 = (NSETS1 if BY_SM else S * NSETS1) if ON1 else 1
        tag1 = np.full(n_l1 * W1, -1, dtype=np.int32)
        val1 = np.zeros(n_l1 * W1, dtype=VT1)
        nxt1 = np.empty(n_l1 * AW1, dtype=LT1)
        prv1 = np.empty(n_l1 * AW1, dtype=LT1)
        lists_init(nxt1, prv1, n_l1, A1, AW1)
        htab1 = np.full((HT1 if BY_SM else S * HT1) if HASH1 else 1, -1, dtype=np.int64)
        sends = np.empty(req_id.shape[0] if BY_SM else 1, dtype=VT1)
        # L2: per set, and per class super-set while in lockstep
        tag2 = np.full(NSETS2 * A2, -1, dtype=np.int32)
        val2 = np.zeros(NSETS2 * A2, dtype=VT2)
        dty2 = np.zeros(NSETS2 * A2, dtype=VT2)
        nxt2 = np.empty(NSETS2 * AA2, dtype=LT2)
        prv2 = np.empty(NSETS2 * AA2, dtype=LT2)
        lists_init(nxt2, prv2, NSETS2, A2, AA2)
        way2 = np.full((2 * n_ids2 if HALVES2 else n_ids2) if ON2 else 1, NONE2, dtype=LT2)
        n_lock = NCLS if LOCK else 1
        tagS = np.full(n_lock * A2, -1, dtype=np.int32)
        valS = np.zeros(n_lock * A2, dtype=VTS)
        dtyS = np.zeros(n_lock * A2, dtype=VTS)
        nxtS = np.empty(n_lock * AA2, dtype=LT2)
        prvS = np.empty(n_lock * AA2, dtype=LT2)
        lists_init(nxtS, prvS, n_lock, A2, AA2)
        wayS = np.full(lines.shape[0] if LOCK else 1, NONE2, dtype=LT2)
        split = np.zeros(n_lock, dtype=np.uint8)
        # DRAM
        open_row = np.full(CH * NB, -1, dtype=np.int64)
        busy = np.zeros(CH * NB, dtype=np.int64)
        chn = np.zeros(CH, dtype=np.int64)
        bop = np.zeros(n_ops, dtype=np.int64)
        touched = np.empty(n_ops, dtype=np.int64)
        n_touched = 0
        lat_sum = np.zeros(n_ops, dtype=np.int64)
        # Every batch but the last holds at least S transactions (np.empty commits only what is written).
        batches = np.empty(req_id.shape[0] * 3 * max(CPL1, CPL2) * TXMUL // S + 2, dtype=np.int64)
        nbat = 0
        qtx = np.empty(QMAX, dtype=np.int64)
        qop = np.empty(QMAX, dtype=np.int64)
        # RANDOM replacement's draws (as the reference): stream s for SM s's L1, stream S for the
        # L2, forked from `st` without advancing it
        rs = rng_streams(st, S + 1 if RAND1 or RAND2 else 0)
        target = draw_batch(st, S, GROUP)
        nin = np.int64(0)
        maxb = np.int64(0)
        maxc = np.int64(0)
        wbs = np.int64(0)
        last_x = np.uint64(0)
        cch, cb, crow = locate(last_x, CH, NB, ILSH, ROWSH, XOR, tabch)
        # The first `n_warm` accesses of the merged stream are the snapshot's warm-up (replayed,
        # not counted): the DRAM batches closed, the write-backs made and the dirty sectors owed
        # when the counted accesses begin are left out of the trial's figures.
        wbs0 = np.int64(0)
        nbat0 = 0
        owed0 = np.int64(0)
        taken = n_warm <= 0

        # With BY_SM the walk runs twice: step 5 SM by SM (an L1 sees its own SM's stream only,
        # whatever the merge; one SM's state at a time stays in the CPU's caches), recording what
        # each request sends on to L2, then steps 6-7 over the merged stream. Otherwise one walk
        # of the merged stream does every step.
        for phase in range(2 if BY_SM else 1):
            do_l1 = phase == 0 if BY_SM else True
            do_l2 = phase == 1 if BY_SM else True
            by_sm = BY_SM and do_l1
            cur = sm_acc_off[:S].copy()
            # Cursors of the accesses PF and 2 * PF ahead in the merged walk: the request arrays
            # are read at the accesses' scattered offsets, so each access starts with cache misses
            # unless its offsets, then its requests, were prefetched (two steps: the second needs
            # the offsets the first brought in).
            n_acc = lab.shape[0]
            cur_a = sm_acc_off[:S].copy()
            cur_b = sm_acc_off[:S].copy()
            # the first request of the access PF ahead, from where PF // 2 ahead prefetches the
            # line id of its L1 line (``lines[req_id[j]]``: the requests carry ids, not lines)
            first = np.zeros(PF, dtype=np.int64)
            if not by_sm:
                for i in range(min(2 * PF, n_acc)):
                    cur_a[lab[i]] += 1
                    if i < PF:
                        cur_b[lab[i]] += 1
            s = np.int64(0)
            sm_end = sm_acc_off[1]
            for i in range(n_acc):
                if do_l2 and not taken and i == n_warm:
                    wbs0 = wbs
                    nbat0 = nbat
                    if ON2:
                        owed0 = dirty_transactions(dty2, tag2, lines, lines2, WIDE, SUB, CPL1, CPL2, LOCK, split, dtyS,
                                                   tagS, A2, LOW2, qtx, qop, TXMUL, TXSH)
                    taken = True
                if not by_sm:
                    if i + 2 * PF < n_acc:
                        sa = lab[i + 2 * PF]
                        ra = order[cur_a[sa]]
                        cur_a[sa] += 1
                        prefetch(req_off, ra)
                        prefetch(acc_op, ra)
                    if i + PF < n_acc:
                        sb = lab[i + PF]
                        rb = order[cur_b[sb]]
                        cur_b[sb] += 1
                        jb = req_off[rb]
                        je = req_off[rb + 1] - 1
                        prefetch(req_id, jb)
                        prefetch(req_id, je)
                        prefetch(req_mask, jb)
                        prefetch(req_mask, je)
                        first[i % PF] = jb
                    if PF // 2 <= i < n_acc - PF // 2:
                        jh = first[(i + PF // 2) % PF]
                        if jh < req_id.shape[0]:
                            prefetch(lines, req_id[jh])
                if by_sm:
                    if i == sm_end:  # the next SM with accesses: its L1 starts empty
                        while sm_acc_off[s + 1] <= i:
                            s += 1
                        sm_end = sm_acc_off[s + 1]
                        tag1[:] = -1
                        val1[:] = 0
                        lists_init(nxt1, prv1, n_l1, A1, AW1)
                        if HASH1:
                            htab1[:] = -1
                    g = i
                else:
                    s = lab[i]
                    g = cur[s]
                    cur[s] += 1
                r = order[g]
                o = np.int64(acc_op[r])
                wr = op_write[o] != 0
                wb = WB2 and op_write[o] == OP_STORE  # a store on a write-back L2: no DRAM write
                rop = np.int64(-1) if wr else o
                jbeg = req_off[r]
                jend = req_off[r + 1]
                sl = 0 if BY_SM else s  # the L1 copy of the SM
                hb = sl * HT1
                c_l1ra = np.int64(0)
                c_l1rh = np.int64(0)
                c_l1wa = np.int64(0)
                c_l2ra = np.int64(0)
                c_l2rh = np.int64(0)
                c_l2la = np.int64(0)
                c_l2lh = np.int64(0)
                c_l2wa = np.int64(0)
                c_l2wh = np.int64(0)
                c_dr = np.int64(0)
                c_dw = np.int64(0)
                for j in range(np.uint64(jbeg), np.uint64(jend)):  # unsigned: no wraparound checks
                    if do_l1:
                        # ---- step 5: the SM's L1
                        id1 = np.int64(req_id[j])
                        line1 = lines[id1]
                        m = np.int64(req_mask[j])
                        smask = expand_sectors(m, CPS1, SPL1)
                        nsec = popcount(smask & LEAD1)
                        send = m
                        if wr:
                            c_l1wa += nsec
                        else:
                            c_l1ra += nsec
                        if ON1 and (STORES1 or not wr):
                            sg = sl * NSETS1 + np.int64(udivmod(line1, NSETS1, DM1, DA1, DB1, P1)[1])
                            b1 = sg * W1
                            L1 = sg * AW1
                            t1 = np.int32(id1)
                            if HASH1:
                                w = hfind(htab1, hb, HB1, id1)
                            else:
                                w = find_tag(tag1, b1, t1, W1)
                            if wr:
                                if EVICT1:
                                    if w >= 0:
                                        if HASH1:
                                            hdel(htab1, hb, HB1, id1)
                                        tag1[b1 + w] = -1
                                        val1[b1 + w] = 0
                                        to_back(nxt1, prv1, L1, w, A1)
                                else:  # write-allocate
                                    if w < 0:
                                        w = rng_below_at(rs, s, A1) if RAND1 else np.int64(prv1[L1 + A1])
                                        if HASH1:
                                            if tag1[b1 + w] >= 0:
                                                hdel(htab1, hb, HB1, np.int64(tag1[b1 + w]))
                                            hput(htab1, hb, HB1, id1, w)
                                        tag1[b1 + w] = t1
                                        val1[b1 + w] = 0
                                        if not MRU1:  # MRU: the filled way stays the back
                                            to_front(nxt1, prv1, L1, w, A1)
                                    elif TOUCH1:
                                        to_front(nxt1, prv1, L1, w, A1)
                                    val1[b1 + w] = np.int64(val1[b1 + w]) | full_sectors(np.int64(req_full[j]), CPS1,
                                                                                         SPL1)
                            else:
                                if w >= 0:
                                    v1 = np.int64(val1[b1 + w])
                                    c_l1rh += popcount(smask & v1 & LEAD1)
                                    send = smask & ~v1
                                    if TOUCH1:
                                        to_front(nxt1, prv1, L1, w, A1)
                                else:
                                    send = smask
                                    w = rng_below_at(rs, s, A1) if RAND1 else np.int64(prv1[L1 + A1])
                                    if HASH1:
                                        if tag1[b1 + w] >= 0:
                                            hdel(htab1, hb, HB1, np.int64(tag1[b1 + w]))
                                        hput(htab1, hb, HB1, id1, w)
                                    tag1[b1 + w] = t1
                                    val1[b1 + w] = 0
                                    if not MRU1:
                                        to_front(nxt1, prv1, L1, w, A1)
                                val1[b1 + w] = np.int64(val1[b1 + w]) | send
                        if BY_SM:
                            sends[j] = send
                    else:
                        send = np.int64(sends[j])
                        if send == 0:
                            continue
                        id1 = np.int64(req_id[j])
                        line1 = lines[id1]
                    if not do_l2 or send == 0:
                        continue
                    nq = 0
                    rk = 0  # the length of a run of reads that skips the queue (ONE_RUN)
                    # ---- step 6: the L2 lines the request covers (blocks jj of the L1 line)
                    lbase = line1 * CPL1  # first chunk of the L1 line
                    per_set = True
                    if LOCK:
                        c = np.int64(udivmod(line1, NCLS, DMC, DAC, DBC, PC)[1])
                        if split[c] == 0:
                            full = True
                            for jj in range(SUB):
                                if ((send >> (jj * CPL2)) & LOW2) == 0:
                                    full = False
                            if full:
                                per_set = False
                                bS = c * A2
                                LS = c * AA2
                                wS = np.int64(wayS[id1])
                                od = np.int64(0)
                                ob = np.int64(0)
                                if wS != NONE2:
                                    V = np.int64(valS[bS + wS])
                                    if TOUCH2:
                                        to_front(nxtS, prvS, LS, wS, A2)
                                else:
                                    V = np.int64(0)
                                    wS = np.int64(prvS[LS + A2])
                                    old = np.int64(tagS[bS + wS])
                                    if old >= 0:
                                        wayS[old] = NONE2
                                        od = np.int64(dtyS[bS + wS])
                                        if od != 0:  # the victim's address, read only when it is dirty
                                            ob = lines[old] * CPL1
                                    tagS[bS + wS] = np.int32(id1)
                                    wayS[id1] = wS
                                    dtyS[bS + wS] = 0
                                    if not MRU2:  # (no lockstep under RANDOM)
                                        to_front(nxtS, prvS, LS, wS, A2)
                                sm2 = expand_sectors(send, CPS2, SPW)
                                miss = sm2 & ~V
                                fetch = np.int64(0)  # a write-through store miss fetches what it did not write
                                if wr:
                                    full2 = full_sectors(np.int64(req_full[j]), CPS2, SPW)
                                    if not wb:
                                        fetch = miss & ~full2
                                if ONE_RUN and not wr and od == 0:  # the common case: one run of reads
                                    rk = popcount(miss)
                                    c_dr += rk
                                else:
                                    for jj in range(SUB):
                                        sh = jj * CPL2
                                        if od != 0:
                                            odj = (od >> sh) & LOW2
                                            if odj != 0:
                                                nq = push(qtx, qop, nq, ob + sh, odj, WRITEBACK, CPL2, TXMUL, TXSH)
                                        mj = (miss >> sh) & LOW2
                                        if wr:  # a store writes DRAM what it wrote, or nothing (write-back)
                                            mj = 0 if wb else mj & (send >> sh) & LOW2
                                        if mj != 0:
                                            n0 = nq
                                            nq = push(qtx, qop, nq, lbase + sh, mj, rop, CPL2, TXMUL, TXSH)
                                            if wr:
                                                c_dw += nq - n0
                                            else:
                                                c_dr += nq - n0
                                        fj = (fetch >> sh) & LOW2
                                        if fj != 0:
                                            n0 = nq
                                            nq = push(qtx, qop, nq, lbase + sh, fj, o, CPL2, TXMUL, TXSH)
                                            c_dr += nq - n0
                                nsec2 = popcount(sm2 & LEADW)
                                hits = popcount(sm2 & V & LEADW)
                                if wr:
                                    c_l2wa += nsec2
                                    if wb:
                                        c_l2wh += nsec2
                                        dtyS[bS + wS] = np.int64(dtyS[bS + wS]) | sm2
                                        valS[bS + wS] = V | (sm2 & full2)
                                    else:
                                        c_l2wh += hits
                                        dtyS[bS + wS] = np.int64(dtyS[bS + wS]) | (sm2 & V)
                                        valS[bS + wS] = V | miss
                                else:
                                    c_l2ra += nsec2
                                    c_l2rh += hits
                                    c_l2la += nsec2
                                    c_l2lh += hits
                                    valS[bS + wS] = V | miss
                            else:
                                split_class(c, SUB, A2, CPL2, tagS, valS, dtyS, nxtS, prvS, tag2, val2, dty2, nxt2, prv2,
                                            way2)
                                split[c] = 1
                    if per_set:
                        line0 = lbase >> C2SH
                        uq0, ur0 = udivmod(line0, NSETS2, DM2, DA2, DB2, P2)
                        r0 = np.int64(ur0)
                        fm = np.int64(req_full[j]) if wr else np.int64(0)
                        for jj in range(SUB):
                            if SUB == 1:
                                m2 = (send << (lbase & (CPL2 - 1))) & MASK32
                                f2 = (fm << (lbase & (CPL2 - 1))) & MASK32
                            else:
                                m2 = (send >> (jj * CPL2)) & LOW2
                                f2 = (fm >> (jj * CPL2)) & LOW2
                            if m2 == 0:
                                continue
                            smask2 = expand_sectors(m2, CPS2, SPL2)
                            nsec2 = popcount(smask2 & LEAD2)
                            base = (line0 + jj) * CPL2
                            v = np.int64(0)
                            w2 = np.int64(0)
                            b2 = np.int64(0)
                            rx = np.int64(0)  # the line's set over both halves
                            home = np.int64(0)  # its home half, and the half looked up first
                            hx = np.int64(0)
                            if ON2:
                                rr = r0 + jj
                                uq = uq0
                                while rr >= NSETS2:  # block jj of the line is past the last set
                                    rr -= NSETS2
                                    uq += np.uint64(1)
                                if XOR:
                                    rr ^= np.int64(xor_fold(uq, tab2))
                                if WIDE:
                                    id2 = np.int64(req_id2[j])
                                elif SUB == 1:
                                    id2 = id1
                                else:
                                    id2 = (id1 << SUBSH) + jj
                                if HALVES2:  # a read looks up its SM's half first, a write goes home
                                    home = home_half(line0 + jj)
                                    hx = home if wr else np.int64((2 * s) // S)
                                    rx = rr
                                    rr = hx * NH2 + (rx >> 1)
                                b2 = rr * A2
                                L2 = rr * AA2
                                w2 = np.int64(way2[hx * NIDS2 + id2])
                                if w2 != NONE2:
                                    v = np.int64(val2[b2 + w2])
                                    if TOUCH2:
                                        to_front(nxt2, prv2, L2, w2, A2)
                                else:
                                    w2 = rng_below_at(rs, S, A2) if RAND2 else np.int64(prv2[L2 + A2])
                                    old = np.int64(tag2[b2 + w2])
                                    if old >= 0:
                                        way2[hx * NIDS2 + old] = NONE2
                                        od = np.int64(dty2[b2 + w2])
                                        if od != 0:
                                            ob = l2_line_chunk(old, lines, lines2, WIDE, SUB, CPL1, CPL2)
                                            nq = push(qtx, qop, nq, ob, od, WRITEBACK, CPL2, TXMUL, TXSH)
                                    tag2[b2 + w2] = np.int32(id2)
                                    way2[hx * NIDS2 + id2] = w2
                                    dty2[b2 + w2] = 0
                                    if not MRU2:
                                        to_front(nxt2, prv2, L2, w2, A2)
                                if HALVES2 and wr:  # the other half's copy is dropped (copies are clean)
                                    ho = 1 - home
                                    wc = np.int64(way2[ho * NIDS2 + id2])
                                    if wc != NONE2:
                                        rc = ho * NH2 + (rx >> 1)
                                        tag2[rc * A2 + wc] = -1
                                        val2[rc * A2 + wc] = 0
                                        dty2[rc * A2 + wc] = 0
                                        way2[ho * NIDS2 + id2] = NONE2
                                        to_back(nxt2, prv2, rc * AA2, wc, A2)
                            # Sectors not valid; an absent L2 passes the request itself (no sector rounding).
                            miss = (smask2 & ~v) if ON2 else m2
                            hits = popcount(smask2 & v & LEAD2)
                            if wr:
                                c_l2wa += nsec2
                                full2 = full_sectors(f2, CPS2, SPL2)  # sectors the store wrote entirely
                                if wb:  # write-back: allocate dirty, no DRAM transaction
                                    c_l2wh += nsec2
                                    dty2[b2 + w2] = np.int64(dty2[b2 + w2]) | smask2
                                    val2[b2 + w2] = v | (smask2 & full2)
                                else:  # write-through (and atomics): a miss writes DRAM and brings the sector in
                                    c_l2wh += hits
                                    em = m2 & miss
                                    if em != 0:
                                        n0 = nq
                                        nq = push(qtx, qop, nq, base, em, rop, CPL2, TXMUL, TXSH)
                                        c_dw += nq - n0
                                    if ON2:
                                        fetch = miss & ~full2  # the bytes it did not write come from DRAM
                                        if fetch != 0:
                                            n0 = nq
                                            nq = push(qtx, qop, nq, base, fetch, o, CPL2, TXMUL, TXSH)
                                            c_dr += nq - n0
                                        dty2[b2 + w2] = np.int64(dty2[b2 + w2]) | (smask2 & v)
                                        val2[b2 + w2] = v | miss
                            else:
                                c_l2ra += nsec2
                                c_l2rh += hits
                                c_l2la += nsec2
                                c_l2lh += hits
                                if FETCH2 and miss != 0:  # the fill: every aligned fetch block a miss touches
                                    miss = expand_sectors(miss, CPF2, FPL2) & ~v
                                dram = miss
                                if HALVES2 and miss != 0 and home != hx:
                                    # Homed in the other half: the block is looked up there too (a second
                                    # lookup, as ncu counts it); home keeps what DRAM brings, and the
                                    # near half a copy of the block.
                                    rf = home * NH2 + (rx >> 1)
                                    bf = rf * A2
                                    wf = np.int64(way2[home * NIDS2 + id2])
                                    vf = np.int64(0)
                                    if wf != NONE2:
                                        vf = np.int64(val2[bf + wf])
                                        if TOUCH2:
                                            to_front(nxt2, prv2, rf * AA2, wf, A2)
                                    else:
                                        wf = rng_below_at(rs, S, A2) if RAND2 else np.int64(prv2[rf * AA2 + A2])
                                        old = np.int64(tag2[bf + wf])
                                        if old >= 0:
                                            way2[home * NIDS2 + old] = NONE2
                                            od = np.int64(dty2[bf + wf])
                                            if od != 0:
                                                ob = l2_line_chunk(old, lines, lines2, WIDE, SUB, CPL1, CPL2)
                                                nq = push(qtx, qop, nq, ob, od, WRITEBACK, CPL2, TXMUL, TXSH)
                                        tag2[bf + wf] = np.int32(id2)
                                        way2[home * NIDS2 + id2] = wf
                                        dty2[bf + wf] = 0
                                        if not MRU2:
                                            to_front(nxt2, prv2, rf * AA2, wf, A2)
                                    c_l2la += popcount(miss & LEAD2)
                                    c_l2lh += popcount(miss & vf & LEAD2)
                                    c_l2rh += popcount(smask2 & miss & vf & LEAD2)  # served at home
                                    val2[bf + wf] = vf | miss
                                    dram = miss & ~vf
                                if dram != 0:
                                    n0 = nq
                                    nq = push(qtx, qop, nq, base, dram, rop, CPL2, TXMUL, TXSH)
                                    c_dr += nq - n0
                                if ON2:
                                    val2[b2 + w2] = v | miss
                    # ---- step 7: this request's transactions join the open batch, in order, as runs
                    e = 0
                    while e < nq or rk > 0:
                        if ONE_RUN and rk > 0:  # the L1 line's reads: one key (the queue is empty)
                            ro = o
                            x = np.uint64(lbase) >> np.uint64(KEYSH - TXSHA)
                            k = rk
                            rk = 0
                        else:
                            ro = qop[e]
                            ux = np.uint64(qtx[e])
                            x = (ux << np.uint64(TXSHA - KEYSH)) if TXSHA >= KEYSH else (ux >> np.uint64(KEYSH - TXSHA))
                            k = 1
                            while e + k < nq and qop[e + k] == ro:
                                uy = np.uint64(qtx[e + k])
                                y = (uy << np.uint64(TXSHA - KEYSH)) if TXSHA >= KEYSH else (uy >> np.uint64(KEYSH - TXSHA))
                                if y != x:
                                    break
                                k += 1
                            e += k
                        if x != last_x:
                            last_x = x
                            cch, cb, crow = locate(x, CH, NB, ILSH, ROWSH, XOR, tabch)
                        if ro == WRITEBACK:
                            wbs += k
                            ro = -1
                        while k > 0:
                            t = min(k, target - nin)
                            if open_row[cb] == crow:
                                busy[cb] += THIT * t
                            else:
                                busy[cb] += TMISS + THIT * (t - 1)
                                open_row[cb] = crow
                            maxb = max(maxb, busy[cb])
                            chn[cch] += t
                            maxc = max(maxc, chn[cch])
                            if ro >= 0:
                                if bop[ro] == 0:
                                    touched[n_touched] = ro
                                    n_touched += 1
                                bop[ro] += t
                            nin += t
                            k -= t
                            if nin == target:  # the batch is complete: time it, charge its reads
                                lat = BASE + max(maxb, maxc * BURST)
                                batches[nbat] = lat
                                nbat += 1
                                for u in range(n_touched):
                                    oo = touched[u]
                                    lat_sum[oo] += lat * bop[oo]
                                    bop[oo] = 0
                                n_touched = 0
                                busy[:] = 0
                                chn[:] = 0
                                maxb = 0
                                maxc = 0
                                nin = 0
                                target = draw_batch(st, S, GROUP)
                if do_l1:
                    counts[C_L1_REQ, o] += jend - jbeg
                    counts[C_L1_RA, o] += c_l1ra
                    counts[C_L1_RH, o] += c_l1rh
                    counts[C_L1_WA, o] += c_l1wa
                if do_l2:
                    counts[C_L2_RA, o] += c_l2ra
                    counts[C_L2_RH, o] += c_l2rh
                    counts[C_L2_LA, o] += c_l2la
                    counts[C_L2_LH, o] += c_l2lh
                    counts[C_L2_WA, o] += c_l2wa
                    counts[C_L2_WH, o] += c_l2wh
                    counts[C_DR, o] += c_dr
                    counts[C_DW, o] += c_dw
        if nin > 0:
            lat = BASE + max(maxb, maxc * BURST)
            batches[nbat] = lat
            nbat += 1
            for u in range(n_touched):
                oo = touched[u]
                lat_sum[oo] += lat * bop[oo]
        # The dirty sectors left in the L2: transactions it owes DRAM after the snapshot.
        owed = np.int64(0)
        if ON2:
            owed = dirty_transactions(dty2, tag2, lines, lines2, WIDE, SUB, CPL1, CPL2, LOCK, split, dtyS, tagS, A2,
                                      LOW2, qtx, qop, TXMUL, TXSH)
        if not taken:  # every access warmed up: nothing counted
            return counts, lat_sum.astype(np.float64), batches[:0].copy(), np.int64(0), np.int64(0)
        # Counted: the batches closed from the first counted access on, the write-backs made since,
        # and the dirty sectors the L2 owes beyond those it owed then (every dirty sector reaches
        # DRAM once, so these are the counted CTAs' write traffic; negative when they wrote back
        # more of the warm-up's dirty sectors than they left).
        return counts, lat_sum.astype(np.float64), batches[nbat0:nbat].copy(), wbs - wbs0, owed - owed0

    # one name per family (see built_kernel): geometries that shared one crashed a process that
    # loaded two of them from the disk cache ('descr' is NULL)
    return built_kernel(replay, f"replay_{g.digest}")


_KERNELS: dict[Family, Callable] = {}
_LOCK = threading.Lock()


def replay_cached(family: Family) -> bool:
    """Whether `family`'s kernel will not compile at its first call: loaded in this process, or
    in the on-disk kernel cache (`tuiprof.jit`'s folder)."""
    if replay_kernel(family).signatures:  # type: ignore[attr-defined]  # a Numba dispatcher
        return True
    folder = os.environ.get("NUMBA_CACHE_DIR")  # tuiprof.jit's choice (imported with the kernel)
    return folder is not None and folder != "" and any(Path(folder).rglob(f"*replay_{family.digest}-*.nbi"))


def replay_kernel(geometry: Geometry | Family) -> Callable:
    """The replay kernel of `geometry`'s family, built on first use (compiled, or loaded from the
    disk cache, at its first call)."""
    family = geometry.family if isinstance(geometry, Geometry) else geometry
    with _LOCK:
        kernel = _KERNELS.get(family)
        if kernel is None:
            kernel = _KERNELS[family] = _build(family)
        return kernel


__all__ = ["Family", "Geometry", "WRITEBACK", "replay_cached", "replay_kernel", "runtime_params"]
