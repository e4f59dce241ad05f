"""Occupancy on the device at hand: its generation's preset with its own warp slots (`device_arch`),
and the residency of a launch with and without the probes (`probe_occupancy`)."""

from __future__ import annotations

import dataclasses

from tuiprof.arch.spec import Arch
from tuiprof.collect.gpu.driver import DeviceInfo
from tuiprof.trace.data import Launch


def device_arch(info: DeviceInfo) -> Arch:
    """The preset of the device's generation with the device's own warp slots (48 on CC 8.6 and
    8.9, where the preset says 64): what occupancy on this device is computed with."""
    from tuiprof.arch import load_arch
    from tuiprof.arch.calibrate import base_preset

    arch = load_arch(base_preset(info.compute_capability))
    if info.max_threads_per_sm:
        arch = dataclasses.replace(arch, max_threads_per_sm=info.max_threads_per_sm,
                                   max_warps_per_sm=info.max_threads_per_sm // arch.warp_size)
    return arch


def probe_occupancy(info: DeviceInfo, launch: Launch, probe_registers: int) -> dict[str, list[int]]:
    """Registers per thread and resident CTAs per SM of the launch on the device, plain and with
    the probes: the residency under which the per-CTA clocks were measured."""
    from tuiprof.arch.occupancy import occupancy

    arch = device_arch(info)
    threads = launch.block[0] * launch.block[1] * launch.block[2]
    ctas = [occupancy(arch, threads, r, launch.static_shared, launch.dynamic_shared).ctas_per_sm
            for r in (launch.registers_per_thread, probe_registers)]
    return {"registers": [launch.registers_per_thread, probe_registers], "ctas_per_sm": ctas}
