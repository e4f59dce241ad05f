"""`tuiprof calibrate` without a GPU: the sweep analysis recovers a cache's size, line and sector
from the latencies an independent sectored LRU cache model gives for the same pointer chases;
the chains visit every slot once; `measure` end to end on a modelled GPU (the microbenchmarks
run in the emulator, their cycles a cache model's) recovers the latencies, sizes and DRAM batch
cost it was given, and latencies with no cache step are one clear error; the calibrated Arch is
written as TOML that ``--arch calibrated`` loads, with measured values marked; no GPU is one
clear error."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

from tuiprof.arch import load_arch
from tuiprof.arch.calibrate import (
    CalibrationError,
    Measurements,
    arch_toml,
    base_preset,
    calibrated_arch,
    calibrated_path,
    capacity,
    fit_cache,
    line_size,
    random_chain,
    refine_capacity,
    sector_size,
    strided_chain,
    write_calibrated,
)
from tuiprof.errors import ArchError

T_HIT, T_MISS = 30.0, 250.0


def chase_latency(footprint: int, stride: int, size: int, line: int, sector: int, ways: int) -> float:
    """Mean latency of the second pass of a cyclic chase through a set-associative LRU cache of
    `size` bytes that allocates `line`-byte lines and fills `sector`-byte sectors."""
    sets = size // (line * ways)
    cache: list[OrderedDict[int, set[int]]] = [OrderedDict() for _ in range(sets)]
    addrs = list(range(0, footprint, stride))
    cost = 0.0
    for rnd in range(2):
        for a in addrs:
            tag, sec = a // line, (a % line) // sector
            s = cache[tag % sets]
            hit = tag in s and sec in s[tag]
            if tag in s:
                s.move_to_end(tag)
            else:
                if len(s) >= ways:
                    s.popitem(last=False)
                s[tag] = set()
            s[tag].add(sec)
            if rnd == 1:
                cost += T_HIT if hit else T_MISS
    return cost / len(addrs)


@pytest.mark.parametrize("geometry", [dict(size=32 << 10, line=128, sector=32, ways=8),
                                      dict(size=16 << 10, line=64, sector=32, ways=4),
                                      dict(size=24 << 10, line=128, sector=16, ways=6)])
def test_capacity_line_and_sector_from_a_cache_model(geometry: dict[str, int]) -> None:
    step = 4 << 10
    feet = np.arange(step, 3 * geometry["size"], step)
    lat = np.array([chase_latency(int(x), 128, **geometry) for x in feet])
    coarse = capacity(feet, lat)
    assert coarse == geometry["size"]  # a sweep point falls on the capacity here; refine finds it anyway
    exact = refine_capacity(lambda f: chase_latency(f, 128, **geometry), coarse - step, coarse + step, 128, T_HIT)
    assert exact == geometry["size"]
    sector_strides = np.array([4, 8, 16, 32, 64, 128])
    lat = np.array([chase_latency(4 * exact, int(s), **geometry) for s in sector_strides])
    sector = sector_size(sector_strides, lat, T_HIT, T_MISS)
    assert sector == geometry["sector"]
    extras = np.arange(0, 8 * 128 + sector, sector)
    lat = np.array([chase_latency(int(exact + e), sector, **geometry) for e in extras])
    assert line_size(extras, lat) == geometry["line"]


def test_line_size_refuses_an_unclear_staircase() -> None:
    extras = np.arange(0, 1024, 32)
    assert line_size(extras, np.full(extras.size, 40.0)) is None  # no step at all
    noisy = 40.0 + np.random.default_rng(2).normal(0, 5, extras.size)
    assert line_size(extras, noisy) is None


def test_capacity_with_noise_and_errors() -> None:
    rng = np.random.default_rng(1)
    feet = np.arange(1, 41) * 8192
    lat = np.where(feet <= 192 << 10, 33.0, 280.0) + rng.normal(0, 2, feet.size)
    assert capacity(feet[::-1], lat[::-1]) == 192 << 10  # order of the sweep does not matter
    # a cache smaller than two sweep steps: the smallest footprints no longer stand for the hit
    # latency, the measured one does; smaller than one step: 0 (the caller bisects below)
    small = np.where(feet <= 8192, 33.0, 280.0)
    assert capacity(feet, small) == feet[-1] and capacity(feet, small, t_hit=33.0) == 8192
    assert capacity(feet, np.full(feet.size, 280.0), t_hit=33.0) == 0
    with pytest.raises(ValueError):
        capacity(np.array([]), np.array([]))
    with pytest.raises(CalibrationError, match="the sector sweep never reached the L2 latency") as exc:
        sector_size(np.array([4, 8]), np.array([31.0, 32.0]), T_HIT, T_MISS)
    assert "strides 4 B, 8 B took 31, 32 cycles" in exc.value.message and "idle GPU" in exc.value.hint


@pytest.mark.parametrize("make", [lambda: strided_chain(1 << 14, 128),
                                  lambda: random_chain(1 << 14, 128, np.random.default_rng(3))])
def test_chains_visit_every_slot_once(make) -> None:
    nxt = make()
    slots = set(range(0, nxt.size, 32))
    j, seen = 0, []
    for _ in range(len(slots)):
        seen.append(j)
        j = int(nxt[j])
    assert j == 0 and set(seen) == slots and len(seen) == len(slots)


def test_fit_cache_keeps_sets() -> None:
    assert fit_cache(190 << 10, 128, 4, 1) == (380 * 128 * 4, 380)
    assert fit_cache(40 << 20, 128, 256, 80) == (40 << 20, 16)
    assert base_preset((8, 6)) == "a100" and base_preset((9, 0)) == "h100" and base_preset((7, 5)) == "v100"


def _measurements() -> Measurements:
    return Measurements(gpu="NVIDIA A100-SXM4-40GB", compute_capability=(8, 0), sm_count=108, clock_mhz=1410,
                        t1=37.4, t2=212.6, dram=601.0, l1_size=190 << 10, l2_size=38 << 20, sector=32, line=128,
                        dram_batches=((1, 601.0), (8, 740.0)))


def test_calibrated_toml_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    with pytest.raises(ArchError, match="no calibrated arch: .*calibrated.toml does not exist") as exc:
        load_arch("calibrated")
    assert "run `tuiprof calibrate` on the GPU" in exc.value.hint
    m = _measurements()
    arch = calibrated_arch(m, load_arch("a100"))
    text = arch_toml(arch, m, "a100", date="2026-01-02")
    path = write_calibrated(text)
    assert path == calibrated_path() == tmp_path / "tuiprof" / "arch" / "calibrated.toml"
    loaded = load_arch("calibrated")
    assert loaded == arch
    assert (loaded.l1.hit_latency, loaded.l2.hit_latency, loaded.dram.base_latency) == (37, 213, 601)
    assert loaded.l1.size == 380 * 128 * 4 and loaded.l1.sector == 32 and loaded.l1.line == 128
    # 38 MiB over the preset's 80 slices x 256 sets of 128 B lines: 15.2 ways -> 15
    assert loaded.l2.assoc == 15 and loaded.l2.size == 15 * 128 * 256 * 80
    assert loaded.sm_count == 108 and loaded.name == "calibrated"
    # every value says where it comes from
    assert "hit_latency = 37  # measured" in text and "row_hit_cycles = 3  # preset a100" in text
    assert "measured by `tuiprof calibrate` on 2026-01-02" in text and "8: 740" in text
    assert load_arch("calibrated", {"l1.hit_latency": "40"}).l1.hit_latency == 40


def test_an_l2_unlike_the_drivers_is_said_so() -> None:
    """An H100 reports 50 MiB of L2 and one SM's chase finds 25 (two partitions): the calibrated
    TOML and the summary say the driver's figure beside the measured one; within 10%, nothing."""
    import dataclasses

    m = dataclasses.replace(_measurements(), l2_size=25 << 20, l2_reported=50 << 20)
    assert m.l2_note() == "the driver reports 50 MiB"
    text = arch_toml(calibrated_arch(m, load_arch("a100")), m, "a100", date="2026-01-02")
    assert next(x for x in text.splitlines() if x.startswith("size = ") and "driver" in x).endswith(
        "# measured (the driver reports 50 MiB)")
    assert dataclasses.replace(m, l2_reported=26 << 20).l2_note() == ""
    assert dataclasses.replace(m, l2_reported=0).l2_note() == ""


def test_calibrate_without_gpu_is_one_clear_error() -> None:
    from tuiprof.collect.gpu.calibrate import measure
    from tuiprof.collect.gpu.driver import GpuUnavailable, gpu_problem

    if gpu_problem() is None:
        pytest.skip("a GPU is usable here")
    with pytest.raises(GpuUnavailable, match="tuiprof calibrate needs an NVIDIA GPU") as exc:
        measure()
    assert "preset" in exc.value.hint


class _Cache:
    """A set-associative sectored LRU cache: `access(address)` says whether it hit, and fills."""

    def __init__(self, size: int, line: int, sector: int, ways: int) -> None:
        self.sets = [OrderedDict[int, set[int]]() for _ in range(size // (line * ways))]
        self.line, self.sector, self.ways = line, sector, ways

    def access(self, address: int) -> bool:
        tag, sec = address // self.line, (address % self.line) // self.sector
        s = self.sets[tag % len(self.sets)]
        hit = tag in s and sec in s[tag]
        if tag in s:
            s.move_to_end(tag)
        else:
            if len(s) >= self.ways:
                s.popitem(last=False)
            s[tag] = set()
        s[tag].add(sec)
        return hit


class ModelledGpu:
    """A GPU for `measure` to calibrate: the microbenchmarks run in the emulator (their compiled
    PTX, packed parameters and chains, as on a GPU); the cycles each thread reports are then a
    modelled GPU's for the addresses its chain visits: a sectored LRU L1 (``ld.ca``) and L2, and
    DRAM at TM + SLOPE cycles per resident warp of the SM."""

    L1 = dict(size=48 << 10, line=128, sector=32, ways=6)
    L2 = dict(size=768 << 10, line=128, sector=32, ways=16)
    T1, T2, TM, SLOPE = 30.0, 210.0, 560.0, 6.0

    def __init__(self) -> None:
        import dataclasses

        from tests.support.emu_driver import EmuDriver

        self.emu = EmuDriver(n_sms=2)
        self.info = dataclasses.replace(self.emu.info, name="modelled GPU", l2_bytes=self.L2["size"],
                                        shared_per_sm=100 << 10)
        self.sizes: dict[int, int] = {}

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.emu, name)

    def alloc(self, nbytes: int) -> int:
        ptr = self.emu.alloc(nbytes)
        self.sizes[ptr] = int(nbytes)
        return ptr

    def launch(self, fn, grid, block, shared, params):  # type: ignore[no-untyped-def]
        self.emu.launch(fn, grid, block, shared, params)
        _, name = fn
        word = lambda i, fmt: int(np.frombuffer(params.values[i], fmt)[0])  # noqa: E731
        nxt_ptr = word(0, "<u8")
        nxt = np.zeros(self.sizes[nxt_ptr] // 4, np.uint32)
        self.emu.dtoh(nxt, nxt_ptr)
        if name == "chase_many":  # random chains over more than the L2: every access goes to DRAM
            steps, cycles_ptr = word(2, "<u4"), word(4, "<u8")
            threads = grid[0] * block[0]
            per = (self.TM + self.SLOPE * grid[0] / self.info.sm_count) * steps
            self.emu.htod(cycles_ptr, np.full(threads, per, np.int64))
            return 0.0
        steps, cycles_ptr = word(1, "<u4"), word(3, "<u8")
        l1, l2 = _Cache(**self.L1), _Cache(**self.L2)
        j, total = 0, 0.0
        for rnd in range(2):  # the warm-up pass, then the timed one
            for _ in range(steps):
                address = nxt_ptr + 4 * j
                if name == "chase_ca" and l1.access(address):
                    t = self.T1
                else:
                    t = self.T2 if l2.access(address) else self.TM
                total += t * rnd
                j = int(nxt[j])
        self.emu.htod(cycles_ptr, np.array([total], np.int64))
        return 0.0


def test_measure_recovers_a_modelled_gpu() -> None:
    """`tuiprof calibrate`'s sweeps end to end, on the modelled GPU: the latencies, the L1 and L2
    capacities, the sector and line sizes and the DRAM batch cost it was given."""
    from tests.support.ptx_support import compiler_missing
    from tuiprof.collect.gpu.calibrate import measure

    if compiler_missing():
        pytest.skip("nvcc or NVRTC is needed to compile the microbenchmarks")
    gpu = ModelledGpu()
    steps: list[str] = []
    m = measure(quick=True, progress=steps.append, driver=gpu)  # type: ignore[arg-type]
    assert (m.t1, m.t2, m.dram) == (gpu.T1, gpu.T2, gpu.TM)
    # an LRU set one line over its ways adds one miss per pass: the bisection's 3% latency
    # threshold is crossed a few lines past the capacity when a miss costs little against a hit
    assert m.l1_size == gpu.L1["size"] and m.l2_size == pytest.approx(gpu.L2["size"], rel=0.002)
    assert (m.sector, m.line, m.line_measured) == (32, 128, True)
    assert [w for w, _ in m.dram_batches] == [1, 4, 16]
    assert [c for _, c in m.dram_batches] == pytest.approx([gpu.TM + gpu.SLOPE * w for w in (1, 4, 16)])
    assert steps[0] == "L1 and L2 hit latencies" and steps[-1] == "DRAM batches, 16 warps per SM"
    arch = calibrated_arch(m, load_arch("a100"))
    assert (arch.l1.hit_latency, arch.l2.hit_latency, arch.dram.base_latency) == (30, 210, 560)


def test_measure_on_a_gpu_without_cache_steps_is_one_clear_error() -> None:
    """Latencies that show no cache level (here the emulator's, which has no caches) stop the
    calibration with one CalibrationError that says what was seen, never a bare exception."""
    from tests.support.emu_driver import EmuDriver
    from tests.support.ptx_support import compiler_missing
    from tuiprof.collect.gpu.calibrate import measure

    if compiler_missing():
        pytest.skip("nvcc or NVRTC is needed to compile the microbenchmarks")
    with pytest.raises(CalibrationError, match=r"an L2 hit \(\d+ cycles\) did not take clearly longer than an "
                                               r"L1 hit") as exc:
        measure(quick=True, driver=EmuDriver(n_sms=2))  # type: ignore[arg-type]
    assert "idle GPU" in exc.value.hint
