"""Hostile inputs and faults (issue 9): for each case, the exit status, peak memory (the child's
maximum RSS), wall time, whether any file in the case's folder changed, and the first line of
stderr of `tuiprof report ...`. Prints one row per case; run on demand (the bombs need a few
seconds to build):

    python benchmarks/bench_hostile.py [--cap-gib G] [--timeout S] [--trials N] [--tree DIR] [CASE ...]
    python benchmarks/bench_hostile.py --memory [CASE ...]

Each case runs under an address-space cap (default 8 GiB, so a regression cannot take the
machine) and a timeout; the builders are the test suite's (tests/hostile/hostile.py). With
``--tree`` another checkout's tuiprof runs the same files (for before/after figures).

``--memory`` compares the run memory estimate (`tuiprof.sim.budget.run_bytes`, on this
machine's core count) with the measured peak of demos and what-ifs (each run twice: the first
compiles its kernels, whose memory the estimate does not count).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.hostile import hostile as H  # noqa: E402


@dataclass(frozen=True)
class Spec:
    """One `tuiprof report` run: its arguments, extra environment, Python run before tuiprof's
    main in the same process (a simulated fault), a command feeding its standard input, and an
    address-space cap of its own."""

    args: list
    env: dict = field(default_factory=dict)
    prelude: str | None = None
    stdin_cmd: list | None = None
    cap_gib: float | None = None


Case = Callable[[Path], Spec]

DENY_WRITES = """
import errno, tempfile
def _deny(*args, **kwargs):
    raise PermissionError(errno.EACCES, "Permission denied")
tempfile.TemporaryFile = _deny
"""
DENY_CACHE = """
import errno, os, tempfile
def _deny(real):
    def call(*args, **kwargs):
        if str(kwargs.get("dir") or "").startswith(os.environ["XDG_CACHE_HOME"]):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real(*args, **kwargs)
    return call
tempfile.TemporaryFile, tempfile.mkstemp = _deny(tempfile.TemporaryFile), _deny(tempfile.mkstemp)
"""
THEN_MAIN = """
import runpy, sys
sys.argv = ["tuiprof", *sys.argv[1:]]
runpy.run_module("tuiprof", run_name="__main__", alter_sys=True)
"""


def _cases() -> dict[str, Case]:
    """Each case builds its files in a fresh folder and returns the run."""
    def file(build: Callable[[Path], Path]) -> Case:
        return lambda d: Spec([str(build(d))])

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

    def damaged_cache(d: Path) -> Spec:
        from tuiprof import __version__

        cached = d / "tuiprof" / "demo_traces" / f"spmv-vec-u128-{__version__}.tptrace"
        cached.parent.mkdir(parents=True)
        cached.write_bytes(b"PK\x03\x04 half a file")
        return Spec(["spmv-vec-u128"], {"XDG_CACHE_HOME": str(d), **_numba_cache()})

    def odd_name(d: Path) -> Spec:
        name = os.fsencode(d) + b"/t\xff\x1b[2J.tptrace"
        with open(name, "wb") as fh:
            fh.write(b"junk")
        return Spec([name])

    def grid_only(ctas: int) -> Case:
        def build(d: Path) -> Path:
            t = H.TraceFile()
            t.header["launch"]["grid"] = [ctas, 1, 1]
            for k in [k for k in t.arrays if k.startswith("cta_")]:
                del t.arrays[k], t.header["arrays"][k]
            return t.save(d / "t.tptrace")
        return file(build)

    def negative_insts(d: Path) -> Path:
        t = H.TraceFile()
        t.set_array("cta_insts", t.arrays["cta_insts"].astype("int64") - 1000)
        return t.save(d / "t.tptrace")

    def broken_numba(d: Path) -> Spec:
        (d / "numba").mkdir()
        (d / "numba" / "__init__.py").write_text('raise ImportError("Numba needs NumPy 2.0 or less. Got NumPy 9.9.")\n')
        return Spec(["vecadd"], {"PYTHONPATH_FIRST": str(d)})

    def arch_file(d: Path) -> Path:
        (d / "a.toml").write_text((ROOT / "tuiprof" / "arch" / "presets" / "v100.toml").read_text())
        return d / "a.toml"

    def zero_device(d: Path) -> Spec:
        os.mknod(d / "zero", 0o666 | 0o020000, os.makedev(1, 5))  # a character device made here, never /dev's
        return Spec(["vecadd", "--arch", str(d / "zero")])

    def unwritable_cache(d: Path) -> Spec:
        return Spec(["spmv-vec-u128"], {"XDG_CACHE_HOME": str(d), **_numba_cache()}, prelude=DENY_CACHE)

    def typo(d: Path) -> Spec:
        toml = arch_file(d)
        toml.write_text(toml.read_text().replace("[l1]", "[l1]\nsise = 4", 1))
        return Spec(["vecadd", "--arch", str(toml)])

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
        "5000-character name": lambda d: Spec([str(d / ("x" * 5000 + ".tptrace"))]),
        "non-UTF-8 name": odd_name,
        "escape sequences": file(escapes),
        "damaged cached demo": damaged_cache,
        "grid 2^24, no CTA records": grid_only(1 << 24),
        "negative cta_insts": file(negative_insts),
        "broken Numba (ImportError)": broken_numba,
        "nothing writable": lambda d: Spec(["vecadd"], prelude=DENY_WRITES),
        "unwritable demo cache": unwritable_cache,
        "--arch zero device": zero_device,
        "--arch /dev/stdin from yes": lambda d: Spec(["vecadd", "--arch", "/dev/stdin"], stdin_cmd=["yes", "x = 1"]),
        "-o the --arch file": lambda d: Spec(["vecadd", "--arch", str(arch_file(d)), "-o", str(d / "a.toml")]),
        "unknown arch key l1.sise": typo,
        "sm_count=1000000": lambda d: Spec(["vecadd", "--set", "sm_count=1000000"]),
        "1024 SMs x 16 MiB L1 (stencil7)": lambda d: Spec(["stencil7", "--set", "sm_count=1024", "--set", "l1.size=16MiB"]),
        "1 GiB L2 of 32 B lines, 1 GiB cap": lambda d: Spec(["vecadd", "--arch", "v100", "--set", "l2.size=1GiB", "--set",
                                                           "l2.line=32", "--set", "l2.assoc=16"], cap_gib=1.0),
    }


# ---------------------------------------------------------------- issue 21: the emulator's path
# Kernel files run by launch scripts in the emulator (items 5, 7, 8, 10, 11, brkpt) and faults of
# the Numba cache (item 12). The kernels and scripts are tests/hostile/test_emu_hostile.py's.

TREE = ROOT
"""The checkout under test (--tree): the Numba cache cases copy its compiled kernels."""


def _emu_cases() -> dict[str, Case]:
    from tests.hostile.test_emu_hostile import FULL_DISK, KERNELS, SPIN, TOUCH, script_text

    def emu(body: str, *args: str, top: str = "", cap_gib: float | None = None) -> Case:
        def build(d: Path) -> Spec:
            (d / "k.cu").write_text(KERNELS)
            (d / "s.py").write_text(script_text(body, top))
            return Spec([str(d / "k.cu"), "--launch", str(d / "s.py"), "--no-sweep", *args], cap_gib=cap_gib)
        return build

    def numba_copy(d: Path, damage: str) -> dict[str, str]:
        """The tree's compiled kernels copied into `d`, the trace decoder's entries truncated or removed."""
        import shutil

        found = subprocess.run([sys.executable, "-c", "from tuiprof.jit import kernel_cache_dir as k; print(k())"],
                               capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(TREE)}, cwd=TREE)
        folder = d / "numba"
        shutil.copytree(found.stdout.strip(), folder)
        for p in folder.rglob("*_codec*"):
            if damage == "truncate":
                os.truncate(p, p.stat().st_size // 2)
            else:
                p.unlink()
        return {"NUMBA_CACHE_DIR": str(folder)}

    runaway = "a = dev.zeros(33, np.int32)\nout = dev.zeros({n} * 32, np.int32)\ndev.launch('runaway', {n}, 32, (a, out))"
    bad_str = "class Bad(Exception):\n    def __str__(self):\n        raise RuntimeError('no')"
    return {
        "spin, default step limit": emu(SPIN),
        "spin, 4 GiB cap": emu(SPIN, cap_gib=4.0),
        "runaway, 4096 CTAs": emu(runaway.format(n=4096)),
        "runaway, 4096 CTAs, snapshot the last": emu(runaway.format(n=4096), "--snapshot", "1", "--snapshot-start", "4095"),
        "grid 2^31-1": emu(TOUCH.format(grid="2**31 - 1"), "--snapshot", "64"),
        "grid 2^31-1 x 65535 x 65535": emu(TOUCH.format(grid="(2**31 - 1, 65535, 65535)"), "--snapshot", "64"),
        "grid 2^22, not recorded": emu(TOUCH.format(grid="2**22") + "\n" + TOUCH.format(grid=32), "--launch-index", "1"),
        "sys.exit(0) in setup": emu("sys.exit(0)"),
        "sys.exit(0) at top level": emu("pass", top="sys.exit(0)"),
        "sys.exit('msg')": emu("sys.exit('msg')"),
        "raise GeneratorExit": emu("raise GeneratorExit"),
        "__str__ raises": emu("raise Bad()", top=bad_str),
        "print, --format json": emu("print('hello')\n" + TOUCH.format(grid=32), "--format", "json"),
        "10 MB print": emu("print('x' * (10 << 20))\n" + TOUCH.format(grid=32)),
        "dev.empty((2**62, 2))": emu("dev.empty((2**62, 2), np.uint8)\n" + TOUCH.format(grid=1)),
        "dev.empty((2**33, 2**31))": emu("dev.empty((2**33, 2**31), np.uint8)\n" + TOUCH.format(grid=1)),
        "dev.empty(50 GiB)": emu("dev.empty(50 << 30, np.uint8)\n" + TOUCH.format(grid=1)),
        "brkpt": emu("out = dev.zeros(32, np.int32)\ndev.launch('breakpoint', 1, 32, (out,))"),
        "damaged Numba cache": lambda d: Spec(["vecadd", "--no-sweep"], numba_copy(d, "truncate")),
        "full disk under the Numba cache": lambda d: Spec(["vecadd", "--no-sweep"], numba_copy(d, "remove"),
                                                          prelude=FULL_DISK),
    }


def _numba_cache() -> dict[str, str]:
    """The compiled kernels' folder of this process (a case with its own XDG_CACHE_HOME must not
    compile every kernel again)."""
    from tuiprof.jit import kernel_cache_dir

    folder = kernel_cache_dir()
    return {"NUMBA_CACHE_DIR": str(folder)} if folder is not None else {}


def _folder_state(d: Path) -> dict[str, str]:
    return {str(p): hashlib.sha1(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def run(spec: Spec, tree: Path, cap: int, timeout: float, trials: int) -> tuple[str, float, float, str, bool]:
    """(exit status, peak RSS MiB, wall s, first stderr line, ESC on stdout) of one report."""
    cap = int(spec.cap_gib * (1 << 30)) if spec.cap_gib else cap

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    env = dict(spec.env)
    first_on_path = env.pop("PYTHONPATH_FIRST", None)
    path = os.pathsep.join(filter(None, [first_on_path, str(tree)]))
    start = ["-m", "tuiprof"] if spec.prelude is None else ["-c", spec.prelude + THEN_MAIN]
    feeder = subprocess.Popen(spec.stdin_cmd, stdout=subprocess.PIPE) if spec.stdin_cmd else None
    try:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            t0 = time.perf_counter()
            p = subprocess.Popen([sys.executable, *start, "report", *spec.args, "--trials", str(trials)],
                                 stdout=out, stderr=err, stdin=feeder.stdout if feeder else subprocess.DEVNULL,
                                 preexec_fn=limit, cwd=tree, env={**os.environ, "PYTHONPATH": path, **env})
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
    finally:
        if feeder is not None:
            feeder.kill()
            feeder.wait()


MEMORY_CASES: dict[str, list[str]] = {
    "vecadd": ["vecadd"], "spmv-u": ["spmv-u"], "stencil7": ["stencil7"], "transpose-tiled": ["transpose-tiled"],
    "cr": ["cr"], "bfs": ["bfs"], "matmul16": ["matmul16"], "matmul-tile32": ["matmul-tile32"],
    "spmv-u on h100": ["spmv-u", "--arch", "h100"],
    "vecadd, 1024 SMs x 4 MiB L1": ["vecadd", "--arch", "v100", "--set", "sm_count=1024", "--set", "l1.size=4MiB"],
    "vecadd, 768 MiB L2": ["vecadd", "--arch", "v100", "--set", "l2.size=768MiB"],
    "stencil7, 1024 SMs x 16 MiB L1": ["stencil7", "--set", "sm_count=1024", "--set", "l1.size=16MiB"],
}


def estimate(args: list[str]) -> float:
    """`run_bytes` (MiB) of `report ARGS` on this machine's cores, as the session computes it."""
    from tuiprof.arch.presets import load_arch, parse_overrides
    from tuiprof.sim.budget import cached_accesses, run_bytes
    from tuiprof.trace.demos import resolve_target
    from tuiprof.trace.io import load_trace

    t = load_trace(resolve_target(args[0]))
    opts = dict(zip(args[1::2], args[2::2]))
    sets = parse_overrides([v for k, v in zip(args[1::2], args[2::2]) if k == "--set"])
    arch = load_arch(opts.get("--arch", t.provenance.arch), sets)
    return run_bytes(arch, t.n_accesses, cached_accesses(t), os.cpu_count() or 1, t.launch.grid_ctas) / (1 << 20)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--cap-gib", type=float, default=8.0)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose tuiprof runs (default: this one)")
    ap.add_argument("--memory", action="store_true", help="the run memory estimate against measured peaks")
    args = ap.parse_args()
    cap = int(args.cap_gib * (1 << 30))
    if args.memory:
        for name in args.cases or MEMORY_CASES:
            spec = Spec([*MEMORY_CASES[name], "--no-sweep"])
            run(spec, args.tree.resolve(), cap, args.timeout, 4)                 # compiles the geometry's kernels
            code, rss, wall, first, _ = run(spec, args.tree.resolve(), cap, args.timeout, 4)
            est = estimate(MEMORY_CASES[name])
            print(f"{name:<32} exit {code:>3}  peak {rss:6.0f} MiB  estimate {est:6.0f} MiB  ({est / rss:.2f}x)  "
                  f"{first[:100]!r}", flush=True)
        return
    global TREE
    TREE = args.tree.resolve()
    cases = {**_cases(), **_emu_cases()}
    for name in args.cases or cases:
        with tempfile.TemporaryDirectory() as d:
            try:
                spec = cases[name](Path(d))
            except PermissionError:
                print(f"{name:<26} skipped (needs root)", flush=True)
                continue
            before = _folder_state(Path(d))
            code, rss, wall, first, esc = run(spec, args.tree.resolve(), cap, args.timeout, args.trials)
            changed = _folder_state(Path(d)) != before
        print(f"{name:<26} exit {code:>7}  peak {rss:7.0f} MiB  {wall:6.1f} s  {'ESC on stdout  ' if esc else ''}"
              f"{'FILES CHANGED  ' if changed else ''}{first[:150]!r}", flush=True)


if __name__ == "__main__":
    main()
