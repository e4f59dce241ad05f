"""A CUDA source to a Trace: compile, parse, run the launch script in the emulator or on the GPU,
record; or, for a whole program, build it instrumented and run it on the GPU.

    source.cu --build--> Program (PTX, resources) --ptx--> Module --EmuDevice + launch script--> Trace
                                                                 --GpuDevice + launch script--> Trace
    app.cu (defines main) --tuiprof build--> instrumented binary --run twice on the GPU--> Trace

A `.cu` target is a *whole program* when it defines ``main`` (or comes as ``tuiprof -- nvcc ...``),
unless a launch script is given with ``--launch`` or the emulator is asked for (``--backend emu``):
then it is a *kernel file*, whose launch script makes the inputs and the launches.

The snapshot is chosen when the recorded launch starts, from its geometry and the kernel's
occupancy on the target Arch (Baghsorkhi12 sec. 3.1: 4 x the CTAs resident at once).
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from tuiprof import __version__
from tuiprof.arch.spec import Arch
from tuiprof.collect.options import DEFAULT_CU_ARCH, CollectOptions
from tuiprof.collect.script import LaunchScriptError, find_launch_script, read_launch_script
from tuiprof.errors import BuildError, TuiprofError, UsageError
from tuiprof.output import note as _say
from tuiprof.progress import Phase, Progress, ignore
from tuiprof.trace.data import Launch, Provenance, Snapshot, Trace

if TYPE_CHECKING:
    from tuiprof.ptx.module import Function
    from tuiprof.toolchain.program import KernelResources


class CollectRequest(Protocol):
    """What recording needs of a run's configuration (`tuiprof.config.RunConfig` is one): the
    requested arch and its what-if overrides, and the collect options. A protocol, so that the
    collector names no part of the layers above it."""

    @property
    def arch(self) -> str | None: ...
    @property
    def overrides(self) -> Mapping[str, str]: ...
    @property
    def collect(self) -> CollectOptions: ...


def target_arch(config: CollectRequest, script_arch: str | None, origin: str,
                default: str = DEFAULT_CU_ARCH) -> tuple[Arch, str]:
    """The Arch to record for and the name the trace keeps: --arch, else the script's ARCH (a
    preset), else `default` (on a GPU: the preset of the GPU's generation)."""
    from tuiprof.arch.presets import load_arch, preset_arch

    if config.arch:
        arch = load_arch(config.arch, config.overrides)
        return arch, config.arch if not config.arch.endswith(".toml") else arch.name
    name = script_arch or default
    return preset_arch(name, config.overrides, origin=origin), name


def gpu_arch(config: CollectRequest, cc: tuple[int, int]) -> tuple[Arch, str]:
    """`target_arch` on a GPU of compute capability `cc`: --arch, else the preset of its generation."""
    from tuiprof.arch.calibrate import base_preset

    return target_arch(config, None, origin="--arch", default=base_preset(cc))


def is_whole_program(source: Path, opts: CollectOptions) -> bool:
    """Whether `source` is profiled as a whole program (built and run as it is, on the GPU) rather
    than as a kernel file run by a launch script (see the module docstring)."""
    from tuiprof.toolchain.wholeprog import defines_main

    if opts.compile_command:
        return True
    if opts.launch is not None or opts.backend == "emu" or source.suffix != ".cu":
        return False
    from tuiprof.toolchain.headers import read_text

    try:
        return defines_main(read_text(source))
    except BuildError as exc:
        if exc.message.endswith("does not exist"):
            return False  # the kernel-file path says so, with its own hint
        raise


def program_hint(source: Path | str) -> str:
    """Where to go without a GPU: the emulator, with a launch script for the program's kernels."""
    return (f"whole programs run on the GPU; without one, run the kernels of {source} in the emulator: "
            f"`tuiprof init {source}` writes a launch script, then `tuiprof {source} --backend emu`")


def choose_backend(opts: CollectOptions) -> tuple[str, str | None]:
    """``("gpu", None)`` or ``("emu", why)`` for a kernel file: what --backend asks for, auto meaning
    the GPU when one is usable (`why` then says why the emulator was chosen)."""
    from tuiprof.collect.gpu.driver import gpu_problem, require_gpu

    if opts.backend == "emu":
        return "emu", None
    if opts.backend == "gpu":
        require_gpu("--backend gpu", opts.cuda)
        return "gpu", None
    if opts.backend != "auto":
        raise UsageError(f"unknown backend {opts.backend!r}", "--backend auto, gpu or emu")
    problem = gpu_problem(opts.cuda)
    return ("gpu", None) if problem is None else ("emu", f"--backend auto chose the emulator: {problem}")


def with_provenance(trace: Trace, **changes: object) -> Trace:
    """`trace` with some of its provenance's fields replaced."""
    return dataclasses.replace(trace, provenance=dataclasses.replace(trace.provenance, **changes))  # type: ignore[arg-type]


def collect_trace(source: Path, config: CollectRequest, progress: Progress = ignore) -> Trace:
    """Record the trace of `source` under the collect options of `config`: a whole program on the
    GPU (`record_program`), else a kernel file under its launch script, on the GPU or in the
    emulator; `progress` hears each phase (compiling, each launch and its CTAs, recording)."""
    opts = config.collect
    if not opts.compile_command:
        from tuiprof.files import regular_file_problem
        from tuiprof.toolchain.headers import CUDA_SOURCE

        problem = regular_file_problem(source, CUDA_SOURCE)
        if problem is not None:
            raise problem
    if is_whole_program(source, opts):
        progress(Phase(f"building {source.name} with tuiprof's probes (cached), then running it twice on the GPU"))
        return record_program(source, config)[0]
    if opts.program_args or opts.nvcc_args:
        what = "program arguments (after --)" if opts.program_args else "nvcc arguments " + " ".join(opts.nvcc_args)
        raise UsageError(f"{what}: {source.name} is profiled as a kernel file, not as a program",
                         "a kernel file's inputs come from its launch script, and compiler flags go in --cflag=FLAG; "
                         "a file that defines main() is run as a program (unless --launch or --backend emu is given)")
    backend, why = choose_backend(opts)
    script_path = opts.launch or find_launch_script(source)
    if script_path is None:
        raise LaunchScriptError(f"no launch script for {source}: tuiprof needs one to know the inputs and the launch",
                                f"write one with `tuiprof init {source}` (it becomes {source.stem}_launch.py beside "
                                "the source), or pass --launch SCRIPT")
    if backend == "gpu":
        progress(Phase(f"compiling {source.name} and running {script_path.name} on the GPU (a counting pass, then a "
                       "recording pass)"))
        return _collect_on_gpu(source, script_path, config)
    trace = _collect_in_emulator(source, script_path, config, progress)
    if why is None:
        return trace
    return with_provenance(trace, generator={**trace.provenance.generator, "backend_choice": why})


def _collect_on_gpu(source: Path, script_path: Path, config: CollectRequest) -> Trace:
    """The kernel file's chosen launch recorded on the GPU (`tuiprof.collect.gpu.run.record_kernel_file`)."""
    from tuiprof.collect.gpu.driver import gpu_info
    from tuiprof.collect.gpu.run import record_kernel_file

    opts = config.collect
    arch, arch_name = gpu_arch(config, gpu_info(opts.cuda).compute_capability)
    run = record_kernel_file(source, read_launch_script(script_path), arch=arch, arch_name=arch_name,
                             kernel=opts.kernel, launch_index=opts.launch_index, snapshot_ctas=opts.snapshot,
                             snapshot_start=opts.snapshot_start, flags=opts.cflags, compiler=opts.compiler,
                             cuda=opts.cuda, snapshot_warm=opts.snapshot_warm)
    return with_provenance(run.trace, generator={**run.trace.provenance.generator, "launch_script": script_path.name,
                                                 "launches": len(run.timings)})


def record_program(source: Path, config: CollectRequest) -> tuple[Trace, Path]:
    """`tuiprof app.cu [nvcc args] [-- args]` and `tuiprof -- nvcc ...`: build the program with
    probes (cached), run it twice on the GPU (its own output on standard error, its exit status
    said), and keep the trace beside the cached binary. Returns the trace and where it is kept."""
    from tuiprof.collect.gpu.driver import gpu_info, require_gpu
    from tuiprof.collect.gpu.program_run import profile_sources
    from tuiprof.trace.io import save_trace

    opts = config.collect
    require_gpu(f"profiling {source.name} as a whole program", hint=program_hint(source))
    cc = gpu_info().compute_capability
    arch, arch_name = gpu_arch(config, cc)
    command = for_gpu(opts.compile_command or (str(source), *opts.nvcc_args), cc)
    _say(f"building {' '.join(a for a in command if a.endswith('.cu'))} with tuiprof's probes (once: the build is "
         "cached), then running it twice (a counting run, then a recording run)...")
    run = profile_sources(command, opts.program_args, arch=arch, kernel=opts.kernel, launch_index=opts.launch_index,
                          snapshot_ctas=opts.snapshot, snapshot_start=opts.snapshot_start,
                          snapshot_warm=opts.snapshot_warm)
    for note in run.notes:
        _say(f"note: {note}")
    trace = with_provenance(run.trace, arch=arch_name)
    kept = save_trace(trace, run.binary.with_name(f"{source.stem}.tptrace"))
    _say(f"the trace is kept in {kept} (`tuiprof {kept}` opens it again without running the program)")
    return trace, kept


NVCC_ARCH_FLAGS = ("-arch", "--gpu-architecture", "-gencode", "--generate-code", "-code", "--gpu-code")


def for_gpu(command: tuple[str, ...], cc: tuple[int, int]) -> tuple[str, ...]:
    """An nvcc command line that names no GPU architecture, built for the GPU at hand (``-arch=sm_XY``)
    rather than nvcc's oldest default (which the driver would JIT-compile at every start)."""
    if any(a.split("=", 1)[0] in NVCC_ARCH_FLAGS for a in command):
        return command
    return (*command, f"-arch=sm_{cc[0]}{cc[1]}")


def _collect_in_emulator(source: Path, script_path: Path, config: CollectRequest, progress: Progress = ignore) -> Trace:
    """The kernel file's chosen launch recorded by the emulator, its phases told to `progress`."""
    from tuiprof.arch.occupancy import occupancy, snapshot_spread
    from tuiprof.collect.emu.device import EmuDevice, RecordChoice
    from tuiprof.collect.emu.run import SnapshotTooLarge
    from tuiprof.ptx.ops import op_sources
    from tuiprof.ptx.parse import parse_module
    from tuiprof.toolchain.compile import load_program
    from tuiprof.trace.snapshot import choose_snapshot

    opts = config.collect
    script = read_launch_script(script_path).load()
    arch, arch_name = target_arch(config, script.arch, origin=f"launch script {script_path}")
    program = load_program(source, compute_capability=arch.cc, flags=opts.cflags, compiler=opts.compiler,
                           progress=progress)
    progress(Phase("reading the PTX"))
    module = parse_module(program.ptx)
    kernel = program.kernel(opts.kernel).name if opts.kernel else None
    chosen: list[Snapshot] = []
    md: list[int] = []
    too_large: tuple[int, int, int] | None = None
    """(CTAs, warp accesses, the emulator's limit) of the default snapshot when it made more warp
    accesses than the emulator keeps: the script then runs again and records that snapshot scaled
    down to fit (`fitted_snapshot`)."""

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
        name = dev.launches[-1][0] if dev.launches else "kernel"  # the launch being recorded
        probe = Launch(name, grid, block, regs, static, dynamic_shared, occ.ctas_per_sm)
        picked = choose_snapshot(probe, arch, ctas=opts.snapshot, start=opts.snapshot_start, warm=opts.snapshot_warm)
        if too_large is not None:
            picked = fitted_snapshot(probe, arch, picked, *too_large, start=opts.snapshot_start)
        chosen.append(picked)
        dev.sm_spread = snapshot_spread(arch.sm_count, occ.ctas_per_sm, probe.grid_ctas, picked.n_ctas - picked.warm)
        return picked.cta_ids

    def device() -> EmuDevice:
        return EmuDevice(module, source.name, program.source.text or None,
                         resources={k.name: bounded_resources(k.resources, module.functions[k.name], arch)
                                    for k in program.kernels},
                         record=RecordChoice(kernel, opts.launch_index, snapshot),
                         n_sms=arch.sm_count, threads=os.cpu_count() or 1, step_limit=opts.step_limit,
                         progress=progress, headers={h.path: h.text for h in program.headers})

    dev = device()
    progress(Phase(f"running {script_path.name} in the emulator"))
    try:
        script.run(dev)
    except SnapshotTooLarge as exc:
        if opts.snapshot is not None or not chosen:  # the user's own count: theirs to change
            raise
        too_large = (exc.ctas, exc.accesses, exc.limit)  # the numbers only: the run's arrays are freed
    if too_large is not None:
        ctas, accesses, _ = too_large
        chosen.clear()
        md.clear()
        dev = device()
        progress(Phase(f"the default snapshot ({ctas:,} CTAs) made {accesses:,} warp accesses, more than the "
                       f"emulator keeps: running {script_path.name} again to record fewer CTAs"))
        script.run(dev)
    rec = dev.recorded
    if rec is None:
        raise _nothing_recorded(dev.launches, kernel, opts.launch_index, script_path)
    progress(Phase("recording the trace"))
    return Trace(
        launch=rec.launch_record(ctas_per_sm=md[-1]), ops=rec.ops,
        snapshot=Snapshot(cta_ids=rec.cta_ids, rule=chosen[-1].rule, warm=chosen[-1].warm),
        warp_offsets=rec.warp_offsets, warp_cta=rec.warp_cta, warp_index=rec.warp_index,
        op=rec.op, mask=rec.mask, addr=rec.addr,
        sources=op_sources(module, source.name, program.source.text or None,
                           {h.path: h.text for h in program.headers}, rec.ops),
        provenance=Provenance(
            backend="emulator", arch=arch_name, tool_version=__version__, date=datetime.date.today().isoformat(),
            generator={"compiler": program.compiler, "target": program.target, "flags": list(program.flags),
                       "launch_script": script_path.name, "launch_index": opts.launch_index,
                       "launches": len(dev.launches)}),
        ctas=rec.ctas)


def fitted_snapshot(launch: Launch, arch: Arch, default: Snapshot, ctas: int, accesses: int, limit: int, *,
                    start: int | None) -> Snapshot:
    """`default` (the default rule's snapshot of `launch`, whose `ctas` made `accesses` warp
    accesses, more than the `limit` the emulator keeps) scaled to 80% of that limit at the rate
    per CTA it made: its counted CTAs and its warm-up by one factor, the warm-up still a multiple
    of the SM count (`tuiprof.trace.snapshot.default_warm`). The rule it records says so."""
    from tuiprof.trace.snapshot import choose_snapshot

    f = 0.8 * limit / max(accesses, 1)
    counted = max(1, int((default.n_ctas - default.warm) * f))
    warm = int(default.warm * f) // arch.sm_count * arch.sm_count
    why = (f"fewer CTAs than the default rule's {ctas:,} (warm-up included), which made {accesses:,} warp "
           f"accesses: the emulator keeps at most {limit:,} in its memory budget (--snapshot N chooses the count)")
    return choose_snapshot(launch, arch, ctas=counted, start=start, warm=warm, why=why)


def bounded_resources(res: "KernelResources | None", fn: "Function", arch: Arch) -> "KernelResources | None":
    """A kernel's resources, with the registers its launch bounds imply (`bounded_registers`) when
    no assembler measured them (PTX without ptxas): occupancy then counts what the compiler would
    leave it, not an unlimited register file."""
    from tuiprof.arch.occupancy import bounded_registers
    from tuiprof.toolchain.program import KernelResources

    if res is not None and res.registers_per_thread > 0:
        return res
    if not fn.maxntid and fn.maxnreg is None:
        return res
    threads = 1
    for d in fn.maxntid or (0,):
        threads *= d
    regs = bounded_registers(arch, threads, fn.minnctapersm or 1, fn.maxnreg)
    if res is None:
        return KernelResources(regs, 0, 0, 0)
    return dataclasses.replace(res, registers_per_thread=regs)


def _nothing_recorded(launches: list[tuple[str, tuple[int, int, int], tuple[int, int, int]]], kernel: str | None,
                      index: int, script: Path) -> TuiprofError:
    """Why the launch to profile never happened, in words."""
    if not launches:
        return LaunchScriptError(f"launch script {script} launched nothing",
                                 "call dev.launch(name, grid, block, args) in setup(dev)")
    from tuiprof.toolchain.demangle import display_name

    names = [k for k, _, _ in launches]
    if kernel is not None and kernel not in names:
        return UsageError(f"the launch script never launches {display_name(kernel)}; it launches "
                          f"{', '.join(sorted({display_name(n) for n in names}))}",
                          "choose one of those with --kernel, or launch it in the script")
    name = kernel or names[0]
    return UsageError(f"--launch-index {index}: {display_name(name)} is launched {names.count(name)} time(s)",
                      f"choose --launch-index between 0 and {names.count(name) - 1}")
