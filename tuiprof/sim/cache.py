"""Set-associative, sectored cache kernels (Numba), used by every level of the trial.

One cache is eight flat arrays (`CacheState`), so that a kernel holds no Python objects:

- ``tag`` int64 [N]: line id held by slot ``set * assoc + way``, -1 when the way is invalid
- ``valid`` / ``dirty`` uint32 [N]: per-line masks at 32-byte *chunk* granularity (bit k = bytes
  ``32k .. 32k+31`` of the line); a sector of S bytes is S/32 adjacent bits set together
- ``link`` int32 [2N]: doubly linked recency list per set (``2*slot`` previous, ``2*slot+1`` next)
- ``ends`` int32 [2 * sets]: head (most recently used or inserted) and tail (victim) of each set
- ``htab`` int32 [H]: open-addressing hash table (linear probing, backward-shift deletion) from
  line id to slot, so that a lookup costs O(1) whatever the associativity (Volta+ L1s have
  hundreds of ways; a tag scan would dominate the trial)

Replacement: LRU moves a slot to the head on every hit and fill; FIFO only on fill. The victim is
always the tail; invalidated ways are moved to the tail so that they are reused first.

A cache of P partitions with S sets each maps line ``l`` to partition ``l % P`` and to set
``(l // P) % S`` inside it (address interleaving, then set indexing); the global set number is
``partition * S + set``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tuiprof.sim._numba import KERNEL, njit

_FIB = np.uint64(0x9E3779B97F4A7C15)


def hash_bits(n_lines: int) -> int:
    """log2 of the hash table size for `n_lines` lines (load factor at most 1/2)."""
    bits = 2
    while (1 << bits) < 2 * n_lines:
        bits += 1
    return bits


@dataclass(frozen=True)
class CacheState:
    """The arrays of one cache (see the module docstring). Build with `new_cache`."""

    tag: np.ndarray
    valid: np.ndarray
    dirty: np.ndarray
    link: np.ndarray
    ends: np.ndarray
    htab: np.ndarray
    sets: int
    """Sets per partition."""
    assoc: int
    partitions: int
    lru: bool

    @property
    def hshift(self) -> int:
        return 64 - int(self.htab.shape[0]).bit_length() + 1

    def set_of(self, line: int) -> int:
        return int(cache_set(line, self.partitions, self.sets))

    def find(self, line: int) -> int:
        return int(cache_find(self.tag, self.htab, self.hshift, line))

    def access(self, line: int) -> bool:
        """A whole-line load: True on a hit; on a miss the line is filled (LRU/FIFO victim)."""
        return bool(cache_load_line(self.tag, self.valid, self.dirty, self.link, self.ends, self.htab,
                                    self.hshift, self.partitions, self.sets, self.assoc, self.lru, line))

    def run(self, lines: np.ndarray) -> np.ndarray:
        """Whole-line loads of every line id in `lines`, in order; a bool hit array."""
        return cache_load_stream(self.tag, self.valid, self.dirty, self.link, self.ends, self.htab,
                                 self.hshift, self.partitions, self.sets, self.assoc, self.lru,
                                 np.ascontiguousarray(lines, dtype=np.int64))


def new_cache(sets: int, assoc: int, partitions: int = 1, lru: bool = True) -> CacheState:
    """An empty cache of `partitions` x `sets` sets of `assoc` ways (sets a power of two)."""
    n_sets = max(sets * partitions, 1)
    n = n_sets * assoc if sets > 0 else 1
    bits = hash_bits(n)
    c = CacheState(tag=np.empty(n, np.int64), valid=np.empty(n, np.uint32), dirty=np.empty(n, np.uint32),
                   link=np.empty(2 * n, np.int32), ends=np.empty(2 * n_sets, np.int32),
                   htab=np.empty(1 << bits, np.int32), sets=sets, assoc=assoc, partitions=partitions, lru=lru)
    cache_reset(c.tag, c.valid, c.dirty, c.link, c.ends, c.htab, max(assoc, 1))
    return c


@njit(**KERNEL)
def cache_reset(tag, valid, dirty, link, ends, htab, assoc):
    """Invalidate every way; each set's list runs way 0 (head) .. way assoc-1 (tail)."""
    tag[:] = -1
    valid[:] = 0
    dirty[:] = 0
    htab[:] = -1
    n_sets = ends.shape[0] // 2
    for s in range(n_sets):
        first = s * assoc
        last = first + assoc - 1
        for slot in range(first, last + 1):
            link[2 * slot] = slot - 1 if slot > first else -1
            link[2 * slot + 1] = slot + 1 if slot < last else -1
        ends[2 * s] = first
        ends[2 * s + 1] = last


@njit(**KERNEL)
def cache_set(line, partitions, sets):
    """Global set number of `line` (partition-major)."""
    if partitions == 1:
        return line & (sets - 1)
    return (line % partitions) * sets + ((line // partitions) & (sets - 1))


@njit(**KERNEL)
def _hslot(line, hshift):
    return np.int64((np.uint64(line) * _FIB) >> np.uint64(hshift))


@njit(**KERNEL)
def cache_find(tag, htab, hshift, line):
    """The slot holding `line`, or -1."""
    hmask = htab.shape[0] - 1
    i = _hslot(line, hshift)
    while True:
        s = htab[i]
        if s < 0:
            return -1
        if tag[s] == line:
            return s
        i = (i + 1) & hmask


@njit(**KERNEL)
def _hinsert(htab, hshift, line, slot):
    hmask = htab.shape[0] - 1
    i = _hslot(line, hshift)
    while htab[i] >= 0:
        i = (i + 1) & hmask
    htab[i] = slot


@njit(**KERNEL)
def _hremove(tag, htab, hshift, line):
    """Delete `line` (present) from the table, shifting later entries of its cluster back."""
    hmask = htab.shape[0] - 1
    i = _hslot(line, hshift)
    while tag[htab[i]] != line:
        i = (i + 1) & hmask
    j = i
    while True:
        j = (j + 1) & hmask
        s = htab[j]
        if s < 0:
            break
        k = _hslot(tag[s], hshift)
        # The entry at j may move to i unless its home k lies cyclically in (i, j].
        if i <= j:
            stays = i < k <= j
        else:
            stays = k > i or k <= j
        if not stays:
            htab[i] = s
            i = j
    htab[i] = -1


@njit(**KERNEL)
def _unlink(link, ends, s, slot):
    p = link[2 * slot]
    n = link[2 * slot + 1]
    if p >= 0:
        link[2 * p + 1] = n
    else:
        ends[2 * s] = n
    if n >= 0:
        link[2 * n] = p
    else:
        ends[2 * s + 1] = p


@njit(**KERNEL)
def cache_touch(link, ends, s, slot):
    """Make `slot` the most recent of set `s`."""
    h = ends[2 * s]
    if h == slot:
        return
    _unlink(link, ends, s, slot)
    h = ends[2 * s]
    link[2 * slot] = -1
    link[2 * slot + 1] = h
    if h >= 0:
        link[2 * h] = slot
    else:
        ends[2 * s + 1] = slot
    ends[2 * s] = slot


@njit(**KERNEL)
def _to_tail(link, ends, s, slot):
    t = ends[2 * s + 1]
    if t == slot:
        return
    _unlink(link, ends, s, slot)
    t = ends[2 * s + 1]
    link[2 * slot] = t
    link[2 * slot + 1] = -1
    if t >= 0:
        link[2 * t + 1] = slot
    else:
        ends[2 * s] = slot
    ends[2 * s + 1] = slot


@njit(**KERNEL)
def cache_fill(tag, valid, dirty, link, ends, htab, hshift, s, line):
    """Put `line` (absent) into set `s` in place of the victim (the tail), as the most recent.

    Returns ``(slot, evicted_line, evicted_dirty_mask)``; evicted_line is -1 when the victim way
    was invalid. The new line starts with no valid and no dirty chunks.
    """
    slot = ends[2 * s + 1]
    old = tag[slot]
    old_dirty = np.uint32(0)
    if old >= 0:
        old_dirty = dirty[slot]
        _hremove(tag, htab, hshift, old)
    tag[slot] = line
    valid[slot] = 0
    dirty[slot] = 0
    _hinsert(htab, hshift, line, slot)
    cache_touch(link, ends, s, slot)
    return slot, old, old_dirty


@njit(**KERNEL)
def cache_invalidate(tag, valid, dirty, link, ends, htab, hshift, s, slot):
    """Drop the line in `slot` (valid) and make the way the next victim of set `s`."""
    _hremove(tag, htab, hshift, tag[slot])
    tag[slot] = -1
    valid[slot] = 0
    dirty[slot] = 0
    _to_tail(link, ends, s, slot)


@njit(**KERNEL)
def cache_load_line(tag, valid, dirty, link, ends, htab, hshift, partitions, sets, assoc, lru, line):
    """A whole-line load (the reference behaviour checked against pycachesim): hit or fill."""
    s = cache_set(line, partitions, sets)
    slot = cache_find(tag, htab, hshift, line)
    if slot >= 0:
        if lru:
            cache_touch(link, ends, s, slot)
        return True
    slot, _, _ = cache_fill(tag, valid, dirty, link, ends, htab, hshift, s, line)
    valid[slot] = np.uint32(0xFFFFFFFF)
    return False


@njit(**KERNEL)
def cache_load_stream(tag, valid, dirty, link, ends, htab, hshift, partitions, sets, assoc, lru, lines):
    """`cache_load_line` over a stream of line ids; the hit flags."""
    hits = np.empty(lines.shape[0], dtype=np.bool_)
    for i in range(lines.shape[0]):
        hits[i] = cache_load_line(tag, valid, dirty, link, ends, htab, hshift, partitions, sets, assoc, lru,
                                  lines[i])
    return hits


@njit(**KERNEL)
def popcount(x):
    """Set bits of a uint32."""
    x = np.uint32(x)
    x = x - ((x >> np.uint32(1)) & np.uint32(0x55555555))
    x = (x & np.uint32(0x33333333)) + ((x >> np.uint32(2)) & np.uint32(0x33333333))
    x = (x + (x >> np.uint32(4))) & np.uint32(0x0F0F0F0F)
    return np.int64((x * np.uint32(0x01010101)) >> np.uint32(24))


@njit(**KERNEL)
def expand_sectors(m, cps, n_sectors):
    """Chunk mask `m` widened to whole sectors of `cps` chunks (any chunk touched -> its sector)."""
    if cps == 1:
        return np.uint32(m)
    full = np.uint32((1 << cps) - 1)
    out = np.uint32(0)
    for j in range(n_sectors):
        sh = np.uint32(j * cps)
        if (m >> sh) & full:
            out |= full << sh
    return out
