"""Helpers of the emulator tests: compile a CUDA file of tests/cuda to PTX (nvcc found as tuiprof
finds it, else NVRTC; skipping when there is neither), and run one kernel on an EmuDevice with
NumPy inputs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from tests.support.ptx_support import compile_ptx, require_compiler
from tuiprof.collect.emu.device import EmuDevice, RecordChoice
from tuiprof.ptx.module import Module
from tuiprof.ptx.parse import parse_module

CUDA = Path(__file__).resolve().parents[1] / "cuda"


class Compiler:
    """PTX with line info (`compile_ptx`) into a folder of the test session, each file compiled once."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.done: dict[tuple[str, str], Module] = {}

    def __call__(self, name: str, arch: str = "sm_80", debug: bool = False) -> tuple[Module, str, str]:
        """(module, source path, source text) of ``tests/cuda/<name>.cu`` (``-G`` when `debug`)."""
        return self.file(CUDA / f"{name}.cu", arch, debug)

    def file(self, src: Path, arch: str = "sm_80", debug: bool = False) -> tuple[Module, str, str]:
        """(module, source path, source text) of any CUDA file."""
        name = src.stem
        key = (name, arch + ("-G" if debug else ""))
        if key not in self.done:
            ptx = compile_ptx(src, int(arch.removeprefix("sm_")), self.out / f"{name}.{key[1]}.ptx", debug)
            self.done[key] = parse_module(ptx)
        return self.done[key], str(src), src.read_text()


def run(compiled: tuple[Module, str, str], kernel: str, grid, block, args: Sequence[object], shared: int = 0,
        **device_options) -> list[np.ndarray | None]:
    """Launch `kernel` with NumPy arrays copied to the device (scalars passed as they are); the
    arrays read back after the launch, None for scalars."""
    module, src, text = compiled
    dev = EmuDevice(module, src, text, record=RecordChoice(snapshot=()), **device_options)
    dargs = [dev.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    dev.launch(kernel, grid, block, dargs, shared=shared)
    return [dev.from_device(d) if isinstance(a, np.ndarray) else None for a, d in zip(args, dargs)]


@pytest.fixture(scope="session")
def cuda_ptx(tmp_path_factory: pytest.TempPathFactory) -> Compiler:
    """Compile tests/cuda/<name>.cu to PTX once per session (import this fixture into a test module)."""
    require_compiler()
    return Compiler(tmp_path_factory.mktemp("emu_ptx"))
