"""The command line's run and collect options as the objects a run takes (`RunConfig`,
`CollectOptions`): shared by `tuiprof.cli.main` and the GPU commands of `tuiprof.cli.gpu`, which would
otherwise import each other. Light at import: the targets are imported when called."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tuiprof.collect.options import CollectOptions
    from tuiprof.config import RunConfig


def run_config(args: argparse.Namespace) -> RunConfig:
    """The RunConfig the run options ask for (`tuiprof.cli._add_run_options`)."""
    from tuiprof.arch.presets import parse_overrides
    from tuiprof.config import RunConfig

    extra = {} if args.tolerance is None else {"tolerance": args.tolerance or None}
    return RunConfig(arch=args.arch, overrides=parse_overrides(args.overrides), trials=args.trials, seed=args.seed,
                     md=args.md, sweep=args.sweep, sweep_trials=args.sweep_trials, collect=collect_options(args), **extra)


def collect_options(args: argparse.Namespace) -> CollectOptions:
    """The CollectOptions the collect options ask for (`tuiprof.cli._add_collect_options`)."""
    from tuiprof.collect.options import DEFAULT_STEP_LIMIT, CollectOptions

    return CollectOptions(launch=Path(args.launch) if args.launch else None, kernel=args.kernel,
                          launch_index=args.launch_index, snapshot=args.snapshot, snapshot_start=args.snapshot_start,
                          snapshot_warm=args.snapshot_warm,
                          cflags=tuple(args.cflags), compiler=args.compiler, backend=getattr(args, "backend", "emu"),
                          cuda=getattr(args, "cuda", "cuda-bindings"),
                          nvcc_args=tuple(getattr(args, "program_nvcc_args", ())),
                          compile_command=tuple(getattr(args, "compile_command", ())),
                          program_args=tuple(getattr(args, "program_args", ())),
                          step_limit=args.step_limit or DEFAULT_STEP_LIMIT)
