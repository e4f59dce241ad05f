"""Decoding the probe buffers of instrumented PTX into warp accesses (layout in
`tuiprof.ptx.instrument`), for the kernel-file GPU collector and for whole programs (whose host
runtime writes the same buffers to a record file, `read_record_file`).

Three steps, each checkable on its own:

1. `check_regions`: every snapshot warp's records fit its region (else the counting and the
   recording runs took different paths, and records were lost: an error, never a silent gap);
2. `decode_words`: the per-warp word regions -> records (site word, mask, 32 lane addresses with
   their space tags), in program order per warp;
3. `to_accesses`: site ids -> StaticOp ids, space tags stripped, local addresses laid out as the
   emulator lays them out (per warp, lane-interleaved 4-byte words), so that both collectors give
   the same addresses for the same kernel.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tuiprof.errors import TuiprofError
from tuiprof.jit import KERNEL, njit
from tuiprof.ptx.instrument import CTA_WORDS, LOCAL_TAG, MAX_TAG, SHARED_TAG, Site
from tuiprof.trace.data import LANES, CtaRecords, Launch, Provenance, Snapshot, SourceFile, Space, StaticOp, Trace

LOCAL_TRACE_BASE = 0x7E00_0000_0000
"""Where local-memory addresses are laid out in traces, as the emulator lays them out (its
constant of the same name; tests/gpu/test_instrument_emu.py checks both agree): each warp has a frame
of ``words x 128`` bytes (``words`` 4-byte words of local memory per thread) at ``BASE + (c * W +
w) * words * 128`` for warp w of CTA c, where an access of ``size`` bytes per lane at per-thread
offset ``a`` of lane l lands at ``((a // size) * 32 + l) * size + a % size``: the lanes' elements
side by side, the interleaving of CUDA local memory, so that a warp's same-offset accesses
coalesce."""

LOCAL_FRAME_PAD_WORDS = 4
"""Words the emulator adds to each thread's local frame in the trace layout (its run.py:
``ceil(local bytes / 4) + 4``); the same here, so both backends lay local memory out alike."""

SPACE_GLOBAL, SPACE_SHARED, SPACE_LOCAL = 0, 1, 2


def local_frame_words(local_bytes: int) -> int:
    """Words per thread of a warp's local frame in traces, for `local_bytes` of local memory."""
    return -(-int(local_bytes) // 4) + LOCAL_FRAME_PAD_WORDS


class RecordsError(TuiprofError):
    """Probe buffers that cannot be decoded: lost records, a damaged record file."""


@dataclass(frozen=True)
class Records:
    """Decoded probe records of the snapshot warps (``R`` records, ``W`` warps).

    - ``warp_offsets`` int64 [W+1]: records of warp w are ``warp_offsets[w]:warp_offsets[w+1]``
    - ``site`` int32 [R], ``tag`` int32 [R]: site id and module tag
    - ``mask`` uint32 [R]: active lanes
    - ``addr`` uint64 [R, 32]: lane addresses with their space tags (0 for inactive lanes)
    """

    warp_offsets: np.ndarray
    site: np.ndarray
    tag: np.ndarray
    mask: np.ndarray
    addr: np.ndarray

    @property
    def n_records(self) -> int:
        return int(self.site.shape[0])


@dataclass(frozen=True)
class Accesses:
    """Warp accesses in trace form (see `tuiprof.trace.data.Trace`), plus per op how many of its
    accesses resolved to global, shared and local memory (generic ops may go to any)."""

    warp_offsets: np.ndarray
    op: np.ndarray
    mask: np.ndarray
    addr: np.ndarray
    op_space: np.ndarray


def check_regions(woff: np.ndarray, used: np.ndarray) -> None:
    """Raise RecordsError unless each warp's used words fit its region ``woff[w]:woff[w+1]``."""
    woff = np.asarray(woff, np.uint64)
    used = np.asarray(used, np.uint64)
    if woff.ndim != 1 or used.ndim != 1 or woff.shape[0] != used.shape[0] + 1:
        raise RecordsError("probe buffers disagree in size (region offsets vs warp counters)",
                           "the record file is damaged; record again")
    if used.shape[0] and np.any(np.diff(woff.astype(np.int64)) < 0):
        raise RecordsError("probe buffer regions are not in order", "the record file is damaged; record again")
    cap = np.diff(woff.astype(np.int64))
    over = np.flatnonzero(used.astype(np.int64) > cap)
    if over.size:
        w = int(over[0])
        raise RecordsError(f"{over.size} snapshot warps recorded more than the counting run announced "
                           f"(warp {w}: {int(used[w])} words for {int(cap[w])}); their last records were lost",
                           "the kernel took other paths in the recording run than in the counting run "
                           "(its work depends on timing, or on memory the first run changed); make the "
                           "launch deterministic, or profile it with --backend emu")


@njit(**KERNEL)
def _count(words, woff, used):
    """(records, error warp or -1, error code) of the regions: 1 truncated record."""
    n = 0
    for w in range(used.shape[0]):
        p = np.int64(woff[w])
        end = p + np.int64(used[w])
        while p < end:
            head = words[p]
            mask = np.uint32(head & np.uint64(0xFFFFFFFF))
            sw = np.uint32(head >> np.uint64(32))
            k = 0
            m = mask
            while m:
                k += 1
                m &= m - np.uint32(1)
            if k == 0:
                return n, w, 2
            if sw & np.uint32(0x80000000):
                size = 2 + (k + 1) // 2
            else:
                size = 1 + k
            if p + size > end:
                return n, w, 1
            p += size
            n += 1
    return n, -1, 0


@njit(**KERNEL)
def _decode(words, woff, used, out_off, site, tag, mask, addr):
    r = 0
    for w in range(used.shape[0]):
        out_off[w] = r
        p = np.int64(woff[w])
        end = p + np.int64(used[w])
        while p < end:
            head = words[p]
            m = np.uint32(head & np.uint64(0xFFFFFFFF))
            sw = np.uint32(head >> np.uint64(32))
            mask[r] = m
            site[r] = np.int32(sw & np.uint32(0x7FFFFF))
            tag[r] = np.int32((sw >> np.uint32(23)) & np.uint32(0xFF))
            k = 0
            if sw & np.uint32(0x80000000):
                base = words[p + 1]
                for lane in range(32):
                    if (m >> np.uint32(lane)) & np.uint32(1):
                        wd = words[p + 2 + (k >> 1)]
                        half = np.uint32((wd >> np.uint64(32 * (k & 1))) & np.uint64(0xFFFFFFFF))
                        delta = np.int64(np.int32(half))
                        addr[r, lane] = base + np.uint64(delta)
                        k += 1
                p += 2 + (k + 1) // 2
            else:
                for lane in range(32):
                    if (m >> np.uint32(lane)) & np.uint32(1):
                        addr[r, lane] = words[p + 1 + k]
                        k += 1
                p += 1 + k
            r += 1
    out_off[used.shape[0]] = r
    return r


def decode_words(words: np.ndarray, woff: np.ndarray, used: np.ndarray) -> Records:
    """The records of every warp region (see the module docstring); raises RecordsError on lost
    or truncated records."""
    words = np.ascontiguousarray(words, dtype=np.uint64)
    woff = np.ascontiguousarray(woff, dtype=np.uint64)
    used = np.ascontiguousarray(used, dtype=np.uint64)
    check_regions(woff, used)
    if woff.shape[0] and int(woff[-1]) > words.shape[0]:
        raise RecordsError(f"the record buffer holds {words.shape[0]} words, the regions need {int(woff[-1])}",
                           "the record file is damaged; record again")
    n, bad, code = _count(words, woff, used)
    if bad >= 0:
        what = "a record runs past the end of its region" if code == 1 else "a record has an empty mask"
        raise RecordsError(f"snapshot warp {bad}: {what}", "the probe buffers are damaged; record again")
    out_off = np.zeros(used.shape[0] + 1, np.int64)
    site = np.zeros(n, np.int32)
    tag = np.zeros(n, np.int32)
    mask = np.zeros(n, np.uint32)
    addr = np.zeros((n, LANES), np.uint64)
    _decode(words, woff, used, out_off, site, tag, mask, addr)
    return Records(out_off, site, tag, mask, addr)


def site_to_op(sites: tuple[Site, ...], ops: tuple[tuple[str, int, StaticOp], ...]) -> np.ndarray:
    """int32 [n sites]: the StaticOp id of each site (`tuiprof.ptx.ops.static_ops` triples of the
    launched kernel), -1 for sites outside that kernel and the functions it calls."""
    by_index: dict[tuple[str, int], list[int]] = {}
    for fn, index, op in ops:
        by_index.setdefault((fn, index), []).append(op.id)
    out = np.full(len(sites), -1, np.int32)
    for i, s in enumerate(sites):
        ids = by_index.get((s.function, s.index))
        if ids is not None and s.part < len(ids):
            out[i] = ids[s.part]
    return out


def to_accesses(rec: Records, site_ops: np.ndarray | Mapping[int, np.ndarray], n_ops: int, *, cta_ids: np.ndarray,
                warps_per_cta: int, local_words: int, op_bytes: np.ndarray | None = None, tag: int = 0) -> Accesses:
    """Records -> warp accesses of a kernel: op ids from `site_ops` (`site_to_op` of the module
    with tag `tag`, or tag -> such a map when several modules' code runs: device functions of
    other translation units), space tags stripped, local addresses laid out as
    `LOCAL_TRACE_BASE` says with `local_words` 4-byte words per thread and each op's
    `op_bytes` per lane (default 4) (the words raised to cover the
    largest local offset seen). `cta_ids` are the snapshot's linear CTA ids; warp w of the
    records is warp ``w % warps_per_cta`` of CTA ``cta_ids[w // warps_per_cta]``. Records of a
    module without a map, or of sites outside the kernel, raise RecordsError."""
    if not 0 <= tag <= MAX_TAG:
        raise RecordsError(f"module tag {tag} out of range", "please report it")
    maps = dict(site_ops) if isinstance(site_ops, Mapping) else {tag: site_ops}
    n_w = rec.warp_offsets.shape[0] - 1
    if n_w != cta_ids.shape[0] * warps_per_cta:
        raise RecordsError(f"{n_w} warp regions for {cta_ids.shape[0]} snapshot CTAs of {warps_per_cta} warps",
                           "the probe buffers do not match the launch; record again")
    op = np.zeros(rec.n_records, np.int32)
    for t in np.unique(rec.tag).tolist():
        rows = rec.tag == t
        m = maps.get(int(t))
        if m is None:
            raise RecordsError(f"records of module {t} in a launch of module {tag}",
                               "a device function of a translation unit tuiprof has no table for was probed; "
                               "see docs/gpu.md for what whole programs support")
        sites = rec.site[rows]
        if sites.max() >= m.shape[0] or np.any(m[sites] < 0):
            raise RecordsError("a record names a memory access outside the launched kernel",
                               "the instrumented PTX and the site table do not match; rebuild")
        op[rows] = m[sites]
    raw = rec.addr
    tags = raw & np.uint64(SHARED_TAG | LOCAL_TAG)
    addr = raw & ~np.uint64(SHARED_TAG | LOCAL_TAG)
    is_local = tags == np.uint64(LOCAL_TAG)
    is_shared = tags == np.uint64(SHARED_TAG)
    lanes_on = ((rec.mask[:, None] >> np.arange(LANES, dtype=np.uint32)[None, :]) & np.uint32(1)).astype(bool)
    if np.any(is_local):
        top = int(addr[is_local].max()) + 1
        words = max(int(local_words), -(-top // 4))
        warp_of = np.repeat(np.arange(n_w, dtype=np.int64), np.diff(rec.warp_offsets))
        cta = cta_ids[warp_of // warps_per_cta].astype(np.uint64)
        w = (warp_of % warps_per_cta).astype(np.uint64)
        frame = np.uint64(LOCAL_TRACE_BASE) + (cta * np.uint64(warps_per_cta) + w) * np.uint64(words * 128)
        size = (np.full(op.shape[0], 4, np.int64) if op_bytes is None else
                np.asarray(op_bytes, np.int64)[op]).astype(np.uint64)[:, None]
        lane = np.arange(LANES, dtype=np.uint64)[None, :]
        laid = frame[:, None] + ((addr // size) * np.uint64(LANES) + lane) * size + addr % size
        addr = np.where(is_local, laid, addr)
    addr = np.where(lanes_on, addr, np.uint64(0))
    space = np.full(op.shape[0], SPACE_GLOBAL, np.int64)
    if op.shape[0]:
        # a warp access's space: its highest active lane's (as the emulator counts it)
        last = LANES - 1 - np.argmax(lanes_on[:, ::-1], axis=1)
        rows = np.arange(op.shape[0])
        space = np.where(is_shared[rows, last], SPACE_SHARED, np.where(is_local[rows, last], SPACE_LOCAL, SPACE_GLOBAL))
    op_space = np.zeros((max(n_ops, 1), 3), np.int64)
    np.add.at(op_space, (op.astype(np.int64), space), 1)
    return Accesses(rec.warp_offsets.astype(np.int64), op, rec.mask.astype(np.uint32),
                    np.ascontiguousarray(addr, dtype=np.uint64), op_space[:n_ops] if n_ops else op_space[:0])


def cta_records(words: np.ndarray, grid_ctas: int) -> CtaRecords:
    """Per-CTA SM and start/end times (u64 [3 x grid CTAs]: start, end, smid) as CtaRecords,
    times in ns from the earliest start; a CTA that never ran makes the whole set unknown."""
    a = np.asarray(words, np.uint64)
    if a.shape != (CTA_WORDS * grid_ctas,):
        raise RecordsError(f"per-CTA records hold {a.shape[0]} words for {grid_ctas} CTAs",
                           "the probe buffers do not match the launch; record again")
    a = a.reshape(grid_ctas, CTA_WORDS)
    start, end, sm = a[:, 0], a[:, 1], a[:, 2]
    if np.any(start == np.uint64(0xFFFFFFFFFFFFFFFF)) or np.any(end < start):
        raise RecordsError("some CTAs left no start or end time", "the kernel did not run to completion; record again")
    t0 = start.min()
    return CtaRecords(sm=sm.astype(np.int64), start=(start - t0).astype(np.int64), end=(end - t0).astype(np.int64))


def unique_ops(table: tuple[tuple[str, int, StaticOp], ...]) -> tuple[StaticOp, ...]:
    """The StaticOps of a `tuiprof.ptx.ops.static_ops` table, by id."""
    by_id: dict[int, StaticOp] = {}
    for _, _, op in table:
        by_id.setdefault(op.id, op)
    return tuple(by_id[i] for i in range(len(by_id)))


def build_trace(*, launch: Launch, table: tuple[tuple[str, int, StaticOp], ...], sites: tuple[Site, ...],
                tag: int, snapshot: Snapshot, words: np.ndarray, woff: np.ndarray, used: np.ndarray,
                cta: np.ndarray, local_bytes: int, sources: tuple[SourceFile, ...],
                provenance: Provenance, other_sites: Mapping[int, tuple[Site, ...]] | None = None) -> Trace:
    """The Trace of one recorded launch, from its probe buffers (the kernel-file and the
    whole-program collectors both end here). `other_sites` are the site tables of other modules
    whose device functions the kernel calls (``-rdc`` programs; `table` must cover them, see
    `tuiprof.toolchain.wholeprog.linked_module`). A generic op takes the space most of its accesses
    resolved to (as the emulator's ops do); those that reached shared or local memory are counted
    per space in ``provenance.generator["generic_ops_by_space"]``. `sources` are named as the ops
    name their files (`tuiprof.ptx.ops.static_ops`: the file name without its folder), so that
    the report and the UI find each op's line; the first of two files of one name is kept."""
    ops = unique_ops(table)
    warps = launch.warps_per_cta
    maps = {tag: site_to_op(sites, table)}
    for t, s in (other_sites or {}).items():
        maps[t] = site_to_op(s, table)
    acc = to_accesses(decode_words(words, woff, used), maps, len(ops), cta_ids=snapshot.cta_ids,
                      warps_per_cta=warps, local_words=local_frame_words(local_bytes),
                      op_bytes=np.array([o.bytes for o in ops], np.int64), tag=tag)
    generic = {str(i): acc.op_space[i].tolist() for i in range(len(ops))
               if ops[i].space == "global" and acc.op_space[i][1:].sum()}
    # a generic op takes the space most of its accesses resolved to (as the emulator's ops do)
    names: tuple[Space, ...] = ("global", "shared", "local")
    ops = tuple(dataclasses.replace(o, space=names[int(np.argmax(acc.op_space[o.id]))])
                if o.space in names and acc.op_space[o.id].sum() and names[int(np.argmax(acc.op_space[o.id]))] != o.space
                else o for o in ops)
    gen = dict(provenance.generator)
    if generic:
        gen["generic_ops_by_space"] = generic
    prov = Provenance(backend=provenance.backend, arch=provenance.arch, gpu=provenance.gpu,
                      tool_version=provenance.tool_version, date=provenance.date, generator=gen,
                      measured=dict(provenance.measured))
    n_ctas = snapshot.n_ctas
    timing = cta_records(cta, launch.grid_ctas) if cta.size else CtaRecords()
    return Trace(launch=launch, ops=ops, snapshot=snapshot, warp_offsets=acc.warp_offsets,
                 warp_cta=np.repeat(np.arange(n_ctas, dtype=np.int32), warps),
                 warp_index=np.tile(np.arange(warps, dtype=np.int32), n_ctas),
                 op=acc.op, mask=acc.mask, addr=acc.addr, sources=_named_as_ops_name_them(sources),
                 provenance=prov, ctas=timing)


def _named_as_ops_name_them(sources: tuple[SourceFile, ...]) -> tuple[SourceFile, ...]:
    """Each source under its file name without the folder, the first of a name kept."""
    out: dict[str, SourceFile] = {}
    for s in sources:
        name = os.path.basename(s.name) or s.name
        out.setdefault(name, SourceFile(name, s.text))
    return tuple(out.values())


# --------------------------------------------------------------------------- record files


RECORD_MAGIC = b"TPRECv1\0"
"""First 8 bytes of a whole program's record file (written by the host runtime)."""
_LAUNCH_MAGIC = 0x4C41554E  # "LAUN"


@dataclass(frozen=True)
class LaunchRecords:
    """One recorded launch of a whole program, as the host runtime wrote it."""

    index: int
    """The launch's position among the program's kernel launches (from 0)."""
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_shared: int
    cta_lo: int
    cta_hi: int
    woff: np.ndarray
    used: np.ndarray
    words: np.ndarray
    cta: np.ndarray
    """u64 [3 x grid CTAs] (empty when per-CTA records were off)."""
    elapsed_ns: int
    """Kernel time between the events around the launch."""

    def records(self) -> Records:
        return decode_words(self.words, self.woff, self.used)


_HEAD = struct.Struct("<IIQ3I3IQQQQQQQQ")
"""Launch header: magic, kernel name length, launch index, grid xyz, block xyz, dynamic shared,
cta lo, cta hi, snapshot warps, record words, per-CTA words, elapsed ns, reserved."""


def read_record_file(path: str | Path) -> list[LaunchRecords]:
    """The launches recorded in a whole program's record file (layout: `RECORD_MAGIC`, then per
    launch `_HEAD`, the kernel name, then u64 arrays woff [warps+1], used [warps], words, cta)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise RecordsError(f"cannot read the record file {p}: {exc.strerror}",
                           "the program did not reach the profiled launch, or could not write it") from None
    if not data.startswith(RECORD_MAGIC):
        raise RecordsError(f"{p} is not a tuiprof record file", "it was not written by tuiprof's runtime")
    pos = len(RECORD_MAGIC)
    out: list[LaunchRecords] = []
    while pos < len(data):
        if pos + _HEAD.size > len(data):
            raise RecordsError(f"{p} ends inside a launch header", "the program stopped while writing it; record again")
        (magic, name_len, index, gx, gy, gz, bx, by, bz, dyn, lo, hi, n_w, n_words, n_cta, elapsed,
         _reserved) = _HEAD.unpack_from(data, pos)
        if magic != _LAUNCH_MAGIC:
            raise RecordsError(f"{p}: damaged launch header at byte {pos}", "record again")
        pos += _HEAD.size
        need = name_len + 8 * ((n_w + 1) + n_w + n_words + n_cta)
        if name_len > 1 << 16 or pos + need > len(data):
            raise RecordsError(f"{p} ends inside launch {index}'s records",
                               "the program stopped while writing them (or the disk is full); record again")
        name = data[pos:pos + name_len].decode("utf-8", "replace")
        pos += name_len

        def take(n: int) -> np.ndarray:
            nonlocal pos
            a = np.frombuffer(data, np.uint64, n, pos).copy()
            pos += 8 * n
            return a

        woff, used, words, cta = take(n_w + 1), take(n_w), take(n_words), take(n_cta)
        out.append(LaunchRecords(index, name, (gx, gy, gz), (bx, by, bz), dyn, lo, hi, woff, used, words, cta,
                                 elapsed))
    return out


__all__ = ["Accesses", "LOCAL_TRACE_BASE", "LaunchRecords", "RECORD_MAGIC", "Records", "RecordsError",
           "build_trace", "check_regions", "cta_records", "decode_words", "read_record_file", "site_to_op",
           "to_accesses", "unique_ops"]
