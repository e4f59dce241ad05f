"""Small hand-built traces for tests: every field explicit, nothing from the code under test."""

from __future__ import annotations

import dataclasses

import numpy as np

from tuiprof.trace.data import LANES, CtaRecords, Launch, Provenance, Snapshot, SourceFile, StaticOp, Trace

SOURCE = "__global__ void k(float *a) {\n  a[threadIdx.x] = a[threadIdx.x] + 1.0f;\n}\n"


def make_trace(addr_rows: list[list[int]] | np.ndarray, *, ops: list[int] | None = None,
               masks: list[int] | None = None, warps: list[int] | None = None, kinds: tuple[str, ...] = ("load",),
               n_ctas: int = 1, block: int = 32, bytes_per_lane: int = 4, starts: tuple[bool, ...] | None = None,
               ctas: CtaRecords | None = None) -> Trace:
    """A trace whose accesses are `addr_rows` (R x 32 lane addresses).

    `warps[i]` is the warp of access i (default: all warp 0); warps map to CTAs in order,
    block // 32 warps per CTA.
    """
    addr = np.asarray(addr_rows, dtype=np.uint64).reshape(-1, LANES)
    n = addr.shape[0]
    op = np.asarray(ops if ops is not None else [0] * n, dtype=np.int32)
    mask = np.asarray(masks if masks is not None else [0xFFFFFFFF] * n, dtype=np.uint32)
    lanes = np.arange(LANES, dtype=np.uint32)
    addr = np.where(((mask[:, None] >> lanes) & 1).astype(bool), addr, 0).astype(np.uint64)
    w = np.asarray(warps if warps is not None else [0] * n, dtype=np.int64)
    n_warps = int(w.max()) + 1 if n else 1
    order = np.argsort(w, kind="stable")
    offsets = np.zeros(n_warps + 1, dtype=np.int64)
    np.cumsum(np.bincount(w, minlength=n_warps), out=offsets[1:])
    wpc = max(1, block // LANES)
    n_ops = int(op.max()) + 1 if n else 1
    static = tuple(StaticOp(id=i, kernel="k", kind=kinds[i % len(kinds)], space="global", bytes=bytes_per_lane,
                            file="k.cu", line=2, starts_sequence=bool(starts[i]) if starts else False, label="a[i]")
                   for i in range(n_ops))
    grid = max(n_ctas, -(-n_warps // wpc))
    return Trace(
        launch=Launch(kernel="k", grid=(grid, 1, 1), block=(block, 1, 1), registers_per_thread=16),
        ops=static,
        snapshot=Snapshot(cta_ids=np.arange(grid, dtype=np.int64), rule="test"),
        warp_offsets=offsets,
        warp_cta=(np.arange(n_warps) // wpc).astype(np.int32),
        warp_index=(np.arange(n_warps) % wpc).astype(np.int32),
        op=op[order], mask=mask[order], addr=addr[order],
        sources=(SourceFile("k.cu", SOURCE),),
        provenance=Provenance(backend="synthetic", arch="v100"),
        ctas=ctas or CtaRecords(),
    )


def random_trace(seed: int, n: int = 200, n_warps: int = 5, n_ops: int = 4,
                 kinds: tuple[str, ...] = ("load", "store")) -> Trace:
    """Random addresses (full 64-bit range included), masks and op ids; op i is ``kinds[i % len]``."""
    rng = np.random.default_rng(seed)
    addr = rng.integers(0, 2**64 - 1, size=(n, LANES), dtype=np.uint64, endpoint=True)
    addr[: n // 2] = (0x7F0000000000 + rng.integers(0, 1 << 20, size=(n // 2, 1)) * 4
                      + np.arange(LANES, dtype=np.uint64) * 4).astype(np.uint64)
    masks = rng.integers(1, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    return make_trace(addr, ops=list(rng.integers(0, n_ops, size=n)), masks=list(masks),
                      warps=list(rng.integers(0, n_warps, size=n)), kinds=kinds)


def with_shared(t: Trace, shared: set[int], bytes_per_lane: int = 4) -> Trace:
    """`t` with the ops in `shared` in shared memory (and `bytes_per_lane` wide)."""
    ops = tuple(dataclasses.replace(o, space="shared", bytes=bytes_per_lane) if o.id in shared else o for o in t.ops)
    return dataclasses.replace(t, ops=ops)
