"""The .tptrace file: one self-contained, versioned, compressed zip of NumPy arrays and JSON.

Layout (format version 1):

- ``tptrace.json``: format, version, launch, static ops, snapshot rule, provenance, sources
  (the source text itself), and the declared dtype and shape of every array member;
- ``<name>.npy``: arrays, read with ``allow_pickle=False``.

Lane addresses are stored compactly: within each group of accesses of one static op by one warp,
every lane stores its address minus its own previous address (its first one: minus the access's
lowest active lane address, ``addr_base``, itself differenced along the group), in units of the
largest power of two dividing all addresses, in the narrowest integer type, with the bytes of
each array grouped by significance before DEFLATE. Strided loops and sorted gathers (CSR columns)
become small repeated integers that compress to a fraction of a byte per lane.

Every size is declared in the JSON header and checked against the zip directory before anything
is decompressed, so a hostile or truncated file fails with a TraceError instead of exhausting
memory. Files are written to a temporary name and renamed into place.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any, BinaryIO, Iterable

import numpy as np

from tuiprof import __version__
from tuiprof.errors import TraceError
from tuiprof.output import write_bytes_to
from tuiprof.trace.model import (LANES, CtaRecords, Launch, Provenance, Snapshot, SourceFile,
                                 StaticOp, Trace)

FORMAT = "tptrace"
VERSION = 1
HEADER = "tptrace.json"
SUFFIX = ".tptrace"
MAX_HEADER_BYTES = 64 << 20
_NPY_HEADER_SLACK = 4096
_CTA_FIELDS = ("insts", "accesses", "sm", "start", "end")
_ADDRESS_ARRAYS = ("addr_base", "addr_lanes")


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
    power of two dividing every address (the unit), usually the element size.
    """
    n = t.n_accesses
    if n == 0:
        return {"addr_base": np.zeros(0, np.int8), "addr_lanes": np.zeros((0, LANES), np.int8)}, 1
    order, gstart = _group_order(t.warp_offsets, t.op, len(t.ops))
    lanes = np.arange(LANES, dtype=np.uint32)
    active = ((t.mask[order, None] >> lanes) & 1).astype(bool)
    addr = t.addr[order]
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
    return {"addr_base": _narrow(base_out), "addr_lanes": _narrow(lanes_out)}, unit


def decode_addresses(warp_offsets: np.ndarray, op: np.ndarray, mask: np.ndarray, n_ops: int,
                     base_planes: np.ndarray, lane_planes: np.ndarray, unit: int = 1) -> np.ndarray:
    """Inverse of `encode_addresses` from the byte planes of its two arrays: uint64 [R,32]."""
    from tuiprof.trace._codec import decode_lanes

    out = np.zeros((op.shape[0], LANES), dtype=np.uint64)
    decode_lanes(warp_offsets, op, mask.astype(np.int64), n_ops, base_planes, lane_planes, np.int64(unit),
                 out.view(np.int64))
    return out


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


def _launch_json(L: Launch) -> dict[str, Any]:
    return {"kernel": L.kernel, "grid": list(L.grid), "block": list(L.block),
            "registers_per_thread": L.registers_per_thread, "static_shared": L.static_shared,
            "dynamic_shared": L.dynamic_shared, "ctas_per_sm": L.ctas_per_sm}


def _op_json(o: StaticOp) -> dict[str, Any]:
    return {"id": o.id, "kernel": o.kernel, "kind": o.kind, "space": o.space, "bytes": o.bytes,
            "file": o.file, "line": o.line, "column": o.column, "ptx_line": o.ptx_line,
            "starts_sequence": o.starts_sequence, "label": o.label}


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
        "provenance": {"backend": t.provenance.backend, "arch": t.provenance.arch, "gpu": t.provenance.gpu,
                       "tool_version": t.provenance.tool_version, "date": t.provenance.date,
                       "generator": t.provenance.generator, "measured": t.provenance.measured},
        "sources": [{"name": s.name, "text": s.text} for s in t.sources],
        "counts": {"accesses": t.n_accesses, "warps": t.n_warps, "snapshot_ctas": t.snapshot.n_ctas},
        "address_unit": unit,
        "arrays": {k: {"dtype": v.dtype.str, "shape": list(v.shape), "shuffled": v.dtype.itemsize > 1}
                   for k, v in arrays.items()},
    }
    method = {"deflate": zipfile.ZIP_DEFLATED, "lzma": zipfile.ZIP_LZMA}[compression]

    def member(name: str) -> zipfile.ZipInfo:
        # A fixed timestamp: the same trace gives the same bytes (demo files do not churn).
        info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = method
        info.external_attr = 0o644 << 16
        return info

    def write(fh: BinaryIO) -> None:
        with zipfile.ZipFile(fh, "w", compression=method) as zf:
            zf.writestr(member(HEADER), json.dumps(header, separators=(",", ":")))
            for name, a in arrays.items():
                buf = io.BytesIO()
                stored = planes(a) if a.dtype.itemsize > 1 else np.ascontiguousarray(a)
                np.lib.format.write_array(buf, stored, allow_pickle=False)
                zf.writestr(member(f"{name}.npy"), buf.getvalue())

    write_bytes_to(os.fspath(path), write, protect=protect)
    return path


def _bad(path: Path, what: str) -> TraceError:
    return TraceError(f"{path} is not a valid .tptrace file: {what}",
                      "record the trace again, or pass a demo name such as spmv-u (see `tuiprof demos`)")


def _expect(cond: bool, path: Path, what: str) -> None:
    if not cond:
        raise _bad(path, what)


def load_trace(path: str | os.PathLike[str]) -> Trace:
    """Read and validate a .tptrace file. Any problem raises TraceError naming it."""
    path = Path(path)
    if not path.exists():
        raise TraceError(f"{path} does not exist", "check the path, or pass a demo name such as spmv-u")
    if path.is_dir():
        raise TraceError(f"{path} is a directory, not a .tptrace file", "pass the trace file itself")
    try:
        return _load(path)
    except TraceError:
        raise
    except MemoryError:
        raise _bad(path, "it declares more data than fits in memory") from None
    except Exception as exc:  # zipfile, zlib, lzma, numpy and json raise many types on damaged input
        raise _bad(path, f"{type(exc).__name__}: {exc}") from None


def _read_npy(data: bytes) -> np.ndarray:
    """An .npy member as an array over its bytes (no pickle, no copy)."""
    fh = io.BytesIO(data)
    version = np.lib.format.read_magic(fh)
    read_header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}[version]
    shape, fortran, dtype = read_header(fh)
    if dtype.hasobject:
        raise ValueError("object arrays are not allowed")
    count = int(np.prod(shape, dtype=np.int64))
    a = np.frombuffer(data, dtype=dtype, count=count, offset=fh.tell())
    return a.reshape(shape, order="F" if fortran else "C")


def _load(path: Path) -> Trace:
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise _bad(path, "not a tptrace container (wrong or truncated file)") from None
    with zf:
        names = {i.filename: i for i in zf.infolist()}
        _expect(HEADER in names, path, "no tptrace.json header (a foreign zip file?)")
        _expect(names[HEADER].file_size <= MAX_HEADER_BYTES, path, "header too large")
        header = json.loads(zf.read(HEADER).decode("utf-8"))
        _expect(isinstance(header, dict) and header.get("format") == FORMAT, path, "not a tptrace header")
        version = header.get("version")
        if version != VERSION:
            raise TraceError(f"{path} is tptrace version {version!r}; this tuiprof reads version {VERSION}",
                             "upgrade tuiprof, or record the trace again with this version")
        declared = header["arrays"]
        _expect(isinstance(declared, dict), path, "array table missing")
        arrays: dict[str, np.ndarray] = {}
        shapes: dict[str, tuple[int, ...]] = {}
        for name, spec in declared.items():
            member = f"{name}.npy"
            _expect(member in names, path, f"array {name} missing (truncated file?)")
            dtype = np.dtype(spec["dtype"])
            _expect(dtype.kind in "iu" and not dtype.hasobject, path, f"array {name} has a non-integer type")
            shape = tuple(int(s) for s in spec["shape"])
            _expect(all(s >= 0 for s in shape) and len(shape) <= 2, path, f"array {name} has an impossible shape")
            size = int(np.prod(shape, dtype=np.int64))
            _expect(names[member].file_size <= size * dtype.itemsize + _NPY_HEADER_SLACK, path, f"array {name} is larger than declared")
            shuffled = bool(spec.get("shuffled", False))
            stored_dtype, stored_shape = (np.dtype(np.uint8), (dtype.itemsize, size)) if shuffled else (dtype, shape)
            a = _read_npy(zf.read(member))
            _expect(a.dtype == stored_dtype and a.shape == stored_shape, path, f"array {name} does not match its declaration")
            if name in _ADDRESS_ARRAYS:  # decoded straight from the planes (see _codec)
                arrays[name] = a if shuffled else a.view(np.uint8).reshape(1, -1)
                shapes[name] = shape
            else:
                arrays[name] = from_planes(a, dtype, shape) if shuffled else a
    return _build(path, header, arrays, shapes)


def _build(path: Path, h: dict[str, Any], arrays: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]]) -> Trace:
    for name in ("warp_lengths", "warp_cta", "warp_index", "snapshot_cta_ids", "op", "mask", *_ADDRESS_ARRAYS):
        _expect(name in arrays, path, f"array {name} missing")
    L = h["launch"]
    launch = Launch(kernel=str(L["kernel"]), grid=tuple(int(x) for x in L["grid"]),  # type: ignore[arg-type]
                    block=tuple(int(x) for x in L["block"]),  # type: ignore[arg-type]
                    registers_per_thread=int(L["registers_per_thread"]), static_shared=int(L["static_shared"]),
                    dynamic_shared=int(L["dynamic_shared"]), ctas_per_sm=int(L["ctas_per_sm"]))
    _expect(len(launch.grid) == 3 and len(launch.block) == 3, path, "grid and block need 3 dimensions")
    ops = tuple(StaticOp(id=int(o["id"]), kernel=str(o["kernel"]), kind=str(o["kind"]), space=str(o["space"]),
                         bytes=int(o["bytes"]), file=str(o["file"]), line=int(o["line"]), column=int(o["column"]),
                         ptx_line=int(o["ptx_line"]), starts_sequence=bool(o["starts_sequence"]), label=str(o["label"]))
                for o in h["ops"])
    P = h["provenance"]
    _expect(isinstance(P.get("generator", {}), dict) and isinstance(P.get("measured", {}), dict), path, "bad provenance")
    prov = Provenance(backend=str(P["backend"]), arch=str(P["arch"]), gpu=str(P.get("gpu", "")),
                      tool_version=str(P.get("tool_version", "")), date=str(P.get("date", "")),
                      generator=dict(P.get("generator", {})),
                      measured={str(k): float(v) for k, v in P.get("measured", {}).items()})
    sources = tuple(SourceFile(name=str(s["name"]), text=str(s["text"])) for s in h["sources"])
    lengths = arrays["warp_lengths"].astype(np.int64)
    _expect(lengths.ndim == 1 and (lengths.size == 0 or lengths.min() >= 0), path, "negative warp length")
    offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    op = arrays["op"].astype(np.int32)
    mask = arrays["mask"]
    n = op.shape[0]
    _expect(mask.dtype == np.uint32 and mask.shape == (n,), path, "mask array malformed")
    _expect(offsets[-1] == n, path, "warp lengths do not add up to the number of accesses")
    _expect(shapes["addr_base"] == (n,) and shapes["addr_lanes"] == (n, LANES), path, "address arrays malformed")
    _expect(n == 0 or (op.min() >= 0 and op.max() < len(ops)), path, "an access names an op id that does not exist")
    counts = h.get("counts", {})
    _expect(counts.get("accesses") == n and counts.get("warps") == lengths.shape[0], path, "counts disagree with the arrays")
    unit = h.get("address_unit", 1)
    _expect(isinstance(unit, int) and 1 <= unit <= 1 << 16 and unit & (unit - 1) == 0, path, "bad address unit")
    addr = decode_addresses(offsets, op, mask, len(ops), arrays["addr_base"], arrays["addr_lanes"], unit)
    ctas = CtaRecords(**{f: arrays[f"cta_{f}"].astype(np.int64) if f"cta_{f}" in arrays else None for f in _CTA_FIELDS})
    try:
        return Trace(launch=launch, ops=ops,
                     snapshot=Snapshot(cta_ids=arrays["snapshot_cta_ids"].astype(np.int64), rule=str(h.get("snapshot_rule", ""))),
                     warp_offsets=offsets, warp_cta=arrays["warp_cta"].astype(np.int32),
                     warp_index=arrays["warp_index"].astype(np.int32), op=op, mask=mask, addr=addr,
                     sources=sources, provenance=prov, ctas=ctas)
    except TraceError as exc:
        raise _bad(path, exc.message.removeprefix("invalid trace: ")) from None


def read_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Only the JSON header of a .tptrace file (cheap: no array is decompressed)."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as zf:
            info = zf.getinfo(HEADER)
            _expect(info.file_size <= MAX_HEADER_BYTES, path, "header too large")
            header = json.loads(zf.read(HEADER).decode("utf-8"))
    except TraceError:
        raise
    except Exception as exc:
        raise _bad(path, f"{type(exc).__name__}: {exc}") from None
    _expect(isinstance(header, dict) and header.get("format") == FORMAT, path, "not a tptrace header")
    return header
