"""CFG, back-edges and immediate post-dominators: hand-built cases, then a brute-force
post-dominator computation on every function of the PTX corpus."""

from __future__ import annotations

import pytest

from tests.support.ptx_support import fixtures
from tuiprof.ptx import parse_module
from tuiprof.ptx.cfg import EXIT, build_cfg, ipdom
from tuiprof.ptx.module import CFG, Function

HEADER = ".version 9.0\n.target sm_75\n.address_size 64\n"


def fn(body: str) -> Function:
    text = (HEADER + ".visible .entry k()\n{\n.reg .pred %p<5>;\n.reg .b32 %r<10>;\n"
            + body + "\n}\n")
    return parse_module(text).functions["k"]


def index_of(f: Function, ptx_text: str) -> int:
    """Index of the first instruction whose mnemonic and operands start with `ptx_text`."""
    for i, ins in enumerate(f.instructions):
        if f"{'.'.join((ins.opcode,) + ins.mods)}" == ptx_text.split()[0] and (
                len(ptx_text.split()) == 1 or repr(ins.operands).find(ptx_text.split()[1]) >= 0):
            return i
    raise LookupError(ptx_text)


IF_ELSE = """
	mov.u32 %r1, 1;
	@%p1 bra $ELSE;
	mov.u32 %r2, 2;
	bra.uni $JOIN;
$ELSE:
	mov.u32 %r3, 3;
$JOIN:
	mov.u32 %r4, 4;
	ret;
"""


def test_if_else_diamond() -> None:
    f = fn(IF_ELSE)
    g = build_cfg(f)
    assert [(b.start, b.end) for b in g.blocks] == [(0, 2), (2, 4), (4, 5), (5, 7)]
    assert g.blocks[0].succs == (2, 1) and g.blocks[1].succs == (3,) and g.blocks[2].succs == (3,)
    assert g.blocks[3].preds == (1, 2) and g.exits == (3,) and g.back_edges == frozenset()
    ip = ipdom(f)
    assert ip[1] == 5  # the guarded bra reconverges at $JOIN
    assert ip[0] == 1 and ip[3] == 5 and ip[6] == EXIT


def test_if_then_without_else_and_branch_to_function_end() -> None:
    f = fn("@%p1 bra $SKIP;\nmov.u32 %r1, 1;\n$SKIP:\nmov.u32 %r2, 2;\n@%p2 bra $END;\nret;\n$END:")
    ip = ipdom(f)
    assert ip[0] == 2  # skips to $SKIP
    g = build_cfg(f)
    last = g.blocks[g.block_of[3]]
    assert set(g.exits) == {last.index, g.block_of[4]}  # both the branch off the end and ret exit
    assert ip[3] == EXIT


def test_loop_back_edge_and_exit_branch() -> None:
    body = """
	mov.u32 %r1, 0;
$LOOP:
	add.u32 %r1, %r1, 1;
	setp.lt.u32 %p1, %r1, 10;
	@%p1 bra $LOOP;
	mov.u32 %r2, %r1;
	ret;
"""
    f = fn(body)
    g = build_cfg(f)
    loop = g.block_of[1]
    assert g.back_edges == frozenset({(loop, loop)})
    assert ipdom(f)[3] == 4  # the latch branch's IPDOM is the loop exit


def test_loop_with_break_and_nested_loop() -> None:
    body = """
$OUTER:
	mov.u32 %r1, 0;
$INNER:
	add.u32 %r1, %r1, 1;
	@%p1 bra $BREAK;
	@%p2 bra $INNER;
	@%p3 bra $OUTER;
$BREAK:
	mov.u32 %r2, 1;
	ret;
"""
    f = fn(body)
    g = build_cfg(f)
    outer, inner = g.block_of[0], g.block_of[1]
    assert {(g.block_of[4], outer), (g.block_of[3], inner)} == set(g.back_edges)
    ip = ipdom(f)
    brk = index_of(f, "mov.u32 %r2")
    assert ip[2] == brk and ip[3] == brk and ip[4] == brk


def test_early_return_reconverges_at_exit() -> None:
    f = fn("@%p1 bra $BODY;\nret;\n$BODY:\nmov.u32 %r1, 1;\nret;")
    assert ipdom(f)[0] == EXIT


def test_guarded_ret_and_trap() -> None:
    f = fn("@%p1 ret;\nmov.u32 %r1, 1;\n@%p2 trap;\nmov.u32 %r2, 2;\nret;")
    g = build_cfg(f)
    assert len(g.blocks) == 3 and set(g.exits) == {0, 1, 2}
    assert g.blocks[0].succs == (1,)
    ip = ipdom(f)
    assert ip[0] == EXIT  # the block may exit, so only the exit post-dominates it


def test_endless_loop_gets_exit() -> None:
    f = fn("@%p1 bra $SPIN;\nret;\n$SPIN:\nmov.u32 %r1, 1;\nbra.uni $SPIN;")
    g = build_cfg(f)
    spin = g.block_of[2]
    assert (spin, spin) in g.back_edges
    assert ipdom(f)[3] == EXIT  # no path to the exit: no reconvergence point
    assert ipdom(f)[0] == 1  # paths that never exit do not count: every exiting path meets ret


def test_brx_idx_switch() -> None:
    body = """
	mov.u32 %r1, 1;
$tbl: .branchtargets $A, $B, $C;
	brx.idx %r1, $tbl;
$A:
	mov.u32 %r2, 1;
	bra.uni $JOIN;
$B:
	mov.u32 %r2, 2;
	bra.uni $JOIN;
$C:
	mov.u32 %r2, 3;
$JOIN:
	ret;
"""
    f = fn(body)
    g = build_cfg(f)
    assert len(g.blocks[g.block_of[1]].succs) == 3
    assert ipdom(f)[1] == index_of(f, "ret")


# --------------------------------------------------------------------------- brute force


def _reaches_exit(g: CFG, start: int, avoid: int) -> bool:
    exits = set(g.exits)
    seen, stack = set(), [start]
    while stack:
        b = stack.pop()
        if b == avoid or b in seen:
            continue
        seen.add(b)
        if b in exits:
            return True
        stack.extend(g.blocks[b].succs)
    return False


def brute_ipdoms(g: CFG) -> list[int | None]:
    """Immediate post-dominator per block by definition (None: no path to the exit)."""
    n = len(g.blocks)
    out: list[int | None] = []
    for b in range(n):
        if not _reaches_exit(g, b, avoid=-2):
            out.append(None)
            continue
        strict = [d for d in range(n) if d != b and not _reaches_exit(g, b, avoid=d)]
        # the immediate one is post-dominated by every other strict post-dominator
        imm = [d for d in strict if all(e == d or not _reaches_exit(g, d, avoid=e) for e in strict)]
        assert len(imm) <= 1
        out.append(imm[0] if imm else EXIT)
    return out


CORPUS = fixtures()


def test_corpus_is_present() -> None:
    assert len(CORPUS) >= 30


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_ipdom_matches_brute_force_on_corpus(path) -> None:
    m = parse_module(path.read_text())
    checked = 0
    for f in m.functions.values():
        if not f.has_body:
            continue
        g = build_cfg(f)
        ip = ipdom(f)
        want = brute_ipdoms(g)
        for blk in g.blocks:
            w = want[blk.index]
            got = ip[blk.end - 1]
            expect = EXIT if w in (None, EXIT) else g.blocks[w].start
            assert got == expect, (f.name, blk.index)
            checked += 1
        # back-edges: the target dominates nothing it cannot reach; at least each is a real edge
        for a, b in g.back_edges:
            assert b in g.blocks[a].succs and g.blocks[b].start <= g.blocks[a].start
    assert checked > 0
