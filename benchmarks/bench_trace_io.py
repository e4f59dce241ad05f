"""Trace file size, save/load time and peak memory, against a raw .npy baseline in the same run.

    python benchmarks/bench_trace_io.py [--accesses 1000000] [--tile-ctas 64]

Two workloads. SpMV-like: a third strided streams (indices[j], val[j]), a third random gathers
over 32768 columns (y[ind]) and a third of unit-stride accesses with partial masks. Shared tiles:
the 16 x 16 tiled matrix multiply (`tuiprof.trace.synth`), 94% of its warp accesses in shared
memory, which a loaded trace keeps packed (`tuiprof.trace.packed`, issue 23 item 5). The baseline
of each is the same addresses saved as one uncompressed uint64 .npy and loaded with np.load:
what a loader that decodes every lane holds. Peak memory is the resident-set growth of a fresh
process while loading (VmHWM), reported as a ratio to the baseline's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_LOAD = """
import json, sys, time
import numpy as np
from tuiprof.trace.io import load_trace
def hwm():  # peak resident set of this process image (VmHWM is reset by exec, ru_maxrss is not)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
# Both modes first load the decoding kernel (Numba and its cached machine code), so that the peak
# compares the data each holds, not the import.
from tuiprof.trace.packed import Undelta
Undelta(1, 4).decode(np.zeros(1, np.int64), np.zeros(1, np.int32), np.zeros(1, np.int64), np.zeros((1, 32), np.int64),
                     np.ones(1, np.int64), np.zeros((1, 32), np.uint64))
rss0 = hwm()
t0 = time.perf_counter()
if sys.argv[2] == "raw":
    a = np.load(sys.argv[1]); n = a.shape[0]
else:
    t = load_trace(sys.argv[1]); n = t.n_accesses
dt = time.perf_counter() - t0
rss1 = hwm()
print(json.dumps({"seconds": dt, "peak_mib": (rss1 - rss0) / 1024, "accesses": n}))
"""


def spmv_like(n: int, seed: int = 0):
    from tests.support.factories import make_trace

    rng = np.random.default_rng(seed)
    lanes = np.arange(32, dtype=np.uint64)
    third = n // 3
    warps = 2048
    it = np.arange(third, dtype=np.uint64)
    strided = 0x7F0000000000 + (it // warps)[:, None] * 4 + lanes * 128 + (it % warps)[:, None] * 4096
    gather = 0x7F0010000000 + rng.integers(0, 32768, size=(third, 32)).astype(np.uint64) * 4
    unit = 0x7F0020000000 + np.arange(n - 2 * third, dtype=np.uint64)[:, None] * 128 + lanes * 4
    addr = np.concatenate([strided, gather, unit])
    ops = np.concatenate([np.zeros(third, np.int32), np.ones(third, np.int32), np.full(n - 2 * third, 2, np.int32)])
    masks = np.full(n, 0xFFFFFFFF, np.uint64)
    masks[2 * third:] = rng.integers(1, 2**32, size=n - 2 * third)
    w = np.arange(n) % warps
    return make_trace(addr, ops=list(ops), masks=list(masks.astype(np.uint32)), warps=list(w),
                      kinds=("load", "load", "store"), block=256)


def shared_tiles(ctas: int):
    from tuiprof.trace.synth.assemble import matmul16

    return matmul16(n=512, ctas=ctas)


def load_in_subprocess(path: Path, mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _LOAD, str(path), mode], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout
    return json.loads(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--accesses", type=int, default=1_000_000)
    ap.add_argument("--tile-ctas", type=int, default=64, help="CTAs of the shared-tiles workload")
    args = ap.parse_args()
    from tuiprof.resources import data_dir
    from tuiprof.trace.io import save_trace

    print("demo traces:")
    total = 0
    for p in sorted(data_dir("demo_traces").glob("*.tptrace")):
        from tuiprof.trace.io import read_header

        h = read_header(p)
        total += p.stat().st_size
        print(f"  {p.stem:<18} {p.stat().st_size / 2**20:7.2f} MiB  {h['counts']['accesses']:>9} warp accesses"
              f"  {p.stat().st_size / max(1, h['counts']['accesses']):6.1f} B/access")
    print(f"  total              {total / 2**20:7.2f} MiB")

    for name, make in (("SpMV-like", lambda: spmv_like(args.accesses)),
                       ("shared tiles", lambda: shared_tiles(args.tile_ctas))):
        t0 = time.perf_counter()
        trace = make()
        build = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as d:
            tp, rp = Path(d) / "t.tptrace", Path(d) / "raw.npy"
            t0 = time.perf_counter()
            save_trace(trace, tp)
            save_s = time.perf_counter() - t0
            np.save(rp, trace.addr)
            ours, raw = load_in_subprocess(tp, "tptrace"), load_in_subprocess(rp, "raw")
            size, raw_size = tp.stat().st_size, rp.stat().st_size
        n = trace.n_accesses
        shared = sum(int((trace.op == o.id).sum()) for o in trace.ops if o.space == "shared")
        print(f"\n{name}: {n} warp accesses, {shared / max(n, 1):.0%} in shared memory (built in {build:.1f} s):")
        print(f"  .tptrace  size {size / 2**20:8.1f} MiB  save {save_s:6.2f} s  load {ours['seconds']:6.2f} s  "
              f"peak +{ours['peak_mib']:7.0f} MiB")
        print(f"  raw .npy  size {raw_size / 2**20:8.1f} MiB                load {raw['seconds']:6.2f} s  "
              f"peak +{raw['peak_mib']:7.0f} MiB")
        print(f"  ratios (tptrace / raw): size {size / raw_size:.3f}  load time {ours['seconds'] / raw['seconds']:.2f}x"
              f"  peak memory {ours['peak_mib'] / max(raw['peak_mib'], 1):.2f}x")


if __name__ == "__main__":
    main()
