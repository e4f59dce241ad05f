"""Occupancy against Zhang11 Table 2 and NVIDIA's rules (cuda_occupancy.h) worked by hand."""

from __future__ import annotations

import pytest

from tuiprof.arch import load_arch
from tuiprof.arch.occupancy import dynamic_shared_for_md, next_register_cap, occupancy, register_cap
from tuiprof.errors import UsageError


@pytest.mark.parametrize("regs,smem,ctas,limiter", [
    # Zhang11 Table 2 (GTX 285, 64-thread blocks): 8x8 -> 8, 16x16 -> 8, 32x32 -> 3 blocks.
    (16, 348, 8, "ctas"),
    (30, 1088, 8, "ctas"),
    (58, 4284, 3, "shared"),
])
def test_paper001_table2(regs: int, smem: int, ctas: int, limiter: str) -> None:
    o = occupancy(load_arch("gtx285"), 64, regs, smem)
    assert (o.ctas_per_sm, o.limiter) == (ctas, limiter)
    assert o.warps_per_sm == ctas * 2  # Table 2's last column: active warps


def test_paper001_table2_register_column() -> None:
    # Table 2 '# blocks (register)': 16 and 8 for 16 and 30 registers (64 threads, 16384 registers,
    # 512-register allocation unit). For 58 registers the CC 1.3 rule gives 4 (3712 -> 4096 per
    # block), the paper prints 3; the kernel's count is 3 either way, set by shared memory.
    gtx285 = load_arch("gtx285")
    assert occupancy(gtx285, 64, 16, 0).by_registers == 16
    assert occupancy(gtx285, 64, 30, 0).by_registers == 8
    assert occupancy(gtx285, 64, 58, 0).by_registers == 4


@pytest.mark.parametrize("arch,threads,regs,smem,dyn,ctas,limiter", [
    # V100: 256 threads, 32 regs: 1024 regs/warp, 16384/1024 = 16 warps per sub-partition x 4 = 64
    # warps -> 8 CTAs; warps limit 64/8 = 8 too; registers come after warps in the limiter order.
    ("v100", 256, 32, 0, 0, 8, "warps"),
    # V100: 256 threads, 40 regs: 1280 regs/warp -> 12 warps per sub-partition -> 48 warps -> 6 CTAs.
    ("v100", 256, 40, 0, 0, 6, "registers"),
    # V100: 128 threads, 64 regs: 2048/warp -> 8 per sub-partition -> 32 warps -> 8 CTAs.
    ("v100", 128, 64, 0, 0, 8, "registers"),
    # V100: 32 KiB static shared, 96 KiB per SM (granularity 256, no reserve) -> 3 CTAs.
    ("v100", 128, 16, 32 << 10, 0, 3, "shared"),
    # A100: 48 KiB dynamic + 1 KiB reserved = 50176 B; 167936 // 50176 = 3 CTAs.
    ("a100", 128, 16, 0, 48 << 10, 3, "shared"),
    # A100: 64 threads, 16 regs: 32 CTAs (the CTA-slot limit) before warps (64/2 = 32) ... tie -> ctas.
    ("a100", 64, 16, 0, 0, 32, "ctas"),
    # H100: 1024 threads, 64 regs: 2048 regs/warp -> 8 warps per sub-partition -> 32 warps < 32 warps/CTA? = 1 CTA.
    ("h100", 1024, 64, 0, 0, 1, "registers"),
    # H100: 1024 threads, 32 regs -> 64 warps -> 2 CTAs, same as the warp limit.
    ("h100", 1024, 32, 0, 0, 2, "warps"),
    # H100: 100 KiB dynamic + 1 KiB reserve = 103424; 233472 // 103424 = 2.
    ("h100", 256, 32, 0, 100 << 10, 2, "shared"),
    # Tesla C2050: 256 threads, 20 regs: 640 regs/warp (unit 64) -> 51 warps -> 6 CTAs; warps limit 48/8 = 6.
    ("tesla-c2050", 256, 20, 0, 0, 6, "warps"),
    # Tesla C2050: 256 threads, 32 regs: 1024/warp -> 32 warps -> 4 CTAs.
    ("tesla-c2050", 256, 32, 0, 0, 4, "registers"),
])
def test_nvidia_rules_by_hand(arch: str, threads: int, regs: int, smem: int, dyn: int, ctas: int, limiter: str) -> None:
    o = occupancy(load_arch(arch), threads, regs, smem, dyn)
    assert (o.ctas_per_sm, o.limiter) == (ctas, limiter)


def test_register_subpartition_rounding_differs_from_plain_division() -> None:
    # 256 threads x 40 regs on V100: plain 65536 // (40*32*8) = 6 too, but 96 threads x 40 regs:
    # 3 warps per CTA, 12 per sub-partition x 4 = 48 warps -> 16 CTAs, plain division gives 17.
    assert occupancy(load_arch("v100"), 96, 40).by_registers == 16


@pytest.mark.parametrize("args", [(0, 16), (2048, 16), (256, 300), (256, -1)])
def test_impossible_launch_raises(args: tuple[int, int]) -> None:
    with pytest.raises(UsageError):
        occupancy(load_arch("v100"), *args)


def test_shared_over_per_cta_limit_raises() -> None:
    with pytest.raises(UsageError, match="shared"):
        occupancy(load_arch("v100"), 128, 16, 97 << 10)


@pytest.mark.parametrize("arch,md", [("v100", 3), ("a100", 1), ("h100", 5), ("tesla-c2050", 2)])
def test_dynamic_shared_caps_md(arch: str, md: int) -> None:
    a = load_arch(arch)
    dyn = dynamic_shared_for_md(a, 128, 32, 0, md)
    assert occupancy(a, 128, 32, 0, dyn).ctas_per_sm == md
    assert dynamic_shared_for_md(a, 128, 32, 0, 64) == 0


@pytest.mark.parametrize("arch, regs, cap", [
    # H100: 64K registers in 4 sub-partitions of 16K, 256-register warp allocations, 64 warps/SM.
    # Up to 32 registers every one of the 64 warps fits (16384 / (32 * 32) = 16 per sub-partition).
    ("h100", 12, 32), ("h100", 32, 32),
    # 33-40: 40 x 32 = 1280 per warp, 16384 // 1280 = 12 warps per sub-partition, 48 per SM.
    ("h100", 33, 40), ("h100", 40, 40),
    # 41: 48 x 32 = 1536, 10 per sub-partition (40 warps); 10 hold up to 16384 // 10 // 32 = 51,
    # rounded down to the allocation unit: 48.
    ("h100", 41, 48),
    # 100: 104 x 32 = 3328, 4 per sub-partition; 4 hold up to 128 registers each.
    ("h100", 100, 128), ("h100", 255, 255),
    # Tesla C2050 allocates per CTA, two warps at a time: one warp of 20 registers takes
    # 2 x 32 x 20 = 1280 of 32768 (25 fit), of 21 registers 1344 (24 fit).
    ("tesla-c2050", 20, 20), ("tesla-c2050", 0, 0),
])
def test_register_cap_by_hand(arch: str, regs: int, cap: int) -> None:
    """The most registers that keep a kernel's register-limited warps per SM."""
    assert register_cap(load_arch(arch), regs) == cap


def test_next_register_cap_steps_down_one_occupancy_level() -> None:
    h100 = load_arch("h100")
    assert [next_register_cap(h100, c) for c in (32, 40, 48, 255, 0)] == [40, 48, 56, 0, 0]
