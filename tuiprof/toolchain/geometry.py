"""The launch geometry a kernel's own code implies, for ``tuiprof init``: block sizes and how
many elements each CTA covers, read from the idioms CUDA code writes them in.

- ``blockIdx.x * TILE + threadIdx.x`` (or ``TILE * blockIdx.x``) with TILE a compile-time
  constant (a ``#define``, a ``constexpr``, an enumerator-free template argument): the CTA covers
  TILE elements along x, and a block of TILE threads is what the author launches;
- ``blockIdx.x * blockDim.x * UNROLL``: each CTA covers UNROLL blocks' worth of elements;
- ``blockIdx.x`` alone as an index (``int row = blockIdx.x;``): one CTA per element;
- ``__launch_bounds__(N)``: at most N threads, and for a 1-D kernel with no other hint the block
  size the author launches (libraries' convention, CUB's BLOCK_THREADS);
- a fixed ``__shared__`` array indexed ``[threadIdx.y][threadIdx.x]``: the block fits its dims.

What cannot be read keeps the defaults (256 threads, 16 x 16, 8 x 8 x 4), capped by the launch
bounds and the 1024 threads of a CTA.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from tuiprof.ptx.address import AddressForm
from tuiprof.ptx.labels import index_form, match_bracket

MAX_BLOCK = 1024
DEFAULT_BLOCKS = {1: (256, 1, 1), 2: (16, 16, 1), 3: (8, 8, 4)}
_AXES = "xyz"
_FACTOR = r"(?:[A-Za-z_]\w*(?:\s*\.\s*[xyz])?|\d+)"
_PRODUCT = rf"{_FACTOR}(?:\s*\*\s*{_FACTOR})*"


@dataclass(frozen=True)
class Geometry:
    """A kernel's launch shape: the block, and the elements one CTA covers along each axis."""

    block: tuple[int, int, int]
    per_cta: tuple[int, int, int]
    """Elements one CTA covers along x, y, z (the block's extent, or what blockIdx is scaled by;
    1 for one CTA per element)."""


def evaluate(text: str, consts: Mapping[str, int]) -> int | None:
    """The value of a constant C expression over `consts`, or None."""
    env = {k: AddressForm((), int(v)) for k, v in consts.items()}
    form = index_form(text.strip(), env)
    if form is None or form.terms or form.ops - {"mul", "div", "shift", "mask", "or", "xor"}:
        return None
    return int(form.const)


def _scaled(body: str, axis: str, consts: Mapping[str, int]) -> tuple[int | None, int | None]:
    """(constant stride, multiple of blockDim) that ``blockIdx.<axis>`` is multiplied by, if any."""
    stride: int | None = None
    multiple: int | None = None
    pat = re.compile(rf"blockIdx\s*\.\s*{axis}\s*\*\s*({_PRODUCT})|({_PRODUCT})\s*\*\s*blockIdx\s*\.\s*{axis}\b")
    for m in pat.finditer(body):
        factors = [f.strip() for f in (m.group(1) or m.group(2)).split("*")]
        dims = [f for f in factors if re.fullmatch(r"blockDim\s*\.\s*" + axis, f)]
        rest = [f for f in factors if f not in dims]
        value = 1
        for f in rest:
            v = evaluate(f, consts)
            if v is None:
                value = 0
                break
            value *= v
        if value <= 0:
            continue
        if dims:
            multiple = max(multiple or 1, value)
        else:
            stride = value if stride is None else max(stride, value)
    return stride, multiple


def _shared_caps(body: str, text: str, consts: Mapping[str, int]) -> dict[str, int]:
    """Axis -> the most threads a fixed shared array indexed by that thread index allows."""
    caps: dict[str, int] = {}
    for m in re.finditer(r"__shared__\s+[\w\s:<>,]+?\s+([A-Za-z_]\w*)\s*((?:\[[^\[\]]+\]\s*)+);", text):
        dims = [evaluate(d, consts) for d in re.findall(r"\[([^\[\]]+)\]", m.group(2))]
        for use in re.finditer(rf"\b{re.escape(m.group(1))}\s*\[", body):
            i = use.end() - 1
            for k in range(len(dims)):
                if i >= len(body) or body[i] != "[":
                    break
                close = match_bracket(body, i)
                if close < 0:
                    break
                sub = body[i + 1:close - 1].strip()
                am = re.fullmatch(r"threadIdx\s*\.\s*([xyz])", sub)
                if am and dims[k]:
                    caps[am.group(1)] = min(caps.get(am.group(1), MAX_BLOCK), int(dims[k]))  # type: ignore[arg-type]
                i = close
                while i < len(body) and body[i] == " ":
                    i += 1
    return caps


def launch_geometry(body: str, text: str, dims: int, consts: Mapping[str, int], max_threads: int | None) -> Geometry:
    """The `Geometry` of a kernel whose body is `body` in the file `text` (for its shared arrays),
    using `dims` thread-index axes, with `consts` the compile-time integers in scope (macros,
    constexprs, template arguments) and `max_threads` its launch bounds (see the module docstring)."""
    limit = min(max_threads or MAX_BLOCK, MAX_BLOCK)
    block = list(DEFAULT_BLOCKS[dims])
    per = [0, 0, 0]
    hinted = [False, False, False]
    for k in range(dims):
        axis = _AXES[k]
        stride, multiple = _scaled(body, axis, consts)
        if stride is not None and stride <= limit and (k > 0 or max_threads is None or stride <= max_threads):
            block[k], per[k], hinted[k] = stride, stride, True
        elif stride is not None:
            per[k] = stride  # more elements than threads per CTA: items per thread
        elif multiple is not None:
            per[k] = -multiple  # blockDim times this: resolved once the block is known
        elif re.search(rf"blockIdx\s*\.\s*{axis}\b(?!\s*\*)", body) and not re.search(
                rf"(?:[\w.)\]]\s*\*\s*)blockIdx\s*\.\s*{axis}|blockIdx\s*\.\s*{axis}\s*\*", body):
            per[k] = 1  # blockIdx.x alone: one CTA per element (a row per CTA)
    if dims == 1 and not hinted[0] and max_threads:
        block[0] = max_threads
    for axis, cap in _shared_caps(body, text, consts).items():
        k = _AXES.index(axis)
        if k < dims and block[k] > cap:
            block[k] = cap
    while block[0] * block[1] * block[2] > limit:
        k = max((k for k in range(3) if not hinted[k] or all(hinted)), key=lambda k: block[k])
        if block[k] <= 1:
            break
        block[k] //= 2
    block = [max(1, b) for b in block]
    cover = [block[k] if per[k] == 0 else (-per[k] * block[k] if per[k] < 0 else per[k]) for k in range(3)]
    return Geometry((block[0], block[1], block[2]), (cover[0], cover[1], cover[2]))
