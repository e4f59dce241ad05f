"""The demo kernels' small launches shared by the instrumentation tests and the GPU tests: the
emulator recording its own accesses of the plain PTX (`NativeEmuDriver`), each demo's build cached
per test module (`_program`), and one small launch per demo kernel (`DEMOS`: source, setup,
kernel, launch index, snapshot CTAs)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tests.support.emu_driver import EmuDriver, _where
from tuiprof.collect.emu.decode import decode
from tuiprof.collect.emu.run import DEFAULT_STEP_LIMIT, execute
from tuiprof.ptx.module import Function


class NativeEmuDriver(EmuDriver):
    """The emulator recording its own accesses of the chosen launch of the plain PTX (what the
    emulator backend puts in a trace): op ids from the StaticOp table, the snapshot's CTAs."""

    def __init__(self, table: Any, kernel: str, launch_index: int, snapshot: np.ndarray) -> None:
        super().__init__()
        self.table, self.kernel, self.index, self.snapshot = table, kernel, launch_index, snapshot
        self.seen = 0
        self.result: Any = None

    def launch(self, fn: object, grid, block, shared, params):  # type: ignore[no-untyped-def]
        module, name = fn  # type: ignore[misc]
        if name != self.kernel:
            return super().launch(fn, grid, block, shared, params)
        chosen = self.seen == self.index
        self.seen += 1
        if not chosen:
            return super().launch(fn, grid, block, shared, params)
        from tuiprof.ptx.cfg import ipdom

        ids: dict[tuple[str, int], Any] = {}
        for f, i, op in self.table:
            ids[(f, i)] = (ids[(f, i)], op.id) if (f, i) in ids else op.id
        cache: dict[str, list[int]] = {}

        def ipdoms(f: Function) -> list[int]:
            return cache.setdefault(f.name, ipdom(f))

        prog = decode(module.module, name, ipdoms, ids, len({op.id for _, _, op in self.table}), _where)
        self.result = execute(prog, self.heap, grid, block, params.buffer(), shared, self.snapshot, n_sms=self.n_sms,
                              threads=self.threads, step_limit=DEFAULT_STEP_LIMIT, source_name=_where,
                              constants=self.constants(prog))
        return 0.0


def _program(cache: dict[Path, Any], src: Path) -> Any:
    from tuiprof.toolchain import build_program

    if src not in cache:
        cache[src] = build_program(src, compute_capability=(8, 0))
    return cache[src]


# Small launches of every demo kernel (the demo launch scripts' sizes take the interpreter
# minutes; the kernels are the same). Each makes the same inputs every time it runs (the
# counting, recording and plain runs) and returns its outputs read back from the device.


def _rng() -> np.random.Generator:
    return np.random.default_rng(7)


def _vecadd(dev: Any) -> dict[str, np.ndarray]:
    rng = _rng()
    a, b = (dev.to_device(rng.integers(-99, 99, 2048, dtype=np.int32)) for _ in range(2))
    c = dev.empty(2048, np.int32)
    dev.launch("kernel_vec_add", 32, 64, (c, a, b))
    return {"C": dev.from_device(c)}


def _csr(rows: int, cols: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    lens = rng.integers(0, 24, rows)
    ptr = np.zeros(rows + 1, np.uint32)
    np.cumsum(lens, out=ptr[1:])
    idx = np.concatenate([np.sort(rng.choice(cols, n, replace=False)) for n in lens]).astype(np.uint32)
    return ptr, idx, rng.uniform(-1, 1, idx.size).astype(np.float32)


def _spmv(kernel: str) -> Callable[[Any], dict[str, np.ndarray]]:
    def setup(dev: Any) -> dict[str, np.ndarray]:
        ptr, idx, val = _csr(768, 512)
        x = dev.empty(768, np.float32)
        args = (x, dev.to_device(val), dev.to_device(idx), dev.to_device(ptr),
                dev.to_device(np.linspace(-1, 1, 512, dtype=np.float32)), np.uint32(768))
        dev.launch(kernel, 3, 256, args)
        return {"x": dev.from_device(x)}
    return setup


def _transpose(kernel: str) -> Callable[[Any], dict[str, np.ndarray]]:
    def setup(dev: Any) -> dict[str, np.ndarray]:
        out = dev.empty((96, 96), np.float32)
        dev.launch(kernel, (3, 3, 1), (32, 8, 1), (out, dev.to_device(np.arange(96 * 96, dtype=np.float32))))
        return {"out": dev.from_device(out)}
    return setup


def _matmul16(dev: Any) -> dict[str, np.ndarray]:
    rng = _rng()
    a, b = (dev.to_device(rng.uniform(-1, 1, (48, 48)).astype(np.float32)) for _ in range(2))
    c = dev.empty((48, 48), np.float32)
    dev.launch("matmul16", (3, 3, 1), (16, 16, 1), (c, a, b, np.int32(48), np.int32(48)))
    return {"C": dev.from_device(c)}


def _matmul_tile8(dev: Any) -> dict[str, np.ndarray]:
    rng = _rng()
    a, b = (dev.to_device(rng.uniform(-1, 1, (32, 32)).astype(np.float32)) for _ in range(2))
    c = dev.empty((32, 32), np.float32)
    dev.launch("matmul_tile8", (4, 4, 1), (8, 8, 1), (c, a, b, np.int32(32)))
    return {"C": dev.from_device(c)}


def _stencil(dev: Any) -> dict[str, np.ndarray]:
    out = dev.zeros(64 * 16 * 4, np.float32)
    grid_in = dev.to_device(_rng().uniform(0, 1, 64 * 16 * 4).astype(np.float32))
    dev.launch("stencil7", (2, 2, 4), (32, 8, 1), (out, grid_in, np.int32(64), np.int32(16), np.int32(4),
                                                    np.float32(0.5), np.float32(0.25)))
    return {"out": dev.from_device(out)}


def _bfs(dev: Any) -> dict[str, np.ndarray]:
    n = 1024
    rng = np.random.default_rng(5)
    lens = rng.integers(1, 6, n)
    ptr = np.zeros(n + 1, np.int32)
    np.cumsum(lens, out=ptr[1:])
    edges = rng.integers(0, n, int(ptr[-1])).astype(np.int32)
    mask, visited = np.zeros(n, np.uint8), np.zeros(n, np.uint8)
    mask[0] = visited[0] = 1
    cost = np.full(n, -1, np.int32)
    cost[0] = 0
    b = {k: dev.to_device(v) for k, v in (("ptr", ptr), ("edges", edges), ("mask", mask), ("visited", visited),
                                          ("cost", cost))}
    updating, over = dev.zeros(n, np.uint8), dev.zeros(1, np.uint8)
    for _ in range(3):
        dev.launch("bfs_expand", 2, 512, (b["ptr"], b["edges"], b["mask"], updating, b["visited"], b["cost"], over,
                                          np.int32(n)))
        dev.launch("bfs_update", 2, 512, (b["mask"], updating, b["visited"], over, np.int32(n)))
    return {"cost": dev.from_device(b["cost"])}


def _cyclic(kernel: str) -> Callable[[Any], dict[str, np.ndarray]]:
    def setup(dev: Any) -> dict[str, np.ndarray]:
        systems, size = 3, 64
        rng = np.random.default_rng(9)
        a, c, d = (rng.uniform(-1, 1, (systems, size)).astype(np.float32) for _ in range(3))
        b = (np.abs(a) + np.abs(c) + 1).astype(np.float32)
        x = dev.empty((systems, size), np.float32)
        shared = 5 * 4 * (size + ((size - 1) // 32 if kernel == "cr_nbc" else 0))
        dev.launch(kernel, systems, size // 2, tuple(dev.to_device(v) for v in (a, b, c, d)) + (x,), shared=shared)
        return {"x": dev.from_device(x)}
    return setup


DEMOS = [
    ("vecadd.cu", _vecadd, "kernel_vec_add", 0, 8),
    ("spmv.cu", _spmv("spmv_csr_scalar"), None, 0, 2),
    ("spmv.cu", _spmv("spmv_csr_vector4"), None, 0, 2),
    ("transpose.cu", _transpose("transpose_naive"), None, 0, 2),
    ("transpose.cu", _transpose("transpose_tiled"), None, 0, 2),
    ("matmul.cu", _matmul16, None, 0, 2),
    ("matmul_tiles.cu", _matmul_tile8, None, 0, 3),
    ("stencil.cu", _stencil, None, 0, 8),  # CTAs 0-3 are the boundary plane z = 0: no accesses
    ("bfs.cu", _bfs, "bfs_expand", 1, 2),
    ("bfs.cu", _bfs, "bfs_update", 2, 2),
    ("cyclic_reduction.cu", _cyclic("cr"), None, 0, 2),
    ("cyclic_reduction.cu", _cyclic("cr_nbc"), None, 0, 2),
]
