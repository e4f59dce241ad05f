"""The emulator's first-run cost: CPU seconds of a kernel's first launch with an empty Numba cache
(the compile of the interpreter) against the same launch with the cache filled, in fresh processes.

    python benchmarks/bench_emu_compile.py [--only vecadd matmul reduce report] [--compare /work/main]

Kernels: ``vecadd`` (demo_traces/vecadd.cu, its launch script: 3 arithmetic instructions, loads
and stores), ``matmul`` (tests/cuda/ptx_matmul_tiled.cu, ``matmul_tiled`` on 40 x 40: shared
memory, CTA barriers, fma, divergent bounds checks) and ``reduce`` (tests/cuda/ptx_reduce_shfl.cu,
``reduce_shfl``: shfl.sync, a float atomic add). Each child process compiles the CUDA file to PTX
first (not timed), then times one launch on an EmuDevice: ``cold`` in a fresh NUMBA_CACHE_DIR,
``warm`` a second process on the cache the first filled; cold - warm is what compiling the
emulator for that kernel costs. ``report`` is the whole first ``tuiprof report
demo_traces/vecadd.cu --trials 20 --no-sweep`` with fresh Numba and user caches (the simulator's
kernels compile too), against a second, warm run.

``--compare ROOT`` runs the same measurements with another checkout of tuiprof on PYTHONPATH (for
example the main branch before a change) in the same invocation, so that both see the same load.
CPU seconds (user + system of the child) rather than wall time: on a shared machine they vary less.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, sys, time
import numpy as np
root, which = sys.argv[1], sys.argv[2]
from pathlib import Path
from tuiprof.toolchain.compile import build_program
from tuiprof.ptx.parse import parse_module
from tuiprof.collect.emu.device import EmuDevice, RecordChoice
src = Path(root) / {"vecadd": "demo_traces/vecadd.cu", "matmul": "tests/cuda/ptx_matmul_tiled.cu",
                    "reduce": "tests/cuda/ptx_reduce_shfl.cu"}[which]
prog = build_program(src, compute_capability=(7, 5))
module = parse_module(prog.ptx)
dev = EmuDevice(module, str(src), src.read_text(), record=RecordChoice(snapshot=(0,)), threads=1)
rng = np.random.default_rng(1)
c0 = time.process_time()
if which == "vecadd":
    a = dev.to_device(rng.integers(-9, 9, 20480).astype(np.int32))
    b = dev.to_device(rng.integers(-9, 9, 20480).astype(np.int32))
    c = dev.empty(20480, np.int32)
    dev.launch("kernel_vec_add", 320, 64, (c, a, b))
    ok = bool((dev.from_device(c) == dev.from_device(a) + dev.from_device(b)).all())
elif which == "matmul":
    n = 40
    ha = rng.integers(-3, 4, (n, n)).astype(np.float32)
    hb = rng.integers(-3, 4, (n, n)).astype(np.float32)
    c = dev.zeros((n, n), np.float32)
    dev.launch("matmul_tiled", (3, 3, 1), (16, 16, 1), (dev.to_device(ha), dev.to_device(hb), c, np.int32(n)))
    ok = bool((dev.from_device(c) == (ha.astype(np.float64) @ hb).astype(np.float32)).all())
else:
    x = rng.integers(-4, 5, 700).astype(np.float32)
    out = dev.zeros(1, np.float32)
    dev.launch("reduce_shfl", 4, 128, (dev.to_device(x), out, np.int32(700)))
    ok = float(dev.from_device(out)[0]) == float(x.sum())
print(json.dumps({"cpu": time.process_time() - c0, "ok": ok}))
"""


def _env(tuiprof: Path, cache: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(tuiprof), NUMBA_CACHE_DIR=str(cache / "numba"),
                XDG_CACHE_HOME=str(cache / "xdg"))


def launch_cpu(tuiprof: Path, which: str, cache: Path) -> float:
    """CPU seconds of one launch of kernel `which` in a fresh process on the Numba cache `cache`."""
    out = subprocess.run([sys.executable, "-c", _CHILD, str(tuiprof), which], env=_env(tuiprof, cache),
                         capture_output=True, text=True, cwd=tuiprof)
    if out.returncode != 0:
        raise SystemExit(f"{which} failed under {tuiprof}:\n{out.stderr[-3000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if not res["ok"]:
        raise SystemExit(f"{which} gave a wrong result under {tuiprof}")
    return float(res["cpu"])


def report_cpu(tuiprof: Path, cache: Path) -> float:
    """CPU seconds (user + system) of ``tuiprof report demo_traces/vecadd.cu`` in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "tuiprof", "report", "demo_traces/vecadd.cu", "--trials", "20",
                    "--no-sweep"], env=_env(tuiprof, cache), check=True, capture_output=True, cwd=tuiprof)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(tuiprof: Path, only: list[str]) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    for which in ("vecadd", "matmul", "reduce", "report"):
        if only and which not in only:
            continue
        with tempfile.TemporaryDirectory(prefix="tuiprof-bench-") as tmp:
            cache = Path(tmp)
            if which == "report":
                cold, warm = report_cpu(tuiprof, cache), report_cpu(tuiprof, cache)
            else:
                cold, warm = launch_cpu(tuiprof, which, cache), launch_cpu(tuiprof, which, cache)
        results[which] = {"cold_cpu_s": round(cold, 2), "warm_cpu_s": round(warm, 2),
                          "compile_cpu_s": round(cold - warm, 2)}
        print(f"{str(tuiprof):28s} {which:7s} cold {cold:7.2f}s  warm {warm:6.2f}s  compile {cold - warm:7.2f}s CPU",
              flush=True)
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=[], help="vecadd, matmul, reduce, report")
    ap.add_argument("--compare", type=Path, help="another tuiprof checkout to measure in the same run (the baseline)")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    results = {}
    if args.compare is not None:
        results["baseline"] = measure(args.compare.resolve(), args.only)
    results["this"] = measure(ROOT, args.only)
    if args.compare is not None:
        for which, r in results["this"].items():
            b = results["baseline"][which]
            print(f"{which:7s} compile {b['compile_cpu_s']:.2f}s -> {r['compile_cpu_s']:.2f}s CPU "
                  f"(x{r['compile_cpu_s'] / max(b['compile_cpu_s'], 1e-9):.2f}); cold {b['cold_cpu_s']:.2f}s -> "
                  f"{r['cold_cpu_s']:.2f}s")
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
