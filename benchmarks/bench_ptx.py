"""PTX front-end speed, against a baseline measured in the same run.

    python benchmarks/bench_ptx.py [--lines 10000] [--repeat 5]

A module of at least `--lines` lines is built from the corpus's nvcc PTX (tests/ptx/nvcc/
ptx_local_mem.sm75.ptx: loops, local arrays, calls, printf) by repeating its functions under
fresh names. Reported, best of `--repeat`:

1. `parse_module` time, and its ratio to the baseline: one pass of a bare statement regex over
   the same text (the floor for any regex-based reader, which decodes nothing);
2. `cfg` + `ipdom` over every function;
3. `static_ops` over every kernel (labels from the real source file).

Target: parsing 10k lines "well under a second".
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGETS = {"parse_10k_lines_s": 0.5}


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    from tests.support.ptx_support import CUDA_DIR, fixture_text, replicate
    from tuiprof.ptx import parse_module
    from tuiprof.ptx.cfg import build_cfg, ipdom
    from tuiprof.ptx.ops import static_ops

    text = replicate(fixture_text("ptx_local_mem"), args.lines)
    n_lines = text.count("\n")
    floor = re.compile(r"\s+|[^;{}]+;|[{}]")
    t_floor = best(lambda: sum(1 for _ in floor.finditer(text)), args.repeat)
    t_parse = best(lambda: parse_module(text), args.repeat)
    m = parse_module(text)
    n_ins = sum(len(f.instructions) for f in m.functions.values())
    funcs = [f for f in m.functions.values() if f.has_body]

    def analyse() -> None:
        for f in funcs:
            build_cfg(f)
            ipdom(f)

    t_cfg = best(analyse, args.repeat)
    source = (CUDA_DIR / "ptx_local_mem.cu").read_text()
    t_ops = best(lambda: [static_ops(m, k, "ptx_local_mem.cu", source) for k in m.kernels], args.repeat)
    per_10k = t_parse * 10_000 / n_lines
    out = {
        "lines": n_lines, "instructions": n_ins, "functions": len(funcs), "kernels": len(m.kernels),
        "parse_s": round(t_parse, 4), "baseline_regex_pass_s": round(t_floor, 4),
        "parse_vs_baseline": round(t_parse / t_floor, 1),
        "parse_10k_lines_s": round(per_10k, 4),
        "instructions_per_s": round(n_ins / t_parse),
        "cfg_ipdom_s": round(t_cfg, 4), "static_ops_s": round(t_ops, 4),
        "targets": TARGETS,
        "meets_target": per_10k <= TARGETS["parse_10k_lines_s"],
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
