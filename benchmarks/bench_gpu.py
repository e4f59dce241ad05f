"""Instrumentation cost, against the uninstrumented kernel measured in the same run.

    python benchmarks/bench_gpu.py [--static-only | --gpu-only] [--emu] [--repeat 5] [--out FILE]

With --emu (any machine): the probes' dynamic PTX instructions per CTA in the emulator, plain and
in the counting and recording passes (`emulated`).

Static (any machine with ptxas): for every demo kernel (tests/ptx/nvcc/demo_*.ptx), the time of
the instrumentation pass, and the SASS size and registers of the instrumented kernel over the
plain one (``ptxas -v -arch=sm_80``), with the occupancy those registers allow on an H100 at 256
threads per CTA (plain, instrumented, instrumented with the GPU path's register caps): the probes'
registers are what every CTA pays, recorded or not.

On a GPU (each demo launch script in demo_traces/): the launch of the script's KERNEL timed (device
events) plain, in the counting pass and in the recording pass, and their ratios to plain: the
instrumentation slowdown the issue asks to keep at most 3x on memory-bound kernels (bar: 5x).
Set CUDA_MODULE_LOADING=EAGER so that no module loading falls between a launch's events. With
--out, the JSON is rewritten after every launch script, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import runpy
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGETS = {"record_slowdown_memory_bound": 3.0, "record_slowdown_bar": 5.0}


def _text_size(cubin: Path) -> int:
    out = subprocess.run(["readelf", "-S", "-W", str(cubin)], capture_output=True, text=True).stdout
    return sum(int(ln.split()[5], 16) for ln in out.splitlines() if ".text." in ln)


def _ptxas(ptx: str, tmp: Path, name: str) -> tuple[int, dict[str, tuple[int, int, int]]]:
    """SASS bytes, and kernel -> (registers, static shared, local bytes) (``ptxas -v``, sm_80)."""
    from tuiprof.toolchain.compilers import parse_ptxas_report

    src = tmp / f"{name}.ptx"
    src.write_text(ptx)
    out = subprocess.run(["ptxas", "-v", "-arch=sm_80", str(src), "-o", str(tmp / f"{name}.cubin")],
                         capture_output=True, text=True, check=True)
    return _text_size(tmp / f"{name}.cubin"), parse_ptxas_report(out.stdout + out.stderr)


def static(repeat: int) -> dict[str, object]:
    """Per demo: the instrumentation pass's time; with ptxas, per kernel the registers and the
    H100 occupancy plain, instrumented without caps and with the register caps the GPU path
    applies (`instrument_capped`, ptxas standing in for the driver's JIT), and the SASS sizes."""
    import functools

    from tuiprof.arch import load_arch
    from tuiprof.arch.occupancy import next_register_cap, register_cap
    from tuiprof.ptx import parse_module
    from tuiprof.ptx.instrument import instrument, instrument_capped

    a100, h100 = load_arch("a100"), load_arch("h100")
    rows = {}
    with tempfile.TemporaryDirectory() as tmpd:
        tmp = Path(tmpd)
        for f in sorted((ROOT / "tests" / "ptx" / "nvcc").glob("demo_*.ptx")):
            ptx = f.read_text()
            module = parse_module(ptx)
            t = min(_timed(lambda: instrument(ptx, module)) for _ in range(repeat))
            result = instrument(ptx, module)
            row: dict[str, object] = {"sites": len(result.sites), "instrument_ms": round(1e3 * t, 2)}
            if shutil.which("ptxas"):
                plain_size, plain = _ptxas(ptx, tmp, "plain")
                inst_size, inst = _ptxas(result.ptx, tmp, "inst")
                capped = instrument_capped(ptx, module, plain=plain, cap=functools.partial(register_cap, a100),
                                           next_cap=functools.partial(next_register_cap, a100),
                                           compiler=lambda text: _ptxas(text, tmp, "try")[1])
                capped_size, cap = _ptxas(capped.ptx, tmp, "capped")
                row.update(sass_bytes=plain_size, sass_bytes_instrumented=inst_size,
                           sass_bytes_capped=capped_size, sass_ratio=round(inst_size / plain_size, 1),
                           registers={k: [plain[k][0], inst[k][0], cap[k][0]] for k in plain},
                           h100_occupancy_256={k: [_occupancy(h100, plain[k][0]), _occupancy(h100, inst[k][0]),
                                                   _occupancy(h100, cap[k][0])] for k in plain},
                           spilled=[k for k in plain if max(inst[k][2], cap[k][2]) > plain[k][2]])
            rows[f.name.split(".")[0][len("demo_"):]] = row
    return rows


def _occupancy(arch: object, registers: int) -> float:
    """Occupancy of 256-thread CTAs with `registers` per thread (no shared memory): what the
    probes' registers cost in resident warps."""
    from tuiprof.arch.occupancy import occupancy

    return round(occupancy(arch, 256, registers).fraction(arch), 2)  # type: ignore[arg-type]


def _timed(fn) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def on_gpu(repeat: int, progress: object = None) -> dict[str, object]:
    """Per launch script, the chosen launch (the script's KERNEL, first launch) timed plain, counting
    and recording, each `repeat` times, best of each; the probes instrumented once per script
    (`instrument_for`, as the GPU path does) and no trace built, so that only kernels are timed."""
    from tuiprof.arch import load_arch
    from tuiprof.arch.calibrate import base_preset
    from tuiprof.collect.gpu.device import GpuDevice, LaunchChoice, instrument_for
    from tuiprof.collect.gpu.driver import _open_driver, gpu_problem
    from tuiprof.ptx import parse_module
    from tuiprof.toolchain import build_program
    from tuiprof.trace.snapshot import choose_snapshot

    problem = gpu_problem()
    if problem is not None:
        return {"skipped": f"no GPU: {problem}"}
    drv = _open_driver("cuda-bindings")
    arch = load_arch(base_preset(drv.info.compute_capability))
    rows: dict[str, object] = {"device": drv.info.name}
    try:
        for script in sorted((ROOT / "demo_traces").glob("*_launch*.py")):
            ns = runpy.run_path(str(script), run_name="__bench__")
            source = script.with_name(script.name.split("_launch", 1)[0] + ".cu")
            program = build_program(source, compute_capability=drv.info.compute_capability)
            module = parse_module(program.ptx)
            symbol = program.kernel(ns["KERNEL"]).name if "KERNEL" in ns else None
            choice = LaunchChoice(symbol, 0)
            inst = instrument_for(program, module, drv)
            plain, counts, records = [], [], []
            for _ in range(repeat):
                with GpuDevice(program, module, mode="plain", driver=drv) as dev:
                    ns["setup"](dev)
                    plain.append(next(ms for name, ms in dev.times_ms if symbol in (None, name)))
                with GpuDevice(program, module, mode="count", choice=choice, instrumented=inst, driver=drv,
                               snapshot_rule=lambda launch: choose_snapshot(launch, arch)) as dev:
                    ns["setup"](dev)
                    counted = dev.recorded
                assert counted is not None
                with GpuDevice(program, module, mode="record", choice=choice, instrumented=inst, counts=counted,
                               driver=drv) as dev:
                    ns["setup"](dev)
                    assert dev.recorded is not None
                    counts.append(counted.elapsed_ms)
                    records.append(dev.recorded.elapsed_ms)
            base = min(plain)
            rows[script.stem] = {"kernel": counted.kernel, "plain_ms": round(base, 4),
                                 "count_ms": round(min(counts), 4), "record_ms": round(min(records), 4),
                                 "count_x": round(min(counts) / base, 2), "record_x": round(min(records) / base, 2),
                                 "snapshot_ctas": counted.snapshot.n_ctas,
                                 "grid_ctas": counted.grid[0] * counted.grid[1] * counted.grid[2]}
            if callable(progress):
                progress(rows)
    finally:
        drv.close()
    return rows


def emulated() -> dict[str, object]:
    """Dynamic PTX warp instructions per CTA in the emulator (tests/support/emu_driver.py), plain and in
    the counting and recording passes, for the small launches of tests/gpu/test_instrument_emu.py:
    the probes' instruction overhead on the CTAs outside the snapshot (a test and a branch per
    access, the per-CTA clock records) and inside it (the counting, the recording). A proxy for
    the slowdown where no GPU is at hand, and a rough one: it counts PTX instructions, not SASS
    (ptxas shares some and runs others predicated off), and no memory time, which dominates the
    memory-bound kernels the slowdown goal is about."""
    import numpy as np

    from tests.support.demo_launches import DEMOS, _program
    from tests.support.emu_driver import EmuDriver, _where
    from tests.support.ptx_support import DEMO_DIR
    from tuiprof.collect.emu.run import DEFAULT_STEP_LIMIT, execute
    from tuiprof.collect.gpu.device import GpuDevice, LaunchChoice, instrument_for
    from tuiprof.ptx import parse_module
    from tuiprof.trace.data import Snapshot

    class Counting(EmuDriver):
        def __init__(self) -> None:
            super().__init__()
            self.insts: list[tuple[str, np.ndarray]] = []

        def launch(self, fn, grid, block, shared, params):  # type: ignore[no-untyped-def]
            module, name = fn
            res = execute(module.program(name), self.heap, grid, block, params.buffer(), shared,
                          np.zeros(0, np.int64), n_sms=self.n_sms, threads=self.threads,
                          step_limit=DEFAULT_STEP_LIMIT, source_name=_where)
            self.insts.append((name, res.insts))
            return 0.0

    def chosen(drv: Counting, symbol: str, kernel: str | None, index: int) -> np.ndarray:
        launches = [i for n, i in drv.insts if kernel is None or n == symbol]
        return launches[index].astype(np.float64)

    rows: dict[str, object] = {}
    programs: dict[Path, object] = {}
    for source, setup, kernel, index, n_ctas in DEMOS:
        program = _program(programs, DEMO_DIR / source)
        module = parse_module(program.ptx)
        symbol = program.kernel(kernel).name if kernel else program.kernels[0].name
        choice = LaunchChoice(program.kernel(kernel).name if kernel else None, index)
        runs = {}
        inst = instrument_for(program, module, Counting())  # both passes run the same probes
        rule = lambda launch: Snapshot(np.arange(min(n_ctas, launch.grid_ctas), dtype=np.int64), "bench")  # noqa: E731
        for mode in ("plain", "count", "record"):
            drv = Counting()
            with GpuDevice(program, module, mode=mode, choice=choice, snapshot_rule=rule,
                           instrumented=inst if mode != "plain" else None, counts=runs.get("counted"),
                           driver=drv) as dev:
                setup(dev)
                if mode == "count":
                    runs["counted"] = dev.recorded
            runs[mode] = chosen(drv, symbol, kernel, index)
        plain, snap = runs["plain"], min(n_ctas, runs["plain"].shape[0])
        name = f"{source[:-3]}:{kernel or symbol}"
        rows[name] = {
            "grid_ctas": int(plain.shape[0]), "snapshot_ctas": snap,
            "plain_insts_per_cta": round(float(plain.mean()), 1),
            "count_x_snapshot": round(runs["count"][:snap].sum() / plain[:snap].sum(), 2),
            "record_x_snapshot": round(runs["record"][:snap].sum() / plain[:snap].sum(), 2),
            "record_x_others": round(runs["record"][snap:].sum() / plain[snap:].sum(), 3) if snap < plain.shape[0]
            else None}
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--static-only", action="store_true")
    ap.add_argument("--gpu-only", action="store_true", help="skip the static part (ptxas, any machine)")
    ap.add_argument("--emu", action="store_true", help="also count the probes' dynamic PTX instructions in the "
                    "emulator (no GPU needed; about a minute)")
    ap.add_argument("--out", type=Path, help="also write the JSON here, after every launch script")
    a = ap.parse_args()
    out: dict[str, object] = {"targets": TARGETS, **({} if a.gpu_only else {"static": static(a.repeat)})}

    def save(rows: object = None) -> None:
        if rows is not None:
            out["gpu"] = rows
        if a.out:
            a.out.write_text(json.dumps(out, indent=1))

    if a.emu:
        out["emulated"] = emulated()
    save()
    if not a.static_only:
        save(on_gpu(a.repeat, save))
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
