"""Hostile .tptrace files (issue 9, trace half): for each case, the exit status, peak memory
(the child's maximum RSS), wall time and the first line of stderr of `tuiprof report FILE`.
Prints one row per case; run on demand (the bombs need a few seconds to build):

    python benchmarks/bench_hostile.py [--cap-gib G] [--timeout S] [--trials N] [--tree DIR] [CASE ...]

Each case runs under an address-space cap (default 8 GiB, so a regression cannot take the
machine) and a timeout; the builders are the test suite's (tests/hostile/hostile.py). With
``--tree`` another checkout's tuiprof runs the same files (for before/after figures).
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


Case = Callable[[Path], "tuple[str | bytes, dict[str, str]]"]


def _cases() -> dict[str, Case]:
    """Each case builds its file in a fresh folder and returns (the TARGET argument, extra env)."""
    def file(build: Callable[[Path], Path]) -> Case:
        return lambda d: (str(build(d)), {})

    def header(fn: Callable[[dict], None]) -> Case:
        def build(d: Path) -> Path:
            t = H.TraceFile()
            fn(t.header)
            return t.save(d / "t.tptrace")
        return file(build)

    def fifo(d: Path) -> Path:
        os.mkfifo(d / "fifo.tptrace")
        return d / "fifo.tptrace"

    def escapes(d: Path) -> Path:
        t = H.TraceFile()
        t.header["launch"]["kernel"] = "k\x1b[2J\x1b]0;owned\x07"
        t.header["ops"][0]["label"] = "A\x1b[31m[id]"
        return t.save(d / "esc\x1b[7m.tptrace")

    def declared(h: dict) -> None:
        n = 1 << 36
        h["counts"]["accesses"] = n
        for k in ("op", "mask", "addr_base"):
            h["arrays"][k]["shape"] = [n]
        h["arrays"]["addr_lanes"]["shape"] = [n, 32]

    def no_cta_records(h: dict) -> None:
        h["launch"]["grid"] = [2**31 - 1, 1, 1]
        for k in [k for k in h["arrays"] if k.startswith("cta_")]:
            del h["arrays"][k]

    def damaged_cache(d: Path) -> tuple[str, dict[str, str]]:
        from tuiprof import __version__

        cached = d / "tuiprof" / "demo_traces" / f"spmv-vec-u128-{__version__}.tptrace"
        cached.parent.mkdir(parents=True)
        cached.write_bytes(b"PK\x03\x04 half a file")
        return "spmv-vec-u128", {"XDG_CACHE_HOME": str(d)}

    def odd_name(d: Path) -> tuple[bytes, dict[str, str]]:
        name = os.fsencode(d) + b"/t\xff\x1b[2J.tptrace"
        with open(name, "wb") as fh:
            fh.write(b"junk")
        return name, {}

    return {
        "valid vecadd": file(lambda d: H.TraceFile().save(d / "t.tptrace")),
        "wrapping warp_lengths": file(lambda d: H.wrapping_sums(H.TraceFile()).save(d / "t.tptrace")),
        "deflate bomb 2 GiB": file(lambda d: H.bomb_trace(d / "t.tptrace", zipfile.ZIP_DEFLATED, 2 << 30)),
        "lzma bomb 1 GiB": file(lambda d: H.bomb_trace(d / "t.tptrace", zipfile.ZIP_LZMA, 1 << 30)),
        "declared 2^36 accesses": header(declared),
        "honest 4 Mi accesses": file(lambda d: H.huge_trace(d / "t.tptrace", 1 << 22)),
        "3000 ops on a 1 MB line": file(lambda d: H.many_ops(H.TraceFile(), 3000, "x" * (1 << 20)).save(d / "t.tptrace")),
        "60000 unused ops": file(lambda d: H.many_ops(H.TraceFile(), 60000).save(d / "t.tptrace")),
        "no launch key": header(lambda h: h.pop("launch")),
        "op kind missing": header(lambda h: h["ops"][1].pop("kind")),
        "grid 2^31-1, no CTA records": header(no_cta_records),
        "FIFO": file(fifo),
        "directory": file(lambda d: d),
        "5000-character name": lambda d: (str(d / ("x" * 5000 + ".tptrace")), {}),
        "non-UTF-8 name": odd_name,
        "escape sequences": file(escapes),
        "damaged cached demo": damaged_cache,
    }


def run(target: str | bytes, env: dict[str, str], tree: Path, cap: int, timeout: float,
        trials: int) -> tuple[str, float, float, str, bool]:
    """(exit status, peak RSS MiB, wall s, first stderr line, ESC on stdout) of one report."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-m", "tuiprof", "report", target, "--trials", str(trials)],
                             stdout=out, stderr=err, stdin=subprocess.DEVNULL, preexec_fn=limit, cwd=tree,
                             env={**os.environ, "PYTHONPATH": str(tree), **env})
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
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose tuiprof runs (default: this one)")
    args = ap.parse_args()
    cases = _cases()
    for name in args.cases or cases:
        with tempfile.TemporaryDirectory() as d:
            target, env = cases[name](Path(d))
            code, rss, wall, first, esc = run(target, env, args.tree.resolve(), int(args.cap_gib * (1 << 30)),
                                              args.timeout, args.trials)
        print(f"{name:<26} exit {code:>7}  peak {rss:7.0f} MiB  {wall:6.1f} s  {'ESC on stdout  ' if esc else ''}"
              f"{first[:150]!r}", flush=True)


if __name__ == "__main__":
    main()
