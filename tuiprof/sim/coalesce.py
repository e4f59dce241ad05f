"""Coalescing: each warp access becomes L1 requests, one per distinct L1 line its lanes touch.

Active lane i touches bytes ``[addr_i, addr_i + bytes)`` (an unaligned lane may straddle lines).
A request carries the line id (``address // l1.line``), a *chunk mask*: bit k set when the warp
touches bytes ``32k .. 32k+31`` of the line (32 B is the sector size of every sectored NVIDIA
cache and the DRAM transaction size; a line holds at most 32 chunks), and a *full mask*: bit k set
when the warp's lanes together cover all 32 bytes of chunk k. A store makes a sector readable only
where it wrote all of it (the simulator's partial-store rule, `tuiprof.sim.reference`). Requests
of one warp access are in ascending line order. Only global and local ops are coalesced: shared-memory
accesses never reach the caches and produce no requests.

Every request also carries a *dense line id* (``req_id``): the index of its line among the
trace's distinct lines, so that the replay kernel keeps caches of small integers and finds an L2
line with one array lookup instead of hashing 64-bit addresses (`dense_ids`).

This runs once per (trace, L1 line size); every trial reuses the result.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from tuiprof.jit import KERNEL, njit, plain_kernel, popcount

CHUNK = 32
"""Bytes per chunk: the granularity of request masks, sector valid bits and DRAM transactions."""
_FIB = np.uint64(0x9E3779B97F4A7C15)


@dataclass(frozen=True)
class Coalesced:
    """L1 requests of every warp access (CSR) and per-op coalescing statistics.

    - ``req_off`` int64 [R+1]: requests of access r are ``req_off[r]:req_off[r+1]``
    - ``req_mask`` [Q]: 32 B chunks of the line touched by the warp (`mask_dtype`: uint8 for lines
      of at most 8 chunks, 256 B, else uint32)
    - ``req_full`` [Q]: the chunks of ``req_mask`` whose 32 bytes the warp covers entirely (same dtype)
    - ``req_id`` int32 [Q] / ``lines`` int64 [N]: dense line ids; ``lines[req_id]`` is each
      request's L1 line id (``address // line``), ids in order of first appearance, N distinct
      lines. The line ids themselves are not kept per request (8 bytes a request, 190 MB on
      spmv-b128): `request_lines` gathers them.
    - ``op_accesses`` / ``op_requests`` / ``op_sectors`` int64 [n_ops]: warp accesses, L1
      requests and 32 B sectors requested, per op (0 for shared-memory ops)
    """

    line: int
    req_off: np.ndarray
    req_mask: np.ndarray
    req_full: np.ndarray
    req_id: np.ndarray
    lines: np.ndarray
    op_accesses: np.ndarray
    op_requests: np.ndarray
    op_sectors: np.ndarray

    @property
    def n_requests(self) -> int:
        return int(self.req_id.shape[0])

    def request_lines(self) -> np.ndarray:
        """The L1 line id of each request, int64 [Q] (a new array: ``lines[req_id]``)."""
        return self.lines[self.req_id]

    def sectors_per_request(self) -> np.ndarray:
        """Mean 32 B sectors per L1 request, per op (nan for ops without requests)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.op_requests > 0, self.op_sectors / np.maximum(self.op_requests, 1), np.nan)

    def requests_per_access(self) -> np.ndarray:
        """Mean L1 requests (lines) per warp access, per op (nan for ops without cached accesses)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.op_accesses > 0, self.op_requests / np.maximum(self.op_accesses, 1), np.nan)


def coalesce(op: np.ndarray, mask: np.ndarray, addr: np.ndarray, op_bytes: np.ndarray,
             op_cached: np.ndarray, line: int) -> Coalesced:
    """Coalesce warp accesses (``op`` int32 [R], ``mask`` uint32 [R], ``addr`` uint64 [R, 32])
    into requests for lines of `line` bytes (a power of two, 32 .. 1024)."""
    if line < CHUNK or line > 32 * CHUNK or line & (line - 1):
        raise ValueError(f"line size {line} B is not a power of two in {CHUNK}..{32 * CHUNK}")
    n_ops = op_bytes.shape[0]
    args = (np.ascontiguousarray(op, np.int32), np.ascontiguousarray(mask, np.uint32),
            np.ascontiguousarray(addr, np.uint64), np.ascontiguousarray(op_bytes, np.int64),
            np.ascontiguousarray(op_cached, np.uint8), (line // CHUNK).bit_length() - 1)
    req_off = np.empty(args[0].shape[0] + 1, dtype=np.int64)
    n = _count_requests(*args, req_off)
    mt = mask_dtype(line)
    req_line, req_mask, req_full = np.empty(n, np.int64), np.empty(n, mt), np.empty(n, mt)
    acc, reqs, secs = (np.zeros(n_ops, np.int64) for _ in range(3))
    _fill_requests(*args, req_off, req_line, req_mask, req_full, acc, reqs, secs)
    req_id, lines = dense_ids(req_line)
    return Coalesced(line, req_off, req_mask, req_full, req_id, lines, acc, reqs, secs)


def mask_dtype(line: int) -> type:
    """The dtype of the chunk masks of `line`-byte lines: uint8 up to 8 chunks (every preset's
    128 B L1 line: a quarter of uint32's bytes, 71 MB less on spmv-b128's 23.7M requests per mask
    array), uint32 for longer lines (up to 32 chunks)."""
    return np.uint8 if line // CHUNK <= 8 else np.uint32


def numpy_owned(a: np.ndarray) -> np.ndarray:
    """A copy of `a` (an array a kernel allocated) in numpy's memory. Numpy asks Linux for
    transparent huge pages for arrays of 4 MiB or more, Numba's allocator does not; the replay
    kernel reads the request arrays at scattered offsets, and on 4 KiB pages nearly every access
    misses the TLB (a trial of spmv-u on tesla-c2050: 1.09x faster on huge pages)."""
    return np.array(a, copy=True)


def coalesce_trace(trace, line: int) -> Coalesced:
    """`coalesce` over a `Trace`'s accesses and op table."""
    op_bytes = np.array([o.bytes for o in trace.ops], dtype=np.int64)
    cached = np.array([o.is_cached for o in trace.ops], dtype=np.uint8)
    if trace.packed is None:
        return coalesce(trace.op, trace.mask, trace.addr, op_bytes, cached, line)
    # A loaded trace's `addr` holds the accesses it did not pack (every cached one among them):
    # coalesce those, then give the packed (shared-memory) accesses their zero requests.
    unpacked = np.ones(trace.n_accesses, dtype=bool)
    unpacked[trace.packed.rows] = False
    c = coalesce(trace.op[unpacked], trace.mask[unpacked], trace.addr, op_bytes, cached, line)
    req_off = np.empty(trace.n_accesses + 1, dtype=np.int64)
    req_off[0] = 0
    req_off[1:] = c.req_off[np.cumsum(unpacked)]
    return dataclasses.replace(c, req_off=req_off)


def dense_ids(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(ids int32 [Q], distinct int64 [N])`` with ``distinct[ids] == keys`` (non-negative int64
    keys), ids numbered in order of first appearance: one pass with an open-addressing hash table
    that doubles at half load (`np.unique` sorts, 10-20x slower on a SpMV trace). Both arrays are
    numpy's (`numpy_owned`); the ids are written in place, never copied (4 bytes a key)."""
    ids = np.empty(keys.shape[0], dtype=np.int32)
    return ids, numpy_owned(_dense_ids(np.ascontiguousarray(keys, np.int64), ids))


@njit(**KERNEL)
def _dense_ids(keys, ids):
    """`dense_ids`' pass: fills `ids`, returns the distinct keys."""
    n = keys.shape[0]
    bits = 10
    table = np.full(1 << bits, -1, dtype=np.int32)  # id of the key in each slot, -1: empty
    distinct = np.empty(256, dtype=np.int64)
    count = 0
    last_key = np.int64(-1)
    last_id = np.int32(-1)
    for j in range(n):
        x = keys[j]
        if x == last_key:  # runs of requests to one line are common
            ids[j] = last_id
            continue
        h = (np.uint64(x) * _FIB) >> np.uint64(64 - bits)
        mask = np.uint64((1 << bits) - 1)
        while table[h] >= 0 and distinct[table[h]] != x:
            h = (h + np.uint64(1)) & mask
        if table[h] < 0:
            if count == distinct.shape[0]:
                distinct = _resized(distinct, 2 * count)
            distinct[count] = x
            table[h] = count
            count += 1
            if 2 * count > (1 << bits):  # rehash into a table twice as large
                bits += 1
                table = np.full(1 << bits, -1, dtype=np.int32)
                mask = np.uint64((1 << bits) - 1)
                for i in range(count):
                    g = (np.uint64(distinct[i]) * _FIB) >> np.uint64(64 - bits)
                    while table[g] >= 0:
                        g = (g + np.uint64(1)) & mask
                    table[g] = i
                last_id = np.int32(count - 1)
            else:
                last_id = table[h]
        else:
            last_id = table[h]
        last_key = x
        ids[j] = last_id
    return _resized(distinct, count)


@plain_kernel
def _resized(a, n):
    """A new int64 array of `n` entries that starts with `a`'s first ``min(n, len(a))`` (a loop:
    a slice copy compiles 20-odd error-message helpers, seconds of a first run)."""
    out = np.empty(n, dtype=np.int64)
    for i in range(min(n, a.shape[0])):
        out[i] = a[i]
    return out


@plain_kernel
def access_lines(row, m, nbytes, cshift, tl, tm, tf, at, tc, tb):
    """Distinct lines (ascending, into ``tl`` from index `at`), chunk masks (``tm``) and
    full-chunk masks (``tf``) of one warp access.

    ``row``: 32 lane addresses (uint64); ``m``: active mask; ``cshift``: log2(chunks per line).
    Returns the number of lines. The lanes' bytes are first gathered per 32 B chunk (``tc``: chunk
    numbers, ``tb``: the chunk's bytes touched, one bit each). ``tc`` and ``tb`` need room for
    32 * (nbytes // 32 + 2) entries, the outputs for as many lines from `at`.
    """
    n = 0
    top = np.uint64(0xFFFFFFFFFFFFFFFF)
    span = np.uint64(nbytes - 1)
    for i in range(32):
        if not (m >> i) & 1:
            continue
        a = row[i]
        e = top if a > top - span else a + span
        c0 = np.int64(a >> np.uint64(5))
        c1 = np.int64(e >> np.uint64(5))
        for c in range(c0, c1 + 1):
            lo = np.int64(a & np.uint64(31)) if c == c0 else 0
            hi = np.int64(e & np.uint64(31)) if c == c1 else 31
            bits = np.uint32(((np.uint64(2) << np.uint64(hi)) - (np.uint64(1) << np.uint64(lo))) & np.uint64(0xFFFFFFFF))
            if n > 0 and tc[n - 1] == c:
                tb[n - 1] |= bits
            else:
                tc[n] = c
                tb[n] = bits
                n += 1
    for i in range(1, n):  # insertion sort: O(n) for the usual ascending lanes
        kc = tc[i]
        kb = tb[i]
        j = i - 1
        while j >= 0 and tc[j] > kc:
            tc[j + 1] = tc[j]
            tb[j + 1] = tb[j]
            j -= 1
        tc[j + 1] = kc
        tb[j + 1] = kb
    cmask = (1 << cshift) - 1
    k = 0
    i = 0
    while i < n:
        c = tc[i]
        b = tb[i]
        i += 1
        while i < n and tc[i] == c:  # equal chunks sort together: merge their bytes
            b |= tb[i]
            i += 1
        ln = c >> cshift
        bit = np.uint32(1) << np.uint32(c & cmask)
        if k == 0 or tl[at + k - 1] != ln:
            tl[at + k] = ln
            tm[at + k] = 0
            tf[at + k] = 0
            k += 1
        tm[at + k - 1] |= bit
        if b == np.uint32(0xFFFFFFFF):
            tf[at + k - 1] |= bit
    return k


@njit(**KERNEL)
def _count_requests(op, mask, addr, op_bytes, op_cached, cshift, req_off):
    """Pass 1 of coalescing: ``req_off`` [R+1] (the requests of access r are ``req_off[r] ..
    req_off[r+1]``), so that pass 2 writes into arrays of their exact size (no growing, no
    copies); returns the request count."""
    room = 32 * (128 // 32 + 2)
    tl = np.empty(room, dtype=np.int64)
    tm = np.empty(room, dtype=np.uint8)  # pass 2's dtype for 128 B lines, so that `access_lines` compiles
    tf = np.empty(room, dtype=np.uint8)  # once (0.35 s of a first run); only the count is read here
    tc = np.empty(room, dtype=np.int64)
    tb = np.empty(room, dtype=np.uint32)
    pos = 0
    req_off[0] = 0
    for r in range(op.shape[0]):
        o = op[r]
        if op_cached[o]:
            pos += access_lines(addr[r], mask[r], op_bytes[o], cshift, tl, tm, tf, 0, tc, tb)
        req_off[r + 1] = pos
    return pos


@njit(**KERNEL)
def _fill_requests(op, mask, addr, op_bytes, op_cached, cshift, req_off, lines, masks, fulls, acc, reqs, secs):
    """Pass 2 of coalescing: every request's line, chunk mask and full-chunk mask, and the per-op
    warp accesses, requests and sectors."""
    room = 32 * (128 // 32 + 2)
    tc = np.empty(room, dtype=np.int64)
    tb = np.empty(room, dtype=np.uint32)
    for r in range(op.shape[0]):
        o = op[r]
        if op_cached[o]:
            pos = req_off[r]
            n = req_off[r + 1] - pos
            access_lines(addr[r], mask[r], op_bytes[o], cshift, lines, masks, fulls, pos, tc, tb)
            acc[o] += 1
            reqs[o] += n
            for k in range(pos, pos + n):
                secs[o] += popcount(masks[k])
    return 0
