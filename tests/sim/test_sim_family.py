"""One compiled replay kernel per family of geometries (issue 23 item 2): the L1's ways beside
each shared-memory carve-out and the caches' sizes are run-time values, so an MD sweep or a size
what-if compiles nothing new, and the kernel of a family gives the reference kernel's results on
every geometry of it."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.sim_runs import assert_identical, contended_trace
from tuiprof.arch import load_arch
from tuiprof.arch.occupancy import carveout_arch
from tuiprof.sim.addressing import divider, udivmod
from tuiprof.sim.prepared import pack_arch
from tuiprof.sim.replay import SCAN_MAX_ASSOC, Geometry, replay_kernel


def family(arch):
    return Geometry.of(pack_arch(arch)).family


def test_every_carve_out_of_a_gpu_runs_on_one_kernel() -> None:
    # The v100's L1 keeps its 4 sets and takes 256 down to 64 ways as the carve-out grows (MD x
    # shared memory per CTA: cr's and transpose-tiled's sweeps cross 128 ways, where a scanned
    # L1 would have needed a second kernel).
    v100 = load_arch("v100")
    archs = [carveout_arch(v100, shared) for shared in (0, 8 << 10, 16 << 10, 32 << 10, 64 << 10, 96 << 10)]
    assert sorted({a.l1.assoc for a in archs}) == [64, 128, 192, 224, 240, 256]
    assert len({family(a) for a in archs}) == 1 and family(archs[0]).l1_hashed
    assert len({replay_kernel(Geometry.of(pack_arch(a))) for a in archs}) == 1


def test_size_and_way_what_ifs_run_on_one_kernel() -> None:
    c2050 = load_arch("tesla-c2050")
    what_ifs = [c2050.with_overrides(o) for o in ({"l1.size": "32KiB"}, {"l2.size": "1536KiB"}, {"l2.assoc": "32"},
                                                  {"l2.size": "384KiB", "l1.size": "8KiB"})]
    assert {family(a) for a in what_ifs} == {family(c2050)}
    f = family(c2050)  # a scanned L1's ways are compiled in (the scan's width)
    assert not f.l1_hashed and f.l1_ways == 64 <= SCAN_MAX_ASSOC
    assert family(c2050.with_overrides({"l1.assoc": "32"})) != family(c2050)


@pytest.mark.parametrize("overrides", [{}, {"l1.size": "32KiB", "l2.size": "48KiB"}, {"l2.assoc": "8", "l2.size": "24KiB"}])
def test_a_family_kernel_gives_the_reference_results_on_each_of_its_geometries(overrides) -> None:
    base = load_arch("tesla-c2050").with_overrides({"sm_count": "3", "l2.size": "96KiB"})
    arch = base.with_overrides(overrides)
    assert family(arch) == family(base)
    assert_identical(contended_trace(2), arch, mds=(1, 2), seeds=(0, 5))


def test_carve_outs_of_a_hashed_l1_give_the_reference_results() -> None:
    v100 = load_arch("v100").with_overrides({"sm_count": "3", "l2.size": "192KiB"})
    for shared in (0, 96 << 10):  # 256 and 64 ways, one kernel
        assert_identical(contended_trace(3), carveout_arch(v100, shared), mds=(2,), seeds=(1,))


def test_udivmod_divides_like_python() -> None:
    rng = np.random.default_rng(0)
    xs = [0, 1, 2**63, 2**64 - 1, *(int(x) for x in rng.integers(0, 2**63, 200, dtype=np.uint64) * 2 + 1)]
    for d in (1, 2, 3, 6, 96, 384, 2048, 25600, 1000003, 2**40, 2**62 + 7):
        magic, sh1, sh2 = divider(d)
        pow2 = d & (d - 1) == 0
        for x in xs:
            for p in {False, pow2}:
                q, r = udivmod(np.uint64(x), d, magic, sh1, sh2, p)
                assert (int(q), int(r)) == divmod(x, d), (x, d, p)
