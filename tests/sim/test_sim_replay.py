"""The product replay kernel (`tuiprof.sim.replay`) against the reference kernel it replaced
(`tuiprof.sim.reference`, itself checked against pycachesim in test_sim_cache.py): the same
per-op counters, DRAM latency sums, batch latencies and write-backs, trial for trial, on every
demo and preset pair the suite can afford and on geometries that take each of the kernel's
special paths (class lockstep and its split, hashed L1 sets, long L2 lines, DRAM transactions
other than 32 B, rows shorter than the interleave, absent levels, FIFO, every store policy)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.factories import random_trace
from tests.support.sim_runs import EDGE, assert_identical, contended_trace, rewrite_trace
from tests.support.sim_traces import FULL, lanes, op, small_arch, trace_of
from tuiprof.arch import load_arch
from tuiprof.demos import demo_names, demo_path, resolve_target
from tuiprof.sim.cache import RANDOM
from tuiprof.sim.prepared import default_md, pack_arch, prepare
from tuiprof.sim.replay import SCAN_MAX_ASSOC, Geometry, hdel, hfind, hput
from tuiprof.sim.trial import run_trial
from tuiprof.trace.io import load_trace

PRESETS = ("tesla-c2050", "gtx480", "gtx285", "v100", "a100", "h100")
SMALL_DEMOS = ("vecadd", "transpose-naive", "transpose-tiled", "matmul16", "stencil7")


@pytest.fixture(scope="module")
def edge_traces():
    return [random_trace(1, n=400, n_warps=6), random_trace(2, n=300, n_warps=9, n_ops=3, kinds=("load", "store", "atomic")),
            contended_trace(0), rewrite_trace(3)]


SLOW_EDGE = frozenset(name for name in EDGE if name.startswith("two") and "64 B fills" not in name)
"""Geometries CI leaves to the slow run (each compiles a kernel family of its own): of the L2 halves,
CI keeps the presets' kind (hashed, 64 B fills); the kernel-equals-oracle rule is the same."""


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_EDGE else n for n in EDGE])
def test_identical_on_every_special_path(name: str, edge_traces) -> None:
    for sm in (1, 3):
        arch = small_arch(sm_count=sm, **EDGE[name])
        for t in edge_traces:
            assert_identical(t, arch, mds=(1, 2), seeds=(0, 7))


def test_the_edge_geometries_take_the_paths_they_name() -> None:
    g = {name: Geometry.of(pack_arch(small_arch(**settings))) for name, settings in EDGE.items()}
    lock, lock2, wide, nolock = (g[k] for k in list(EDGE)[1:5])
    assert lock.lockstep and lock.sub == 4 and lock2.lockstep and lock2.sub == 4 and lock2.l2_chunks == 2
    assert lock2.l1_assoc > SCAN_MAX_ASSOC
    assert wide.wide_l2 and not wide.lockstep
    assert nolock.sub == 4 and not nolock.lockstep
    assert not any(x.l2_write_back or x.xor_hash for x in list(g.values())[:8])
    hashed, wb_lock, hashed_sub, hashed_wide, by_sm, wt_hashed = list(g.values())[8:14]
    assert hashed.l2_write_back and hashed.xor_hash and hashed.l2_sets == 24 and hashed.channels == 6
    assert wb_lock.l2_write_back and wb_lock.lockstep and not wb_lock.xor_hash
    assert hashed_sub.sub == 4 and hashed_sub.xor_hash and not hashed_sub.lockstep and hashed_sub.l2_write_back
    assert hashed_wide.wide_l2 and hashed_wide.xor_hash and hashed_wide.l2_write_back
    by3 = Geometry.of(pack_arch(small_arch(sm_count=3, **EDGE[list(EDGE)[12]])))
    assert by3.l1_by_sm and by3.l1_assoc > SCAN_MAX_ASSOC and by3.xor_hash and not by_sm.l1_by_sm
    assert wt_hashed.xor_hash and not wt_hashed.l2_write_back and wt_hashed.channels == 3
    fill64, fill128, fill_sub = list(g.values())[14:17]
    assert fill64.l2_fetch_chunks == 2 and fill128.l2_fetch_chunks == 4 and fill128.xor_hash
    assert fill_sub.sub == 2 and fill_sub.l2_fetch_chunks == 2 and not fill_sub.lockstep
    halves = [x for name, x in g.items() if name.startswith("two")]
    assert len(halves) == 3 and all(x.l2_halves and x.family.l2_halves and not x.lockstep for x in halves)
    assert halves[0].xor_hash and halves[0].l2_fetch_chunks == 2 and halves[1].sub == 4
    assert halves[2].l1_assoc > SCAN_MAX_ASSOC and halves[2].l2_policy == RANDOM


def test_lockstep_splits_a_class_on_a_partial_line_and_stays_exact() -> None:
    # Whole-line loads and stores keep the Fermi L2 in lockstep; then a one-lane store (one 32 B
    # block of a line) splits its class mid-run, with dirty lines resident.
    arch = load_arch("tesla-c2050").with_overrides({"sm_count": "2", "l2.size": "96KiB"})
    rng = np.random.default_rng(4)
    LOAD, STORE = 0, 1
    warps = []
    for w in range(6):
        acc = []
        for k in range(300):
            line = int(rng.integers(0, 1200))
            kind = STORE if rng.random() < 0.3 else LOAD
            if k == 150 + w:
                acc.append((STORE, np.full(32, line * 128 + 32, dtype=np.uint64), 1))  # one block
            else:
                acc.append((kind, lanes(line * 128, 4), FULL))
        warps.append(acc)
    t = trace_of(warps, ops=(op("load"), op("store")), warps_per_cta=2)
    runs = assert_identical(t, arch, mds=(1, 3), seeds=(1, 2, 3))
    assert all(r.dram_writebacks > 0 for r in runs)


@pytest.mark.parametrize("preset", PRESETS)
def test_identical_on_the_small_demos(preset: str) -> None:
    arch = load_arch(preset)
    for demo in SMALL_DEMOS:
        t = load_trace(resolve_target(demo))
        md = default_md(t, arch)
        assert_identical(t, arch, mds=sorted({1, md}), seeds=(3, 11))


def test_identical_on_spmv_u_on_the_tesla_c2050() -> None:
    # The paper's case study: 7.7M L1 requests, the L2 in class lockstep all trial.
    t = load_trace(resolve_target("spmv-u"))
    arch = load_arch("tesla-c2050")
    (r,) = assert_identical(t, arch, mds=(default_md(t, arch),), seeds=(5,))
    assert r.l1_requests.sum() == 7_747_778


@pytest.fixture(scope="module")
def demo_cache(tmp_path_factory: pytest.TempPathFactory):
    """A cache folder of this module's own for the demos recorded on first use."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.mark.slow
@pytest.mark.parametrize("demo", sorted(set(demo_names()) - set(SMALL_DEMOS)))
def test_identical_on_every_other_demo(demo: str, demo_cache) -> None:
    # The large demos (SpMV, matmul tiles, cyclic reduction, BFS; the 128-wide SpMV traces are
    # recorded on first use): one trial per preset at the demo's default MD, on every preset.
    t = load_trace(demo_path(demo))
    for preset in PRESETS:
        arch = load_arch(preset)
        assert_identical(t, arch, mds=(default_md(t, arch),), seeds=(2,))


def test_the_l1_hash_table_agrees_with_a_dict() -> None:
    # Random inserts and deletes through the open-addressing table with backward-shift deletion.
    rng = np.random.default_rng(0)
    bits, base = 6, 64
    tab = np.full(3 * 64, -1, dtype=np.int64)
    ref: dict[int, int] = {}
    for step in range(4000):
        key = int(rng.integers(0, 200))
        if key in ref and rng.random() < 0.6:
            hdel(tab, base, bits, key)
            del ref[key]
        elif key not in ref and len(ref) < 32:
            way = int(rng.integers(0, 1000))
            hput(tab, base, bits, key, way)
            ref[key] = way
        if step % 20 == 0:
            assert [hfind(tab, base, bits, k) for k in range(200)] == [ref.get(k, -1) for k in range(200)]
    assert (tab[:64] == -1).all() and (tab[128:] == -1).all()  # other tables untouched


def test_latencies_are_run_time_values_of_one_compiled_kernel() -> None:
    from tuiprof.sim.replay import replay_kernel

    base = load_arch("tesla-c2050").with_overrides({"sm_count": "3"})
    what_if = base.with_overrides({"dram.base_latency": "120", "dram.row_miss_cycles": "77", "dram.row_hit_cycles": "5",
                                   "dram.burst_cycles": "3", "l2.hit_latency": "100"})
    g, h = Geometry.of(pack_arch(base)), Geometry.of(pack_arch(what_if))
    assert g == h and replay_kernel(g) is replay_kernel(h)
    assert Geometry.of(pack_arch(base.with_overrides({"l2.assoc": "32"}))) != g
    t = contended_trace(1)
    fast = assert_identical(t, what_if, mds=(2,), seeds=(4,))[0]
    slow = run_trial(prepare(t, base), base, 2, 4)
    assert not np.array_equal(fast.dram_batch_latencies, slow.dram_batch_latencies)



def test_each_geometry_compiles_under_its_own_names() -> None:
    """Numba names a compiled function's cache files and its environment after its qualified
    name (the environment with a counter that restarts in every process). With one name for every
    geometry, two geometries compiled by different processes carried the same environment name,
    and a process that loaded both from the disk cache ran the second with the first one's
    environment ('descr' is NULL). Each geometry's compiled kernel must have names of its own."""
    from tuiprof.sim.replay import replay_kernel

    t = load_trace(resolve_target("vecadd"))
    names = []
    for preset in ("gtx480", "gtx285", "v100"):
        arch = load_arch(preset)
        run_trial(prepare(t, arch), arch, 1, 3)
        kernel = replay_kernel(Geometry.of(pack_arch(arch)))
        names += [(cr.fndesc.qualname, cr.fndesc.env_name) for cr in kernel.overloads.values()]
    assert len(names) == 3
    assert len({q for q, _ in names}) == 3 and len({e for _, e in names}) == 3


_PURE_PYTHON_RUN = """
import sys
import tuiprof.jit as jit
jit.popcount = lambda x: bin(int(x) & 0xFFFFFFFF).count("1")
jit.prefetch = lambda a, i: None
jit.find_tag = lambda a, b, k, n: next((i for i in range(n) if a[b + i] == k), -1)
from tests.support.sim_runs import EDGE, rewrite_trace
from tests.support.sim_traces import small_arch
from tuiprof.sim.prepared import prepare
from tuiprof.sim.reference import reference_trial
from tuiprof.sim.trial import run_trial
t = rewrite_trace(3)
for name, settings in EDGE.items():
    arch = small_arch(sm_count=1, **settings)
    p = prepare(t, arch)
    run_trial(p, arch, 1, 0)
    reference_trial(p, arch, 1, 0)
print("ok")
"""


def test_no_kernel_writes_outside_its_buffers() -> None:
    """Compiled kernels do not check indices: a buffer sized too small corrupts memory silently
    (it aborted the suite once, on a write-allocate store miss that queued a write-back, a
    write-through and a partial-store fetch). Run both kernels as plain Python, where NumPy
    checks every index, on every special-path geometry with the stores-and-reloads trace."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, "-W", "ignore", "-c", _PURE_PYTHON_RUN], cwd=root, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]
