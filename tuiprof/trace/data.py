"""The Trace: one kernel launch's snapshot of warp accesses, with everything needed to replay it.

A *warp access* is one execution of one static memory instruction by one warp: the op id, the
32-bit active mask and the 32 lane addresses (Baghsorkhi12 sec. 4.2 records exactly this per warp
buffer line). The snapshot is a set of consecutive CTAs (Baghsorkhi12 sec. 3.1); each warp's accesses
are kept in program order, warps one after another (CSR layout through ``warp_offsets``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np

from tuiprof.errors import TraceError
from tuiprof.metrics import BY_KEY, MAX_WAVEFRONTS_PER_REQUEST

OpKind = Literal["load", "store", "atomic"]
"""What a memory instruction does."""
Space = Literal["global", "shared", "local", "const", "texture"]
Backend = Literal["gpu", "emulator", "synthetic"]
"""What recorded a trace."""

OP_KINDS: tuple[OpKind, ...] = get_args(OpKind)
SPACES: tuple[Space, ...] = get_args(Space)
"""Memory spaces of an op: ``const`` (``__constant__`` memory, through the constant cache) and
``texture`` (texture and surface fetches, through the L1/texture path) came with issue 22; a
trace written before them reads as it always did."""
BACKENDS: tuple[Backend, ...] = get_args(Backend)
LANES = 32


CACHED_SPACES = ("global", "local", "texture")
"""Memory spaces served by the L1/L2 hierarchy (texture fetches go through the unified L1/texture
cache); shared and constant memory are modelled apart (`tuiprof.model.shared`, `tuiprof.model.constant`)."""

# Caps on what a trace may hold (checked when a .tptrace file is loaded, so that a hostile or
# damaged file fails with a clear message instead of exhausting memory or time) and on what a
# view of it renders. Generous next to any real kernel.
MAX_OPS = 65536
"""Static memory ops in one trace (the file stores op ids in 16 bits up to this many)."""
MAX_SOURCES = 256
"""Source files embedded in one trace."""
MAX_SOURCE_CHARS = 4 << 20
"""Characters of embedded source text, all files together."""
MAX_NAME_CHARS = 4096
"""Characters of one name or label: kernel, file, op label, provenance field, snapshot rule."""
MAX_GRID_CTAS = 1 << 24
"""CTAs in the launch grid (the SM-utilisation model walks the whole grid)."""
MAX_OP_PTX = 64
"""PTX instructions listed per op (`StaticOp.ptx`): a loop unrolled further lists its first ones
(a writer whose header would pass its cap drops these lists, which are only shown)."""
MAX_MEASURED = 256
"""Measured (ncu) values one trace carries, and characters of one's key."""
MAX_MEASURED_CYCLES = 1e7
"""Largest latency a measured value may claim, in cycles: a few milliseconds of a GPU clock, far
past any memory access (DRAM under contention takes thousands of cycles)."""
MAX_LINE_CHARS = 160
"""Characters of one source line shown beside an op (reports, UI); longer ones end in an ellipsis."""
MAX_LABEL_CHARS = 60
"""Characters of one op label or file name shown in a report row or the UI."""


def measured_range(key: str) -> tuple[float, float, str]:
    """(lowest, highest, meaning) of a measured value by its key: ``op<N>.x`` is a latency in
    cycles, ``sectors_per_request`` and ``*_wavefronts_per_request`` counts, a key ending in
    ``_rate`` a percentage (ncu's ``*_hit_rate``), any other a ratio in [0, 1]. The loader refuses a value outside its range,
    so every view can draw any value a trace holds."""
    if key.endswith(".x"):
        return 0.0, MAX_MEASURED_CYCLES, "a latency in cycles"
    metric = BY_KEY.get(key)
    if metric is not None:  # the registry's bound (`tuiprof.metrics`)
        return 0.0, metric.upper, metric.meaning
    if key.endswith("_wavefronts_per_request"):
        return 0.0, MAX_WAVEFRONTS_PER_REQUEST, "wavefronts per request"
    if key.endswith("_rate"):
        return 0.0, 100.0, "a percentage"
    return 0.0, 1.0, "a ratio"


def measured_problem(key: object, value: object) -> str | None:
    """Why `value` cannot be the measured value of `key` (see `measured_range`), or None."""
    if not isinstance(key, str) or len(key) > MAX_MEASURED:
        return f"has a key longer than {MAX_MEASURED} characters"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "must be a finite number"
    lo, hi, what = measured_range(key)
    if not lo <= value <= hi:
        return f"is {value:.6g}, outside {lo:g}..{hi:g} ({what})"
    return None


@dataclass(frozen=True)
class StaticOp:
    """One memory instruction of the program, tied to its source location."""

    id: int
    kernel: str
    kind: OpKind
    space: Space
    bytes: int
    """Bytes per lane (4 for a float, 16 for a float4 vector load)."""
    file: str
    line: int
    column: int = 0
    ptx_line: int = 0
    starts_sequence: bool = False
    """This op begins a new bulk-scheduling sequence (Baghsorkhi12 sec. 2): it follows a loop
    back-edge or a barrier, or its address depends on an earlier load of the current sequence."""
    label: str = ""
    """The expression accessed, for display (``y[ind]``)."""
    barrier_after: tuple[int, ...] = ()
    """The ops after whose access a CTA barrier (``__syncthreads``) always lies before this op's
    next access by the same warp: such an access begins a new barrier interval of its warp, which
    no warp of the CTA enters before every other warp of the CTA has left the one before
    (`tuiprof.sim.schedule`; `tuiprof.ptx.ops.barrier_predecessors`)."""
    ptx: tuple[tuple[int, str], ...] = ()
    """The PTX instructions behind the op, as (PTX line, instruction) pairs (several for a loop's
    unrolled or rotated copies of one source access), so that a user can check the attribution;
    empty when unknown."""

    @property
    def is_read(self) -> bool:
        return self.kind == "load"

    @property
    def is_cached(self) -> bool:
        """Goes through L1 and L2 (global, local or texture memory); shared and constant memory do not."""
        return self.space in CACHED_SPACES


@dataclass(frozen=True)
class Launch:
    """The kernel launch the trace was recorded from."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    registers_per_thread: int
    static_shared: int = 0
    dynamic_shared: int = 0
    ctas_per_sm: int = 0
    """Resident CTAs per SM (MD) on the GPU it was recorded for; 0 = derive from occupancy."""

    @property
    def threads_per_cta(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def warps_per_cta(self) -> int:
        return -(-self.threads_per_cta // LANES)

    @property
    def grid_ctas(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]


@dataclass(frozen=True)
class Snapshot:
    """Which CTAs were traced: ``cta_ids`` are linear CTA ids, normally consecutive."""

    cta_ids: np.ndarray
    rule: str = ""
    """How the size was chosen, in words (Baghsorkhi12 sec. 3.1)."""
    warm: int = 0
    """The first `warm` CTAs of ``cta_ids`` warm the caches: replayed with the others, as the
    hardware ran them before the snapshot's, and not counted (issue 24: a snapshot from a cold
    start weighs cold misses more than the whole kernel does). 0 in a trace written before."""

    @property
    def n_ctas(self) -> int:
        return int(self.cta_ids.shape[0])

    @property
    def counted_ctas(self) -> int:
        """The CTAs whose accesses count (all but the warm-up)."""
        return self.n_ctas - self.warm


@dataclass(frozen=True)
class CtaRecords:
    """Per-CTA facts for the whole grid, where known (Farooqui11's per-CTA records).

    ``insts`` and ``accesses`` (dynamic warp instructions and warp memory accesses) may be
    measured or modeled; ``sm``, ``start`` and ``end`` are present only when measured on a GPU.
    """

    insts: np.ndarray | None = None
    accesses: np.ndarray | None = None
    sm: np.ndarray | None = None
    start: np.ndarray | None = None
    end: np.ndarray | None = None

    @property
    def measured_timing(self) -> bool:
        return self.sm is not None and self.start is not None and self.end is not None


@dataclass(frozen=True)
class Provenance:
    """Where the trace came from."""

    backend: Backend
    arch: str
    """The Arch preset the launch was made (or modeled) for."""
    gpu: str = ""
    tool_version: str = ""
    date: str = ""
    generator: dict[str, Any] = field(default_factory=dict)
    """Backend-specific parameters (synthetic model name, seed, matrix shape...)."""
    measured: dict[str, float] = field(default_factory=dict)
    """Hardware counter values (e.g. ncu's ``l1_read_hit``), drawn as markers when present."""


@dataclass(frozen=True)
class SourceFile:
    name: str
    text: str


@dataclass(frozen=True)
class PackedLanes:
    """The lane addresses of some warp accesses (a loaded trace's shared-memory ones) kept as the
    file stores them, decoded on demand (`tuiprof.trace.packed`): per warp and op, in program
    order, a lane's address minus its previous one (its first: minus the access's base, itself
    differenced), in `unit` bytes, each chunk of accesses in its narrowest integer type. Most
    accesses step every active lane by the same amount (a tile walked row by row, a broadcast):
    they keep that one step; only the others keep 32 lanes.

    - ``rows`` int64 [P]: the accesses packed, ascending; every access of their ops is among them
    - ``starts``: chunk k holds ``rows[starts[k]:starts[k+1]]``
    - per chunk: ``bases`` [c] the differenced bases; ``steps`` [c] the step all active lanes
      share (0 where they do not); ``odd`` int32 [q] the accesses (of the chunk) whose lanes do
      not share one, ascending, and ``lanes`` [q, 32] their lanes' values
    """

    rows: np.ndarray
    starts: tuple[int, ...]
    bases: tuple[np.ndarray, ...]
    steps: tuple[np.ndarray, ...]
    odd: tuple[np.ndarray, ...]
    lanes: tuple[np.ndarray, ...]
    unit: int = 1

    @property
    def nbytes(self) -> int:
        """Bytes the packed values take."""
        return int(self.rows.nbytes + sum(a.nbytes for part in (self.bases, self.steps, self.odd, self.lanes)
                                          for a in part))


@dataclass(frozen=True)
class Trace:
    """A launch, its static ops, its snapshot of warp accesses, and where it came from.

    Arrays (``R`` warp accesses, ``W`` warps):

    - ``warp_offsets`` int64 [W+1]: accesses of warp w are ``warp_offsets[w]:warp_offsets[w+1]``
    - ``warp_cta`` int32 [W]: index into ``snapshot.cta_ids`` of the warp's CTA
    - ``warp_index`` int32 [W]: the warp's index within its CTA
    - ``op`` int32 [R]: StaticOp id of each warp access
    - ``mask`` uint32 [R]: active lanes (bit i = lane i); never 0
    - ``addr`` uint64 [R, 32]: lane addresses; inactive lanes hold 0. With ``packed`` (a loaded
      trace's shared-memory accesses), [R - P, 32]: the accesses not packed, in order; read any
      access's addresses with `lane_addresses`
    """

    launch: Launch
    ops: tuple[StaticOp, ...]
    snapshot: Snapshot
    warp_offsets: np.ndarray
    warp_cta: np.ndarray
    warp_index: np.ndarray
    op: np.ndarray
    mask: np.ndarray
    addr: np.ndarray
    sources: tuple[SourceFile, ...]
    provenance: Provenance
    ctas: CtaRecords = field(default_factory=CtaRecords)
    packed: PackedLanes | None = None

    def __post_init__(self) -> None:
        check_trace(self)

    @property
    def n_accesses(self) -> int:
        return int(self.op.shape[0])

    @property
    def n_warps(self) -> int:
        return int(self.warp_cta.shape[0])

    def source_text(self, name: str | None = None) -> str:
        """The text of source `name` (default: the first, the kernel's file)."""
        for src in self.sources:
            if name is None or src.name == name:
                return src.text
        raise KeyError(name)

    def accesses_per_op(self, counted: bool = True) -> np.ndarray:
        """Dynamic warp accesses per static op, int64 [n_ops]: of the counted CTAs (the snapshot's
        warm-up aside, `Snapshot.warm`), or with `counted` False of every recorded CTA."""
        op = self.op if not counted or self.snapshot.warm == 0 else self.op[self.counted_accesses()]
        return np.bincount(op, minlength=len(self.ops)).astype(np.int64)

    def counted_accesses(self) -> np.ndarray:
        """bool [R]: the warp accesses of the counted CTAs (all of them without a warm-up): the
        warm-up CTAs' accesses are replayed to warm the caches, never counted."""
        return np.repeat(self.warp_cta >= self.snapshot.warm, np.diff(self.warp_offsets))

    @property
    def counted_warps(self) -> int:
        """The warps of the counted CTAs (the snapshot's warm-up aside)."""
        return int(np.count_nonzero(self.warp_cta >= self.snapshot.warm))

    def active_lanes(self) -> np.ndarray:
        """Active lane count of each warp access, int64 [R]."""
        return popcount32(self.mask)


def popcount32(mask: np.ndarray) -> np.ndarray:
    """Set bits of each uint32 (active lanes of each mask), int64."""
    v = mask.astype(np.uint32)
    v = v - ((v >> 1) & np.uint32(0x55555555))
    v = (v & np.uint32(0x33333333)) + ((v >> 2) & np.uint32(0x33333333))
    v = (v + (v >> 4)) & np.uint32(0x0F0F0F0F)
    return ((v * np.uint32(0x01010101)) >> 24).astype(np.int64)


def _fail(what: str) -> None:
    raise TraceError(f"invalid trace: {what}", "the file is damaged or was written by another tool; record it again")


def check_trace(t: Trace) -> None:
    """Raise TraceError unless the trace is internally consistent (shapes, dtypes, ranges)."""
    def arr(name: str, a: Any, dtype: type, ndim: int) -> np.ndarray:
        if not isinstance(a, np.ndarray) or a.dtype != np.dtype(dtype) or a.ndim != ndim:
            _fail(f"{name} must be a {ndim}-d {np.dtype(dtype).name} array")
        return a

    n_ops = len(t.ops)
    for i, o in enumerate(t.ops):
        if o.id != i:
            _fail(f"op ids must be 0..{n_ops - 1} in order (op {i} has id {o.id})")
        if o.kind not in OP_KINDS or o.space not in SPACES:
            _fail(f"op {i}: kind {o.kind!r} / space {o.space!r} unknown")
        if not (1 <= o.bytes <= 128) or o.bytes & (o.bytes - 1):
            _fail(f"op {i}: {o.bytes} bytes per lane is not a power of two in 1..128")
        if o.line < 0:
            _fail(f"op {i}: negative source line")
    if t.provenance.backend not in BACKENDS:
        _fail(f"backend {t.provenance.backend!r} unknown")
    if len(t.provenance.measured) > MAX_MEASURED:
        _fail(f"{len(t.provenance.measured)} measured values, more than {MAX_MEASURED}")
    for key, value in t.provenance.measured.items():
        problem = measured_problem(key, value)
        if problem is not None:
            _fail(f"measured value {str(key)[:40]!r} {problem}")
    L = t.launch
    if min(L.grid) < 1 or min(L.block) < 1 or L.registers_per_thread < 0 or L.ctas_per_sm < 0:
        _fail("launch grid/block must be positive")
    cta_ids = arr("snapshot.cta_ids", t.snapshot.cta_ids, np.int64, 1)
    if cta_ids.size and (cta_ids.min() < 0 or cta_ids.max() >= L.grid_ctas):
        _fail("snapshot CTA ids outside the grid")
    if not isinstance(t.snapshot.warm, int) or not 0 <= t.snapshot.warm < max(cta_ids.shape[0], 1):
        _fail("the snapshot's warm-up CTAs must be fewer than its CTAs")
    offs = arr("warp_offsets", t.warp_offsets, np.int64, 1)
    wc = arr("warp_cta", t.warp_cta, np.int32, 1)
    wi = arr("warp_index", t.warp_index, np.int32, 1)
    n_w = wc.shape[0]
    if offs.shape[0] != n_w + 1 or wi.shape[0] != n_w:
        _fail("warp arrays disagree in length")
    op = arr("op", t.op, np.int32, 1)
    mask = arr("mask", t.mask, np.uint32, 1)
    addr = arr("addr", t.addr, np.uint64, 2)
    n_r = op.shape[0]
    packed = t.packed
    if packed is not None and (not isinstance(packed.rows, np.ndarray) or packed.rows.dtype != np.int64
                               or packed.rows.ndim != 1):
        _fail("packed.rows must be a 1-d int64 array")
    n_packed = 0 if packed is None else packed.rows.shape[0]
    if mask.shape[0] != n_r or addr.shape != (n_r - n_packed, LANES):
        _fail("access arrays disagree in shape")
    if offs[0] != 0 or offs[-1] != n_r or (n_w and np.any(np.diff(offs) < 0)):
        _fail("warp_offsets must rise from 0 to the number of accesses")
    if n_w and (wc.min() < 0 or wc.max() >= cta_ids.shape[0] or wi.min() < 0 or wi.max() >= L.warps_per_cta):
        _fail("warp CTA or warp index out of range")
    if n_r:
        if op.min() < 0 or op.max() >= n_ops:
            _fail("an access names an op id that does not exist")
        if np.any(mask == 0):
            _fail("an access has no active lane")
    if packed is not None:
        _check_packed(packed, op, n_ops)
    c = t.ctas
    for name in ("insts", "accesses", "sm", "start", "end"):
        a = getattr(c, name)
        if a is not None:
            arr(f"ctas.{name}", a, np.int64, 1)
            if a.shape[0] != L.grid_ctas:
                _fail(f"ctas.{name} must have one entry per CTA of the grid ({L.grid_ctas})")
    if not t.sources:
        _fail("no source text")


def _check_packed(p: PackedLanes, op: np.ndarray, n_ops: int) -> None:
    """Raise TraceError unless `p` is consistent with the access table `op` (op ids in range)."""
    rows = p.rows
    n = rows.shape[0]
    if n and (rows[0] < 0 or rows[-1] >= op.shape[0] or np.any(rows[1:] <= rows[:-1])):
        _fail("packed rows must be distinct accesses in ascending order")
    starts = p.starts
    chunks = len(p.bases)
    if (len(starts) != chunks + 1 or not len(p.steps) == len(p.odd) == len(p.lanes) == chunks or not starts
            or starts[0] != 0 or starts[-1] != n or any(b <= a for a, b in zip(starts, starts[1:]))):
        _fail("packed chunks do not cover the packed rows")
    for k, parts in enumerate(zip(p.bases, p.steps, p.odd, p.lanes)):
        c = starts[k + 1] - starts[k]
        b, s, o, ln = parts
        if (not all(isinstance(a, np.ndarray) and a.dtype.kind == "i" for a in parts) or b.shape != (c,)
                or s.shape != (c,) or o.ndim != 1 or o.dtype != np.int32 or ln.shape != (o.shape[0], LANES)):
            _fail(f"packed chunk {k} has the wrong shape or type")
        if o.size and (o[0] < 0 or o[-1] >= c or np.any(o[1:] <= o[:-1])):
            _fail(f"packed chunk {k} names accesses outside it")
    if not isinstance(p.unit, int) or p.unit < 1 or p.unit & (p.unit - 1):
        _fail("packed.unit must be a power of two")
    if n and n_ops:  # an op's accesses are all packed or none is (each op decodes on its own)
        every = np.bincount(op, minlength=n_ops)
        some = np.bincount(op[rows], minlength=n_ops)
        if np.any((some > 0) & (some != every)):
            _fail("an op has packed and unpacked accesses")
