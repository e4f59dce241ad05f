"""Fuzzing the loader (issue 9 acceptance): a few thousand hostile files, deterministic seeds.

In process (fast): random byte corruptions of small valid traces (deflate and LZMA), damaged
members re-zipped with valid checksums, and structurally valid adversarial contents (wrapping
sums, huge op tables, huge declared shapes, negative counts, NaNs, wrong dtypes, control and
non-ASCII characters in names), and consistent files whose indices lie, a fixed share of them
warp lengths whose 64-bit sum wraps onto the access count (issue 9 item 2). `load_trace` may only succeed or raise a TuiprofError whose
message is in words (never the loader's message of last resort, never a Python exception name)
with a hint; the process's peak memory may not grow by more than a bound over the whole run.
A handful of the same cases also go through the CLI in a child process under a memory cap:
exit status 0 or 2, never a signal, never a traceback.
"""

from __future__ import annotations

import copy
import math
import random
import re
import resource
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support import hostile as H
from tests.support.factories import make_trace, random_trace
from tests.support.hostile_run import run_cli
from tuiprof.errors import TuiprofError
from tuiprof.trace.data import CtaRecords
from tuiprof.trace.io import load_trace, save_trace
from tuiprof.trace.packed import lane_addresses

SEED = 20261122
EXCEPTION_NAME = re.compile(r"\b[A-Z]\w*(Error|Exception|Warning)\b")
NASTY = "\x1b[2J\x07\u202e\x9b\x00é𝔘"
POOL: list[Any] = [None, True, False, 0, -1, 1, 3, 255, 2**31, 2**63, 2**64, -(2**63), 10**30, 0.5, -0.0,
                   float("nan"), float("inf"), "", "x" * 5000, NASTY, "load", "global", "<u4", "|O", [], [1, 2, 3],
                   [2**40], [0, 0, 0], [-1, 1, 1], {}, {"a": 1}, {"dtype": "<i8", "shape": [2**62]}]


def _deep(depth: int) -> Any:
    v: Any = 1
    for _ in range(depth):
        v = [v]
    return v


def _bases(tmp: Path) -> list[bytes]:
    """Small valid traces: the vecadd demo (deflate), a random one in LZMA, one with every
    per-CTA record and stores."""
    n_ctas = 7
    ctas = CtaRecords(insts=np.arange(n_ctas, dtype=np.int64) * 1000, accesses=np.full(n_ctas, 5, np.int64),
                      sm=np.arange(n_ctas, dtype=np.int64) % 3, start=np.arange(n_ctas, dtype=np.int64),
                      end=np.arange(n_ctas, dtype=np.int64) + 10)
    traces = [save_trace(random_trace(3, n=60), tmp / "b1.tptrace", compression="lzma"),
              save_trace(make_trace(np.arange(64 * 3).reshape(6, 32) * 4, n_ctas=n_ctas, ctas=ctas,
                                    kinds=("load", "store")), tmp / "b2.tptrace")]
    return [H.BASE.read_bytes()] + [p.read_bytes() for p in traces]


# --- the mutations ------------------------------------------------------------------------------

def corrupt_bytes(rng: random.Random, raw: bytes) -> bytes:
    """A random damage of a file's bytes, zip records included."""
    b = bytearray(raw)
    kind = rng.randrange(7)
    if kind == 0:
        return bytes(b[: rng.randrange(len(b))])
    if kind == 1:
        for _ in range(rng.randint(1, 16)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif kind == 2:
        i = rng.randrange(len(b))
        b[i: i + rng.randint(1, 64)] = bytes(rng.choice([0, 0xFF, rng.randrange(256)]) for _ in range(rng.randint(1, 64)))
    elif kind == 3:
        i = rng.randrange(len(b))
        b[i:i] = rng.randbytes(rng.randint(1, 64))
    elif kind == 4:
        i, j = sorted(rng.randrange(len(b)) for _ in range(2))
        b[j:j] = b[i: i + 256]
    else:  # an integer field of a zip record (sizes, offsets, counts, lengths) set to an extreme
        sig = rng.choice([b"PK\x01\x02", b"PK\x03\x04", b"PK\x05\x06"])
        at = [m.start() for m in re.finditer(re.escape(sig), bytes(b))]
        if at:
            i = rng.choice(at) + rng.randrange(4, 30)
            width = rng.choice([2, 4])
            value = rng.choice([0, 1, 0xFFFF, 0xFFFFFFFF, rng.randrange(1 << 32)]) & ((1 << (8 * width)) - 1)
            b[i: i + width] = value.to_bytes(width, "little")
    return bytes(b)


def corrupt_member(rng: random.Random, tf: H.TraceFile, path: Path) -> Path:
    """A valid zip whose one member's uncompressed bytes are damaged (checksums recomputed)."""
    members = tf.member_bytes()
    name = rng.choice(sorted(members))
    members[name] = corrupt_bytes(rng, members[name]) if members[name] else rng.randbytes(8)
    with zipfile.ZipFile(path, "w", rng.choice([zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED, _method(rng)])) as zf:
        for k, v in members.items():
            if rng.random() > 0.03:
                zf.writestr(k, v)
    return path


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every field path of a JSON tree (long lists sampled)."""
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            if k != "text":
                out += _paths(v, prefix + (k,))
            else:
                out.append(prefix + (k,))
    elif isinstance(node, list):
        for i, v in list(enumerate(node))[:4]:
            out += _paths(v, prefix + (i,))
    return out


def edit_header(rng: random.Random, tf: H.TraceFile) -> None:
    """One to three adversarial edits of the header: a field set to a hostile value, removed,
    or added; the op table or source grown past reason."""
    h = tf.header
    grow = rng.randrange(60)  # first, now and then, a structural one (on the intact header)
    if grow == 0:
        h["ops"] = [dict(h["ops"][0], id=i) for i in range(rng.choice([70_000, 3000]))]
    elif grow == 1:
        h["sources"][0]["text"] = rng.choice(["y" * (5 << 20), NASTY * 1000, ""])
    elif grow == 2:
        n = rng.choice([2**36, 2**62, 2**31, -5, 0])
        tf.set_accesses(n)
    for _ in range(rng.randint(0 if grow < 3 else 1, 3)):
        kind = rng.randrange(5)
        path = rng.choice(_paths(h)[1:])
        parent = h
        for p in path[:-1]:
            parent = parent[p]
        last = path[-1]
        value = copy.deepcopy(rng.choice(POOL)) if rng.random() < 0.95 else _deep(rng.randint(5, 600))
        if kind == 3 and isinstance(parent, dict):
            del parent[last]
        elif kind == 4 and isinstance(parent, dict):
            parent[rng.choice(["zz", NASTY, "id", "arrays"])] = value
        else:
            parent[last] = value


WIDE = ["|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8"]
ODD = ["<f8", "|b1", ">i4", "<f4", "<c16"]


def edit_array(rng: random.Random, tf: H.TraceFile) -> None:
    """An array replaced with hostile contents (extremes, wrapping sums, negative values, odd
    types and shapes), declared truly or not, the counts following or not."""
    name = rng.choice(sorted(tf.arrays))
    old = tf.arrays[name]
    n = old.shape[0] if rng.random() < 0.6 else rng.choice([0, 1, old.shape[0] + 1, 5000])
    shape = (n, 32) if old.ndim == 2 else (n,)
    dtype = np.dtype(rng.choice(WIDE if rng.random() < 0.85 else ODD))
    how = rng.randrange(5)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if how == 0:
            a = np.full(shape, rng.choice([info.min, info.max, 0, -1 if info.min < 0 else 1]), dtype)
        elif how == 1 and name == "warp_lengths" and old.size >= 4 and dtype == np.int64 and n == old.shape[0]:
            a = old.astype(np.int64)
            a[: rng.randint(1, 4)] += np.int64(1 << 62) * rng.choice([1, 2])
        else:
            a = np.frombuffer(rng.randbytes(int(np.prod(shape)) * dtype.itemsize), dtype).reshape(shape).copy()
    else:
        a = np.full(shape, np.nan if dtype.kind in "fc" else True, dtype)
    tf.arrays[name] = a
    if rng.random() < 0.8:
        tf.header["arrays"][name] = {"dtype": dtype.str, "shape": list(shape),
                                     "shuffled": bool(dtype.itemsize > 1 and rng.random() < 0.8)}
    if rng.random() < 0.3:
        key = {"op": "accesses", "mask": "accesses", "warp_lengths": "warps"}.get(name)
        if key:
            tf.header["counts"][key] = n


# --- the runs -----------------------------------------------------------------------------------

def check(path: Path, failures: list[str], case: str) -> None:
    """Load `path`: a Trace, or a TuiprofError in words with a hint; anything else is recorded."""
    try:
        t = load_trace(path)
    except TuiprofError as e:
        if (not e.message or not e.hint or "cannot decode" in e.message or e.message.startswith("cannot read")
                or EXCEPTION_NAME.search(e.message)):
            failures.append(f"{case}: {e.message!r}")
    except Exception as exc:  # noqa: BLE001 - the point of the test
        failures.append(f"{case}: {type(exc).__name__}: {exc!s:.200}")
    else:
        if t.n_accesses != t.op.shape[0] or lane_addresses(t).shape != (t.n_accesses, 32):
            failures.append(f"{case}: loaded an inconsistent trace")


class Bases:
    """The base traces, as bytes and parsed (each case edits a copy)."""

    def __init__(self, tmp: Path) -> None:
        self.raw = _bases(tmp)
        self.files = []
        for i, b in enumerate(self.raw):
            p = tmp / f"base{i}.tptrace"
            p.write_bytes(b)
            load_trace(p)  # each base is valid (and the decoding kernel is warm)
            self.files.append(H.TraceFile(p))

    def pick(self, rng: random.Random) -> H.TraceFile:
        return rng.choice(self.files).copy()


def _method(rng: random.Random) -> int:
    return zipfile.ZIP_LZMA if rng.random() < 0.15 else zipfile.ZIP_DEFLATED


def _raw(rng: random.Random, bases: Bases, out: Path) -> Path:
    out.write_bytes(corrupt_bytes(rng, rng.choice(bases.raw)))
    return out


def _member(rng: random.Random, bases: Bases, out: Path) -> Path:
    return corrupt_member(rng, bases.pick(rng), out)


def _header(rng: random.Random, bases: Bases, out: Path) -> Path:
    tf = bases.pick(rng)
    edit_header(rng, tf)
    return tf.save(out, _method(rng))


def _array(rng: random.Random, bases: Bases, out: Path) -> Path:
    tf = bases.pick(rng)
    for _ in range(rng.randint(1, 2)):
        edit_array(rng, tf)
    return tf.save(out, _method(rng))


def wrap_lengths(rng: random.Random, lengths: np.ndarray) -> np.ndarray:
    """`lengths` with 2**64 added over k warps (k = 4, 8 or 16 as int64, 2 or 4 as uint64): the
    64-bit sum wraps back onto the true access count, as in issue 9 item 2 (a segfault then)."""
    n_warps = lengths.shape[0]
    if rng.random() < 0.7:
        k = rng.choice([k for k in (4, 8, 16) if k <= n_warps] or [2])
        out = lengths.astype(np.int64 if k > 2 else np.uint64)   # 2**63 needs the unsigned type
    else:
        k = rng.choice([k for k in (2, 4) if k <= n_warps])
        out = lengths.astype(np.uint64)
    step = out.dtype.type((1 << 64) // k)
    for i in rng.sample(range(n_warps), k):
        out[i] += step
    return out


def wraps_onto_the_count(path: Path) -> bool:
    """Whether `path`'s warp lengths are a true item-2 attack: their exact sum is not the access
    count, their 64-bit sum is."""
    tf = H.TraceFile(path)
    lengths, n = tf.arrays["warp_lengths"], tf.header["counts"]["accesses"]
    exact = sum(int(x) for x in lengths)
    return exact != n and int(np.sum(lengths.astype(np.int64))) == n


def _indices(rng: random.Random, bases: Bases, out: Path) -> Path:
    """A consistent file (every array declared truly, checksums right) whose indices lie: warp
    lengths whose 64-bit sum wraps onto the access count (half the cases), offsets past the end,
    lengths each valid but adding up past the count, op ids just outside the op table, warps of
    CTAs outside the grid, snapshot CTAs outside the grid."""
    kind = rng.randrange(12)
    tf = rng.choice([f for f in bases.files if kind >= 6 or f.arrays["warp_lengths"].shape[0] >= 2]).copy()
    a, h = tf.arrays, tf.header
    lengths = a["warp_lengths"].astype(np.int64)
    n, n_ops, n_ctas = h["counts"]["accesses"], len(h["ops"]), math.prod(h["launch"]["grid"])
    if kind < 6:
        tf.set_array("warp_lengths", wrap_lengths(rng, lengths))
    elif kind == 6:
        lengths[-1] += rng.choice([1, n, 1 << 40])
        tf.set_array("warp_lengths", lengths)
    elif kind == 7:
        tf.set_array("warp_lengths", np.full_like(lengths, n))
    elif kind == 8:
        op = a["op"].astype(np.int64)
        op[rng.randrange(op.shape[0])] = rng.choice([n_ops, n_ops + 1, -1])
        tf.set_array("op", op.astype(np.int32) if op.min() < 0 or op.max() > 255 else op.astype(np.uint8))
    elif kind == 9:
        cta = a["warp_cta"].astype(np.int64)
        cta[rng.randrange(cta.shape[0])] = rng.choice([n_ctas, -1, 2**31 - 1])
        tf.set_array("warp_cta", cta.astype(np.int32))
    else:
        ids = a["snapshot_cta_ids"].astype(np.int64)
        ids[rng.randrange(ids.shape[0])] = rng.choice([n_ctas, -1, 2**62])
        tf.set_array("snapshot_cta_ids", ids)
    return tf.save(out, _method(rng))


CASES: dict[str, tuple[int, Callable[[random.Random, Bases, Path], Path]]] = {
    "raw bytes": (1400, _raw), "member bytes": (500, _member), "header": (600, _header), "arrays": (600, _array),
    "indices": (200, _indices)}
WRAPPING_SHARE = 0.4
"""At least this share of the "indices" cases must be true item-2 attacks (the random array
edits alone almost never made one: 0 of 600 did)."""


def test_fuzz_loader_in_process(tmp_path: Path) -> None:
    bases = Bases(tmp_path)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    failures: list[str] = []
    total = wrapping = 0
    for kind, (count, make) in CASES.items():
        for i in range(count):
            rng = random.Random(f"{SEED}:{kind}:{i}")
            path = make(rng, bases, tmp_path / "case.tptrace")
            check(path, failures, f"{kind} #{i}")
            total += 1
            wrapping += kind == "indices" and wraps_onto_the_count(path)
    growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    assert not failures, f"{len(failures)} of {total} cases:\n" + "\n".join(failures[:20])
    assert total >= 3000 and growth < 400, f"peak memory grew {growth:.0f} MiB"
    assert wrapping >= WRAPPING_SHARE * CASES["indices"][0], f"only {wrapping} files wrapped onto the count"


@pytest.mark.parametrize("kind,index", [("raw bytes", 1), ("raw bytes", 2), ("member bytes", 3), ("header", 4),
                                        ("header", 5), ("arrays", 6), ("arrays", 7)])
def test_fuzz_cli_under_a_memory_cap(tmp_path: Path, kind: str, index: int) -> None:
    bases = Bases(tmp_path)
    count, make = CASES[kind]
    path = make(random.Random(f"{SEED}:cli:{kind}:{index}"), bases, tmp_path / "case.tptrace")
    run = run_cli(["report", str(path), "--trials", "2", "--no-sweep"], tmp_path)
    assert run.code in (0, 2) and "Traceback" not in run.stderr, (run.code, run.stderr[-2000:])
    if run.code == 2:
        assert run.stderr.startswith("error: ") and "\nhint: " in run.stderr
