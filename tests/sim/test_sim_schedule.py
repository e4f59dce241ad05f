"""Steps 1-4 of a trial (`tuiprof.sim.schedule`) against what they must give: the weighted round
robin's issue shares, uniform joining rounds per CTA, every sequence once and every warp's
accesses in program order in the merged stream, at most MD CTAs at once, SM entries bounded by one
resident set, and one order per seed."""

from __future__ import annotations

import numpy as np
import pytest

from tuiprof.sim.rng import rng_new
from tuiprof.sim.schedule import (
    SKEW_MAX,
    _stable_order,
    draw_entries,
    draw_joins,
    draw_weights,
    lag_share,
    merge_order,
    order_accesses,
    resident_set_accesses,
    schedule,
    weighted_round_robin,
)


def layout(seqs_per_warp, warps_per_cta, S):
    """The scheduler's arrays for warps with the given sequence counts, grouped into CTAs of
    `warps_per_cta` warps; CTA k runs on SM k % S, as `tuiprof.sim.prepared.prepare` places them."""
    n = np.asarray(seqs_per_warp, dtype=np.int64)
    warp_seq_off = np.concatenate([[0], np.cumsum(n)]).astype(np.int64)
    warp_cta = (np.arange(n.size) // warps_per_cta).astype(np.int32)
    n_ctas = int(warp_cta[-1]) + 1
    cta_warp_off = np.minimum(np.arange(n_ctas + 1) * warps_per_cta, n.size).astype(np.int64)
    cta_warps = np.arange(n.size, dtype=np.int32)
    sm_seq = np.bincount(warp_cta % S, weights=n, minlength=S).astype(np.int64)
    sm_seq_off = np.concatenate([[0], np.cumsum(sm_seq)]).astype(np.int64)
    return warp_seq_off, warp_cta, cta_warp_off, cta_warps, sm_seq_off


def no_barriers(L) -> np.ndarray:
    """`seq_epoch` of a layout with no CTA barrier: every sequence in interval 0."""
    return np.zeros(int(L[0][-1]), dtype=np.int32)


def owner(warp_seq_off, q):
    """The warp of each sequence in `q`."""
    return np.searchsorted(warp_seq_off, q, side="right") - 1


def test_issue_shares_approach_the_weights() -> None:
    # One CTA of four warps with long queues: while all four have sequences left, a deficit round
    # robin gives warp w w / sum(w) of the issues, to within a sequence or two at any point.
    weight = np.array([0.6, 1.0, 1.3, 0.8])
    L = layout([3000] * 4, 4, 1)
    issue = weighted_round_robin(rng_new(5), 1, 1, weight, np.zeros(1, dtype=np.int64), no_barriers(L), *L)
    who = owner(L[0], issue)
    first_done = min(np.flatnonzero(who == w)[-1] for w in range(4))
    for t in (100, 1000, first_done):
        counts = np.bincount(who[:t], minlength=4)
        assert np.all(np.abs(counts - t * weight / weight.sum()) <= 2.5), (t, counts)
    # Equal weights: rounds in residency order from a random warp, one sequence per warp each.
    issue = weighted_round_robin(rng_new(5), 1, 1, np.ones(4), np.zeros(1, dtype=np.int64), no_barriers(L), *L)
    rounds = owner(L[0], issue).reshape(-1, 4)
    starts = rounds[:, 0]
    assert np.array_equal(rounds, (starts[:, None] + np.arange(4)) % 4)
    assert len(set(starts.tolist())) == 4


def test_weights_are_uniform_around_one_with_a_skew_drawn_per_trial() -> None:
    skews = []
    for seed in range(400):
        w = draw_weights(rng_new(seed), 4000, SKEW_MAX)
        skew = np.abs(w - 1).max()
        assert 0 < skew <= SKEW_MAX
        # Within a trial: uniform on [1 - skew, 1 + skew] (every tenth of the range filled evenly).
        counts = np.histogram(w, bins=10, range=(1 - skew, 1 + skew))[0]
        assert counts.min() > 0.7 * 400 and counts.max() < 1.3 * 400
        skews.append(skew)
    # Across trials: the skew is uniform on [0, SKEW_MAX].
    counts = np.histogram(skews, bins=4, range=(0, SKEW_MAX))[0]
    assert counts.min() > 70 and counts.max() < 130, counts


def test_joining_rounds_are_uniform_per_cta_for_the_ctas_scheduled_together() -> None:
    # Two SMs, MD 2, CTAs of two warps with 5 and 3 sequences; CTA 2 (SM 0) has none, so SM 0's
    # simultaneous CTAs are 0 and 4, SM 1's are 1 and 3; CTAs 5.. join as soon as they have a slot.
    # Each SM has at least two resident sets of CTAs, so a delay spans a whole CTA's 5 rounds.
    seqs = [5, 3] * 16
    seqs[4:6] = [0, 0]
    L = layout(seqs, 2, 2)
    hist = {c: np.zeros(5, dtype=int) for c in (0, 1, 3, 4)}
    for seed in range(1000):
        join = draw_joins(rng_new(seed), 2, 2, L[0], L[2], L[3])
        assert np.all(join[[2] + list(range(5, 16))] == 0)
        for c in hist:
            hist[c][join[c]] += 1
    for c, h in hist.items():
        chi2 = ((h - 200) ** 2 / 200).sum()
        assert chi2 < 18.5, (c, h)  # 4 degrees of freedom: p = 0.001


def test_a_snapshot_of_one_resident_set_runs_in_step() -> None:
    # The first wave of a kernel starts at once: with no CTA beyond its first resident set an SM's
    # CTAs join at once and its stream enters the merge at once; with half a set more, a delay
    # spans half a CTA lifetime.
    assert lag_share(4, 4) == 0 and lag_share(4, 6) == 0.5 and lag_share(4, 100) == 1 and lag_share(0, 0) == 0
    L = layout([5, 3] * 4, 2, 2)  # 4 CTAs on 2 SMs, MD 2: one resident set each
    assert all(not draw_joins(rng_new(s), 2, 2, L[0], L[2], L[3]).any() for s in range(50))
    lead = np.array([10, 20], dtype=np.int64)
    assert all(not draw_entries(rng_new(s), lead, np.array([0, 10, 30])).any() for s in range(50))


def test_a_delayed_cta_holds_its_slot_and_joins_in_its_round() -> None:
    # One SM, MD 2, three CTAs of one warp (6 sequences each), equal weights: CTA 1 joins in round
    # 3, after CTA 0 has issued 3 sequences; CTA 2 waits for a free slot, not for CTA 1's round.
    L = layout([6, 6, 6], 1, 1)
    issue = weighted_round_robin(rng_new(1), 1, 2, np.ones(3), np.array([0, 3, 0]), no_barriers(L), *L)
    who = owner(L[0], issue).tolist()
    assert who[:3] == [0, 0, 0]
    assert who.index(2) > who.index(1)
    assert who[who.index(2):].count(0) == 0  # CTA 2 took CTA 0's slot
    # Nothing ready in round 0 (both CTAs delayed): the SM starts with the earliest joiner.
    issue = weighted_round_robin(rng_new(1), 1, 2, np.ones(3), np.array([5, 2, 0]), no_barriers(L), *L)
    who = owner(L[0], issue).tolist()
    assert who[:3] == [1, 1, 1]


def random_layout(rng, S):
    seqs = rng.integers(0, 9, size=rng.integers(10, 40))
    seqs[rng.random(seqs.size) < 0.2] = 0
    return layout(seqs, int(rng.integers(1, 4)), S)


@pytest.mark.parametrize("case", range(12))
def test_every_sequence_once_in_program_order_with_md_ctas_at_most(case) -> None:
    rng = np.random.default_rng(case)
    S, md = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    L = random_layout(rng, S)
    warp_seq_off, warp_cta, cta_warp_off, cta_warps, sm_seq_off = L
    weight = draw_weights(rng_new(case), warp_cta.size, SKEW_MAX)
    join = draw_joins(rng_new(case), S, md, warp_seq_off, cta_warp_off, cta_warps)
    issue = weighted_round_robin(rng_new(case), S, md, weight, join, no_barriers(L), *L)
    assert np.array_equal(np.sort(issue), np.arange(warp_seq_off[-1]))
    for s in range(S):
        mine = issue[sm_seq_off[s]:sm_seq_off[s + 1]]
        assert np.all(warp_cta[owner(warp_seq_off, mine)] % S == s)
        for w in np.flatnonzero(warp_cta % S == s):
            lo, hi = warp_seq_off[w], warp_seq_off[w + 1]
            assert list(mine[(mine >= lo) & (mine < hi)]) == list(range(lo, hi))
        # A CTA is resident at least from its first issue to its last: never more than MD such
        # spans overlap.
        who = owner(warp_seq_off, mine)
        spans = {}
        for t, c in enumerate(warp_cta[who].tolist()):
            spans.setdefault(c, [t, t])[1] = t
        depth = np.zeros(mine.size + 1, dtype=int)
        for t0, t1 in spans.values():
            depth[t0] += 1
            depth[t1 + 1] -= 1
        assert np.cumsum(depth).max() <= md


def merged_stream(order, lab, sm_acc_off):
    """The merged stream of warp accesses a replay walks: position g takes SM lab[g]'s next access."""
    cur = sm_acc_off[:-1].copy()
    out = np.empty(lab.size, dtype=np.int64)
    for g, s in enumerate(lab):
        out[g] = order[cur[s]]
        cur[s] += 1
    return out


def random_epochs(rng, warp_seq_off) -> np.ndarray:
    """Barrier intervals of random layouts: each warp's sequences in nondecreasing intervals."""
    out = np.zeros(int(warp_seq_off[-1]), dtype=np.int32)
    for w in range(warp_seq_off.size - 1):
        lo, hi = warp_seq_off[w], warp_seq_off[w + 1]
        out[lo:hi] = np.cumsum(rng.random(hi - lo) < 0.3)
    return out


@pytest.mark.parametrize("case", range(8))
def test_every_warp_keeps_program_order_in_the_merged_stream(case) -> None:
    # Steps 1-4 together, on random layouts where every sequence holds 1-3 accesses: the merged
    # stream holds every access once, and each warp's accesses in program order (its access
    # indices increase), whatever the seed and MD.
    rng = np.random.default_rng(100 + case)
    S, md = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    warp_seq_off, warp_cta, cta_warp_off, cta_warps, sm_seq_off = L = random_layout(rng, S)
    seq_len = rng.integers(1, 4, size=warp_seq_off[-1])
    seq_off = np.concatenate([[0], np.cumsum(seq_len)]).astype(np.int64)
    n_acc = int(seq_off[-1])
    acc_op = np.zeros(n_acc, dtype=np.int32)
    op_cached = np.ones(1, dtype=np.uint8)
    acc_warp = owner(warp_seq_off, owner(seq_off, np.arange(n_acc)))
    sm_acc_off = np.concatenate([[0], np.cumsum(np.bincount(warp_cta[acc_warp] % S, minlength=S))]).astype(np.int64)
    cta_acc = np.bincount(warp_cta[acc_warp], minlength=cta_warp_off.size - 1).astype(np.int64)
    epoch = random_epochs(rng, warp_seq_off)
    for seed in range(5):
        order, lab = order_accesses(rng_new(seed), S, md, epoch, *L, seq_off, acc_op, op_cached, sm_acc_off,
                                    cta_acc, 0)
        stream = merged_stream(order, lab, sm_acc_off)
        assert np.array_equal(np.sort(stream), np.arange(n_acc))
        for w in range(warp_cta.size):
            mine = stream[acc_warp[stream] == w]
            assert np.all(np.diff(mine) > 0), (seed, w)


def test_sm_entries_are_bounded_by_one_resident_set_of_the_others() -> None:
    # Four SMs whose streams hold at least two resident sets each: SM s enters after at most
    # one resident set of every other SM, the earliest at once, and the bound is reached.
    lead = np.array([40, 10, 0, 25], dtype=np.int64)
    sm_acc_off = np.concatenate([[0], np.cumsum(2 * lead + 1)]).astype(np.int64)
    bound = lead.sum() - lead
    seen = np.zeros(4)
    for seed in range(400):
        entry = draw_entries(rng_new(seed), lead, sm_acc_off)
        assert entry.min() == 0
        assert np.all(entry <= bound)
        seen = np.maximum(seen, entry)
    assert seen[2] == 0  # no resident set, no lag
    assert np.all(seen[[0, 1, 3]] > 0.8 * bound[[0, 1, 3]])
    # The resident set is the first MD CTAs with cached accesses of each SM (CTA k on SM k % S).
    cta_acc = np.array([3, 5, 0, 7, 2, 1, 4], dtype=np.int64)
    assert resident_set_accesses(2, 2, cta_acc).tolist() == [3 + 2, 5 + 7]
    assert resident_set_accesses(2, 1, cta_acc).tolist() == [3, 5]


def test_an_sm_enters_the_merge_at_its_entry() -> None:
    # SM 1 enters at position 30: the first 30 positions are SM 0's (it has 50 accesses); with
    # every entry at 0 the merge is a uniform shuffle (each position SM 0's with probability 50/80).
    sm_acc_off = np.array([0, 50, 80], dtype=np.int64)
    lab = merge_order(rng_new(3), sm_acc_off, np.array([0, 30], dtype=np.int64))
    assert np.all(lab[:30] == 0) and np.bincount(lab).tolist() == [50, 30]
    # An SM whose entry lies beyond the others' last access enters when the urn runs dry.
    lab = merge_order(rng_new(3), sm_acc_off, np.array([0, 70], dtype=np.int64))
    assert np.all(lab[:50] == 0) and np.all(lab[50:] == 1)
    first = np.mean([merge_order(rng_new(s), sm_acc_off, np.zeros(2, dtype=np.int64))[0] == 0 for s in range(2000)])
    assert abs(first - 50 / 80) < 0.04


def test_same_seed_same_order_other_seeds_other_orders() -> None:
    L = random_layout(np.random.default_rng(99), 2)
    E = no_barriers(L)
    a, b = schedule(rng_new(3), 2, 2, E, *L), schedule(rng_new(3), 2, 2, E, *L)
    assert np.array_equal(a, b)
    assert any(not np.array_equal(schedule(rng_new(s), 2, 2, E, *L), a) for s in range(4, 8))


@pytest.mark.parametrize("case", range(12))
def test_no_warp_passes_a_barrier_before_its_cta_reaches_it(case) -> None:
    # Random layouts with CTA barriers (the same number in every warp of a CTA, as __syncthreads
    # requires) and unequal weights (up to 3:1): in every SM's issue order, no sequence of
    # interval e+1 of a CTA comes before the last sequence of interval e of any of its warps.
    rng = np.random.default_rng(300 + case)
    S, md, wpc = int(rng.integers(1, 3)), int(rng.integers(1, 3)), int(rng.integers(2, 5))
    n_ctas = int(rng.integers(2, 7))
    barriers = rng.integers(0, 4, n_ctas)
    seqs, epochs = [], []
    for c in range(n_ctas):
        for _ in range(wpc):
            per = rng.integers(1, 4, barriers[c] + 1)  # sequences in each interval
            seqs.append(int(per.sum()))
            epochs.append(np.repeat(np.arange(barriers[c] + 1), per))
    L = layout(seqs, wpc, S)
    epoch = np.concatenate(epochs).astype(np.int32)
    warp_seq_off, warp_cta = L[0], L[1]
    for seed in range(4):
        weight = np.array([0.5 if w % 2 else 1.5 for w in range(warp_cta.size)])
        join = draw_joins(rng_new(seed), S, md, warp_seq_off, L[2], L[3])
        issue = weighted_round_robin(rng_new(seed), S, md, weight, join, epoch, *L)
        assert np.array_equal(np.sort(issue), np.arange(warp_seq_off[-1]))
        who = owner(warp_seq_off, issue)
        for c in range(n_ctas):
            mine = np.flatnonzero(warp_cta[who] == c)
            e = epoch[issue[mine]]
            for k in range(int(e.max(initial=0))):
                assert mine[e == k].max() < mine[e == k + 1].min(), (seed, c, k)


def test_barrier_intervals_count_the_sequences_after_a_barrier() -> None:
    import dataclasses

    from tests.support.sim_traces import lanes, op, trace_of
    from tuiprof.arch import load_arch
    from tuiprof.sim.prepared import prepare

    # op 2 follows op 1 across a barrier on every path; op 0 follows op 2 across another.
    kinds = (op("load", starts=True), op("load"), op("load", starts=True))
    warps = [[(0, lanes(0), 0xFFFFFFFF), (1, lanes(128), 0xFFFFFFFF), (2, lanes(256), 0xFFFFFFFF),
              (0, lanes(384), 0xFFFFFFFF), (2, lanes(512), 0xFFFFFFFF)]] * 2
    t = trace_of(warps, ops=kinds, warps_per_cta=2)
    after = ((2,), (), (1,))
    t = dataclasses.replace(t, ops=tuple(dataclasses.replace(o, barrier_after=a) for o, a in zip(t.ops, after)))
    p = prepare(t, load_arch("v100"))
    # sequences per warp: [op0 op1] [op2] [op0] [op2]: op2 after op1 crosses, op0 after op2
    # crosses, op2 after op0 does not: intervals 0, 1, 2, 2
    assert p.seq_epoch.tolist() == [0, 1, 2, 2] * 2


def test_stable_order_is_numpys_stable_argsort() -> None:
    """The SM entry order `merge_order` walks (an insertion sort) is NumPy's stable argsort, ties
    by index, on keys with many ties, none and one value."""
    rng = np.random.default_rng(5)
    for n, hi in ((0, 1), (1, 1), (7, 2), (80, 5), (132, 1000), (64, 1)):
        key = rng.integers(0, hi, n).astype(np.int64)
        assert np.array_equal(_stable_order(key), np.argsort(key, kind="stable"))
