"""Why a static op is hot and what to do about it: the one word the source pane shows beside it
(`hot_reason`) and the plain-words advice of the drill-down, the report and the JSON (`advice`,
`insight`), from its simulated statistics (`tuiprof.model.analysis.OpStats`) and its address
pattern (`tuiprof.model.pattern`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from tuiprof.model.pattern import AddressPattern
from tuiprof.trace.data import LANES

if TYPE_CHECKING:
    from tuiprof.model.analysis import Analysis, OpStats
    from tuiprof.model.md import MdDecision

UNCOALESCED = 2.0
"""Sectors per request at least this many times the ideal: uncoalesced."""
THRASH_REUSE = 0.25
"""Share of touches of the L1's fill units (sectors on a sectored L1) that revisit one the warp touched
before: the reuse a cache could keep."""
THRASH_H1 = 0.5
CAMPING = 1.25
"""An op's DRAM reads waiting at least this many times the kernel's mean DRAM latency: queued
behind each other on few channels or banks (camping)."""
STREAMING_REUSE = 0.05
STREAMING_HIT = 0.2
"""A streaming load hits below this in both the L1 and the L2 (whoever brought the data there)."""


# --- why an op is hot, and what to do -------------------------------------------------------

def _h1(stats: OpStats) -> float:
    return stats.h1.mean if stats.h1.defined and stats.op.kind == "load" else math.nan


def excess(stats: OpStats) -> float:
    """Sectors per request over the ideal (1 = ideal; NaN when unknown)."""
    if not (math.isfinite(stats.sectors_per_access) and stats.ideal_sectors > 0):
        return math.nan
    return stats.sectors_per_access / stats.ideal_sectors


def camping(stats: OpStats, kernel_tm: float) -> float:
    """How many times the kernel's mean DRAM batch latency the op's DRAM reads wait (NaN when it
    has none)."""
    if not (stats.tm.defined and math.isfinite(kernel_tm) and kernel_tm > 0):
        return math.nan
    return stats.tm.mean / kernel_tm


def hot_reason(stats: OpStats, pattern: AddressPattern | None, kernel_tm: float) -> str:
    """One word for why the op costs what it does, from its coalescing, its address pattern and
    its simulated hit ratios and DRAM latency: ``gather``, ``uncoalesced 8x`` (sectors per request
    over the ideal), ``thrash`` (the warp's lines are evicted before it reuses them), ``camping``
    (its DRAM reads queue on few channels or banks), ``streaming`` (no reuse, DRAM-bound), for a
    shared-memory op ``32-way conflict`` (wavefronts per request over the ideal), for a constant
    op ``serialised 8x`` (distinct addresses per warp access), or "" when nothing stands out."""
    if stats.passes is not None:
        if stats.passes.extra <= 0.5:
            return ""
        ways = stats.passes.ways
        return f"{ways:.0f}-way conflict" if stats.passes.space == "shared" else f"serialised {ways:.0f}x"
    over = excess(stats)
    if _uncoalesced(over):
        return "gather" if pattern is not None and pattern.gather else f"uncoalesced {over:.0f}x"
    h1 = _h1(stats)
    if _thrash(pattern, h1):
        return "thrash"
    if _camping(stats, camping(stats, kernel_tm)):
        return "camping"
    if _streaming(pattern, h1, _h2(stats)) and math.isfinite(stats.dram_share) and stats.dram_share > 0.5:
        return "streaming"
    return ""


def _uncoalesced(over: float) -> bool:
    return math.isfinite(over) and over >= UNCOALESCED


def _thrash(pattern: AddressPattern | None, h1: float) -> bool:
    """The warp comes back to its lines but finds them evicted."""
    return pattern is not None and math.isfinite(h1) and pattern.reuse >= THRASH_REUSE and h1 < THRASH_H1


def _camping(stats: OpStats, late: float) -> bool:
    """Its DRAM requests wait well over the kernel's mean, and DRAM is a real part of its latency."""
    return math.isfinite(late) and late >= CAMPING and math.isfinite(stats.dram_share) and stats.dram_share >= 0.25


def _streaming(pattern: AddressPattern | None, h1: float, h2: float = math.nan) -> bool:
    """No one reuses its data: its warp almost never comes back to a sector, and the simulation
    finds it rarely in the L1 and rarely in the L2 (the L2 is where other warps' and CTAs'
    reuse shows: matmul-tile16's ``B[(t + ty) * n + col]`` reads its own sectors once, yet 50% of
    them hit the L2 because other CTAs read them first)."""
    return (pattern is not None and math.isfinite(pattern.reuse) and pattern.reuse < STREAMING_REUSE
            and math.isfinite(h1) and h1 < STREAMING_HIT and not (math.isfinite(h2) and h2 >= STREAMING_HIT))


def _h2(stats: OpStats) -> float:
    return stats.h2.mean if stats.h2.defined and stats.op.kind == "load" else math.nan


def _lower_md(decision: MdDecision | None) -> str:
    """What the MD decision says about a smaller working set per SM, in a clause."""
    if decision is None:
        return "a smaller working set per SM (the MD pane says whether fewer CTAs per SM pay)"
    if decision.recommended_md < decision.default_md:
        return f"fewer CTAs per SM: MD {decision.recommended_md} instead of {decision.default_md} (the MD pane)"
    return "better locality (fewer CTAs per SM would not pay here: the MD pane keeps the default)"


def advice(stats: OpStats, pattern: AddressPattern | None, kernel_tm: float = math.nan,
           decision: MdDecision | None = None, line_bytes: int = 128) -> list[str]:
    """Plain-words advice for one op, strongest first; always at least one line. `decision` (the
    MD decision, when known) keeps the advice in step with the MD pane."""
    op = stats.op
    if stats.passes is not None:
        return shared_advice(stats) if stats.passes.space == "shared" else const_advice(stats)
    load = op.kind == "load"
    verb = {"load": "read", "store": "write"}.get(op.kind, "update")
    out: list[str] = []
    h1 = _h1(stats)
    if not load:
        out.append(f"{op.kind.capitalize()}s go to L2 (the L1 does not keep written lines): H2 here is the L2 "
                   "write hit ratio, and the latency is mostly hidden from the warp.")
    over = excess(stats)
    if _uncoalesced(over):
        spr = f"{stats.sectors_per_access:.1f} sectors per request where {stats.ideal_sectors:.0f} would do"
        if pattern is not None and pattern.gather:
            out.append(f"Data-dependent gather: the lanes' addresses follow an index ({spr}; no lane stride covers "
                       f"more than {math.ceil(100 * pattern.regular_share)}% of lane pairs). A layout change alone cannot "
                       f"coalesce it: renumber or sort the indexed data so that neighbouring lanes {verb} neighbouring "
                       "elements, or give each warp one row (as a vector CSR kernel does).")
        else:
            stride = f" (lanes {pattern.lane_strides[0][0]:+d} B apart)" if pattern and pattern.lane_strides else ""
            out.append(f"Uncoalesced: {spr}{stride}. Make consecutive lanes {verb} consecutive addresses (structure "
                       "of arrays, or stage the data through shared memory, as a tiled transpose does).")
    walks = False
    if load and pattern is not None and pattern.thread_strides and math.isfinite(h1):
        step, share = pattern.thread_strides[0]
        ideal_lines = max(1, -(-LANES * op.bytes // line_bytes))
        walks = 0 < step < line_bytes and share >= 0.5 and h1 < 0.5 and pattern.lines_per_access >= 4 * ideal_lines
        if walks:
            per_line = max(2, min(4, line_bytes // max(step, 1), 16 // max(op.bytes, 1)))
            out.append(f"Each lane walks its own row ({step} B per step) so the next element is in the line it just "
                       f"loaded, but that line is evicted before its reuse (H1 {100 * h1:.0f}%). Vectorize these "
                       f"loads (Baghsorkhi12 sec. 6.2): read {per_line} elements per lane in one "
                       f"{per_line * op.bytes}-byte vector load (e.g. float{per_line}/int{per_line}).")
    if load and _streaming(pattern, h1, _h2(stats)):
        out.append("Streaming: no warp or CTA reuses its data (its warps almost never come back to a sector, and it "
                   "rarely hits the L1 or the L2), so no cache size and no MD helps; only coalescing and DRAM "
                   "bandwidth matter.")
    elif load and pattern is not None and _thrash(pattern, h1) and not walks:
        out.append(f"Thrashing: the warp comes back to its lines ({100 * pattern.reuse:.0f}% of touches, median "
                   f"{pattern.reuse_distance:.0f} warp accesses later) but they are evicted first (H1 {100 * h1:.0f}%). "
                   f"Keep them: {_lower_md(decision)}, or a tile that fits the L1.")
    elif load and math.isfinite(stats.dram_share) and stats.dram_share > 0.5:
        out.append(f"DRAM dominates this load's latency ({100 * stats.dram_share:.0f}% of X): raise its H1 or H2 with "
                   f"{_lower_md(decision)}.")
    late = camping(stats, kernel_tm)
    if _camping(stats, late):
        out.append(f"Its DRAM {verb}s wait {late:.1f}x the kernel's mean DRAM latency: they queue on few channels or "
                   "banks (camping). Spread them: pad the row pitch, or visit blocks in a diagonal order.")
    if load and math.isfinite(h1) and h1 >= 0.8:
        out.append(f"Served from L1 (H1 {100 * h1:.0f}%): little to gain on this load.")
    h2 = _h2(stats)
    if load and math.isfinite(h1) and h1 < STREAMING_HIT and math.isfinite(h2) and h2 >= 0.5 and not out:
        out.append(f"Reused through the L2 (H2 {100 * h2:.0f}%): other warps or CTAs read the same data, but not "
                   "while it is still in this SM's L1. Sharing it within a CTA (a tile in shared memory) or "
                   "scheduling the CTAs that share it together would turn those L2 hits into L1 or shared hits.")
    if not out:
        out.append("No single cause stands out: this load's latency follows the kernel's overall L1/L2 behaviour.")
    return out


def shared_advice(stats: OpStats) -> list[str]:
    """What to do about a shared-memory op: its bank conflicts (`tuiprof.model.shared`); shared
    memory has no hit ratio, no L2 and no DRAM, so nothing else applies."""
    sh = stats.passes
    assert sh is not None
    verb = {"load": "read", "store": "write"}.get(stats.op.kind, "update")
    if sh.extra <= 0.05:
        return [f"No bank conflict: {sh.passes:.1f} wavefronts per request, the ideal for its width "
                f"({stats.op.bytes} B per lane); X {sh.latency:.0f} cycles, the shared latency."]
    out = [f"Bank conflicts: {sh.passes:.1f} wavefronts per request where {sh.ideal:.0f} would do (up to "
           f"{sh.worst} in one request; {100 * sh.conflicted:.0f}% of requests conflict): lanes of one warp {verb} "
           f"different words of the same bank, which are served one per cycle. They add {sh.extra:.1f} cycles to "
           f"each access and take {sh.extra:.1f} more cycles of the SM's shared-memory bandwidth from every warp."]
    if stats.op.bytes <= 4:
        out.append("Pad the array's rows by one word (a [32][33] tile for a 32 x 32 one, as a tiled transpose does) "
                   "so that a column falls in 32 different banks, or swizzle the index (column ^ row); lanes that "
                   "read the same word share it at no cost (a broadcast).")
    else:
        out.append(f"With {stats.op.bytes} B per lane a warp is served in {32 * stats.op.bytes // 128} parts; within "
                   "each, pad or swizzle the index so that its lanes' words fall in different banks.")
    return out


def const_advice(stats: OpStats) -> list[str]:
    """What to do about a constant-memory op: its serialisation in the constant cache
    (`tuiprof.model.constant`); constant memory has no L1/L2 figures here."""
    c = stats.passes
    assert c is not None
    if c.extra <= 0.05:
        return [f"A broadcast: the lanes of a warp read one constant address ({c.passes:.1f} constant-cache "
                f"requests per warp access); X {c.latency:.0f} cycles. Constant memory suits this access."]
    return [f"Serialised: the lanes of a warp read {c.passes:.1f} different constant addresses on average (up to "
            f"{c.worst}; {100 * c.conflicted:.0f}% of warp accesses read more than one), and the constant cache serves "
            f"one address per cycle, so each access takes {c.extra:.1f} extra cycles.",
            "Data indexed by thread belongs in global memory read through the L1 (a const __restrict__ pointer or "
            "__ldg) or in shared memory; keep __constant__ for values every lane of a warp reads at once."]


def kernel_tm(analysis: Analysis) -> float:
    """The kernel's mean DRAM batch latency Tm (NaN before it is defined)."""
    return analysis.tm.mean if analysis.tm.defined else math.nan


def insight(stats: OpStats, pattern: AddressPattern | None, analysis: Analysis,
            line_bytes: int) -> tuple[str, list[str]]:
    """`hot_reason` and `advice` of one op of `analysis` (with its kernel-wide DRAM latency and
    MD decision): what the source pane, the drill-down and the report say about it."""
    tm = kernel_tm(analysis)
    decision = analysis.decisions.md if analysis.decisions is not None else None
    return hot_reason(stats, pattern, tm), advice(stats, pattern, tm, decision, line_bytes)
