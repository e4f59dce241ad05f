"""Steps 1-4 of a trial (DESIGN.md, "The stochastic memory-hierarchy model"): the order in which
the SMs issue their bulk sequences, each SM's alignment point, and the merge of the SMs' streams
into one L2 stream. Together they are paper 000 sec. 3.2 step 1a, "a valid random ordering" of the
requests: random, yet every warp's accesses keep their program order and every warp access's
transactions travel together. Shared by the replay kernels (`tuiprof.sim.replay`, and the
reference kernel `tuiprof.sim.reference` the tests compare it with), so both replay one order.

1. **CTA placement.** Snapshot CTA k runs on SM ``k % sm_count``. Each SM holds ``md`` CTAs at
   once and starts the next CTA assigned to it as soon as one has issued all its sequences
   (back-to-back execution).
2. **Intra-core scheduling** (3.2.2, Fig. 2): a weighted round robin over the SM's resident
   warps; a picked warp issues its whole next bulk sequence (the accesses up to the next op that
   starts a sequence). It is a deficit round robin: each round every resident warp earns its
   weight in credit, then the warps are visited in residency order from a uniformly random warp,
   each visit spending one unit of credit on one sequence, until no warp has a unit left; finished
   CTAs are replaced between rounds. Warp w's long-run share of the issues is ``w / sum(w)``;
   with equal weights every warp issues one sequence per round. A warp joins with a random credit
   in [0, 1), its phase.

   *The weights* are drawn per trial: first a skew uniform in ``[0, SKEW_MAX]`` (0.5), then each
   warp's weight uniform in ``[1 - skew, 1 + skew]``. Why: on the hardware, warps drift apart
   (different latencies, branches, and a warp scheduler that favours some warps: loose round
   robin keeps them close, greedy-then-oldest lets the oldest run far ahead, paper 002 sec. 2.2),
   and the trace does not say how far. Equal weights keep every warp of an SM in lock-step,
   which concentrates each op's accesses in time and inflates the hits that come from it (spmv-u's
   ``y[ind]`` H1: 0.29 in lock-step, 0.07-0.10 once warps drift). A uniform law is bounded (no
   warp starves or runs alone), has mean 1 (the SM issues as much as with equal weights), and its
   widest case, 3:1 between the fastest and slowest warp, lets a CTA's warps finish far apart as
   under greedy-then-oldest. Drawing the skew itself per trial makes the spread of the trials
   cover how far warps drift, which the model does not know, instead of one arbitrary choice:
   the per-load results depend on it, and their spread now says so (paper 000 sec. 5.2-5.3
   reports a spread of about 0.01 on the hit ratios, 0.02 for SpMV's L2 reads).

   *Alignment points per CTA* (3.2.1: "random start (alignment) points are chosen for thread
   blocks scheduled simultaneously"): the first ``md`` CTAs of each SM, which start together,
   each begin at a random point of their work, uniform over its sequences (all warps of the CTA
   at the same fraction), as CTAs do in the steady state of a kernel, where each started when
   another finished. The head each skipped is issued once the SM has started all its own CTAs,
   as a CTA of its own taking a free slot (it stands for the CTA that would follow in that
   steady state; CTAs of one kernel behave alike, sec. 3.1), so nothing is dropped and no slot
   idles; each part keeps its program order.
3. **Schedule deviation** (3.2.1): SMs fall out of step, so each SM starts its part of the
   snapshot at a random alignment point: its issue order (all its bulk sequences, across its
   back-to-back CTAs) is rotated by a uniform random number of sequences, the skipped head being
   issued at the end. Nothing is dropped, so access counts are identical in every trial; only
   the relative order, hence the hits, change. The alignment also sets where the SM's L1
   starts cold.
4. **Inter-core scheduling** (3.2.2): the SMs' streams of warp accesses are merged by a weighted
   random pick of an SM, weight = the warp accesses it has still to issue. That is a uniformly
   random valid interleaving (paper 000 3.2, step 1a: "a valid random ordering") in which every
   SM progresses through its work at the same expected pace whatever its hit ratio. All the
   transactions of one warp access travel together (3.2.2).
"""

from __future__ import annotations

import numpy as np

from tuiprof.jit import INLINE, KERNEL, keep, njit
from tuiprof.sim.rng import rng_below, rng_unit

SKEW_MAX = 0.5
"""Largest skew of the warp weights: a trial's weights lie in ``[1 - skew, 1 + skew]``, its skew
uniform in ``[0, SKEW_MAX]`` (see the module docstring)."""


@njit(**KERNEL)
def draw_weights(st, n_warps, skew_max):
    """Step 2's weight of every warp for one trial: a skew uniform in [0, skew_max], then each
    weight uniform in [1 - skew, 1 + skew]."""
    skew = skew_max * rng_unit(st)
    weight = np.empty(n_warps, dtype=np.float64)
    for w in range(n_warps):
        weight[w] = 1.0 - skew + 2.0 * skew * rng_unit(st)
    return weight


@njit(**KERNEL)
def draw_starts(st, S, md, warp_seq_off, cta_warp_off, cta_warps):
    """Step 2's alignment points (3.2.1): the first sequence each warp issues. The CTAs scheduled
    simultaneously (the first `md` with sequences on each SM) each draw a point ``a`` uniform in
    ``[0, m)``, ``m`` the most sequences one of their warps has; a warp of ``n`` sequences starts at
    its sequence ``a * n // m``. Every other warp starts at its first sequence."""
    n_ctas = cta_warp_off.shape[0] - 1
    start = warp_seq_off[:-1].copy()
    for s in range(S):
        resident = 0
        k = s
        while resident < md and k < n_ctas:
            m = 0
            for i in range(cta_warp_off[k], cta_warp_off[k + 1]):
                w = cta_warps[i]
                m = max(m, warp_seq_off[w + 1] - warp_seq_off[w])
            if m > 0:
                a = rng_below(st, m)
                for i in range(cta_warp_off[k], cta_warp_off[k + 1]):
                    w = cta_warps[i]
                    start[w] += a * (warp_seq_off[w + 1] - warp_seq_off[w]) // m
                resident += 1
            k += S
    return start


@njit(**INLINE)
def _join(st, c, n_act, act, credit, wnext, wend, cta_warp_off, cta_warps, cta_left):
    """CTA `c`'s warps with sequences left in ``[wnext, wend)`` join `act`, each with a random
    credit in [0, 1) (its phase in the round robin); returns the new `n_act` and the CTA's live warps."""
    live = 0
    for i in range(cta_warp_off[c], cta_warp_off[c + 1]):
        w = cta_warps[i]
        if wnext[w] < wend[w]:
            act[n_act] = w
            n_act += 1
            live += 1
            credit[w] = rng_unit(st)
    cta_left[c] = live
    keep(act)
    keep(credit)
    keep(cta_left)
    return n_act, live


@njit(**KERNEL)
def weighted_round_robin(st, S, md, weight, start, warp_seq_off, warp_cta, cta_warp_off, cta_warps, sm_seq_off):
    """Steps 1-2 with given warp weights and alignment points: the bulk sequences each SM issues,
    in issue order (SM s owns ``issue[sm_seq_off[s]:sm_seq_off[s+1]]``). Every sequence is issued
    exactly once; a warp issues ``start[w] ..`` its last sequence in program order, then (only if
    it had skipped a head) its first sequences up to ``start[w]``, in program order too."""
    n_ctas = cta_warp_off.shape[0] - 1
    n_warps = warp_cta.shape[0]
    issue = np.empty(sm_seq_off[S], dtype=np.int64)
    wnext = start.copy()
    wend = warp_seq_off[1:].copy()
    credit = np.zeros(n_warps, dtype=np.float64)
    cta_left = np.zeros(max(n_ctas, 1), dtype=np.int64)
    body_done = np.zeros(max(n_ctas, 1), dtype=np.uint8)
    heads = np.empty(max(n_ctas, 1), dtype=np.int64)
    act = np.empty(n_warps + 1, dtype=np.int64)
    for s in range(S):
        pos = sm_seq_off[s]
        k = s
        resident = 0
        n_act = 0
        h_first = 0
        h_last = 0
        while True:
            # Admit CTAs into the free slots: the SM's own CTAs in order, then the skipped heads.
            while resident < md:
                if k < n_ctas:
                    c = k
                    k += S
                elif h_first < h_last:
                    c = heads[h_first]
                    h_first += 1
                    for i in range(cta_warp_off[c], cta_warp_off[c + 1]):
                        w = cta_warps[i]
                        wnext[w] = warp_seq_off[w]
                        wend[w] = start[w]
                else:
                    break
                n_act, live = _join(st, c, n_act, act, credit, wnext, wend, cta_warp_off, cta_warps, cta_left)
                if live > 0:
                    resident += 1
            if n_act == 0:
                break
            # One round (3.2.2): every warp earns its weight in credit, then the warps are visited
            # in residency order from a random warp, each visit issuing the warp's next bulk
            # sequence for one unit of credit, until no warp has a unit left.
            r0 = rng_below(st, n_act)
            for i in range(n_act):
                credit[act[i]] += weight[act[i]]
            more = True
            while more:
                more = False
                for i in range(n_act):
                    j = r0 + i
                    if j >= n_act:
                        j -= n_act
                    w = act[j]
                    if credit[w] >= 1.0 and wnext[w] < wend[w]:
                        issue[pos] = wnext[w]
                        pos += 1
                        wnext[w] += 1
                        credit[w] -= 1.0
                        if credit[w] >= 1.0 and wnext[w] < wend[w]:
                            more = True
            # Retire the warps that are done, and the CTAs whose warps all are.
            m = 0
            for i in range(n_act):
                w = act[i]
                if wnext[w] < wend[w]:
                    act[m] = w
                    m += 1
                    continue
                c = warp_cta[w]
                cta_left[c] -= 1
                if cta_left[c] == 0:
                    resident -= 1
                    if body_done[c] == 0:  # queue the head it skipped, if any
                        body_done[c] = 1
                        for q in range(cta_warp_off[c], cta_warp_off[c + 1]):
                            if start[cta_warps[q]] > warp_seq_off[cta_warps[q]]:
                                heads[h_last] = c
                                h_last += 1
                                break
            n_act = m
    return issue


@njit(**KERNEL)
def schedule(st, S, md, warp_seq_off, warp_cta, cta_warp_off, cta_warps, sm_seq_off):
    """Steps 1-2 of one trial: the warp weights and alignment points drawn from `st`, then
    `weighted_round_robin` (SM s owns ``issue[sm_seq_off[s]:sm_seq_off[s+1]]``)."""
    weight = draw_weights(st, warp_cta.shape[0], SKEW_MAX)
    start = draw_starts(st, S, md, warp_seq_off, cta_warp_off, cta_warps)
    return weighted_round_robin(st, S, md, weight, start, warp_seq_off, warp_cta, cta_warp_off, cta_warps,
                                sm_seq_off)


@njit(**KERNEL)
def align(st, issue, sm_seq_off, seq_off, acc_op, op_cached, sm_acc_off):
    """Step 3: each SM's cached warp accesses in issue order, after rotating its sequences by a
    random alignment point (SM s owns ``order[sm_acc_off[s]:sm_acc_off[s+1]]``)."""
    S = sm_seq_off.shape[0] - 1
    order = np.empty(sm_acc_off[S], dtype=np.int64)
    for s in range(S):
        pos = sm_acc_off[s]
        first = sm_seq_off[s]
        n_s = sm_seq_off[s + 1] - first
        a = rng_below(st, n_s) if n_s > 0 else 0
        for t in range(n_s):
            u = a + t
            if u >= n_s:
                u -= n_s
            q = issue[first + u]
            for r in range(seq_off[q], seq_off[q + 1]):
                if op_cached[acc_op[r]]:
                    order[pos] = r
                    pos += 1
    return order


@njit(**KERNEL)
def merge_order(st, sm_acc_off):
    """Step 4: the SM of each successive warp access of the merged stream: a uniform random
    shuffle of the SM labels, i.e. a pick of an SM with weight = accesses it has left."""
    S = sm_acc_off.shape[0] - 1
    n = sm_acc_off[S]
    lab = np.empty(n, dtype=np.int64)
    for s in range(S):
        for g in range(sm_acc_off[s], sm_acc_off[s + 1]):
            lab[g] = s
    for i in range(n - 1, 0, -1):
        j = rng_below(st, i + 1)
        x = lab[i]
        lab[i] = lab[j]
        lab[j] = x
    return lab

