"""The `tuiprof` command: argument parsing and dispatch.

Imports nothing heavy at module import time (no NumPy, Numba or Textual), so `tuiprof --help`
is instant; each command imports what it needs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tuiprof import __version__

# The run and collect options as a RunConfig: their own module, which the GPU commands share.
from tuiprof.cli.options import collect_options as collect_options
from tuiprof.cli.options import run_config as run_config
from tuiprof.errors import TuiprofError, UsageError
from tuiprof.output import note as _say
from tuiprof.output import shown, write_output

FORMATS = ("text", "json", "md")
DEFAULT_DEMO = "spmv-u"

MAX_TRIALS = 100_000


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError (one message, exit 2) instead of printing usage."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message, f"see `{self.prog} --help`")


def _int_in(name: str, lo: int, hi: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise UsageError(f"{name} must be a whole number, got {text!r}", f"for example {name} {max(lo, 1)}") from None
        if value < lo or (hi is not None and value > hi):
            bound = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
            raise UsageError(f"{name} must be {bound}, got {value}", f"for example {name} {max(lo, 1)}")
        return value
    parse.__name__ = name
    return parse


def _fraction(text: str) -> float:
    """--tolerance: a hit-ratio half-width in [0, 1); 0 turns early stopping off."""
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"--tolerance must be a number, got {text!r}", "for example --tolerance 0.01") from None
    if not 0 <= value < 1:
        raise UsageError(f"--tolerance must be at least 0 and below 1, got {value}",
                         "0.01 stops when every 95% confidence interval of the mean is within +-1 percentage point; 0 runs every trial")
    return value


def _percent(text: str) -> float:
    """--fail-if-worse: a percentage, at least 0."""
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        raise UsageError(f"--fail-if-worse must be a percentage, got {text!r}", "for example --fail-if-worse 5") from None
    if not 0 <= value < 1e6:
        raise UsageError(f"--fail-if-worse must be at least 0, got {text}", "for example --fail-if-worse 5")
    return value


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--arch", metavar="NAME|FILE", help="GPU model: a preset (see `tuiprof archs`) or a TOML file; default: the trace's")
    p.add_argument("--set", dest="overrides", action="append", metavar="KEY=VALUE", default=[],
                   help="what-if override of an arch value, e.g. --set l1.size=48KiB (repeatable)")
    p.add_argument("--trials", type=_int_in("--trials", 1, MAX_TRIALS), default=64, metavar="N",
                   help="Monte Carlo trials (default 64, as Baghsorkhi12)")
    p.add_argument("--seed", type=_int_in("--seed", 0, 2**63 - 1), default=0, metavar="S", help="random seed (default 0)")
    p.add_argument("--md", type=_int_in("--md", 1), default=None, metavar="N",
                   help="resident CTAs per SM to simulate (default: the occupancy limit)")
    p.add_argument("--tolerance", type=_fraction, default=None, metavar="T",
                   help="stop early once every headline hit ratio's 95%% confidence interval (of the mean) is within +-T (default "
                   "0.01, after at least 20 trials; 0 runs every trial)")
    p.add_argument("--sweep-trials", type=_int_in("--sweep-trials", 1, MAX_TRIALS), default=None, metavar="N",
                   help="trials per MD in the MD sweep (default: adaptive, up to a quarter of --trials and at "
                   "least 8, fewer for the MDs that cannot change the decision)")
    p.add_argument("--no-sweep", dest="sweep", action="store_false",
                   help="skip the MD sweep (no MD decision; the other models still run)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tuiprof", usage="tuiprof [-h] [--version] {TARGET [options] [-- ARGS] | [options] -- nvcc ARGS "
                     "[-- ARGS] | COMMAND ...}",
                     epilog="`tuiprof TARGET` opens the terminal UI on a .cu source, a .tptrace file or a demo name "
                     "(`tuiprof open TARGET --help` lists its options). A .cu source that defines main() is a whole "
                     "program: it is built with nvcc (extra nvcc arguments follow TARGET) and run on the GPU with the "
                     "arguments after --; `tuiprof -- nvcc -o app a.cu b.cu` does the same for a multi-file program.",
                     description="Per-load L1/L2 hit ratios and latencies for CUDA kernels, "
                     "from snapshot memory traces replayed through a stochastic memory-hierarchy model.")
    parser.add_argument("--version", action="version", version=f"tuiprof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser, prog="tuiprof")

    p = sub.add_parser("report", help="print the analysis of a trace or demo (text, JSON or Markdown)")
    p.add_argument("target", metavar="TARGET", help="a .cu source, a .tptrace file or a demo name (see `tuiprof demos`)")
    p.add_argument("--format", choices=FORMATS, default="text", help="output format (default text)")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    _add_run_options(p)
    _add_collect_options(p)

    p = sub.add_parser("diff", help="compare two runs per op, with the significance of every change",
                       description="Compare run B against run A: the kernel-wide figures and the kernel time side by "
                       "side, and every op matched between the two versions (by source text and label when lines "
                       "moved) with its change in H1, H2, X and cost, each tested by Welch's t-test over the trials. "
                       "A and B are any targets (.cu sources with their launch scripts, .tptrace files, demo names), "
                       "or one target and the --vs-* settings B runs under. Finished runs are cached "
                       "(XDG_CACHE_HOME/tuiprof/runs), so a diff of runs made before takes well under a second.")
    p.add_argument("a", metavar="A", help="the baseline: a .cu source, a .tptrace file or a demo name")
    p.add_argument("b", metavar="B", nargs="?", help="the other version (default: A again, under the --vs-* settings)")
    g = p.add_argument_group("B's settings (default: A's)")
    g.add_argument("--vs-arch", metavar="NAME|FILE", help="B's GPU model")
    g.add_argument("--vs-set", action="append", default=[], metavar="KEY=VALUE",
                   help="a what-if override for B on top of A's --set, e.g. --vs-set l1.size=8KiB (repeatable)")
    g.add_argument("--vs-md", type=_int_in("--vs-md", 1), default=None, metavar="N", help="B's CTAs per SM")
    g.add_argument("--vs-seed", type=_int_in("--vs-seed", 0, 2**63 - 1), default=None, metavar="S", help="B's seed")
    g.add_argument("--vs-launch", metavar="SCRIPT", help="B's launch script (a .cu target)")
    p.add_argument("--format", choices=FORMATS, default="text", help="output format (default text; md for a pull request)")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    p.add_argument("--fail-if-worse", type=_percent, default=None, metavar="PCT",
                   help="exit with status 1 when B's kernel time, or the X of an --op, is more than PCT%% worse than "
                   "A's and the change is significant")
    p.add_argument("--op", action="append", default=[], metavar="LABEL|ID",
                   help="an op whose X --fail-if-worse checks: A's op id or a label (repeatable)")
    p.add_argument("--no-cache", dest="cache", action="store_false", help="simulate both runs even when cached")
    _add_run_options(p)
    _add_collect_options(p)

    p = sub.add_parser("archs", help="list the GPU presets with their key figures")
    p.add_argument("--show", metavar="NAME", help="print every value of one preset as TOML-like text")

    sub.add_parser("demos", help="list the shipped demo traces")

    p = sub.add_parser("init", help="write a starting launch script for the kernels of a .cu file")
    p.add_argument("kernel", metavar="KERNEL.cu", help="the CUDA source file")
    p.add_argument("-o", "--output", metavar="FILE", help="where to write it (default: <name>_launch.py beside the source)")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it already exists")
    p.add_argument("--arch", metavar="NAME", help="GPU model to compile for and write as the script's ARCH (default: "
                   "the one `tuiprof report` profiles for, a100)")
    _add_compiler_options(p)

    p = sub.add_parser("record", help="compile KERNEL.cu, run its launch script (emulator or GPU), and save the trace")
    p.add_argument("target", metavar="KERNEL.cu", help="the CUDA source file (one that defines main() runs as a program), "
                   "or a PTX file (.ptx) another compiler wrote")
    p.add_argument("-o", "--output", metavar="FILE", required=True,
                   help="the .tptrace file to write (- writes it to standard output, which must not be a terminal)")
    p.add_argument("--arch", metavar="NAME|FILE", help="GPU model the snapshot is chosen for (default: the "
                   "launch script's ARCH, else a100)")
    _add_collect_options(p)

    p = sub.add_parser("warmup", help="compile the simulator's kernels for the GPU presets (and the emulator's) "
                       "into your kernel cache now, so that no later run waits for them")
    p.add_argument("--arch", dest="archs", action="append", metavar="NAME", default=[],
                   help="only this preset (repeatable; default: every preset)")
    p.add_argument("--no-emulator", dest="emulator", action="store_false",
                   help="skip the emulator's kernels (about a minute; needed for .cu targets without a GPU)")
    p.add_argument("--progress", action="store_true",
                   help="as the UI starts it in the background: niced, one line per step, ends with its parent")

    p = sub.add_parser("open", help="open the terminal UI on TARGET (the same as `tuiprof TARGET`)")
    p.add_argument("target", metavar="TARGET", help="a .cu source, a .tptrace file or a demo name (see `tuiprof demos`)")
    _add_ui_options(p)

    p = sub.add_parser("demo", help=f"open the terminal UI on a shipped demo (default {DEFAULT_DEMO})")
    p.add_argument("name", metavar="NAME", nargs="?", default=DEFAULT_DEMO, help="a demo name (see `tuiprof demos`)")
    _add_ui_options(p)

    from tuiprof.cli.gpu import add_commands  # build, calibrate, validate (light: argparse only)

    add_commands(sub, _add_run_options, _add_collect_options)
    return parser


def _add_compiler_options(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    p.add_argument("--cflag", dest="cflags", action="append", default=[], metavar="FLAG",
                   help="compiler flag passed through, e.g. --cflag=-Iinclude --cflag=-DN=4 (repeatable)")
    p.add_argument("--compiler", choices=("auto", "nvcc", "nvrtc"), default="auto",
                   help="nvcc, NVRTC, or auto: nvcc when found, else NVRTC (default auto)")


def _add_collect_options(p: argparse.ArgumentParser, backend: bool = True) -> None:
    from tuiprof.cli.gpu import add_backend_options

    g = p.add_argument_group("CUDA sources (a .cu TARGET: compiled, run on the GPU or in the emulator, recorded)")
    g.add_argument("--launch", metavar="SCRIPT", help="the launch script (default: launch.py or "
                   "<name>_launch.py beside the source; `tuiprof init KERNEL.cu` writes one)")
    g.add_argument("--kernel", metavar="NAME", help="the kernel to profile (default: the first one launched)")
    g.add_argument("--launch-index", type=_int_in("--launch-index", 0), default=0, metavar="K",
                   help="profile the K-th launch of that kernel (default 0, the first)")
    g.add_argument("--snapshot", type=_int_in("--snapshot", 1), default=None, metavar="N",
                   help="CTAs to record and count (default: 4 x the CTAs resident at once on the arch, Baghsorkhi12 sec. "
                   "3.1), after the warm-up")
    g.add_argument("--snapshot-start", type=_int_in("--snapshot-start", 0), default=None, metavar="K",
                   help="first counted CTA of the snapshot (default: just after the warm-up, where the grid leaves "
                   "room for the whole snapshot; 0 with --snapshot-warm 0)")
    g.add_argument("--snapshot-warm", type=_int_in("--snapshot-warm", 0), default=None, metavar="N",
                   help="also record the N CTAs before the snapshot's first, replayed only to warm the caches "
                   "(the steady state, not a cold start; default: one resident set, the CTAs that run at once "
                   "on all SMs, none when the snapshot is the whole grid; 0 = a cold snapshot from CTA 0)")
    g.add_argument("--step-limit", type=_int_in("--step-limit", 1), default=None, metavar="N",
                   help="emulator: warp instructions one CTA may run before it is stopped as a runaway loop "
                   "(default 67,108,864 = 2^26)")
    _add_compiler_options(g)
    if backend:
        add_backend_options(g)


def _add_ui_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--once", action="store_true",
                   help="print the report once instead of opening the UI (also when stdout is not a terminal)")
    p.add_argument("--theme", metavar="NAME", help="UI theme: tuiprof-dark (default), tuiprof-light, "
                   "tuiprof-high-contrast, or any Textual theme")
    _add_run_options(p)
    _add_collect_options(p)


def cmd_record(args: argparse.Namespace) -> int:
    """Compile and record a `.cu` target (emulator or GPU; a whole program on the GPU) into a .tptrace file."""
    from tuiprof.collect.options import KERNEL_FILE_SUFFIXES
    from tuiprof.collect.pipeline import collect_trace
    from tuiprof.session import RunConfig
    from tuiprof.trace.io import save_trace

    target = _target_arg(args.target)
    if Path(target).suffix not in KERNEL_FILE_SUFFIXES:
        raise UsageError(f"{target} is not a CUDA source (.cu) or a PTX file (.ptx)", "record compiles and runs a .cu "
                         "file (or a .ptx file's kernels); a .tptrace is already a recording")
    config = RunConfig(arch=args.arch, collect=collect_options(args))
    inputs = _checked_output(args.output, target, config, binary=True)
    from tuiprof.progress import SlowPhases

    slow = SlowPhases.on_stderr()  # compiling and emulating can take minutes: say so past 2 s
    try:
        trace = collect_trace(Path(target), config, slow.phase)
        slow.set("writing the trace")
        save_trace(trace, args.output, protect=inputs)
    finally:
        slow.close()
    where = "standard output" if args.output == "-" else shown(args.output)
    from tuiprof.toolchain.demangle import display_name

    _say(f"recorded {trace.n_accesses:,} warp accesses of {display_name(trace.launch.kernel)} "
         f"({trace.snapshot.n_ctas} CTAs) into {where}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from tuiprof.report import build_report, render

    target = _target_arg(args.target)
    config = run_config(args)
    inputs = _checked_output(args.output, target, config)
    doc = build_report(target, config)
    write_output(render(doc, args.format), args.output, protect=inputs)
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    """Two runs compared (`tuiprof.compare.diff`); exit status 1 when --fail-if-worse fails."""
    from tuiprof.arch.presets import parse_overrides
    from tuiprof.compare.cache import RunCache
    from tuiprof.compare.diff import Side, diff_document, render, run_side, vs_config

    a = _target_arg(args.a)
    b = _target_arg(args.b) if args.b is not None else a
    config = run_config(args)
    vs = {"arch": args.vs_arch, "overrides": parse_overrides(args.vs_set), "md": args.vs_md, "seed": args.vs_seed,
          "launch": Path(args.vs_launch) if args.vs_launch else None}
    if args.b is None and not any(v is not None and v != {} for v in vs.values()):
        raise UsageError("diff needs two targets, or one and a --vs-* setting for B",
                         "for example: tuiprof diff spmv-u spmv-vec-u, or tuiprof diff spmv-u --vs-md 2")
    config_b = vs_config(config, **vs)
    inputs = _checked_output(args.output, a, config) + _checked_output(args.output, b, config_b)
    cache = RunCache() if args.cache else None
    run_a, cached_a = run_side(Side("A", a, config), cache, _say)
    run_b, cached_b = run_side(Side("B", b, config_b), cache, _say)
    doc = diff_document(run_a, run_b, cached=(cached_a, cached_b), fail_if_worse=args.fail_if_worse, ops=args.op)
    write_output(render(doc, args.format), args.output, protect=inputs)
    verdict = doc["fail_if_worse"]
    if verdict is not None and verdict["failed"]:
        failed = ", ".join(c["what"] for c in verdict["checks"] if c["failed"])
        _say(f"fail-if-worse: {failed} more than {verdict['threshold_pct']:g}% worse, significantly")
        return 1
    return 0


def _checked_output(output: str | None, target: str, config: Any, binary: bool = False) -> list[Path]:
    """The files the run reads (`session.input_files`), with `output` checked against them and
    the other rules of `tuiprof.output` before any work: `-o` naming an input (the trace, the
    launch script, an --arch file), or `-o -` for a `binary` output on a terminal, is refused at
    once, not after the run."""
    from tuiprof.output import check_binary_stdout, check_output
    from tuiprof.session import input_files

    inputs = input_files(target, config)
    if output == "-" and binary:
        check_binary_stdout()
    elif output is not None and output != "-":
        check_output(output, inputs)
    return inputs


def _target_arg(target: str) -> str:
    """`target` if the file system could hold such a name; one clear error otherwise (a 5000-character
    name made `Path.exists` raise ENAMETOOLONG)."""
    from tuiprof.output import NAME_MAX

    if any(len(os.fsencode(part)) > NAME_MAX for part in Path(target).parts) or len(os.fsencode(target)) > 4095:
        raise UsageError(f"{shown(target)[:80]}…: the name is too long for a file or a demo",
                         "give the path of a .tptrace file or a demo name (see `tuiprof demos`)")
    return target


def _ui_target(target: str) -> Path:
    """The trace path of a UI target; anything that is not a file, a trace path or a demo name is
    refused here, before any UI starts, like an unknown command."""
    from tuiprof.collect.options import KERNEL_FILE_SUFFIXES
    from tuiprof.demos import demo_names, resolve_target

    path = Path(_target_arg(target))
    if path.suffix in KERNEL_FILE_SUFFIXES:
        return path
    if not path.exists() and not target.endswith(".tptrace") and os.sep not in target and target not in demo_names():
        raise UsageError(f"invalid choice: {target!r} is not a command, a file or a demo name",
                         "commands: " + ", ".join(sorted(COMMANDS)) + "; demos: `tuiprof demos`")
    return resolve_target(target)


def cmd_open(args: argparse.Namespace, target: str | None = None) -> int:
    """The terminal UI on a trace or demo; the report instead with --once or without a terminal."""
    target = target or args.target
    config = run_config(args)
    if args.arch:
        from tuiprof.arch.presets import load_arch

        load_arch(args.arch, config.overrides)  # a bad arch or override fails here, before any work
    path = _ui_target(target)
    from tuiprof.tui.themes import check_theme

    theme = check_theme(args.theme)  # an unknown theme is an error with or without a terminal
    if args.once or not sys.stdout.isatty():
        from tuiprof.report import build_report, render

        write_output(render(build_report(path, config), "text"), None)
        return 0
    if path.suffix == ".cu":
        from tuiprof.collect.pipeline import is_whole_program, record_program

        if is_whole_program(path, config.collect):  # the program's own output before the UI takes the terminal
            target = str(record_program(path, config)[1])
    from tuiprof.tui import run_app

    return run_app(target, config, theme=theme)


def cmd_demo(args: argparse.Namespace) -> int:
    return cmd_open(args, target=args.name)


def cmd_archs(args: argparse.Namespace) -> int:
    from tuiprof.arch import load_arch, preset_names

    if args.show:
        arch = load_arch(args.show)
        write_output(_arch_text(arch.to_dict()), None)
        return 0
    rows = [("name", "SMs", "MHz", "L1/SM", "L2", "line/sector", "t1", "t2", "DRAM", "description")]
    for name in preset_names():
        a = load_arch(name)
        rows.append((name, str(a.sm_count), str(a.clock_mhz), _size(a.l1.size), _size(a.l2.size),
                     f"{a.l1.line}/{a.l1.sector}", str(a.l1.hit_latency), str(a.l2.hit_latency),
                     str(a.dram.base_latency), a.description))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths)) + "  " + r[-1] for r in rows]
    write_output("\n".join(lines) + "\n\nlatencies in SM cycles; 'off' = level absent\n", None)
    return 0


def cmd_warmup(args: argparse.Namespace) -> int:
    """Compile what is not in the kernel cache yet (`tuiprof.warmup`)."""
    from tuiprof.arch.presets import preset_names

    unknown = [a for a in args.archs if a not in preset_names()]
    if unknown:
        raise UsageError(f"--arch {unknown[0]!r} is not a preset", "see `tuiprof archs`")
    if args.progress:
        os.nice(10)
    from tuiprof import warmup
    from tuiprof.jit import kernel_cache_dir

    if args.progress:
        warmup.exit_with_parent()

    def say(text: str) -> None:
        print(text, flush=True)

    ran = warmup.warm_up(warmup.plan(args.archs or None, args.emulator), say)
    if not args.progress:
        where = kernel_cache_dir()
        say(f"warmup: {'nothing to compile' if not ran else 'done'}; kernels cached in {where}" if where else
            "warmup: no writable folder for compiled kernels: every run compiles them again")
    return 0


def cmd_demos(args: argparse.Namespace) -> int:
    from tuiprof.demos import demo_table

    write_output(demo_table(), None)
    return 0


def cmd_gpu(args: argparse.Namespace) -> int:
    """build, calibrate, validate: tuiprof.cli.gpu."""
    from tuiprof.cli.gpu import run

    return run(args)


def cmd_init(args: argparse.Namespace) -> int:
    from tuiprof.progress import SlowPhases
    from tuiprof.toolchain.init_script import write_launch_script

    slow = SlowPhases.on_stderr()  # the compile that names the kernels can take a while: say so past 2 s
    try:
        slow.set(f"compiling {shown(args.kernel)} to read its kernels and parameters")
        path = write_launch_script(args.kernel, args.output, force=args.force, flags=args.cflags,
                                   compiler=args.compiler, arch=args.arch)
    finally:
        slow.close()
    print(f"wrote {shown(path)}: adapt the sizes and inputs marked 'adapt', then profile the kernel with it")
    return 0


def _size(n: int) -> str:
    """A cache size in the `archs` table: the one byte-size rendering, or 'off' for an absent level."""
    from tuiprof import units

    return units.size(n) if n else "off"


def _arch_text(d: dict[str, Any]) -> str:
    top = [f"{k} = {v!r}" for k, v in d.items() if not isinstance(v, dict)]
    sections = [f"\n[{k}]\n" + "\n".join(f"{sk} = {sv!r}" for sk, sv in v.items()) for k, v in d.items() if isinstance(v, dict)]
    return "\n".join(top) + "\n" + "\n".join(sections) + "\n"


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "report": cmd_report, "diff": cmd_diff, "archs": cmd_archs, "demos": cmd_demos, "open": cmd_open, "demo": cmd_demo,
    "init": cmd_init, "record": cmd_record, "build": cmd_gpu, "calibrate": cmd_gpu, "validate": cmd_gpu,
    "warmup": cmd_warmup,
}
_TOP_LEVEL = ("-h", "--help", "--version")
PROGRAM_COMMANDS = ("open", "report", "record", "validate")
"""Commands whose TARGET may be a program: its arguments follow ``--``."""
NVCC_NAMES = ("nvcc", "nvcc.exe")


def _with_command(argv: list[str]) -> list[str]:
    """`tuiprof TARGET [options]` is `tuiprof open TARGET [options]`."""
    if argv and argv[0] not in COMMANDS and argv[0] not in _TOP_LEVEL:
        return ["open", *argv]
    return argv


def _split_program(argv: list[str]) -> tuple[list[str], list[str], list[str]]:
    """A command line without what follows its first ``--``, the compiler command line and the
    program arguments found there: ``open app.cu -O3 -- 5`` gives the program arguments ``5``;
    ``open --once -- nvcc -o app a.cu b.cu -- 5`` gives the compiler command line ``nvcc -o app
    a.cu b.cu`` and the program arguments ``5``, its first .cu source (a.cu) becoming the TARGET."""
    if not argv or argv[0] not in PROGRAM_COMMANDS or "--" not in argv:
        return argv, [], []
    i = argv.index("--")
    head, tail = argv[:i], argv[i + 1:]
    if argv[0] == "validate" or not tail or Path(tail[0]).name not in NVCC_NAMES:
        return head, [], tail
    j = tail.index("--") if "--" in tail else len(tail)
    command, program_args = tail[:j], tail[j + 1:]
    sources = [a for a in command if a.endswith(".cu")]
    if not sources:
        raise UsageError("the nvcc command line after -- names no .cu source",
                         "for example: tuiprof -- nvcc -o app main.cu kernels.cu")
    return [head[0], sources[0], *head[1:]], command, program_args


def parse_command_line(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The parsed command line, with a program's compiler command line, nvcc arguments and own
    arguments (`compile_command`, `program_nvcc_args`, `program_args`) for the commands that take one."""
    words = _with_command(argv)
    if words[:1] == ["build"] and not any(w in ("-h", "--help") for w in words[1:2]):
        return _build_arguments(parser, words[1:])
    words, command, program_args = _split_program(words)
    args, extras = parser.parse_known_args(words)
    _program_arguments(parser, args, extras, command, program_args)
    return args


def _build_arguments(parser: argparse.ArgumentParser, rest: list[str]) -> argparse.Namespace:
    """``tuiprof build [--kernel NAME] NVCC ARGS``: everything but tuiprof's own options is the nvcc
    command line, flags first or sources first, as nvcc is called (``tuiprof build -I inc -o app
    a.cu``; a ``--`` is accepted and dropped)."""
    args = parser.parse_args(["build"])
    kernels: list[str] = []
    nvcc: list[str] = []
    i = 0
    while i < len(rest):
        word = rest[i]
        if word == "--kernel" and i + 1 < len(rest):
            kernels.append(rest[i + 1])
            i += 2
            continue
        if word.startswith("--kernel="):
            kernels.append(word.split("=", 1)[1])
        elif word != "--":
            nvcc.append(word)
        i += 1
    args.nvcc_args, args.kernels = nvcc, kernels
    return args


def _program_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace, extras: list[str],
                       command: list[str], program_args: list[str]) -> None:
    """Put a program's compiler command line, its extra nvcc arguments (the options tuiprof does
    not know, after a .cu TARGET that is a whole program) and its arguments into `args`; refuse
    unknown options anywhere else, as argparse would."""
    if args.command not in PROGRAM_COMMANDS:
        if extras:
            parser.error(f"unrecognized arguments: {' '.join(extras)}")
        return
    args.compile_command, args.program_args, args.program_nvcc_args = command, program_args, extras
    source = args.command != "validate" and args.target.endswith(".cu")
    if program_args and args.command != "validate" and not source:
        raise UsageError(f"arguments after -- are a program's, and {args.target} is a trace, not a program",
                         "a .cu source that defines main() runs as a program: tuiprof app.cu -- ARGS")
    if not extras:
        return
    if not source or command:
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    from tuiprof.collect.pipeline import is_whole_program

    if not is_whole_program(Path(args.target), collect_options(args)):
        raise UsageError(f"unrecognized arguments: {' '.join(extras)}",
                         f"{Path(args.target).name} is profiled as a kernel file (it defines no main(), or --launch or "
                         "--backend emu is given): its compiler flags go in --cflag=FLAG; nvcc arguments follow the "
                         "source of a whole program")


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM or SIGHUP (the terminal closed): stop any compiler tuiprof started and remove its
    temporary folders, remove any half-written output, then die of the signal as before."""
    import signal

    from tuiprof.output import discard_pending

    child = sys.modules.get("tuiprof.toolchain.child")
    if child is not None:  # compilers running: stop them, remove their temporary folders
        child.stop_all()
    discard_pending()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def main(argv: Sequence[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and hasattr(stream, "reconfigure"):
            # PYTHONIOENCODING=ascii with a non-ASCII source: escape, never a UnicodeEncodeError.
            stream.reconfigure(errors="backslashreplace")
    import signal

    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None and signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _terminate)
    parser = build_parser()
    try:
        args = parse_command_line(parser, list(sys.argv[1:] if argv is None else argv))
        if args.command is None:
            from tuiprof.output import write_stdout

            write_stdout(parser.format_help())
            return 0
        return COMMANDS[args.command](args)
    except TuiprofError as exc:
        _say(exc.render())
        return exc.exit_code
    except SystemError as exc:  # a compiled kernel's failure (a stale compiled-code cache) is said as one; others are bugs
        jit = sys.modules.get("tuiprof.jit")
        failure = jit.kernel_failure(exc) if jit is not None else None
        if failure is None:
            raise
        _say(failure.render())
        return failure.exit_code
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    except BrokenPipeError:
        # `tuiprof report x | head`: the reader went away; exit quietly, and keep Python from
        # complaining about the pipe again while it flushes stdout at exit.
        from tuiprof.output import quiet_stdout

        quiet_stdout()
        return 0
