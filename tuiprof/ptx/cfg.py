"""Control flow of one PTX function: basic blocks, back-edges and immediate post-dominators.

The emulator reconverges a divergent warp at the immediate post-dominator (IPDOM) of each
divergent branch (Volta-style convergence barriers, research file collectors.md sec. 3), and the
bulk-sequence analysis ends a sequence at every loop back-edge; both come from here.
"""

from __future__ import annotations

from tuiprof.ptx.module import CFG, BasicBlock, Function, Instruction, Label, PtxError

EXIT_OPCODES = frozenset({"ret", "exit", "trap"})
"""Instructions that leave the function (for the calling thread) when they execute."""

EXIT = -1
"""The virtual exit node's index in `ipdom` results."""


def branch_targets(fn: Function, ins: Instruction) -> tuple[int, ...]:
    """Instruction indices a ``bra``/``brx`` may jump to (``len(instructions)`` = off the end)."""
    if not ins.operands:
        raise PtxError(f"{ins.opcode} without a target", ins.ptx_line)
    if ins.opcode == "bra":
        target = ins.operands[-1]
        if not isinstance(target, Label):
            raise PtxError("indirect bra through a register is not supported", ins.ptx_line)
        return (fn.labels[target.name],)
    table = ins.operands[-1]
    if not isinstance(table, Label) or table.name not in fn.branch_targets:
        raise PtxError("brx.idx needs a .branchtargets table label", ins.ptx_line)
    return tuple(fn.labels[t] for t in fn.branch_targets[table.name])


def _edges(fn: Function, ins: Instruction, nxt: int) -> tuple[tuple[int, ...], bool]:
    """(successor instruction indices, can exit) of a block ending with `ins`."""
    n = len(fn.instructions)
    if ins.opcode in ("bra", "brx"):
        targets = list(branch_targets(fn, ins))
        if ins.guard is not None:
            targets.append(nxt)
    elif ins.opcode in EXIT_OPCODES:
        targets = [nxt] if ins.guard is not None else []
        return tuple(t for t in dict.fromkeys(targets) if t < n), True
    else:
        targets = [nxt]
    exits = any(t >= n for t in targets)
    return tuple(t for t in dict.fromkeys(targets) if t < n), exits


def build_cfg(fn: Function) -> CFG:
    """Basic blocks, edges, back-edges (by DFS from the entry) and exit blocks of `fn`."""
    instrs = fn.instructions
    n = len(instrs)
    if n == 0:
        return CFG((), (), frozenset(), ())
    leaders = {0}
    leaders.update(i for i in fn.labels.values() if i < n)
    for i, ins in enumerate(instrs):
        if (ins.opcode in ("bra", "brx") or ins.opcode in EXIT_OPCODES) and i + 1 < n:
            leaders.add(i + 1)
    starts = sorted(leaders)
    block_of = [0] * n
    for b, s in enumerate(starts):
        e = starts[b + 1] if b + 1 < len(starts) else n
        for i in range(s, e):
            block_of[i] = b
    succs: list[tuple[int, ...]] = []
    exits: list[int] = []
    for b, _s in enumerate(starts):
        e = starts[b + 1] if b + 1 < len(starts) else n
        targets, can_exit = _edges(fn, instrs[e - 1], e)
        succs.append(tuple(dict.fromkeys(block_of[t] for t in targets)))
        if can_exit:
            exits.append(b)
    preds: list[list[int]] = [[] for _ in starts]
    for b, ss in enumerate(succs):
        for t in ss:
            preds[t].append(b)
    back = _back_edges(succs)
    blocks = tuple(BasicBlock(b, s, starts[b + 1] if b + 1 < len(starts) else n, succs[b],
                              tuple(preds[b])) for b, s in enumerate(starts))
    return CFG(blocks, tuple(block_of), frozenset(back), tuple(exits))


def _back_edges(succs: list[tuple[int, ...]]) -> set[tuple[int, int]]:
    """Edges to a block on the DFS stack (iterative DFS from block 0)."""
    n = len(succs)
    state = [0] * n  # 0 new, 1 on stack, 2 done
    back: set[tuple[int, int]] = set()
    stack: list[tuple[int, int]] = [(0, 0)]
    state[0] = 1
    while stack:
        b, k = stack[-1]
        if k < len(succs[b]):
            stack[-1] = (b, k + 1)
            t = succs[b][k]
            if state[t] == 1:
                back.add((b, t))
            elif state[t] == 0:
                state[t] = 1
                stack.append((t, 0))
        else:
            state[b] = 2
            stack.pop()
    return back


def block_ipdoms(cfg: CFG) -> list[int]:
    """Immediate post-dominator block of every block; `EXIT` for the virtual exit.

    Cooper-Harvey-Kennedy's iterative dominator algorithm on the reverse CFG rooted at a virtual
    exit that every exiting block reaches. Post-dominance counts only paths that reach the exit:
    a branch into an endless loop is post-dominated by the other side. Blocks from which no exit
    is reachable (the endless loop itself) get `EXIT`.
    """
    nb = len(cfg.blocks)
    root = nb
    # reverse graph: successors of x in the reverse CFG are the predecessors of x in the CFG
    rsucc: list[list[int]] = [list(b.preds) for b in cfg.blocks] + [list(cfg.exits)]
    rpred: list[list[int]] = [list(b.succs) for b in cfg.blocks] + [[]]
    for e in cfg.exits:
        rpred[e].append(root)
    # postorder of the reverse graph from the root
    order: list[int] = []
    seen = [False] * (nb + 1)
    seen[root] = True
    stack: list[tuple[int, int]] = [(root, 0)]
    while stack:
        x, k = stack[-1]
        if k < len(rsucc[x]):
            stack[-1] = (x, k + 1)
            y = rsucc[x][k]
            if not seen[y]:
                seen[y] = True
                stack.append((y, 0))
        else:
            order.append(x)
            stack.pop()
    po = [-1] * (nb + 1)
    for i, x in enumerate(order):
        po[x] = i
    idom = [-1] * (nb + 1)
    idom[root] = root
    rpo = list(reversed(order))
    changed = True
    while changed:
        changed = False
        for x in rpo:
            if x == root:
                continue
            new = -1
            for p in rpred[x]:
                if idom[p] == -1:
                    continue
                if new == -1:
                    new = p
                    continue
                a, c = p, new
                while a != c:
                    while po[a] < po[c]:
                        a = idom[a]
                    while po[c] < po[a]:
                        c = idom[c]
                new = a
            if new != -1 and idom[x] != new:
                idom[x] = new
                changed = True
    return [EXIT if idom[b] in (-1, root) else idom[b] for b in range(nb)]


cfg = build_cfg


def ipdom(fn: Function) -> list[int]:
    """Per instruction, the index of its immediate post-dominator instruction; `EXIT` (-1)
    when that is the function's exit.

    Inside a block it is the next instruction; for a block's last instruction (a branch) it is
    the first instruction of the block's immediate post-dominator: where the lanes split by a
    divergent branch meet again.
    """
    g = cfg(fn)
    ip = block_ipdoms(g)
    out = [EXIT] * len(fn.instructions)
    for blk in g.blocks:
        for i in range(blk.start, blk.end - 1):
            out[i] = i + 1
        target = ip[blk.index]
        out[blk.end - 1] = EXIT if target == EXIT else g.blocks[target].start
    return out
