"""The GPU collector's run: a launch script run on a real GPU with instrumented PTX (Baghsorkhi12
sec. 4.2), counting then recording the chosen launch on a `GpuDevice`, its buffers decoded
(`tuiprof.collect.gpu.records`) into a Trace (`collect_gpu`); `record_kernel_file` compiles a kernel
file for the GPU at hand first.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuiprof import __version__
from tuiprof.collect.gpu import driver as gpu_driver
from tuiprof.collect.gpu.device import GpuDevice, LaunchChoice, SnapshotRule, instrument_for
from tuiprof.collect.gpu.driver import DeviceInfo, Driver, device_generator
from tuiprof.collect.gpu.occupancy import probe_occupancy
from tuiprof.collect.gpu.records import build_trace
from tuiprof.errors import TuiprofError
from tuiprof.ptx.module import Module
from tuiprof.toolchain.program import Program
from tuiprof.trace.data import Launch, Provenance, Snapshot, StaticOp, Trace


@dataclass(frozen=True)
class GpuRun:
    """A trace recorded on the GPU, with the two passes' kernel times."""

    trace: Trace
    count_ms: float
    record_ms: float
    info: DeviceInfo
    timings: tuple[tuple[str, float], ...] = field(default_factory=tuple)




def collect_gpu(program: Program, run_script: Callable[[object], None], *, arch_name: str,
                snapshot_rule: SnapshotRule, ctas_per_sm: Callable[[Launch], int],
                choice: LaunchChoice = LaunchChoice(), module: Module | None = None,
                ops: tuple[tuple[str, int, StaticOp], ...] | None = None, cuda: str = "cuda-bindings",
                driver: Driver | None = None) -> GpuRun:
    """Run the launch script (`run_script(device)`) twice on the GPU, counting then recording the
    chosen launch, and build its Trace (provenance ``gpu``, per-CTA SM and times measured)."""
    from tuiprof.ptx import parse_module
    from tuiprof.ptx.ops import op_sources, static_ops

    mod = module if module is not None else parse_module(program.ptx)
    own_driver = driver is None
    drv = driver if driver is not None else gpu_driver._open_driver(cuda)
    try:
        inst = instrument_for(program, mod, drv)
        with GpuDevice(program, mod, mode="count", choice=choice, snapshot_rule=snapshot_rule, instrumented=inst,
                       driver=drv) as dev:
            run_script(dev)
            counted = dev.recorded
        if counted is None:
            raise TuiprofError(_missing_launch(program, choice), "check --kernel and --launch-index against the script")
        with GpuDevice(program, mod, mode="record", choice=choice, instrumented=inst, counts=counted,
                       driver=drv) as dev:
            run_script(dev)
            rec = dev.recorded
            local_bytes = dev.local_bytes(counted.kernel)
            launch = dev._launch_of(counted.kernel, counted.grid, counted.block, counted.dynamic_shared)
            probe_registers = drv.function_attributes(dev._function(counted.kernel))[0]
            timings = tuple(dev.times_ms)
        if rec is None or rec.words is None or rec.woff is None or rec.used is None or rec.cta is None:
            raise TuiprofError("the recording run did not reach the chosen launch",
                               "the launch script must make the same launches every time it runs")
        info = drv.info
    finally:
        if own_driver:
            drv.close()
    launch = Launch(kernel=launch.kernel, grid=launch.grid, block=launch.block,
                    registers_per_thread=launch.registers_per_thread, static_shared=launch.static_shared,
                    dynamic_shared=launch.dynamic_shared, ctas_per_sm=ctas_per_sm(launch))
    headers = {h.path: h.text for h in program.headers}
    table = ops if ops is not None else static_ops(mod, rec.kernel, program.source.path, program.source.text, headers)
    provenance = Provenance(
        backend="gpu", arch=arch_name, gpu=info.name, tool_version=__version__,
        date=datetime.date.today().isoformat(),
        generator={**device_generator(info), "compiler": program.compiler, "target": program.target,
                   "launch_index": choice.index, "count_ms": counted.elapsed_ms, "record_ms": rec.elapsed_ms,
                   "snapshot_words": int(rec.used.sum()),
                   **({"probe_occupancy": probe_occupancy(info, launch, probe_registers)} if probe_registers else {})})
    trace = build_trace(launch=launch, table=table, sites=inst.sites, tag=inst.tag, snapshot=rec.snapshot,
                        words=rec.words, woff=rec.woff, used=rec.used, cta=rec.cta, local_bytes=local_bytes,
                        sources=op_sources(mod, program.source.path, program.source.text, headers,
                                           tuple({o.id: o for _, _, o in table}.values())),
                        provenance=provenance)
    return GpuRun(trace, counted.elapsed_ms, rec.elapsed_ms, info, timings)


def record_kernel_file(source: str | Path, script: Any, *, arch: Any, arch_name: str | None = None,
                       kernel: str | None = None, launch_index: int = 0, snapshot_ctas: int | None = None,
                       snapshot_start: int | None = 0, flags: Sequence[str] = (), compiler: str = "auto",
                       cuda: str = "cuda-bindings", snapshot_warm: int | None = 0) -> GpuRun:
    """`tuiprof KERNEL.cu --launch SCRIPT --backend gpu`: compile the kernel file for the GPU at
    hand, run the launch script (a `tuiprof.collect.script.LaunchScript`) counting then recording
    the chosen launch, and return the trace with the snapshot Baghsorkhi12's rule picks for `arch`
    (an `Arch`; the trace names `arch_name`, default its name). Raises GpuUnavailable without a GPU."""
    from tuiprof.arch.occupancy import occupancy
    from tuiprof.ptx import parse_module
    from tuiprof.toolchain.compile import load_program
    from tuiprof.trace.snapshot import choose_snapshot

    gpu_driver.require_gpu(f"recording {Path(source).name} on the GPU", cuda)
    drv = gpu_driver._open_driver(cuda)
    try:
        program = load_program(source, compute_capability=drv.info.compute_capability, flags=flags,
                               compiler=compiler)
        module = parse_module(program.ptx)
        symbol = program.kernel(kernel).name if kernel else None

        def md(launch: Launch) -> int:
            return occupancy(arch, launch.threads_per_cta, launch.registers_per_thread, launch.static_shared,
                             launch.dynamic_shared).ctas_per_sm

        def rule(launch: Launch) -> Snapshot:
            with_md = Launch(kernel=launch.kernel, grid=launch.grid, block=launch.block,
                             registers_per_thread=launch.registers_per_thread, static_shared=launch.static_shared,
                             dynamic_shared=launch.dynamic_shared, ctas_per_sm=md(launch))
            return choose_snapshot(with_md, arch, ctas=snapshot_ctas, start=snapshot_start, warm=snapshot_warm)

        return collect_gpu(program, script.run, arch_name=arch_name or arch.name, snapshot_rule=rule, ctas_per_sm=md,
                           choice=LaunchChoice(symbol, launch_index), module=module, driver=drv)
    finally:
        drv.close()


def _missing_launch(program: Program, choice: LaunchChoice) -> str:
    which = f"launch {choice.index} of {choice.kernel}" if choice.kernel else f"launch {choice.index}"
    return f"the launch script never made {which} (kernels in {program.source.path}: " + \
        ", ".join(k.demangled for k in program.kernels) + ")"
