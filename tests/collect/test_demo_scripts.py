"""The demo launch scripts (``demo_traces/*_launch*.py``) checked without running a kernel.

A recording device (NumPy only, it executes nothing) runs each script's ``setup``: the script
must allocate exactly as the demo's synthetic model does (same order and sizes, hence the same
cudaMalloc-like bases), pass each kernel parameter the array the model gives that name, and launch
the kernel with the grid, block, shared memory and argument types its signature asks for (the
``.cu`` text, and the PTX ``.entry`` when nvcc is installed). Each script's NumPy ``reference`` is
checked against independent truth (explicit loops, a dense solver, a queue-based BFS), and each
``check`` must reject a wrong answer. Running the kernels themselves is the emulator's test.
"""

from __future__ import annotations

import importlib.util
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests.support.ptx_support import compile_ptx, needs_compiler
from tuiprof.demos import CATALOGUE
from tuiprof.trace import synth
from tuiprof.trace.packed import lane_addresses

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "demo_traces"
Dim3 = tuple[int, int, int]


# ---- a device that records what a launch script asks for ---------------------------------------

@dataclass(frozen=True)
class FakeBuffer:
    """One allocation: its place in allocation order, base address, size and element type."""

    index: int
    base: int
    nbytes: int
    dtype: np.dtype
    shape: tuple[int, ...]


@dataclass(frozen=True)
class FakeLaunch:
    kernel: str
    grid: Dim3
    block: Dim3
    args: tuple[FakeBuffer | np.generic, ...]
    shared: int


def _dim3(v: object) -> Dim3:
    """The launch API's grid/block: an int or a 3-tuple of ints, nothing else."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v), 1, 1)
    assert isinstance(v, tuple) and len(v) == 3 and all(isinstance(x, (int, np.integer)) for x in v), v
    return (int(v[0]), int(v[1]), int(v[2]))


class FakeDevice:
    """The launch-script API over NumPy: records allocations (with ``synth.allocate``'s bases)
    and launches, runs nothing; ``from_device`` returns what was uploaded (zeros if nothing)."""

    def __init__(self) -> None:
        self.buffers: list[FakeBuffer] = []
        self.launches: list[FakeLaunch] = []
        self.host: dict[int, np.ndarray] = {}

    def _keep(self, host: np.ndarray) -> FakeBuffer:
        assert host.nbytes > 0
        sizes = {b.index: b.nbytes for b in self.buffers} | {len(self.buffers): host.nbytes}
        buf = FakeBuffer(len(self.buffers), synth.allocate(sizes)[len(self.buffers)], host.nbytes, host.dtype,
                         host.shape)
        self.buffers.append(buf)
        self.host[buf.index] = host
        return buf

    def to_device(self, array: np.ndarray) -> FakeBuffer:
        assert isinstance(array, np.ndarray)
        return self._keep(np.array(array, copy=True))

    def empty(self, shape: int | tuple[int, ...], dtype: type) -> FakeBuffer:
        return self._keep(np.zeros(shape, dtype))

    def zeros(self, shape: int | tuple[int, ...], dtype: type) -> FakeBuffer:
        return self._keep(np.zeros(shape, dtype))

    def launch(self, name: str, grid: object, block: object, args: tuple[object, ...], shared: int = 0) -> None:
        checked = tuple(a for a in args if isinstance(a, (FakeBuffer, np.generic)))
        assert len(checked) == len(args), f"{name}: an argument is neither a buffer nor a NumPy scalar"
        self.launches.append(FakeLaunch(name, _dim3(grid), _dim3(block), checked, int(shared)))

    def from_device(self, buf: FakeBuffer) -> np.ndarray:
        return self.host[buf.index].copy()


def load_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"demo_launch_{name[:-3]}", DEMO / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Run:
    """What one script's ``setup`` did on the recording device (host arrays dropped)."""

    buffers: tuple[FakeBuffer, ...]
    launches: tuple[FakeLaunch, ...]


def run_setup(name: str, device: Callable[[], FakeDevice] = FakeDevice) -> Run:
    dev = device()
    out = load_script(name).setup(dev)
    assert isinstance(out, dict) and all(isinstance(v, np.ndarray) for v in out.values())
    return Run(tuple(dev.buffers), tuple(dev.launches))


# ---- kernel signatures ------------------------------------------------------------------------

C_DTYPES = {"float": np.float32, "double": np.float64, "int": np.int32, "unsigned int": np.uint32,
            "unsigned": np.uint32, "unsigned char": np.uint8}


@dataclass(frozen=True)
class Param:
    name: str
    ctype: str
    pointer: bool


@cache
def signatures(source: str) -> dict[str, tuple[Param, ...]]:
    """The parameters of every ``extern "C" __global__`` kernel of a demo source."""
    text = (DEMO / source).read_text()
    out = {}
    for kernel, params in re.findall(r'extern "C" __global__ void (\w+)\(([^)]*)\)', text):
        ps = []
        for p in params.split(","):
            m = re.fullmatch(r"(?:const\s+)?([\w ]+?)\s*(\*?)\s*(\w+)", " ".join(p.split()))
            assert m, p
            ps.append(Param(m.group(3), m.group(1), bool(m.group(2))))
        out[kernel] = tuple(ps)
    return out


@cache
def ptx_entries(source: str, tmp: Path) -> dict[str, tuple[str, ...]]:
    """PTX parameter types (``u64``, ``u32``, ``f32`` ...) of every entry, from nvcc -ptx (NVRTC
    without nvcc)."""
    text = compile_ptx(DEMO / source, 75, tmp / (source + ".ptx"))
    return {name: tuple(re.findall(r"\.param\s+\.(\w+)", params))
            for name, params in re.findall(r"\.entry\s+(\w+)\s*\(([^)]*)\)", text)}


# ---- the demos ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    script: str
    source: str
    kernel: str
    grid: Dim3
    block: Dim3
    allocations: tuple[tuple[type, int | None], ...]
    """Every allocation in order: element type and count (None: depends on the generated data)."""
    shared: int = 0
    model: Callable[[], synth.Kernel] | None = None
    """The synthetic model whose allocations the script reproduces (None: no model yet)."""
    device: Callable[[], FakeDevice] = FakeDevice
    """The recording device its ``setup`` runs on (one that answers data-dependent loops)."""


def _spmv(script: str, vectorized: bool, distribution: str, mean: int) -> Case:
    def model() -> synth.Kernel:
        matrix = synth.csr_pattern(distribution, 1 << 17, 32768, mean, 2012, known_rows=0)
        return synth.SpmvVector(matrix) if vectorized else synth.SpmvScalar(matrix)
    rows = 1 << 17
    return Case(script, "spmv.cu", "spmv_csr_vector4" if vectorized else "spmv_csr_scalar", (512, 1, 1), (256, 1, 1),
                ((np.uint32, rows + 1), (np.uint32, None), (np.float32, None), (np.float32, 32768),
                 (np.float32, rows)), model=model)


def _matmul_tiles(script: str, tile: int) -> Case:
    return Case(script, "matmul_tiles.cu", f"matmul_tile{tile}", (1024 // tile, 1024 // tile, 1), (tile, tile, 1),
                ((np.float32, 1024 ** 2),) * 3)


CASES = [
    Case("vecadd_launch.py", "vecadd.cu", "kernel_vec_add", (320, 1, 1), (64, 1, 1), ((np.int32, 20480),) * 3,
         model=lambda: synth.VecAdd(20480, 64)),
    _spmv("spmv_launch.py", False, "random", 32),
    _spmv("spmv_launch_b.py", False, "block", 32),
    _spmv("spmv_launch_u128.py", False, "random", 128),
    _spmv("spmv_launch_b128.py", False, "block", 128),
    _spmv("spmv_launch_vec_u.py", True, "random", 32),
    _spmv("spmv_launch_vec_b.py", True, "block", 32),
    _spmv("spmv_launch_vec_u128.py", True, "random", 128),
    _spmv("spmv_launch_vec_b128.py", True, "block", 128),
    Case("transpose_launch.py", "transpose.cu", "transpose_naive", (64, 64, 1), (32, 8, 1),
         ((np.float32, 2048 ** 2),) * 2, model=lambda: synth.TransposeNaive(2048)),
    Case("transpose_launch_tiled.py", "transpose.cu", "transpose_tiled", (64, 64, 1), (32, 8, 1),
         ((np.float32, 2048 ** 2),) * 2, model=lambda: synth.TransposeTiled(2048)),
    Case("matmul_launch.py", "matmul.cu", "matmul16", (64, 64, 1), (16, 16, 1), ((np.float32, 1024 ** 2),) * 3,
         model=lambda: synth.Matmul16(1024)),
    Case("stencil_launch.py", "stencil.cu", "stencil7", (8, 32, 256), (32, 8, 1), ((np.float32, 256 ** 3),) * 2,
         model=lambda: synth.Stencil7(256, 256, 256)),
    _matmul_tiles("matmul_tiles_launch_8.py", 8),
    _matmul_tiles("matmul_tiles_launch.py", 16),
    _matmul_tiles("matmul_tiles_launch_32.py", 32),
    # dynamic shared memory: five float arrays of 512 (CR) or 512 + 511 // 32 = 527 (CR-NBC) elements
    Case("cyclic_reduction_launch.py", "cyclic_reduction.cu", "cr", (512, 1, 1), (256, 1, 1),
         ((np.float32, 512 * 512),) * 5, shared=5 * 4 * 512),
    Case("cyclic_reduction_launch_nbc.py", "cyclic_reduction.cu", "cr_nbc", (512, 1, 1), (256, 1, 1),
         ((np.float32, 512 * 512),) * 5, shared=5 * 4 * 527),
    Case("bfs_launch.py", "bfs.cu", "bfs_expand", (128, 1, 1), (512, 1, 1),
         ((np.int32, 65537), (np.int32, None), (np.uint8, 65536), (np.uint8, 65536), (np.uint8, 65536),
          (np.int32, 65536), (np.uint8, 1)), device=lambda: BfsLevelsDevice()),
]


def test_every_launch_script_and_source_is_covered() -> None:
    scripts = {p.name for p in DEMO.glob("*_launch*.py")}
    assert scripts == {c.script for c in CASES}
    assert {c.source for c in CASES} == {p.name for p in DEMO.glob("*.cu")}
    for c in CASES:  # the naming scheme: <source stem>_launch[_<variant>].py
        assert c.script.startswith(Path(c.source).stem + "_launch")
    assert {Path(c.source).stem + "_launch.py" for c in CASES} <= scripts  # every source has a default
    shipped = {p.name.removesuffix(".tptrace") for p in DEMO.glob("*.tptrace")}
    assert shipped <= set(CATALOGUE), "every shipped trace is a demo of the catalogue"
    assert {d.script for d in CATALOGUE.values()} <= scripts and {d.source for d in CATALOGUE.values()} <= \
        {c.source for c in CASES}


@pytest.fixture(scope="module", params=CASES, ids=lambda c: c.script[:-3])
def case_run(request: pytest.FixtureRequest) -> tuple[Case, Run]:
    case: Case = request.param
    return case, run_setup(case.script, case.device)


def test_first_launch_is_the_demo_kernel(case_run: tuple[Case, Run]) -> None:
    case, run = case_run
    first = run.launches[0]
    assert (first.kernel, first.grid, first.block, first.shared) == (case.kernel, case.grid, case.block, case.shared)


def test_allocations_in_order_with_their_types_and_sizes(case_run: tuple[Case, Run]) -> None:
    case, run = case_run
    assert len(run.buffers) == len(case.allocations)
    for b, (dtype, count) in zip(run.buffers, case.allocations):
        assert b.dtype == np.dtype(dtype) and (count is None or b.nbytes == count * b.dtype.itemsize), b


def test_allocations_are_the_synthetic_models(case_run: tuple[Case, Run]) -> None:
    """Same arrays in the same order with the same sizes, so the same addresses, and each
    parameter gets the array the model gives its name."""
    case, run = case_run
    if case.model is None:
        pytest.skip("no synthetic model of this kernel")
    model = case.model()
    assert [b.base for b in run.buffers] == list(model.base.values())
    bound = dict(zip((p.name for p in signatures(case.source)[case.kernel]), run.launches[0].args))
    for name, base in model.base.items():
        arg = bound[name]
        assert isinstance(arg, FakeBuffer) and arg.base == base, name


def test_arguments_match_the_kernel_signature(case_run: tuple[Case, Run]) -> None:
    """Pointers get arrays of the pointee's type, scalars NumPy scalars of the parameter's type."""
    case, run = case_run
    sigs = signatures(case.source)
    for launch in run.launches:
        params = sigs[launch.kernel]
        assert len(launch.args) == len(params), launch.kernel
        for p, a in zip(params, launch.args):
            want = np.dtype(C_DTYPES[p.ctype])
            if p.pointer:
                assert isinstance(a, FakeBuffer) and a.dtype == want, (launch.kernel, p.name)
            else:
                assert isinstance(a, np.generic) and a.dtype == want, (launch.kernel, p.name)


def test_shipped_traces_record_the_scripts_launch_and_addresses(case_run: tuple[Case, Run]) -> None:
    """Each shipped trace (the emulator's recording) names the launch its catalogue entry chooses,
    and every global address it holds lies in a buffer the script allocates."""
    from tuiprof.trace.io import load_trace

    case, run = case_run
    for demo in (d for d in CATALOGUE.values() if d.script == case.script and (DEMO / f"{d.name}.tptrace").exists()):
        trace = load_trace(DEMO / f"{demo.name}.tptrace")
        launches = [x for x in run.launches if demo.kernel in (None, x.kernel)]
        if demo.kernel is None:
            launches = [x for x in launches if x.kernel == launches[0].kernel]
        chosen = launches[demo.launch_index]
        assert (trace.launch.kernel, trace.launch.grid, trace.launch.block) == (chosen.kernel, chosen.grid, chosen.block)
        assert trace.provenance.generator["launches"] == len(run.launches), demo.name
        lanes = (trace.mask[:, None] >> np.arange(32, dtype=np.uint32)) & 1
        glob = np.array([trace.ops[o].space == "global" for o in trace.op])
        addr = lane_addresses(trace, np.flatnonzero(glob))[lanes[glob].astype(bool)]
        inside = np.zeros(addr.shape, bool)
        for b in run.buffers:
            inside |= (addr >= b.base) & (addr < b.base + b.nbytes)
        assert inside.all(), demo.name


@needs_compiler
def test_arguments_match_the_ptx_entry(case_run: tuple[Case, Run], tmp_path_factory: pytest.TempPathFactory) -> None:
    case, run = case_run
    entries = ptx_entries(case.source, tmp_path_factory.getbasetemp())
    for launch in run.launches:
        ptx = entries[launch.kernel]
        assert len(ptx) == len(launch.args)
        for kind, a in zip(ptx, launch.args):
            if isinstance(a, FakeBuffer):
                assert kind in ("u64", "b64")
            else:
                assert int(kind[1:]) == 8 * a.dtype.itemsize and (kind[0] == "f") == (a.dtype.kind == "f"), kind


# ---- multi-launch script: BFS ---------------------------------------------------------------------

class BfsLevelsDevice(FakeDevice):
    """The recording device for bfs_launch.py: the one-byte ``over`` flag reads 1 ("a new node was
    reached") until as many levels have run as the script's NumPy reference finds, so the script
    launches what it launches on a device that runs the kernels: expand and update per level."""

    def __init__(self) -> None:
        super().__init__()
        script = load_script("bfs_launch.py")
        self.levels = int(script.reference(script.inputs())["cost"].max()) + 1  # the last level reaches nothing

    def from_device(self, buf: FakeBuffer) -> np.ndarray:
        if buf.shape != (1,):
            return super().from_device(buf)
        ran = sum(launch.kernel == "bfs_expand" for launch in self.launches)
        return np.full(1, ran < self.levels, buf.dtype)


def test_bfs_levels_device_runs_the_references_levels() -> None:
    """The reference's graph has 9 levels from node 0 (the script's docstring): 18 launches."""
    run = run_setup("bfs_launch.py", BfsLevelsDevice)
    assert [launch.kernel for launch in run.launches] == ["bfs_expand", "bfs_update"] * 9

def test_bfs_runs_levels_until_no_node_is_reached() -> None:
    """On the recording device `over` stays 0, so one level (expand, update) runs; a device where
    it stays 1 must be stopped by the script's level guard."""
    run = run_setup("bfs_launch.py")
    assert [launch.kernel for launch in run.launches] == ["bfs_expand", "bfs_update"]

    class AlwaysOver(FakeDevice):
        def from_device(self, buf: FakeBuffer) -> np.ndarray:
            return np.ones(buf.shape, buf.dtype) if buf.shape == (1,) else super().from_device(buf)

    script = load_script("bfs_launch.py")
    dev = AlwaysOver()
    with pytest.raises(RuntimeError, match="levels"):
        script.setup(dev)
    assert len(dev.launches) == 2 * script.MAX_LEVELS


# ---- references against independent truth ---------------------------------------------------------

def test_spmv_inputs_are_the_synthetic_pattern_and_reference_sums_rows() -> None:
    s = load_script("spmv_launch_b.py")
    inp = s.inputs()
    snapshot_rows = 336 * 256  # the shipped spmv-b snapshot: 336 CTAs of 256 rows
    pattern = synth.csr_pattern("block", 1 << 17, 32768, 32, 2012, known_rows=snapshot_rows)
    assert np.array_equal(inp["rowIndices"], pattern.row_ptr)
    nnz = int(pattern.row_ptr[snapshot_rows])
    assert np.array_equal(inp["indices"][:nnz], pattern.col_ind[:nnz])
    x = s.reference(inp)["x"]
    rp, ind, val, y = inp["rowIndices"], inp["indices"], inp["val"], inp["y"]
    for row in (0, 1, 255, 40000, (1 << 17) - 1):
        want = sum(float(val[j]) * float(y[ind[j]]) for j in range(rp[row], rp[row + 1]))
        assert x[row] == want


def test_matmul_reference_entries() -> None:
    s = load_script("matmul_tiles_launch_32.py")
    inp = s.inputs()
    C = s.reference(inp)["C"]
    A, B = inp["A"].astype(int), inp["B"].astype(int)
    for i, j in ((0, 0), (5, 1000), (1023, 17), (511, 512)):
        assert C[i, j] == sum(A[i, k] * B[k, j] for k in range(1024))


def test_stencil_reference_points() -> None:
    s = load_script("stencil_launch.py")
    inp = s.inputs()
    out = s.reference(inp)["out"].ravel()
    a = inp["in"].astype(np.float64).ravel()
    nx = ny = 256
    for i, j, k in ((1, 1, 1), (254, 254, 254), (31, 8, 100), (200, 3, 7)):
        idx = (k * ny + j) * nx + i
        nb = a[idx - nx * ny] + a[idx - nx] + a[idx - 1] + a[idx + 1] + a[idx + nx] + a[idx + nx * ny]
        assert out[idx] == pytest.approx(nb / 36 - a[idx] / 6, abs=1e-7)
    for i, j, k in ((0, 5, 5), (255, 5, 5), (5, 0, 5), (5, 255, 5), (5, 5, 0), (5, 5, 255)):
        assert out[(k * ny + j) * nx + i] == 0


@pytest.mark.parametrize("script", ["cyclic_reduction_launch.py", "cyclic_reduction_launch_nbc.py"])
def test_cyclic_reduction_reference_solves_the_systems(script: str) -> None:
    s = load_script(script)
    inp = s.inputs()
    a, b, c, d = (inp[k].astype(np.float64) for k in "abcd")
    assert np.all(a[:, 0] == 0) and np.all(c[:, -1] == 0)
    assert np.all(np.abs(b) > np.abs(a) + np.abs(c))  # diagonally dominant
    x = s.reference(inp)["x"]
    for sys_id in (0, 77, 511):  # a dense solve of the same system
        dense = np.diag(b[sys_id]) + np.diag(a[sys_id, 1:], -1) + np.diag(c[sys_id, :-1], 1)
        np.testing.assert_allclose(x[sys_id], np.linalg.solve(dense, d[sys_id]), rtol=0, atol=1e-12)


def test_bfs_reference_is_a_queue_bfs() -> None:
    s = load_script("bfs_launch.py")
    inp = s.inputs()
    rp, edges = inp["row_ptr"].tolist(), inp["edges"].tolist()
    n = len(rp) - 1
    cost = [-1] * n
    cost[s.SOURCE] = 0
    queue = deque([s.SOURCE])
    while queue:
        v = queue.popleft()
        for w in edges[rp[v]:rp[v + 1]]:
            if cost[w] < 0:
                cost[w] = cost[v] + 1
                queue.append(w)
    ref = s.reference(inp)
    assert ref["cost"].tolist() == cost
    assert np.array_equal(ref["visited"], (np.asarray(cost) >= 0).astype(np.uint8))
    assert inp["mask"].sum() == 1 and inp["visited"].sum() == 1 and inp["cost"][s.SOURCE] == 0


# ---- check() accepts the reference and rejects a wrong answer -------------------------------------

@pytest.mark.parametrize("script", ["vecadd_launch.py", "spmv_launch.py", "transpose_launch.py",
                                    "matmul_launch.py", "stencil_launch.py", "matmul_tiles_launch_8.py",
                                    "cyclic_reduction_launch.py", "bfs_launch.py"])
def test_check_accepts_the_reference_and_rejects_one_wrong_element(script: str) -> None:
    s = load_script(script)
    want = s.reference(s.inputs())
    s.check({k: v.copy() for k, v in want.items()})
    name = next(iter(want))
    wrong = {k: v.copy() for k, v in want.items()}
    flat = wrong[name].reshape(-1)
    flat[flat.shape[0] // 3] += 1
    with pytest.raises(AssertionError):
        s.check(wrong)
