"""Shared memory as Nsight Compute measures it: bank conflicts in wavefronts per request.

Shared memory is no cache: what a shared load or store costs is how many *wavefronts* (passes
through the shared-memory data path) its warp access needs. The SM reads one word of
``bank_width`` bytes from each of ``banks`` banks per wavefront (32 x 4 B = 128 B per cycle on
every NVIDIA GPU since Fermi; 16 x 4 B on GT200). Following the CUDA C Programming Guide
(sections "Shared Memory" of compute capabilities 5.x-9.0):

- a warp access is split into *phases* of lanes that together move at most one wavefront's bytes:
  32 lanes for accesses of up to 4 B, 16 (half-warps) for 8 B, 8 (quarter-warps) for 16 B;
- within a phase, lanes that touch the same word share it (a broadcast is free), and distinct
  words in one bank are served one per wavefront: the phase needs as many wavefronts as the
  bank holding the most distinct requested words (a lane's element of 8 or 16 B covers 2 or 4
  consecutive words, hence banks);
- the access needs the sum over its phases. Its *ideal* is one wavefront per phase that has an
  active lane (Nsight Compute's ideal wavefronts: 1 for 32 lanes of 4 B, 2 of 8 B, 4 of 16 B).

Nsight Compute counts the same: ``l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum`` (and
``_op_st``) against one request per warp instruction (``smsp__inst_executed_op_shared_ld.sum``).
A ``tile[32][32]`` of floats read down a column is 32 wavefronts per request (32-way), the same
tile padded to ``[32][33]`` is 1.

The latency a conflict adds: each extra wavefront holds the access one more cycle in the data
path (one wavefront per cycle per SM), so an access takes ``shared_latency + wavefronts - ideal``
cycles; the extra wavefronts also take cycles of the SM's shared-memory bandwidth from every
other warp (Zhang11 sec. 4.2 counts them as transactions: `tuiprof.model.decisions.bottleneck_model`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tuiprof.trace.data import Trace

SHARED_BANK_WIDTH = 4
"""Bytes per shared-memory bank and cycle on every NVIDIA GPU tuiprof models (CUDA C Programming
Guide: 32-bit banks; Kepler's optional 64-bit mode is not modelled)."""
MAX_WAVEFRONTS = 128
"""Histogram range of wavefronts per request: 32 phases of 4 words at most, counted to here."""


@dataclass(frozen=True)
class PassStats:
    """One non-cached op's serialisation over the snapshot (the same in every trial): the passes
    each warp access (request) needs through its data path against the fewest it could need.
    For a shared-memory op a pass is a *wavefront* (bank conflicts, this module); for a
    constant-memory op it is a *constant-cache request*, one per distinct address the lanes read
    (`tuiprof.model.constant`)."""

    space: str
    """``shared`` or ``const``."""
    warp_accesses: int
    """Requests: warp accesses of the op (one per warp instruction, as Nsight Compute counts)."""
    passes: float
    """Mean passes per request: wavefronts (shared), constant-cache requests (const)."""
    ideal: float
    """Mean ideal passes per request (shared: one per phase with an active lane; const: 1)."""
    worst: int
    """Most passes of one request (32 for a 32-way conflict of 4 B lanes, or 32 distinct constants)."""
    conflicted: float
    """Share of the requests that need more passes than their ideal."""
    latency: float
    """Mean cycles of one access: the arch's latency for the space plus its extra passes."""
    histogram: tuple[int, ...]
    """Requests needing k passes, k = 0 .. `MAX_WAVEFRONTS` (the last bin holds more)."""

    @property
    def unit(self) -> str:
        """What one pass is called, plural: ``wavefronts`` or ``requests``."""
        return "wavefronts" if self.space == "shared" else "requests"

    @property
    def ways(self) -> float:
        """Mean passes over the ideal: the n of an n-way bank conflict or serialisation (1 when none)."""
        return self.passes / self.ideal if self.ideal > 0 else float("nan")

    @property
    def extra(self) -> float:
        """Mean passes per request beyond the ideal: the cycles the conflicts add."""
        return self.passes - self.ideal

    @property
    def total(self) -> float:
        """Passes of all its requests (Nsight Compute's ``..._wavefronts_mem_shared_op_*.sum``
        over the snapshot, for a shared op)."""
        return self.passes * self.warp_accesses


def pass_stats(space: str, ids: np.ndarray, of: np.ndarray, actual: np.ndarray, ideal: np.ndarray,
               latency: float) -> dict[int, PassStats]:
    """`PassStats` of each op of `ids`, from the passes `actual` and `ideal` of each warp access
    whose op is `of`; `latency` is the space's latency without serialisation."""
    return chunked_pass_stats(space, ids, [(of, actual, ideal)], latency)


def chunked_pass_stats(space: str, ids: np.ndarray, chunks: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]],
                       latency: float) -> dict[int, PassStats]:
    """`pass_stats` over chunks of warp accesses, each ``(of, actual, ideal)``, summed as they come
    (the means are exact sums over counts, as NumPy's of the whole arrays)."""
    wanted = ids.tolist()
    n = dict.fromkeys(wanted, 0)
    total, best, conflicted, extra = dict(n), dict(n), dict(n), dict(n)
    hist = {i: np.zeros(MAX_WAVEFRONTS + 1, np.int64) for i in wanted}
    for of, actual, ideal in chunks:
        for i in wanted:
            sel = of == i
            k = int(np.count_nonzero(sel))
            if k == 0:
                continue
            a, d = actual[sel], ideal[sel]
            n[i] += k
            total[i] += int(a.sum())
            extra[i] += int(d.sum())
            best[i] = max(best[i], int(a.max()))
            conflicted[i] += int(np.count_nonzero(a > d))
            hist[i] += np.bincount(np.minimum(a, MAX_WAVEFRONTS), minlength=MAX_WAVEFRONTS + 1)
    out = {}
    for i in wanted:
        if n[i] == 0:
            continue
        out[i] = PassStats(space=space, warp_accesses=n[i], passes=float(total[i]) / n[i], ideal=float(extra[i]) / n[i],
                           worst=best[i], conflicted=conflicted[i] / n[i],
                           latency=float(latency) + float(total[i] - extra[i]) / n[i],
                           histogram=tuple(int(x) for x in hist[i]))
    return out


def space_rows(trace: Trace, space: str) -> tuple[np.ndarray, np.ndarray]:
    """(ids of the ops of `space`, rows of the warp accesses of those ops) of a trace: the counted
    CTAs' accesses (a snapshot's warm-up CTAs are replayed, not counted)."""
    in_space = np.array([o.space == space for o in trace.ops], dtype=bool)
    ids = np.flatnonzero(in_space).astype(np.int64)
    rows = np.flatnonzero(in_space[trace.op] & trace.counted_accesses()).astype(np.int64) if ids.size \
        else np.zeros(0, np.int64)
    return ids, rows


def shared_op_stats(trace: Trace, banks: int, width: int, latency: float) -> dict[int, PassStats]:
    """`PassStats` of every shared-memory op of `trace` (a `tuiprof.trace.data.Trace`) with
    ``banks`` banks of ``width`` bytes and a conflict-free latency of ``latency`` cycles."""
    from tuiprof.model.wavefronts import wavefronts

    ids, rows = space_rows(trace, "shared")
    if ids.size == 0:
        return {}
    op_bytes = np.array([o.bytes for o in trace.ops], dtype=np.int64)
    if trace.packed is None:
        actual, ideal, _ = wavefronts(trace.addr, trace.mask, trace.op, op_bytes, rows, int(banks), int(width))
        return pass_stats("shared", ids, trace.op[rows], actual, ideal, latency)
    from tuiprof.trace.packed import packed_chunks

    # A loaded trace keeps its shared accesses packed: count each chunk's wavefronts as it is
    # decoded, the counted CTAs' warps only (a warm-up CTA's warps are never decoded).
    wanted = np.zeros(len(trace.ops), dtype=bool)
    wanted[ids] = True
    warps = trace.warp_cta >= trace.snapshot.warm if trace.snapshot.warm else None

    def counted() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        for crow, caddr in packed_chunks(trace, wanted, warps):
            cop = trace.op[crow]
            a, d, _ = wavefronts(caddr, trace.mask[crow], cop, op_bytes, np.arange(crow.shape[0], dtype=np.int64),
                                 int(banks), int(width))
            yield cop, a, d

    return chunked_pass_stats("shared", ids, counted(), latency)
