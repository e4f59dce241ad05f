"""Texture fetches and surface accesses of the emulator, as the CUDA C Programming Guide's
"Texture Fetching" appendix and the PTX ISA (tex, tld4, suld, sust) define them.

A texture object is the heap address of a descriptor (`codes.TX_*`) that ``dev.texture`` wrote:
where the texels are (row-major, ``pitch`` bytes per row, ``slice`` per 2-D slice), their
element type and channels, the filter, one address mode per dimension, normalized coordinates
and the read mode. A fetch at coordinates (x, y, z):

- normalized coordinates are scaled by the size first (x * width);
- *point* filtering takes texel floor(x); *linear* filtering takes the 2, 4 or 8 texels around
  x - 0.5 and weighs them by the fraction in 9-bit fixed point with 8 fractional bits (as the
  hardware does; rounded to nearest, which the guide leaves open);
- an index out of range is clamped (clamp), wrapped or mirrored (wrap and mirror with normalized
  coordinates only; CUDA clamps otherwise), or reads 0 (border, a zero border colour);
- integer elements read as integers, or as floats in [0, 1] ([-1, 1] signed) in normalized-float
  read mode; missing channels read 0, and 1 for the fourth.

``tld4`` returns one channel of the 4 texels of the bilinear footprint, in the order (i, j+1),
(i+1, j+1), (i+1, j), (i, j). Surfaces (``suld.b``/``sust.b``) address bytes along x and
elements along y and z, with .trap, .clamp or .zero out of range. The warp access recorded for
a fetch is each lane's base texel (the one at floor of the coordinates, clamped into the
texture): a texture op goes through the L1/texture cache in the simulator.
"""

from __future__ import annotations

import math

import numpy as np

from tuiprof.collect.emu.kernel.bits import bits_f32, f32_of, load_bits, store_bits
from tuiprof.collect.emu.kernel.codes import (
    AM_BORDER,
    AM_CLAMP,
    AM_MIRROR,
    AM_WRAP,
    SU_CLAMP,
    SU_TRAP,
    T_F16,
    T_F32,
    T_S8,
    T_S16,
    T_S32,
    T_U8,
    T_U16,
    TEXTURE_MAGIC,
    TX_CHANNELS,
    TX_D,
    TX_DATA,
    TX_ELEM,
    TX_FILTER,
    TX_H,
    TX_MAGIC,
    TX_MODE_X,
    TX_NORMALIZED,
    TX_PITCH,
    TX_READ_FLOAT,
    TX_SLICE,
    TX_W,
    TX_WORDS,
)
from tuiprof.collect.emu.kernel.fp import f16_value
from tuiprof.collect.emu.kernel.memory import find_segment
from tuiprof.jit import INLINE, emu_kernel, njit


@njit(**INLINE)
def descriptor(heap, handle, seg_lo, seg_hi, seg_off, desc):
    """Read the descriptor of texture object `handle` into `desc`; False when it is none."""
    i = find_segment(handle, TX_WORDS * 8, seg_lo, seg_hi)
    if i < 0:
        return False
    off = seg_off[i] + (handle - seg_lo[i])
    for k in range(TX_WORDS):
        desc[k] = load_bits(heap, off + 8 * k, 8)
    return desc[TX_MAGIC] == TEXTURE_MAGIC


@njit(**INLINE)
def elem_bytes(elem):
    if elem == T_U8 or elem == T_S8:
        return 1
    if elem == T_U16 or elem == T_S16 or elem == T_F16:
        return 2
    return 4


@njit(**INLINE)
def wrap_index(i, n, mode, normalized):
    """(index, inside) of integer texel index `i` along a dimension of `n` texels."""
    if not normalized and (mode == AM_WRAP or mode == AM_MIRROR):
        mode = AM_CLAMP
    if mode == AM_CLAMP:
        return min(max(i, 0), n - 1), True
    if mode == AM_BORDER:
        return i, 0 <= i < n
    if mode == AM_WRAP:
        return i % n, True
    period = i // n
    r = i - period * n
    return (r if period % 2 == 0 else n - 1 - r), True


@njit(**INLINE)
def texel_address(desc, ix, iy, iz):
    return desc[TX_DATA] + iz * desc[TX_SLICE] + iy * desc[TX_PITCH] + ix * elem_bytes(desc[TX_ELEM]) * desc[TX_CHANNELS]


@njit(**INLINE)
def channel(heap, seg_lo, seg_hi, seg_off, desc, ix, iy, iz, c, as_float):
    """Channel `c` of texel (ix, iy, iz) (in range): its bits as float32 bits when `as_float`
    (converted as the read mode says), else as an integer."""
    elem = desc[TX_ELEM]
    nb = elem_bytes(elem)
    if c >= desc[TX_CHANNELS]:
        if c == 3:
            return bits_f32(np.float32(1.0)) if as_float else np.int64(1)
        return np.int64(0)
    a = texel_address(desc, ix, iy, iz) + c * nb
    i = find_segment(a, nb, seg_lo, seg_hi)
    if i < 0:
        return np.int64(0)
    raw = load_bits(heap, seg_off[i] + (a - seg_lo[i]), nb)
    if elem == T_F32:
        return raw if as_float else np.int64(np.int32(np.uint32(raw)))
    if elem == T_F16:
        return bits_f32(np.float32(f16_value(raw)))
    v = raw
    if elem == T_S8:
        v = raw - 256 if raw >= 128 else raw
    elif elem == T_S16:
        v = raw - 65536 if raw >= 32768 else raw
    elif elem == T_S32:
        v = raw - (1 << 32) if raw >= (1 << 31) else raw
    if not as_float:
        return v & 0xFFFFFFFF
    if desc[TX_READ_FLOAT]:
        top = 255.0 if elem == T_U8 else 127.0 if elem == T_S8 else 65535.0 if elem == T_U16 else 32767.0 \
            if elem == T_S16 else 4294967295.0 if elem != T_S32 else 2147483647.0
        return bits_f32(np.float32(max(v / top, -1.0)))
    return bits_f32(np.float32(v))


@njit(**INLINE)
def tap(heap, seg_lo, seg_hi, seg_off, desc, dims, ix, iy, iz, c, as_float):
    """Channel `c` of the texel at integer indices, after the address modes (0 outside a border)."""
    norm = desc[TX_NORMALIZED] != 0
    jx, okx = wrap_index(ix, desc[TX_W], desc[TX_MODE_X], norm)
    jy, oky = (0, True) if dims < 2 else wrap_index(iy, desc[TX_H], desc[TX_MODE_X + 1], norm)
    jz, okz = (0, True) if dims < 3 else wrap_index(iz, desc[TX_D], desc[TX_MODE_X + 2], norm)
    if not (okx and oky and okz):
        return np.int64(0)
    return channel(heap, seg_lo, seg_hi, seg_off, desc, jx, jy, jz, c, as_float)


@njit(**INLINE)
def weight(f):
    """A filter weight in 1.8 fixed point (the hardware's), as float32."""
    return np.float32(math.floor(f * 256.0 + 0.5) / 256.0)


@emu_kernel
def fetch(heap, seg_lo, seg_hi, seg_off, desc, dims, x, y, z, int_coords, float_result, gather, out):
    """The four components of a texture fetch at (x, y, z) into `out` (register bits), and the
    address of its base texel (see the module docstring); `gather` > 0 is tld4 of channel
    ``gather - 1``."""
    norm = desc[TX_NORMALIZED] != 0 and not int_coords
    sx = float(desc[TX_W]) if norm else 1.0
    sy = float(desc[TX_H]) if norm else 1.0
    sz = float(desc[TX_D]) if norm else 1.0
    linear = (desc[TX_FILTER] == 1 and float_result and not int_coords) or gather > 0
    if int_coords:
        fx, fy, fz = x, y, z
    else:
        fx = float(np.float32(x * sx))
        fy = float(np.float32(y * sy))
        fz = float(np.float32(z * sz))
    if linear:
        fx -= 0.5
        fy -= 0.5
        fz -= 0.5
    ix = np.int64(math.floor(fx))
    iy = np.int64(math.floor(fy)) if dims >= 2 else np.int64(0)
    iz = np.int64(math.floor(fz)) if dims >= 3 else np.int64(0)
    if gather > 0:
        c = gather - 1
        out[0] = tap(heap, seg_lo, seg_hi, seg_off, desc, 2, ix, iy + 1, 0, c, float_result)
        out[1] = tap(heap, seg_lo, seg_hi, seg_off, desc, 2, ix + 1, iy + 1, 0, c, float_result)
        out[2] = tap(heap, seg_lo, seg_hi, seg_off, desc, 2, ix + 1, iy, 0, c, float_result)
        out[3] = tap(heap, seg_lo, seg_hi, seg_off, desc, 2, ix, iy, 0, c, float_result)
    elif not linear:
        for c in range(4):
            out[c] = tap(heap, seg_lo, seg_hi, seg_off, desc, dims, ix, iy, iz, c, float_result)
    else:
        a = weight(fx - math.floor(fx))
        b = weight(fy - math.floor(fy)) if dims >= 2 else np.float32(0.0)
        g = weight(fz - math.floor(fz)) if dims >= 3 else np.float32(0.0)
        for c in range(4):
            acc = np.float32(0.0)
            for k in range(1 << dims):
                dx, dy, dz = k & 1, (k >> 1) & 1, (k >> 2) & 1
                w = (a if dx else np.float32(1.0) - a)
                if dims >= 2:
                    w = w * (b if dy else np.float32(1.0) - b)
                if dims >= 3:
                    w = w * (g if dz else np.float32(1.0) - g)
                v = f32_of(tap(heap, seg_lo, seg_hi, seg_off, desc, dims, ix + dx, iy + dy, iz + dz, c, True))
                acc = acc + np.float32(w) * v
            out[c] = bits_f32(acc)
    norm2 = desc[TX_NORMALIZED] != 0
    bx, _ = wrap_index(ix, desc[TX_W], AM_CLAMP, norm2)
    by, _ = (0, True) if dims < 2 else wrap_index(iy, desc[TX_H], AM_CLAMP, norm2)
    bz, _ = (0, True) if dims < 3 else wrap_index(iz, desc[TX_D], AM_CLAMP, norm2)
    return texel_address(desc, bx, by, bz)


@emu_kernel
def surface(heap, seg_lo, seg_hi, seg_off, desc, dims, xb, y, z, nbytes, mode):
    """(address, in range) of a surface element of `nbytes` at byte x `xb` and elements y, z,
    after the clamp mode; -1 for .zero out of range, -2 for .trap out of range."""
    width_bytes = desc[TX_W] * elem_bytes(desc[TX_ELEM]) * desc[TX_CHANNELS]
    inside = 0 <= xb and xb + nbytes <= width_bytes and (dims < 2 or 0 <= y < desc[TX_H]) \
        and (dims < 3 or 0 <= z < desc[TX_D])
    if not inside:
        if mode == SU_TRAP:
            return np.int64(-2)
        if mode != SU_CLAMP:
            return np.int64(-1)
        xb = min(max(xb, 0), width_bytes - nbytes)
        y = min(max(y, 0), desc[TX_H] - 1) if dims >= 2 else 0
        z = min(max(z, 0), desc[TX_D] - 1) if dims >= 3 else 0
    if dims < 2:
        y = 0
    if dims < 3:
        z = 0
    return desc[TX_DATA] + z * desc[TX_SLICE] + y * desc[TX_PITCH] + xb


@njit(**INLINE)
def heap_load(heap, seg_lo, seg_hi, seg_off, a, nb):
    i = find_segment(a, nb, seg_lo, seg_hi)
    if i < 0:
        return np.int64(0), False
    return load_bits(heap, seg_off[i] + (a - seg_lo[i]), nb), True


@njit(**INLINE)
def heap_store(heap, seg_lo, seg_hi, seg_off, a, nb, v):
    i = find_segment(a, nb, seg_lo, seg_hi)
    if i < 0:
        return False
    store_bits(heap, seg_off[i] + (a - seg_lo[i]), nb, v)
    return True
