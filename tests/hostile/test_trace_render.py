"""Hostile traces against the report (issue 9, item 4's rendering half and the minor items):
bounded memory whatever the strings, no control sequence on the terminal, and a per-op cost
that follows the ops a trace actually accesses."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest

from tests.support import hostile as H
from tests.support.hostile_run import run_cli, snapshot
from tuiprof.report import document, render
from tuiprof.session import RunConfig, Session
from tuiprof.trace.data import MAX_LABEL_CHARS, MAX_LINE_CHARS
from tuiprof.trace.io import load_trace

# Anything a terminal could act on: C0 controls but the newline, DEL, C1 controls, and the
# format characters that reorder text (bidirectional overrides and isolates).
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
NASTY = "\x1b[2J\x1b]0;owned\x07\x9b31m\u202e\x00"


def nasty_trace(tmp_path: Path) -> Path:
    """vecadd with escape sequences in every string a report shows, and in its own file name."""
    t = H.TraceFile()
    h = t.header
    h["launch"]["kernel"] = f"kernel{NASTY}"
    h["snapshot_rule"] = f"rule{NASTY}\nfake line"
    h["provenance"]["gpu"] = f"gpu{NASTY}"
    h["provenance"]["tool_version"] = f"v{NASTY}"
    name = h["sources"][0]["name"]
    h["sources"][0]["text"] = f"// {NASTY}\t tab\n" + h["sources"][0]["text"]
    for o in h["ops"]:
        o["label"] = f"A{NASTY}[id]\nnext"
        o["line"] = 1
        o["file"] = name
    h["ops"][0]["file"] = f"other{NASTY}.cu"
    return t.save(tmp_path / f"t{NASTY.replace(chr(0), '')}.tptrace")


def test_rendered_reports_hold_no_control_characters(tmp_path: Path) -> None:
    path = nasty_trace(tmp_path)
    trace = load_trace(path)
    doc = document(Session(trace, RunConfig(trials=2)), None)
    for fmt in ("text", "md"):
        out = render(doc, fmt)
        assert not UNSAFE.search(out), (fmt, UNSAFE.search(out))
        assert "\\x1b[2J" in out and "\\u202e" in out and "\\x0afake line" in out  # shown, escaped
        assert "\nfake line" not in out and "\nnext" not in out
    text = render(doc, "json")
    assert text.isascii() and json.loads(text)["trace"]["kernel"] == trace.launch.kernel  # JSON keeps the data


@pytest.mark.usefixtures("warm_numba")
def test_report_command_prints_no_control_characters(tmp_path: Path) -> None:
    # Before: the kernel name, labels, file names and source line reached the terminal raw.
    path = nasty_trace(tmp_path)
    before = snapshot(tmp_path)
    for fmt in ("text", "md"):
        run = run_cli(["report", str(path), "--trials", "2", "--no-sweep", "--format", fmt], tmp_path)
        assert run.code == 0 and "Traceback" not in run.stderr, run.stderr
        out = run.stdout.decode("utf-8")
        assert not UNSAFE.search(out), (fmt, UNSAFE.search(out))
        assert "static ops by cost" in out.lower()
    assert snapshot(tmp_path) == before


def test_per_op_strings_are_cut_in_the_document(tmp_path: Path) -> None:
    t = H.many_ops(H.TraceFile(), 40, "int x = " + "y" * 100_000 + ";")
    for o in t.header["ops"]:
        o["label"] = "L" * 4000
        o["file"] = t.header["sources"][0]["name"]
    trace = load_trace(t.save(tmp_path / "t.tptrace"))
    doc = document(Session(trace, RunConfig(trials=2)), None)
    ops = doc["trace"]["ops"]
    assert len(ops) == 40
    for o in ops:
        assert len(o["label"]) == MAX_LABEL_CHARS and o["label"].endswith("…")
        assert len(o["source"]) == MAX_LINE_CHARS and o["source"].startswith("int x = yyy") and o["source"].endswith("…")
    for fmt in ("text", "md", "json"):
        assert len(render(doc, fmt)) < 40 * 1500


@pytest.mark.usefixtures("warm_numba")
def test_render_bomb_has_bounded_memory(tmp_path: Path) -> None:
    # 3,000 ops on one 1 MB source line (25 KB of file). Before: every op carried the whole line
    # into the report and every table row was padded to it: 5.7 GB, then MemoryError.
    path = H.many_ops(H.TraceFile(), 3000, "x" * (1 << 20)).save(tmp_path / "bomb.tptrace")
    before = snapshot(tmp_path)
    run = run_cli(["report", str(path), "--trials", "2", "--no-sweep"], tmp_path)
    assert run.code == 0 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert run.peak_mib < 600, f"peak {run.peak_mib:.0f} MiB"
    lines = run.stdout.decode("utf-8").splitlines()
    assert len(lines) > 6000 and max(len(ln) for ln in lines) < 2 * MAX_LINE_CHARS + 200
    assert snapshot(tmp_path) == before


def test_unused_ops_share_their_estimates_and_change_nothing(tmp_path: Path) -> None:
    """2,000 ops that no access names: the used ops' estimates are exactly those of the trace
    without them, and the unused ones share one set of estimates (the per-op work follows the
    distinct ops, not the op table: 60,000 unused ops took 38 s for 2 trials)."""
    plain = load_trace(H.TraceFile().save(tmp_path / "plain.tptrace"))
    padded = load_trace(H.many_ops(H.TraceFile(), 2003).save(tmp_path / "padded.tptrace"))
    config = RunConfig(trials=3, sweep=False, tolerance=None)
    a = Session(plain, config).run()
    b = Session(padded, config).run()
    for s, u in zip(a.ops, b.ops[:3]):
        assert (s.h1, s.h2, s.x, s.tm, s.cost, s.cost_share) == (u.h1, u.h2, u.x, u.tm, u.cost, u.cost_share)
    unused = b.ops[3:]
    assert all(s.warp_accesses == 0 for s in unused)
    assert len({id(s.x) for s in unused}) == 1 and len({id(s.tm) for s in unused}) == 1
    assert a.headline == b.headline


def test_nasty_strings_are_escaped_by_name() -> None:
    """`printable` against the Unicode database: every character it leaves is printable, every
    one it escapes is not (or is a kept one), for the whole Basic Multilingual Plane."""
    from tuiprof.trace.text import printable

    for start in range(0, 0x10000, 0x1000):
        chunk = "".join(chr(c) for c in range(start, start + 0x1000) if not 0xD800 <= c < 0xE000)
        out = printable(chunk)
        assert out.isprintable()
        kept = set(printable(chunk, keep="\n\t"))
        assert {"\n", "\t"} & set(chunk) <= kept
    assert unicodedata.category("\u202e") == "Cf" and printable("\u202e") == "\\u202e"
