"""Steps 1-4 of a trial (DESIGN.md, "The stochastic memory-hierarchy model"): the order in which
the SMs issue their bulk sequences, each SM's alignment point, and the merge of the SMs' streams
into one L2 stream. Shared by the replay kernels (`tuiprof.sim.replay`, and the reference kernel
`tuiprof.sim.reference` the tests compare it with): under 1% of a trial.

1. **CTA placement.** Snapshot CTA k runs on SM ``k % sm_count``. Each SM holds ``md`` CTAs at
   once and starts the next CTA assigned to it as soon as one has issued all its sequences
   (back-to-back execution).
2. **Intra-core scheduling** (3.2.2): weighted round-robin over the SM's resident warps with
   equal weights, one bulk sequence per warp per round; a picked warp issues its whole next
   bulk sequence (the accesses up to the next op that starts a sequence). Each round visits the
   resident warps in residency order from a uniformly random warp, which models the jitter of
   the warp schedulers while keeping round-robin fairness. Finished CTAs are replaced between
   rounds.
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
from tuiprof.sim.rng import rng_below


@njit(**INLINE)
def _admit(md, S, n_ctas, k, resident, n_act, act, wnext, warp_seq_off, cta_warp_off, cta_warps, cta_left):
    """Start the SM's next CTAs (k, k+S, ...) until `md` are resident; their live warps join `act`."""
    while resident < md and k < n_ctas:
        live = 0
        for i in range(cta_warp_off[k], cta_warp_off[k + 1]):
            w = cta_warps[i]
            if wnext[w] < warp_seq_off[w + 1]:
                act[n_act] = w
                n_act += 1
                live += 1
        cta_left[k] = live
        if live > 0:
            resident += 1
        k += S
    keep(act)
    keep(wnext)
    keep(cta_left)
    return k, resident, n_act


@njit(**KERNEL)
def schedule(st, S, md, warp_seq_off, warp_cta, cta_warp_off, cta_warps, sm_seq_off):
    """Steps 1-2: the bulk sequences each SM issues, in issue order (SM s owns
    ``issue[sm_seq_off[s]:sm_seq_off[s+1]]``)."""
    n_ctas = cta_warp_off.shape[0] - 1
    n_warps = warp_cta.shape[0]
    issue = np.empty(sm_seq_off[S], dtype=np.int64)
    wnext = warp_seq_off[:-1].copy()
    cta_left = np.zeros(max(n_ctas, 1), dtype=np.int64)
    act = np.empty(n_warps + 1, dtype=np.int64)
    for s in range(S):
        pos = sm_seq_off[s]
        k, resident, n_act = _admit(md, S, n_ctas, s, 0, 0, act, wnext, warp_seq_off, cta_warp_off,
                                    cta_warps, cta_left)
        while n_act > 0:
            r0 = rng_below(st, n_act)
            for i in range(n_act):
                j = r0 + i
                if j >= n_act:
                    j -= n_act
                w = act[j]
                issue[pos] = wnext[w]
                pos += 1
                wnext[w] += 1
            m = 0
            for i in range(n_act):
                w = act[i]
                if wnext[w] < warp_seq_off[w + 1]:
                    act[m] = w
                    m += 1
                else:
                    c = warp_cta[w]
                    cta_left[c] -= 1
                    if cta_left[c] == 0:
                        resident -= 1
            n_act = m
            k, resident, n_act = _admit(md, S, n_ctas, k, resident, n_act, act, wnext, warp_seq_off,
                                        cta_warp_off, cta_warps, cta_left)
    return issue


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

