"""Every demo kernel runs, through its launch script, on the CPU (``tests/support/cpu_device.py``: the
``.cu`` compiled by g++, one fiber per CUDA thread) and its outputs pass the script's ``check``
against the NumPy reference: kernels, scripts and references agree before any emulator runs them.
Some scripts run smaller than the demo (their size constants overridden) to keep this quick; the
kernels do not depend on the sizes beyond the grid.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from tests.support import cpu_device

pytestmark = pytest.mark.skipif(not cpu_device.available(), reason="needs g++ on Linux x86-64")

DEMO = Path(__file__).resolve().parents[2] / "demo_traces"
SMALLER: dict[str, dict[str, int]] = {
    **{s: {"ROWS": 16384} for s in ("spmv_launch.py", "spmv_launch_b.py", "spmv_launch_u128.py", "spmv_launch_b128.py",
                                    "spmv_launch_vec_u.py", "spmv_launch_vec_b.py", "spmv_launch_vec_u128.py",
                                    "spmv_launch_vec_b128.py")},
    **{s: {"N": 256} for s in ("matmul_launch.py", "matmul_tiles_launch_8.py", "matmul_tiles_launch.py",
                               "matmul_tiles_launch_32.py", "transpose_launch.py")},
    "stencil_launch.py": {"NX": 64, "NY": 64, "NZ": 64},
    "cyclic_reduction_launch.py": {"SYSTEMS": 64},
}
"""Size constants overridden per script (others run at the demo's size)."""

Builder = Callable[[Path], cpu_device.CpuDevice]


def load_script(path: Path, overrides: dict[str, int]) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"cpu_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, value in overrides.items():
        assert isinstance(getattr(module, name), int), name
        setattr(module, name, value)
    return module


@pytest.fixture(scope="module")
def device(tmp_path_factory: pytest.TempPathFactory) -> Builder:
    """A fresh CpuDevice for a kernel file; each file is compiled once."""
    out = tmp_path_factory.mktemp("cpu_cuda")
    built: dict[Path, tuple[Path, dict[str, int]]] = {}

    def make(source: Path) -> cpu_device.CpuDevice:
        if source not in built:
            built[source] = cpu_device.build(source, out)
        return cpu_device.CpuDevice(*built[source])
    return make


@pytest.mark.parametrize("script", sorted(p.name for p in DEMO.glob("*_launch*.py")))
def test_kernel_passes_its_scripts_check(script: str, device: Builder) -> None:
    module = load_script(DEMO / script, SMALLER.get(script, {}))
    dev = device(DEMO / (script.split("_launch")[0] + ".cu"))
    module.check(module.setup(dev))
    assert dev.launches


def test_a_wrong_kernel_fails_the_check(device: Builder, tmp_path: Path) -> None:
    """The same run with one index of the tiled matmul swapped (Bs[k][ty] for Bs[k][tx])."""
    source = (DEMO / "matmul_tiles.cu").read_text()
    assert source.count("Bs[k][tx]") == 1
    wrong = tmp_path / "matmul_tiles.cu"
    wrong.write_text(source.replace("Bs[k][tx]", "Bs[k][ty]"))
    module = load_script(DEMO / "matmul_tiles_launch_8.py", {"N": 64})
    outputs = module.setup(device(wrong))
    with pytest.raises(AssertionError):
        module.check(outputs)


def test_unwritten_output_fails_the_check(device: Builder) -> None:
    """`empty` buffers hold a byte pattern: a launch that writes nothing cannot pass."""
    class NoLaunch(cpu_device.CpuDevice):
        def launch(self, *args: object, **kwargs: object) -> None:
            pass

    module = load_script(DEMO / "vecadd_launch.py", {})
    real = device(DEMO / "vecadd.cu")
    with pytest.raises(AssertionError):
        module.check(module.setup(NoLaunch(Path(real.lib._name), real.params)))
