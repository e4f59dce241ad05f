"""`tuiprof diff` of two cached runs against the same diff cold, in the same run (issue 26's goal:
under 1 s when both runs are cached).

    python benchmarks/bench_diff.py [--pair spmv-u spmv-vec-u] [--trials 20] [--sweep] [--repeat 5]

Each diff is a fresh `tuiprof` process, as a user (or CI) runs it, with the run cache in a new
temporary folder (XDG_CACHE_HOME); the simulator's compiled kernels are the user's (NUMBA_CACHE_DIR
as `tuiprof.jit` chose it), so the cold diff measures simulation, not compilation. Printed: the
cold diff (both runs simulated and stored), the cached diff (median, min and max of --repeat
runs), their ratio, and `tuiprof --version` as the floor of any command (interpreter start).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "tuiprof", *argv], capture_output=True, text=True, env=env, cwd=ROOT)
    dt = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"tuiprof {' '.join(argv)} failed ({out.returncode}):\n{out.stderr}")
    return dt, out.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pair", nargs=2, default=["spmv-u", "spmv-vec-u"], metavar=("A", "B"))
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--sweep", action="store_true", help="run the MD sweep too (default: --no-sweep)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from tuiprof.jit import kernel_cache_dir

    run = ["--trials", str(args.trials), "--tolerance", "0"] + ([] if args.sweep else ["--no-sweep"])
    argv = ["diff", *args.pair, *run, "--format", "json"]
    with tempfile.TemporaryDirectory(prefix="tuiprof-bench-diff-") as tmp:
        env = dict(os.environ, XDG_CACHE_HOME=tmp)
        if kernel_cache_dir() is not None:
            env["NUMBA_CACHE_DIR"] = str(kernel_cache_dir())
        floor = min(timed(["--version"], env)[0] for _ in range(3))
        cold, out = timed(argv, env)
        doc = json.loads(out)
        assert not doc["a"]["cached"] and not doc["b"]["cached"]
        warm = []
        for _ in range(args.repeat):
            dt, out = timed(argv, env)
            assert json.loads(out)["a"]["cached"] and json.loads(out)["b"]["cached"]
            warm.append(dt)
        entries = sorted(Path(tmp, "tuiprof", "runs").glob("*.npz"))
        size = sum(p.stat().st_size for p in entries)
    med = statistics.median(warm)
    print(f"tuiprof diff {' '.join(args.pair)} {' '.join(run)} (--format json), fresh processes:")
    print(f"  cold (both runs simulated):  {cold:8.2f} s  ({doc['a']['trials']} + {doc['b']['trials']} trials)")
    print(f"  cached (both from the cache): {med:8.3f} s median of {len(warm)} (min {min(warm):.3f}, max {max(warm):.3f})")
    print(f"  ratio cold / cached:          {cold / med:8.1f}x")
    print(f"  `tuiprof --version` (interpreter start, the floor of any command): {floor:.3f} s")
    print(f"  cache: {len(entries)} entries, {size / 1024:.0f} KiB")
    print(f"  goal: cached diff under 1 s: {'met' if med < 1.0 else 'NOT met'}")


if __name__ == "__main__":
    main()
