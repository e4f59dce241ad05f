"""`tuiprof calibrate` without a GPU: the sweep analysis recovers a cache's size, line and sector
from the latencies an independent sectored LRU cache model gives for the same pointer chases;
the chains visit every slot once; the calibrated Arch is written as TOML that ``--arch
calibrated`` loads, with measured values marked; no GPU is one clear error."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

from tuiprof.arch import load_arch
from tuiprof.arch.calibrate import (Measurements, arch_toml, base_preset, calibrated_arch, calibrated_path,
                                    capacity, fit_cache, line_size, random_chain, refine_capacity, sector_size,
                                    strided_chain, write_calibrated)
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
    with pytest.raises(ValueError):
        capacity(np.array([]), np.array([]))
    with pytest.raises(ValueError, match="too short"):
        sector_size(np.array([4, 8]), np.array([31.0, 32.0]), T_HIT, T_MISS)


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


def test_calibrate_without_gpu_is_one_clear_error() -> None:
    from tuiprof.arch.calibrate import measure
    from tuiprof.collect.gpu import GpuUnavailable, gpu_problem

    if gpu_problem() is None:
        pytest.skip("a GPU is usable here")
    with pytest.raises(GpuUnavailable, match="tuiprof calibrate needs an NVIDIA GPU") as exc:
        measure()
    assert "preset" in exc.value.hint
