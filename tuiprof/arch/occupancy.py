"""CTAs per SM from a kernel's resource use, and which resource limits it.

Follows NVIDIA's rules as written in ``cuda_occupancy.h`` (cudaOccMaxBlocksPerSMRegsLimit,
cudaOccMaxBlocksPerSMSmemLimit) for compute capability 2.0 and later: registers are allocated per
warp in units of ``register_alloc_unit`` and warps are placed per register sub-partition; shared
memory per CTA includes the driver's reserved bytes and is rounded to ``shared_alloc_unit``. For
compute capability 1.x (GT200, ``register_allocation = "cta"``) registers are allocated per CTA
after rounding its warps up to ``warp_alloc_granularity`` (Zhang11, Table 2).

The L1 a kernel gets on Volta and later follows from the same shared memory: `carveout_arch`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tuiprof.arch.spec import Arch
from tuiprof.errors import UsageError

LIMITERS = ("ctas", "warps", "registers", "shared")


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


@dataclass(frozen=True)
class Occupancy:
    """Resident CTAs per SM and the per-resource limits behind it."""

    ctas_per_sm: int
    limiter: str
    by_ctas: int
    by_warps: int
    by_registers: int
    by_shared: int
    warps_per_cta: int
    shared_per_cta: int
    """Shared memory allocated to one CTA (static + dynamic + reserved, rounded)."""

    @property
    def warps_per_sm(self) -> int:
        return self.ctas_per_sm * self.warps_per_cta

    def fraction(self, arch: Arch) -> float:
        """Active warps over the SM's maximum (NVIDIA's 'occupancy')."""
        return self.warps_per_sm / arch.max_warps_per_sm


def _registers_limit(arch: Arch, regs: int, warps: int) -> int:
    if regs == 0:
        return arch.max_ctas_per_sm
    if regs > arch.max_registers_per_thread:
        return 0
    if arch.register_allocation == "cta":
        per_cta = _round_up(_round_up(warps, arch.warp_alloc_granularity) * arch.warp_size * regs,
                            arch.register_alloc_unit)
        return arch.registers_per_sm // per_cta
    per_warp = _round_up(regs * arch.warp_size, arch.register_alloc_unit)
    # cudaOccMaxBlocksPerSMRegsLimit's hardware check: the CTA's warps rounded up to the
    # sub-partition count must fit the per-CTA register file.
    if per_warp * _round_up(warps, arch.register_subpartitions) > arch.registers_per_sm:
        return 0
    per_sub = (arch.registers_per_sm // arch.register_subpartitions) // per_warp
    return (per_sub * arch.register_subpartitions) // _round_up(warps, arch.warp_alloc_granularity)


def register_cap(arch: Arch, registers_per_thread: int) -> int:
    """The most registers per thread that keep as many resident warps per SM as
    `registers_per_thread` allows, counting registers alone (one-warp allocations): the budget
    under which an instrumented kernel keeps its plain kernel's occupancy whatever its launch.
    0 (unknown) stays 0."""
    if registers_per_thread <= 0:
        return 0

    def warps(regs: int) -> int:
        return min(arch.max_warps_per_sm, _registers_limit(arch, regs, 1))

    want = warps(registers_per_thread)
    cap = registers_per_thread
    while cap < arch.max_registers_per_thread and warps(cap + 1) >= want:
        cap += 1
    return cap


def bounded_registers(arch: Arch, max_threads: int, min_ctas: int = 1, maxnreg: int | None = None) -> int:
    """The registers per thread a kernel's launch bounds leave it (``__launch_bounds__(T, M)``,
    PTX ``.maxntid T .minnctapersm M``, or ``.maxnreg N``): the most for which M CTAs of T threads
    fit an SM's register file, as the compiler caps them. What tuiprof assumes for occupancy when
    no assembler measured the kernel."""
    top = arch.max_registers_per_thread if maxnreg is None else min(maxnreg, arch.max_registers_per_thread)
    if max_threads <= 0:
        return top
    warps = -(-max_threads // arch.warp_size)
    regs = top
    while regs > 1 and _registers_limit(arch, regs, warps) < max(min_ctas, 1):
        regs -= 1
    return regs


def next_register_cap(arch: Arch, cap: int) -> int:
    """The cap one occupancy step below `cap` (`register_cap` of one more register); 0 past the
    most registers a thread may have."""
    return register_cap(arch, cap + 1) if 0 < cap < arch.max_registers_per_thread else 0


def occupancy(arch: Arch, threads_per_cta: int, registers_per_thread: int,
              shared_per_cta: int = 0, dynamic_shared: int = 0) -> Occupancy:
    """Resident CTAs per SM. Raises UsageError for a launch the GPU refuses."""
    if threads_per_cta <= 0:
        raise UsageError(f"threads per CTA must be positive, got {threads_per_cta}")
    if registers_per_thread < 0 or shared_per_cta < 0 or dynamic_shared < 0:
        raise UsageError("registers and shared memory sizes must not be negative")
    if threads_per_cta > arch.max_threads_per_cta:
        raise UsageError(f"{threads_per_cta} threads per CTA exceed the {arch.name} limit of {arch.max_threads_per_cta}",
                         "launch smaller CTAs")
    if registers_per_thread > arch.max_registers_per_thread:
        raise UsageError(f"{registers_per_thread} registers per thread exceed the {arch.name} limit of {arch.max_registers_per_thread}",
                         "the compiler would spill; check -maxrregcount")
    warps = -(-threads_per_cta // arch.warp_size)
    smem = shared_per_cta + dynamic_shared + arch.shared_reserved_per_cta
    smem_alloc = _round_up(smem, arch.shared_alloc_unit) if smem else 0
    if smem_alloc - arch.shared_reserved_per_cta > arch.shared_per_cta:
        raise UsageError(f"{shared_per_cta + dynamic_shared} B of shared memory per CTA exceed the {arch.name} limit of {arch.shared_per_cta} B",
                         "use less shared memory per CTA")
    by_ctas = arch.max_ctas_per_sm
    by_warps = arch.max_warps_per_sm // warps
    by_threads = arch.max_threads_per_sm // threads_per_cta
    by_warps = min(by_warps, by_threads)
    by_registers = _registers_limit(arch, registers_per_thread, warps)
    by_shared = arch.shared_per_sm // smem_alloc if smem_alloc else arch.max_ctas_per_sm
    limits = {"ctas": by_ctas, "warps": by_warps, "registers": by_registers, "shared": by_shared}
    ctas = min(limits.values())
    if ctas == 0:
        limiter = min(limits, key=lambda k: limits[k])
        raise UsageError(f"a CTA of {threads_per_cta} threads with {registers_per_thread} registers/thread and {smem} B shared "
                         f"does not fit on one {arch.name} SM ({limiter} exhausted)", "reduce registers, shared memory or threads per CTA")
    limiter = next(k for k in LIMITERS if limits[k] == ctas)
    return Occupancy(ctas, limiter, by_ctas, by_warps, by_registers, by_shared, warps, smem_alloc)


def dynamic_shared_for_md(arch: Arch, threads_per_cta: int, registers_per_thread: int,
                          shared_per_cta: int, md: int) -> int:
    """Dynamic shared memory per CTA that caps residency at `md` CTAs per SM (0 if none needed).

    This is how a CUDA program applies an MD decision (Yen14) without changing its code:
    launch with this many bytes of (unused) dynamic shared memory.
    """
    base = occupancy(arch, threads_per_cta, registers_per_thread, shared_per_cta)
    if md >= base.ctas_per_sm:
        return 0
    if md < 1:
        raise UsageError(f"MD must be at least 1, got {md}")
    # The allocation per CTA must exceed shared_per_sm / (md + 1).
    need = arch.shared_per_sm // (md + 1) + 1
    need = _round_up(need, arch.shared_alloc_unit)
    dynamic = max(0, need - shared_per_cta - arch.shared_reserved_per_cta)
    if dynamic + shared_per_cta > arch.shared_per_cta:
        raise UsageError(f"MD {md} cannot be reached with dynamic shared memory on {arch.name}",
                         "limit residency with __launch_bounds__ or more registers instead")
    return dynamic


def snapshot_spread(sm_count: int, ctas_per_sm: int, grid_ctas: int, counted_ctas: int) -> int:
    """The SMs a snapshot's CTAs are placed on (snapshot CTA k on SM ``k % n``: the simulator's
    placement and the emulator's ``%smid`` alike). A grid that fits in one wave (fewer CTAs than
    SMs times CTAs per SM) runs whole at once, ``grid / SMs`` CTAs on every SM whatever part of
    it a snapshot holds: the snapshot's `counted_ctas` go on as many SMs as they fill to that depth
    (a whole grid: all of them). Dealt over every SM, a snapshot smaller than the grid left each L1
    a thinner share of CTAs than the hardware gives it: spmv-u's 336 CTAs (a Tesla C2050's
    snapshot) over the H100's 132 SMs ran 2.5 an SM where its 512-CTA grid runs 3.9, and its
    predicted L1 read hit ratio was 74% against ncu's 49% (45% from a whole-grid recording, 46%
    packed on 87 SMs). A grid of full waves keeps every SM: an SM there runs CTAs a wave apart
    (k, k + SMs, ...), which a snapshot of consecutive CTAs does not hold, and packing it would put
    beside each other CTAs the hardware never runs together (the matrix products' neighbours share
    rows: their L1 read predicted 33-48% against 1-14%). Baghsorkhi12 sec. 3.1 sizes the default
    snapshot to fill every SM; this keeps the depth for the snapshots that do not."""
    if grid_ctas >= sm_count * ctas_per_sm:  # full waves: every SM, each CTA beside the ones the hardware runs with it
        return sm_count
    return max(1, min(sm_count, -(-counted_ctas * sm_count // max(grid_ctas, 1))))  # one wave: grid / SMs an SM


def carveout(arch: Arch, shared_per_sm: int) -> int | None:
    """The shared-memory carve-out (bytes) the driver gives a kernel that uses `shared_per_sm`
    bytes of shared memory per SM: the smallest of `Arch.shared_carveouts` that holds it (the
    largest when none does). None where the split is not the driver's to choose: before Volta
    (Fermi's split is the program's cudaFuncSetCacheConfig, 48 KB shared by default, which the
    preset's L1 already is), without a unified L1/shared array, or without an L1.

    Volta and later: "the driver automatically configures the shared memory capacity for each
    kernel" (NVIDIA Volta tuning guide, unified shared memory/L1/texture cache; the same in the
    Ampere and Hopper guides)."""
    if arch.cc < (7, 0) or not arch.unified_l1_shared or not arch.l1.enabled:
        return None
    return next((c for c in arch.shared_carveouts if c >= shared_per_sm), arch.shared_carveouts[-1])


def carveout_arch(arch: Arch, shared_per_sm: int) -> Arch:
    """`arch` with the L1 that the unified array leaves beside the `carveout` for
    `shared_per_sm` bytes of shared memory per SM (MD x the shared memory of one CTA): the set
    count of ``arch.l1`` is kept and the ways scaled to the rest, as GPGPU-Sim and Accel-Sim's
    adaptive L1 does (``gpgpu_adaptive_cache_config``: 256, 240, 224 or 192 ways on a V100 beside
    0, 8, 16 or 32 KB of shared memory), at most ``arch.l1.size``: the L1 beside the smallest step
    (no cap), or the L1 measured on the GPU (`tuiprof calibrate`: on an H100 the driver gave a kernel
    without shared memory 217 KiB, where the rest of the array would be 248; the h100 preset and a
    calibrated arch say so). `arch` itself where the driver does not choose the split."""
    carve = carveout(arch, shared_per_sm)
    if carve is None:
        return arch
    l1 = arch.l1
    per_way = l1.line * l1.sets * l1.partitions
    ways = min(arch.unified_l1_shared - carve, l1.size) // per_way
    if ways == l1.assoc:
        return arch
    new_l1 = dataclasses.replace(l1, size=max(ways, 0) * per_way, assoc=max(ways, 1))
    return dataclasses.replace(arch, l1=new_l1)
