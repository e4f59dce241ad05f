"""Run a decoded kernel over a grid: register templates, CTA batches on worker threads, and the
translation of the interpreter's status codes into TuiprofErrors naming the source line.

CTAs are independent unless the kernel communicates between them (global atomics, volatile
accesses, fences: `DecodedKernel.serial`); independent CTAs run in parallel batches on `threads` worker
threads (the interpreter releases the GIL), serial kernels run CTA 0, 1, 2... in order on one.
Each CTA's records are kept per CTA, so the snapshot is the same whatever the thread count.

What a launch holds follows its snapshot, not its grid or its steps: per-CTA counts only for the
recorded launch, the snapshot's records up to `record_limit` (a runaway loop still runs on to
its step limit, which is the error it gets), and the first failing CTA stops every batch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from tuiprof import units
from tuiprof.collect.emu.decode import DecodedKernel, UnsupportedPtx
from tuiprof.collect.emu.heap import Heap
from tuiprof.collect.emu.kernel.codes import (
    CTL_FAILED,
    CTL_RECORDS,
    E_ADDR,
    E_BYTES,
    E_CTA,
    E_INFO,
    E_MASK,
    E_MASK2,
    E_OTHER,
    E_PC,
    E_REASON,
    E_SPACE,
    E_STATUS,
    E_THREAD,
    N_CTL,
    N_ERR,
    SP_CONST,
    SP_FPARAM,
    SP_GLOBAL,
    SP_LOCAL,
    SP_PARAM,
    SP_SHARED,
    ST_ABORTED,
    ST_BAD_BARRIER,
    ST_CALL_DEPTH,
    ST_CBAR_OVERFLOW,
    ST_DEADLOCK,
    ST_MISALIGNED,
    ST_NONUNIFORM,
    ST_OK,
    ST_OOB,
    ST_SPACE,
    ST_STEP_LIMIT,
    ST_TEXTURE,
    ST_TRAP,
    ST_UNSUPPORTED,
    TRAP_ASSERT,
    TRAP_BREAKPOINT,
    TS_BAR,
    TS_CBAR,
    TS_SYNC,
    UNS_BAR_MIX,
    UNS_BAR_TWICE,
    UNS_MASK_CONFLICT,
    UNS_NOT_MEMBER,
    UNS_SHFL_SOURCE,
)
from tuiprof.collect.emu.kernel.interp import (
    C_BATCH,
    C_CONST,
    C_ENTRY,
    C_GX,
    C_GY,
    C_GZ,
    C_LANES,
    C_LOCAL,
    C_LOCAL_WORDS,
    C_NSLOTS,
    C_NSOPS,
    C_PARAM,
    C_REC_CAP,
    C_REC_MAX,
    C_SHARED,
    C_SM_BASE,
    C_SMS,
    C_STEP_LIMIT,
    C_T,
    C_W,
    CS_CTAID_X,
    CS_CTAID_Y,
    CS_CTAID_Z,
    CS_SMID,
    N_CFG,
    families_of,
    interpreter,
    run_ctas_for,
)
from tuiprof.collect.options import DEFAULT_STEP_LIMIT
from tuiprof.errors import TuiprofError
from tuiprof.jit import kernel_failure, note_first_compile
from tuiprof.ptx.module import SourceLoc
from tuiprof.resources import memory_budget
from tuiprof.trace.data import LANES, MAX_GRID_CTAS

_SPACE_NAMES = {SP_GLOBAL: "global", SP_SHARED: "shared", SP_LOCAL: "local", SP_CONST: "const", SP_PARAM: "param",
                SP_FPARAM: "parameter"}


MAX_EMULATED_CTAS = MAX_GRID_CTAS
"""CTAs one launch may have in the emulator (`check_grid`): what a trace may hold."""
RECORD_BYTES = 8 + 4 + 4 + 8 * LANES
"""One kept warp access in the interpreter: key, op, mask and 32 lane addresses."""
RECORD_PEAK = 4
"""Copies of the kept records alive at once at worst: the interpreter's arrays (up to twice what
they hold), their concatenation and its sorted copy."""
MAX_BATCHES = 4096


class EmulationError(TuiprofError):
    """The kernel failed while it ran: bad access, trap, runaway loop, deadlock."""


class SnapshotTooLarge(EmulationError):
    """The snapshot's CTAs made more warp accesses than the emulator keeps (`record_limit`)."""

    def __init__(self, message: str, hint: str, *, ctas: int, accesses: int, limit: int) -> None:
        super().__init__(message, hint)
        self.ctas = ctas
        """The snapshot's CTAs (its warm-up's included)."""
        self.accesses = accesses
        """The warp accesses they made."""
        self.limit = limit
        """The warp accesses the emulator keeps."""


@dataclass(frozen=True)
class RunResult:
    """What one launch produced: per-CTA counts for the grid and the snapshot's records."""

    insts: np.ndarray
    """int64 [grid CTAs]: dynamic warp instructions of each CTA (empty unless asked for: `execute`)."""
    accesses: np.ndarray
    """int64 [grid CTAs]: warp accesses (recorded ops executed with some lane active) of each CTA
    (empty unless asked for)."""
    key: np.ndarray
    """int64 [R]: snapshot position x warps per CTA + warp index, in program order per warp."""
    op: np.ndarray
    mask: np.ndarray
    addr: np.ndarray
    op_space: np.ndarray
    """int64 [n_ops, 3]: accesses of each op that resolved to global, shared and local memory."""
    thread_insts: int
    """Thread instructions executed (active lanes summed over warp instructions), for throughput."""


def register_template(prog: DecodedKernel, grid: tuple[int, int, int], block: tuple[int, int, int], dynamic_shared: int,
                      n_sms: int) -> tuple[np.ndarray, np.ndarray]:
    """Initial registers of a CTA (constants, thread and launch special registers) and the table of
    per-CTA special registers the interpreter fills."""
    threads = block[0] * block[1] * block[2]
    warps = -(-threads // 32)
    tp = warps * 32
    regs = np.zeros((prog.n_slots, tp), np.int64)
    for slot, value in prog.const_slots:
        regs[slot, :] = value
    t = np.arange(tp, dtype=np.int64)
    lane = t % 32
    thread_values = {
        "tid.x": t % block[0], "tid.y": t // block[0] % block[1], "tid.z": t // (block[0] * block[1]),
        "laneid": lane, "warpid": t // 32,
        "lanemask_eq": np.left_shift(1, lane), "lanemask_lt": np.left_shift(1, lane) - 1,
        "lanemask_le": np.left_shift(2, lane) - 1,
        "lanemask_gt": (0xFFFFFFFF - (np.left_shift(2, lane) - 1)) & 0xFFFFFFFF,
        "lanemask_ge": (0xFFFFFFFF - (np.left_shift(1, lane) - 1)) & 0xFFFFFFFF,
    }
    total_shared = prog.dynamic_shared_offset + dynamic_shared if dynamic_shared else prog.shared_static
    launch_values = {
        "ntid.x": block[0], "ntid.y": block[1], "ntid.z": block[2],
        "nctaid.x": grid[0], "nctaid.y": grid[1], "nctaid.z": grid[2],
        "nsmid": n_sms, "nwarpid": warps, "gridid": 0, "dynamic_smem_size": dynamic_shared,
        "total_smem_size": total_shared, "nclusterid.x": grid[0], "nclusterid.y": grid[1], "nclusterid.z": grid[2],
        "cluster_nctaid.x": 1, "cluster_nctaid.y": 1, "cluster_nctaid.z": 1, "cluster_ctaid.x": 0,
        "cluster_ctaid.y": 0, "cluster_ctaid.z": 0, "cluster_ctarank": 0, "cluster_nctarank": 1,
        "is_explicit_cluster": 0, "reserved_smem_offset_begin": 0, "reserved_smem_offset_end": 0,
        "reserved_smem_offset_cap": 0, "reserved_smem_offset_0": 0, "reserved_smem_offset_1": 0,
        "aggr_smem_size": total_shared, "current_graph_exec": 0,
    }
    per_cta = {"ctaid.x": CS_CTAID_X, "ctaid.y": CS_CTAID_Y, "ctaid.z": CS_CTAID_Z, "smid": CS_SMID,
               "clusterid.x": CS_CTAID_X, "clusterid.y": CS_CTAID_Y, "clusterid.z": CS_CTAID_Z}
    spec = []
    for slot, name in prog.special_slots:
        if name in thread_values:
            regs[slot, :] = thread_values[name]
        elif name in launch_values:
            regs[slot, :] = launch_values[name]
        else:
            spec.append((slot, per_cta[name]))
    return regs, np.array(spec, np.int64).reshape(-1, 2)


def _where(prog: DecodedKernel, pc: int, source_name: Callable[[SourceLoc | None], str]) -> str:
    if 0 <= pc < len(prog.texts):
        return f"{prog.texts[pc]} at {source_name(prog.locs[pc])} (PTX line {prog.ptx_lines[pc]})"
    return "an unknown instruction"


def _thread(t: int, block: tuple[int, int, int]) -> str:
    x, y, z = t % block[0], t // block[0] % block[1], t // (block[0] * block[1])
    return f"thread ({x},{y},{z})"


def _cta(c: int, grid: tuple[int, int, int]) -> str:
    x, y, z = c % grid[0], c // grid[0] % grid[1], c // (grid[0] * grid[1])
    return f"CTA ({x},{y},{z})"


def raise_for(err: np.ndarray, prog: DecodedKernel, grid: tuple[int, int, int], block: tuple[int, int, int],
              source_name: Callable[[SourceLoc | None], str], step_limit: int) -> None:
    """Turn a failed run's status into one clear EmulationError."""
    status = int(err[E_STATUS])
    if status == ST_OK:
        return
    pc = int(err[E_PC])
    where = _where(prog, pc, source_name)
    who = f"{_thread(int(err[E_THREAD]), block)} of {_cta(int(err[E_CTA]), grid)}"
    addr = int(err[E_ADDR]) & ((1 << 64) - 1)
    nbytes = int(err[E_BYTES])
    space = _SPACE_NAMES.get(int(err[E_SPACE]), "memory")
    kernel = prog.kernel
    if status == ST_OOB:
        raise EmulationError(f"out-of-bounds {space} access in {kernel}: {nbytes} bytes at 0x{addr:x} by {who}, "
                             f"{where}",
                             "the address is outside every buffer of that space; check the index and the sizes "
                             "the launch script allocates")
    if status == ST_MISALIGNED:
        raise EmulationError(f"misaligned {space} access in {kernel}: {nbytes} bytes at 0x{addr:x} by {who}, {where}",
                             f"an access of {nbytes} bytes must be {nbytes}-byte aligned")
    if status == ST_TEXTURE:
        if int(err[E_INFO]) == 1:
            raise EmulationError(f"surface access out of range in {kernel}: {nbytes} bytes at byte x {addr} by {who}, "
                                 f"{where} (.trap)", "check the coordinates (a surface's x is in bytes), or use "
                                 "cudaBoundaryModeClamp/Zero")
        raise EmulationError(f"texture or surface fetch through 0x{addr:x}, which is no texture object of this "
                             f"device, in {kernel} by {who}, {where}",
                             "pass what dev.texture(...) returns for a cudaTextureObject_t parameter (dev.surface(...) "
                             "for a cudaSurfaceObject_t)")
    if status == ST_SPACE:
        raise EmulationError(f"write to read-only {space} memory in {kernel} by {who}, {where}",
                             "const and kernel parameter memory cannot be written")
    if status == ST_STEP_LIMIT:
        raise EmulationError(f"{kernel} ran more than {step_limit:,} warp instructions in {_cta(int(err[E_CTA]), grid)} "
                             f"without finishing (runaway loop?); last at {where}",
                             f"check the loop bounds, or raise the limit for a longer kernel: --step-limit N "
                             f"(default {DEFAULT_STEP_LIMIT:,} warp instructions per CTA)")
    if status == ST_DEADLOCK:
        state = int(err[E_ADDR])
        what = {TS_BAR: "a CTA barrier (bar.sync / __syncthreads)", TS_SYNC: "a warp collective (.sync)",
                TS_CBAR: "a reconvergence point"}.get(state, "a barrier")
        raise EmulationError(f"barrier deadlock in {kernel}, {_cta(int(err[E_CTA]), grid)}: {nbytes} threads wait "
                             f"and none can run; {_thread(int(err[E_THREAD]), block)} waits at {what}, {where}",
                             "every thread of the CTA must reach the same barriers (a barrier whose thread count "
                             "exceeds 32 x the warps that reach it, a CTA barrier that some threads of a warp never "
                             "reach, or a warp collective whose mask names lanes that never execute one of its kind "
                             "with the same mask, deadlocks)")
    if status == ST_TRAP:
        info = int(err[E_INFO])
        if info == TRAP_BREAKPOINT:
            raise EmulationError(f"{kernel} stopped: breakpoint (brkpt) in {who}, {where}",
                                 "brkpt stops a kernel as a trap does on a GPU outside a debugger; remove it (or the asm "
                                 "that emits it) to profile the kernel")
        what = "assertion failed" if info == TRAP_ASSERT else "trap"
        raise EmulationError(f"{kernel} stopped: {what} in {who}, {where}",
                             "the kernel executed a trap or a failed assert()")
    if status == ST_NONUNIFORM:
        raise EmulationError(f"bra.uni is not uniform in {kernel}: lanes 0x{addr:08x} of 0x{nbytes:08x} take it, "
                             f"{who}, {where}", "a .uni branch must be taken by all active lanes or none")
    if status == ST_CALL_DEPTH:
        raise EmulationError(f"call stack deeper than the emulator allows in {kernel}, {who}, {where}",
                             "device function calls nest too deeply")
    if status == ST_CBAR_OVERFLOW:
        raise EmulationError(f"too many nested divergent branches pending in one warp of {kernel}, {where}",
                             "the emulator tracks at most 32 reconvergence points per warp")
    if status == ST_BAD_BARRIER:
        if not 0 <= addr < 16:
            raise EmulationError(f"barrier id {addr} out of range in {kernel}, {who}, {where}",
                                 "bar.sync ids are 0 to 15")
        raise EmulationError(f"barrier thread count {int(err[E_BYTES])} is not a positive multiple of 32 in {kernel}, "
                             f"{who}, {where}", "a barrier's thread count counts whole warps (PTX ISA, barrier)")
    if status == ST_UNSUPPORTED:
        raise _refusal(err, prog, block, source_name)
    raise EmulationError(f"the emulator stopped with status {status} in {kernel} at {where}", "please report it")


def check_grid(kernel: str, grid: tuple[int, int, int]) -> None:
    """Refuse a grid the emulator cannot run in a sensible time or hold the records of: every CTA
    runs (about 10 us for one that exits at once: hours for CUDA's largest grids), and the trace
    of a recorded launch keeps per-CTA records for the whole grid."""
    n = grid[0] * grid[1] * grid[2]
    if n > MAX_EMULATED_CTAS:
        raise EmulationError(f"the launch of {kernel} on grid {grid} has {n:,} CTAs; the emulator runs at most "
                             f"{MAX_EMULATED_CTAS:,} CTAs per launch (a tuiprof limit, not CUDA's)",
                             "launch fewer CTAs in the launch script (the snapshot needs a few hundred; a grid-stride "
                             "loop keeps the work the same), or run it on a GPU (--backend gpu)")


def record_limit() -> int:
    """Warp accesses one launch's snapshot may keep in the emulator: the memory budget (half the
    machine's memory or of ulimit -v, as for loading a trace) over what each costs at the peak."""
    return max(memory_budget().bytes // (RECORD_PEAK * RECORD_BYTES), 1024)


def _batches(n_ctas: int, threads: int) -> list[tuple[int, int]]:
    """Consecutive CTA ranges: at least 8 per worker thread, otherwise about 64 CTAs each, and
    never more than MAX_BATCHES of them (so that the bookkeeping of a huge grid stays small)."""
    n_batches = max(1, min(n_ctas, max(8 * threads, min(n_ctas // 64, MAX_BATCHES))))
    edges = np.linspace(0, n_ctas, n_batches + 1).astype(np.int64)
    return [(int(edges[i]), int(edges[i + 1])) for i in range(n_batches) if edges[i + 1] > edges[i]]


def _refusal(err: np.ndarray, prog: DecodedKernel, block: tuple[int, int, int],
             source_name: Callable[[SourceLoc | None], str]) -> TuiprofError:
    """The error for a run stopped with ST_UNSUPPORTED: an instruction the interpreter has no case
    for, or a case that PTX leaves undefined (kernel/sync.py), named as the decoder names the
    instructions it refuses."""
    pc = int(err[E_PC])
    if not 0 <= pc < len(prog.texts):
        return EmulationError(f"unsupported PTX instruction at an unknown pc {pc} in {prog.kernel}", "please report it")
    t = int(err[E_THREAD])
    lane, other, bid = t % 32, int(err[E_OTHER]), int(err[E_OTHER])
    mask, mask2 = int(err[E_MASK]) & 0xFFFFFFFF, int(err[E_MASK2]) & 0xFFFFFFFF
    warp = f"warp {t // 32} ({_thread(t, block)})"
    undefined = ("PTX leaves this undefined, so no emulated result could be trusted; make every lane that executes "
                 "the collective name itself and the same lanes in its mask, and read only lanes that take part")
    reason = int(err[E_REASON])
    if reason == UNS_NOT_MEMBER:
        what = f"lane {lane} of {warp} executes it but is not in its membermask 0x{mask:08x}"
    elif reason == UNS_MASK_CONFLICT:
        what = (f"lanes {lane} and {other} of {warp} execute it together with different membermasks "
                f"(0x{mask:08x} and 0x{mask2:08x}) that name each other")
    elif reason == UNS_SHFL_SOURCE:
        what = (f"lane {lane} reads lane {other}, which does not execute it with membermask 0x{mask:08x} "
                f"(exited, elsewhere, predicated off or not in the mask), in {warp}")
    elif reason == UNS_BAR_MIX:
        what = (f"barrier {bid} is used by different warps with bar.red and another form, or with different thread "
                f"counts ({_thread(t, block)})")
        undefined = "PTX leaves such a barrier unpredictable; give bar.red a barrier of its own, and one thread count"
    elif reason == UNS_BAR_TWICE:
        what = f"warp {t // 32} arrives again at barrier {bid} before it completes ({_thread(t, block)})"
        undefined = "PTX leaves this undefined: after bar.arrive, a warp must not use that barrier until it completes"
    else:
        return EmulationError(f"unsupported PTX instruction {_where(prog, pc, source_name)}", "please report it")
    return UnsupportedPtx(f"unsupported PTX instruction {prog.texts[pc]} ({source_name(prog.locs[pc])}, PTX line "
                          f"{prog.ptx_lines[pc]}) in {prog.kernel}: {what}", undefined)


def execute(prog: DecodedKernel, heap: Heap, grid: tuple[int, int, int], block: tuple[int, int, int], params: bytes,
            dynamic_shared: int, snapshot: np.ndarray, *, n_sms: int, threads: int, step_limit: int,
            source_name: Callable[[SourceLoc | None], str], per_cta: bool = True,
            on_ctas: Callable[[int], None] | None = None, constants: bytes | None = None,
            sm_spread: int = 0, families: frozenset[int] | None = None) -> RunResult:
    """Run every CTA of the grid; record the warp accesses of the CTAs `snapshot` (linear ids), and
    with `per_cta` each CTA's counts (the recorded launch's trace keeps them; other launches need
    no memory in proportion to their grid). `constants` is the constant bank as the launch script
    set it (``dev.set_symbol``; default the module's initial values). The first failure (in CTA
    order) ends the run. `on_ctas` hears the CTAs done so far after each batch (from the worker
    threads). `sm_spread`: the SMs the snapshot's CTAs run on, whose numbers ``%smid`` gives
    (`tuiprof.arch.occupancy.snapshot_spread`; 0: all `n_sms`, which ``%nsmid`` gives).
    `families`: the interpreter variant to run on (one of `interp.VARIANTS` holding the kernel's
    families: `tuiprof warmup` compiles each); None: the smallest that runs it."""
    check_grid(prog.kernel, grid)
    n_ctas = grid[0] * grid[1] * grid[2]
    nthreads = block[0] * block[1] * block[2]
    warps = -(-nthreads // 32)
    init, cta_spec = register_template(prog, grid, block, dynamic_shared, n_sms)
    shared = prog.dynamic_shared_offset + dynamic_shared if dynamic_shared else prog.shared_static
    rec_max = record_limit()
    cfg = np.zeros(N_CFG, np.int64)
    cfg[C_T], cfg[C_W], cfg[C_NSLOTS] = nthreads, warps, prog.n_slots
    cfg[C_SHARED], cfg[C_LOCAL], cfg[C_SMS] = shared, prog.local_size, sm_spread if sm_spread > 0 else n_sms
    cfg[C_STEP_LIMIT], cfg[C_ENTRY], cfg[C_NSOPS] = step_limit, prog.entry, prog.n_ops
    cfg[C_GX], cfg[C_GY], cfg[C_GZ] = grid
    bank = prog.const_image if constants is None else constants
    cfg[C_CONST], cfg[C_PARAM] = len(bank), len(params)
    cfg[C_LOCAL_WORDS] = -(-prog.local_size // 4) + 4
    cfg[C_LANES] = 32
    cfg[C_SM_BASE] = int(snapshot[0]) if snapshot.size else 0
    cfg[C_REC_MAX] = rec_max
    const_buf = np.frombuffer(bytes(bank) + b"\0" * 16, np.uint8).copy()
    param_buf = np.frombuffer(params + b"\0" * 16, np.uint8).copy()
    seg_lo, seg_hi, seg_off = heap.segments()
    by_id = np.argsort(snapshot, kind="stable")
    snap_sorted = snapshot[by_id]
    insts = np.zeros(n_ctas if per_cta else 0, np.int64)
    accesses = np.zeros(n_ctas if per_cta else 0, np.int64)
    op_space = np.zeros((max(prog.n_ops, 1), 3), np.int64)
    ctl = np.zeros(N_CTL, np.int64)
    ctl[CTL_FAILED] = np.iinfo(np.int64).max
    if families is not None and not families_of(prog.code) <= families:
        raise ValueError(f"the interpreter for families {sorted(families)} cannot run {prog.kernel}")
    run_ctas = run_ctas_for(prog.code) if families is None else interpreter(families)
    lock = threading.Lock()
    done = [0]
    """CTAs run so far (under `lock`)."""

    def run(index: int, first: int, last: int) -> tuple[tuple[np.ndarray, ...] | None, np.ndarray, int]:
        """One batch: its records (None when it kept none), its status and its thread instructions."""
        lo, hi = np.searchsorted(snap_sorted, [first, last])
        sp = np.full(last - first, -1, np.int64)
        sp[snap_sorted[lo:hi] - first] = by_id[lo:hi]
        c = cfg.copy()
        c[C_REC_CAP] = 1024 if hi > lo else 16
        c[C_BATCH] = index
        err = np.zeros(N_ERR, np.int64)
        ops = np.zeros_like(op_space)
        out_i = np.zeros(last - first, np.int64)
        out_a = np.zeros(last - first, np.int64)
        out_t = np.zeros(last - first, np.int64)
        try:
            records = run_ctas(prog.code, c, init, cta_spec, np.arange(first, last, dtype=np.int64), sp, heap.buf,
                               seg_lo, seg_hi, seg_off, const_buf, param_buf, out_i, out_a, out_t, ops, err, ctl)
        except SystemError as exc:  # the machine code's fault, not the launch script's (which this runs under)
            failure = kernel_failure(exc)
            if failure is None:
                raise
            raise failure from exc
        with lock:
            if err[E_STATUS] not in (ST_OK, ST_ABORTED):
                ctl[CTL_FAILED] = min(int(ctl[CTL_FAILED]), index)   # later batches stop at their next check
            op_space[:] += ops
            done[0] += last - first
            if on_ctas is not None:
                on_ctas(done[0])
        if per_cta:
            insts[first:last] = out_i
            accesses[first:last] = out_a
        return (records if records[0].shape[0] else None), err, int(out_t.sum())

    note_first_compile(run_ctas, "the emulator's kernels")
    batches = _batches(n_ctas, threads)
    if prog.serial or threads <= 1 or len(batches) < 2:   # CTA 0, 1, 2... in order, up to the first failure
        results = []
        for i, b in enumerate(batches):
            results.append(run(i, *b))
            if results[-1][1][E_STATUS] != ST_OK:
                break
    else:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            results = list(pool.map(lambda ib: run(ib[0], *ib[1]), enumerate(batches)))
    for _, err, _ in results:   # in CTA order: the first CTA that failed, whatever the timing
        if err[E_STATUS] not in (ST_OK, ST_ABORTED):
            raise_for(err, prog, grid, block, source_name, step_limit)
    if int(ctl[CTL_RECORDS]) > rec_max:
        budget = memory_budget()
        raise SnapshotTooLarge(f"the snapshot of {prog.kernel} ({snapshot.shape[0]:,} CTAs) made {int(ctl[CTL_RECORDS]):,} "
                               f"warp accesses; the emulator keeps at most {rec_max:,} of them in "
                               f"{units.size(budget.bytes)}, half {budget.of} (a tuiprof limit)",
                               "record fewer CTAs (--snapshot N), or give the kernel smaller inputs in the launch script",
                               ctas=int(snapshot.shape[0]), accesses=int(ctl[CTL_RECORDS]), limit=rec_max)
    kept = [r for r, _, _ in results if r is not None]
    key = np.concatenate([r[0] for r in kept]) if kept else np.zeros(0, np.int64)
    order = np.argsort(key, kind="stable")
    op = np.concatenate([r[1] for r in kept])[order] if kept else np.zeros(0, np.int32)
    mask = np.concatenate([r[2] for r in kept])[order] if kept else np.zeros(0, np.uint32)
    addr = np.concatenate([r[3] for r in kept])[order] if kept else np.zeros((0, 32), np.uint64)
    return RunResult(insts=insts, accesses=accesses, key=key[order], op=op, mask=mask,
                     addr=np.ascontiguousarray(addr), op_space=op_space,
                     thread_insts=sum(t for _, _, t in results))
