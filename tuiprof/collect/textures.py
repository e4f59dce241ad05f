"""Texture and surface objects a launch script makes: ``dev.texture(array, filter=..., address_mode=...,
normalized=..., read_mode=..., channels=...)`` and ``dev.surface(buffer, channels=...)``, the
launch-script form of ``cudaCreateTextureObject`` and ``cudaCreateSurfaceObject`` on a CUDA array.

An array of shape (W,), (H, W) or (D, H, W) is a 1-, 2- or 3-D texture of one channel; with
``channels=2`` or ``4`` its last axis holds the channels (a float4 texture is (H, W, 4) float32).
Element types: float32, float16, (u)int8, (u)int16, (u)int32. ``filter`` is ``point`` or
``linear`` (float results only), ``address_mode`` one of ``wrap``, ``clamp``, ``mirror``,
``border`` or one per dimension, ``read_mode`` ``element`` or ``normalized_float`` (8- and 16-bit
integers read as floats in [0, 1] or [-1, 1]). What a fetch returns is
`tuiprof.collect.emu.kernel.texture`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tuiprof.errors import TuiprofError

FILTERS = ("point", "linear")
ADDRESS_MODES = ("wrap", "clamp", "mirror", "border")
READ_MODES = ("element", "normalized_float")
ELEMENTS = {"f4": "f32", "f2": "f16", "u1": "u8", "i1": "s8", "u2": "u16", "i2": "s16", "u4": "u32", "i4": "s32"}
"""NumPy dtype -> the PTX type of one channel."""


@dataclass(frozen=True)
class TextureLayout:
    """A texture's geometry and sampling state, checked."""

    dims: int
    width: int
    height: int
    depth: int
    element: str
    """PTX type of one channel (``f32``, ``u8``...)."""
    channels: int
    filter: int
    modes: tuple[int, int, int]
    normalized: bool
    read_float: bool
    surface: bool

    @property
    def texel_bytes(self) -> int:
        return {"f32": 4, "f16": 2, "u8": 1, "s8": 1, "u16": 2, "s16": 2, "u32": 4, "s32": 4}[self.element] * self.channels


def texture_layout(shape: tuple[int, ...], dtype: np.dtype, *, channels: int = 1, filter: str = "point",
                   address_mode: str | tuple[str, ...] = "clamp", normalized: bool = False, read_mode: str = "element",
                   surface: bool = False) -> TextureLayout:
    """The `TextureLayout` of data of `shape` and `dtype` under the options of ``dev.texture``
    (``dev.surface`` with `surface`); one error naming what is wrong otherwise."""
    call = "dev.surface" if surface else "dev.texture"
    key = np.dtype(dtype).str.lstrip("<>|=")
    if key not in ELEMENTS:
        raise TuiprofError(f"{call}: {np.dtype(dtype)} elements are not a CUDA channel format",
                           "use float32, float16, (u)int8, (u)int16 or (u)int32")
    if channels not in (1, 2, 4):
        raise TuiprofError(f"{call}: channels={channels!r}", "a texel has 1, 2 or 4 channels")
    spatial = shape[:-1] if channels > 1 else shape
    if channels > 1 and (not shape or shape[-1] != channels):
        raise TuiprofError(f"{call}: channels={channels} needs a last axis of {channels}, not shape {shape}",
                           f"give an array of shape (..., {channels})")
    if not 1 <= len(spatial) <= 3 or any(s < 1 for s in spatial):
        raise TuiprofError(f"{call}: an array of shape {shape} is no 1-, 2- or 3-D texture",
                           "give (W,), (H, W) or (D, H, W) (a last axis of channels with channels=2 or 4)")
    if filter not in FILTERS:
        raise TuiprofError(f"{call}: filter={filter!r}", f"one of {', '.join(FILTERS)}")
    modes = (address_mode,) * len(spatial) if isinstance(address_mode, str) else tuple(address_mode)
    if len(modes) != len(spatial) or any(m not in ADDRESS_MODES for m in modes):
        raise TuiprofError(f"{call}: address_mode={address_mode!r}",
                           f"one of {', '.join(ADDRESS_MODES)}, or one per dimension")
    if read_mode not in READ_MODES:
        raise TuiprofError(f"{call}: read_mode={read_mode!r}", f"one of {', '.join(READ_MODES)}")
    element = ELEMENTS[key]
    read_float = read_mode == "normalized_float"
    if read_float and element not in ("u8", "s8", "u16", "s16"):
        raise TuiprofError(f"{call}: read_mode='normalized_float' applies to 8- and 16-bit integers, not {element}",
                           "read float and 32-bit elements as they are (read_mode='element')")
    if filter == "linear" and element not in ("f32", "f16") and not read_float:
        raise TuiprofError(f"{call}: linear filtering of {element} elements read as integers",
                           "CUDA filters only float results: use read_mode='normalized_float', or filter='point'")
    dims = len(spatial)
    size = tuple(reversed(spatial)) + (1,) * (3 - dims)
    codes = tuple(ADDRESS_MODES.index(m) for m in modes) + (1,) * (3 - dims)
    return TextureLayout(dims, size[0], size[1], size[2], element, channels, FILTERS.index(filter),
                         (codes[0], codes[1], codes[2]), bool(normalized), read_float, surface)


def descriptor_words(layout: TextureLayout, data_address: int) -> np.ndarray:
    """The descriptor the emulator reads at a fetch (`tuiprof.collect.emu.kernel.codes.TX_*`)."""
    from tuiprof.collect.emu.kernel.codes import TEXTURE_MAGIC, TX_WORDS, TYPE_CODES

    pitch = layout.width * layout.texel_bytes
    words = [TEXTURE_MAGIC, data_address, layout.width, layout.height, layout.depth, pitch, pitch * layout.height,
             TYPE_CODES[layout.element], layout.channels, layout.filter, *layout.modes, int(layout.normalized),
             int(layout.read_float), int(layout.surface)]
    return np.array(words + [0] * (TX_WORDS - len(words)), np.int64)
