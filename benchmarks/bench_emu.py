"""Emulator throughput: thread instructions per second per core, and the speed-up on 2 threads;
and the time from a CUDA source to the first trial of its report.

    python benchmarks/bench_emu.py [--repeat 3] [--scale 1] [--only spmv matmul32 stencil first_trial]

Kernels (compiled from demo_traces/ with nvcc, or NVRTC without it): scalar CSR SpMV on a random
matrix of 262,144 rows (32 nonzeros per row on average), the 32x32-tiled matmul with N = 384, and
the 7-point stencil on a 128^3 grid (`--scale` multiplies the rows, N and the grid side): about
100M, 210M and 130M thread instructions, a second or more each, so that the threads' start-up
does not hide the 2-thread speed-up. Each runs its whole grid through `EmuDevice` once to load
the Numba kernels (not timed), then `--repeat` times; the best run counts. Reported per kernel:

- thread instructions executed (active lanes summed over every warp instruction);
- per core: thread instructions / CPU seconds of this process on 1 worker thread (CPU time, so
  that other processes on a shared machine distort it less than wall time would);
- the speed-up of 2 worker threads over 1 in wall time (the load average is printed: on a busy
  2-core machine the second core may not be free), and the per-core rate with 2 threads (CPU
  time): equal to the 1-thread rate when the threads run without contending (the GIL is released
  and CTAs are independent), so the wall-time speed-up is bounded only by free cores.

Goal: at least 50M thread instructions per second per core; bar: 20M.

``first_trial``: `tuiprof report demo_traces/spmv.cu --trials 1 --no-sweep` (compile, emulate the
whole grid of spmv-u, record, one trial) in a fresh process, twice: the second run counts (warm:
the build and Numba caches hold the compiled source and kernels). The baseline in the same run is
`tuiprof report spmv-u --trials 1 --no-sweep`, the shipped recording of the same launch (loading
and one trial only). Goal: under 10 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GOAL, BAR = 50e6, 20e6
FIRST_TRIAL_GOAL = 10.0


def _module(name: str):
    from tuiprof.ptx.parse import parse_module
    from tuiprof.toolchain.compile import build_program

    src = ROOT / "demo_traces" / name
    prog = build_program(src, compute_capability=(7, 5))
    return parse_module(prog.ptx), str(src), prog.source.text


def workloads(scale: int) -> dict[str, tuple[str, str, object]]:
    """name -> (source file, kernel, setup(dev)) with inputs sized by `scale`."""
    from tuiprof.trace.synth import csr_pattern

    rows = 262144 * scale
    m = csr_pattern("random", rows, 32768, 32, seed=2012)
    rng = np.random.default_rng(1)
    val = rng.integers(-4, 5, m.col_ind.shape[0]).astype(np.float32)
    y = rng.integers(-4, 5, 32768).astype(np.float32)

    def spmv(dev):
        bufs = [dev.to_device(a) for a in (m.row_ptr.astype(np.uint32), m.col_ind.astype(np.uint32), val, y)]
        x = dev.empty(rows, np.float32)
        dev.launch("spmv_csr_scalar", rows // 256, 256, (x, bufs[2], bufs[1], bufs[0], bufs[3], np.uint32(rows)))

    n = 384 * scale
    a = rng.integers(-2, 3, (n, n)).astype(np.float32)
    b = rng.integers(-2, 3, (n, n)).astype(np.float32)

    def matmul(dev):
        A, B = dev.to_device(a), dev.to_device(b)
        C = dev.empty((n, n), np.float32)
        dev.launch("matmul_tile32", (n // 32, n // 32, 1), (32, 32, 1), (C, A, B, np.int32(n)))

    s = 128 * scale
    grid_in = rng.random(s * s * s).astype(np.float32)

    def stencil(dev):
        inp = dev.to_device(grid_in)
        out = dev.zeros(s * s * s, np.float32)
        dev.launch("stencil7", (s // 32, s // 8, s), (32, 8, 1),
                   (out, inp, np.int32(s), np.int32(s), np.int32(s), np.float32(0.5), np.float32(0.1)))

    return {"spmv": ("spmv.cu", spmv), "matmul32": ("matmul_tiles.cu", matmul), "stencil": ("stencil.cu", stencil)}


def run(module, src: str, text: str, setup, threads: int) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, thread instructions) of one run."""
    from tuiprof.collect.emu.device import EmuDevice, RecordChoice

    dev = EmuDevice(module, src, text, record=RecordChoice(snapshot=()), threads=threads)
    w, c = time.perf_counter(), time.process_time()
    setup(dev)
    return time.perf_counter() - w, time.process_time() - c, dev.thread_instructions


def tuiprof_wall(*args: str) -> float:
    """Wall seconds of ``tuiprof ARGS`` in a fresh process (it must succeed)."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tuiprof", *args], check=True, capture_output=True, cwd=ROOT,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return time.perf_counter() - t


def first_trial() -> dict[str, float]:
    """Source to first trial of spmv-u, warm (the second of two runs), against the shipped trace."""
    options = ("--trials", "1", "--no-sweep")
    cold_or_warm = tuiprof_wall("report", "demo_traces/spmv.cu", *options)
    warm = tuiprof_wall("report", "demo_traces/spmv.cu", *options)
    shipped = min(tuiprof_wall("report", "spmv-u", *options) for _ in range(2))
    verdict = "goal" if warm < FIRST_TRIAL_GOAL else "ABOVE GOAL"
    print(f"first_trial  spmv.cu to its first trial: {warm:.2f}s warm ({verdict}; first of the two runs "
          f"{cold_or_warm:.2f}s); from the shipped spmv-u trace: {shipped:.2f}s (x{warm / shipped:.2f})")
    return {"source_s": warm, "first_run_s": cold_or_warm, "shipped_trace_s": shipped}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scale", type=int, default=1, help="problem size multiplier")
    ap.add_argument("--only", nargs="*", help="run only these workloads (spmv, matmul32, stencil, first_trial)")
    args = ap.parse_args()
    results = {}
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if not args.only or "first_trial" in args.only:
        results["first_trial"] = first_trial()
    for name, (file, setup) in workloads(args.scale).items():
        if args.only and name not in args.only:
            continue
        module, src, text = _module(file)
        run(module, src, text, setup, 1)   # compile (cached on disk after the first time)
        one = min((run(module, src, text, setup, 1) for _ in range(args.repeat)), key=lambda r: r[1])
        two = min((run(module, src, text, setup, 2) for _ in range(args.repeat)), key=lambda r: r[0])
        per_core = one[2] / one[1]
        per_core_2 = two[2] / two[1]
        results[name] = {"thread_insts": one[2], "per_core_M": per_core / 1e6, "per_core_2_threads_M": per_core_2 / 1e6,
                         "wall_1": one[0], "wall_2": two[0], "speedup_2": one[0] / two[0]}
        verdict = "goal" if per_core >= GOAL else ("bar" if per_core >= BAR else "BELOW BAR")
        print(f"{name:9s} {one[2] / 1e6:8.1f}M thread insts  {per_core / 1e6:6.1f}M/s per core ({verdict})  "
              f"1 thread {one[0]:.2f}s, 2 threads {two[0]:.2f}s: x{one[0] / two[0]:.2f} "
              f"({per_core_2 / 1e6:.1f}M/s per core with 2 threads)")
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
