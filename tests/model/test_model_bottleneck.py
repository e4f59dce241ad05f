"""Zhang11's throughput model: its peak formulas, Table 2 and sec. 5.1's throughputs, the
cyclic-reduction bank conflicts of sec. 5.2, and the bottleneck / next-bottleneck rule of sec. 3."""

from __future__ import annotations

import numpy as np
import pytest

from tuiprof.arch import load_arch
from tuiprof.arch.occupancy import occupancy
from tuiprof.model.bottleneck import (
    GLOBAL,
    INSTRUCTION,
    SHARED,
    StageWork,
    Throughputs,
    bank_conflict_degree,
    bottleneck,
    component_times,
    gt200_throughputs,
    peak_global_bandwidth,
    peak_instruction_throughput,
    peak_shared_bandwidth,
    scaled_throughputs,
    shared_transactions,
)

FULL = 0xFFFFFFFF


# --- Sec. 4: the peaks ----------------------------------------------------------------------

def test_peak_formulas() -> None:
    # Sec. 4.1: MAD peak = 8 x 1.48 GHz x 30 / 32 = 11.1 Ginstr/s; x 32 x 2 = 710.4 GFLOPS.
    mad = peak_instruction_throughput(8, 1.48, 30)
    assert round(mad, 1) == 11.1 and round(mad * 32 * 2, 1) == 710.4
    # Sec. 4.2: 8 SPs x 30 SMs x 1.48 GHz x 4 B = 1420.8, printed "1420 GB/s".
    assert int(peak_shared_bandwidth(8, 30, 1.48)) == 1420
    # Sec. 4.3: 2.484 GHz x 512 bit / 8 = 158.98, printed "160 GB/s" (two significant figures).
    assert round(peak_global_bandwidth(2.484, 512), -1) == 160


# --- Table 2 and the throughputs of sec. 5.1 ----------------------------------------------------

@pytest.mark.parametrize("regs,smem,warps,gips,gbs", [
    # Table 2 (64-thread blocks on the GTX 285): 8x8 and 16x16 run 8 blocks = 16 warps, 32x32 runs 3
    # blocks = 6 warps. Sec. 5.1: "For {6, 16, 32 (max)} active warps ... an instruction throughput
    # of {8.39, 9.05, 9.33} gigainstructions/s and a shared memory bandwidth of {870, 1112, 1165} GB/s".
    (16, 348, 16, 9.05, 1112.0),
    (30, 1088, 16, 9.05, 1112.0),
    (58, 4284, 6, 8.39, 870.0),
])
def test_table2_warps_give_the_section51_throughputs(regs: int, smem: int, warps: int, gips: float,
                                                     gbs: float) -> None:
    o = occupancy(load_arch("gtx285"), 64, regs, smem)
    assert o.warps_per_sm == warps
    t = gt200_throughputs(o.warps_per_sm)
    assert (t.instruction_gips, t.shared_gbs) == (gips, gbs)
    assert t.global_gbs == 160.0


def test_gt200_curves_between_and_beyond_the_points() -> None:
    assert (gt200_throughputs(32).instruction_gips, gt200_throughputs(32).shared_gbs) == (9.33, 1165.0)
    assert gt200_throughputs(48).shared_gbs == 1165.0                       # flat past 32 warps
    assert gt200_throughputs(11).instruction_gips == pytest.approx((8.39 + 9.05) / 2)
    assert gt200_throughputs(3).instruction_gips == pytest.approx(8.39 / 2)   # below saturation


def test_fewer_warps_hurt_shared_memory_more_than_the_pipeline() -> None:
    # Sec. 5.1: "shared memory is more vulnerable to insufficient parallelism than the instruction
    # pipeline": from 16 to 6 warps shared time grows 1112 / 870 = 1.278x, instruction time only
    # 9.05 / 8.39 = 1.079x. So with a similar shared-memory count and fewer instructions (Fig. 4(a):
    # larger sub-matrices execute fewer instructions), 16x16 is instruction bound and 32x32 shared
    # bound, Fig. 4(b)'s shift. Work in units where 16x16's instruction time is 1: 9.05e9 type-II
    # warp instructions; shared work 0.9 of that at 16 warps; 32x32 with 5% fewer instructions.
    s16 = StageWork(9.05e9, shared_transactions=0.9 * 1112e9 / 128)
    s32 = StageWork(0.95 * 9.05e9, shared_transactions=0.9 * 1112e9 / 128)
    b16 = bottleneck(s16, gt200_throughputs(16), ctas_per_sm=8)
    b32 = bottleneck(s32, gt200_throughputs(6), ctas_per_sm=3)
    assert b16.bottleneck == INSTRUCTION and b16.next_bottleneck == SHARED
    assert b16.times[INSTRUCTION] == pytest.approx(1.0) and b16.times[SHARED] == pytest.approx(0.9)
    # 32x32: instruction 0.95 x 9.05 / 8.39 = 1.025 s, shared 0.9 x 1112 / 870 = 1.150 s.
    assert b32.bottleneck == SHARED
    assert b32.times[INSTRUCTION] == pytest.approx(0.95 * 9.05 / 8.39)
    assert b32.times[SHARED] == pytest.approx(0.9 * 1112 / 870)


# --- Bank conflicts -------------------------------------------------------------------------

def test_bank_conflict_degree_basics() -> None:
    lanes = np.arange(32, dtype=np.uint64)
    assert bank_conflict_degree(lanes * 4) == 1                         # consecutive words
    assert bank_conflict_degree(np.full(32, 64, dtype=np.uint64)) == 1  # one word: broadcast
    assert bank_conflict_degree(lanes * 8) == 2                         # stride 2 words
    assert bank_conflict_degree(lanes * 128) == 32                      # stride 32 words: one bank
    assert bank_conflict_degree(lanes * 128, mask=0b111) == 3           # "3 threads ... 3 transactions"
    assert bank_conflict_degree(lanes * 128, mask=0) == 0
    # GT200: 16 banks serviced per half-warp; stride 16 words puts each half-warp on one bank.
    assert bank_conflict_degree(lanes * 64, banks=16, group=16) == 16
    assert bank_conflict_degree(lanes * 4, banks=16, group=16) == 1
    # Transactions: both half-warps pay their degree.
    assert shared_transactions((lanes * 8).reshape(1, 32), np.array([FULL]), banks=16, group=16)[0] == 4


def cyclic_reduction_addresses(n: int, step: int, pad: bool = False) -> np.ndarray:
    """Shared addresses of one forward-reduction step of cyclic reduction on an n-equation system
    (Zhang11 sec. 5.2, Fig. 5): thread i updates equation k = 2^s (i + 1) - 1 from its neighbours
    k -+ 2^(s-1), so the stride between threads doubles each step. One 4-byte float per equation;
    ``pad`` inserts one element per 16 (CR-NBC). Rows are warps of the active threads (unused lanes
    masked off by the caller); returns the addresses of a[k] for threads 0..n/2^s - 1."""
    stride = 1 << step
    i = np.arange(n // stride, dtype=np.uint64)
    k = np.uint64(stride) * (i + np.uint64(1)) - np.uint64(1)
    if pad:
        k = k + k // np.uint64(16)
    return k * np.uint64(4)


def _warps(addr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = -(-addr.size // 32)
    out = np.zeros(rows * 32, dtype=np.uint64)
    out[: addr.size] = addr
    masks = np.array([(1 << min(32, addr.size - 32 * r)) - 1 for r in range(rows)], dtype=np.uint64)
    return out.reshape(rows, 32), masks


@pytest.mark.parametrize("banks,group", [(16, 16), (32, 32)])
def test_cyclic_reduction_conflicts_double_each_step(banks: int, group: int) -> None:
    # Sec. 5.2: "As the memory access stride doubles every step, the number of bank conflicts are
    # doubled as well, from 2-way bank conflicts in step one, to 4-way in step two, to 8-way in step
    # three". 512 equations (the paper's 512-equation systems): 256 threads in step 1.
    n = 512
    degrees = []
    for step in range(1, 5):
        addr, masks = _warps(cyclic_reduction_addresses(n, step))
        degrees.append(int(shared_transactions(addr, masks, banks=banks, group=group, reduce="max").max()))
        # The left and right neighbours (k -+ 2^(s-1)) have the same stride, hence the same degree.
        left = cyclic_reduction_addresses(n, step) - np.uint64(4 << (step - 1))
        assert int(shared_transactions(*_warps(left), banks=banks, group=group, reduce="max").max()) == degrees[-1]
    assert degrees == [2, 4, 8, 16]


def test_cyclic_reduction_transactions_stay_constant() -> None:
    # Sec. 5.2 / Fig. 7(b): the work halves each step but the conflicts double, so "the number of
    # shared memory transactions remains constant". GT200 (16 banks per half-warp), 512 equations:
    # step 1: 256 threads = 16 half-warps x 2 = 32; step 2: 8 x 4 = 32; step 3: 4 x 8 = 32;
    # step 4: 2 x 16 = 32 (per array access).
    totals = []
    for step in range(1, 5):
        addr, masks = _warps(cyclic_reduction_addresses(512, step))
        totals.append(int(shared_transactions(addr, masks, banks=16, group=16).sum()))
    assert totals == [32, 32, 32, 32]


def test_padding_removes_the_conflicts() -> None:
    # Sec. 5.2: CR-NBC pads "1 element per 16 elements, which redirects all conflicted accesses to
    # available banks". Steps 1-4 of 512 equations (>= 2 half-warps) become conflict free. With fewer
    # than 16 threads left the padded stride wraps the 16 banks twice: step 5, k = 32 i + 31 ->
    # k + k // 16 = 34 i + 32, bank 2 i mod 16, i = 0..15: 2-way, down from 16-way unpadded; the
    # paper shows steps 4-9 lumped together and does not discuss this residue.
    for step in range(1, 5):
        addr, masks = _warps(cyclic_reduction_addresses(512, step, pad=True))
        assert int(shared_transactions(addr, masks, banks=16, group=16, reduce="max").max()) == 1
    for step in range(5, 9):
        padded = _warps(cyclic_reduction_addresses(512, step, pad=True))
        plain = _warps(cyclic_reduction_addresses(512, step))
        assert int(shared_transactions(*padded, banks=16, group=16, reduce="max").max()) == 2
        assert int(shared_transactions(*plain, banks=16, group=16, reduce="max").max()) == 512 >> step


def test_cyclic_reduction_bottleneck_moves_to_the_pipeline_without_conflicts() -> None:
    # Fig. 6: CR is instruction bound in step 1 and shared-memory bound after; removing the
    # conflicts (CR-NBC) makes later steps instruction bound. One CTA per SM and barriers between
    # steps: stages are serialized (sec. 5.2). Shared work from the transaction counts above; the
    # instruction work is an assumed 12 warp instructions per active warp per step (the text gives
    # none), at the throughputs of the active warps (8, 4, 2, 1 warps in steps 1-4).
    def stages(pad: bool) -> list[StageWork]:
        out = []
        for step in range(1, 5):
            addr, masks = _warps(cyclic_reduction_addresses(512, step, pad))
            tx = 3 * int(shared_transactions(addr, masks, banks=16, group=16).sum())  # a, b, c loads
            out.append(StageWork(12.0 * addr.shape[0], shared_transactions=tx, shared_bytes_per_transaction=64))
        return out

    def verdicts(pad: bool) -> list[str]:
        out = []
        for step, work in enumerate(stages(pad), start=1):
            warps = 256 >> (step + 4)
            out.append(bottleneck(work, gt200_throughputs(max(warps, 1)), ctas_per_sm=1).bottleneck)
        return out

    assert verdicts(pad=False) == [INSTRUCTION, SHARED, SHARED, SHARED]
    assert verdicts(pad=True) == [INSTRUCTION] * 4


# --- The bottleneck and the next one -------------------------------------------------------------

UNIT = Throughputs(1e-9, 1e-9, 1e-9, 16, "unit")   # 1 instruction / byte per second: times = counts


def test_bottleneck_and_next_by_hand() -> None:
    # Instruction 3 s, shared 5 s (5 transactions of 1 B), global 1 s: shared memory bounds the
    # kernel at 5 s; without it the instruction pipeline does, at 3 s: a 5 / 3 = 1.67x speedup.
    b = bottleneck(StageWork(3.0, shared_transactions=5, shared_bytes_per_transaction=1, global_bytes=1), UNIT)
    assert b.times == {INSTRUCTION: 3.0, SHARED: 5.0, GLOBAL: 1.0}
    assert (b.bottleneck, b.time, b.next_bottleneck, b.time_without_bottleneck) == (SHARED, 5.0, INSTRUCTION, 3.0)
    assert b.speedup_if_removed == pytest.approx(5 / 3) and not b.serialized


def test_instruction_types_weigh_by_functional_units() -> None:
    # Table 1: type II has 8 units; type I 10 (8/10 of a type-II slot), III 4 (2 slots), IV 1 (8).
    w = StageWork({"I": 10.0, "II": 1.0, "III": 1.0, "IV": 1.0})
    assert w.type_ii_insts() == pytest.approx(8.0 + 1.0 + 2.0 + 8.0)
    assert component_times(w, UNIT)[INSTRUCTION] == pytest.approx(19.0)


def test_stages_serialize_with_one_cta_per_sm() -> None:
    # Stage 1: instruction 2, shared 1; stage 2: instruction 1, shared 3.
    # One CTA per SM: time = max(2, 1) + max(1, 3) = 5; shared bounds 3 of the 5 s -> shared;
    # without shared: 2 + 1 = 3 s, bounded by the instruction pipeline.
    st1 = StageWork(2.0, shared_transactions=1, shared_bytes_per_transaction=1)
    st2 = StageWork(1.0, shared_transactions=3, shared_bytes_per_transaction=1)
    b = bottleneck([st1, st2], UNIT, ctas_per_sm=1)
    assert b.serialized and (b.time, b.bottleneck) == (5.0, SHARED)
    assert [s.bottleneck for s in b.stages] == [INSTRUCTION, SHARED]
    assert (b.next_bottleneck, b.time_without_bottleneck) == (INSTRUCTION, 3.0)
    # Several CTAs per SM overlap the stages: totals instruction 3, shared 4 -> 4 s, shared.
    b2 = bottleneck([st1, st2], UNIT, ctas_per_sm=2)
    assert not b2.serialized and (b2.time, b2.bottleneck, b2.time_without_bottleneck) == (4.0, SHARED, 3.0)


def test_scaled_throughputs_for_other_archs() -> None:
    v100 = load_arch("v100")
    t = scaled_throughputs(v100, 64, warp_insts_per_cycle=4.0, global_gbs=900.0)
    ghz = v100.clock_mhz / 1000
    assert t.instruction_gips == pytest.approx(4.0 * ghz * v100.sm_count)
    assert t.shared_gbs == pytest.approx(128 * ghz * v100.sm_count)
    assert t.global_gbs == 900.0
    assert scaled_throughputs(v100, 3).instruction_gips == pytest.approx(0.5 * ghz * v100.sm_count)
