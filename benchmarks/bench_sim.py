"""Simulator performance, against baselines measured in the same run.

    python benchmarks/bench_sim.py [--trials 64] [--quick]

1. Cache kernel (`tuiprof.sim.cache`) against pycachesim on the same line stream and geometry
   (hit counts must agree): pycachesim called once per access (what a trace-driven Python loop
   does) and pycachesim fed the whole stream in one call (its C loop).
2. One trial on the SpMV demo trace (``demo_traces/spmv-u.tptrace``; a comparable synthetic
   SpMV when it is missing) with tesla-c2050: L1 requests per second on one core, and the L2
   accesses and DRAM transactions behind them.
3. `--trials` trials with 1 and with 2 threads: wall time and speed-up.
4. Cold compile (empty NUMBA_CACHE_DIR) and warm start-to-first-trial, each in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGETS = {"cache_vs_pycachesim_calls": 30.0, "l1_req_per_s_per_core": 40e6, "trials_2_threads_s": 5.0,
           "speedup_2_threads": 1.7, "warm_first_trial_s": 2.0}


def spmv_trace():
    """The SpMV demo (paper 000 sec. 6.2, 32 random nnz per row), or a comparable synthetic one:
    one thread per row, 32 random nnz/row over 32768 columns, 4*14*6 CTAs of 256 threads."""
    demo = ROOT / "demo_traces" / "spmv-u.tptrace"
    if demo.exists():
        from tuiprof.trace.io import load_trace

        return load_trace(demo), demo.name
    from tuiprof.trace.model import Launch, Provenance, Snapshot, SourceFile, StaticOp, Trace

    rng = np.random.default_rng(0)
    n_ctas, threads, nnz, cols = 4 * 14 * 6, 256, 32, 32768
    n_warps = n_ctas * threads // 32
    per_warp = 2 + 3 * nnz + 1
    row = (np.arange(n_warps)[:, None] * 32 + np.arange(32)[None, :]).astype(np.uint64)
    colidx = np.sort(rng.integers(0, cols, size=(n_warps, 32, nnz)), axis=2).astype(np.uint64)
    op = np.empty((n_warps, per_warp), np.int32)
    addr = np.empty((n_warps, per_warp, 32), np.uint64)
    RP, IND, VAL, Y, X = (np.uint64(b << 28) for b in (1, 2, 3, 4, 5))
    op[:, 0], addr[:, 0] = 0, RP + 4 * row
    op[:, 1], addr[:, 1] = 1, RP + 4 * (row + 1)
    for it in range(nnz):
        j = row * nnz + it
        k = 2 + 3 * it
        op[:, k], addr[:, k] = 2, IND + 4 * j
        op[:, k + 1], addr[:, k + 1] = 3, VAL + 4 * j
        op[:, k + 2], addr[:, k + 2] = 4, Y + 4 * colidx[:, :, it]
    op[:, -1], addr[:, -1] = 5, X + 4 * row
    specs = [("load", True), ("load", False), ("load", True), ("load", False), ("load", True), ("store", False)]
    ops = tuple(StaticOp(id=i, kernel="spmv_csr_scalar", kind=k, space="global", bytes=4, file="spmv.cu", line=20 + i,
                         starts_sequence=s) for i, (k, s) in enumerate(specs))
    R = n_warps * per_warp
    t = Trace(launch=Launch("spmv_csr_scalar", (n_ctas, 1, 1), (threads, 1, 1), 20, ctas_per_sm=6), ops=ops,
              snapshot=Snapshot(np.arange(n_ctas, dtype=np.int64)),
              warp_offsets=np.arange(n_warps + 1, dtype=np.int64) * per_warp,
              warp_cta=(np.arange(n_warps) // 8).astype(np.int32), warp_index=(np.arange(n_warps) % 8).astype(np.int32),
              op=op.reshape(-1), mask=np.full(R, 0xFFFFFFFF, np.uint32), addr=addr.reshape(R, 32),
              sources=(SourceFile("spmv.cu", "// synthetic\n"),), provenance=Provenance("synthetic", "tesla-c2050"))
    return t, "synthetic SpMV"


def bench_cache(n: int) -> list[dict]:
    from cachesim import Cache, CacheSimulator, MainMemory

    from tuiprof.sim.cache import new_cache

    rng = np.random.default_rng(1)
    lines = np.where(rng.random(n) < 0.7, rng.integers(0, 2000, n), rng.integers(0, 200_000, n)).astype(np.int64)
    rows = []
    for label, sets, ways, parts in (("Fermi L1, 2x64", 2, 64, 1), ("8-way, 64 sets", 64, 8, 1),
                                     ("Fermi L2, 6x64x64", 64, 64, 6)):
        cache = new_cache(sets, ways, parts)
        cache.run(lines[:1000])
        cache = new_cache(sets, ways, parts)
        t0 = time.perf_counter()
        ours = int(cache.run(lines).sum())
        t_ours = time.perf_counter() - t0

        def sim():
            mem = MainMemory()
            c = Cache("L", sets * parts, ways, 128, "LRU")  # partitions interleave lines over sets
            mem.load_to(c)
            mem.store_from(c)
            return CacheSimulator(c, mem), c

        cs, c = sim()
        addrs = (lines * 128).tolist()
        t0 = time.perf_counter()
        cs.load(addrs, length=1)
        t_bulk = time.perf_counter() - t0
        theirs = int(c.stats()["HIT_count"])
        m = min(n, 300_000)
        cs, c = sim()
        t0 = time.perf_counter()
        for a in addrs[:m]:
            cs.load(a, length=1)
        t_calls = (time.perf_counter() - t0) * n / m
        rows.append(dict(geometry=label, accesses=n, hits_equal=ours == theirs, ours_per_s=n / t_ours,
                         pycachesim_bulk_per_s=n / t_bulk, pycachesim_calls_per_s=n / t_calls,
                         vs_bulk=t_bulk / t_ours, vs_calls=t_calls / t_ours))
    return rows


def bench_trial(trace, arch_name: str = "tesla-c2050") -> dict:
    from tuiprof.arch import load_arch
    from tuiprof.sim.prepared import default_md, prepare
    from tuiprof.sim.trial import run_trial

    arch = load_arch(arch_name)
    t0 = time.perf_counter()
    p = prepare(trace, arch)
    t_prep = time.perf_counter() - t0
    md = default_md(trace, arch)
    run_trial(p, arch, md, 0)  # compile or load from the cache
    times, r = [], None
    for i in range(1, 4):
        r = run_trial(p, arch, md, i)
        times.append(r.elapsed)
    best = min(times)
    q = p.coalesced.n_requests
    return dict(arch=arch_name, md=md, warp_accesses=trace.n_accesses, l1_requests=q, prepare_s=t_prep,
                trial_s=best, l1_req_per_s=q / best, l2_accesses=int(r.l2_read_accesses.sum() + r.l2_write_accesses.sum()),
                dram_transactions=int(r.dram_reads.sum() + r.dram_writes.sum() + r.dram_writebacks),
                l1_hit=r.l1_read_hit_ratio, l2_hit=r.l2_read_hit_ratio, tm=r.mean_dram_latency)


def bench_threads(trace, trials: int) -> dict:
    from tuiprof.arch import load_arch
    from tuiprof.sim.montecarlo import MonteCarlo

    arch = load_arch("tesla-c2050")
    out = {}
    first = MonteCarlo(trace, arch, trials=trials, seed=1, threads=1)
    for threads in (1, 2):
        mc = MonteCarlo(trace, arch, trials=trials, seed=1, threads=threads, prepared=first.prepared)
        t0 = time.perf_counter()
        res = mc.run()
        out[threads] = (time.perf_counter() - t0, res)
    same = all(np.array_equal(a.l2_read_hits, b.l2_read_hits) for a, b in zip(out[1][1], out[2][1]))
    return dict(trials=trials, one_thread_s=out[1][0], two_threads_s=out[2][0], speedup=out[1][0] / out[2][0],
                identical=same)


_CHILD = """
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {root!r})
from tuiprof.trace.io import load_trace
from tests.test_sim_support import trace_of, lanes, FULL
from tuiprof.arch import load_arch
from tuiprof.sim.montecarlo import MonteCarlo
t_import = time.perf_counter() - t0
trace = trace_of([[(0, lanes(0x1000 * i), FULL) for i in range(64)] for _ in range(4)], warps_per_cta=2)
mc = MonteCarlo(trace, load_arch("tesla-c2050"), trials=1, seed=0, threads=1)
first = next(mc.iter_trials())
print(json.dumps({{"import_s": t_import, "first_trial_s": time.perf_counter() - t0}}))
"""


def bench_startup() -> dict:
    code = _CHILD.format(root=str(ROOT))
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        cold = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                         check=True).stdout)
        warm = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                         check=True).stdout)
    return dict(cold_s=cold["first_trial_s"], warm_s=warm["first_trial_s"], warm_import_s=warm["import_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--accesses", type=int, default=2_000_000, help="cache stream length")
    ap.add_argument("--quick", action="store_true", help="8 trials, a shorter cache stream")
    args = ap.parse_args()
    if args.quick:
        args.trials, args.accesses = 8, 300_000
    print(f"cores: {os.cpu_count()}; load average {os.getloadavg()[0]:.2f} (other processes skew every figure, "
          "the 2-thread speed-up most)")

    print("\n1. cache kernel vs pycachesim (same stream, same geometry, LRU, 128 B lines)")
    for r in bench_cache(args.accesses):
        print(f"   {r['geometry']:<18} hits equal: {r['hits_equal']}  ours {r['ours_per_s'] / 1e6:6.1f} M/s  "
              f"pycachesim per call {r['pycachesim_calls_per_s'] / 1e6:5.2f} M/s ({r['vs_calls']:5.0f}x)  "
              f"pycachesim bulk {r['pycachesim_bulk_per_s'] / 1e6:5.1f} M/s ({r['vs_bulk']:4.1f}x)")
    print(f"   target: >= {TARGETS['cache_vs_pycachesim_calls']:.0f}x pycachesim per call")

    trace, name = spmv_trace()
    print(f"\n2. one trial, {name} ({trace.n_accesses} warp accesses)")
    r = bench_trial(trace)
    print(f"   {r['arch']} MD {r['md']}: {r['l1_requests']} L1 requests -> {r['l2_accesses']} L2 sector accesses "
          f"-> {r['dram_transactions']} DRAM transactions")
    print(f"   prepare {r['prepare_s']:.2f} s (once); trial {r['trial_s']:.3f} s = {r['l1_req_per_s'] / 1e6:.1f} M L1 "
          f"requests/s/core ({(r['l2_accesses'] + r['dram_transactions']) / r['trial_s'] / 1e6:.1f} M L2+DRAM "
          f"events/s); H1 {r['l1_hit']:.3f} H2 {r['l2_hit']:.3f} Tm {r['tm']:.0f}")
    print(f"   target: >= {TARGETS['l1_req_per_s_per_core'] / 1e6:.0f} M L1 requests/s/core")

    print(f"\n3. {args.trials} trials, 1 vs 2 threads (load average {os.getloadavg()[0]:.2f})")
    t = bench_threads(trace, args.trials)
    print(f"   1 thread {t['one_thread_s']:.2f} s, 2 threads {t['two_threads_s']:.2f} s, speed-up {t['speedup']:.2f}x, "
          f"identical results: {t['identical']}")
    print(f"   target: <= {TARGETS['trials_2_threads_s']:.0f} s with 2 threads, speed-up >= {TARGETS['speedup_2_threads']}x")

    print("\n4. start-up (fresh processes, empty then warm NUMBA_CACHE_DIR)")
    s = bench_startup()
    print(f"   cold compile to first trial {s['cold_s']:.1f} s; warm start to first trial {s['warm_s']:.2f} s "
          f"(imports {s['warm_import_s']:.2f} s)")
    print(f"   target: warm < {TARGETS['warm_first_trial_s']:.0f} s")


if __name__ == "__main__":
    main()
