"""Steps 1-2 of a trial (`tuiprof.sim.schedule`) against what they must give: the weighted round
robin's issue shares, uniform alignment points per CTA, every sequence once in program order, at
most MD CTAs at once, and one order per seed."""

from __future__ import annotations

import numpy as np
import pytest

from tuiprof.sim.rng import rng_new
from tuiprof.sim.schedule import SKEW_MAX, draw_starts, draw_weights, schedule, weighted_round_robin


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


def owner(warp_seq_off, q):
    """The warp of each sequence in `q`."""
    return np.searchsorted(warp_seq_off, q, side="right") - 1


def test_issue_shares_approach_the_weights() -> None:
    # One CTA of four warps with long queues: while all four have sequences left, a deficit round
    # robin gives warp w w / sum(w) of the issues, to within a sequence or two at any point.
    weight = np.array([0.6, 1.0, 1.3, 0.8])
    L = layout([3000] * 4, 4, 1)
    issue = weighted_round_robin(rng_new(5), 1, 1, weight, L[0][:-1].copy(), *L)
    who = owner(L[0], issue)
    first_done = min(np.flatnonzero(who == w)[-1] for w in range(4))
    for t in (100, 1000, first_done):
        counts = np.bincount(who[:t], minlength=4)
        assert np.all(np.abs(counts - t * weight / weight.sum()) <= 2.5), (t, counts)
    # Equal weights: rounds in residency order from a random warp, one sequence per warp each.
    issue = weighted_round_robin(rng_new(5), 1, 1, np.ones(4), L[0][:-1].copy(), *L)
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


def test_alignment_points_are_uniform_per_cta_for_the_ctas_scheduled_together() -> None:
    # Two SMs, MD 2, CTAs of two warps with 5 and 3 sequences; CTA 2 (SM 0) has none, so SM 0's
    # simultaneous CTAs are 0 and 4, SM 1's are 1 and 3; CTAs 5.. start at their beginning.
    seqs = [5, 3] * 8
    seqs[4:6] = [0, 0]
    L = layout(seqs, 2, 2)
    warp_seq_off, first = L[0], L[0][:-1]
    hist = {c: np.zeros(5, dtype=int) for c in (0, 1, 3, 4)}
    for seed in range(1000):
        start = draw_starts(rng_new(seed), 2, 2, warp_seq_off, L[2], L[3])
        a = start[0::2] - first[0::2]  # each CTA's point, from its 5-sequence warp
        assert np.array_equal(start[1::2] - first[1::2], a * 3 // 5)  # its 3-sequence warp, scaled
        assert np.all(a[[2, 5, 6, 7]] == 0)
        for c in hist:
            hist[c][a[c]] += 1
    for c, h in hist.items():
        chi2 = ((h - 200) ** 2 / 200).sum()
        assert chi2 < 18.5, (c, h)  # 4 degrees of freedom: p = 0.001


def random_layout(rng, S):
    seqs = rng.integers(0, 9, size=rng.integers(10, 40))
    seqs[rng.random(seqs.size) < 0.2] = 0
    return layout(seqs, int(rng.integers(1, 4)), S)


@pytest.mark.parametrize("case", range(12))
def test_every_sequence_once_in_program_order_from_its_alignment_point_with_md_ctas_at_most(case) -> None:
    rng = np.random.default_rng(case)
    S, md = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    L = random_layout(rng, S)
    warp_seq_off, warp_cta, cta_warp_off, cta_warps, sm_seq_off = L
    weight = draw_weights(rng_new(case), warp_cta.size, SKEW_MAX)
    start = draw_starts(rng_new(case), S, md, warp_seq_off, cta_warp_off, cta_warps)
    issue = weighted_round_robin(rng_new(case), S, md, weight, start, *L)
    assert np.array_equal(np.sort(issue), np.arange(warp_seq_off[-1]))
    for s in range(S):
        mine = issue[sm_seq_off[s]:sm_seq_off[s + 1]]
        assert np.all(warp_cta[owner(warp_seq_off, mine)] % S == s)
        for w in np.flatnonzero(warp_cta % S == s):
            lo, a, hi = warp_seq_off[w], start[w], warp_seq_off[w + 1]
            assert list(mine[(mine >= lo) & (mine < hi)]) == list(range(a, hi)) + list(range(lo, a))
        # A CTA (or its skipped head, issued later) is resident at least from its first issue to
        # its last: never more than MD such spans overlap.
        who = owner(warp_seq_off, mine)
        part = np.where(mine >= start[who], 0, 1)
        spans = {}
        for t, key in enumerate(zip(warp_cta[who].tolist(), part.tolist())):
            spans.setdefault(key, [t, t])[1] = t
        depth = np.zeros(mine.size + 1, dtype=int)
        for t0, t1 in spans.values():
            depth[t0] += 1
            depth[t1 + 1] -= 1
        assert np.cumsum(depth).max() <= md


def test_same_seed_same_order_other_seeds_other_orders() -> None:
    L = random_layout(np.random.default_rng(99), 2)
    a, b = schedule(rng_new(3), 2, 2, *L), schedule(rng_new(3), 2, 2, *L)
    assert np.array_equal(a, b)
    assert any(not np.array_equal(schedule(rng_new(s), 2, 2, *L), a) for s in range(4, 8))
