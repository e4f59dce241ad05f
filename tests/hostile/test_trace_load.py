"""Hostile .tptrace files against the loader (issue 9, items 2, 4 and 8 and the minor ones):
no crash, bounded memory, one clear message naming the file and the problem in words.

Each subprocess case runs `tuiprof report FILE` under an address-space cap and checks one
`error:` line, a hint, exit status 2, no traceback, a bounded peak RSS and an untouched folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.support import hostile as H
from tests.support.hostile_run import ROOT, assert_clean_error, run_cli, snapshot
from tuiprof.errors import OutputError, TraceError
from tuiprof.trace.data import MAX_OPS, MAX_SOURCE_CHARS
from tuiprof.trace.io import MAX_HEADER_BYTES, load_trace, read_header

EXCEPTION_NAME = re.compile(r"\b[A-Z]\w*(Error|Exception|Warning)\b")


def hostile_run(tmp_path: Path, path: Path, *needles: str, peak_mib: float = 400.0) -> str:
    """`tuiprof report path` fails cleanly, within `peak_mib`, and changes nothing in tmp_path."""
    before = snapshot(tmp_path)
    run = run_cli(["report", str(path), "--trials", "2", "--no-sweep"], tmp_path)
    line = assert_clean_error(run, *needles)
    assert run.peak_mib < peak_mib, f"peak {run.peak_mib:.0f} MiB"
    assert snapshot(tmp_path) == before
    return line


def load_error(path: Path) -> TraceError:
    """The TraceError of loading `path`, checked to name the file, to say what is wrong in words
    (no Python exception name) and to carry a hint."""
    with pytest.raises(TraceError) as e:
        load_trace(path)
    err = e.value
    assert err.hint and not EXCEPTION_NAME.search(err.message), err.message
    assert "cannot decode" not in err.message  # the loader's message of last resort
    return err


# --- item 2: wrapping sums, indices from the file --------------------------------------------------

def test_wrapping_warp_lengths_fail_cleanly(tmp_path: Path) -> None:
    # Before: the int64 sum wrapped back to the access count, the checks passed and the decoding
    # kernel read and wrote far outside its arrays: exit -11 (segfault).
    path = H.wrapping_sums(H.TraceFile()).save(tmp_path / "wrap.tptrace")
    hostile_run(tmp_path, path, str(path), "warp length")


def test_unsigned_warp_lengths_past_int64_fail_cleanly(tmp_path: Path) -> None:
    t = H.TraceFile()
    lengths = t.arrays["warp_lengths"].astype(np.uint64)
    lengths[:2] += np.uint64(1 << 63)  # + 2**64: wraps to the same sum, and negative as int64
    t.set_array("warp_lengths", lengths)
    assert "warp length" in load_error(t.save(tmp_path / "u.tptrace")).message


def test_packed_decode_kernel_checks_every_index_itself(tmp_path: Path) -> None:
    """`undelta_packed`, which decodes a packed chunk from its steps and odd rows, refuses a lane
    row past its lanes and arrays of the wrong length (in a child process, as below)."""
    script = """
import numpy as np
from tuiprof.trace._codec import undelta_packed
n, n_ops = 4, 2
def call(lane_row, lanes=2, steps=n):
    out = np.zeros((n, 32), np.int64)
    return undelta_packed(np.zeros(n, np.int64), np.zeros(n, np.int32), np.zeros(n, np.int64),
                          np.ones(steps, np.int64), np.asarray(lane_row, np.int64), np.zeros((lanes, 32), np.int64),
                          np.full(n, 0xFFFFFFFF, np.int64), np.int64(4), np.zeros((n_ops, 32), np.int64),
                          np.zeros((n_ops, 32), np.bool_), np.zeros(n_ops, np.int64), np.full(n_ops, -1, np.int64), out)
assert call([0, 1, 2, -1]) == -1, "lane row past the lanes"
assert call([0, 1, 1 << 40, -1]) == -1, "lane row far past the lanes"
assert call([0, -1, -1, -1], steps=3) == -1, "steps shorter than the accesses"
assert call([0, -1, -1]) == -1, "lane rows shorter than the accesses"
assert call([0, -7, -1, 1]) == 0, "any negative lane row: the step"
assert call([-1, -1, -1, -1], lanes=0) == 0
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])


def test_decode_kernel_checks_every_index_itself(tmp_path: Path) -> None:
    """The kernel refuses op ids and shapes outside its arrays even when called directly (a
    child process, so that a crash cannot take the test runner with it); a warp id is only ever
    compared, never used as an index."""
    script = """
import numpy as np
from tuiprof.trace._codec import undelta
n, n_ops = 4, 2
def call(op, lanes=None, stamp=None, warp=None):
    out = np.zeros((n, 32), np.int64)
    return undelta(np.arange(n, dtype=np.int64) if warp is None else warp, op, np.zeros(n, np.int64),
                   np.zeros((n, 32), np.int64) if lanes is None else lanes, np.full(n, 0xFFFFFFFF, np.int64),
                   np.int64(4), np.zeros((n_ops, 32), np.int64), np.zeros((n_ops, 32), np.bool_),
                   np.zeros(n_ops, np.int64), np.full(n_ops, -1, np.int64) if stamp is None else stamp, out)
op = np.zeros(n, np.int32)
assert call(np.array([0, 0, 7, 0], np.int32)) == -1, "op id too large"
assert call(np.array([0, -5, 0, 0], np.int32)) == -1, "negative op id"
assert call(op, lanes=np.zeros((n - 1, 32), np.int64)) == -1, "fewer lane values than accesses"
assert call(op, lanes=np.zeros((n, 31), np.int64)) == -1, "31 lanes"
assert call(op, stamp=np.zeros(1, np.int64)) == -1, "state of the wrong size"
assert call(op, warp=np.array([1 << 62, -(1 << 62), 0, 5], np.int64)) == 0, "any warp id"
assert call(op) == 0
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])


@pytest.mark.parametrize("case", ["op ids", "warp CTAs", "warp indices", "snapshot CTAs", "no active lane"])
def test_out_of_range_values_from_the_file(tmp_path: Path, case: str) -> None:
    t = H.TraceFile()
    a = t.arrays
    edit: dict[str, tuple[str, np.ndarray]] = {
        "op ids": ("op", np.full_like(a["op"], 200)),
        "warp CTAs": ("warp_cta", np.full_like(a["warp_cta"], 2**31 - 1)),
        "warp indices": ("warp_index", np.full(a["warp_index"].shape, -1, np.int8)),
        "snapshot CTAs": ("snapshot_cta_ids", np.full(a["snapshot_cta_ids"].shape, 10**9, np.int64)),
        "no active lane": ("mask", np.zeros_like(a["mask"])),
    }
    name, value = edit[case]
    t.set_array(name, value)
    err = load_error(t.save(tmp_path / "t.tptrace"))
    assert re.search(r"op id|out of range|outside the grid|no active lane", err.message), err.message


@pytest.mark.parametrize("field, value", [("insts", -5), ("accesses", -1), ("sm", -1), ("sm", 5000), ("start", -3),
                                          ("end", 2**63 - 1)])
def test_per_cta_records_out_of_range_are_named(tmp_path: Path, field: str, value: int) -> None:
    # Before: a negative cta_insts loaded, then failed in the MWP/CWP model as "MWP/CWP inputs
    # must not be negative" (no file, no field, no hint); an SM id of 5000 failed at run time.
    t = H.TraceFile()
    grid = t.header["launch"]["grid"][0]
    good = {"insts": np.full(grid, 1000), "accesses": np.full(grid, 6), "sm": np.arange(grid) % 15,
            "start": np.arange(grid) * 10, "end": np.arange(grid) * 10 + 5}
    for name, a in good.items():
        t.set_array(f"cta_{name}", a.astype(np.int64))
    assert load_trace(t.save(tmp_path / "ok.tptrace")).ctas.measured_timing   # in range: loads
    t.set_array(f"cta_{field}", np.full(grid, value, np.int64))
    err = load_error(t.save(tmp_path / "t.tptrace"))
    assert f"array cta_{field} holds {value:,}, outside" in err.message, err.message


# --- item 4: decompression bombs and the memory budget --------------------------------------------

@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bombs")
    return {"deflate": H.bomb_trace(d / "deflate.tptrace", zipfile.ZIP_DEFLATED, 1 << 30),
            "lzma": H.bomb_trace(d / "lzma.tptrace", zipfile.ZIP_LZMA, 384 << 20)}


@pytest.mark.parametrize("method", ["deflate", "lzma"])
def test_decompression_bomb_stops_at_the_declared_size(bombs: dict[str, Path], tmp_path: Path, method: str) -> None:
    # Before: zipfile trusted the zip directory and inflated the whole stream first: a 1 GiB
    # deflate bomb peaked above 1 GiB (2 GiB: 2.1 GB), a 384 MiB LZMA one above 400 MiB.
    path = shutil.copy(bombs[method], tmp_path / f"{method}.tptrace")
    hostile_run(Path(tmp_path), Path(path), "addr_lanes", "decompresses to more than", peak_mib=250)


def test_header_bomb_stops_at_its_zip_size(tmp_path: Path) -> None:
    members = H.TraceFile().member_bytes()
    header = members.pop(H.HEADER)
    path = H.write_zip(tmp_path / "h.tptrace", [H.deflate_bomb(H.HEADER, header, 64 << 20)]
                       + [H.stored_member(k, v) for k, v in members.items()])
    assert "tptrace.json header decompresses to more than" in load_error(path).message


def test_header_larger_than_allowed(tmp_path: Path) -> None:
    members = H.TraceFile().member_bytes()
    members.pop(H.HEADER)
    big = H.zeros_member(H.HEADER, b"", MAX_HEADER_BYTES + 1)
    path = H.write_zip(tmp_path / "h.tptrace", [big] + [H.stored_member(k, v) for k, v in members.items()])
    assert "header is larger than allowed" in load_error(path).message


def test_declared_size_past_the_memory_budget_in_process(tmp_path: Path) -> None:
    t = H.TraceFile()
    n = 1 << 36
    t.set_accesses(n)
    err = load_error(t.save(tmp_path / "big.tptrace"))
    assert "too large to load" in err.message and "68,719,476,736 warp accesses" in err.message


def test_honest_huge_trace_refused_before_it_is_read(tmp_path: Path) -> None:
    # 4 Mi accesses, every member a true stream of zeros (0.2 MB of file): decoded, 1.1 GiB.
    # Before: read and decoded until the memory cap stopped it. Now: refused from the header,
    # under the cap's budget (half of it).
    path = H.huge_trace(tmp_path / "huge.tptrace", 1 << 22)
    hostile_run(tmp_path, path, "too large to load", "4,194,304 warp accesses", peak_mib=256)


# --- item 8: messages in words -------------------------------------------------------------------

def _set(path: str, value: object) -> Callable[[dict], None]:
    """An edit of the header: set the field at dotted `path` (list indices as numbers)."""
    def edit(h: dict) -> None:
        *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        for p in parents:
            h = h[p]
        h[last] = value
    return edit


def _drop(path: str) -> Callable[[dict], None]:
    def edit(h: dict) -> None:
        *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        for p in parents:
            h = h[p]
        del h[last]
    return edit


def _many_ops(h: dict) -> None:
    plain = {k: v for k, v in h["ops"][0].items() if k != "ptx"}  # the op count, not the header size, is at stake
    h["ops"] = [dict(plain, id=i) for i in range(MAX_OPS + 1)]


HEADER_CASES: dict[str, tuple[Callable[[dict], None], str]] = {
    "no launch": (_drop("launch"), "launch is missing"),
    "launch a list": (_set("launch", [1, 2]), "launch must be an object of named fields"),
    "grid text": (_set("launch.grid", "320"), "launch.grid must be a list"),
    "grid zero": (_set("launch.grid", [0, 1, 1]), "launch.grid[0] must be a whole number from 1"),
    "grid 2-d": (_set("launch.grid", [4, 4]), "3 dimensions"),
    "grid huge": (_set("launch.grid", [2**31 - 1, 65535, 65535]), "CTAs, more than the"),
    "block too big": (_set("launch.block", [2048, 1, 1]), "launch.block[0] must be a whole number from 1 to 1,024"),
    "negative dynamic_shared": (_set("launch.dynamic_shared", -1), "launch.dynamic_shared must be a whole number from 0"),
    "registers float": (_set("launch.registers_per_thread", 12.5), "launch.registers_per_thread"),
    "registers true": (_set("launch.registers_per_thread", True), "not true"),
    "kernel number": (_set("launch.kernel", 7), "launch.kernel must be text"),
    "kernel 5000 chars": (_set("launch.kernel", "k" * 5000), "launch.kernel is 5,000 characters long"),
    "ops not a list": (_set("ops", {"0": {}}), "ops must be a list"),
    "too many ops": (_many_ops, f"ops has {MAX_OPS + 1:,} entries"),
    "op not an object": (_set("ops.1", "load"), "ops[1] must be an object"),
    "op kind missing": (_drop("ops.1.kind"), "ops[1].kind is missing"),
    "op kind unknown": (_set("ops.0.kind", "jump\x1b[2J"), "ops[0].kind must be one of load, store, atomic"),
    "op id wrong": (_set("ops.2.id", 7), "ops[2].id must be 2 (ops are numbered in order), not 7"),
    "op bytes 3": (_set("ops.0.bytes", 3), "3 bytes per lane is not a power of two"),
    "op line negative": (_set("ops.0.line", -5), "ops[0].line"),
    "label number": (_set("ops.0.label", 3), "ops[0].label must be text"),
    "no provenance": (_drop("provenance"), "provenance is missing"),
    "backend unknown": (_set("provenance.backend", "quantum"), "provenance.backend must be one of"),
    "measured NaN": (_set("provenance.measured", {"l1_read_hit": float("nan")}), "provenance.measured.l1_read_hit must be a finite"),
    "measured text": (_set("provenance.measured", {"l1_read_hit": "high"}), "must be a finite number"),
    "generator deep": (_set("provenance.generator", {"a": [[[[[[[[[[1]]]]]]]]]]}), "nested more than"),
    "generator infinity": (_set("provenance.generator", {"n": float("inf")}), "provenance.generator.n must be a finite"),
    "no sources": (_set("sources", []), "no source text"),
    "source text too long": (_set("sources.0.text", "x" * (MAX_SOURCE_CHARS + 1)), "characters long"),
    "source name missing": (_drop("sources.0.name"), "sources[0].name is missing"),
    "no counts": (_drop("counts"), "counts is missing"),
    "negative counts": (_set("counts.accesses", -1), "counts.accesses must be a whole number from 0"),
    "counts disagree": (_set("counts.warps", 5), "but the counts make it [5]"),
    "unknown array": (_set("arrays.evil", {"dtype": "|u1", "shape": [1]}), "arrays.evil is not an array of a tptrace"),
    "object dtype": (_set("arrays.op.dtype", "|O"), "array op has type '|O'"),
    "structured dtype": (_set("arrays.op.dtype", [["a", "<i4"]]), "arrays.op.dtype must be text"),
    "big-endian dtype": (_set("arrays.warp_cta.dtype", ">i4"), "array warp_cta has type '>i4'"),
    "negative shape": (_set("arrays.op.shape", [-1]), "arrays.op.shape[0] must be a whole number from 0"),
    "3-d shape": (_set("arrays.op.shape", [1, 1, 1]), "arrays.op.shape has 3 entries"),
    "shuffled text": (_set("arrays.op.shuffled", "yes"), "arrays.op.shuffled must be true or false"),
    "unit 3": (_set("address_unit", 3), "address_unit must be a power of two"),
    "version text": (_set("version", "1"), "tptrace version '1'"),
    "array missing": (_drop("arrays.mask"), "array mask missing"),
}


@pytest.mark.parametrize("case", sorted(HEADER_CASES))
def test_header_problems_are_named_in_words(tmp_path: Path, case: str) -> None:
    # Before: about half of these showed a raw Python exception (`KeyError: 'launch'`,
    # `TypeError: int() argument ...`), some ran into the memory or the kernel.
    edit, needle = HEADER_CASES[case]
    t = H.TraceFile()
    edit(t.header)
    path = t.save(tmp_path / "t.tptrace")
    err = load_error(path)
    assert err.message.startswith(str(path)) and needle in err.message, err.message
    assert "\x1b" not in err.message and len(err.message) < 600


def _npy_damaged(tmp_path: Path) -> Path:
    t = H.TraceFile()
    t.raw["op.npy"] = b"\x93NUMPY\x03\x00" + bytes(200)
    return t.save(tmp_path / "npy.tptrace")


def _zip_damaged(tmp_path: Path) -> Path:
    good = [H.stored_member(k, v) for k, v in H.TraceFile().member_bytes().items()]
    return H.write_zip(tmp_path / "zip.tptrace", [H.Member(m.name, m.method, m.stream, m.crc ^ 1, m.file_size)
                                                 if m.name == "op.npy" else m for m in good])


def _header_damaged(tmp_path: Path) -> Path:
    t = H.TraceFile()
    HEADER_CASES["grid huge"][0](t.header)
    return t.save(tmp_path / "header.tptrace")


@pytest.mark.parametrize("make, needle", [(_header_damaged, "CTAs, more than the"),
                                          (_zip_damaged, "array op fails its checksum"),
                                          (_npy_damaged, "array op has a damaged .npy header")],
                         ids=["header", "zip", "npy"])
def test_one_of_each_kind_through_the_command_line(tmp_path: Path, make: Callable[[Path], Path], needle: str) -> None:
    """The in-process tables above, one case of each kind as a user meets it: exit 2, one error,
    bounded memory, nothing changed."""
    hostile_run(tmp_path, make(tmp_path), needle)


def test_header_not_json_or_not_utf8(tmp_path: Path) -> None:
    t = H.TraceFile()
    t.raw[H.HEADER] = b'{"format": "tptrace", "version": 1, '
    assert "header is not valid JSON (Expecting property name" in load_error(t.save(tmp_path / "a.tptrace")).message
    t.raw[H.HEADER] = '{"format": "tptrace"}'.encode("utf-16")
    assert "header is not UTF-8 text" in load_error(t.save(tmp_path / "b.tptrace")).message
    t.raw[H.HEADER] = b"[" * 100_000 + b"]" * 100_000
    assert "nested too deeply" in load_error(t.save(tmp_path / "c.tptrace")).message
    t.raw[H.HEADER] = b'{"format": "tptrace", "version": ' + b"9" * 5000 + b"}"
    assert "number too long" in load_error(t.save(tmp_path / "d.tptrace")).message


def test_damaged_npy_headers(tmp_path: Path) -> None:
    t = H.TraceFile()
    t.raw["op.npy"] = b"\x93NUMPY\x03\x00" + bytes(200)
    assert "array op has a damaged .npy header" in load_error(t.save(tmp_path / "a.tptrace")).message
    t.raw["op.npy"] = H.npy_bytes(np.zeros(1920, np.uint8))[:-5]
    assert "array op does not hold the data its header declares" in load_error(t.save(tmp_path / "b.tptrace")).message
    t.raw["op.npy"] = H.npy_bytes(np.zeros((1920, 1), np.uint8))
    assert "array op does not match its declaration" in load_error(t.save(tmp_path / "c.tptrace")).message


def test_zip_level_damage(tmp_path: Path) -> None:
    members = H.TraceFile().member_bytes()
    good = [H.stored_member(k, v) for k, v in members.items()]
    cases = {
        "bad crc": ([H.Member(m.name, m.method, m.stream, m.crc ^ 1, m.file_size) if m.name == "op.npy" else m
                     for m in good], "array op fails its checksum"),
        "short stream": ([H.Member(m.name, m.method, m.stream, m.crc, m.file_size + 10) if m.name == "op.npy" else m
                          for m in good], "array op is shorter than"),
        "garbage stream": ([H.Member(m.name, m.method, b"\xff" * 40, m.crc, m.file_size) if m.name == "op.npy" else m
                            for m in good], "array op has damaged compressed data"),
        "unknown method": ([H.Member(m.name, 99, m.stream, m.crc, m.file_size) if m.name == "op.npy" else m
                            for m in good], "compression method"),
    }
    for name, (ms, needle) in cases.items():
        assert needle in load_error(H.write_zip(tmp_path / f"{name}.tptrace", ms)).message, name
    raw = bytearray((tmp_path / "bad crc.tptrace").read_bytes())
    (tmp_path / "cut.tptrace").write_bytes(raw[: len(raw) // 2])
    assert "not a tptrace container" in load_error(tmp_path / "cut.tptrace").message
    with zipfile.ZipFile(tmp_path / "many.tptrace", "w") as zf:
        for i in range(100):
            zf.writestr(f"{i}.npy", b"")
    assert "it has 100 members" in load_error(tmp_path / "many.tptrace").message


# --- minor: files that are not regular files; names -----------------------------------------------

def test_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    # Before: opening the FIFO blocked until a writer came (forever).
    fifo = tmp_path / "pipe.tptrace"
    os.mkfifo(fifo)
    hostile_run(tmp_path, fifo, "is a FIFO (named pipe), not a .tptrace file")


def test_device_and_directory_are_refused(tmp_path: Path) -> None:
    run = run_cli(["report", "/dev/zero"], tmp_path)  # read-only use of a device
    assert_clean_error(run, "/dev/zero is a device, not a .tptrace file")
    err = load_error(tmp_path)
    assert "is a directory" in err.message and err.hint == "pass the trace file itself"


def test_unreadable_file_says_cannot_read(tmp_path: Path) -> None:
    # Before: "... is not a valid .tptrace file: PermissionError: ...". As root, permissions do
    # not apply: the child drops to `nobody` after importing, and opens the file by a relative
    # name from its folder (the pytest folders above it are closed to other users).
    path = shutil.copy(H.BASE, tmp_path / "secret.tptrace")
    os.chmod(path, 0)
    script = f"""
import os, sys
from tuiprof.errors import TraceError
from tuiprof.trace.io import load_trace
os.chdir({str(tmp_path)!r})
if os.geteuid() == 0:
    os.setgid(65534)
    os.setuid(65534)
try:
    load_trace("secret.tptrace")
except TraceError as e:
    print(e.message)
    print(e.hint)
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    message, hint = r.stdout.splitlines()
    assert message == "cannot read secret.tptrace: permission denied" and "permissions" in hint


def test_long_and_odd_file_names(tmp_path: Path) -> None:
    err = load_error(tmp_path / ("x" * 5000 + ".tptrace"))
    assert "the file name is too long" in err.message and len(err.message) < 500
    name = os.fsencode(tmp_path) + b"/t\xff\x1b[2J\x07.tptrace"
    with open(name, "wb") as fh:
        fh.write(b"not a zip")
    with pytest.raises(TraceError) as e:
        load_trace(os.fsdecode(name))
    msg = e.value.message
    assert "\x1b" not in msg and "\x07" not in msg and "\\x1b[2J\\x07" in msg and "\\udcff" in msg
    msg.encode("utf-8")  # printable on any terminal: no lone surrogate left
    assert "does not exist" in load_error(tmp_path / "none.tptrace").message


def test_read_header_validates_like_load(tmp_path: Path) -> None:
    t = H.TraceFile()
    del t.header["launch"]
    with pytest.raises(TraceError, match="launch is missing"):
        read_header(t.save(tmp_path / "t.tptrace"))
    assert read_header(H.BASE)["counts"]["accesses"] == 1920


def test_arch_named_by_a_trace_is_never_opened_by_the_loader(tmp_path: Path) -> None:
    """Loading reads the trace file only: a provenance.arch that names a file stays a string
    (the session resolves it against the presets)."""
    decoy = tmp_path / "decoy.toml"
    decoy.write_text("not toml at all [[[")
    os.chmod(decoy, 0)
    t = H.TraceFile()
    t.header["provenance"]["arch"] = str(decoy)
    trace = load_trace(t.save(tmp_path / "t.tptrace"))
    assert trace.provenance.arch == str(decoy)


def test_demo_traces_load_as_before() -> None:
    """The shipped demos load, and the loaded arrays agree with the file's own declarations."""
    from tuiprof.resources import data_dir

    for path in sorted(data_dir("demo_traces").glob("*.tptrace")):
        h = read_header(path)
        t = load_trace(path)
        assert t.n_accesses == h["counts"]["accesses"] and t.n_warps == h["counts"]["warps"]
        assert json.dumps(h)  # plain JSON


# --- demos built on first use ----------------------------------------------------------------------

@pytest.mark.slow
def test_damaged_cached_demo_is_built_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: a damaged cache file was reported as "not a valid .tptrace file" on every use.
    from tuiprof import demos

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cached = demos._cache_path("spmv-vec-u128")
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"PK\x03\x04 half a file")
    assert demos.resolve_target("spmv-vec-u128") == cached  # present: not built by resolving
    trace = demos.load(cached)
    assert trace.n_accesses == 536316 and load_trace(cached).n_accesses == 536316
    assert sorted(p.name for p in cached.parent.iterdir()) == [cached.name]  # no temp file left
    assert "built again" not in demos.demo_table()


def test_damaged_cached_demo_is_built_again_fast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The CI variant of the test above: the recording is stubbed (the vecadd demo's trace), the
    rebuild itself is real: the damage is named, the new file replaces the damaged one
    atomically, and it loads."""
    from tuiprof import demos

    recorded = load_trace(H.BASE)
    calls: list[str] = []
    monkeypatch.setattr(demos, "record_demo", lambda name: calls.append(name) or recorded)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cached = demos._cache_path("spmv-vec-u128")
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"PK\x03\x04 half a file")
    trace = demos.load(cached)
    assert calls == ["spmv-vec-u128"] and trace.n_accesses == recorded.n_accesses
    err = capsys.readouterr().err
    assert "recording demo spmv-vec-u128" in err and "the cached copy cannot be loaded" in err
    assert "not a tptrace container" in err
    assert load_trace(cached).n_accesses == recorded.n_accesses
    assert sorted(p.name for p in cached.parent.iterdir()) == [cached.name]  # no temp file left
    assert demos.load(cached).n_accesses == recorded.n_accesses and calls == ["spmv-vec-u128"]  # once


def test_damaged_file_that_is_not_a_cached_demo_is_not_rebuilt(tmp_path: Path) -> None:
    from tuiprof import demos

    bad = tmp_path / "spmv-vec-u128.tptrace"
    bad.write_bytes(b"junk")
    with pytest.raises(TraceError, match="not a tptrace container"):
        demos.load(bad)
    assert bad.read_bytes() == b"junk"


def _demo_env(tmp_path: Path) -> dict[str, str]:
    """A private user cache folder for demos, the kernels still from the warm cache."""
    from tuiprof.jit import kernel_cache_dir

    return {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "NUMBA_CACHE_DIR": str(kernel_cache_dir() or tmp_path / "numba")}


RECORDING_REFUSED = """
import errno, os, tempfile
import tuiprof.demos as _demos

def _deny(real):
    def call(*args, **kwargs):  # the cache folder is read-only (root ignores modes: simulated)
        if str(kwargs.get("dir") or "").startswith(os.environ["XDG_CACHE_HOME"]):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real(*args, **kwargs)
    return call

def _never(name):
    raise SystemExit("the demo was recorded although it could not be saved")

tempfile.TemporaryFile, tempfile.mkstemp = _deny(tempfile.TemporaryFile), _deny(tempfile.mkstemp)
_demos.record_demo = _never
"""


def test_unwritable_demo_cache_is_one_error_before_recording(tmp_path: Path) -> None:
    # Before: the demo was recorded (a minute, 1.3 GB) and only then failed to be saved.
    before = snapshot(tmp_path)
    run = run_cli(["report", "spmv-vec-u128", "--trials", "2", "--no-sweep"], tmp_path, prelude=RECORDING_REFUSED,
                  env=_demo_env(tmp_path))
    assert_clean_error(run, "cannot build demo spmv-vec-u128: the cache folder", "(permission denied)")
    assert "XDG_CACHE_HOME" in run.stderr and run.peak_mib < 400
    assert snapshot(tmp_path) == before


@pytest.mark.usefixtures("warm_numba")
def test_recording_a_demo_with_stderr_closed_says_nothing(tmp_path: Path) -> None:
    # Before: print(..., file=sys.stderr) with sys.stderr None wrote "recording demo ..." to
    # stdout, into the report.
    prelude = ("import tuiprof.demos as _demos\nfrom tuiprof.trace.io import load_trace as _load\n"
               f"_demos.record_demo = lambda name: _load({str(H.BASE)!r})\n")
    run = run_cli(["report", "spmv-vec-u128", "--trials", "1", "--no-sweep"], tmp_path, prelude=prelude,
                  env=_demo_env(tmp_path), close_fds=(2,))
    assert run.code == 0 and run.stdout.startswith(b"tuiprof "), run.stdout[:300]
    assert b"recording demo" not in run.stdout and run.stderr == ""


def test_cache_folder_in_the_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: FileExistsError / NotADirectoryError traceback.
    from tuiprof import demos

    (tmp_path / "cache").write_text("a file where the cache folder should be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(OutputError) as e:
        demos.demo_path("spmv-vec-u128")
    assert "cannot build demo spmv-vec-u128" in e.value.message and "a file is in the way" in e.value.message
    assert "XDG_CACHE_HOME" in e.value.hint
    assert "built on first use" in demos.demo_table()
