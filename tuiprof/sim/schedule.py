"""Steps 1-4 of a trial (ARCHITECTURE.md, "The stochastic memory-hierarchy model"): the order in which
each SM issues its bulk sequences, and the merge of the SMs' streams into one L2 stream. Together
they are Baghsorkhi12 sec. 3.2 step 1a, "a valid random ordering" of the requests: random, yet
**every warp's accesses keep their program order in every trial** (a load that precedes a store
in the source is never served by that store) and every warp access's transactions travel
together. Schedule deviation is modelled by *delaying* work, never by rotating it. Shared by the
replay kernels (`tuiprof.sim.replay`, and the reference kernel `tuiprof.sim.reference` the tests
compare it with), so both replay one order.

1. **CTA placement.** Snapshot CTA k runs on SM ``k % sm_count`` (`tuiprof.sim.prepared` numbers
   the CTAs so: in snapshot order, or on each CTA's measured SM in the order it ran them when a
   GPU recording carries them, `tuiprof.sim.prepared.measured_placement`). A snapshot's warm-up
   CTAs (`tuiprof.trace.data.Snapshot.warm`) run first, as a schedule of their own, and the
   counted CTAs after them (`order_accesses`). Each SM holds ``md`` CTAs at
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
   robin keeps them close, greedy-then-oldest lets the oldest run far ahead, Yen14 sec. 2.2),
   and the trace does not say how far. Equal weights keep every warp of an SM in lock-step,
   which concentrates each op's accesses in time and inflates the hits that come from it (spmv-u's
   ``y[ind]`` H1: 0.29 in lock-step, 0.07-0.10 once warps drift). A uniform law is bounded (no
   warp starves or runs alone), has mean 1 (the SM issues as much as with equal weights), and its
   widest case, 3:1 between the fastest and slowest warp, lets a CTA's warps finish far apart as
   under greedy-then-oldest. Drawing the skew itself per trial makes the spread of the trials
   cover how far warps drift, which the model does not know, instead of one arbitrary choice:
   the per-load results depend on it, and their spread now says so (Baghsorkhi12 sec. 5.2-5.3
   reports a spread of about 0.01 on the hit ratios, 0.02 for SpMV's L2 reads).

   *Alignment points per CTA* (3.2.1: "random start (alignment) points are chosen for thread
   blocks scheduled simultaneously"): the first ``md`` CTAs of each SM, which start together,
   each join the round robin after a random number of rounds, uniform over the ``m`` rounds of a
   CTA whose longest warp has ``m`` sequences (one CTA lifetime) times the SM's `lag_share`,
   holding their slot meanwhile; an SM with no warp ready moves on to the next CTA's joining
   round. So the CTAs of an SM are out of step as in the steady state of a kernel, where each
   started when another finished, and each CTA still issues its work from its first sequence, in
   program order. (The paper is silent on how an alignment point is realised; a point inside a
   CTA's work would issue its later accesses before its earlier ones, which no hardware does.)
3. **Schedule deviation between SMs** (3.2.1): SMs fall out of step, so each SM's stream enters
   the merge after a random number of the other SMs' accesses: ``u`` times the accesses of one
   resident set (the first ``md`` CTAs) of every other SM, times the SM's `lag_share`, ``u``
   uniform in [0, 1), less the smallest such delay. One resident set is as far as SMs drift apart
   in the steady state of a kernel (an SM that started a CTA late is at most one CTA lifetime
   behind); rotating an SM's whole issue order instead put SMs a whole snapshot apart (stencil7
   on the H100, recorded whole-grid: L2 read hit ratio 37% rotated, where ncu measured 58%).
   *The lag share*: drift comes from CTAs finishing out of step, and the CTA scheduler hands out
   a kernel's first wave at once, so an SM whose snapshot is one resident set runs in step, and
   one with a fraction ``f`` of a set more lags by at most ``f`` lifetimes (at most one). Without
   it, a one-wave SpMV snapshot on the Tesla C2050 spread its L2 read hit ratio 0.14 between
   trials (0.34 with the SMs in step, 0.85 once they barely overlapped): delays that large only
   say how many SMs run at once, which the first wave does not leave to chance. Nothing is
   dropped, so access counts are identical in every trial; only the relative order, hence the
   hits, change.
4. **Inter-core scheduling** (3.2.2): the SMs' streams of warp accesses are merged by a weighted
   random pick of a started SM, weight = the warp accesses it has still to issue. Among the SMs
   that have started that is a uniformly random valid interleaving (Baghsorkhi12 3.2, step 1a: "a
   valid random ordering") in which every SM progresses through its work at the same expected
   pace whatever its hit ratio. All the transactions of one warp access travel together (3.2.2).
"""

from __future__ import annotations

import numpy as np

from tuiprof.jit import INLINE, KERNEL, keep, njit, plain_kernel
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


@njit(**INLINE)
def lag_share(resident, total):
    """How far, in lifetimes of its first resident set, work can lag that started with
    `resident` units of `total`: none when the first resident set is all there is (the CTA
    scheduler hands out a kernel's first wave at once, so it runs in step), at most one lifetime
    (CTAs that finish out of step put the next ones at most one CTA lifetime apart)."""
    if resident <= 0 or total <= resident:
        return 0.0
    return min(1.0, (total - resident) / resident)


@njit(**KERNEL)
def draw_joins(st, S, md, warp_seq_off, cta_warp_off, cta_warps):
    """Step 2's alignment points (3.2.1) as delays: the round in which each CTA's warps join its
    SM's round robin, counted from the SM's first round. The CTAs scheduled simultaneously (the
    first `md` with sequences on each SM) each draw a delay uniform over ``m`` rounds, ``m`` the
    most sequences one of their warps has, times `lag_share` of the SM's CTAs; every other CTA
    joins as soon as it has a slot (0)."""
    n_ctas = cta_warp_off.shape[0] - 1
    join = np.zeros(max(n_ctas, 1), dtype=np.int64)
    longest = np.zeros(max(n_ctas, 1), dtype=np.int64)
    for c in range(n_ctas):
        for i in range(cta_warp_off[c], cta_warp_off[c + 1]):
            w = cta_warps[i]
            longest[c] = max(longest[c], warp_seq_off[w + 1] - warp_seq_off[w])
    for s in range(S):
        live = 0
        for k in range(s, n_ctas, S):
            if longest[k] > 0:
                live += 1
        share = lag_share(min(md, live), live)
        resident = 0
        k = s
        while resident < md and k < n_ctas:
            if longest[k] > 0:
                join[k] = rng_below(st, max(1, np.int64(longest[k] * share)))
                resident += 1
            k += S
    return join


@njit(**INLINE)
def _join(st, c, n_act, act, credit, wnext, wend, cta_warp_off, cta_warps, cta_left):
    """CTA `c`'s warps with sequences left join `act`, each with a random credit in [0, 1) (its
    phase in the round robin); returns the new `n_act` and the CTA's live warps."""
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


@njit(**INLINE)
def _live(c, wnext, wend, cta_warp_off, cta_warps):
    """Whether CTA `c` has a warp with sequences left."""
    for i in range(cta_warp_off[c], cta_warp_off[c + 1]):
        w = cta_warps[i]
        if wnext[w] < wend[w]:
            return True
    return False


@njit(**INLINE)
def _cta_epoch(c, wnext, wend, seq_epoch, cta_warp_off, cta_warps):
    """The barrier interval CTA `c` is in: the lowest of its unfinished warps' next sequences'
    (a large number when all are done)."""
    e = np.int64(1) << 62
    for i in range(cta_warp_off[c], cta_warp_off[c + 1]):
        w = cta_warps[i]
        if wnext[w] < wend[w]:
            e = min(e, np.int64(seq_epoch[wnext[w]]))
    return e


@njit(**KERNEL)
def weighted_round_robin(st, S, md, weight, join, seq_epoch, warp_seq_off, warp_cta, cta_warp_off, cta_warps,
                         sm_seq_off):
    """Steps 1-2 with given warp weights and joining rounds: the bulk sequences each SM issues,
    in issue order (SM s owns ``issue[sm_seq_off[s]:sm_seq_off[s+1]]``). Every sequence is issued
    exactly once and every warp issues its sequences in program order. A CTA admitted into a slot
    with ``join[c] > 0`` holds the slot and joins the round robin in round ``join[c]`` of its SM
    (a round with no warp ready is skipped: the SM moves on to the next joining round).

    CTA barriers hold as on the hardware: a warp whose next sequence lies in barrier interval
    ``seq_epoch[q]`` waits until every unfinished warp of its CTA has reached that interval (its
    credit is kept at one sequence while it waits), so no warp runs past a ``__syncthreads``
    that another warp of its CTA has not reached."""
    n_ctas = cta_warp_off.shape[0] - 1
    n_warps = warp_cta.shape[0]
    issue = np.empty(sm_seq_off[S], dtype=np.int64)
    wnext = warp_seq_off[:-1].copy()
    wend = warp_seq_off[1:].copy()
    credit = np.zeros(n_warps, dtype=np.float64)
    cta_left = np.zeros(max(n_ctas, 1), dtype=np.int64)
    cta_epoch = np.zeros(max(n_ctas, 1), dtype=np.int64)
    waiting = np.empty(max(md, 1), dtype=np.int64)
    act = np.empty(n_warps + 1, dtype=np.int64)
    for s in range(S):
        pos = sm_seq_off[s]
        k = s
        resident = 0
        n_act = 0
        n_wait = 0
        rnd = 0
        while True:
            # Admit the SM's own CTAs, in order, into the free slots; a delayed one waits.
            while resident < md and k < n_ctas:
                c = k
                k += S
                if not _live(c, wnext, wend, cta_warp_off, cta_warps):
                    continue
                resident += 1
                cta_epoch[c] = _cta_epoch(c, wnext, wend, seq_epoch, cta_warp_off, cta_warps)
                if join[c] > rnd:
                    waiting[n_wait] = c
                    n_wait += 1
                else:
                    n_act, _ = _join(st, c, n_act, act, credit, wnext, wend, cta_warp_off, cta_warps, cta_left)
            if n_act == 0 and n_wait > 0:  # nothing ready: on to the next joining round
                rnd = join[waiting[0]]
                for i in range(1, n_wait):
                    rnd = min(rnd, join[waiting[i]])
            m = 0
            for i in range(n_wait):
                c = waiting[i]
                if join[c] <= rnd:
                    n_act, _ = _join(st, c, n_act, act, credit, wnext, wend, cta_warp_off, cta_warps, cta_left)
                else:
                    waiting[m] = c
                    m += 1
            n_wait = m
            if n_act == 0:
                break
            # One round (3.2.2): every warp earns its weight in credit, then the warps are visited
            # in residency order from a random warp, each visit issuing the warp's next bulk
            # sequence for one unit of credit, until no warp that may go on has a unit left.
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
                    if credit[w] < 1.0 or wnext[w] >= wend[w]:
                        continue
                    c = warp_cta[w]
                    e = seq_epoch[wnext[w]]
                    if e > cta_epoch[c]:
                        continue  # at a barrier that another warp of its CTA has not reached
                    issue[pos] = wnext[w]
                    pos += 1
                    wnext[w] += 1
                    credit[w] -= 1.0
                    if credit[w] >= 1.0 and wnext[w] < wend[w]:
                        more = True
                    if wnext[w] >= wend[w] or seq_epoch[wnext[w]] != e:
                        before = cta_epoch[c]
                        cta_epoch[c] = _cta_epoch(c, wnext, wend, seq_epoch, cta_warp_off, cta_warps)
                        if cta_epoch[c] != before:
                            more = True  # the CTA left a barrier interval: its waiting warps may go on
            rnd += 1
            # Retire the warps that are done, and the CTAs whose warps all are; a warp that
            # waited at a barrier keeps at most one sequence's credit.
            m = 0
            for i in range(n_act):
                w = act[i]
                if wnext[w] < wend[w]:
                    act[m] = w
                    m += 1
                    if credit[w] > 1.0:
                        credit[w] = 1.0
                    continue
                c = warp_cta[w]
                cta_left[c] -= 1
                if cta_left[c] == 0:
                    resident -= 1
            n_act = m
    return issue


@njit(**KERNEL)
def schedule(st, S, md, seq_epoch, warp_seq_off, warp_cta, cta_warp_off, cta_warps, sm_seq_off):
    """Steps 1-2 of one trial: the warp weights and joining rounds drawn from `st`, then
    `weighted_round_robin` (SM s owns ``issue[sm_seq_off[s]:sm_seq_off[s+1]]``)."""
    weight = draw_weights(st, warp_cta.shape[0], SKEW_MAX)
    join = draw_joins(st, S, md, warp_seq_off, cta_warp_off, cta_warps)
    return weighted_round_robin(st, S, md, weight, join, seq_epoch, warp_seq_off, warp_cta, cta_warp_off, cta_warps,
                                sm_seq_off)


@njit(**KERNEL)
def issue_accesses(issue, sm_seq_off, seq_off, acc_op, op_cached, sm_acc_off):
    """Each SM's cached warp accesses in issue order (SM s owns
    ``order[sm_acc_off[s]:sm_acc_off[s+1]]``): the sequences of `issue`, expanded."""
    S = sm_seq_off.shape[0] - 1
    order = np.empty(sm_acc_off[S], dtype=np.int64)
    for s in range(S):
        pos = sm_acc_off[s]
        for t in range(sm_seq_off[s], sm_seq_off[s + 1]):
            q = issue[t]
            for r in range(seq_off[q], seq_off[q + 1]):
                if op_cached[acc_op[r]]:
                    order[pos] = r
                    pos += 1
    return order


@njit(**KERNEL)
def resident_set_accesses(S, md, cta_acc):
    """The cached warp accesses of each SM's first resident set: its first `md` CTAs with any
    (`cta_acc`: cached warp accesses per snapshot CTA; CTA k runs on SM ``k % S``)."""
    lead = np.zeros(S, dtype=np.int64)
    for s in range(S):
        resident = 0
        k = s
        while resident < md and k < cta_acc.shape[0]:
            if cta_acc[k] > 0:
                lead[s] += cta_acc[k]
                resident += 1
            k += S
    return lead


@njit(**KERNEL)
def draw_entries(st, lead, sm_acc_off):
    """Step 3: the position of the merged stream at which each SM's stream enters: ``u`` times
    the other SMs' resident-set accesses (`lead`) times the SM's `lag_share` (its accesses beyond
    its first resident set, over that set's), ``u`` uniform in [0, 1); less the smallest."""
    S = lead.shape[0]
    total = 0
    for s in range(S):
        total += lead[s]
    entry = np.empty(S, dtype=np.int64)
    first = np.int64(0)
    for s in range(S):
        share = lag_share(lead[s], sm_acc_off[s + 1] - sm_acc_off[s])
        entry[s] = np.int64(rng_unit(st) * share * (total - lead[s]))
        if s == 0 or entry[s] < first:
            first = entry[s]
    for s in range(S):
        entry[s] -= first
    return entry


@njit(**INLINE)
def _stable_order(key):
    """The indices of `key` in ascending order of their values, equal values by index (a stable
    sort: ``np.argsort(kind="mergesort")``, by insertion: one value per SM, and Numba's merge sort
    costs more than a second to compile on a first run)."""
    n = key.shape[0]
    idx = np.empty(n, dtype=np.int64)
    for i in range(n):
        v = key[i]
        j = i
        while j > 0 and key[idx[j - 1]] > v:
            idx[j] = idx[j - 1]
            j -= 1
        idx[j] = i
    return idx


@njit(**KERNEL)
def merge_order(st, sm_acc_off, entry):
    """Step 4: the SM of each successive warp access of the merged stream. From position
    ``entry[s]`` on (or earlier, when no started SM has accesses left), SM s's accesses join an
    urn; each position draws one access from the urn, uniformly: a pick of a started SM with
    weight = the accesses it has left. With every entry at 0 it is a uniform random shuffle of
    the SM labels. The urn lives in `lab` itself, just after the positions drawn so far."""
    S = sm_acc_off.shape[0] - 1
    n = sm_acc_off[S]
    lab = np.empty(n, dtype=np.int64)
    by_entry = _stable_order(entry)
    nxt = 0
    m = 0
    for g in range(n):
        while nxt < S and (entry[by_entry[nxt]] <= g or m == 0):
            s = by_entry[nxt]
            nxt += 1
            for _i in range(sm_acc_off[s + 1] - sm_acc_off[s]):
                lab[g + m] = s
                m += 1
        j = g + rng_below(st, m)
        x = lab[g]
        lab[g] = lab[j]
        lab[j] = x
        m -= 1
    return lab


@plain_kernel
def _phase(S, c0, c1, warp_seq_off, warp_cta, cta_warp_off, cta_warps, cta_acc):
    """CTAs ``c0 .. c1-1`` (``c0`` a multiple of `S`, so each keeps its SM) as a schedule of their
    own: ``(warp_cta, cta_warp_off, cta_warps, sm_seq_off, sm_acc_off, cta_acc)`` renumbered from
    0 (`warp_cta` is indexed by warp: only the phase's warps are read)."""
    # loops rather than array expressions and slice copies: each of those compiles a ufunc loop or
    # a copy with its error path on a first run (0.6 s for this small function)
    w0 = cta_warp_off[c0]
    cwo = np.empty(c1 - c0 + 1, dtype=cta_warp_off.dtype)
    for c in range(c1 - c0 + 1):
        cwo[c] = cta_warp_off[c0 + c] - w0
    cw = np.empty(cta_warp_off[c1] - w0, dtype=cta_warps.dtype)
    for i in range(cw.shape[0]):
        cw[i] = cta_warps[w0 + i]
    wc = np.empty(warp_cta.shape[0], dtype=warp_cta.dtype)
    for w in range(wc.shape[0]):
        wc[w] = warp_cta[w] - c0
    acc = np.empty(c1 - c0, dtype=cta_acc.dtype)
    for c in range(c1 - c0):
        acc[c] = cta_acc[c0 + c]
    seqs = np.zeros(S + 1, dtype=np.int64)
    accs = np.zeros(S + 1, dtype=np.int64)
    for c in range(c1 - c0):
        s = c % S
        accs[s + 1] += acc[c]
        for i in range(cwo[c], cwo[c + 1]):
            w = cw[i]
            seqs[s + 1] += warp_seq_off[w + 1] - warp_seq_off[w]
    for s in range(S):
        seqs[s + 1] += seqs[s]
        accs[s + 1] += accs[s]
    return wc, cwo, cw, seqs, accs, acc


@njit(**KERNEL)
def _interleave(order0, sao0, order1, sao1, sm_acc_off):
    """Each SM's warm-up accesses (``order0``, SM s owns ``sao0[s]:sao0[s+1]``), then its counted
    ones (``order1``, by ``sao1``), into one array laid out by `sm_acc_off`."""
    S = sm_acc_off.shape[0] - 1
    order = np.empty(sm_acc_off[S], dtype=np.int64)
    for s in range(S):
        pos = sm_acc_off[s]
        for i in range(sao0[s], sao0[s + 1]):
            order[pos] = order0[i]
            pos += 1
        for i in range(sao1[s], sao1[s + 1]):
            order[pos] = order1[i]
            pos += 1
    return order


def order_accesses(st: np.ndarray, S: int, md: int, seq_epoch: np.ndarray, warp_seq_off: np.ndarray,
                   warp_cta: np.ndarray, cta_warp_off: np.ndarray, cta_warps: np.ndarray, sm_seq_off: np.ndarray,
                   seq_off: np.ndarray, acc_op: np.ndarray, op_cached: np.ndarray, sm_acc_off: np.ndarray,
                   cta_acc: np.ndarray, split: int) -> tuple[np.ndarray, np.ndarray]:
    """Steps 1-4 of one trial: ``(order, lab)``, each SM's cached warp accesses in issue order
    (`issue_accesses`) and the SM of each position of the merged stream (`merge_order`).

    CTAs below `split` are the snapshot's warm-up (`tuiprof.sim.prepared.cta_layout`): they run
    first, as a schedule of their own, and the counted CTAs after them, as a later wave of the
    kernel whose CTAs start out of step again (their own joining rounds and SM entries) and find
    the caches as the warm-up left them. Each SM issues its warm-up accesses, then its counted
    ones; the merged stream holds every warm-up access before any counted one. With `split` 0,
    the one schedule of the whole snapshot (the same draws as before warm-up existed).

    Plain Python calling the steps' kernels, each drawing from `st` in turn (a handful of calls
    per trial): as one kernel it compiled every step a second time inside itself, 0.75 s of a
    first run, and the calls cost microseconds."""
    n_ctas = cta_warp_off.shape[0] - 1
    weight = draw_weights(st, warp_cta.shape[0], SKEW_MAX)
    if split <= 0 or split >= n_ctas:
        join = draw_joins(st, S, md, warp_seq_off, cta_warp_off, cta_warps)
        issue = weighted_round_robin(st, S, md, weight, join, seq_epoch, warp_seq_off, warp_cta, cta_warp_off,
                                     cta_warps, sm_seq_off)
        order = issue_accesses(issue, sm_seq_off, seq_off, acc_op, op_cached, sm_acc_off)
        entry = draw_entries(st, resident_set_accesses(S, md, cta_acc), sm_acc_off)
        return order, merge_order(st, sm_acc_off, entry)
    wc0, cwo0, cw0, sso0, sao0, acc0 = _phase(S, 0, split, warp_seq_off, warp_cta, cta_warp_off, cta_warps, cta_acc)
    wc1, cwo1, cw1, sso1, sao1, acc1 = _phase(S, split, n_ctas, warp_seq_off, warp_cta, cta_warp_off, cta_warps,
                                              cta_acc)
    join0 = draw_joins(st, S, md, warp_seq_off, cwo0, cw0)
    issue0 = weighted_round_robin(st, S, md, weight, join0, seq_epoch, warp_seq_off, wc0, cwo0, cw0, sso0)
    join1 = draw_joins(st, S, md, warp_seq_off, cwo1, cw1)
    issue1 = weighted_round_robin(st, S, md, weight, join1, seq_epoch, warp_seq_off, wc1, cwo1, cw1, sso1)
    order0 = issue_accesses(issue0, sso0, seq_off, acc_op, op_cached, sao0)
    order1 = issue_accesses(issue1, sso1, seq_off, acc_op, op_cached, sao1)
    lab0 = merge_order(st, sao0, draw_entries(st, resident_set_accesses(S, md, acc0), sao0))
    lab1 = merge_order(st, sao1, draw_entries(st, resident_set_accesses(S, md, acc1), sao1))
    return _interleave(order0, sao0, order1, sao1, sm_acc_off), np.concatenate((lab0, lab1))
