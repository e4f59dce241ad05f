"""The .tptrace file: one self-contained, versioned, compressed zip of NumPy arrays and JSON.

Layout (format version 3; versions 1 and 2 still load):

- ``tptrace.json``: format, version, launch, static ops, snapshot rule (and ``snapshot_warm``, how
  many of the snapshot's first CTAs only warm the caches, when any do), provenance, sources
  (the source text itself), and the declared dtype and shape of every array member;
- ``<name>.npy``: arrays, read with ``allow_pickle=False``.

Lane addresses are stored compactly: within each group of accesses of one static op by one warp,
every lane stores its address minus its own previous address (its first one: minus the access's
lowest active lane address, ``addr_base``, itself differenced along the group), in units of the
largest power of two dividing all addresses, in the narrowest integer type, with the bytes of
each array grouped by significance before DEFLATE. Strided loops and sorted gathers (CSR columns)
become small repeated integers that compress to a fraction of a byte per lane. Version 2 groups the
bytes of the two address members block by block (``plane_rows`` accesses: every byte plane of the
first block, then of the next), so that one reader inflates each byte once; version 1 grouped
them over the whole member, and its planes need one reader each. Version 3 stores an access
whose active lanes all hold the same value (all moved by one step since their previous access:
a tile walked row by row, a strided loop; inactive lanes always hold 0) as that value alone,
``addr_step``; ``addr_whole`` (one byte per access, 0 or 1) marks the others, whose 32 lanes
``addr_lanes`` holds, in access order. A tiled kernel's shared-memory accesses then inflate a few
bytes each instead of 32 lanes' worth (matmul-tile32: 713 MB of lane values before).

A trace is a file people exchange, so loading treats it as hostile: only a regular file is
opened; every header field is checked for type and range (with the caps of `trace.data`) before
any array is read; every array's size is declared in the header and the total is checked against
a memory budget; members are decompressed in bounded chunks that stop as soon as a stream
outgrows its declaration (decompression bombs cost nothing); warp offsets are proven inside the
arrays before the decoding kernel runs, and the kernel checks every index it reads anyway. Any
problem is a TraceError naming the file and the problem in words. Files are written to a
temporary name and renamed into place.

The address members are never held whole: they stream in a chunk of accesses at a time
(`_Values`: one reader, or for version 1 one per byte plane), and each chunk is decoded at once. The accesses the cache model
replays become uint64 lane addresses; the shared-memory ones, which only the bank-conflict model
and the address pattern read, stay packed as the file differences them (`tuiprof.trace.packed`;
version 3's steps are that form already), so that a tiled kernel's trace takes a few bytes per
shared access instead of 256.
"""

from __future__ import annotations

import errno
import io
import json
import lzma
import math
import os
import re
import struct
import warnings
import zipfile
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NoReturn, TypeVar

import numpy as np

from tuiprof import __version__, units
from tuiprof.arch.spec import LIMITS
from tuiprof.errors import TraceError, TuiprofError
from tuiprof.files import FileRole, cannot_read, open_regular
from tuiprof.glossary import retag
from tuiprof.output import write_bytes_to
from tuiprof.resources import memory_budget
from tuiprof.trace.data import (
    BACKENDS,
    LANES,
    MAX_GRID_CTAS,
    MAX_MEASURED,
    MAX_NAME_CHARS,
    MAX_OP_PTX,
    MAX_OPS,
    MAX_SOURCE_CHARS,
    MAX_SOURCES,
    OP_KINDS,
    SPACES,
    CtaRecords,
    Launch,
    PackedLanes,
    Provenance,
    Snapshot,
    SourceFile,
    StaticOp,
    Trace,
    measured_problem,
)
from tuiprof.trace.packed import lane_addresses
from tuiprof.trace.text import printable, shown_path

_Choice = TypeVar("_Choice", bound=str)
"""One of a fixed set of strings (a Literal type) that a header field must be."""

FORMAT = "tptrace"
VERSION = 3
READS = (1, 2, 3)
"""The format versions this tuiprof loads."""
PLANE_ROWS = 1 << 14
"""Accesses per block of byte planes in the address members (version 2 on)."""
_PLANE_ROWS_RANGE = (1 << 10, 1 << 16)
"""What a file may declare as ``plane_rows``: blocks large enough that the per-block work stays
small beside the bytes, small enough that one block's values stay a few MiB."""
HEADER = "tptrace.json"
SUFFIX = ".tptrace"
MAX_HEADER_BYTES = 16 << 20
"""The JSON header (op table and source text included) is read only up to this size."""
_NPY_HEADER_SLACK = 4096
_CTA_FIELDS = ("insts", "accesses", "sm", "start", "end")
_ADDRESS_ARRAYS = ("addr_base", "addr_step", "addr_lanes")
"""The address members streamed a block at a time (``addr_step`` from version 3 on)."""
_STEP_ARRAYS = ("addr_step", "addr_whole")
"""The members version 3 adds: each access's lane step, and whether it keeps its 32 lanes instead."""


_SHARE_OF_A_WAVE = re.compile(r"\b(0\.\d+|\d(?:\.\d+)?e-\d+) x the (\d+) CTAs")


def _reworded(rule: str) -> str:
    """A snapshot rule as this version words it: papers by their tags (`tuiprof.glossary.retag`), and
    a snapshot smaller than one wave as a share ("1.9% of the 864 CTAs", not "0.0185 x the 864 CTAs")."""
    count = re.match(r"(\d+) consecutive CTAs", rule)

    def share(m: re.Match[str]) -> str:
        resident = int(m.group(2))
        x = int(count.group(1)) / resident if count and resident else float(m.group(1))
        return f"{x:.1%} of the {resident} CTAs"

    return _SHARE_OF_A_WAVE.sub(share, retag(rule))


def _narrow(a: np.ndarray) -> np.ndarray:
    """`a` (integers) in the narrowest signed type that holds every value."""
    if a.size == 0:
        return a.astype(np.int8)
    lo, hi = int(a.min()), int(a.max())
    for dt in (np.int8, np.int16, np.int32):
        info = np.iinfo(dt)
        if info.min <= lo and hi <= info.max:
            return a.astype(dt)
    return a.astype(np.int64)


def _group_order(trace_warp_offsets: np.ndarray, op: np.ndarray, n_ops: int) -> tuple[np.ndarray, np.ndarray]:
    """Order that groups accesses by (warp, op) keeping program order, and each row's group start."""
    n = op.shape[0]
    warp = np.repeat(np.arange(trace_warp_offsets.shape[0] - 1, dtype=np.int64), np.diff(trace_warp_offsets))
    key = warp * max(n_ops, 1) + op.astype(np.int64)
    order = np.argsort(key, kind="stable")
    skey = key[order]
    starts = np.ones(n, dtype=bool)
    starts[1:] = skey[1:] != skey[:-1]
    gstart = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    return order, gstart


def _previous_active(active: np.ndarray, gstart: np.ndarray) -> np.ndarray:
    """For each (row, lane): the last earlier row of the same group where the lane was active, or -1."""
    n = active.shape[0]
    last = np.maximum.accumulate(np.where(active, np.arange(n)[:, None], -1), axis=0)
    prev = np.full_like(last, -1)
    prev[1:] = last[:-1]
    prev[prev < gstart[:, None]] = -1
    return prev


def encode_addresses(t: Trace) -> tuple[dict[str, np.ndarray], int]:
    """addr [R,32] -> (differenced bases and lane deltas, address unit); see the module docstring.

    Within a group of accesses (same warp, same op, program order) each active lane stores its
    address minus the same lane's previous address in the group; a lane's first address in the
    group is stored relative to the access's base (its lowest active lane). Sorted gathers
    (CSR columns) and strided loops become small numbers. All values are divided by the largest
    power of two dividing every address (the unit), usually the element size. An access whose
    active lanes all hold one value keeps only that value (`lane_steps`; version 3).
    """
    n = t.n_accesses
    if n == 0:
        return {"addr_base": np.zeros(0, np.int8), "addr_step": np.zeros(0, np.int8), "addr_whole": np.zeros(0, np.uint8),
                "addr_lanes": np.zeros((0, LANES), np.int8)}, 1
    order, gstart = _group_order(t.warp_offsets, t.op, len(t.ops))
    lanes = np.arange(LANES, dtype=np.uint32)
    active = ((t.mask[order, None] >> lanes) & 1).astype(bool)
    addr = lane_addresses(t)[order]
    nonzero = np.bitwise_or.reduce(addr[active]) if active.any() else np.uint64(0)
    unit = int(nonzero & (~nonzero + np.uint64(1))) if nonzero else 1
    unit = min(unit, 1 << 16)
    addr = (addr // np.uint64(unit)).view(np.int64)
    base = addr[np.arange(n), np.argmax(active, axis=1)]
    prev = _previous_active(active, gstart)
    ref = np.where(prev >= 0, addr[np.maximum(prev, 0), lanes], base[:, None])
    lane_diff = np.where(active, addr - ref, 0)
    del addr, ref, prev
    inner = gstart != np.arange(n)
    base_prev = np.zeros_like(base)
    base_prev[inner] = base[np.nonzero(inner)[0] - 1]
    # Back to record order (the decoder walks each warp's accesses in program order).
    base_out, lanes_out = np.empty_like(base), np.empty_like(lane_diff)
    base_out[order], lanes_out[order] = base - base_prev, lane_diff
    del lane_diff
    step, whole = lane_steps(lanes_out, t.mask)
    return {"addr_base": _narrow(base_out), "addr_step": _narrow(step), "addr_whole": whole.astype(np.uint8),
            "addr_lanes": _narrow(lanes_out[whole])}, unit


def lane_steps(lane_vals: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(step int64 [R], whole bool [R]) of differenced lane values (int64 [R, 32], inactive lanes
    0) and their active `mask`s: where every active lane holds the same value, that value and
    False (the access is kept as its step); elsewhere 0 and True (it keeps its 32 lanes)."""
    n = lane_vals.shape[0]
    step = np.zeros(n, np.int64)
    whole = np.zeros(n, dtype=bool)
    lanes = np.arange(LANES, dtype=np.uint32)
    for lo in range(0, n, PLANE_ROWS):  # a block at a time: the temporaries stay small
        v, m = lane_vals[lo:lo + PLANE_ROWS], mask[lo:lo + PLANE_ROWS].astype(np.uint32)
        active = ((m[:, None] >> lanes) & 1).astype(bool)
        first = v[np.arange(v.shape[0]), np.argmax(active, axis=1)]
        alike = np.all(~active | (v == first[:, None]), axis=1)
        step[lo:lo + v.shape[0]] = np.where(alike, first, 0)
        whole[lo:lo + v.shape[0]] = ~alike
    return step, whole


def _dependency_error(exc: ImportError) -> TuiprofError:
    return TuiprofError(f"cannot load traces: a dependency failed to import ({printable(str(exc), 200)})",
                        "reinstall tuiprof with its dependencies (python -m pip install --force-reinstall tuiprof, "
                        "or -e . in a checkout), and check that the installed Numba supports the installed NumPy")


def planes(a: np.ndarray) -> np.ndarray:
    """Byte planes ([itemsize, n] uint8) of an integer array, as the file stores them."""
    k = a.dtype.itemsize
    u = np.ascontiguousarray(a).reshape(-1).view(f"<u{k}")
    out = np.empty((k, u.shape[0]), dtype=np.uint8)
    for j in range(k):  # one contiguous pass per byte plane: far faster than a strided transpose
        out[j] = (u >> u.dtype.type(8 * j)).astype(np.uint8)
    return out


def from_planes(b: np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Inverse of `planes`."""
    k = dtype.itemsize
    u = np.zeros(b.shape[1], dtype=f"<u{k}")
    for j in range(k):
        u |= b[j].astype(u.dtype) << u.dtype.type(8 * j)
    return u.view(dtype).reshape(shape)


def blocked_planes(a: np.ndarray, rows: int) -> np.ndarray:
    """The bytes (uint8 [itemsize * a.size]) of an integer array as versions 2 and 3 store an address
    member: the byte planes (`planes`) of its first `rows` rows, then of the next `rows`, ..."""
    return np.concatenate([planes(a[lo:lo + rows]).reshape(-1) for lo in range(0, a.shape[0], rows)]
                          or [np.zeros(0, np.uint8)])


def _launch_json(L: Launch) -> dict[str, Any]:
    return {"kernel": L.kernel, "grid": list(L.grid), "block": list(L.block),
            "registers_per_thread": L.registers_per_thread, "static_shared": L.static_shared,
            "dynamic_shared": L.dynamic_shared, "ctas_per_sm": L.ctas_per_sm}


def _op_json(o: StaticOp, with_ptx: bool = True) -> dict[str, Any]:
    """One op as the header keeps it; the fields added since version 1 only when they say
    something (older readers ignore them, and 65,536 default ops keep the header's size)."""
    out = {"id": o.id, "kernel": o.kernel, "kind": o.kind, "space": o.space, "bytes": o.bytes,
           "file": o.file, "line": o.line, "column": o.column, "ptx_line": o.ptx_line,
           "starts_sequence": o.starts_sequence, "label": cut_label(o.label)}
    if o.barrier_after:
        out["barrier_after"] = list(o.barrier_after)
    if o.ptx and with_ptx:
        out["ptx"] = [list(x) for x in o.ptx]
    return out


def cut_label(label: str) -> str:
    """An op label as the file keeps it: at most MAX_NAME_CHARS characters, a longer one cut
    visibly (ending in an ellipsis). A label is only shown, so cutting it loses nothing the
    model uses; a kernel or file name is an identity and is refused instead (`save_trace`)."""
    return label if len(label) <= MAX_NAME_CHARS else label[:MAX_NAME_CHARS - 1] + "\u2026"


def trace_arrays(t: Trace) -> tuple[dict[str, np.ndarray], int]:
    """Every array member of the file, encoded, and the address unit."""
    n_ops = len(t.ops)
    addresses, unit = encode_addresses(t)
    arrays: dict[str, np.ndarray] = {
        "warp_lengths": _narrow(np.diff(t.warp_offsets)),
        "warp_cta": t.warp_cta,
        "warp_index": _narrow(t.warp_index.astype(np.int64)),
        "snapshot_cta_ids": _narrow(t.snapshot.cta_ids),
        "op": (t.op.astype(np.uint8) if n_ops <= 256 else t.op.astype(np.uint16) if n_ops <= 65536 else t.op),
        "mask": t.mask,
        **addresses,
    }
    for name in _CTA_FIELDS:
        a = getattr(t.ctas, name)
        if a is not None:
            arrays[f"cta_{name}"] = _narrow(a)
    return arrays, unit


def save_trace(t: Trace, path: str | os.PathLike[str], *, compression: str = "deflate",
               protect: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """Write `t` to `path` as `tuiprof.output` writes every file: atomically for a regular file,
    never over the inputs in `protect`."""
    path = Path(path)
    arrays, unit = trace_arrays(t)
    header = {
        "format": FORMAT, "version": VERSION, "writer": f"tuiprof {__version__}",
        "launch": _launch_json(t.launch),
        "ops": [_op_json(o) for o in t.ops],
        "snapshot_rule": t.snapshot.rule,
        **({"snapshot_warm": t.snapshot.warm} if t.snapshot.warm else {}),
        "provenance": {"backend": t.provenance.backend, "arch": t.provenance.arch, "gpu": t.provenance.gpu,
                       "tool_version": t.provenance.tool_version, "date": t.provenance.date,
                       "generator": t.provenance.generator, "measured": t.provenance.measured},
        "sources": [{"name": s.name, "text": s.text} for s in t.sources],
        "counts": {"accesses": t.n_accesses, "warps": t.n_warps, "snapshot_ctas": t.snapshot.n_ctas},
        "address_unit": unit,
        "arrays": {k: {"dtype": v.dtype.str, "shape": list(v.shape), "shuffled": v.dtype.itemsize > 1,
                       **({"plane_rows": PLANE_ROWS} if k in _ADDRESS_ARRAYS and v.dtype.itemsize > 1 else {})}
                   for k, v in arrays.items()},
    }
    method = {"deflate": zipfile.ZIP_DEFLATED, "lzma": zipfile.ZIP_LZMA}[compression]
    if any(o.ptx for o in t.ops) and _header_bytes(header) > MAX_HEADER_BYTES:
        header["ops"] = [_op_json(o, with_ptx=False) for o in t.ops]  # only shown: the first to go
    header_json = _checked_header(path, header)

    def member(name: str) -> zipfile.ZipInfo:
        # A fixed timestamp: the same trace gives the same bytes (demo files do not churn).
        info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = method
        info.external_attr = 0o644 << 16
        return info

    def write(fh: BinaryIO) -> None:
        with zipfile.ZipFile(fh, "w", compression=method) as zf:
            zf.writestr(member(HEADER), header_json)
            for name, a in arrays.items():
                buf = io.BytesIO()
                if a.dtype.itemsize == 1:
                    stored = np.ascontiguousarray(a)
                elif name in _ADDRESS_ARRAYS:
                    stored = blocked_planes(a, PLANE_ROWS)
                else:
                    stored = planes(a)
                np.lib.format.write_array(buf, stored, allow_pickle=False)
                zf.writestr(member(f"{name}.npy"), buf.getvalue())

    write_bytes_to(os.fspath(path), write, protect=protect)
    return path


def _header_text(header: dict[str, Any]) -> bytes:
    return json.dumps(header, separators=(",", ":"), allow_nan=False).encode()


def _header_bytes(header: dict[str, Any]) -> int:
    try:
        return len(_header_text(header))
    except (TypeError, ValueError):
        return 0  # _checked_header names the problem


def _checked_header(path: Path, header: dict[str, Any]) -> bytes:
    """The header as the file stores it, once the loader's own checks (`_parse_header`, with the
    caps of `trace.data`, and `MAX_HEADER_BYTES`) accept it: the writer and the reader share one
    set of limits, so every file tuiprof writes loads again; a trace past them is refused
    (TraceError) before a byte is written."""
    def refuse(what: str) -> NoReturn:
        raise TraceError(f"cannot write {shown_path(path)}: the trace exceeds what a .tptrace file holds: {what}",
                         "record a smaller launch (fewer CTAs, a shorter source); these are tuiprof's limits, "
                         "not CUDA's")

    _parse_header(path, header, refuse)
    try:
        text = _header_text(header)
    except (TypeError, ValueError) as exc:
        refuse(f"its provenance holds a value JSON cannot keep ({printable(str(exc), 80)})")
    if len(text) > MAX_HEADER_BYTES:
        refuse(f"its header (op table and source text) is {units.size(len(text))}, more than the "
               f"{units.size(MAX_HEADER_BYTES)} a reader accepts")
    return text


# --- loading ------------------------------------------------------------------------------------

_HINT = "record the trace again, or pass a demo name such as spmv-u (see `tuiprof demos`)"
_CHUNK = 1 << 20
_MAX_MEMBERS = 64
_MAX_LZMA_DICT = 1 << 26
_MAX_DIM = 1 << 40
_MAX_DEPTH = 8
_DTYPES = frozenset({"|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8"})
"""Integer types the writer uses (little-endian, as NumPy spells them)."""
_ACCESS_ARRAYS = ("op", "mask", *_ADDRESS_ARRAYS, *_STEP_ARRAYS)
_WARP_ARRAYS = ("warp_lengths", "warp_cta", "warp_index")
_REQUIRED = (*_WARP_ARRAYS, "snapshot_cta_ids", "op", "mask", "addr_base", "addr_lanes")
"""The members of every version (`_STEP_ARRAYS` too from version 3 on)."""
_T = TypeVar("_T")
_FALLBACK = "its contents are damaged in a way this tuiprof cannot decode"
"""The message of last resort (a loader bug if ever seen: the fuzz tests check it never is)."""
_DAMAGE = (ValueError, TypeError, KeyError, IndexError, OverflowError, EOFError, struct.error, zipfile.BadZipFile,
           zlib.error, lzma.LZMAError)
"""What parsing and decoding damaged bytes can raise (UnicodeError is a ValueError). Anything
else while loading (a RuntimeError from Numba, an AttributeError) is a tuiprof bug, and is
reported as one rather than as damage."""


def _bad(path: Path, what: str) -> TraceError:
    return TraceError(f"{shown_path(path)} is not a valid .tptrace file: {what}", _HINT)


def _expect(cond: bool, path: Path, what: str) -> None:
    if not cond:
        raise _bad(path, what)


TRACE_FILE = FileRole(noun="", expected="a .tptrace file", error=TraceError,
                      missing_hint="check the path, or pass a demo name such as spmv-u",
                      other_hint="save the trace to a file first, then pass that file",
                      folder_hint="pass the trace file itself")
"""How `tuiprof.files` names a trace in its messages."""


def _reading(path: Path, read: Callable[[BinaryIO], _T]) -> _T:
    """`read` applied to the opened file: every failure of the file becomes a TraceError about
    `path`; a failed import (the installation: the decoder imports Numba on first use) or any
    other exception (a tuiprof bug) becomes a TuiprofError that says so, never a verdict on the
    file."""
    with open_regular(path, TRACE_FILE) as fh:
        try:
            return read(fh)
        except TuiprofError:
            raise
        except MemoryError:
            raise TraceError(f"{shown_path(path)} is too large to load: it needs more memory than is available",
                             "close other programs, or profile a smaller snapshot (fewer CTAs)") from None
        except RecursionError:
            raise _bad(path, "its header is nested too deeply") from None
        except OSError as exc:
            raise cannot_read(path, exc, TRACE_FILE) from None
        except ImportError as exc:  # the decoder, or a module it imports: the installation's fault
            raise _dependency_error(exc) from exc
        except _DAMAGE as exc:
            raise _bad(path, _FALLBACK) from exc
        except Exception as exc:
            raise TuiprofError(f"loading {shown_path(path)} failed: {type(exc).__name__}: {printable(str(exc), 200)}",
                               "this is a tuiprof bug; please report it with the trace") from exc


def load_trace(path: str | os.PathLike[str]) -> Trace:
    """Read and validate a .tptrace file. Any problem with the file raises TraceError naming the
    file and what is wrong (any other failure, a TuiprofError saying whose it is); memory stays
    within the sizes the header declares (and `tuiprof.resources.memory_budget`)."""
    path = Path(path)
    return _reading(path, lambda fh: _load(path, fh))


def read_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON header of a .tptrace file, validated like `load_trace` does (cheap: no array
    is decompressed)."""
    path = Path(path)

    def read(fh: BinaryIO) -> dict[str, Any]:
        zf, infos = _open_zip(path, fh)
        with zf:
            header = _read_json(path, fh, infos)
        _parse_header(path, header)
        return header

    return _reading(path, read)


def _open_zip(path: Path, fh: BinaryIO) -> tuple[zipfile.ZipFile, dict[str, zipfile.ZipInfo]]:
    """The zip directory of the file: every member by name, each one readable by `_member`."""
    try:
        zf = zipfile.ZipFile(fh)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, None):  # a real read error; EINVAL: a seek before the start
            raise
        raise _bad(path, "not a tptrace container (a damaged zip directory)") from None
    except Exception:  # zipfile raises BadZipFile, and on some damage ValueError or struct.error
        raise _bad(path, "not a tptrace container (not a zip file, or a damaged or truncated one)") from None
    infos = zf.infolist()
    if len(infos) > _MAX_MEMBERS:
        zf.close()
        raise _bad(path, f"it has {len(infos)} members; a tptrace has at most {_MAX_MEMBERS}")
    return zf, {i.filename: i for i in infos}


def _member(path: Path, fh: BinaryIO, info: zipfile.ZipInfo, limit: int, what: str, declared: bool = True) -> bytearray:
    """The uncompressed bytes of zip member `info`, decompressed in bounded chunks (`_Stream`).

    Output never exceeds `limit` (what the JSON header declares) nor the size the zip directory
    gives: a stream that goes on past it is refused, so a decompression bomb costs at most
    `limit` bytes. The checksum is verified."""
    stream = _Stream(path, fh, info, what, limit, declared)
    out = stream.read(info.file_size)
    stream.finish()
    if zlib.crc32(out) != info.CRC:
        raise _bad(path, f"{what} fails its checksum (damaged file)")
    return out


def _lzma_decompressor(path: Path, fh: BinaryIO, what: str, compress_size: int) -> Any:
    """A raw LZMA1 decompressor from the 9-byte header of a zip LZMA member (zip method 14)."""
    head = fh.read(9)
    if compress_size < 9 or len(head) < 9 or struct.unpack("<H", head[2:4])[0] != 5:
        raise _bad(path, f"{what} has a damaged LZMA header")
    props, dict_size = head[4], struct.unpack("<I", head[5:9])[0]
    if props >= 9 * 5 * 5 or dict_size > _MAX_LZMA_DICT:
        raise _bad(path, f"{what} has an LZMA header this tuiprof does not accept (dictionary of {dict_size:,} bytes)")
    lc, rest = props % 9, props // 9
    return lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA1, "dict_size": dict_size,
                                                            "lc": lc, "lp": rest % 5, "pb": rest // 5}])


def _read_json(path: Path, fh: BinaryIO, infos: dict[str, zipfile.ZipInfo]) -> dict[str, Any]:
    """The header member, parsed (at most MAX_HEADER_BYTES of JSON), with its format and version
    checked."""
    _expect(HEADER in infos, path, "it has no tptrace.json header (a foreign zip file?)")
    raw = _member(path, fh, infos[HEADER], MAX_HEADER_BYTES, "the tptrace.json header", declared=False)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _bad(path, "its header is not UTF-8 text") from None
    del raw
    try:
        header = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _bad(path, f"its header is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except ValueError:  # an integer of thousands of digits
        raise _bad(path, "its header holds a number too long to read") from None
    _expect(isinstance(header, dict) and header.get("format") == FORMAT, path, "not a tptrace header")
    version = header.get("version")
    if isinstance(version, bool) or version not in READS:
        raise TraceError(f"{shown_path(path)} is tptrace version {_show(version)}; this tuiprof reads versions "
                         f"{', '.join(map(str, READS[:-1]))} and {READS[-1]}",
                         "upgrade tuiprof, or record the trace again with this version")
    return header


# --- the header, field by field -----------------------------------------------------------------

_MISSING: Any = object()


def _show(v: object) -> str:
    """A JSON value as a message quotes it: short, printable."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        text = repr(v)
        return text if len(text) <= 24 else f"a number of {len(text)} digits"
    if isinstance(v, str):
        return f"'{printable(v, 40)}'"
    return "a list" if isinstance(v, list) else "an object"


class _Fields:
    """Checked reads of the JSON header: a missing, mistyped or out-of-range field is a
    TraceError that names it (``launch.grid[0]``) in words."""

    def __init__(self, path: Path, refuse: Callable[[str], NoReturn] | None = None) -> None:
        self.path = path
        self.refuse = refuse

    def fail(self, what: str) -> NoReturn:
        if self.refuse is not None:
            self.refuse(what)
        raise _bad(self.path, what)

    def get(self, obj: dict[str, Any], key: str, where: str, default: Any = _MISSING) -> Any:
        if key in obj:
            return obj[key]
        if default is _MISSING:
            self.fail(f"{where} is missing")
        return default

    def table(self, obj: dict[str, Any], key: str, where: str, default: Any = _MISSING) -> dict[str, Any]:
        v = self.get(obj, key, where, default)
        if not isinstance(v, dict):
            self.fail(f"{where} must be an object of named fields, not {_show(v)}")
        return v

    def items(self, obj: dict[str, Any], key: str, where: str, max_items: int, default: Any = _MISSING) -> list[Any]:
        v = self.get(obj, key, where, default)
        if not isinstance(v, list):
            self.fail(f"{where} must be a list, not {_show(v)}")
        if len(v) > max_items:
            self.fail(f"{where} has {len(v):,} entries, more than the {max_items:,} this tuiprof accepts")
        return v

    def whole(self, v: Any, where: str, lo: int, hi: int) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            self.fail(f"{where} must be a whole number from {lo:,} to {hi:,}, not {_show(v)}")
        return v

    def integer(self, obj: dict[str, Any], key: str, where: str, lo: int, hi: int, default: Any = _MISSING) -> int:
        return self.whole(self.get(obj, key, where, default), where, lo, hi)

    def text(self, obj: dict[str, Any], key: str, where: str, max_chars: int = MAX_NAME_CHARS,
             default: Any = _MISSING) -> str:
        v = self.get(obj, key, where, default)
        if not isinstance(v, str):
            self.fail(f"{where} must be text, not {_show(v)}")
        if len(v) > max_chars:
            self.fail(f"{where} is {len(v):,} characters long, more than the {max_chars:,} this tuiprof accepts")
        return v

    def ptx_entry(self, v: Any, where: str) -> tuple[int, str]:
        """A ``[PTX line, instruction]`` pair of `StaticOp.ptx`."""
        if not isinstance(v, list) or len(v) != 2:
            self.fail(f"{where} must be a [PTX line, instruction] pair, not {_show(v)}")
        return self.whole(v[0], f"{where}[0]", 0, 2**31 - 1), self.text({"x": v[1]}, "x", f"{where}[1]")

    def choice(self, obj: dict[str, Any], key: str, where: str, choices: tuple[_Choice, ...]) -> _Choice:
        v = self.text(obj, key, where)
        if v not in choices:
            self.fail(f"{where} must be one of {', '.join(choices)}, not {_show(v)}")
        return v

    def flag(self, obj: dict[str, Any], key: str, where: str, default: Any = _MISSING) -> bool:
        v = self.get(obj, key, where, default)
        if not isinstance(v, bool):
            self.fail(f"{where} must be true or false, not {_show(v)}")
        return v

    def plain(self, v: Any, where: str, depth: int = 0) -> None:
        """`v` is JSON data a report can print back: finite numbers, at most _MAX_DEPTH deep."""
        if depth > _MAX_DEPTH:
            self.fail(f"{where} is nested more than {_MAX_DEPTH} levels deep")
        if isinstance(v, float) and not math.isfinite(v):
            self.fail(f"{where} must be a finite number, not {_show(v)}")
        if isinstance(v, dict):
            for k, x in v.items():
                self.plain(x, f"{where}.{printable(k, 40)}", depth + 1)
        elif isinstance(v, list):
            for i, x in enumerate(v):
                self.plain(x, f"{where}[{i}]", depth + 1)


@dataclass(frozen=True)
class _ArraySpec:
    """One array member as the header declares it."""

    dtype: np.dtype
    shape: tuple[int, ...]
    shuffled: bool
    plane_rows: int = 0
    """Rows per block of byte planes (address members from version 2 on); 0: planes of the whole array."""

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def stored(self) -> tuple[np.dtype, tuple[int, ...]]:
        """dtype and shape of the .npy member (byte planes when shuffled)."""
        if self.shuffled and self.plane_rows:
            return np.dtype(np.uint8), (self.dtype.itemsize * self.size,)
        if self.shuffled:
            return np.dtype(np.uint8), (self.dtype.itemsize, self.size)
        return self.dtype, self.shape

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize


@dataclass(frozen=True)
class _Header:
    """The validated JSON header: the trace's metadata and the arrays to read."""

    launch: Launch
    ops: tuple[StaticOp, ...]
    provenance: Provenance
    sources: tuple[SourceFile, ...]
    rule: str
    warm: int
    accesses: int
    warps: int
    unit: int
    arrays: dict[str, _ArraySpec]


def _parse_header(path: Path, h: dict[str, Any], refuse: Callable[[str], NoReturn] | None = None) -> _Header:
    """Every field of the header checked for presence, type and range, and the declared arrays
    checked against the counts, before anything else is read. The writer checks what it is about
    to write with it too, `refuse` saying why it will not (`_check_writable`)."""
    f = _Fields(path, refuse)
    L = f.table(h, "launch", "launch")
    grid = f.items(L, "grid", "launch.grid", 3)
    block = f.items(L, "block", "launch.block", 3)
    if len(grid) != 3 or len(block) != 3:
        f.fail("launch.grid and launch.block need 3 dimensions each")
    grid_t = tuple(f.whole(x, f"launch.grid[{i}]", 1, 2**31 - 1) for i, x in enumerate(grid))
    block_t = tuple(f.whole(x, f"launch.block[{i}]", 1, 1024) for i, x in enumerate(block))
    if math.prod(grid_t) > MAX_GRID_CTAS:
        f.fail(f"launch.grid has {math.prod(grid_t):,} CTAs, more than the {MAX_GRID_CTAS:,} this tuiprof accepts")
    if math.prod(block_t) > 1024:
        f.fail(f"launch.block has {math.prod(block_t):,} threads; CUDA allows at most 1,024 per block")
    launch = Launch(kernel=f.text(L, "kernel", "launch.kernel"), grid=grid_t, block=block_t,  # type: ignore[arg-type]
                    registers_per_thread=f.integer(L, "registers_per_thread", "launch.registers_per_thread", 0, 255),
                    static_shared=f.integer(L, "static_shared", "launch.static_shared", 0, 1 << 20, 0),
                    dynamic_shared=f.integer(L, "dynamic_shared", "launch.dynamic_shared", 0, 1 << 20, 0),
                    ctas_per_sm=f.integer(L, "ctas_per_sm", "launch.ctas_per_sm", 0, 1024, 0))
    ops = []
    for i, o in enumerate(f.items(h, "ops", "ops", MAX_OPS)):
        w = f"ops[{i}]"
        if not isinstance(o, dict):
            f.fail(f"{w} must be an object of named fields, not {_show(o)}")
        if f.get(o, "id", f"{w}.id") != i or isinstance(o["id"], bool):
            f.fail(f"{w}.id must be {i} (ops are numbered in order), not {_show(o['id'])}")
        ops.append(StaticOp(id=i, kernel=f.text(o, "kernel", f"{w}.kernel"), kind=f.choice(o, "kind", f"{w}.kind", OP_KINDS),
                            space=f.choice(o, "space", f"{w}.space", SPACES),
                            bytes=f.integer(o, "bytes", f"{w}.bytes", 1, 128), file=f.text(o, "file", f"{w}.file"),
                            line=f.integer(o, "line", f"{w}.line", 0, 2**31 - 1),
                            column=f.integer(o, "column", f"{w}.column", 0, 2**31 - 1, 0),
                            ptx_line=f.integer(o, "ptx_line", f"{w}.ptx_line", 0, 2**31 - 1, 0),
                            starts_sequence=f.flag(o, "starts_sequence", f"{w}.starts_sequence", False),
                            barrier_after=tuple(f.whole(x, f"{w}.barrier_after[{k}]", 0, MAX_OPS - 1) for k, x in
                                                enumerate(f.items(o, "barrier_after", f"{w}.barrier_after", MAX_OPS,
                                                                  default=[]))),
                            label=f.text(o, "label", f"{w}.label", default=""),
                            ptx=tuple(f.ptx_entry(x, f"{w}.ptx[{k}]")
                                      for k, x in enumerate(f.items(o, "ptx", f"{w}.ptx", MAX_OP_PTX, default=[])))))
    for o in ops:
        if any(p >= len(ops) for p in o.barrier_after):
            f.fail(f"ops[{o.id}].barrier_after names op {max(o.barrier_after)}; there are {len(ops)} ops")
    P = f.table(h, "provenance", "provenance")
    generator = f.table(P, "generator", "provenance.generator", {})
    f.plain(generator, "provenance.generator")
    measured = f.table(P, "measured", "provenance.measured", {})
    if len(measured) > MAX_MEASURED:
        f.fail(f"provenance.measured has {len(measured):,} entries, more than the {MAX_MEASURED} this tuiprof accepts")
    for k, v in measured.items():
        problem = measured_problem(k, v)
        if problem == "must be a finite number":
            f.fail(f"provenance.measured.{printable(k, 40)} must be a finite number, not {_show(v)}")
        if problem is not None:
            f.fail(f"provenance.measured.{printable(k, 40)} {problem}")
    prov = Provenance(backend=f.choice(P, "backend", "provenance.backend", BACKENDS),
                      arch=f.text(P, "arch", "provenance.arch"), gpu=f.text(P, "gpu", "provenance.gpu", default=""),
                      tool_version=f.text(P, "tool_version", "provenance.tool_version", default=""),
                      date=f.text(P, "date", "provenance.date", default=""), generator=dict(generator),
                      measured={str(k): float(v) for k, v in measured.items()})
    sources, chars = [], 0
    for i, s in enumerate(f.items(h, "sources", "sources", MAX_SOURCES)):
        if not isinstance(s, dict):
            f.fail(f"sources[{i}] must be an object of named fields, not {_show(s)}")
        name = f.text(s, "name", f"sources[{i}].name")
        text = f.text(s, "text", f"sources[{i}].text", MAX_SOURCE_CHARS)
        chars += len(text)
        sources.append(SourceFile(name=name, text=text))
    if not sources:
        f.fail("it holds no source text")
    if chars > MAX_SOURCE_CHARS:
        f.fail(f"its source text is {chars:,} characters long, more than the {MAX_SOURCE_CHARS:,} this tuiprof accepts")
    C = f.table(h, "counts", "counts")
    n = f.integer(C, "accesses", "counts.accesses", 0, _MAX_DIM)
    n_w = f.integer(C, "warps", "counts.warps", 0, _MAX_DIM)
    n_c = f.integer(C, "snapshot_ctas", "counts.snapshot_ctas", 0, math.prod(grid_t))
    unit = f.integer(h, "address_unit", "address_unit", 1, 1 << 16, 1)
    if unit & (unit - 1):
        f.fail(f"address_unit must be a power of two, not {unit}")
    version = h.get("version")
    stepped = version not in (1, 2)  # version 3: accesses kept as one step, addr_lanes only the others'
    expected = {**{k: (n,) for k in ("op", "mask", "addr_base")}, "addr_lanes": (n, LANES),
                **{k: (n_w,) for k in _WARP_ARRAYS}, "snapshot_cta_ids": (n_c,),
                **{f"cta_{k}": (math.prod(grid_t),) for k in _CTA_FIELDS},
                **({k: (n,) for k in _STEP_ARRAYS} if stepped else {})}
    arrays: dict[str, _ArraySpec] = {}
    for name, spec in f.table(h, "arrays", "arrays").items():
        w = f"arrays.{printable(name, 40)}"
        if name in _STEP_ARRAYS and not stepped:
            f.fail(f"{w} is an array of tptrace version 3, not of version {_show(version)}")
        if name not in expected:
            f.fail(f"{w} is not an array of a tptrace")
        if not isinstance(spec, dict):
            f.fail(f"{w} must be an object of named fields, not {_show(spec)}")
        dtype = f.text(spec, "dtype", f"{w}.dtype", 8)
        if dtype not in _DTYPES:
            f.fail(f"array {name} has type {_show(dtype)}; a tptrace array holds little-endian integers")
        if name == "mask" and dtype != "<u4":
            f.fail(f"array mask has type {_show(dtype)}, not 32-bit unsigned integers ('<u4')")
        shape = tuple(f.whole(x, f"{w}.shape[{i}]", 0, _MAX_DIM) for i, x in enumerate(f.items(spec, "shape", f"{w}.shape", 2)))
        if stepped and name == "addr_lanes":  # the accesses that keep 32 lanes: at most all of them
            if len(shape) != 2 or shape[1] != LANES or shape[0] > n:
                f.fail(f"array addr_lanes has shape {list(shape)}, but the counts make it at most {[n, LANES]} "
                       "(the accesses that keep their 32 lanes)")
        elif shape != expected[name]:
            f.fail(f"array {name} has shape {list(shape)}, but the counts make it {list(expected[name])}")
        if name == "addr_whole" and dtype != "|u1":
            f.fail(f"array addr_whole has type {_show(dtype)}, not bytes ('|u1')")
        shuffled = f.flag(spec, "shuffled", f"{w}.shuffled", False)
        plane_rows = 0
        if "plane_rows" in spec:
            if version == 1 or name not in _ADDRESS_ARRAYS or not shuffled:
                f.fail(f"{w}.plane_rows is only for the byte planes of an address member (version 2 on)")
            plane_rows = f.integer(spec, "plane_rows", f"{w}.plane_rows", *_PLANE_ROWS_RANGE)
        arrays[name] = _ArraySpec(np.dtype(dtype), shape, shuffled, plane_rows)
    for name in _REQUIRED + (_STEP_ARRAYS if stepped else ()):
        if name not in arrays:
            f.fail(f"array {name} missing")
    return _Header(launch=launch, ops=tuple(ops), provenance=prov, sources=tuple(sources),
                   rule=_reworded(f.text(h, "snapshot_rule", "snapshot_rule", default="")),
                   warm=f.integer(h, "snapshot_warm", "snapshot_warm", 0, max(n_c - 1, 0), 0), accesses=n, warps=n_w, unit=unit,
                   arrays=arrays)


def _load_bytes(hd: _Header) -> int:
    """What loading takes at its peak: every member as stored, the decoded arrays (each access's
    32 lane addresses, op id and mask) and the per-warp and per-CTA arrays widened to 64 bits."""
    stored = sum(s.nbytes + _NPY_HEADER_SLACK for s in hd.arrays.values())
    widened = sum(s.size * 8 for name, s in hd.arrays.items() if name not in _ACCESS_ARRAYS)
    return stored + widened + hd.accesses * (LANES * 8 + 4 + 4) + (hd.warps + 1) * 8


def _npy_header(path: Path, name: str, head: bytes | bytearray, spec: _ArraySpec) -> int:
    """The length of an .npy member's header (its first bytes, `head`), once it declares exactly
    the array the tptrace header does (no pickle)."""
    dtype, shape = spec.stored
    try:
        fh = io.BytesIO(head[:_NPY_HEADER_SLACK])
        version = np.lib.format.read_magic(fh)
        read = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}.get(version)
        if read is None:
            raise ValueError(version)
        with warnings.catch_warnings():  # a damaged header must not print Python's syntax warnings
            warnings.simplefilter("ignore")
            got_shape, fortran, got_dtype = read(fh)
    except Exception:  # NumPy parses the header text with ast and tokenize: any of their errors
        raise _bad(path, f"array {name} has a damaged .npy header") from None
    _expect(got_dtype == dtype and tuple(got_shape) == shape and not fortran, path,
            f"array {name} does not match its declaration in the header")
    return fh.tell()


def _read_npy(path: Path, name: str, data: bytearray, spec: _ArraySpec) -> np.ndarray:
    """An .npy member as an array over its bytes (no pickle, no copy), exactly as declared."""
    dtype, shape = spec.stored
    offset = _npy_header(path, name, bytes(data[:_NPY_HEADER_SLACK]), spec)
    count = math.prod(shape)
    _expect(len(data) - offset == count * dtype.itemsize, path, f"array {name} does not hold the data its header declares")
    return np.frombuffer(data, dtype=dtype, count=count, offset=offset).reshape(shape)


class _Stream:
    """The uncompressed bytes of one zip member, read in order a piece at a time (`_member` reads
    one whole; the address members, too large to hold, are read a chunk at a time): never more than the member's
    declared size; `fork` gives an independent reader at the same place (deflate: a copy of the
    decompressor; LZMA, which cannot copy one: a new reader that decompresses up to there)."""

    def __init__(self, path: Path, fh: BinaryIO, info: zipfile.ZipInfo, what: str, limit: int,
                 declared: bool = True) -> None:
        """Refuse a member that is encrypted, larger than `limit` (what the JSON header declares, or
        with `declared` False what is allowed), or not where the zip directory says."""
        if info.flag_bits & 0x1:
            raise _bad(path, f"{what} is encrypted")
        if info.file_size > limit:
            raise _bad(path, f"{what} is larger than {'declared' if declared else 'allowed'} "
                             f"({info.file_size:,} bytes where at most {limit:,} fit)")
        if info.header_offset < 0:
            raise _bad(path, f"{what} lies outside the file (damaged zip directory)")
        fh.seek(info.header_offset)
        local = fh.read(30)
        if len(local) < 30 or local[:4] != b"PK\x03\x04":
            raise _bad(path, f"{what} is missing from the zip data (truncated or damaged file)")
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        self.path, self.fh, self.info, self.what = path, fh, info, what
        self.cpos, self.cleft = info.header_offset + 30 + name_len + extra_len, info.compress_size
        self.pos, self.tail = 0, b""
        self.method = info.compress_type
        self.d: Any = None
        if self.method == zipfile.ZIP_DEFLATED:
            self.d = zlib.decompressobj(-15)
        elif self.method == zipfile.ZIP_LZMA:
            fh.seek(self.cpos)
            self.d = _lzma_decompressor(path, fh, what, info.compress_size)
            self.cpos, self.cleft = self.cpos + 9, self.cleft - 9
        elif self.method != zipfile.ZIP_STORED:
            raise _bad(path, f"{what} uses a compression method this tuiprof does not read (zip method {self.method})")

    def _short(self) -> TraceError:
        return _bad(self.path, f"{self.what} is shorter than the {self.info.file_size:,} bytes declared for it "
                               "(truncated or damaged file)")

    def _input(self) -> bytes:
        if self.tail:
            data, self.tail = self.tail, b""
            return data
        if self.cleft <= 0:
            return b""
        self.fh.seek(self.cpos)
        data = self.fh.read(min(_CHUNK, self.cleft))
        if not data:
            raise _bad(self.path, f"{self.what} is cut short (truncated file)")
        self.cpos += len(data)
        self.cleft -= len(data)
        return data

    def _piece(self, need: int) -> bytes:
        """At most `need` (> 0) more bytes of the member; b"" only at its end."""
        try:
            if self.method == zipfile.ZIP_STORED:
                data = self._input()
                piece, self.tail = data[:need], data[need:]
                return piece
            while not self.d.eof:
                if self.method == zipfile.ZIP_DEFLATED:
                    data = self._input()
                    piece = self.d.decompress(data, need)
                    self.tail = self.d.unconsumed_tail
                else:
                    data = self._input() if self.d.needs_input else b""
                    piece = self.d.decompress(data, need)
                if piece:
                    return piece
                if not data and not self.tail:  # no input left, and none of it gave output
                    break
            return b""
        except (zlib.error, lzma.LZMAError, EOFError):
            raise _bad(self.path, f"{self.what} has damaged compressed data") from None

    def read(self, n: int) -> bytearray:
        """Exactly the next `n` bytes of the member."""
        if self.pos + n > self.info.file_size:
            raise _bad(self.path, f"{self.what} does not hold the data its header declares")
        out = bytearray(n)
        at = 0
        while at < n:
            piece = self._piece(min(n - at, _CHUNK))
            if not piece:
                raise self._short()
            out[at:at + len(piece)] = piece
            at += len(piece)
            self.pos += len(piece)
        return out

    def finish(self) -> None:
        """Refuse a member that goes on past its declared size (damage, or a decompression bomb)
        or whose stream does not end there."""
        if self.pos != self.info.file_size:
            raise self._short()
        if self._piece(1):
            raise _bad(self.path, f"{self.what} decompresses to more than the {self.info.file_size:,} bytes declared "
                                  "for it (damaged, or a decompression bomb)")
        if self.d is not None and not self.d.eof:
            raise _bad(self.path, f"{self.what} has damaged compressed data")

    def fork(self) -> "_Stream":
        twin = _Stream.__new__(_Stream)
        twin.__dict__.update(self.__dict__)
        if self.method == zipfile.ZIP_DEFLATED:
            twin.d = self.d.copy()
        elif self.method == zipfile.ZIP_LZMA:
            twin = _Stream(self.path, self.fh, self.info, self.what, self.info.file_size)
            for at in range(0, self.pos, _CHUNK):
                twin.read(min(_CHUNK, self.pos - at))
        return twin


class _Values:
    """The integers of one address member (`addr_base`, `addr_lanes`), `rows` accesses at a time,
    straight from the file, so the member is never held whole. Version 2's blocked planes
    (``plane_rows``) stream through one reader, each byte inflated once; version 1's planes of
    the whole member need one reader per plane, each at its plane's place. The checksum is
    verified at the end (`finish`)."""

    def __init__(self, path: Path, fh: BinaryIO, info: zipfile.ZipInfo, spec: _ArraySpec, name: str) -> None:
        self.path, self.name, self.spec, self.info = path, name, spec, info
        s = _Stream(path, fh, info, f"array {name}", spec.nbytes + _NPY_HEADER_SLACK)
        head = s.read(min(10, info.file_size))
        if len(head) == 10 and head[:6] == b"\x93NUMPY" and head[6] in (1, 2):
            if head[6] == 1:
                more = struct.unpack("<H", head[8:10])[0]
            else:
                head += s.read(2)
                more = struct.unpack("<I", head[8:12])[0]
            _expect(len(head) + more <= _NPY_HEADER_SLACK, path, f"array {name} has a damaged .npy header")
            head += s.read(more)
        offset = _npy_header(path, name, head, spec)
        self.per_value = spec.shape[1] if len(spec.shape) == 2 else 1  # lanes per access
        self.k = spec.dtype.itemsize if spec.shuffled else 1
        width = self.per_value * (1 if spec.shuffled else spec.dtype.itemsize)
        plane = spec.shape[0] * width
        _expect(info.file_size == offset + self.k * plane, path, f"array {name} does not hold the data its header declares")
        self.width = width
        self.crc = zlib.crc32(head)
        self.cursors = []
        self.left = spec.shape[0]  # rows not yet read from the file
        self.block: np.ndarray | None = None  # version 2 on: the values of the block being served
        self.at = 0
        if not spec.plane_rows:
            for _ in range(self.k - 1):  # a reader at each plane's start, the last one `s` itself
                self.cursors.append(s.fork())
                for at in range(0, plane, _CHUNK):
                    self.crc = zlib.crc32(s.read(min(_CHUNK, plane - at)), self.crc)
        self.cursors.append(s)

    def _values(self, pieces: list[bytearray], rows: int) -> np.ndarray:
        """int64 [rows] or [rows, 32] from the byte planes (`pieces`, one per plane) of `rows` rows."""
        dtype = self.spec.dtype
        if self.spec.shuffled:
            k = dtype.itemsize
            u = np.zeros(rows * self.per_value, dtype=f"<u{k}")
            for j, piece in enumerate(pieces):
                u |= np.frombuffer(piece, np.uint8).astype(u.dtype) << u.dtype.type(8 * j)
            v = u.view(dtype)
        else:
            v = np.frombuffer(pieces[0], dtype=dtype)
        v = v.astype(np.int64)
        return v.reshape(rows, self.per_value) if self.per_value > 1 else v

    def read(self, rows: int) -> np.ndarray:
        """The next `rows` accesses' values, int64 [rows] or [rows, 32]."""
        if not self.spec.plane_rows:
            n = rows * self.width
            pieces = [c.read(n) for c in self.cursors]
            self.crc = zlib.crc32(pieces[-1], self.crc)
            return self._values(pieces, rows)
        if rows == 0:
            return self._values([bytearray()] * self.k, 0)
        parts = []
        need = rows
        while need:
            if self.block is None or self.at == self.block.shape[0]:
                r = min(self.spec.plane_rows, self.left)
                if r == 0:
                    raise _bad(self.path, f"array {self.name} does not hold the data its header declares")
                n = r * self.width
                raw = self.cursors[0].read(self.k * n)
                self.crc = zlib.crc32(raw, self.crc)
                self.block, self.at, self.left = self._values([raw[j * n:(j + 1) * n] for j in range(self.k)], r), 0, self.left - r
            take = min(need, self.block.shape[0] - self.at)
            parts.append(self.block[self.at:self.at + take])
            self.at += take
            need -= take
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def finish(self) -> None:
        self.cursors[-1].finish()
        _expect(self.crc == self.info.CRC, self.path, f"array {self.name} fails its checksum (damaged file)")


def _load(path: Path, fh: BinaryIO) -> Trace:
    zf, infos = _open_zip(path, fh)
    with zf:
        hd = _parse_header(path, _read_json(path, fh, infos))
        need, budget = _load_bytes(hd), memory_budget()
        if need > budget.bytes:
            raise TraceError(f"{shown_path(path)} is too large to load: its {hd.accesses:,} warp accesses need about "
                             f"{units.size(need)} of memory, more than the {units.size(budget.bytes)} allowed here "
                             f"(half {budget.of})", "profile a smaller snapshot (fewer CTAs), or use a machine with more memory")
        arrays: dict[str, np.ndarray] = {}
        for name, spec in hd.arrays.items():
            member = f"{name}.npy"
            _expect(member in infos, path, f"array {name} missing (truncated file?)")
            if name in _ADDRESS_ARRAYS:
                continue  # streamed while decoding (`_Values`)
            data = _member(path, fh, infos[member], spec.nbytes + _NPY_HEADER_SLACK, f"array {name}")
            a = _read_npy(path, name, data, spec)
            arrays[name] = from_planes(a, spec.dtype, spec.shape) if spec.shuffled else a
        values = {name: _Values(path, fh, infos[f"{name}.npy"], hd.arrays[name], name)
                  for name in _ADDRESS_ARRAYS if name in hd.arrays}
        return _build(path, hd, arrays, values)


def _build(path: Path, hd: _Header, arrays: dict[str, np.ndarray], values: dict[str, "_Values"]) -> Trace:
    n, n_ops = hd.accesses, len(hd.ops)
    lengths = arrays["warp_lengths"]
    _expect(lengths.size == 0 or (int(lengths.min()) >= 0 and int(lengths.max()) <= n), path,
            "a warp length is negative or larger than the number of accesses")
    offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, dtype=np.int64, out=offsets[1:])
    # Every length is in 0..n, so an int64 sum that wrapped would fall somewhere: rising offsets
    # that end at n prove every access range is inside the arrays.
    _expect(int(offsets[-1]) == n and bool(np.all(offsets[1:] >= offsets[:-1])), path,
            "warp lengths do not add up to the number of accesses")
    op = arrays["op"]
    _expect(n == 0 or (int(op.min()) >= 0 and int(op.max()) < n_ops), path, "an access names an op id that does not exist")
    op = op.astype(np.int32)
    mask = arrays["mask"]
    _expect(not np.any(mask == 0), path, "an access has no active lane")
    if "addr_step" in values:
        whole = arrays["addr_whole"]
        _expect(not np.any(whole > 1), path, "array addr_whole holds a value other than 0 and 1")
        whole = whole.view(bool)
        kept = int(np.count_nonzero(whole))
        _expect(kept == hd.arrays["addr_lanes"].shape[0], path,
                f"array addr_whole marks {kept:,} accesses as keeping their 32 lanes, but addr_lanes holds "
                f"{hd.arrays['addr_lanes'].shape[0]:,}")
        addr, packed = _decode_stepped(path, hd, offsets, op, mask, whole, values)
    else:
        addr, packed = _decode(path, hd, offsets, op, mask, (values["addr_base"], values["addr_lanes"]))
    ctas = _cta_records(path, arrays)
    try:
        return Trace(launch=hd.launch, ops=hd.ops,
                     snapshot=Snapshot(cta_ids=arrays["snapshot_cta_ids"].astype(np.int64), rule=hd.rule,
                                       warm=hd.warm),
                     warp_offsets=offsets, warp_cta=_int32(path, "warp_cta", arrays["warp_cta"]),
                     warp_index=_int32(path, "warp_index", arrays["warp_index"]), op=op, mask=mask, addr=addr,
                     sources=hd.sources, provenance=hd.provenance, ctas=ctas, packed=packed)
    except TraceError as exc:
        raise _bad(path, exc.message.removeprefix("invalid trace: ")) from None



def _shared_rows(hd: _Header, op: np.ndarray) -> np.ndarray:
    """Which accesses (bool [R]) are of shared-memory ops: their lanes stay packed (`PackedLanes`)."""
    shared = np.array([o.space == "shared" for o in hd.ops], dtype=bool)
    return shared[op] if shared.any() else np.zeros(hd.accesses, dtype=bool)

def _decode(path: Path, hd: _Header, offsets: np.ndarray, op: np.ndarray, mask: np.ndarray,
            values: tuple["_Values", ...]) -> tuple[np.ndarray, PackedLanes | None]:
    """The lane addresses, decoded a chunk of accesses at a time as the file's planes stream in:
    the accesses the cache model replays as uint64 [R', 32]; the shared-memory ones packed, as
    the file differences them, each chunk in its narrowest type (`tuiprof.trace.packed`), so
    their 32 lanes of uint64 are never held whole."""
    from tuiprof.trace.packed import CHUNK, Undelta, pack_chunk  # Numba: imported once a file gets this far

    n = hd.accesses
    base_reader, lane_reader = values
    is_packed = _shared_rows(hd, op)
    n_packed = int(np.count_nonzero(is_packed))
    addr = np.empty((n - n_packed, LANES), dtype=np.uint64)
    state = Undelta(len(hd.ops), hd.unit)
    starts: list[int] = [0]
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    d = 0
    for lo in range(0, n, CHUNK):
        hi = min(lo + CHUNK, n)
        base_vals, lane_vals = base_reader.read(hi - lo), lane_reader.read(hi - lo)
        sel = is_packed[lo:hi]
        if sel.any():
            parts.append(pack_chunk(base_vals[sel], lane_vals[sel], mask[lo:hi][sel]))
            starts.append(starts[-1] + int(np.count_nonzero(sel)))
            keep = ~sel
            base_vals, lane_vals = base_vals[keep], lane_vals[keep]
            rows = np.flatnonzero(keep) + lo
        else:
            rows = np.arange(lo, hi, dtype=np.int64)
        if rows.size:
            warp = np.searchsorted(offsets, rows, side="right") - 1
            if not state.decode(warp, op[rows], base_vals, lane_vals, mask[rows], addr[d:d + rows.size]):
                raise _bad(path, "an index in its arrays points outside them")
            d += rows.size
    for v in values:
        v.finish()
    if not n_packed:
        return addr, None
    bases, steps, odd, lanes = (tuple(x) for x in zip(*parts))
    return addr, PackedLanes(rows=np.flatnonzero(is_packed).astype(np.int64), starts=tuple(starts), bases=bases,
                             steps=steps, odd=odd, lanes=lanes, unit=hd.unit)


def _decode_stepped(path: Path, hd: _Header, offsets: np.ndarray, op: np.ndarray, mask: np.ndarray,
                    whole: np.ndarray, values: dict[str, "_Values"]) -> tuple[np.ndarray, PackedLanes | None]:
    """`_decode` of a version 3 file, whose accesses keep one step unless `whole` (bool [R]) marks
    them as keeping their 32 lanes: the shared-memory ones are kept as they come (the file's form
    is `PackedLanes`'), so that only the lanes of the few whole ones are ever inflated."""
    from tuiprof.trace.packed import CHUNK, Undelta, narrowest

    n = hd.accesses
    is_packed = _shared_rows(hd, op)
    n_packed = int(np.count_nonzero(is_packed))
    addr = np.empty((n - n_packed, LANES), dtype=np.uint64)
    state = Undelta(len(hd.ops), hd.unit)
    starts: list[int] = [0]
    bases: list[np.ndarray] = []
    steps: list[np.ndarray] = []
    odd: list[np.ndarray] = []
    lanes: list[np.ndarray] = []
    base_reader, step_reader, lane_reader = values["addr_base"], values["addr_step"], values["addr_lanes"]
    d = 0
    for lo in range(0, n, CHUNK):
        hi = min(lo + CHUNK, n)
        w = whole[lo:hi]
        base_vals, step_vals = base_reader.read(hi - lo), step_reader.read(hi - lo)
        lane_vals = lane_reader.read(int(np.count_nonzero(w)))
        lane_row = np.cumsum(w, dtype=np.int64) - 1
        lane_row[~w] = -1
        sel = is_packed[lo:hi]
        if sel.any():
            pw = w[sel]
            bases.append(narrowest(base_vals[sel]))
            steps.append(narrowest(step_vals[sel]))
            odd.append(np.flatnonzero(pw).astype(np.int32))
            lanes.append(narrowest(lane_vals[lane_row[sel][pw]]))
            starts.append(starts[-1] + int(np.count_nonzero(sel)))
            keep = ~sel
            rows = np.flatnonzero(keep) + lo
            base_vals, step_vals, lane_row = base_vals[keep], step_vals[keep], lane_row[keep]
        else:
            rows = np.arange(lo, hi, dtype=np.int64)
        if rows.size:
            warp = np.searchsorted(offsets, rows, side="right") - 1
            if not state.decode_packed(warp, op[rows], base_vals, step_vals, lane_row, lane_vals, mask[rows],
                                       addr[d:d + rows.size]):
                raise _bad(path, "an index in its arrays points outside them")
            d += rows.size
    for v in values.values():
        v.finish()
    if not n_packed:
        return addr, None
    return addr, PackedLanes(rows=np.flatnonzero(is_packed).astype(np.int64), starts=tuple(starts), bases=tuple(bases),
                             steps=tuple(steps), odd=tuple(odd), lanes=tuple(lanes), unit=hd.unit)


_HUGE = 1 << 62
_CTA_RANGES = {"insts": (0, _HUGE, "warp instructions of a CTA"), "accesses": (0, _HUGE, "warp accesses of a CTA"),
               "sm": (0, LIMITS["sm_count"] - 1, "the SM a CTA ran on"), "start": (0, _HUGE, "a CTA's start clock"),
               "end": (0, _HUGE, "a CTA's end clock")}
"""What each per-CTA array may hold: counts and clocks are never negative (and stay far from
wrapping when summed or subtracted); an SM id is below the most SMs a GPU may have."""


def _cta_records(path: Path, arrays: dict[str, np.ndarray]) -> CtaRecords:
    """The per-CTA records, each value checked against its range in `_CTA_RANGES`: a negative
    instruction count used to reach the MWP/CWP model and fail there, nameless."""
    out: dict[str, np.ndarray | None] = {}
    for f in _CTA_FIELDS:
        a = arrays.get(f"cta_{f}")
        if a is not None and a.size:
            lo, hi, what = _CTA_RANGES[f]
            low, high = int(a.min()), int(a.max())
            if low < lo or high > hi:
                top = "2^62" if hi == _HUGE else f"{hi:,}"
                raise _bad(path, f"array cta_{f} holds {low if low < lo else high:,}, outside {lo:,}..{top} ({what})")
        out[f] = None if a is None else a.astype(np.int64)
    return CtaRecords(**out)


def _int32(path: Path, name: str, a: np.ndarray) -> np.ndarray:
    """`a` as int32, refusing values that would wrap."""
    _expect(a.size == 0 or (int(a.min()) >= -(2**31) and int(a.max()) < 2**31), path, f"array {name} holds values out of range")
    return a.astype(np.int32)
