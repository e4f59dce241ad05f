"""Simulator performance, against the reference kernel (`tuiprof.sim.reference`, the kernel the
product used before `tuiprof.sim.replay`) measured in the same run.

    python benchmarks/bench_sim.py [--seeds 5] [--trials 16] [--quick] [--no-compile] [--baseline PATH]

1. One trial, product kernel against reference kernel: the same prepared trace, the same seeds,
   interleaved seed by seed, every output checked identical; medians of the calling thread's CPU
   time (what a core spends; wall time on a shared machine also counts other processes), in
   L1 requests per second per core. Three cases: spmv-u on tesla-c2050 (the L2 in class
   lockstep), transpose-naive on tesla-c2050 (its strided stores split the lockstep: per-set
   L2), spmv-u on h100 (the L1s SM by SM, hashed 512-way sets).
   With ``--baseline PATH`` (another checkout, e.g. the commit before a change to the kernel),
   the product kernel of each checkout runs the same trials in fresh processes, taking turns
   (`--rounds` of them), and the ratio of their per-request speeds is printed: what a change costs
   or saves per trial, on a shared machine.
2. Compile time per geometry: a fresh process with an empty NUMBA_CACHE_DIR compiles the shared
   kernels on a tiny trace, then every preset's replay kernel in turn (first call minus second
   call); a second process on the same folder times loading them from the disk cache.
3. `--trials` trials of spmv-u on tesla-c2050 with 1 and with 2 threads: wall time, speed-up,
   identical results.
4. Start-up: a fresh process to the first trial, with an empty then a warm NUMBA_CACHE_DIR.

Every section prints the load average: other processes on a shared machine skew every figure,
the 2-thread speed-up most.
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

GOAL_L1_REQ_PER_S = 35e6
BAR_L1_REQ_PER_S = 25e6
GOAL_SPEEDUP_2_THREADS = 1.8
PRESETS = ("tesla-c2050", "gtx480", "gtx285", "v100", "a100", "h100")
CASES = (("spmv-u", "tesla-c2050", "L2 in class lockstep"), ("transpose-naive", "tesla-c2050", "lockstep split: per-set L2"),
         ("spmv-u", "h100", "L1s SM by SM, hashed 512-way sets"))


def load(pct: str = "") -> str:
    return f"load average {os.getloadavg()[0]:.2f}{pct}"


def bench_trial(demo: str, arch_name: str, seeds: int) -> dict:
    """One trial of `demo` on `arch_name`, product against reference, interleaved per seed."""
    from tuiprof.arch import load_arch
    from tuiprof.demos import resolve_target
    from tuiprof.sim.prepared import default_md, pack_arch, prepare
    from tuiprof.sim.reference import reference_arrays
    from tuiprof.sim.trial import trial_arrays
    from tuiprof.trace.io import load_trace

    trace = load_trace(resolve_target(demo))
    arch = load_arch(arch_name)
    p = prepare(trace, arch)
    co, md, params = p.coalesced, default_md(trace, arch), pack_arch(arch)

    def reference(seed: int):
        return reference_arrays(p, params, md, seed)

    def product(seed: int):
        return trial_arrays(p, params, md, seed)

    reference(0), product(0)  # compile or load from the disk cache
    cpu: dict[str, list[float]] = {"product": [], "reference": []}
    identical = True
    loads = []
    for seed in range(1, seeds + 1):
        out = {}
        for name, f in (("product", product), ("reference", reference)):
            c0 = time.thread_time()
            out[name] = f(seed)
            cpu[name].append(time.thread_time() - c0)
        a, b = out["product"], out["reference"]
        identical &= all(np.array_equal(x, y) for x, y in zip(a[:3], b[:3])) and a[3:] == b[3:]
        loads.append(os.getloadavg()[0])
    q = co.n_requests
    fast, slow = float(np.median(cpu["product"])), float(np.median(cpu["reference"]))
    return dict(demo=demo, arch=arch_name, md=md, l1_requests=q, product_s=fast, reference_s=slow,
                product_rate=q / fast, reference_rate=q / slow, ratio=slow / fast, identical=identical,
                load=float(np.mean(loads)), product_all=cpu["product"], reference_all=cpu["reference"])


_COMPILE_CHILD = """
import json, sys, time
sys.path.insert(0, {root!r})
from tests.support.sim_traces import trace_of, lanes, FULL, small_arch
from tuiprof.arch import load_arch
from tuiprof.sim.prepared import pack_arch, prepare
from tuiprof.sim.trial import trial_arrays
t = trace_of([[(0, lanes(0x1000 * i), FULL) for i in range(64)] for _ in range(4)], warps_per_cta=2)
out = {{}}
for name in ["warm-up"] + {presets!r}:
    arch = small_arch() if name == "warm-up" else load_arch(name)
    p, params = prepare(t, arch), pack_arch(arch)
    t0 = time.perf_counter(); trial_arrays(p, params, 1, 0); first = time.perf_counter() - t0
    t0 = time.perf_counter(); trial_arrays(p, params, 1, 0); second = time.perf_counter() - t0
    out[name] = first - second
print(json.dumps(out))
"""


_TRIAL_CHILD = """
import json, sys, time
sys.path.insert(0, {root!r})
from tuiprof.arch import load_arch
from tuiprof.sim.prepared import default_md, pack_arch, prepare
from tuiprof.sim.trial import trial_arrays
from tuiprof.demos import resolve_target
from tuiprof.trace.io import load_trace
trace, arch = load_trace(resolve_target({demo!r})), load_arch({arch!r})
p = prepare(trace, arch)
md, params = default_md(trace, arch), pack_arch(arch)
trial_arrays(p, params, md, 0)
out = []
for seed in {seeds!r}:
    c0 = time.thread_time()
    trial_arrays(p, params, md, seed)
    out.append(time.thread_time() - c0)
print(json.dumps(dict(cpu=out, requests=p.coalesced.n_requests)))
"""


def bench_against(baseline: Path, demo: str, arch_name: str, seeds: int, rounds: int) -> dict:
    """The product kernel of this checkout and of `baseline` on the same trials, in fresh
    processes taking turns: medians of thread CPU time per trial, and their ratio."""
    cpu: dict[str, list[float]] = {"ours": [], "baseline": []}
    requests = 0
    for r in range(rounds):
        for name, tree in (("ours", ROOT), ("baseline", baseline)) if r % 2 == 0 else (("baseline", baseline), ("ours", ROOT)):
            code = _TRIAL_CHILD.format(root=str(tree), demo=demo, arch=arch_name,
                                       seeds=list(range(1 + r * seeds, 1 + (r + 1) * seeds)))
            env = dict(os.environ, PYTHONPATH=str(tree))
            out = json.loads(subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True,
                                            text=True, check=True).stdout)
            cpu[name] += out["cpu"]
            requests = out["requests"]
    ours, base = float(np.median(cpu["ours"])), float(np.median(cpu["baseline"]))
    return dict(ours_s=ours, baseline_s=base, ratio=base / ours, ours_rate=requests / ours,
                baseline_rate=requests / base)


def bench_compile() -> tuple[dict, dict]:
    """Per preset: seconds to compile its replay kernel (empty cache), then to load it (warm)."""
    code = _COMPILE_CHILD.format(root=str(ROOT), presets=list(PRESETS))
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        runs = [json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                          check=True).stdout) for _ in range(2)]
    return runs[0], runs[1]


def bench_threads(trials: int) -> dict:
    from tuiprof.arch import load_arch
    from tuiprof.demos import resolve_target
    from tuiprof.sim.montecarlo import MonteCarlo
    from tuiprof.trace.io import load_trace

    trace, arch = load_trace(resolve_target("spmv-u")), load_arch("tesla-c2050")
    first = MonteCarlo(trace, arch, trials=1, seed=1, threads=1)
    first.run()  # compile or load outside the timings
    out = {}
    for threads in (1, 2):
        mc = MonteCarlo(trace, arch, trials=trials, seed=1, threads=threads, prepared=first.prepared)
        t0 = time.perf_counter()
        res = mc.run()
        out[threads] = (time.perf_counter() - t0, res)
    same = all(np.array_equal(a.l2_read_hits, b.l2_read_hits) and np.array_equal(a.dram_batch_latencies,
                                                                                   b.dram_batch_latencies)
               for a, b in zip(out[1][1], out[2][1]))
    return dict(trials=trials, one_thread_s=out[1][0], two_threads_s=out[2][0], speedup=out[1][0] / out[2][0],
                identical=same)


_START_CHILD = """
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {root!r})
from tests.support.sim_traces import trace_of, lanes, FULL
from tuiprof.arch import load_arch
from tuiprof.sim.montecarlo import MonteCarlo
t_import = time.perf_counter() - t0
trace = trace_of([[(0, lanes(0x1000 * i), FULL) for i in range(64)] for _ in range(4)], warps_per_cta=2)
mc = MonteCarlo(trace, load_arch("tesla-c2050"), trials=1, seed=0, threads=1)
first = next(mc.iter_trials())
print(json.dumps({{"import_s": t_import, "first_trial_s": time.perf_counter() - t0}}))
"""


def bench_startup() -> dict:
    code = _START_CHILD.format(root=str(ROOT))
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        cold, warm = (json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                                check=True).stdout) for _ in range(2))
    return dict(cold_s=cold["first_trial_s"], warm_s=warm["first_trial_s"], warm_import_s=warm["import_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5, help="trials per case and kernel")
    ap.add_argument("--trials", type=int, default=16, help="trials of the thread speed-up run")
    ap.add_argument("--quick", action="store_true", help="3 seeds, 8 trials, no compile or start-up sections")
    ap.add_argument("--no-compile", action="store_true", help="skip the compile and start-up sections (minutes)")
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout whose product kernel to compare")
    ap.add_argument("--rounds", type=int, default=4, help="turns of each checkout against --baseline")
    ap.add_argument("--only-baseline", action="store_true", help="only the comparison with --baseline")
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.trials, args.no_compile = 3, 8, True
    print(f"cores: {os.cpu_count()}; {load()}")
    if args.baseline is not None:
        print(f"\n1b. product kernel, this checkout against {args.baseline} (fresh processes taking turns, "
              f"{args.rounds} x {args.seeds} seeds each, medians of thread CPU time)")
        print(f"   {'case':<28} {'ours s':>7} {'M req/s':>7} {'baseline s':>10} {'M req/s':>7} {'speed ratio':>11}  load")
        for demo, arch, what in CASES:
            r = bench_against(args.baseline.resolve(), demo, arch, args.seeds, args.rounds)
            print(f"   {demo + ' / ' + arch:<28} {r['ours_s']:7.3f} {r['ours_rate'] / 1e6:7.1f} {r['baseline_s']:10.3f} "
                  f"{r['baseline_rate'] / 1e6:7.1f} {r['ratio']:10.3f}x  {load()}   ({what})", flush=True)
        print("   speed ratio: baseline CPU / ours (above 1: ours is faster)")
        if args.only_baseline:
            return

    print(f"\n1. one trial, product kernel vs reference kernel (medians of {args.seeds} seeds, thread CPU time)")
    print(f"   {'case':<28} {'L1 requests':>11} {'product s':>9} {'M req/s':>7} {'reference s':>11} {'M req/s':>7} "
          f"{'ratio':>6}  identical  load")
    for demo, arch, what in CASES:
        r = bench_trial(demo, arch, args.seeds)
        print(f"   {demo + ' / ' + arch:<28} {r['l1_requests']:>11} {r['product_s']:9.3f} {r['product_rate'] / 1e6:7.1f} "
              f"{r['reference_s']:11.3f} {r['reference_rate'] / 1e6:7.1f} {r['ratio']:5.2f}x  {str(r['identical']):<9}  "
              f"{r['load']:.2f}   ({what})")
    print(f"   goal: >= {GOAL_L1_REQ_PER_S / 1e6:.0f} M L1 requests/s/core on spmv-u / tesla-c2050 "
          f"(bar {BAR_L1_REQ_PER_S / 1e6:.0f} M)")

    print(f"\n2. {args.trials} trials of spmv-u / tesla-c2050, 1 vs 2 threads ({load()})")
    t = bench_threads(args.trials)
    print(f"   1 thread {t['one_thread_s']:.2f} s, 2 threads {t['two_threads_s']:.2f} s, speed-up {t['speedup']:.2f}x, "
          f"identical results: {t['identical']} ({load()} after)")
    print(f"   goal: >= {GOAL_SPEEDUP_2_THREADS}x")

    if not args.no_compile:
        print(f"\n3. replay kernel per geometry: compile (empty cache) and load (warm cache), seconds ({load()})")
        cold, warm = bench_compile()
        for name in PRESETS:
            print(f"   {name:<12} compile {cold[name]:6.1f}  load {warm[name]:5.2f}")
        print(f"   ({load()} after)")
        print(f"\n4. start-up (fresh processes, empty then warm NUMBA_CACHE_DIR; {load()})")
        s = bench_startup()
        print(f"   cold compile to first trial {s['cold_s']:.1f} s; warm start to first trial {s['warm_s']:.2f} s "
              f"(imports {s['warm_import_s']:.2f} s)")


if __name__ == "__main__":
    main()
