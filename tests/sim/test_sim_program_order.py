"""Per-load truth under any schedule (issue 20 part 1): every warp's accesses keep their program
order in every trial, so

- a one-warp trace gives, in every trial, what its caches give replaying it in program order;
- an op's hits never exceed its accesses less the sectors that miss under any valid schedule
  (`tests.support.sim_oracles.guaranteed_misses`), on random kernels and on every demo;
- a load's H1 and H2 do not depend on the stores that follow it in its own warp;
- a kernel that reads each element once, then writes it, has H1 = H2 = 0 for the read on every
  preset, and a re-read of the line just read (after a barrier) hits in the L1 wherever the L1
  caches global loads.

Each failed on the scheduler that rotated a CTA's or an SM's work (its skipped head issued
after its tail)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.sim_oracles import HIT_COUNTERS, guaranteed_misses, program_order_counts
from tests.support.sim_traces import lanes, op, trace_of
from tuiprof.arch import load_arch
from tuiprof.demos import demo_names, demo_path, load
from tuiprof.sim.prepared import default_md, pack_arch, prepare
from tuiprof.sim.results import C_L1_RA, C_L1_RH, C_L2_RA, C_L2_RH
from tuiprof.sim.trial import trial_arrays

PRESETS = ("tesla-c2050", "gtx480", "gtx285", "v100", "a100", "h100")
LINE = 128
KINDS = (op("load"), op("store"), op("atomic"), op("load", starts=True), op("store", starts=True))
LOAD_OPS = (0, 3)
SEEDS = (1, 2, 3)


@st.composite
def warp_streams(draw: st.DrawFn, max_warps: int = 6) -> list[list[tuple[int, np.ndarray, int]]]:
    """Random warps of loads, stores and atomics (some starting a new bulk sequence) over a small
    pool of lines, coalesced, strided or scattered, with random active masks."""
    n_warps = draw(st.integers(1, max_warps))
    pool = draw(st.integers(1, 40))
    warps = []
    for _ in range(n_warps):
        accesses = []
        for _ in range(draw(st.integers(0, 24))):
            o = draw(st.integers(0, len(KINDS) - 1))
            line = draw(st.integers(0, pool - 1))
            pattern = draw(st.sampled_from(("coalesced", "strided", "scattered")))
            base = 0x10000 + line * LINE
            if pattern == "coalesced":
                addr = lanes(base, 4)
            elif pattern == "strided":
                addr = lanes(base, 4 * draw(st.sampled_from((2, 8, 32))))
            else:
                rng = np.random.default_rng(draw(st.integers(0, 2**16)))
                addr = (np.uint64(0x10000) + rng.integers(0, pool * LINE // 4, 32).astype(np.uint64) * np.uint64(4))
            mask = draw(st.sampled_from((0xFFFFFFFF, 0x0000FFFF, 0x1, 0x80000001))) if draw(st.booleans()) \
                else draw(st.integers(1, 0xFFFFFFFF))
            accesses.append((o, addr, mask))
        warps.append(accesses)
    return warps


def trials(trace, arch, md: int | None = None) -> list[np.ndarray]:
    p = prepare(trace, arch)
    md = md or default_md(trace, arch)
    return [trial_arrays(p, pack_arch(arch), md, s)[0] for s in SEEDS]


def assert_hits_within_what_any_schedule_allows(trace, arch, md: int | None = None) -> None:
    p = prepare(trace, arch)
    gm1, gm2 = guaranteed_misses(p, arch)
    for counts in trials(trace, arch, md):
        assert np.all(counts[C_L1_RH] <= counts[C_L1_RA] - gm1), (arch.name, counts[C_L1_RH], counts[C_L1_RA], gm1)
        assert np.all(counts[C_L2_RH] <= counts[C_L2_RA] - gm2), (arch.name, counts[C_L2_RH], counts[C_L2_RA], gm2)


@pytest.mark.parametrize("preset", PRESETS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(warps=warp_streams(max_warps=1))
def test_one_warp_in_every_trial_equals_its_program_order_replay(preset: str, warps) -> None:
    arch = load_arch(preset)
    trace = trace_of(warps, ops=KINDS)
    expected = program_order_counts(prepare(trace, arch), arch)
    for counts in trials(trace, arch, md=1):
        assert np.array_equal(counts[list(HIT_COUNTERS)], expected[list(HIT_COUNTERS)])


@pytest.mark.parametrize("preset", PRESETS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(warps=warp_streams(), warps_per_cta=st.integers(1, 3), md=st.integers(1, 3))
def test_hits_never_exceed_accesses_less_the_misses_of_every_schedule(preset: str, warps, warps_per_cta, md) -> None:
    assert_hits_within_what_any_schedule_allows(trace_of(warps, ops=KINDS, warps_per_cta=warps_per_cta),
                                                load_arch(preset), md)


@pytest.mark.parametrize("preset", PRESETS)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n_warps=st.integers(1, 8), loads=st.integers(1, 6), warps_per_cta=st.integers(1, 4), md=st.integers(1, 3),
       data=st.data())
def test_a_load_does_not_depend_on_the_stores_that_follow_it_in_its_warp(preset, n_warps, loads, warps_per_cta, md,
                                                                           data) -> None:
    # Each warp loads lines of its own region, then stores: to the lines it loaded (T) or to lines
    # no one loads (T'). Everything fits in every preset's caches, so a load can only be served by
    # its own warp's earlier accesses: by the stores in T if they ran first, never in a valid order.
    arch = load_arch(preset)

    def kernel(store_far: bool):
        warps = []
        for w in range(n_warps):
            region = 0x100000 + w * 64 * LINE
            lines = data.draw(st.lists(st.integers(0, 7), min_size=loads, max_size=loads), label=f"lines{w}") \
                if not store_far else kernel.lines[w]
            kernel.lines[w] = lines
            acc = [(0 if k else 3, lanes(region + x * LINE), 0xFFFFFFFF) for k, x in enumerate(lines)]
            far = region + 32 * LINE if store_far else region
            acc += [(4, lanes(far + x * LINE), 0xFFFFFFFF) for x in lines]
            warps.append(acc)
        return trace_of(warps, ops=KINDS, warps_per_cta=warps_per_cta)

    kernel.lines = {}
    near, far = kernel(False), kernel(True)
    for a, b in zip(trials(near, arch, md), trials(far, arch, md)):
        for counter in (C_L1_RA, C_L1_RH, C_L2_RA, C_L2_RH):
            assert np.array_equal(a[counter][list(LOAD_OPS)], b[counter][list(LOAD_OPS)]), counter


LIGHT_DEMOS = ("bfs", "cr", "matmul-tile16", "spmv-vec-u", "stencil7", "transpose-naive", "transpose-tiled", "vecadd")
"""Demos whose oracle takes a second or two; the others' (millions of requests) run as slow tests."""


@pytest.mark.parametrize("demo", [d if d in LIGHT_DEMOS else pytest.param(d, marks=pytest.mark.slow)
                                  for d in demo_names()])
def test_demos_hit_within_what_any_schedule_allows(demo: str) -> None:
    trace = load(demo_path(demo))
    arch = load_arch(trace.provenance.arch if trace.provenance.arch in PRESETS else "v100")
    assert_hits_within_what_any_schedule_allows(trace, arch)


# --- the two kernels of the issue, recorded by the emulator ---------------------------------------

ORDER_CU = Path(__file__).resolve().parents[1] / "cuda" / "order_read_once.cu"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Traces of tests/cuda/order_read_once.cu's kernels: 256 CTAs of 256 threads, all recorded."""
    from tests.support.ptx_support import require_compiler
    from tuiprof.collect.options import CollectOptions
    from tuiprof.collect.pipeline import collect_trace
    from tuiprof.session import RunConfig

    require_compiler()
    out = {}
    for kernel in ("read_then_write", "reread_after_sync"):
        script = tmp_path_factory.mktemp(kernel) / "launch.py"
        script.write_text(LAUNCH.format(kernel=kernel))
        out[kernel] = collect_trace(ORDER_CU, RunConfig(collect=CollectOptions(launch=script, snapshot=256)))
    return out


LAUNCH = '''
import numpy as np
N = 256 * 256
def setup(dev):
    a = dev.to_device(np.arange(N, dtype=np.float32))
    out = dev.empty(N, np.float32)
    dev.launch("{kernel}", N // 256, 256, (a, out))
    return {{"a": dev.from_device(a), "out": dev.from_device(out)}}
def check(res):
    a = np.arange(N, dtype=np.float32)
    if "{kernel}" == "read_then_write":
        np.testing.assert_array_equal(res["a"], a + 1)
    else:
        np.testing.assert_array_equal(res["out"], a + a[np.arange(N) ^ 1])
'''


def op_ratios(trace, arch) -> tuple[np.ndarray, np.ndarray]:
    """Per op H1 and H2 summed over the trials (nan where an op has no read accesses)."""
    total = sum(trials(trace, arch))
    with np.errstate(invalid="ignore", divide="ignore"):
        return total[C_L1_RH] / total[C_L1_RA], total[C_L2_RH] / total[C_L2_RA]


@pytest.mark.parametrize("preset", PRESETS)
def test_an_element_read_once_before_it_is_written_never_hits(recorded, preset: str) -> None:
    trace = recorded["read_then_write"]
    arch = load_arch(preset)
    (read,) = [o.id for o in trace.ops if o.kind == "load"]
    h1, h2 = op_ratios(trace, arch)
    assert h1[read] == 0 and h2[read] == 0


@pytest.mark.parametrize("preset", PRESETS)
def test_a_reread_of_the_line_just_read_hits_in_the_l1(recorded, preset: str) -> None:
    trace = recorded["reread_after_sync"]
    arch = load_arch(preset)
    first, second = [o.id for o in trace.ops if o.kind == "load"]
    h1, h2 = op_ratios(trace, arch)
    assert h1[first] == 0 and h2[first] == 0
    if arch.l1.enabled:
        assert h1[second] >= 0.9
