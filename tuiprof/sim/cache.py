"""Set-associative, sectored cache kernels (Numba): the caches of the reference replay
(`tuiprof.sim.reference`) and the standalone cache checked against pycachesim (`new_cache`). The
product kernel (`tuiprof.sim.replay`) keeps its own specialised copies of the lists.

A cache is two flat arrays, so that kernels hold no Python objects. One pair of arrays may hold
several independent caches of the same geometry (*copies*: the per-SM L1s), one region each.

- ``meta`` int32 [copies * (N + sets), 8]: per copy, one 32-byte row per way (``slot = row0 +
  set * assoc + way``), then one *sentinel* row per set (``row0 + N + set``) that closes the
  set's circular recency list. Columns: ``TAG_LO`` / ``TAG_HI`` the line id (``TAG_HI`` -1: an
  invalid way); ``VALID`` / ``DIRTY`` masks at 32-byte *chunk* granularity (bit k = bytes
  ``32k .. 32k+31`` of the line; a sector of S bytes is S/32 adjacent bits, always set
  together), stored as int32 bit patterns (read them with `get_mask`); ``PREV`` / ``NEXT`` the
  recency list (the sentinel's NEXT is the most recent way, its PREV the victim); ``HNEXT`` the
  next slot of the way's hash chain.
- ``htab`` int32 [copies * H]: per copy (from ``hbase``), the heads of the hash chains
  (Fibonacci hashing of the line id, H >= 2N: a load factor below 1/2), so that finding a line
  costs O(1) whatever the associativity: Volta+ L1s have hundreds of ways and the Fermi caches
  64, where a tag scan would dominate the trial. 32-byte rows keep the 768 KiB Fermi L2 model near 1 MiB.

Replacement (`Replacement`, defined and numbered as pycachesim defines and numbers them): on a hit
(`touch`), LRU and MRU move the way to the front, FIFO and RANDOM leave the order. The victim of a
fill (`victim`) is the back, or for RANDOM a uniformly drawn way of the set (valid or not). A fill
makes its way the front, except under MRU, which leaves the filled way at the back (`placed`): the
most recently filled line is the next victim unless a hit moves it to the front first. An
invalidated way is moved to the back so that it is reused first.

A cache of P partitions with S sets each maps line ``l`` to partition ``l % P`` and to set
``(l // P) % S`` inside it (address interleaving, then set indexing); the global set number is
``partition * S + set``.

The helpers that branch are inlined (`INLINE`) and end with `keep`; the straight-line list
update (`_relink`) is a plain call (measured faster). See `tuiprof.jit`: this is what keeps
Numba's atomic reference counting out of the per-access path.

A per-set array of tags scanned linearly (with per-way timestamps for LRU/FIFO) was measured
against this layout at 64 ways: 35-90 ns per access against 10-19 ns (Numba does not vectorise
the early-exit scan), so the hash chains stay for every associativity.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from tuiprof.jit import INLINE, KERNEL, keep, njit, popcount  # noqa: F401 (popcount: re-exported)


class Replacement(IntEnum):
    """A cache's replacement policy (the Arch's ``replacement``; pycachesim's numbering). The
    trial kernels take it as an int: Numba reads the members as compile-time constants."""

    FIFO = 0
    LRU = 1
    MRU = 2
    RANDOM = 3


FIFO, LRU, MRU, RANDOM = int(Replacement.FIFO), int(Replacement.LRU), int(Replacement.MRU), int(Replacement.RANDOM)

TAG_LO, TAG_HI, VALID, DIRTY, PREV, NEXT, HNEXT = 0, 1, 2, 3, 4, 5, 6
COLS = 8
_LO = np.int64(0xFFFFFFFF)
_FIB = np.uint64(0x9E3779B97F4A7C15)


@njit(**KERNEL)
def hash_bits(n_lines):
    """log2 of the per-copy hash table size for `n_lines` lines (load factor at most 1/2)."""
    bits = 2
    while (1 << bits) < 2 * n_lines:
        bits += 1
    return bits


@njit(**KERNEL)
def cache_alloc(n_sets, assoc, copies):
    """`copies` empty caches of `n_sets` sets (all partitions) x `assoc` ways:
    ``(meta, htab, hshift)``; copy c has rows from ``c * (n_sets * (assoc + 1))`` and hash
    buckets from ``c * (1 << (64 - hshift))``."""
    n = n_sets * assoc
    rows = n + n_sets
    bits = hash_bits(n)
    meta = np.empty((copies * rows, COLS), dtype=np.int32)
    htab = np.full(copies << bits, -1, dtype=np.int32)
    for c in range(copies):
        cache_reset(meta, c * rows, n_sets, assoc)
    return meta, htab, 64 - bits


@njit(**KERNEL)
def cache_reset(meta, row0, n_sets, assoc):
    """Invalidate every way of the copy at `row0`; each set's list runs sentinel, way 0 (front)
    .. way assoc-1 (back). The copy's hash buckets must be reset to -1 separately."""
    n = n_sets * assoc
    for s in range(n_sets):
        sent = row0 + n + s
        first = row0 + s * assoc
        last = first + assoc - 1
        for slot in range(first, last + 1):
            meta[slot, TAG_LO] = 0
            meta[slot, TAG_HI] = -1
            meta[slot, VALID] = 0
            meta[slot, DIRTY] = 0
            meta[slot, PREV] = slot - 1 if slot > first else sent
            meta[slot, NEXT] = slot + 1 if slot < last else sent
            meta[slot, HNEXT] = -1
        meta[sent, TAG_LO] = 0
        meta[sent, TAG_HI] = -1
        meta[sent, NEXT] = first
        meta[sent, PREV] = last


@njit(**INLINE)
def cache_set(line, partitions, sets):
    """Global set number of `line` (partition-major)."""
    if partitions == 1:
        g = line % sets
    else:
        g = (line % partitions) * sets + (line // partitions) % sets
    return g


@njit(**INLINE)
def hslot(line, hshift):
    """The hash bucket of `line`, relative to its copy's first bucket."""
    return np.int64((np.uint64(line) * _FIB) >> np.uint64(hshift))


@njit(**INLINE)
def get_mask(meta, slot, col):
    """The VALID or DIRTY chunk mask of `slot`, as a non-negative int64."""
    return np.int64(meta[slot, col]) & _LO


@njit(**INLINE)
def get_tag(meta, slot):
    """The line id held by `slot`, -1 when the way is invalid."""
    hi = np.int64(meta[slot, TAG_HI])
    lo = np.int64(meta[slot, TAG_LO]) & _LO
    keep(meta)
    return (hi << 32) | lo if hi >= 0 else np.int64(-1)


@njit(**INLINE)
def cache_find(meta, htab, hbase, hshift, line):
    """The slot holding `line` in the copy whose hash buckets start at `hbase`, or -1."""
    lo = np.int32(line & _LO)
    hi = np.int32(line >> 32)
    slot = np.int64(htab[hbase + hslot(line, hshift)])
    while slot >= 0 and (meta[slot, TAG_LO] != lo or meta[slot, TAG_HI] != hi):
        slot = np.int64(meta[slot, HNEXT])
    keep(meta)
    keep(htab)
    return slot


@njit(**KERNEL)
def _relink(meta, sent, slot, front):
    """Move `slot` to the front (most recent) or the back (next victim) of the set closed by
    sentinel row `sent`."""
    p = meta[slot, PREV]
    n = meta[slot, NEXT]
    meta[p, NEXT] = n
    meta[n, PREV] = p
    a = sent if front else meta[sent, PREV]  # insert between rows a and b
    b = meta[a, NEXT]
    meta[slot, PREV] = a
    meta[slot, NEXT] = b
    meta[b, PREV] = slot
    meta[a, NEXT] = slot


@njit(**INLINE)
def cache_touch(meta, sent, slot):
    """Make `slot` the front (most recent) of the set closed by sentinel row `sent`."""
    _relink(meta, sent, slot, True)


@njit(**INLINE)
def touch(meta, sent, slot, policy):
    """A hit on `slot` under `policy`: LRU and MRU make it the front, FIFO and RANDOM leave it."""
    if policy == LRU or policy == MRU:
        cache_touch(meta, sent, slot)


@njit(**INLINE)
def victim(meta, sent, first, policy, way):
    """The slot a fill of the set closed by `sent` replaces under `policy`: the back, or
    ``first + way`` under RANDOM (`way` drawn uniformly by the caller, `first` the set's first slot)."""
    if policy == RANDOM:
        slot = np.int64(first + way)
    else:
        slot = np.int64(meta[sent, PREV])
    return slot


@njit(**INLINE)
def placed(meta, sent, slot, policy):
    """After a fill of `slot` (which leaves it the front): under MRU, move it to the back."""
    if policy == MRU:
        _relink(meta, sent, slot, False)


@njit(**INLINE)
def _hremove(meta, htab, hbase, hshift, line, slot):
    """Unchain `slot` (which holds `line`) from its hash bucket."""
    b = hbase + hslot(line, hshift)
    p = np.int64(htab[b])
    if p == slot:
        htab[b] = meta[slot, HNEXT]
    else:
        while meta[p, HNEXT] != slot:
            p = np.int64(meta[p, HNEXT])
        meta[p, HNEXT] = meta[slot, HNEXT]
    keep(meta)
    keep(htab)


@njit(**INLINE)
def cache_fill(meta, htab, hbase, hshift, sent, line):
    """Put `line` (absent) in place of the set's victim (the back), as the front way.

    Returns ``(slot, evicted_line, evicted_dirty_mask)``; evicted_line is -1 when the victim way
    was invalid. The new line starts with no valid and no dirty chunks.
    """
    return cache_fill_slot(meta, htab, hbase, hshift, sent, line, np.int64(meta[sent, PREV]))


@njit(**INLINE)
def cache_fill_slot(meta, htab, hbase, hshift, sent, line, slot):
    """`cache_fill` in place of the way `slot` of the set closed by `sent` (`victim`'s choice)."""
    old = get_tag(meta, slot)
    old_dirty = get_mask(meta, slot, DIRTY)
    if old >= 0:
        _hremove(meta, htab, hbase, hshift, old, slot)
    else:
        old_dirty = 0
    b = hbase + hslot(line, hshift)
    meta[slot, TAG_LO] = np.int32(line & _LO)
    meta[slot, TAG_HI] = np.int32(line >> 32)
    meta[slot, VALID] = 0
    meta[slot, DIRTY] = 0
    meta[slot, HNEXT] = htab[b]
    htab[b] = slot
    cache_touch(meta, sent, slot)
    keep(meta)
    keep(htab)
    return slot, old, old_dirty


@njit(**INLINE)
def cache_invalidate(meta, htab, hbase, hshift, sent, slot):
    """Drop the line in `slot` (valid) and make the way the next victim of its set."""
    _hremove(meta, htab, hbase, hshift, get_tag(meta, slot), slot)
    meta[slot, TAG_LO] = 0
    meta[slot, TAG_HI] = -1
    meta[slot, VALID] = 0
    meta[slot, DIRTY] = 0
    _relink(meta, sent, slot, False)
    keep(meta)
    keep(htab)


@njit(**INLINE)
def cache_access_line(meta, htab, hshift, partitions, sets, policy, way, line):
    """A whole-line load on a single-copy cache under `policy` (the reference behaviour checked
    against pycachesim): True on a hit, else the line is filled in place of `victim` (`way`: the
    RANDOM draw, in ``[0, assoc)``)."""
    g = cache_set(line, partitions, sets)
    n_sets = partitions * sets
    sent = meta.shape[0] - n_sets + g
    slot = cache_find(meta, htab, 0, hshift, line)
    hit = slot >= 0
    if hit:
        touch(meta, sent, slot, policy)
    else:
        assoc = (meta.shape[0] - n_sets) // n_sets
        slot, _, _ = cache_fill_slot(meta, htab, 0, hshift, sent, line, victim(meta, sent, g * assoc, policy, way))
        placed(meta, sent, slot, policy)
        meta[slot, VALID] = -1  # all chunks
    keep(meta)
    keep(htab)
    return hit


@njit(**INLINE)
def cache_load_line(meta, htab, hshift, partitions, sets, lru, line):
    """`cache_access_line` under LRU (`lru`) or FIFO."""
    return cache_access_line(meta, htab, hshift, partitions, sets, LRU if lru else FIFO, 0, line)


@njit(**KERNEL)
def cache_load_stream(meta, htab, hshift, partitions, sets, policy, seed, lines):
    """`cache_access_line` over a stream of line ids; the hit flags. RANDOM draws its ways from
    Numba's generator seeded with `seed` (the same seed, the same victims)."""
    np.random.seed(seed)
    n_sets = partitions * sets
    assoc = (meta.shape[0] - n_sets) // n_sets
    hits = np.empty(lines.shape[0], dtype=np.bool_)
    for i in range(lines.shape[0]):
        way = np.random.randint(0, assoc) if policy == RANDOM else 0
        hits[i] = cache_access_line(meta, htab, hshift, partitions, sets, policy, way, lines[i])
    return hits


@njit(**INLINE)
def expand_sectors(m, cps, n_sectors):
    """Chunk mask `m` (int64 holding 32 bits) widened to whole sectors of `cps` chunks: any
    chunk touched marks its whole sector."""
    out = m
    if cps > 1:
        full = (np.int64(1) << cps) - 1
        out = np.int64(0)
        for j in range(n_sectors):
            sh = j * cps
            if (m >> sh) & full:
                out |= full << sh
    return out


@njit(**INLINE)
def full_sectors(f, cps, n_sectors):
    """The sectors of `cps` chunks all of whose chunks are set in chunk mask `f` (int64 holding
    32 bits): the sectors a store wrote entirely (those with no chunk missing)."""
    line = (np.int64(1) << (cps * n_sectors)) - 1
    return line & ~expand_sectors(line & ~f, cps, n_sectors)


@dataclass(frozen=True)
class CacheState:
    """A standalone cache (for tests and benchmarks): ``partitions`` x ``sets`` sets of
    ``assoc`` ways under a `Replacement` policy, driven by whole-line loads."""

    meta: np.ndarray
    htab: np.ndarray
    hshift: int
    sets: int
    assoc: int
    partitions: int
    policy: Replacement
    seed: int = 0
    """RANDOM's draws: each `run` starts Numba's generator from it."""

    @property
    def lru(self) -> bool:
        return self.policy == Replacement.LRU

    def find(self, line: int) -> int:
        return int(_find(self.meta, self.htab, self.hshift, line))

    def access(self, line: int) -> bool:
        """A whole-line load: True on a hit; on a miss the line is filled."""
        return bool(self.run(np.array([line], dtype=np.int64))[0])

    def run(self, lines: np.ndarray) -> np.ndarray:
        """Whole-line loads of every line id in `lines`, in order; a bool hit array."""
        return cache_load_stream(self.meta, self.htab, self.hshift, self.partitions, self.sets, int(self.policy),
                                 self.seed, np.ascontiguousarray(lines, dtype=np.int64))


@njit(**KERNEL)
def _find(meta, htab, hshift, line):
    return cache_find(meta, htab, 0, hshift, line)


def new_cache(sets: int, assoc: int, partitions: int = 1, lru: bool = True, *,
              policy: Replacement | None = None, seed: int = 0) -> CacheState:
    """An empty cache of `partitions` x `sets` sets of `assoc` ways under `policy` (without one:
    LRU, or FIFO when not `lru`)."""
    if sets < 1 or assoc < 1 or partitions < 1:
        raise ValueError("sets, assoc and partitions must be positive")
    meta, htab, hshift = cache_alloc(sets * partitions, assoc, 1)
    chosen = policy if policy is not None else (Replacement.LRU if lru else Replacement.FIFO)
    return CacheState(meta, htab, int(hshift), sets, assoc, partitions, chosen, seed)
