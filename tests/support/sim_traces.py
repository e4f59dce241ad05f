"""Builders shared by the simulator tests: small hand-made traces and GPU models.

Everything here is spelled out by hand (addresses, masks, cache geometry), so that expected
counts in the tests come from arithmetic on these inputs, not from the code under test.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from tuiprof.arch import Arch, load_arch
from tuiprof.trace.data import LANES, Launch, Provenance, Snapshot, SourceFile, StaticOp, Trace

FULL = 0xFFFFFFFF
LANE0 = 0x1


def lanes(base: int, stride: int = 4) -> np.ndarray:
    """32 lane addresses ``base + stride * lane``."""
    return (np.uint64(base) + np.arange(LANES, dtype=np.uint64) * np.uint64(stride)).astype(np.uint64)


def one_lane(addr: int) -> np.ndarray:
    """Lane 0 at `addr` (use with mask LANE0)."""
    a = np.zeros(LANES, dtype=np.uint64)
    a[0] = np.uint64(addr)
    return a


def op(kind: str = "load", space: str = "global", nbytes: int = 4, starts: bool = False) -> tuple:
    return (kind, space, nbytes, starts)


def trace_of(warps: Sequence[Iterable[tuple[int, np.ndarray, int]]], ops: Sequence[tuple] = (op(),), *,
             warps_per_cta: int = 1, ctas_per_sm: int = 1) -> Trace:
    """A trace whose warp w issues ``warps[w]``: (op id, 32 lane addresses, active mask) tuples.

    Warps fill CTAs in order (`warps_per_cta` each); CTA k is snapshot CTA k.
    """
    rows: list[np.ndarray] = []
    op_ids: list[int] = []
    masks: list[int] = []
    offsets = [0]
    for accesses in warps:
        for o, addr, m in accesses:
            a = np.asarray(addr, dtype=np.uint64).copy()
            a[((np.uint32(m) >> np.arange(LANES, dtype=np.uint32)) & 1) == 0] = 0
            rows.append(a)
            op_ids.append(o)
            masks.append(m)
        offsets.append(len(rows))
    n_warps = len(warps)
    n_ctas = -(-n_warps // warps_per_cta)
    static = tuple(StaticOp(id=i, kernel="k", kind=k, space=s, bytes=b, file="k.cu", line=10 + i, starts_sequence=st)
                   for i, (k, s, b, st) in enumerate(ops))
    return Trace(
        launch=Launch(kernel="k", grid=(n_ctas, 1, 1), block=(32 * warps_per_cta, 1, 1), registers_per_thread=16,
                      ctas_per_sm=ctas_per_sm),
        ops=static,
        snapshot=Snapshot(cta_ids=np.arange(n_ctas, dtype=np.int64), rule="test"),
        warp_offsets=np.asarray(offsets, dtype=np.int64),
        warp_cta=(np.arange(n_warps) // warps_per_cta).astype(np.int32),
        warp_index=(np.arange(n_warps) % warps_per_cta).astype(np.int32),
        op=np.asarray(op_ids, dtype=np.int32),
        mask=np.asarray(masks, dtype=np.uint32),
        addr=np.asarray(rows, dtype=np.uint64).reshape(-1, LANES),
        sources=(SourceFile("k.cu", "// test kernel\n"),),
        provenance=Provenance(backend="synthetic", arch="test"),
    )


def arch_with(base: str = "v100", **settings: object) -> Arch:
    """Preset `base` with ``section__field=value`` overrides (``l1__size="4KiB"``)."""
    return load_arch(base).with_overrides({k.replace("__", "."): str(v) for k, v in settings.items()})


def small_arch(**settings: object) -> Arch:
    """One SM; L1 4 KiB of 128 B lines with 32 B sectors, 4-way (8 sets), write-no-allocate;
    L2 32 KiB of 128 B lines with 32 B sectors, 8-way, one partition (32 sets), write-through
    (Baghsorkhi12's rule); linear slice/channel mapping. The v100 preset otherwise."""
    base = dict(sm_count=1, l1__size="4KiB", l1__line=128, l1__sector=32, l1__assoc=4, l1__partitions=1,
                l1__store_policy="write-no-allocate", l1__replacement="lru",
                l2__size="32KiB", l2__line=128, l2__sector=32, l2__assoc=8, l2__partitions=1, l2__replacement="lru",
                l2__write_policy="write-through", address_hash="linear")
    base.update(settings)
    return arch_with("v100", **base)

