"""The default snapshot against a whole-grid recording (issue 24 item 3): a small matrix product
recorded by the emulator three ways, simulated the same way, and the emulator's recording time of
each.

    python benchmarks/bench_default_snapshot.py [--n 256] [--sms 4] [--trials 8]

matmul16 (demo_traces/matmul.cu) at N x N with 16 x 16 CTAs, recorded for an H100 cut to `--sms`
SMs (so that Baghsorkhi12's default snapshot, 4 x the CTAs resident at once, is a fraction of a
grid small enough to emulate whole): the whole grid (the truth the snapshot stands for), the
default snapshot (one resident set of warm-up CTAs replayed first and not counted, then 4 x the
resident CTAs counted) and the old default (`--snapshot-warm 0`: the same count from CTA 0,
replayed from cold caches). Prints the headline hit ratios of each and their distance from the
whole grid's, in points. A figure of the model, not of the hardware: no GPU is involved.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCRIPT = '''
import numpy as np
ARCH = "h100"
N, TILE = {n}, 16

def setup(dev):
    rng = np.random.default_rng(16)
    A = dev.to_device(rng.integers(-2, 3, (N, N)).astype(np.float32))
    B = dev.to_device(rng.integers(-2, 3, (N, N)).astype(np.float32))
    C = dev.empty((N, N), np.float32)
    dev.launch("matmul16", (N // TILE, N // TILE, 1), (TILE, TILE, 1), (C, A, B, np.int32(N), np.int32(N)))
    return {{"C": dev.from_device(C)}}
'''

KEYS = ("l1_read", "l2_read", "l2_write")


def main() -> int:
    from tuiprof.collect.options import CollectOptions
    from tuiprof.collect.pipeline import collect_trace
    from tuiprof.config import RunConfig
    from tuiprof.session import Session

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=256, help="matrix size (a multiple of 16)")
    ap.add_argument("--sms", type=int, default=4, help="SMs of the simulated H100")
    ap.add_argument("--trials", type=int, default=8)
    args = ap.parse_args()
    overrides = {"sm_count": str(args.sms)}
    grid = (args.n // 16) ** 2
    with tempfile.TemporaryDirectory(prefix="tuiprof-bench-") as tmp:
        script = Path(tmp) / "matmul_launch.py"
        script.write_text(SCRIPT.format(n=args.n))
        rows = []
        for name, options in (("whole grid", {"snapshot": grid}),
                              ("default (warm)", {"snapshot_start": None, "snapshot_warm": None}),
                              ("--snapshot-warm 0", {"snapshot_start": None, "snapshot_warm": 0})):
            config = RunConfig(arch="h100", overrides=overrides, trials=args.trials, sweep=False, tolerance=None,
                               collect=CollectOptions(launch=script, **options))  # type: ignore[arg-type]
            t0 = time.perf_counter()
            trace = collect_trace(ROOT / "demo_traces" / "matmul.cu", config)
            recorded = time.perf_counter() - t0
            analysis = Session(trace, config).run()
            assert analysis is not None
            rows.append((name, trace, recorded, {k: float(analysis.headline[k].mean) for k in KEYS}))
    truth = rows[0][3]
    print(f"matmul16, N = {args.n} ({grid} CTAs), h100 with {args.sms} SMs, {args.trials} trials")
    print(f"{'recording':<20} {'CTAs (warm-up)':>15} {'record s':>9}  " + "  ".join(f"{k:>16}" for k in KEYS))
    for name, trace, recorded, figures in rows:
        cells = "  ".join(f"{100 * figures[k]:6.1f}% ({100 * (figures[k] - truth[k]):+5.1f})" for k in KEYS)
        ctas = f"{trace.snapshot.counted_ctas} ({trace.snapshot.warm})"
        print(f"{name:<20} {ctas:>15} {recorded:9.1f}  {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
