"""The MWP/CWP analytical model of Hong & Kim (ISCA'09), as given in HongKim09's slides.

MWP (memory warp parallelism) is how many warps of one SM can have memory requests in flight at
once; CWP (computation warp parallelism) is how many warps can compute during one memory
period. Their relation picks one of three cases (slides "Case 1..3" and "Putting it all
together"):

- not enough warps (MWP = N and CWP = N): Exec = Mem_cycles + Comp_cycles + Comp_p (MWP - 1)
- memory bound (CWP >= MWP, or Comp_cycles > Mem_cycles): Exec = Mem_cycles N / MWP + Comp_p (MWP - 1)
- computation bound (MWP > CWP): Exec = Mem_L + Comp_cycles N

each per round of resident CTAs, times #Rep rounds; CPI = Exec_cycles_app over the warp
instructions one SM executes. All cycle counts are per warp (SM clock cycles).

The slides state CWP only in words ("number of warps that execute instructions during one memory
access period"); we use the ISCA'09 paper's formula CWP_full = (Mem_cycles + Comp_cycles) /
Comp_cycles, CWP = min(CWP_full, N). The cases are tested in the slides' order (not enough warps
first), so MWP = CWP < N is memory bound, and Comp_cycles > Mem_cycles takes the memory-bound
formula even when MWP > CWP, as the slides write it. MWP is kept at 1 or more (a warp's own
request is always in flight; below 1 the (MWP - 1) terms would turn negative).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tuiprof.arch.spec import Arch
from tuiprof.errors import UsageError

NOT_ENOUGH_WARPS = "not enough warps"
MEMORY_BOUND = "memory bound"
COMPUTE_BOUND = "computation bound"

DEPARTURE_DEL_COAL = 4.0
"""Cycles between the departures of two coalesced memory warp requests from one SM, for the bare
formula (`mwp_cwp`). Hong & Kim measure it per GPU with microbenchmarks; the slides give no value.
Assumed (of the order they use for GT200-class GPUs); `mwp_cwp_for_arch` takes the Arch's
``departure_del_coal`` instead."""
DEPARTURE_DEL_UNCOAL = 10.0
"""Cycles between the departures of two transactions of an uncoalesced memory warp request, for
the bare formula; `mwp_cwp_for_arch` takes the Arch's ``departure_del_uncoal``."""
ISSUE_CYCLES = 4.0
"""#Issue_cycles per warp instruction: 32 threads on 8 SPs take 4 cycles (GT200-class SM, the
GPUs of the slides). Pass the value of the Arch at hand (e.g. 1 or 2 on later SMs)."""
INSTS_PER_MEM_INST = 6.77
"""Estimate of #total_insts / #Mem_insts when no dynamic instruction count is known: the median
of that ratio over the 11 kernels of the slides' "Previous Performance Tuning Example" table
(5.27 ... 13.89; e.g. cuda.cu 78680 / (4 + 14260) = 5.52, cuda_vecpack.cu 50158 / 3610 = 13.89)."""


@dataclass(frozen=True)
class MwpCwp:
    """Every intermediate of the model, named as in the slides, and its outputs."""

    n: float
    """N = #Active_warps_per_SM."""
    weight_coal: float
    weight_uncoal: float
    mem_l_coal: float
    mem_l_uncoal: float
    mem_l: float
    departure_delay: float
    mwp_without_bw_full: float
    mwp_without_bw: float
    bw_per_warp: float
    """GB/s one warp demands: Freq x Load_bytes_per_warp / Mem_L."""
    mwp_peak_bw: float
    mwp: float
    mwp_limiter: str
    """What sets MWP: 'latency' (Mem_L / Departure_delay), 'bandwidth' (MWP_peak_BW) or 'warps' (N)."""
    mem_cycles: float
    comp_cycles: float
    comp_p: float
    """Comp_cycles / #Mem_insts: computation between two memory instructions."""
    cwp_full: float
    cwp: float
    rep: float
    """#Rep = #Blocks / (#Active_blocks_per_SM x #Active_SMs)."""
    case: str
    exec_cycles_app: float
    cpi: float
    insts_source: str
    """'given', 'measured' (per-CTA dynamic counts) or 'estimated' (INSTS_PER_MEM_INST)."""


def _min_with_limiter(**values: float) -> tuple[float, str]:
    name = min(values, key=lambda k: values[k])
    return values[name], name


def mwp_cwp(*, warps_per_sm: float, coal_mem_insts: float, uncoal_mem_insts: float,
            total_insts: float, mem_ld: float, uncoal_per_mw: float, freq_ghz: float,
            mem_bandwidth_gbs: float, active_sms: int, blocks: int, threads_per_block: int,
            departure_del_coal: float = DEPARTURE_DEL_COAL,
            departure_del_uncoal: float = DEPARTURE_DEL_UNCOAL,
            issue_cycles: float = ISSUE_CYCLES, load_bytes_per_warp: float = 128.0,
            warp_size: int = 32, insts_source: str = "given") -> MwpCwp:
    """The model of the slides ("MWP Calculation", "Putting It All together", "CPI").

    Per warp: ``coal_mem_insts``/``uncoal_mem_insts`` memory instructions (#Coal_Mem_insts,
    #Uncoal_Mem_insts), ``total_insts`` instructions (#total_insts); ``uncoal_per_mw`` memory
    transactions per uncoalesced memory warp instruction (#Uncoal_per_mw); ``mem_ld`` the memory
    latency in cycles (Mem_LD: the simulated DRAM latency Tm or the expected latency X).
    """
    n = float(warps_per_sm)
    if n < 1 or threads_per_block <= 0 or blocks <= 0 or active_sms <= 0:
        raise UsageError("MWP/CWP needs at least one warp per SM and positive threads per block, blocks, SMs")
    if min(coal_mem_insts, uncoal_mem_insts, total_insts, mem_ld) < 0 or (uncoal_per_mw < 1 and uncoal_mem_insts > 0):
        raise UsageError("MWP/CWP inputs must not be negative (and #Uncoal_per_mw >= 1)")
    mem_insts = coal_mem_insts + uncoal_mem_insts
    warps_per_block = -(-threads_per_block // warp_size)
    active_blocks = n / warps_per_block
    rep = blocks / (active_blocks * active_sms)
    comp_cycles = issue_cycles * total_insts

    if mem_insts > 0:
        w_unc = uncoal_mem_insts / mem_insts
        w_coal = coal_mem_insts / mem_insts
    else:
        w_unc, w_coal = 0.0, 1.0
    mem_l_uncoal = mem_ld + (uncoal_per_mw - 1.0) * departure_del_uncoal
    mem_l_coal = mem_ld
    mem_l = mem_l_uncoal * w_unc + mem_l_coal * w_coal
    departure = departure_del_uncoal * uncoal_per_mw * w_unc + departure_del_coal * w_coal
    mwp_full = mem_l / departure if departure > 0 else math.inf
    mwp_wo_bw = min(mwp_full, n)
    bw_per_warp = freq_ghz * load_bytes_per_warp / mem_l if mem_l > 0 else 0.0
    mwp_peak = mem_bandwidth_gbs / (bw_per_warp * active_sms) if bw_per_warp > 0 else math.inf
    # MWP = MIN(MWP_Without_BW, MWP_peak_BW, N); ties name the latency bound, then bandwidth.
    # At least 1: a waiting warp always has its own request in flight (below 1 the slides'
    # (MWP - 1) terms would turn negative).
    mwp, limiter = _min_with_limiter(latency=mwp_full, bandwidth=mwp_peak, warps=n)
    mwp = max(mwp, 1.0)
    mem_cycles = mem_l_uncoal * uncoal_mem_insts + mem_l_coal * coal_mem_insts

    if comp_cycles > 0:
        cwp_full = (mem_cycles + comp_cycles) / comp_cycles
    else:
        cwp_full = math.inf
    cwp = min(cwp_full, n)
    comp_p = comp_cycles / mem_insts if mem_insts > 0 else 0.0

    if mem_insts == 0:
        case = COMPUTE_BOUND
        exec_cycles = comp_cycles * n * rep
    elif math.isclose(mwp, n) and math.isclose(cwp, n):
        case = NOT_ENOUGH_WARPS
        exec_cycles = (mem_cycles + comp_cycles + comp_p * (mwp - 1.0)) * rep
    elif cwp >= mwp or comp_cycles > mem_cycles:
        case = MEMORY_BOUND
        exec_cycles = (mem_cycles * n / mwp + comp_p * (mwp - 1.0)) * rep
    else:
        case = COMPUTE_BOUND
        exec_cycles = (mem_l + comp_cycles * n) * rep
    warp_insts_per_sm = total_insts * (threads_per_block / warp_size) * (blocks / active_sms)
    cpi = exec_cycles / warp_insts_per_sm if warp_insts_per_sm > 0 else math.nan
    return MwpCwp(n, w_coal, w_unc, mem_l_coal, mem_l_uncoal, mem_l, departure, mwp_full, mwp_wo_bw,
                  bw_per_warp, mwp_peak, mwp, limiter, mem_cycles, comp_cycles, comp_p, cwp_full,
                  cwp, rep, case, exec_cycles, cpi, insts_source)


def dram_bandwidth_gbs(arch: Arch) -> float:
    """Peak DRAM bandwidth of the Arch (GB/s): its explicit, sourced ``dram.bandwidth_gbs``. (The
    DRAM model's integer burst cycles only approximate it: -24% on h100, +16% on a100.)"""
    return float(arch.dram.bandwidth_gbs)


def insts_per_warp(cta_insts: np.ndarray | None, warps_per_block: int,
                   mem_insts_per_warp: float) -> tuple[float, str]:
    """#total_insts per warp: the mean per-CTA dynamic warp-instruction count over its warps when
    known ('measured'), else INSTS_PER_MEM_INST x memory instructions ('estimated')."""
    if cta_insts is not None and np.size(cta_insts) > 0:
        return float(np.mean(cta_insts)) / warps_per_block, "measured"
    return INSTS_PER_MEM_INST * mem_insts_per_warp, "estimated"


def mwp_cwp_for_arch(arch: Arch, *, ctas_per_sm: int, threads_per_block: int, blocks: int,
                     coal_mem_insts: float, uncoal_mem_insts: float, uncoal_per_mw: float,
                     mem_ld: float, total_insts: float | None = None,
                     cta_insts: np.ndarray | None = None,
                     departure_del_coal: float | None = None,
                     departure_del_uncoal: float | None = None,
                     issue_cycles: float = ISSUE_CYCLES, load_bytes_per_warp: float | None = None,
                     mem_bandwidth_gbs: float | None = None) -> MwpCwp:
    """`mwp_cwp` with the machine from an Arch: clock, SM count, DRAM bandwidth
    (`dram_bandwidth_gbs` unless given), departure delays (the Arch's unless given), N =
    ctas_per_sm x warps per block, #Active_SMs = min(SMs, blocks); Load_bytes_per_warp defaults to
    4 B x warp size (one coalesced word per lane: the slides' cache-less case; with caches pass the
    bytes the simulation moved, as `tuiprof.model.timing` does). Instructions per warp:
    ``total_insts`` if given, else from ``cta_insts`` (per-CTA dynamic warp instructions), else
    the documented estimate."""
    warps_per_block = -(-threads_per_block // arch.warp_size)
    mem = coal_mem_insts + uncoal_mem_insts
    if total_insts is not None:
        insts, source = float(total_insts), "given"
    else:
        insts, source = insts_per_warp(cta_insts, warps_per_block, mem)
    return mwp_cwp(
        warps_per_sm=ctas_per_sm * warps_per_block, coal_mem_insts=coal_mem_insts,
        uncoal_mem_insts=uncoal_mem_insts, total_insts=insts, mem_ld=mem_ld,
        uncoal_per_mw=uncoal_per_mw, freq_ghz=arch.clock_mhz / 1000.0,
        mem_bandwidth_gbs=mem_bandwidth_gbs if mem_bandwidth_gbs is not None else dram_bandwidth_gbs(arch),
        active_sms=min(arch.sm_count, blocks), blocks=blocks, threads_per_block=threads_per_block,
        departure_del_coal=arch.departure_del_coal if departure_del_coal is None else departure_del_coal,
        departure_del_uncoal=arch.departure_del_uncoal if departure_del_uncoal is None else departure_del_uncoal,
        issue_cycles=issue_cycles,
        load_bytes_per_warp=load_bytes_per_warp if load_bytes_per_warp is not None else 4.0 * arch.warp_size,
        warp_size=arch.warp_size, insts_source=source)
