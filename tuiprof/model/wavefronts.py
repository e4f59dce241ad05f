"""The wavefront count of shared-memory warp accesses (`tuiprof.model.shared` says what it
models): a Numba kernel, kept apart so that importing the model stays light."""

from __future__ import annotations

import numpy as np

from tuiprof.jit import INLINE, KERNEL, njit


@njit(**INLINE)
def _word(a, wshift, width):
    """The word of byte address `a`: a shift where the width is a power of two (`wshift` < 64)."""
    return np.int64(a >> np.uint64(wshift)) if wshift < 64 else np.int64(a // np.uint64(width))


@njit(**INLINE)
def _bank(w, bmask, banks):
    """The bank of word `w`: a mask where the bank count is a power of two (`bmask` >= 0)."""
    return w & bmask if bmask >= 0 else w % banks


@njit(**KERNEL)
def wavefronts(addr, mask, op, op_bytes, rows, banks, width):
    """Wavefronts of each warp access ``rows[k]`` (``addr`` [R, 32] byte addresses, ``mask`` [R]
    active lanes, ``op`` [R] op ids, ``op_bytes`` [n_ops] bytes per lane): ``(actual, ideal, worst)``
    int64 [len(rows)] each, and the most wavefronts of one phase (the n of an n-way conflict); see
    `tuiprof.model.shared`."""
    n = rows.shape[0]
    actual = np.zeros(n, dtype=np.int64)
    ideal = np.zeros(n, dtype=np.int64)
    worst = np.zeros(n, dtype=np.int64)
    words = np.empty((banks, 128), dtype=np.int64)
    count = np.zeros(banks, dtype=np.int64)
    first = np.zeros(banks, dtype=np.int64)
    wavefront_bytes = banks * width
    # Word and bank by shift and mask where they are powers of two (every GPU modelled): a
    # division per lane otherwise dominates the kernel.
    wshift = 64
    if width > 0 and width & (width - 1) == 0:
        wshift = 0
        while (1 << wshift) < width:
            wshift += 1
    bmask = banks - 1 if banks > 0 and banks & (banks - 1) == 0 else -1
    for k in range(n):
        r = rows[k]
        b = op_bytes[op[r]]
        per_lane = max(1, (b + width - 1) // width)
        lanes = max(1, min(32, wavefront_bytes // max(b, 1)))
        m = mask[r]
        for p0 in range(0, 32, lanes):
            # Most phases touch each bank at most once, or share words (a broadcast): one
            # wavefront, seen with a bank bitmask and each bank's first word, no search.
            deepest = 0
            if banks <= 64:
                used = np.uint64(0)
                clash = False
                for lane in range(p0, min(32, p0 + lanes)):
                    if (m >> np.uint32(lane)) & np.uint32(1) == 0:
                        continue
                    a = addr[r, lane]
                    w0 = _word(a, wshift, width)
                    for j in range(per_lane):
                        w = w0 + j
                        q = _bank(w, bmask, banks)
                        bit = np.uint64(1) << np.uint64(q)
                        if used & bit:
                            if first[q] != w:
                                clash = True
                                break
                        else:
                            used |= bit
                            first[q] = w
                    if clash:
                        break
                if not clash:
                    if used:
                        actual[k] += 1
                        ideal[k] += 1
                        worst[k] = max(worst[k], 1)
                    continue
            for q in range(banks):
                count[q] = 0
            for lane in range(p0, min(32, p0 + lanes)):
                if (m >> np.uint32(lane)) & np.uint32(1) == 0:
                    continue
                a = addr[r, lane]
                w0 = _word(a, wshift, width)
                for j in range(per_lane):
                    w = w0 + j
                    q = _bank(w, bmask, banks)
                    seen = False
                    for t in range(count[q]):
                        if words[q, t] == w:
                            seen = True
                            break
                    if not seen and count[q] < 128:
                        words[q, count[q]] = w
                        count[q] += 1
                        if count[q] > deepest:
                            deepest = count[q]
            if deepest > 0:
                actual[k] += deepest
                ideal[k] += 1
                worst[k] = max(worst[k], deepest)
    return actual, ideal, worst
