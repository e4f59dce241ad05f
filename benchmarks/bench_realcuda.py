"""Real CUDA as it is written (issue 22): how many kernels of the corpus in ``tests/realcuda/``
profile, through the launch script ``tuiprof init`` writes (run as written) and through the
hand-written one that checks the kernel's output against NumPy. Prints one row per kernel and
the totals; run on demand (each kernel is compiled and emulated twice):

    python benchmarks/bench_realcuda.py [--tree DIR] [--timeout S] [NAME ...]

With ``--tree`` another checkout's tuiprof runs the same files (for before/after figures); each
run gets a private cache folder, so neither tree reuses the other's builds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "realcuda"


def _run(tree: Path, args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str, float]:
    """(exit status, last line of stderr, seconds) of ``python -m tuiprof ARGS`` from `tree`."""
    start = time.perf_counter()
    try:
        out = subprocess.run([sys.executable, "-m", "tuiprof", *args], cwd=cwd, env=env, capture_output=True,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, "timed out", time.perf_counter() - start
    lines = [line for line in out.stderr.splitlines() if line.startswith(("error:", "hint:"))] or out.stderr.splitlines()
    return out.returncode, (lines[0] if lines else ""), time.perf_counter() - start


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose tuiprof runs (default: this one)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per command (default 600)")
    p.add_argument("names", nargs="*", help="kernels of tests/realcuda (default: all)")
    args = p.parse_args()
    names = args.names or sorted(f.stem for f in CORPUS.glob("*.cu"))
    totals = {"generated": 0, "checked": 0}
    with tempfile.TemporaryDirectory(prefix="tuiprof-realcuda-") as tmp:
        work = Path(tmp) / "corpus"
        shutil.copytree(CORPUS, work)
        env = dict(os.environ, PYTHONPATH=str(args.tree.resolve()), XDG_CACHE_HOME=str(Path(tmp) / "cache"))
        print(f"{'kernel':22} {'generated':>9} {'checked':>9}  first error")
        for name in names:
            src = work / f"{name}.cu"
            gen = work / f"{name}_generated.py"
            row = []
            problem = ""
            code, line, _ = _run(args.tree, ["init", src.name, "-o", gen.name, "--force"], work, env, args.timeout)
            if code == 0:
                code, line, _ = _run(args.tree, ["record", src.name, "--launch", gen.name, "--backend", "emu",
                                                 "-o", f"{name}.gen.tptrace"], work, env, args.timeout)
            row.append(code == 0)
            problem = problem or ("" if code == 0 else f"generated: {line}")
            code, line, _ = _run(args.tree, ["record", src.name, "--launch", f"{name}_check.py", "--backend", "emu",
                                             "-o", f"{name}.chk.tptrace"], work, env, args.timeout)
            row.append(code == 0)
            problem = problem or ("" if code == 0 else f"checked: {line}")
            totals["generated"] += row[0]
            totals["checked"] += row[1]
            print(f"{name:22} {'ok' if row[0] else 'FAIL':>9} {'ok' if row[1] else 'FAIL':>9}  {problem[:110]}", flush=True)
    print(f"\n{len(names)} kernels: {totals['generated']} profile under the generated script, "
          f"{totals['checked']} under the hand-written one")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
