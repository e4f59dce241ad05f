"""The front end on real compiler output: the committed nvcc/NVRTC fixtures of the corpus
(tests/cuda/ptx_*.cu and the demos) and fresh compiles, so that a new nvcc is caught."""

from __future__ import annotations

import collections
import re
from pathlib import Path

import pytest

from tests.support.ptx_support import (
    CUDA_DIR,
    DEMO_SOURCES,
    compile_nvcc,
    compile_nvrtc,
    corpus_sources,
    find_nvcc,
    fixture_text,
    fixtures,
    min_arch,
    nvrtc_available,
    replicate,
    source_for,
)
from tuiprof.ptx import parse_module
from tuiprof.ptx.module import Module
from tuiprof.ptx.ops import resolve_loc, static_ops, user_file

FIXTURES = fixtures()
needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")


def instruction_lines(text: str) -> collections.Counter[int]:
    """Independent count of the instructions on each PTX line: statements inside function bodies
    (brace depth >= 1 where the line starts) that are neither directives nor labels; a statement
    spanning several lines (``call.uni``) counts on its first line."""
    counts: collections.Counter[int] = collections.Counter()
    depth = 0
    in_section = False
    continuing = False
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("//", 1)[0].strip()
        if in_section or line.startswith(".section"):
            in_section = not line.startswith("}")
            continue
        at_start = depth
        depth += line.count("{") - line.count("}")
        if continuing:
            continuing = ";" not in line
            continue
        if at_start < 1:
            continue
        pieces = line.lstrip("{} \t").split(";")
        for k, piece in enumerate(pieces):
            stmt = re.sub(r"^[$%\w]+:\s*", "", piece.strip().lstrip("{} \t")).strip()
            if not stmt or stmt.startswith((".", "}")):
                continue
            counts[n] += 1
            if k == len(pieces) - 1:  # no ';' yet: the statement goes on below
                continuing = True
    return counts


def test_fixtures_exist_for_nvcc_and_nvrtc() -> None:
    kinds = collections.Counter(p.parent.name for p in FIXTURES)
    assert kinds["nvcc"] >= 18 and kinds["nvrtc"] >= 17
    for p in FIXTURES:
        assert source_for(p).exists(), p
    for kind in ("nvcc", "nvrtc"):  # every demo kernel file, from both compilers
        demos = {source_for(p).name for p in FIXTURES if p.parent.name == kind and p.name.startswith("demo_")}
        assert demos == set(DEMO_SOURCES), kind


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_parses_every_instruction(path: Path) -> None:
    text = path.read_text()
    m = parse_module(text)
    parsed = collections.Counter(i.ptx_line for f in m.functions.values() for i in f.instructions)
    assert parsed == instruction_lines(text)
    assert m.kernels and m.files
    for f in m.functions.values():
        for i in f.instructions:
            assert i.loc is None or i.loc.file in m.files, (f.name, i.ptx_line)
        for _label, at in f.labels.items():
            assert 0 <= at <= len(f.instructions)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_ops_point_at_their_source_lines(path: Path) -> None:
    m = parse_module(path.read_text())
    src = source_for(path)
    text = src.read_text()
    lines = text.splitlines()
    n_ops = 0
    for kernel in m.kernels:
        for fname, index, op in static_ops(m, kernel, src.name, text):
            assert op.file == src.name, op
            assert 1 <= op.line <= len(lines) and op.label and op.label in lines[op.line - 1], op
            line = lines[op.line - 1]
            # the column is the expression's, or the statement's when the label is the whole line
            assert line[op.column - 1:].startswith(op.label) or op.label == line.split("//")[0].strip().rstrip(";").strip(), op
            assert op.kind in ("load", "store", "atomic") and op.space in ("global", "shared", "local", "const")
            ins = m.functions[fname].instructions[index]
            assert ins.opcode in ("ld", "ldu", "st", "atom", "red", "cp")
            assert op.ptx_line == ins.ptx_line or op.ptx_line < ins.ptx_line  # first copy's line
            n_ops += 1
    assert n_ops > 0


def _fixture(name: str, kind: str = "nvcc") -> Module:
    (path,) = [p for p in FIXTURES if p.parent.name == kind and p.name.startswith(name + ".")][:1]
    return parse_module(path.read_text())


def test_header_inlined_accesses_attributed_to_the_call_site() -> None:
    for kind in ("nvcc", "nvrtc"):
        m = _fixture("ptx_histogram_atomic", kind)
        text = (CUDA_DIR / "ptx_histogram_atomic.cu").read_text()
        user = user_file(m, "ptx_histogram_atomic.cu")
        f = m.functions["histogram_global"]
        table = static_ops(m, "histogram_global", "ptx_histogram_atomic.cu", text)
        (atom,) = [(i, o) for _, i, o in table if o.kind == "atomic"]
        loc = f.instructions[atom[0]].loc
        assert loc is not None
        if kind == "nvcc":  # NVRTC 13.5 treats atomicAdd as a builtin: no inlined_at there
            assert loc.file != user and "atomic" in m.files[loc.file]  # from a CUDA header
        assert resolve_loc(loc, user) == loc.outermost and loc.outermost.line == 4
        assert (atom[1].line, atom[1].label) == (4, "hist[data[i]]")


def test_ldg_through_a_header_and_user_device_functions() -> None:
    m = _fixture("ptx_extras")
    text = (CUDA_DIR / "ptx_extras.cu").read_text()
    lines = text.splitlines()
    table = static_ops(m, "extras", "ptx_extras.cu", text)
    by_label = {o.label: (fn, i, o) for fn, i, o in table}
    # __ldg comes from sm_32_intrinsics.hpp, inlined at the kernel's line
    fn, i, o = by_label["in[(i + 7) % n]"]
    assert lines[o.line - 1].strip().startswith("float c = __ldg(")
    assert m.functions[fn].instructions[i].loc.file != 1
    # an inlined user device function: the access is attributed to its own line in the user's file
    fn, i, o = by_label["p[i]"]
    assert "return p[i] * 2.0f;" in lines[o.line - 1]
    assert m.functions[fn].instructions[i].loc.inlined_at is not None
    # user inline asm holding a load: the op is the asm statement's line
    (asm,) = [o for _, _, o in table if "ld.global.cg" in o.label]
    assert "asm volatile" in lines[asm.line - 1]
    # a noinline device function's stores come after the kernel's ops, under its own name
    callee = [(fn, o) for fn, _, o in table if fn != "extras"]
    assert [o.label for _, o in callee] == ["out[i]", "out[i + 1]"]
    assert {fn for fn, _ in callee} == {"_Z10store_pairPfif"}
    assert min(o.id for _, o in callee) > max(o.id for fn, _, o in table if fn == "extras")
    # inline asm scoped registers were renamed apart from the function's own
    regs = m.functions["extras"].registers
    assert any(r.startswith("p~") for r in regs) and any(r.startswith("t~") for r in regs)
    # printf: the call to the extern vprintf is parsed, its argument buffer is a local store
    assert not m.functions["vprintf"].has_body
    calls = [i for i in m.functions["extras"].instructions if i.opcode == "call"]
    assert {c.operands[1].name for c in calls} == {"vprintf", "_Z10store_pairPfif"}


def test_reduce_shfl_inlined_twice_chains_to_both_call_sites() -> None:
    m = _fixture("ptx_reduce_shfl")
    f = m.functions["reduce_shfl"]
    shfl = [i for i in f.instructions if i.opcode == "shfl"]
    assert len(shfl) == 10
    assert {i.loc.outermost.line for i in shfl} == {9, 14}
    assert {resolve_loc(i.loc, 1).line for i in shfl} == {2}  # inside warpReduceSum


@needs_nvcc
@pytest.mark.slow
@pytest.mark.parametrize("src", corpus_sources(), ids=lambda p: p.name)
def test_fresh_nvcc_compiles_parse(src: Path, tmp_path: Path) -> None:
    text = src.read_text()
    for arch in sorted({min_arch(src), 80, 90}):
        ptx = compile_nvcc(src, arch, tmp_path / f"{src.stem}.sm{arch}.ptx")
        m = parse_module(ptx)
        assert m.target == f"sm_{arch}"
        parsed = collections.Counter(i.ptx_line for f in m.functions.values() for i in f.instructions)
        assert parsed == instruction_lines(ptx)
        lines = text.splitlines()
        for kernel in m.kernels:
            for _, _, op in static_ops(m, kernel, src.name, text):
                assert op.label in lines[op.line - 1], (arch, op)


@pytest.mark.skipif(not nvrtc_available(), reason="NVRTC (cuda-bindings + nvidia-cuda-nvrtc) is not installed")
@pytest.mark.parametrize("src", [s for s in corpus_sources() if s.name != "ptx_modern_features.cu"],
                         ids=lambda p: p.name)
def test_fresh_nvrtc_compiles_parse(src: Path) -> None:
    text = src.read_text()
    ptx = compile_nvrtc(text, src.name, min_arch(src))
    m = parse_module(ptx)
    assert m.files[user_file(m, src.name)].endswith(src.name)
    lines = text.splitlines()
    for kernel in m.kernels:
        for _, _, op in static_ops(m, kernel, src.name, text):
            assert op.label in lines[op.line - 1], op


def test_large_module_parses_completely() -> None:
    """A module of >10k lines (the corpus's functions repeated under fresh names) parses with
    every instruction; its speed is measured in benchmarks/bench_ptx.py."""
    text = replicate(fixture_text("ptx_local_mem"), 10_000)
    m = parse_module(text)
    assert text.count("\n") >= 10_000
    parsed = collections.Counter(i.ptx_line for f in m.functions.values() for i in f.instructions)
    assert parsed == instruction_lines(text)
    kernels = list(m.kernels)
    assert len(kernels) >= 20 and all(static_ops(m, k, "ptx_local_mem.cu", "") for k in kernels[:3])
