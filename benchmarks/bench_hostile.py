"""Hostile .tptrace files (issue 9, trace half): for each case, the exit status, peak memory
(the child's maximum RSS), wall time and the first line of stderr of `tuiprof report FILE`.
Prints one row per case; run on demand (the bombs need a few seconds to build):

    python benchmarks/bench_hostile.py [--cap-gib G] [--timeout S] [--trials N] [CASE ...]

Each case runs under an address-space cap (default 8 GiB, so a regression cannot take the
machine) and a timeout; the builders are the test suite's (tests/hostile/hostile.py).
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.hostile import hostile as H  # noqa: E402


def _cases() -> dict[str, Callable[[Path], Path]]:
    def header(fn: Callable[[dict], None]) -> Callable[[Path], Path]:
        def build(d: Path) -> Path:
            t = H.TraceFile()
            fn(t.header)
            return t.save(d / "t.tptrace")
        return build

    def fifo(d: Path) -> Path:
        os.mkfifo(d / "fifo.tptrace")
        return d / "fifo.tptrace"

    def escapes(d: Path) -> Path:
        t = H.TraceFile()
        t.header["launch"]["kernel"] = "k\x1b[2J\x1b]0;owned\x07"
        t.header["ops"][0]["label"] = "A\x1b[31m[id]"
        return t.save(d / "esc\x1b[7m.tptrace")

    return {
        "valid vecadd": lambda d: H.TraceFile().save(d / "t.tptrace"),
        "wrapping warp_lengths": lambda d: H.wrapping_sums(H.TraceFile()).save(d / "t.tptrace"),
        "deflate bomb 2 GiB": lambda d: H.bomb_trace(d / "t.tptrace", zipfile.ZIP_DEFLATED, 2 << 30),
        "lzma bomb 1 GiB": lambda d: H.bomb_trace(d / "t.tptrace", zipfile.ZIP_LZMA, 1 << 30),
        "declared 2^36 accesses": header(lambda h: [h["arrays"][k].update(shape=[1 << 36, *h["arrays"][k]["shape"][1:]])
                                                    for k in ("op", "mask", "addr_base", "addr_lanes")]),
        "3000 ops on a 1 MB line": lambda d: H.many_ops(H.TraceFile(), 3000, "x" * (1 << 20)).save(d / "t.tptrace"),
        "60000 unused ops": lambda d: H.many_ops(H.TraceFile(), 60000).save(d / "t.tptrace"),
        "no launch key": header(lambda h: h.pop("launch")),
        "grid of 2^31-1 CTAs": header(lambda h: h["launch"].update(grid=[2**31 - 1, 1, 1])),
        "FIFO": fifo,
        "directory": lambda d: d,
        "escape sequences": escapes,
    }


def run(path: Path, cap: int, timeout: float, trials: int) -> tuple[str, float, float, str, bool]:
    """(exit status, peak RSS MiB, wall s, first stderr line, ESC on stdout) of one report."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-m", "tuiprof", "report", str(path), "--trials", str(trials)],
                             stdout=out, stderr=err, stdin=subprocess.DEVNULL, preexec_fn=limit, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
        deadline = t0 + timeout
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                p.send_signal(signal.SIGKILL)
                pid, status, usage = os.wait4(p.pid, 0)
                p.returncode = -9
                return "timeout", usage.ru_maxrss / 1024, time.perf_counter() - t0, "", False
            time.sleep(0.02)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        out.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
        first = next((ln for ln in lines if ln.startswith("error:")), lines[-1] if lines else "")
        return str(p.returncode), usage.ru_maxrss / 1024, wall, first, b"\x1b" in out.read()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--cap-gib", type=float, default=8.0)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--trials", type=int, default=2)
    args = ap.parse_args()
    cases = _cases()
    for name in args.cases or cases:
        with tempfile.TemporaryDirectory() as d:
            path = cases[name](Path(d))
            code, rss, wall, first, esc = run(path, int(args.cap_gib * (1 << 30)), args.timeout, args.trials)
        print(f"{name:<26} exit {code:>7}  peak {rss:7.0f} MiB  {wall:6.1f} s  {'ESC on stdout  ' if esc else ''}"
              f"{first[:150]!r}", flush=True)


if __name__ == "__main__":
    main()
