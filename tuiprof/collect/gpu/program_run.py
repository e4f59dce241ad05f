"""Profiling a whole program built by `tuiprof.toolchain.wholeprog`: run it twice under its host runtime
(a counting run, then a recording run of the chosen launch's snapshot), and turn the record file
into a Trace. The launch is not known before the counting run, so that run counts the CTAs any
snapshot may take (`snapshot_span`: its warm-up and counted CTAs), not the whole grid.

The program runs in the caller's folder, with the arguments the user gave, its own output shown on
standard error (tuiprof's standard output is the report's) and no standard input (it runs twice).
Its exit status is reported; a crash after the chosen launch still keeps the trace (the record
file is complete once written), a crash before it is one clear error. The program must make the
same launches in both runs (deterministic control flow); if it does not,
`tuiprof.collect.gpu.records.check_regions` says so instead of losing records silently.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tuiprof import __version__
from tuiprof.arch.occupancy import occupancy
from tuiprof.arch.spec import Arch
from tuiprof.collect.gpu.records import LaunchRecords, RecordsError, build_trace, read_record_file
from tuiprof.errors import TuiprofError
from tuiprof.toolchain.wholeprog import WholeProgram
from tuiprof.trace.data import Launch, Provenance, SourceFile, Trace
from tuiprof.trace.snapshot import choose_snapshot, snapshot_span


class ProgramError(TuiprofError):
    """The profiled program failed before its chosen launch was recorded."""


@dataclass(frozen=True)
class ProgramRun:
    """A whole program's trace, with both runs' exit statuses and what is worth saying about them."""

    trace: Trace
    exits: tuple[int, int]
    notes: tuple[str, ...]
    binary: Path
    """The instrumented binary that ran."""


def resolve_kernel(prog: WholeProgram, name: str | None) -> str | None:
    """The PTX symbol of the kernel `name` names (symbol, demangled signature, or the C++ name as
    written, `tuiprof.toolchain.names`); None for "the first kernel launched"."""
    from tuiprof.toolchain.names import find_symbol

    if name is None:
        return None
    return find_symbol(name, tuple(prog.kernels), where="the program")


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def run_program(binary: Path, args: Sequence[str], env: dict[str, str], timeout: float | None,
                cwd: Path | None = None) -> int:
    """Run the program in its own process group (a timeout or an interrupt ends its children too),
    its output shown on tuiprof's standard error (standard output is the report's); its exit status
    (negative: killed by that signal)."""
    try:
        proc = subprocess.Popen([str(binary), *args], env=env, cwd=cwd, start_new_session=True, stdout=2,
                                stdin=subprocess.DEVNULL)
    except OSError as exc:
        raise ProgramError(f"cannot run {binary}: {exc.strerror}", "check that the build produced it") from None
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ProgramError(f"{binary.name} ran longer than {timeout:g} s", "give it smaller inputs, or a longer --timeout") from None
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()


def _one_launch(path: Path, code: int, what: str, name: str) -> LaunchRecords:
    if not path.is_file():
        if code != 0:
            raise ProgramError(f"{name} {_describe_exit(code)} before the chosen launch was recorded ({what} run)",
                               "its own messages are above; the program must run correctly on this GPU")
        raise ProgramError(f"{name} never made the chosen launch ({what} run)",
                           "check --kernel and --launch-index, and that the program launches kernels it was built "
                           "with (the runtime's [tuiprof] lines above say more)")
    try:
        launches = read_record_file(path)
    except RecordsError as exc:
        raise ProgramError(f"{what} run: {exc.message}", exc.hint) from None
    if len(launches) != 1:
        raise ProgramError(f"the {what} run wrote {len(launches)} launches instead of one", "please report it")
    return launches[0]


def collect_program(prog: WholeProgram, args: Sequence[str], *, arch: Arch, kernel: str | None = None,
                    launch_index: int = 0, snapshot_ctas: int | None = None, snapshot_start: int | None = 0,
                    timeout: float | None = None, cwd: Path | None = None,
                    snapshot_warm: int | None = 0) -> ProgramRun:
    """Profile launch `launch_index` of `kernel` (default: of any kernel) of the built program;
    the snapshot's options are `choose_snapshot`'s (None: the command line's defaults, a warm-up
    of one resident set before the counted CTAs)."""
    from tuiprof.collect.gpu.driver import _open_driver, device_generator, require_gpu
    from tuiprof.collect.gpu.occupancy import probe_occupancy
    from tuiprof.ptx.ops import op_sources, static_ops
    from tuiprof.toolchain.wholeprog import linked_module

    require_gpu(f"profiling {prog.binary.name}", hint="whole programs run on the GPU; a kernel file with a launch "
                "script runs in the emulator (--backend emu)")
    symbol = resolve_kernel(prog, kernel)
    base_env = dict(os.environ, TUIPROF_KERNEL=symbol or "", TUIPROF_LAUNCH=str(launch_index))
    notes: list[str] = []
    name = prog.binary.name
    with tempfile.TemporaryDirectory(prefix="tuiprof-run-") as tmp:
        count_file, record_file = Path(tmp) / "count.tprec", Path(tmp) / "record.tprec"
        # the counting run counts only the CTAs a snapshot (its warm-up included) may take: the
        # launch is not known yet
        count_lo, count_hi = snapshot_span(arch, snapshot_ctas, snapshot_start, snapshot_warm)
        code1 = run_program(prog.binary, args, dict(base_env, TUIPROF_MODE="count", TUIPROF_OUT=str(count_file),
                                                    TUIPROF_COUNT_LO=str(count_lo),
                                                    TUIPROF_COUNT_HI=str(count_hi)), timeout, cwd)
        counted = _one_launch(count_file, code1, "counting", name)
        if code1 != 0:
            notes.append(f"the counting run {_describe_exit(code1)} after the chosen launch")
        module = prog.module_with(counted.kernel)
        res = module.resources.get(counted.kernel)
        regs = res.registers_per_thread if res else 0
        static_shared = res.static_shared if res else 0
        threads = counted.block[0] * counted.block[1] * counted.block[2]
        md = occupancy(arch, threads, regs, static_shared, counted.dynamic_shared).ctas_per_sm
        launch = Launch(kernel=counted.kernel, grid=counted.grid, block=counted.block, registers_per_thread=regs,
                        static_shared=static_shared, dynamic_shared=counted.dynamic_shared, ctas_per_sm=md)
        snapshot = choose_snapshot(launch, arch, ctas=snapshot_ctas, start=snapshot_start, warm=snapshot_warm)
        lo, hi = int(snapshot.cta_ids[0]), int(snapshot.cta_ids[0]) + snapshot.n_ctas
        code2 = run_program(prog.binary, args, dict(base_env, TUIPROF_MODE="record", TUIPROF_OUT=str(record_file),
                                                    TUIPROF_COUNTS=str(count_file), TUIPROF_CTA_LO=str(lo),
                                                    TUIPROF_CTA_HI=str(hi)), timeout, cwd)
        rec = _one_launch(record_file, code2, "recording", name)
        if code2 != 0:
            notes.append(f"the recording run {_describe_exit(code2)} after the chosen launch; the trace is complete")
    if (rec.kernel, rec.grid, rec.block, rec.dynamic_shared, rec.cta_lo, rec.cta_hi) != \
            (counted.kernel, counted.grid, counted.block, counted.dynamic_shared, lo, hi):
        raise ProgramError("the two runs made different launches (kernel, grid or snapshot differ)",
                           "the program must make the same launches every time it runs")
    if rec.kernel not in set(prog.kernels):
        from tuiprof.toolchain.demangle import demangle

        raise ProgramError(f"the launch recorded is of {demangle(rec.kernel)[:200]}, which the build left without probes "
                           "(a library kernel: Thrust's, CUB's)", "profile it by name, --kernel NAME, so that the "
                           "build probes it (or choose one of the program's own kernels)")
    records = rec.records()
    tags = set(records.tag.tolist())
    owners = [t for t in tags if rec.kernel in prog.module_by_tag(t).kernels]
    if len(owners) == 1:  # the kernel's own module (a multi-arch build defines it in several)
        module = prog.module_by_tag(owners[0])
    mod, lent = linked_module(prog, module)
    source_text = _read(module.source)
    table = static_ops(mod, rec.kernel, module.source, source_text)
    try:
        drv = _open_driver("cuda-bindings")
        info = drv.info
        drv.close()
        gen: dict[str, object] = device_generator(info)
        gpu_name = info.name
        if module.probe_registers.get(rec.kernel):
            gen["probe_occupancy"] = probe_occupancy(info, launch, module.probe_registers[rec.kernel])
    except TuiprofError:
        gen, gpu_name = {}, ""
    gen.update({"program": str(prog.binary), "args": list(args), "launch_index": launch_index,
                "record_ms": rec.elapsed_ns / 1e6, "count_ms": counted.elapsed_ns / 1e6,
                "snapshot_words": int(rec.used.sum()), "module_tag": module.tag})
    provenance = Provenance(backend="gpu", arch=arch.name, gpu=gpu_name, tool_version=__version__,
                            date=datetime.date.today().isoformat(), generator=gen)
    local = res.local_bytes_per_thread if res else 0
    sources = list(op_sources(mod, module.source, source_text, None, tuple({o.id: o for _, _, o in table}.values())))
    sources += [SourceFile(prog.module_by_tag(t).source, _read(prog.module_by_tag(t).source) or "")
                for t in sorted(lent) if prog.module_by_tag(t).source != module.source]
    trace = build_trace(launch=launch, table=table, sites=module.sites, tag=module.tag, snapshot=snapshot,
                        words=rec.words, woff=rec.woff, used=rec.used, cta=rec.cta, local_bytes=local,
                        sources=tuple(sources), provenance=provenance, other_sites=lent)
    return ProgramRun(trace, (code1, code2), tuple(notes), prog.binary)


def profile_sources(nvcc_args: Sequence[str], program_args: Sequence[str], *, arch: Arch, kernel: str | None = None,
                    launch_index: int = 0, snapshot_ctas: int | None = None, snapshot_start: int | None = 0,
                    timeout: float | None = None, cwd: Path | None = None,
                    snapshot_warm: int | None = 0) -> ProgramRun:
    """`tuiprof app.cu [nvcc flags] [-- program args]` and `tuiprof -- nvcc -o app a.cu b.cu`: build
    the program instrumented (in the user cache, keyed by the command line and the sources'
    contents, so an unchanged program is not rebuilt), then profile it. A leading ``nvcc`` word
    and any ``-o`` are dropped: the binary lives in the cache."""
    from tuiprof.collect.gpu.driver import require_gpu
    from tuiprof.resources import user_cache_dir
    from tuiprof.toolchain.wholeprog import _output_of, build_instrumented, check_args, load_whole_program

    require_gpu("profiling a whole program", hint="whole programs run on the GPU; a kernel file with a launch "
                "script runs in the emulator (--backend emu)")
    args = list(nvcc_args)
    if args and Path(args[0]).name in ("nvcc", "nvcc.exe"):
        args = args[1:]
    check_args(args)
    args, _ = _output_of(args)
    folder = Path(cwd) if cwd is not None else Path.cwd()
    h = hashlib.sha256("\0".join(args).encode() + str(folder.resolve()).encode())
    h.update(instrumenter_digest())  # a build by other probes is not reused
    h.update(f"\0kernel={kernel or ''}".encode())  # --kernel probes that kernel alone
    for a in args:
        p = folder / a
        if p.suffix in (".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc") and p.is_file():
            h.update(p.read_bytes())
    binary = user_cache_dir() / "programs" / h.hexdigest()[:20] / "app"
    try:
        prog = load_whole_program(binary) if binary.is_file() else None
    except TuiprofError:
        prog = None
    if prog is None:
        binary.parent.mkdir(parents=True, exist_ok=True)
        prog = build_instrumented(args, binary, cwd=folder, kernels=(kernel,) if kernel else ())
    return collect_program(prog, program_args, arch=arch, kernel=kernel, launch_index=launch_index,
                           snapshot_ctas=snapshot_ctas, snapshot_start=snapshot_start, timeout=timeout, cwd=folder,
                           snapshot_warm=snapshot_warm)


def instrumenter_digest() -> bytes:
    """What a cached instrumented build depends on besides the program: the instrumentation pass
    and the build's own code (the probes, the register caps, the metadata)."""
    from tuiprof.ptx import instrument
    from tuiprof.toolchain import wholeprog

    h = hashlib.sha256()
    for mod in (instrument, wholeprog):
        h.update(Path(mod.__file__).read_bytes())  # type: ignore[arg-type]
    return h.digest()


def _read(path: str) -> str | None:
    """A module's source text for the trace (None when it cannot be read: a regular file of a
    trace's size at most, read by the one bounded reader, never a device or a FIFO)."""
    from tuiprof.toolchain.headers import read_text

    try:
        return read_text(Path(path))
    except TuiprofError:
        return None


__all__ = ["ProgramError", "ProgramRun", "collect_program", "profile_sources", "resolve_kernel", "run_program"]
