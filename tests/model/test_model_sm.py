"""Per-SM utilisation and load imbalance (Farooqui11 sec. 3.3, Fig. 6), measured and modeled."""

from __future__ import annotations

import numpy as np
import pytest

from tuiprof.errors import UsageError
from tuiprof.model.sm_util import (
    ACCESS_WEIGHT,
    INST_WEIGHT,
    MEASURED,
    MODELED,
    cta_cost,
    measured_sm_utilisation,
    modeled_sm_utilisation,
    sm_utilisation,
)


def test_measured_busy_fractions_by_hand() -> None:
    # SM 0: CTAs [0, 100) and [100, 250) back to back: busy 250, span 250.
    # SM 1: two co-resident CTAs [10, 60) and [40, 90): union [10, 90) = 80, span 80.
    # SM 2: [0, 50) and [150, 200), a gap: busy 100, span 200.
    # SM 3: no CTA.
    # Kernel time = the longest per-SM span (Fig. 6) = 250; fractions 1.0, 0.32, 0.4, 0.
    # Imbalance = 250 / ((250 + 80 + 100 + 0) / 4) = 250 / 107.5 = 2.3256; utilisation = 1.72 / 4 = 0.43.
    sm = np.array([0, 1, 0, 2, 1, 2])
    start = np.array([0, 10, 100, 0, 40, 150])
    end = np.array([100, 60, 250, 50, 90, 200])
    u = measured_sm_utilisation(sm, start, end, 4)
    assert u.source == MEASURED and u.unit == "cycles"
    assert u.busy.tolist() == [250, 80, 100, 0] and u.ctas.tolist() == [2, 2, 2, 0]
    assert u.kernel_time == 250
    assert u.busy_fraction.tolist() == pytest.approx([1.0, 0.32, 0.4, 0.0])
    assert u.imbalance == pytest.approx(250 / 107.5)
    assert u.utilisation == pytest.approx(0.43)
    assert u.idle_sms == (3,)


def test_fig6_mandelbrot_pattern() -> None:
    # Fig. 6 on the GTX480 (15 SMs): Mandelbrot leaves SMs 0, 4 and 8 idle while SMs 1, 2 and 3
    # run "nearly twice as long as the other SMs". With 2T on SMs 1-3 and T on the 9 others:
    # mean busy = (3 x 2T + 9 x T) / 15 = T, imbalance = 2T / T = 2; utilisation = (3 x 1 + 9 x 0.5)
    # / 15 = 0.5; in the kernel's second half only 3 of 15 SMs run: 12 / 15 = 80% of the GPU idle
    # ("nearly 80% of the GPU is unutilized for half of the kernel's execution").
    t = 1000.0
    busy_sms = [s for s in range(15) if s not in (0, 4, 8)]
    sm = np.array(busy_sms)
    end = np.array([2 * t if s in (1, 2, 3) else t for s in busy_sms])
    u = measured_sm_utilisation(sm, np.zeros(12), end, 15)
    assert u.idle_sms == (0, 4, 8)
    assert u.imbalance == pytest.approx(2.0) and u.utilisation == pytest.approx(0.5)
    assert 1 - np.mean(u.busy_fraction > 0.5) == pytest.approx(0.8)


def test_modeled_fewer_ctas_than_sms() -> None:
    # 10 equal CTAs (cost 100) on 15 SMs, MD 8: breadth-first placement puts one CTA on each of
    # SMs 0-9; SMs 10-14 stay idle. Mean busy = 10 x 100 / 15 = 66.7; imbalance = 100 / 66.7 = 1.5;
    # utilisation = 10 / 15.
    u = modeled_sm_utilisation(np.full(10, 100.0), 15, 8)
    assert u.source == MODELED and u.unit == "work units"
    assert u.ctas.tolist() == [1] * 10 + [0] * 5
    assert u.idle_sms == (10, 11, 12, 13, 14)
    assert u.imbalance == pytest.approx(1.5) and u.utilisation == pytest.approx(10 / 15)


def test_modeled_one_heavy_cta() -> None:
    # 4 SMs, MD 1, CTA 0 costs 5 and CTAs 1-7 cost 1.
    # t = 0: CTAs 0-3 -> SMs 0-3. t = 1: SMs 1-3 free -> CTAs 4, 5, 6. t = 2: SMs 1-3 free -> CTA 7 on
    # SM 1. Busy: SM 0 = 5, SM 1 = 3, SM 2 = 2, SM 3 = 2; mean 12 / 4 = 3; imbalance 5 / 3.
    cost = np.array([5, 1, 1, 1, 1, 1, 1, 1], dtype=float)
    u = modeled_sm_utilisation(cost, 4, 1)
    assert u.busy.tolist() == [5, 3, 2, 2] and u.ctas.tolist() == [1, 3, 2, 2]
    assert u.kernel_time == 5 and u.busy_fraction.tolist() == pytest.approx([1.0, 0.6, 0.4, 0.4])
    assert u.imbalance == pytest.approx(5 / 3) and u.idle_sms == ()
    # MD 2: all 8 CTAs start at t = 0, two per SM (CTA 4 joins CTA 0 on SM 0). Busy: SM 0 =
    # [0, 5) U [0, 1) = 5, the others 1; mean 8 / 4 = 2; imbalance 5 / 2.
    u2 = modeled_sm_utilisation(cost, 4, 2)
    assert u2.busy.tolist() == [5, 1, 1, 1] and u2.ctas.tolist() == [2, 2, 2, 2]
    assert u2.imbalance == pytest.approx(2.5)


def test_modeled_balanced_grid() -> None:
    # 60 equal CTAs on 15 SMs: 4 each, imbalance 1, every SM fully busy.
    u = modeled_sm_utilisation(np.ones(60), 15, 2)
    assert u.ctas.tolist() == [4] * 15 and u.imbalance == pytest.approx(1.0)
    assert u.utilisation == pytest.approx(1.0)


def test_cost_weights_and_dispatch() -> None:
    # Cost = 1 x instructions + 4 x memory accesses: [10 + 4, 20 + 8] = [14, 28].
    assert (INST_WEIGHT, ACCESS_WEIGHT) == (1.0, 4.0)
    assert cta_cost(np.array([10, 20]), np.array([1, 2])).tolist() == [14.0, 28.0]
    assert cta_cost(np.array([10, 20]), np.array([1, 2]), inst_weight=0.5, access_weight=10).tolist() == [15.0, 30.0]
    # Clocks and SM ids present: measured; otherwise modeled from the work.
    assert sm_utilisation(2, 1, sm=np.array([0]), start=np.array([0]), end=np.array([5])).source == MEASURED
    m = sm_utilisation(2, 1, insts=np.array([10, 20]), accesses=np.array([1, 2]))
    assert m.source == MODELED and m.busy.tolist() == [14.0, 28.0]


def test_bad_records_are_refused() -> None:
    with pytest.raises(UsageError):
        measured_sm_utilisation(np.array([0]), np.array([10]), np.array([5]), 2)   # ends before it starts
    with pytest.raises(UsageError):
        measured_sm_utilisation(np.array([3]), np.array([0]), np.array([5]), 2)    # no SM 3
    with pytest.raises(UsageError):
        modeled_sm_utilisation(np.array([1.0]), 2, 0)
    with pytest.raises(UsageError):
        sm_utilisation(2, 1)


def test_a_measured_timeline_says_when_the_probes_ran_at_lower_occupancy() -> None:
    """The GPU collector stores the launch's registers and CTAs per SM, plain and with the
    probes; when the probes ran fewer CTAs per SM, the measured SM figures say so (and only then)."""
    import dataclasses

    from tuiprof import demos
    from tuiprof.arch import load_arch
    from tuiprof.collect.gpu.driver import DeviceInfo
    from tuiprof.collect.gpu.occupancy import probe_occupancy
    from tuiprof.model.decisions import sm_model
    from tuiprof.trace.io import load_trace

    t = load_trace(demos.demo_path("vecadd"))
    h100 = DeviceInfo(name="H100", compute_capability=(9, 0), sm_count=132, clock_mhz=1755, memory_clock_mhz=2619,
                      driver="", library="", max_threads_per_sm=2048)
    launch = dataclasses.replace(t.launch, block=(256, 1, 1), registers_per_thread=28, static_shared=0,
                                 dynamic_shared=0)
    # 28 registers: 8 CTAs of 256 threads (all 64 warps); 40: 48 warps, 6 CTAs; 32: still 8
    assert probe_occupancy(h100, launch, 40) == {"registers": [28, 40], "ctas_per_sm": [8, 6]}
    assert probe_occupancy(h100, launch, 32)["ctas_per_sm"] == [8, 8]
    n = t.launch.grid_ctas
    ctas = dataclasses.replace(t.ctas, sm=np.arange(n) % 132, start=np.zeros(n, np.int64),
                               end=np.full(n, 1000, np.int64))

    def measured(occ: dict[str, list[int]] | None) -> str:
        gen = {**t.provenance.generator, **({"probe_occupancy": occ} if occ else {})}
        trace = dataclasses.replace(t, ctas=ctas, provenance=dataclasses.replace(t.provenance, generator=gen))
        u = sm_model(trace, load_arch("h100"), 8)
        assert u.source == "measured"
        return u.caveat

    assert measured(probe_occupancy(h100, launch, 40)) == (
        "timed with the probes at 6 CTAs/SM (40 regs/thread); plain: 8 (28 regs)")
    assert measured(probe_occupancy(h100, launch, 32)) == "" and measured(None) == ""
