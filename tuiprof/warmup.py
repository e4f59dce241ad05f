"""`tuiprof warmup`: compile the kernels now, so that no later run waits for them.

A first run after an install or an upgrade compiles the simulator's Numba kernels (seconds per GPU
preset) and, for a `.cu` target, the emulator's (about a minute). Numba caches machine code on
disk (`tuiprof.jit`), but the cache is tied to the install path, the source files' times and the
CPU, so it cannot ship inside the wheel: it is made on the user's machine, either by `tuiprof
warmup` or, on the first launch of the UI, in the background (`tuiprof warmup --progress`, started
by `tuiprof.tui.app`, whose status line shows each step).

A step per GPU preset runs a one-trial session, its MD sweep included, of a small demo with global
and shared-memory accesses on that preset: the trace codec, coalescing, scheduling, the replay
kernel of the preset's family (`tuiprof.sim.replay.Family`: every MD and size what-if of it) and
the analysis kernels. The emulator's step records the vecadd demo in the emulator, then runs its
launch on each other variant of the interpreter (`interp.VARIANTS`: a kernel with branches,
barriers or atomics runs on a larger one, 5-35 s of CPU each to compile).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

WARMUP_DEMO = "transpose-tiled"
"""A small demo (82K warp accesses) with global and shared-memory ops."""
EMULATOR_DEMO = "vecadd"
EMULATOR = "emulator"


@dataclass(frozen=True)
class Step:
    """One thing to compile: the simulator for a preset, or the emulator (`EMULATOR`)."""

    target: str

    @property
    def what(self) -> str:
        return "the emulator" if self.target == EMULATOR else f"the simulator for {self.target}"


def plan(archs: Sequence[str] | None = None, emulator: bool = True) -> list[Step]:
    """The steps for `archs` (default: every preset), then the emulator's."""
    from tuiprof.arch.presets import preset_names

    return [Step(a) for a in (archs or preset_names())] + ([Step(EMULATOR)] if emulator else [])


def needed(step: Step) -> bool:
    """Whether `step` would compile anything: its kernels are neither loaded in this process nor
    in the on-disk cache (imports Numba)."""
    from tuiprof.jit import is_cached

    if step.target == EMULATOR:
        from tuiprof.collect.emu.kernel.interp import VARIANTS, interpreter

        return not all(is_cached(interpreter(v)) for v in VARIANTS)
    from tuiprof.arch.presets import load_arch
    from tuiprof.model.wavefronts import wavefronts
    from tuiprof.sim.coalesce import _fill_requests
    from tuiprof.sim.prepared import pack_arch
    from tuiprof.sim.replay import Geometry, replay_cached
    from tuiprof.sim.schedule import weighted_round_robin

    family = Geometry.of(pack_arch(load_arch(step.target))).family
    return not (replay_cached(family) and all(is_cached(k) for k in (weighted_round_robin, _fill_requests, wavefronts)))


def run_step(step: Step) -> None:
    """Compile (or load) `step`'s kernels by running them once on a small demo."""
    from tuiprof.demos import demo_collection, load, resolve_target
    from tuiprof.session import RunConfig, Session

    if step.target == EMULATOR:
        from tuiprof.collect.emu.kernel.interp import VARIANTS, interpreter
        from tuiprof.collect.pipeline import collect_trace
        from tuiprof.jit import is_cached

        source, options = demo_collection(EMULATOR_DEMO)
        collect_trace(source, RunConfig(collect=replace(options, backend="emu")))
        _emulate_on([v for v in VARIANTS[1:] if not is_cached(interpreter(v))])
        return
    trace = load(resolve_target(WARMUP_DEMO))
    Session(trace, RunConfig(arch=step.target, trials=1, sweep_trials=1, tolerance=None, threads=1)).run()


def _emulate_on(variants: Sequence[frozenset[int]]) -> None:
    """Run the emulator's demo launch on each interpreter variant of `variants`, compiling it
    (every variant holds the demo's families: `interp.ALWAYS_COMPILED`); its source compiled and
    read once."""
    if not variants:
        return
    from tuiprof.arch.presets import load_arch
    from tuiprof.collect.emu.device import EmuDevice, RecordChoice
    from tuiprof.collect.pipeline import DEFAULT_CU_ARCH
    from tuiprof.collect.script import read_launch_script
    from tuiprof.demos import demo_collection
    from tuiprof.ptx.parse import parse_module
    from tuiprof.toolchain.compile import load_program

    source, options = demo_collection(EMULATOR_DEMO)
    if options.launch is None:
        raise RuntimeError(f"demo {EMULATOR_DEMO} has no launch script")
    script = read_launch_script(options.launch).load()
    program = load_program(source, compute_capability=load_arch(script.arch or DEFAULT_CU_ARCH).cc)
    module = parse_module(program.ptx)
    for families in variants:
        dev = EmuDevice(module, source.name, program.source.text or None, record=RecordChoice(snapshot=()),
                        threads=1)
        dev.families = families
        script.run(dev)


def warm_up(steps: Sequence[Step], say: Callable[[str], None]) -> int:
    """Run the steps that are `needed`, saying each as it starts and how long it took; returns
    how many ran."""
    from tuiprof.jit import compiles_announced

    todo = [s for s in steps if needed(s)]
    for i, step in enumerate(todo, 1):
        say(f"warmup: compiling {step.what} ({i} of {len(todo)})")
        t0 = time.perf_counter()
        with compiles_announced():  # not the runs' own "note: compiling ..." as well
            run_step(step)
        say(f"warmup: {step.what} ready in {time.perf_counter() - t0:.0f} s")
    return len(todo)


def exit_with_parent() -> None:
    """End this process (a background warm-up) as soon as the process that started it is gone:
    a UI closed with its terminal must leave nothing spinning."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="tuiprof-warmup-watch", daemon=True).start()


def background_command() -> list[str]:
    """How the UI starts a warm-up beside itself (`--progress`: one line per step, niced, ends
    with its parent)."""
    return [sys.executable, "-m", "tuiprof", "warmup", "--progress"]


__all__ = ["EMULATOR", "Step", "background_command", "exit_with_parent", "needed", "plan", "run_step", "warm_up"]
