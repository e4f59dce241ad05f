"""Builders of hostile .tptrace files: a valid trace's JSON header and arrays, edited and re-zipped.

`TraceFile` opens a valid trace (by default the shipped `vecadd` demo, 1,920 warp accesses) as
a header dict and decoded arrays; a test edits either and saves it under its own tmp_path. The
decompression bombs need members whose zip directory entry lies about the size of the stream,
which `zipfile` cannot write, so `write_zip` lays out the few zip records by hand.
"""

from __future__ import annotations

import copy
import io
import json
import lzma
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tuiprof.resources import data_dir

BASE = data_dir("demo_traces") / "vecadd.tptrace"
HEADER = "tptrace.json"
PLANE_ROWS = 1 << 14
"""Accesses per block of byte planes in the address members of a version 2 file, as the writer lays them."""


def npy_bytes(a: np.ndarray) -> bytes:
    """`a` as an .npy file (no pickle)."""
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.ascontiguousarray(a), allow_pickle=False)
    return buf.getvalue()


def to_planes(a: np.ndarray) -> np.ndarray:
    """Byte planes ([itemsize, n] uint8, least significant first), as the file stores wide arrays."""
    k = a.dtype.itemsize
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8).reshape(-1, k).T.copy()


def from_planes(p: np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    return np.ascontiguousarray(p.T).view(dtype).reshape(shape)


ADDRESS_ARRAYS = ("addr_base", "addr_step", "addr_lanes")
STEP_ARRAYS = ("addr_step", "addr_whole")
"""What version 3 adds: each access's lane step, and whether it keeps its 32 lanes instead."""


def to_blocked_planes(a: np.ndarray, rows: int) -> np.ndarray:
    """Version 2's address members: the byte planes of each block of `rows` rows in turn (uint8 [a.nbytes])."""
    blocks = [to_planes(a[lo:lo + rows]).reshape(-1) for lo in range(0, a.shape[0], rows)]
    return np.concatenate(blocks) if blocks else np.zeros(0, np.uint8)


def from_blocked_planes(b: np.ndarray, dtype: np.dtype, shape: tuple[int, ...], rows: int) -> np.ndarray:
    k, per = dtype.itemsize, int(np.prod(shape[1:], dtype=np.int64))
    out, at = [], 0
    for lo in range(0, shape[0], rows):
        m = min(rows, shape[0] - lo) * per
        out.append(from_planes(b[at:at + k * m].reshape(k, m), dtype, (m,)))
        at += k * m
    return (np.concatenate(out) if out else np.zeros(0, dtype)).reshape(shape)


class TraceFile:
    """The members of a .tptrace file, editable: `header` (the JSON dict) and `arrays` (logical
    arrays, as the Trace sees them before address decoding) plus `raw` member bytes that win."""

    def __init__(self, src: Path = BASE) -> None:
        with zipfile.ZipFile(src) as zf:
            self.header: dict = json.loads(zf.read(HEADER))
            self.arrays: dict[str, np.ndarray] = {}
            for name, spec in self.header["arrays"].items():
                dtype, shape = np.dtype(spec["dtype"]), tuple(spec["shape"])
                stored = np.lib.format.read_array(io.BytesIO(zf.read(f"{name}.npy")), allow_pickle=False)
                if spec["shuffled"] and "plane_rows" in spec:
                    self.arrays[name] = from_blocked_planes(stored, dtype, shape, spec["plane_rows"])
                else:
                    self.arrays[name] = from_planes(stored, dtype, shape) if spec["shuffled"] else stored
        self.raw: dict[str, bytes] = {}

    def copy(self) -> "TraceFile":
        return copy.deepcopy(self)

    def set_array(self, name: str, a: np.ndarray) -> None:
        """Replace array `name` and its declaration (dtype, shape, shuffled as the writer does)."""
        self.arrays[name] = a
        self.header["arrays"][name] = {"dtype": a.dtype.str, "shape": list(a.shape), "shuffled": a.dtype.itemsize > 1}
        if name in ADDRESS_ARRAYS and a.dtype.itemsize > 1 and self.header.get("version") in (2, 3):
            self.header["arrays"][name]["plane_rows"] = PLANE_ROWS

    def set_accesses(self, n: int) -> None:
        """Declare `n` warp accesses: the count and the shape of every per-access array (the lanes
        of version 3 as every access's)."""
        self.header["counts"]["accesses"] = n
        for k in ("op", "mask", "addr_base", *STEP_ARRAYS):
            if k in self.header["arrays"]:
                self.header["arrays"][k]["shape"] = [n]
        self.header["arrays"]["addr_lanes"]["shape"] = [n, 32]

    def lanes(self) -> np.ndarray:
        """Every access's 32 differenced lane values (int64 [R, 32]) as versions 1 and 2 store them:
        in version 3, an access that keeps one step holds it in its active lanes (the others 0)."""
        if "addr_step" not in self.arrays:
            return self.arrays["addr_lanes"].astype(np.int64)
        whole = self.arrays["addr_whole"].astype(bool)
        mask = self.arrays["mask"].astype(np.uint32)
        active = ((mask[:, None] >> np.arange(32, dtype=np.uint32)) & 1).astype(bool)
        out = np.where(active, self.arrays["addr_step"].astype(np.int64)[:, None], 0)
        out[whole] = self.arrays["addr_lanes"]
        return out

    def as_version(self, version: int) -> "TraceFile":
        """The same trace as a version 1 or 2 writer laid it out (32 lanes for every access;
        version 1: planes of whole members, no ``plane_rows``)."""
        t = self.copy()
        lanes = self.lanes()
        for k in STEP_ARRAYS:
            t.arrays.pop(k, None)
            t.header["arrays"].pop(k, None)
        t.header["version"] = version
        narrow = next(dt for dt in (np.int8, np.int16, np.int32, np.int64)
                      if lanes.size == 0 or (np.iinfo(dt).min <= lanes.min() and lanes.max() <= np.iinfo(dt).max))
        t.set_array("addr_lanes", lanes.astype(narrow))
        rows = self.header["arrays"]["addr_base"].get("plane_rows")
        if version == 2 and rows and "plane_rows" in t.header["arrays"]["addr_lanes"]:
            t.header["arrays"]["addr_lanes"]["plane_rows"] = rows  # the blocks the file had
        if version == 1:
            for spec in t.header["arrays"].values():
                spec.pop("plane_rows", None)
        return t

    def member_bytes(self) -> dict[str, bytes]:
        """Every member's bytes, header first, as the writer orders them."""
        out = {HEADER: json.dumps(self.header).encode()}
        declared = self.header.get("arrays") if isinstance(self.header, dict) else None
        for name, a in self.arrays.items():
            spec = declared.get(name) if isinstance(declared, dict) else None
            shuffled = isinstance(spec, dict) and spec.get("shuffled") is True
            rows = spec.get("plane_rows") if isinstance(spec, dict) else None
            if shuffled and a.dtype.itemsize > 1 and isinstance(rows, int) and rows > 0:
                stored = to_blocked_planes(a, rows)
            else:
                stored = to_planes(a) if shuffled and a.dtype.itemsize > 1 else a
            out[f"{name}.npy"] = npy_bytes(stored)
        out.update(self.raw)
        return out

    def save(self, path: Path, compression: int = zipfile.ZIP_DEFLATED) -> Path:
        with zipfile.ZipFile(path, "w", compression) as zf:
            for name, data in self.member_bytes().items():
                zf.writestr(name, data)
        return path


@dataclass(frozen=True)
class Member:
    """One zip member as stored: its compressed stream and what the zip directory says of it."""

    name: str
    method: int
    stream: bytes
    crc: int
    file_size: int


def stored_member(name: str, data: bytes, method: int = zipfile.ZIP_DEFLATED) -> Member:
    """An honest member: `data` compressed with `method` (deflate or LZMA, as zipfile writes them)."""
    if method == zipfile.ZIP_DEFLATED:
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        stream = c.compress(data) + c.flush()
    else:
        stream = lzma_stream([data])
    return Member(name, method, stream, zlib.crc32(data), len(data))


def deflate_bomb(name: str, data: bytes, extra_zeros: int) -> Member:
    """A deflate member whose directory entry declares `data` (size and CRC) while its stream
    goes on with `extra_zeros` zero bytes: a repeated fully-flushed block of 1 MiB of zeros, so
    building a gigabyte costs a millisecond (about 1 KB of stream per MiB)."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = c.compress(data) + c.flush(zlib.Z_FULL_FLUSH)
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = z.compress(bytes(1 << 20)) + z.flush(zlib.Z_FULL_FLUSH)
    final = zlib.compressobj(9, zlib.DEFLATED, -15).flush()
    return Member(name, zipfile.ZIP_DEFLATED, head + block * (extra_zeros >> 20) + final, zlib.crc32(data), len(data))


def lzma_stream(chunks: list[bytes], repeat_zeros: int = 0) -> bytes:
    """A zip LZMA stream (version, properties, raw LZMA1 with an end marker) of `chunks` then
    `repeat_zeros` zero bytes."""
    dict_size = 1 << 20
    comp = lzma.LZMACompressor(lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA1, "preset": 1,
                                                             "dict_size": dict_size}])
    out = [comp.compress(c) for c in chunks]
    zeros = bytes(1 << 24)
    for _ in range(repeat_zeros >> 24):
        out.append(comp.compress(zeros))
    out.append(comp.flush())
    props = bytes([(2 * 5 + 0) * 9 + 3]) + struct.pack("<I", dict_size)  # lc=3, lp=0, pb=2
    return struct.pack("<BBH", 9, 4, len(props)) + props + b"".join(out)


def lzma_bomb(name: str, data: bytes, extra_zeros: int) -> Member:
    """An LZMA member declaring `data` whose stream goes on with `extra_zeros` zero bytes."""
    return Member(name, zipfile.ZIP_LZMA, lzma_stream([data], extra_zeros), zlib.crc32(data), len(data))


def write_zip(path: Path, members: list[Member]) -> Path:
    """A zip file of `members` exactly as given (local headers, streams, central directory)."""
    body, central = bytearray(), bytearray()
    for m in members:
        name = m.name.encode()
        flags = 0x02 if m.method == zipfile.ZIP_LZMA else 0  # LZMA streams carry an end marker
        version = 63 if m.method == zipfile.ZIP_LZMA else 20
        offset = len(body)
        body += struct.pack("<4s2B4HL2L2H", b"PK\x03\x04", version, 0, flags, m.method, 0, 0x21,
                            m.crc, len(m.stream), m.file_size, len(name), 0) + name + m.stream
        central += struct.pack("<4s4B4HL2L5H2L", b"PK\x01\x02", 20, 3, version, 0, flags, m.method, 0, 0x21,
                               m.crc, len(m.stream), m.file_size, len(name), 0, 0, 0, 0, 0o644 << 16, offset) + name
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(members), len(members), len(central), len(body), 0)
    path.write_bytes(bytes(body + central + end))
    return path


def bomb_trace(path: Path, method: int, extra_zeros: int, member: str = "addr_lanes.npy", src: Path = BASE) -> Path:
    """A valid trace whose `member` stream inflates `extra_zeros` bytes past what its zip directory
    entry (and the JSON header) declare."""
    members = TraceFile(src).member_bytes()
    bomb = deflate_bomb if method == zipfile.ZIP_DEFLATED else lzma_bomb
    return write_zip(path, [bomb(n, d, extra_zeros) if n == member else stored_member(n, d) for n, d in members.items()])


def wrapping_sums(tf: TraceFile) -> TraceFile:
    """warp_lengths whose int64 sum wraps around to the number of accesses: four warps get 2**62
    more accesses, which adds 2**64 to the sum."""
    t = tf.copy()
    lengths = t.arrays["warp_lengths"].astype(np.int64)
    lengths[:4] += np.int64(1 << 62)
    t.set_array("warp_lengths", lengths)
    return t


def many_ops(tf: TraceFile, n_ops: int, line_text: str | None = None) -> TraceFile:
    """The trace with `n_ops` static ops (the accesses still use the first few); with `line_text`,
    every op sits on line 1 of a source whose line 1 is `line_text`."""
    t = tf.copy()
    h = t.header
    template = {k: v for k, v in h["ops"][0].items() if k != "ptx"}  # the count at stake, not the header's size
    h["ops"] = h["ops"] + [{**template, "id": i, "starts_sequence": False, "label": f"x{i}"}
                           for i in range(len(h["ops"]), n_ops)]
    if line_text is not None:
        src = h["sources"][0]
        src["text"] = line_text + "\n" + src["text"]
        for o in h["ops"]:
            o["line"], o["file"] = 1, src["name"]
    return t


def npy_head(dtype: str, shape: tuple[int, ...]) -> bytes:
    """The header of an .npy file holding `shape` elements of `dtype` (the data not included)."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def zeros_member(name: str, head: bytes, zeros: int) -> Member:
    """An honest deflate member of `head` then `zeros` zero bytes, size and CRC declared truly;
    about 1 KB of stream per MiB, built in milliseconds."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    stream = [c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)]
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    mib = bytes(1 << 20)
    block = z.compress(mib) + z.flush(zlib.Z_FULL_FLUSH)
    crc = zlib.crc32(head)
    for _ in range(zeros >> 20):
        stream.append(block)
        crc = zlib.crc32(mib, crc)
    tail = bytes(zeros & ((1 << 20) - 1))
    last = zlib.compressobj(9, zlib.DEFLATED, -15)
    stream.append(last.compress(tail) + last.flush())
    return Member(name, zipfile.ZIP_DEFLATED, b"".join(stream), zlib.crc32(tail, crc), len(head) + zeros)


def huge_trace(path: Path, n: int, src: Path = BASE) -> Path:
    """A consistent trace of `n` warp accesses, all of one warp, every array zeros (no active
    lane, as it happens): the header and the zip directory tell the truth, so only the memory it
    needs (about 264 bytes per access once decoded) can stop it."""
    t = TraceFile(src)
    h = t.header
    h["counts"]["accesses"] = n
    lengths = np.zeros(h["counts"]["warps"], np.int64)
    lengths[0] = n
    t.set_array("warp_lengths", lengths)
    specs = {"op": ("|u1", (n,)), "mask": ("<u4", (n,)), "addr_base": ("<i8", (n,)), "addr_lanes": ("|i1", (n, 32)),
             **({"addr_step": ("|i1", (n,)), "addr_whole": ("|u1", (n,))} if "addr_step" in t.arrays else {})}
    members = []
    for name, (dtype, shape) in specs.items():
        itemsize = np.dtype(dtype).itemsize
        h["arrays"][name] = {"dtype": dtype, "shape": list(shape), "shuffled": itemsize > 1}
        stored = ("|u1", (itemsize, n)) if itemsize > 1 else (dtype, shape)
        members.append(zeros_member(f"{name}.npy", npy_head(*stored), itemsize * int(np.prod(shape))))
        del t.arrays[name]
    rest = [stored_member(k, v) for k, v in t.member_bytes().items()]
    return write_zip(path, rest + members)
