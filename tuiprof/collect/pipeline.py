"""A CUDA source to a Trace: compile, parse, run the launch script in the emulator, record.

    source.cu --build--> Program (PTX, resources) --ptx--> Module --EmuDevice + launch script--> Trace

The snapshot is chosen when the recorded launch starts, from its geometry and the kernel's
occupancy on the target Arch (paper 000 sec. 3.1: 4 x the CTAs resident at once).
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tuiprof import __version__
from tuiprof.arch.model import Arch
from tuiprof.collect.options import DEFAULT_CU_ARCH
from tuiprof.collect.script import LaunchScriptError, find_launch_script, read_launch_script
from tuiprof.errors import TuiprofError, UsageError
from tuiprof.trace.model import Provenance, Snapshot, SourceFile, Trace

if TYPE_CHECKING:
    from tuiprof.session import RunConfig

def target_arch(config: "RunConfig", script_arch: str | None, origin: str) -> tuple[Arch, str]:
    """The Arch to record for and the name the trace keeps: --arch, else the script's ARCH (a
    preset), else DEFAULT_CU_ARCH."""
    from tuiprof.arch.presets import load_arch, preset_arch

    if config.arch:
        arch = load_arch(config.arch, config.overrides)
        return arch, config.arch if not config.arch.endswith(".toml") else arch.name
    name = script_arch or DEFAULT_CU_ARCH
    return preset_arch(name, config.overrides, origin=origin), name


def collect_trace(source: Path, config: "RunConfig") -> Trace:
    """Record the trace of `source` under the launch script and collect options of `config`."""
    from tuiprof.arch.occupancy import occupancy
    from tuiprof.build.compile import build_program
    from tuiprof.collect.emu.device import EmuDevice, RecordChoice
    from tuiprof.ptx.parse import parse_module
    from tuiprof.trace.model import Launch
    from tuiprof.trace.snapshot import choose_snapshot

    opts = config.collect
    if opts.backend != "emu":
        raise UsageError(f"backend {opts.backend!r} is not available here", "use the emulator (--backend emu)")
    script_path = opts.launch or find_launch_script(source)
    if script_path is None:
        raise LaunchScriptError(f"no launch script for {source}: tuiprof needs one to know the inputs and the launch",
                                f"write one with `tuiprof init {source}` (it becomes {source.stem}_launch.py beside "
                                "the source), or pass --launch SCRIPT")
    script = read_launch_script(script_path).load()
    arch, arch_name = target_arch(config, script.arch, origin=f"launch script {script_path}")
    program = build_program(source, compute_capability=arch.cc, flags=opts.cflags, compiler=opts.compiler)
    module = parse_module(program.ptx)
    kernel = program.kernel(opts.kernel).name if opts.kernel else None
    chosen: list[Snapshot] = []
    md: list[int] = []

    def snapshot(grid: tuple[int, int, int], block: tuple[int, int, int], dynamic_shared: int,
                 resources: object) -> np.ndarray:
        threads = block[0] * block[1] * block[2]
        regs = int(getattr(resources, "registers_per_thread", 0) or 0)
        static = int(getattr(resources, "static_shared", 0) or 0)
        occ = occupancy(arch, threads, regs, static, dynamic_shared)
        if occ.ctas_per_sm < 1:
            raise UsageError(f"a CTA of {threads} threads, {regs} registers per thread and {static + dynamic_shared} B "
                             f"of shared memory does not fit on an SM of the {arch.name}",
                             "choose another --arch, or a smaller block")
        md.append(occ.ctas_per_sm)
        probe = Launch("k", grid, block, regs, static, dynamic_shared, occ.ctas_per_sm)
        chosen.append(choose_snapshot(probe, arch, ctas=opts.snapshot, start=opts.snapshot_start))
        return chosen[-1].cta_ids

    dev = EmuDevice(module, source.name, program.source.text,
                    resources={k.name: k.resources for k in program.kernels},
                    record=RecordChoice(kernel, opts.launch_index, snapshot),
                    n_sms=arch.sm_count, threads=os.cpu_count() or 1, step_limit=opts.step_limit)
    script.run(dev)
    rec = dev.recorded
    if rec is None:
        raise _nothing_recorded(dev.launches, kernel, opts.launch_index, script_path)
    return Trace(
        launch=rec.launch_record(ctas_per_sm=md[-1]), ops=rec.ops,
        snapshot=Snapshot(cta_ids=rec.cta_ids, rule=chosen[-1].rule),
        warp_offsets=rec.warp_offsets, warp_cta=rec.warp_cta, warp_index=rec.warp_index,
        op=rec.op, mask=rec.mask, addr=rec.addr,
        sources=(SourceFile(source.name, program.source.text),),
        provenance=Provenance(
            backend="emulator", arch=arch_name, tool_version=__version__, date=datetime.date.today().isoformat(),
            generator={"compiler": program.compiler, "target": program.target, "flags": list(program.flags),
                       "launch_script": script_path.name, "launch_index": opts.launch_index,
                       "launches": len(dev.launches)}),
        ctas=rec.ctas)


def _nothing_recorded(launches: list[tuple[str, tuple[int, int, int], tuple[int, int, int]]], kernel: str | None,
                      index: int, script: Path) -> TuiprofError:
    """Why the launch to profile never happened, in words."""
    if not launches:
        return LaunchScriptError(f"launch script {script} launched nothing",
                                 "call dev.launch(name, grid, block, args) in setup(dev)")
    names = [k for k, _, _ in launches]
    if kernel is not None and kernel not in names:
        return UsageError(f"the launch script never launches {kernel}; it launches {', '.join(sorted(set(names)))}",
                          "choose one of those with --kernel, or launch it in the script")
    name = kernel or names[0]
    return UsageError(f"--launch-index {index}: {name} is launched {names.count(name)} time(s)",
                      f"choose --launch-index between 0 and {names.count(name) - 1}")
