"""Address resolution for the emulator: which buffer and offset an address of a space names.

Buffers (kinds): 0 the global heap, 1 the CTA's shared memory, 2 the CTA's local memory (one
frame of ``local_size`` bytes per thread, device-function parameters included), 3 the module's
constant bank, 4 the launch's kernel parameters. Generic addresses are classified by window
(shared, local, const) and fall through to global, which is checked against the allocations.
"""

from __future__ import annotations

from tuiprof.collect.emu.kernel.codes import (
    CONST_WINDOW,
    LOCAL_WINDOW,
    SHARED_WINDOW,
    SP_CONST,
    SP_FPARAM,
    SP_GENERIC,
    SP_GLOBAL,
    SP_LOCAL,
    SP_PARAM,
    SP_SHARED,
    WINDOW_SIZE,
)
from tuiprof.jit import INLINE, njit

K_HEAP, K_SHARED, K_LOCAL, K_CONST, K_PARAM = 0, 1, 2, 3, 4


@njit(**INLINE)
def find_segment(a, nb, seg_lo, seg_hi):
    """Index of the allocation holding bytes ``a .. a+nb-1``, or -1."""
    lo = 0
    hi = seg_lo.shape[0] - 1
    found = -1
    while lo <= hi:
        mid = (lo + hi) >> 1
        if seg_lo[mid] <= a:
            found = mid
            lo = mid + 1
        else:
            hi = mid - 1
    if found >= 0 and a + nb <= seg_hi[found]:
        return found
    return -1


@njit(**INLINE)
def resolve(space, a, nb, t, seg_lo, seg_hi, seg_off, shared_size, local_size, const_size, param_size):
    """(buffer kind, byte offset, space) of an access of `nb` bytes at address `a` of `space` by
    thread `t` of the CTA; kind -1 when the bytes lie outside that space's memory."""
    if space == SP_GENERIC:
        if a >= SHARED_WINDOW and a < SHARED_WINDOW + WINDOW_SIZE:
            space = SP_SHARED
            a -= SHARED_WINDOW
        elif a >= LOCAL_WINDOW and a < LOCAL_WINDOW + WINDOW_SIZE:
            space = SP_LOCAL
            a -= LOCAL_WINDOW
        elif a >= CONST_WINDOW and a < CONST_WINDOW + WINDOW_SIZE:
            space = SP_CONST
            a -= CONST_WINDOW
        else:
            space = SP_GLOBAL
    if space == SP_GLOBAL:
        i = find_segment(a, nb, seg_lo, seg_hi)
        if i < 0:
            return -1, a, space
        return K_HEAP, seg_off[i] + (a - seg_lo[i]), space
    if space == SP_SHARED:
        if a < 0 or a + nb > shared_size:
            return -1, a, space
        return K_SHARED, a, space
    if space == SP_LOCAL or space == SP_FPARAM:
        if a < 0 or a + nb > local_size:
            return -1, a, space
        return K_LOCAL, t * local_size + a, space
    if space == SP_CONST:
        if a < 0 or a + nb > const_size:
            return -1, a, space
        return K_CONST, a, space
    if space == SP_PARAM:
        if a < 0 or a + nb > param_size:
            return -1, a, space
        return K_PARAM, a, space
    return -1, a, space
