"""Hostile inputs and faults (issues 9 and 21): for each case, the exit status, peak memory (the
child's maximum RSS, its compilers included), wall time, whether any file in the case's folder
changed, and the first line of stderr (issue 9: of `tuiprof report ...`; issue 21: of record,
build, init, report on sources, the UI in a pseudo-terminal, signals during a compile). Prints
one row per case; run on demand (the bombs need a few seconds to build):

    python benchmarks/bench_hostile.py [--cap-gib G] [--timeout S] [--trials N] [--tree DIR] [CASE ...]
    python benchmarks/bench_hostile.py --issue 21 [--tree DIR] [CASE ...]
    python benchmarks/bench_hostile.py --memory [CASE ...]

Each case runs under an address-space cap (default 8 GiB, so a regression cannot take the
machine) and a timeout; the builders are the test suite's (tests/hostile/). With ``--tree``
another checkout's tuiprof runs the same files (for before/after figures). Issue 21's cases run
in their own folder with a fresh build cache (a cached compile would hide what a compile does)
and the tree's own compiled kernels, warmed once before the first case; device nodes are made
in that folder (as root), never /dev's. The note column says what a case leaves behind:
compilers still running, temporaries, a trace its own tree cannot load.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import hostile as H  # noqa: E402


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
        for k in ("op", "mask", "addr_base", "addr_step", "addr_whole"):
            if k in h["arrays"]:
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
    from tests.support.hostile_kernels import FULL_DISK, KERNELS, SPIN, TOUCH, script_text

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
    from tuiprof.demos import resolve_target
    from tuiprof.sim.budget import cached_accesses, run_bytes
    from tuiprof.trace.io import load_trace

    t = load_trace(resolve_target(args[0]))
    opts = dict(zip(args[1::2], args[2::2]))
    sets = parse_overrides([v for k, v in zip(args[1::2], args[2::2]) if k == "--set"])
    arch = load_arch(opts.get("--arch", t.provenance.arch), sets)
    return run_bytes(arch, t.n_accesses, cached_accesses(t), os.cpu_count() or 1, t.launch.grid_ctas) / (1 << 20)


# --------------------------------------------------------------------------- issue 21


@dataclass(frozen=True)
class Run21:
    """One issue-21 case: the command line after `tuiprof` (run in the case's folder), extra
    environment, a command the run is wrapped in (a read-only mount), the bytes of standard output
    read before it is closed (`record -o - | head -c N`), a signal sent once one of `kill_when`
    runs below it, keys typed into a pseudo-terminal (wait for the text, then send the key), and
    a check of what the case left (a note for the table)."""

    argv: list
    env: dict = field(default_factory=dict)
    wrap: list | None = None
    read_stdout: int | None = None
    kill: int | None = None
    kill_when: tuple = ("cc1plus", "cicc", "cudafe++")
    keys: tuple = ()
    """(text or texts to wait for, key) pairs, in order."""
    check: Callable[[Path, Path], str] | None = None
    timeout: float | None = None
    prelude: str | None = None
    before: Callable[[Path, Path], None] | None = None
    """Run first with the case's folder and the tree (what a killed earlier run left)."""


def _tree_env(tree: Path, d: Path) -> dict[str, str]:
    """PYTHONPATH for `tree`, a fresh build cache in the case folder, the tree's warm kernels."""
    return {"PYTHONPATH": str(tree), "XDG_CACHE_HOME": str(d / ".cache"), "NUMBA_CACHE_DIR": _kernel_dir(tree)}


_KERNEL_DIRS: dict[Path, str] = {}


def _kernel_dir(tree: Path) -> str:
    """The compiled kernels' folder `tree` uses by default (its sources' digest), asked once."""
    if tree not in _KERNEL_DIRS:
        out = subprocess.run([sys.executable, "-c", "from tuiprof.jit import kernel_cache_dir; print(kernel_cache_dir())"],
                             capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree)
        _KERNEL_DIRS[tree] = out.stdout.strip().splitlines()[-1]
    return _KERNEL_DIRS[tree]


KERNEL = "__global__ void add(float *a, int n)\n{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) a[i] += 1.0f;\n}\n"
PROGRAM = KERNEL + ("int main()\n{\n    float *d;\n    cudaMalloc(&d, 1024);\n    add<<<1, 256>>>(d, 256);\n"
                    "    return cudaDeviceSynchronize() != cudaSuccess;\n}\n")


def _kernel_file(d: Path, name: str = "k", grid: str = "(8, 1, 1)", source: str = KERNEL, kernel: str = "_Z3addPfi") -> Path:
    (d / f"{name}_launch.py").write_text(
        "import numpy as np\n\n\ndef setup(dev):\n    a = dev.to_device(np.zeros(256, np.float32))\n"
        f"    dev.launch({kernel!r}, {grid}, (32, 1, 1), [a, np.int32(256)])\n")
    path = d / f"{name}.cu"
    path.write_text(source)
    return path


def _node(path: Path, kind: str) -> Path:
    if kind == "fifo":
        os.mkfifo(path)
    else:
        os.mknod(path, 0o666 | 0o020000, os.makedev(*{"zero": (1, 5), "null": (1, 3)}[kind]))  # here, never /dev
    return path


def _loads(name: str) -> Callable[[Path, Path], str]:
    """A check: whether the trace the case wrote loads with its own tree's loader."""
    def check(d: Path, tree: Path) -> str:
        path = d / name
        if not path.exists():
            return "no trace written"
        r = subprocess.run([sys.executable, "-c", "import sys; from tuiprof.trace.io import load_trace; "
                            "load_trace(sys.argv[1])", str(path)], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(tree)}, cwd=d)
        return "its trace loads" if r.returncode == 0 else "ITS TRACE IS REFUSED: " + r.stderr.strip().splitlines()[-1][:90]
    return check


def _temps_left(d: Path, tree: Path) -> str:
    left = [p.name for p in (d / "tmp").iterdir()] if (d / "tmp").is_dir() else []
    left += [p.name for p in d.iterdir() if p.name.startswith(".tuiprof-build-") or p.name.endswith(".tuiprof")]
    return f"LEFT: {', '.join(sorted(left))[:80]}" if left else "no temporaries left"


def _issue21_cases() -> dict[str, Callable[[Path], Run21]]:
    """Issue 21's cases (the tests in tests/hostile/test_trace_write.py, test_compile_faults.py,
    test_output_rules.py and test_measured.py), each making its files in a fresh folder `d`."""
    R = ["--trials", "2", "--no-sweep"]

    def stream(d: Path) -> Run21:
        import numpy as np

        from tests.support.factories import make_trace
        from tuiprof.trace.io import save_trace  # this checkout's writer: the same format

        n = 1 << 17
        addr = 0x7F0000000000 + np.arange(n, dtype=np.uint64)[:, None] * 128 + np.arange(32, dtype=np.uint64) * 4
        t = make_trace(addr, ops=[i % 3 for i in range(n)], warps=(np.arange(n) // 24).tolist(),
                       kinds=("load", "load", "store"), block=256)
        return Run21(["report", str(save_trace(t, d / "s.tptrace")), *R])

    def build_onto(kind: str) -> Callable[[Path], Run21]:
        def case(d: Path) -> Run21:
            (d / "app.cu").write_text(PROGRAM)
            out = {"source": "app.cu", "read-only": "ro", "null device": "null", "directory": "dir"}[kind]
            if kind == "read-only":
                (d / "ro").write_text("keep me")
                (d / "ro").chmod(0o444)
            elif kind == "null device":
                _node(d / "null", "null")
            elif kind == "directory":
                (d / "dir").mkdir()
            return Run21(["build", "app.cu", "-o", out])
        return case

    def build_meta(kind: str) -> Callable[[Path], Run21]:
        def case(d: Path) -> Run21:
            (d / "app.cu").write_text(PROGRAM)
            meta = d / "app.tuiprof"
            if kind == "file":
                meta.write_text("notes")
            elif kind == "symlink":
                meta.symlink_to(d / "nowhere")
            else:
                meta.mkdir()
                (meta / "thesis.tex").write_text("years of work")
            return Run21(["build", "app.cu", "-o", "app"],
                         check=lambda d, tree: "the user's folder is intact" if kind != "folder" or
                         (d / "app.tuiprof" / "thesis.tex").exists() else "THE USER'S FOLDER WAS REMOVED")
        return case

    def read_only(d: Path, argv: list) -> Run21:
        ro = d / "ro"
        ro.mkdir()
        script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"'
        return Run21(argv, wrap=["unshare", "-m", "sh", "-c", script, str(ro)])

    def build_ro(d: Path) -> Run21:
        (d / "app.cu").write_text(PROGRAM)
        return read_only(d, ["build", "app.cu", "-o", "ro/app"])

    def measured(value: float, key: str = "op0.x") -> Callable[[Path], Run21]:
        def case(d: Path) -> Run21:
            t = H.TraceFile()
            t.header["provenance"]["measured"] = {k: value for k in ("op0.x", "op1.x", "op2.x")} if key == "op0.x" \
                else {key: value}
            path = t.save(d / "m.tptrace")
            if key == "op0.x":  # the UI: the histogram pane (key 2) draws the measured latency
                return Run21([str(path), "--trials", "4", "--no-sweep"],
                             keys=((("Histogram", "cannot open"), "2"), ("", "q")))
            return Run21(["report", str(path), *R])
        return case

    def source_node(kind: str, command: str) -> Callable[[Path], Run21]:
        def case(d: Path) -> Run21:
            src = _node(d / "k.cu", kind)
            argv = {"init": ["init", str(src)], "report": ["report", str(src), *R]}[command]
            return Run21(argv, timeout=60)
        return case

    def include(kind: str, compiler: str = "nvcc", macro: bool = False) -> Callable[[Path], Run21]:
        def case(d: Path) -> Run21:
            _node(d / "beside.h", kind)
            head = '#define HEADER "beside.h"\n#include HEADER\n' if macro else '#include "beside.h"\n'
            src = _kernel_file(d, source=head + KERNEL)
            return Run21(["report", str(src), "--backend", "emu", "--compiler", compiler, *R], timeout=330)
        return case

    def record(grid: str = "(8, 1, 1)", source: str = KERNEL, kernel: str = "_Z3addPfi") -> Callable[[Path], Run21]:
        def case(d: Path) -> Run21:
            src = _kernel_file(d, grid=grid, source=source, kernel=kernel)
            return Run21(["record", str(src), "-o", str(d / "t.tptrace"), "--backend", "emu"], check=_loads("t.tptrace"))
        return case

    long_name = "k" + "x" * 5012
    long_label = "__global__ void add(float *a, int n) { int i = threadIdx.x; a[((" + "+".join(["i"] * 3000) + ") & 0)] += 1; }\n"

    def tmpdir(d: Path) -> Run21:
        src = _kernel_file(d)
        return Run21(["report", str(src), "--backend", "emu", "--compiler", "nvcc", "--arch", "v100", *R],
                     env={"TMPDIR": str(d / "no-such-folder")})

    def signal_during(sig: int, command: str) -> Callable[[Path], Run21]:
        def case(d: Path) -> Run21:
            os.mkfifo(d / "pipe.h")
            (d / "tmp").mkdir()
            body = '#define HEADER "pipe.h"\n#include HEADER\n'
            if command == "build":
                (d / "app.cu").write_text(body + PROGRAM)
                argv = ["build", "app.cu", "-o", "app"]
            else:
                argv = ["report", str(_kernel_file(d, source=body + KERNEL)), "--backend", "emu", "--compiler", "nvcc", *R]
            return Run21(argv, env={"TMPDIR": str(d / "tmp")}, kill=sig, check=_temps_left)
        return case

    def big_source(d: Path) -> Run21:
        src = _kernel_file(d)
        src.write_text(KERNEL + "//" + "x" * (6 << 20) + "\n")
        return Run21(["record", str(src), "-o", str(d / "t.tptrace"), "--backend", "emu"], check=_loads("t.tptrace"))

    def record_ro(d: Path) -> Run21:
        return read_only(d, ["record", str(_kernel_file(d)), "-o", str(d / "ro" / "t.tptrace"), "--backend", "emu"])

    def fifo_out(d: Path) -> Run21:
        return Run21(["report", "vecadd", *R, "-o", str(_node(d / "out", "fifo"))])

    def head_c(d: Path) -> Run21:
        src = _kernel_file(d, grid="(8192, 1, 1)", source=(
            "__global__ void add(float *a, int n)\n{\n    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    a[(i * 2654435761u) & 65535u] += 1.0f;\n    a[(i * 40503u + 7u) & 65535u] += (float)n;\n}\n"))
        (d / "k_launch.py").write_text((d / "k_launch.py").read_text().replace("np.zeros(256,", "np.zeros(65536,"))
        return Run21(["record", str(src), "-o", "-", "--backend", "emu"], read_stdout=100)

    def escapes(d: Path) -> Run21:
        return Run21(["record", str(_kernel_file(d)), "-o", str(d / "t\x1b[2J.tptrace"), "--backend", "emu"],
                     check=lambda d, tree: "")

    def killed_writer(d: Path, tree: Path) -> None:
        """A report killed (SIGKILL) in its write window, its temp file then made an hour old."""
        slow = ("import time, tuiprof.output as _o\n_r = _o._replace_atomically\n"
                "def _slowly(real, name, folder, mode, write):\n"
                "    def w(fh):\n        fh.write(b'half'); fh.flush(); print('writing', flush=True); time.sleep(60)\n"
                "    _r(real, name, folder, mode, w)\n_o._replace_atomically = _slowly\n")
        k = subprocess.Popen([sys.executable, "-c", slow + THEN_MAIN, "report", "vecadd", *R, "-o", str(d / "r.txt")],
                             cwd=d, stdout=subprocess.PIPE, env={**os.environ, **_tree_env(tree, d)})
        assert k.stdout is not None and k.stdout.readline() == b"writing\n"
        k.kill()
        k.wait()
        for q in d.glob(".tuiprof-*.tmp"):
            os.utime(q, (time.time() - 3600,) * 2)

    def stale_tmp(d: Path) -> Run21:
        return Run21(["report", "vecadd", *R, "-o", str(d / "r.txt")], before=killed_writer,
                     check=lambda d, tree: "LEFT: " + ", ".join(sorted(p.name for p in d.glob(".tuiprof-*.tmp")))
                     if list(d.glob(".tuiprof-*.tmp")) else "no stale temp file left")

    def declared(d: Path) -> Run21:
        import numpy as np

        t = H.TraceFile()
        n = 1 << 24
        t.header["launch"]["grid"] = [n, 1, 1]
        for k in [k for k in t.arrays if k.startswith("cta_")]:
            del t.arrays[k], t.header["arrays"][k]
        t.header["counts"].update(accesses=0, warps=0, snapshot_ctas=n)
        t.set_array("snapshot_cta_ids", np.arange(n, dtype=np.int32))
        for k in ("warp_lengths", "warp_cta", "warp_index", "op", "mask", "addr_base", "addr_step", "addr_whole",
                  "addr_lanes"):
            if k in t.arrays:
                t.set_array(k, t.arrays[k][:0])
        return Run21(["report", str(t.save(d / "t.tptrace")), "--trials", "2"])

    def many_ops(d: Path) -> Run21:
        return Run21(["report", str(H.many_ops(H.TraceFile(), 65536).save(d / "t.tptrace"))])

    return {
        "1 record wrote, report refused (stream)": stream,
        "2 build -o its own source": build_onto("source"),
        "2 build -o a read-only file": build_onto("read-only"),
        "2 build -o a null device node": build_onto("null device"),
        "3 UI, measured op0.x = 1.797e308": measured(1.797e308),
        "3 UI, measured op0.x = 1e7 (max)": measured(1e7),
        "4 init zero device node": source_node("zero", "init"),
        "4 init FIFO": source_node("fifo", "init"),
        "4 report FIFO source": source_node("fifo", "report"),
        "6 include of a zero device": include("zero"),
        "6 include of a FIFO": include("fifo"),
        "6 macro include of a zero device": include("zero", macro=True),
        "6 NVRTC include of a FIFO": include("fifo", "nvrtc"),
        "9 record grid 2^24+1": record(grid=f"({(1 << 24) + 1}, 1, 1)"),
        "9 record 5,013-char kernel name": record(source=f'extern "C" __global__ void {long_name}(float *a, int n) '
                                                         '{ a[threadIdx.x] = n; }\n', kernel=long_name),
        "9 record 6,004-char label": record(source=long_label, kernel="_Z3addPfi"),
        "9 record 6 MB source": big_source,
        "13 TMPDIR missing, --arch v100": tmpdir,
        "14 SIGTERM during a compile": signal_during(signal.SIGTERM, "report"),
        "14 SIGHUP during a compile": signal_during(signal.SIGHUP, "report"),
        "14 SIGKILL during a compile": signal_during(signal.SIGKILL, "report"),
        "14 SIGTERM during build": signal_during(signal.SIGTERM, "build"),
        "14 SIGKILL during build": signal_during(signal.SIGKILL, "build"),
        "15 build: app.tuiprof a file": build_meta("file"),
        "15 build: app.tuiprof a dangling symlink": build_meta("symlink"),
        "15 build: app.tuiprof the user's folder": build_meta("folder"),
        "15 build -o a directory": build_onto("directory"),
        "15 build -o in a read-only folder": build_ro,
        "16 2^24 declared CTAs, no accesses": declared,
        "m record success line, ESC in -o": escapes,
        "m record -o into a read-only folder": record_ro,
        "m report -o FIFO with no reader": fifo_out,
        "m record -o - | head -c 100": head_c,
        "m measured l1_read = -5 (-500.0%)": measured(-5.0, "l1_read"),
        "m stale .tuiprof-*.tmp of a dead writer": stale_tmp,
        "m 65,536 ops (the cap)": many_ops,
    }


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def run21(spec: Run21, tree: Path, d: Path, cap: int, timeout: float) -> tuple[str, float, float, str, str]:
    """(exit status, peak RSS MiB, wall s, the error line, note) of one issue-21 case."""
    import pty
    import select

    timeout = spec.timeout or timeout
    env = {**os.environ, **_tree_env(tree, d), **spec.env}
    if spec.before is not None:
        spec.before(d, tree)
    start = ["-m", "tuiprof"] if spec.prelude is None else ["-c", spec.prelude + THEN_MAIN]
    argv = [*(spec.wrap or []), sys.executable, *start, *spec.argv]
    notes: list[str] = []
    below: set[int] = set()
    out_text = b""
    t0 = time.perf_counter()
    if spec.keys:  # the UI, in a pseudo-terminal of 120 x 40
        pid, fd = pty.fork()
        if pid == 0:
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
            os.chdir(d)
            os.environ.update(env)
            os.environ.update({"TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"})
            os.execv(sys.executable, argv)
        keys = list(spec.keys)
        status, usage = 0, None
        while True:
            r, _, _ = select.select([fd], [], [], 0.1)
            if r:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    chunk = b""
                out_text += chunk
            wait_for = keys[0][0] if keys and isinstance(keys[0][0], tuple) else (keys[0][0],) if keys else ()
            if keys and any(w.encode() in out_text[-200_000:] for w in wait_for):
                time.sleep(3 if keys[0][1] == "q" else 1)
                os.write(fd, keys.pop(0)[1].encode())
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                break
            if time.perf_counter() - t0 > timeout:
                os.kill(pid, signal.SIGKILL)
                _, status, usage = os.wait4(pid, 0)
                return "timeout", usage.ru_maxrss / 1024, time.perf_counter() - t0, "", "the UI never ended"
        os.close(fd)
        text = out_text.decode(errors="replace")
        code = str(os.waitstatus_to_exitcode(status))
        first = next((ln.strip() for ln in text.splitlines() if "error:" in ln or "Error" in ln), "")
        notes.append("TRACEBACK" if "Traceback" in text else "no traceback")
        return code, usage.ru_maxrss / 1024, time.perf_counter() - t0, first[-150:], "; ".join(notes)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, preexec_fn=limit,
                             cwd=d, env=env)
        assert p.stdout is not None
        os.set_blocking(p.stdout.fileno(), False)  # read as it comes, never blocking
        killed = False
        while True:
            try:
                want = 1 << 20 if spec.read_stdout is None else spec.read_stdout - len(out_text)
                chunk = None if p.stdout.closed or want <= 0 else os.read(p.stdout.fileno(), want)
            except OSError:  # nothing to read yet
                chunk = None
            if chunk:
                out_text += chunk
            if spec.read_stdout is not None and len(out_text) >= spec.read_stdout and not p.stdout.closed:
                out_text = out_text[:spec.read_stdout]
                p.stdout.close()
            if spec.kill is not None and not killed:
                below |= _descendants(p.pid)
                if {_comm(c) for c in below if _alive(c)} & set(spec.kill_when):
                    time.sleep(0.5)
                    below |= _descendants(p.pid)
                    p.send_signal(spec.kill)
                    killed = True
            done, status, usage = os.wait4(p.pid, os.WNOHANG)
            if done:
                break
            if time.perf_counter() - t0 > timeout:
                p.send_signal(signal.SIGKILL)
                _, status, usage = os.wait4(p.pid, 0)
                for c in below | _descendants(p.pid):
                    if _alive(c):
                        os.kill(c, signal.SIGKILL)
                return "timeout", usage.ru_maxrss / 1024, time.perf_counter() - t0, "", ""
            time.sleep(0.02)
        wall = time.perf_counter() - t0
        err.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
    code = str(os.waitstatus_to_exitcode(status))
    if spec.kill is not None:
        time.sleep(3)  # what a guard or the kernel still has to end
        orphans = sorted({_comm(c) for c in below if _alive(c)})
        notes.append(f"ORPHANS: {', '.join(orphans)}" if orphans else "no compiler left")
        for c in below:
            if _alive(c):
                os.kill(c, signal.SIGKILL)
    if spec.read_stdout is not None:
        notes.append(f"read {len(out_text)} B")
    if b"\x1b" in out_text or any("\x1b" in ln for ln in lines):
        notes.append("ESC ON THE TERMINAL")
    if spec.check is not None:
        note = spec.check(d, tree)
        if note:
            notes.append(note)
    first = next((ln for ln in lines if ln.startswith("error:")), lines[-1] if lines else "")
    if "Traceback" in "\n".join(lines):
        notes.append("TRACEBACK")
    return code, usage.ru_maxrss / 1024, wall, first, "; ".join(notes)


def _warm(tree: Path, cap: int) -> None:
    """Compile `tree`'s kernels once (a report and a record in the emulator), uncapped, untimed."""
    with tempfile.TemporaryDirectory() as d:
        src = _kernel_file(Path(d))
        env = {**os.environ, "PYTHONPATH": str(tree), "NUMBA_CACHE_DIR": _kernel_dir(tree)}
        for argv in (["report", "vecadd", "--trials", "2"], ["record", str(src), "-o", f"{d}/w.tptrace", "--backend", "emu"]):
            subprocess.run([sys.executable, "-m", "tuiprof", *argv], cwd=d, env=env, capture_output=True, timeout=1800)


def main21(names: list[str], tree: Path, cap: int, timeout: float) -> None:
    """Issue 21's table against `tree`."""
    cases = _issue21_cases()
    _warm(tree, cap)
    print(f"{'case':<42} {'exit':>7} {'peak MiB':>9} {'time s':>7}  error line / note", flush=True)
    for name in names or cases:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            try:
                spec = cases[name](d)
            except PermissionError:
                print(f"{name:<42} skipped (needs root)", flush=True)
                continue
            before = _folder_state(d) if spec.before is None else {}
            code, rss, wall, first, note = run21(spec, tree, d, cap, timeout)
            after = {k: v for k, v in _folder_state(d).items() if "/.cache/" not in k}
            changed = {k: v for k, v in before.items() if "/.cache/" not in k} != after
            try:  # a read-only file or folder made by the case must not stop its removal
                for q in d.rglob("*"):
                    if not q.is_symlink():
                        q.chmod(0o755)
            except OSError:
                pass
        print(f"{name:<42} {code:>7} {rss:9.0f} {wall:7.1f}  {'FILES CHANGED  ' if changed else ''}"
              f"{first[:110]!r}{'  [' + note + ']' if note else ''}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--cap-gib", type=float, default=8.0)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose tuiprof runs (default: this one)")
    ap.add_argument("--memory", action="store_true", help="the run memory estimate against measured peaks")
    ap.add_argument("--issue", type=int, default=9, choices=(9, 21), help="whose cases: issue 9's (report on hostile "
                    "traces, the default) or issue 21's (record, build, init, sources, compilers, signals, the UI)")
    args = ap.parse_args()
    cap = int(args.cap_gib * (1 << 30))
    if args.issue == 21:
        main21(args.cases, args.tree.resolve(), cap, args.timeout)
        return
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
