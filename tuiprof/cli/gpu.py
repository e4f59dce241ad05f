"""The GPU commands of the `tuiprof` CLI: ``build``, ``calibrate``, ``validate``, and the
``--backend`` / ``--cuda`` options of `.cu` targets. `tuiprof.cli.main` registers them with
`add_commands`; nothing heavy is imported until a command runs.

Without a GPU, every command that needs one says so in one message that points at the emulator
(a kernel file with a launch script, ``--backend emu``) and exits with status 2; ``tuiprof build``
needs no GPU (only nvcc).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

BACKENDS = ("auto", "gpu", "emu")
"""`tuiprof.collect.options.BACKENDS`, repeated: importing that package would import NumPy."""
CUDA_LIBRARIES = ("cuda-bindings", "pycuda")
"""`tuiprof.collect.options.CUDA_LIBRARIES`, likewise."""


def add_backend_options(p: Any) -> None:
    """``--backend`` and ``--cuda`` (on a parser or an argument group) for a `.cu` target."""
    p.add_argument("--backend", choices=BACKENDS, default="auto",
                   help="where a kernel file runs: gpu, emu (the emulator), or auto: the GPU when one is usable, "
                   "else the emulator (default auto); a whole program always runs on the GPU")
    _add_cuda_option(p)


def _add_cuda_option(p: Any) -> None:
    p.add_argument("--cuda", choices=CUDA_LIBRARIES, default="cuda-bindings",
                   help="the Python CUDA library that runs a kernel file on the GPU (default cuda-bindings; pycuda "
                   "when installed)")


def add_commands(sub: Any, add_run_options: Callable[[argparse.ArgumentParser], None],
                 add_collect_options: Callable[..., None]) -> None:
    """Add the subcommands to `sub` (the CLI's subparsers; `add_run_options` and
    `add_collect_options` are the CLI's own option groups); `run` dispatches to them."""
    p = sub.add_parser("build", help="build a CUDA program instrumented for tuiprof (needs nvcc, not a GPU)",
                       description="Build the program an nvcc command line describes, with tuiprof's probes and host "
                       "runtime: `tuiprof build app.cu -o app.instr -arch=sm_80` (any nvcc arguments). The "
                       "binary runs as the plain one until tuiprof profiles it. Flags may come first, as nvcc is "
                       "usually called: `tuiprof build -I inc -o app a.cu`.", usage="tuiprof build [--kernel NAME] NVCC_ARGS")
    p.add_argument("--kernel", dest="kernels", action="append", default=[], metavar="NAME",
                   help="probe only this kernel (and the device functions it calls): a faster build of a program "
                   "with many library kernels (Thrust, CUB); repeatable")
    p.add_argument("nvcc_args", nargs=argparse.REMAINDER, metavar="NVCC_ARGS",
                   help="the nvcc command line without `nvcc`: sources, flags, -o OUTPUT")

    p = sub.add_parser("calibrate", help="measure the GPU at hand (latencies, cache sizes) into --arch calibrated")
    _add_cuda_option(p)
    p.add_argument("--quick", action="store_true", help="fewer sweep points (about a minute)")
    p.add_argument("-o", "--output", metavar="FILE", help="where to write the TOML (default: the user's config folder, "
                   "which --arch calibrated reads)")

    p = sub.add_parser("validate", help="compare the prediction with Nsight Compute (ncu) on the GPU",
                       usage="tuiprof validate TARGET [options] [-- ARGS]",
                       description="Record TARGET on the GPU, measure the same launch with ncu (caches flushed), "
                       "store the measurements in the trace and print predicted against measured hit ratios.")
    p.add_argument("target", metavar="TARGET", help="a kernel file (.cu, with a launch script), a demo name, or a "
                   "program built by `tuiprof build` (its arguments after --)")
    _add_cuda_option(p)
    p.add_argument("--l2-fetch-granularity", type=int, metavar="BYTES", choices=range(0, 129),
                   help="set cudaLimitMaxL2FetchGranularity (0-128 B: how much the L2 may fetch from DRAM on a "
                   "sector miss) for the recording and the run ncu measures (default: the driver's; the trace "
                   "records the value in force)")
    p.add_argument("--trace", metavar="FILE", help="where to save the trace with the measurements "
                   "(default: TARGET's name with .tptrace, in the current folder)")
    p.add_argument("--per-op", action="store_true", help="also compare each memory op with ncu's source page "
                   "(per SASS instruction, matched by source line): sectors and 128 B lines per request, "
                   "excessive sectors, the op's share of the kernel's sectors")
    p.add_argument("--source-csv", metavar="FILE", help="compare with a source page saved earlier (`ncu --import "
                   "R.ncu-rep --csv --page source --print-source cuda,sass`) instead of profiling: TARGET is then a "
                   ".tptrace or a demo, and no GPU is needed")
    add_run_options(p)
    add_collect_options(p, backend=False)


def run(args: argparse.Namespace) -> int:
    """The handler of ``build``, ``calibrate`` and ``validate``."""
    return {"build": cmd_build, "calibrate": cmd_calibrate, "validate": cmd_validate}[args.command](args)


def cmd_build(args: argparse.Namespace) -> int:
    from tuiprof.errors import UsageError
    from tuiprof.toolchain.wholeprog import build_instrumented

    nvcc_args = [a for a in args.nvcc_args if a != "--"]
    if not nvcc_args:
        raise UsageError("tuiprof build needs an nvcc command line", "for example: tuiprof build app.cu -o app.instr")
    from tuiprof.output import shown

    prog = build_instrumented(nvcc_args, kernels=tuple(getattr(args, "kernels", ())))
    sites = sum(len(m.sites) for m in prog.modules)
    print(f"built {shown(prog.binary)} ({len(prog.modules)} PTX module(s), {len(prog.kernels)} kernel(s), {sites} probed "
          f"accesses); it runs as the plain program until tuiprof profiles it")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    import sys

    from tuiprof.collect.gpu.calibrate import calibrate

    def say(text: str) -> None:
        print(f"  {text}...", file=sys.stderr, flush=True)

    path, arch, m = calibrate(args.cuda, args.quick, Path(args.output) if args.output else None, say)
    l2_note = f" ({m.l2_note()})" if m.l2_note() else ""
    print(f"{m.gpu}: t1 {m.t1:.0f}, t2 {m.t2:.0f}, DRAM {m.dram:.0f} cycles; L1 {arch.l1.size >> 10} KiB, "
          f"L2 {arch.l2.size >> 20} MiB{l2_note}, sector {m.sector} B, line {arch.l1.line} B"
          + ("" if m.line_measured else " (preset: no clean line-size staircase)"))
    print(f"wrote {path}; use it with --arch calibrated")
    return 0


def _validate_target(args: argparse.Namespace) -> tuple[Path, Any]:
    """What `tuiprof validate TARGET` records: a kernel file or a demo (its source, and the collect
    options of the command line with the demo's own launch script, kernel, launch and snapshot,
    its start and warm-up included, where the command line names none: the demo's shipped trace and
    `measured.json` were recorded so), or a program built by `tuiprof build` (its binary, None)."""
    import dataclasses

    from tuiprof.cli.options import collect_options
    from tuiprof.demos import CATALOGUE, demo_collection
    from tuiprof.errors import UsageError

    target, opts = args.target, collect_options(args)
    if target.endswith(".cu") or (target in CATALOGUE and not Path(target).exists()):
        if args.program_args:
            raise UsageError(f"arguments after -- are a program's, and {target} is a kernel file run by its launch "
                             "script", "validate a program built by `tuiprof build` to pass it arguments")
        if target.endswith(".cu"):
            return Path(target), opts
        source, demo = demo_collection(target)
        return source, dataclasses.replace(
            opts, launch=opts.launch or demo.launch, kernel=opts.kernel or demo.kernel,
            launch_index=opts.launch_index if opts.kernel else demo.launch_index, snapshot=opts.snapshot or demo.snapshot,
            snapshot_start=demo.snapshot_start if opts.snapshot_start is None else opts.snapshot_start,
            snapshot_warm=demo.snapshot_warm if opts.snapshot_warm is None else opts.snapshot_warm)
    return Path(target), None


def cmd_validate(args: argparse.Namespace) -> int:
    """Record TARGET on the GPU, measure it with ncu, save the trace with the measurements,
    simulate it and print the comparison."""
    import tempfile

    from tuiprof.cli.options import run_config
    from tuiprof.collect.gpu.driver import L2_FETCH_ENV, gpu_info, require_gpu
    from tuiprof.collect.gpu.ncu import (
        NCU_HINT,
        ValidateError,
        counters,
        find_ncu,
        measure,
        measured_values,
        ncu_command,
    )
    from tuiprof.collect.pipeline import gpu_arch, program_hint, with_provenance
    from tuiprof.output import check_output
    from tuiprof.session import Session
    from tuiprof.trace.io import save_trace
    from tuiprof.validate import compare, render

    if args.source_csv:
        return _validate_source_csv(args)
    target, opts = _validate_target(args)
    out = Path(args.trace) if args.trace else Path.cwd() / (target.stem + ".tptrace")
    inputs = [p for p in (target, opts.launch if opts is not None else None) if p is not None]
    check_output(str(out), inputs)  # before the GPU work, not after it
    hint = program_hint("SOURCE.cu") if opts is None else (
        "validation measures the kernel on the GPU with Nsight Compute; without a GPU, `tuiprof report "
        + (f"{args.target} --backend emu` " if args.target.endswith(".cu") else f"{args.target}` ")
        + "still predicts (with nothing to compare against)")
    if args.l2_fetch_granularity is not None:  # the recording, and the plain run ncu launches
        os.environ[L2_FETCH_ENV] = str(args.l2_fetch_granularity)
    require_gpu("tuiprof validate", args.cuda, hint=hint)
    ncu = find_ncu()
    if ncu is None:
        raise ValidateError("tuiprof validate needs Nsight Compute's ncu, which is not on PATH", NCU_HINT)
    config = run_config(args)
    cc = gpu_info(args.cuda).compute_capability
    arch, arch_name = gpu_arch(config, cc)
    if opts is not None:
        trace, program_cmd, kernel = _record_kernel_file(target, opts, arch, arch_name, cc)
    else:
        trace, program_cmd, kernel = _record_program(args, target, arch, arch_name)
    index = args.launch_index if opts is None else opts.launch_index
    with tempfile.TemporaryDirectory(prefix="tuiprof-ncu-") as tmp:
        launches = measure(ncu, lambda metrics: ncu_command(ncu, program_cmd, kernel=kernel, launch_index=index,
                                                            log=Path(tmp) / "ncu.csv", metrics=metrics))
    if not launches:
        raise ValidateError("ncu profiled no launch", "check --kernel and --launch-index")
    page = _source_page(ncu, program_cmd, kernel, index) if args.per_op else None
    measured = measured_values(launches[0])
    generator = {**trace.provenance.generator, "ncu_counters": counters(launches[0])}
    trace = with_provenance(trace, measured={**trace.provenance.measured, **measured}, generator=generator)
    save_trace(trace, out, protect=inputs)
    session = Session(trace, config, out)
    analysis = session.run()
    if analysis is None:
        raise ValidateError("the simulation finished no trial", "run it again with more --trials")
    from tuiprof.toolchain.demangle import display_name

    print(f"{display_name(trace.launch.kernel)} on {trace.provenance.gpu}, simulated as {session.arch.name} "
          f"({analysis.trials} trials); trace with the measurements: {out}")
    print(render(compare(analysis, measured)), end="")
    snap, grid = trace.snapshot.counted_ctas, trace.launch.grid_ctas  # a warm-up is replayed, not counted
    if snap < grid:
        print(f"note: the trace holds {snap} of the {grid} CTAs ncu measured: reuse between them and the rest of "
              "the grid is not in the prediction, so the L2's cold misses weigh more (--snapshot N records more)")
    if page is not None:
        from tuiprof.validate_ops import compare_ops, render_ops

        print(render_ops(compare_ops(analysis, page)), end="")
    return 0


def _source_page(ncu: str, program: list[str], kernel: str | None, index: int) -> Any:
    """ncu's source page of the chosen launch (`tuiprof.validate_ops`), the JIT asked for line
    information so that SASS instructions name their source lines."""
    import subprocess
    import tempfile

    from tuiprof.collect.gpu.driver import JIT_LINEINFO_ENV
    from tuiprof.collect.gpu.ncu import ValidateError
    from tuiprof.validate_ops import parse_source_page, source_page_commands

    env = {**os.environ, JIT_LINEINFO_ENV: "1"}  # for the plain run ncu launches
    with tempfile.TemporaryDirectory(prefix="tuiprof-ncu-src-") as tmp:
        collect, page = source_page_commands(ncu, program, kernel=kernel, launch_index=index, report=f"{tmp}/source")
        try:
            done = subprocess.run(collect, capture_output=True, text=True, timeout=900, env=env, check=False)
        except subprocess.TimeoutExpired:
            raise ValidateError("ncu took more than 15 minutes to collect the source counters",
                                "profile a smaller input, or drop --per-op") from None
        if done.returncode != 0 or not Path(f"{tmp}/source.ncu-rep").is_file():
            raise ValidateError(f"ncu could not collect the source counters (status {done.returncode}):\n"
                                + (done.stdout + done.stderr)[-1500:].strip(), "run the same ncu command by hand: "
                                + " ".join(collect))
        try:
            printed = subprocess.run(page, capture_output=True, text=True, timeout=300, check=False)
        except subprocess.TimeoutExpired:
            raise ValidateError("ncu took more than 5 minutes to print the source page", "run it by hand: "
                                + " ".join(page)) from None
    if printed.returncode != 0:
        raise ValidateError(f"ncu could not print the source page (status {printed.returncode}):\n"
                            + printed.stderr[-1500:].strip(), "run the same ncu command by hand: " + " ".join(page))
    return parse_source_page(printed.stdout)


def _validate_source_csv(args: argparse.Namespace) -> int:
    """``--source-csv FILE``: a trace (or demo) simulated and compared op by op with a source
    page saved earlier; no GPU."""
    from tuiprof import demos
    from tuiprof.cli.options import run_config
    from tuiprof.collect.gpu.ncu import ValidateError
    from tuiprof.errors import UsageError
    from tuiprof.session import Session
    from tuiprof.trace.io import SUFFIX, load_trace
    from tuiprof.validate_ops import compare_ops, parse_source_page, render_ops

    target = args.target
    if target.endswith(SUFFIX) or Path(target).is_file() and not target.endswith(".cu"):
        trace = load_trace(target)
    elif target in demos.CATALOGUE or target in demos.demo_names():
        trace = demos.load(demos.demo_path(target))
    else:
        raise UsageError(f"--source-csv compares a recorded trace, and {target} is none",
                         "give a .tptrace (`tuiprof record` or `tuiprof validate` writes one) or a demo name")
    try:
        raw = Path(args.source_csv).read_bytes()
    except OSError as exc:
        raise ValidateError(f"cannot read {args.source_csv}: {exc.strerror}", "check the path") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValidateError(f"{args.source_csv} is not UTF-8 text", "save ncu's CSV output as it prints it") from None
    rows = parse_source_page(text)  # before the simulation: bad input fails at once
    analysis = Session(trace, run_config(args)).run()
    if analysis is None:
        raise ValidateError("the simulation finished no trial", "run it again with more --trials")
    from tuiprof.toolchain.demangle import display_name

    print(f"{display_name(trace.launch.kernel)}: {analysis.trials} trials as {analysis.arch}, against {args.source_csv}")
    print(render_ops(compare_ops(analysis, rows)), end="")
    return 0


def _record_kernel_file(source: Path, opts: Any, arch: Any, arch_name: str,
                        cc: tuple[int, int]) -> tuple[Any, list[str], str | None]:
    from tuiprof.collect.gpu.ncu import plain_command
    from tuiprof.collect.gpu.run import record_kernel_file
    from tuiprof.collect.script import LaunchScriptError, find_launch_script, read_launch_script
    from tuiprof.toolchain import build_program

    script_path = opts.launch or find_launch_script(source)
    if script_path is None:
        raise LaunchScriptError(f"no launch script for {source}",
                                "give one with --launch, or write one with `tuiprof init KERNEL.cu`")
    run = record_kernel_file(source, read_launch_script(script_path), arch=arch, arch_name=arch_name,
                             kernel=opts.kernel, launch_index=opts.launch_index, snapshot_ctas=opts.snapshot,
                             snapshot_start=opts.snapshot_start, flags=opts.cflags, compiler=opts.compiler,
                             cuda=opts.cuda, snapshot_warm=opts.snapshot_warm)
    program = build_program(source, compute_capability=cc, flags=opts.cflags, compiler=opts.compiler)  # cached
    kernel = program.kernel(opts.kernel).name if opts.kernel else None
    cmd = plain_command(str(source.resolve()), str(Path(script_path).resolve()), cc, program.flags,
                        program.compiler.split()[0], opts.cuda)
    return run.trace, cmd, kernel


def _record_program(args: argparse.Namespace, binary: Path, arch: Any,
                    arch_name: str) -> tuple[Any, list[str], str | None]:
    from tuiprof.collect.gpu.ncu import plain_binary
    from tuiprof.collect.gpu.program_run import collect_program, resolve_kernel
    from tuiprof.collect.pipeline import with_provenance
    from tuiprof.toolchain.wholeprog import load_whole_program

    prog = load_whole_program(binary.resolve())
    run = collect_program(prog, args.program_args, arch=arch, kernel=args.kernel, launch_index=args.launch_index,
                          snapshot_ctas=args.snapshot, snapshot_start=args.snapshot_start,
                          snapshot_warm=args.snapshot_warm)
    for note in run.notes:
        print(f"note: {note}")
    plain = plain_binary(prog.nvcc_args, prog.binary, Path.cwd())
    return (with_provenance(run.trace, arch=arch_name), [str(plain), *args.program_args],
            resolve_kernel(prog, args.kernel))


COMMANDS = ("build", "calibrate", "validate")

__all__ = ["BACKENDS", "COMMANDS", "add_backend_options", "add_commands", "run"]
