"""The `Arch` of one GPU: SM limits, L1, L2 and DRAM, validated on construction.

Values come from TOML presets (``presets/*.toml``), user files, ``--set KEY=VALUE`` overrides, or
``tuiprof calibrate``. Every path goes through `arch_from_mapping`, so an override is checked
exactly as a preset is.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from tuiprof.errors import ArchError
from tuiprof.units import size

STORE_POLICIES = ("write-evict", "write-no-allocate", "write-allocate")
"""L1 store policies. All are write-through to L2 (Baghsorkhi12 sec. 2.1: stores go to L2):

- ``write-evict``: a store invalidates the line in L1 (Fermi global stores).
- ``write-no-allocate``: a store leaves L1 unchanged.
- ``write-allocate``: the stored sectors become valid in L1 (Volta and later).
"""
REPLACEMENTS = ("lru", "fifo", "mru", "random")
"""Cache replacement policies (`tuiprof.sim.cache.Replacement`, pycachesim's four): ``lru`` evicts
the least recently used way, ``fifo`` the earliest filled, ``mru`` the most recently used (a fill
stays the next victim until a hit), ``random`` a way drawn from the trial's seed."""
REGISTER_ALLOCATION = ("warp", "cta")
L2_WRITE_POLICIES = ("write-through", "write-back")
"""What an L2 store *miss* does (a store hit always writes the sector and marks it dirty):

- ``write-through``: the store goes on to DRAM and the block is made valid (Fermi, Baghsorkhi12
  sec. 2.1: "if the block is not valid, it updates the memory and brings the cache block to the
  cache"): the sectors it did not write entirely are fetched from DRAM;
- ``write-back``: the sector is allocated dirty without a fetch and written to DRAM only when it
  is evicted (Volta and later); every store completes in L2 (a write hit); a sector written
  only in part stays unreadable until a load fetches it.

The rules in full: `tuiprof.sim.reference`."""
ADDRESS_HASHES = ("linear", "xor")
"""How addresses map to L2 slices/sets and DRAM channels: ``linear`` ((address / interleave) mod
count, Fermi) or ``xor`` (higher address bits folded into the index over GF(2), Volta and later,
so that power-of-two strides spread over the slices and channels): `tuiprof.sim.addressing`."""

_UNITS = {"": 1, "b": 1, "kib": 1024, "kb": 1024, "k": 1024, "mib": 1 << 20, "mb": 1 << 20,
          "m": 1 << 20, "gib": 1 << 30, "gb": 1 << 30, "g": 1 << 30}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(value: Any, key: str) -> int:
    """Bytes from an int or a string such as '48KiB', '6 MiB', '128' (binary units)."""
    if isinstance(value, bool):
        raise ArchError(f"{key}: expected a size, got {value!r}", "write a byte count or e.g. 48KiB")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        m = _SIZE_RE.match(value)
        if m and m.group(2).lower() in _UNITS:
            number = float(m.group(1)) * _UNITS[m.group(2).lower()]
            if number.is_integer():
                return int(number)
    raise ArchError(f"{key}: {value!r} is not a size", "write a byte count or e.g. 48KiB, 6MiB")


format_size = size
"""The one byte-size rendering (`tuiprof.units.size`), under the name callers elsewhere import."""


@dataclass(frozen=True)
class CacheConfig:
    """A set-associative, sectored cache level. ``size == 0`` means the level is absent.

    ``partitions`` slices share the capacity; a line maps to one slice by address interleaving,
    then to a set within it (L2 slices on real GPUs; 1 for L1).
    """

    size: int
    line: int
    sector: int
    assoc: int
    hit_latency: int
    partitions: int = 1
    replacement: str = "lru"
    store_policy: str = "write-no-allocate"

    @property
    def enabled(self) -> bool:
        return self.size > 0

    @property
    def sectors_per_line(self) -> int:
        return self.line // self.sector

    @property
    def sets(self) -> int:
        """Sets per partition."""
        return self.size // (self.line * self.assoc * self.partitions) if self.enabled else 0


@dataclass(frozen=True)
class L2Config(CacheConfig):
    """The shared L2: a `CacheConfig` plus its store-miss policy and its bandwidth."""

    write_policy: str = field(kw_only=True)
    """One of `L2_WRITE_POLICIES`."""
    bandwidth_gbs: float = field(kw_only=True)
    """Sustained L2 bandwidth of the whole GPU (GB/s): the L2-bandwidth floor of the timing model
    and the base of the departure delays; 0 when the level is absent."""
    fetch_granularity: int = field(default=0, kw_only=True)
    """Bytes a read sector miss brings from DRAM (CUDA runtime API, ``cudaLimitMaxL2FetchGranularity``:
    "a value between 0 and 128 that indicates the maximum fetch granularity of L2 (in Bytes)";
    docs/memory-system.md): the aligned block of that size around each missing sector, its other
    sectors filled unless already valid. 0 means one sector (today's model)."""

    halves: int = field(default=1, kw_only=True)
    """1: one L2 shared by every SM. 2: the two partitions of A100 and H100 (NVIDIA A100 whitepaper,
    "A100 L2 Cache": each "localizes and caches data for memory accesses from SMs in the GPCs
    directly connected to the partition"; docs/memory-system.md, section 2). Each half holds half
    the sets; the lower half of the SM numbers reads through half 0, the upper through half 1; a
    line's home is the parity of its address bits. A read looks up its SM's half; a miss there on a
    line homed in the other half is looked up again at home over the fabric (both lookups count in
    the L2 read figure, as ncu counts them), and the near half keeps a copy. Stores and atomics
    go to the home half and drop the other half's copy."""

    @property
    def fetch(self) -> int:
        """The effective fetch granularity in bytes: at least one sector."""
        return max(self.fetch_granularity, self.sector)


@dataclass(frozen=True)
class DramConfig:
    """Main memory: interleaved channels of banks with open-row buffers (Baghsorkhi12 sec. 3.2.3).

    A batch of concurrently issued 32 B transactions costs ``base_latency`` plus the busiest
    bank's row-hit/row-miss service time or the busiest channel's bus time, whichever is larger.
    """

    channels: int
    banks: int
    interleave: int
    row_size: int
    base_latency: int
    row_hit_cycles: int
    row_miss_cycles: int
    burst_cycles: int
    transaction: int = 32
    bandwidth_gbs: float = field(kw_only=True)
    """Peak DRAM bandwidth (GB/s, the datasheet figure): the DRAM-bandwidth floor of the timing
    model, MWP/CWP's Mem_Bandwidth and Zhang11's global memory throughput."""


@dataclass(frozen=True)
class Arch:
    """One GPU model. Cycles are SM clock cycles; sizes are bytes."""

    name: str
    description: str
    compute_capability: str
    """``major.minor`` (``"7.0"``): what CUDA sources are compiled for (floored at what the
    compiler supports)."""
    sm_count: int
    warp_size: int
    clock_mhz: int
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_ctas_per_sm: int
    max_threads_per_cta: int
    registers_per_sm: int
    max_registers_per_thread: int
    register_alloc_unit: int
    register_allocation: str
    register_subpartitions: int
    warp_alloc_granularity: int
    shared_per_sm: int
    shared_per_cta: int
    shared_alloc_unit: int
    shared_reserved_per_cta: int
    cores_per_sm: int
    """FP32 lanes per SM: warp instructions issue at cores_per_sm / warp_size per cycle (Zhang11's
    instruction throughput, HongKim09's #Issue_cycles = warp_size / cores_per_sm)."""
    shared_banks: int
    """Shared memory banks of 4 B (16 on GT200, 32 since Fermi): Zhang11 sec. 4.2's conflicts."""
    unified_l1_shared: int
    """Bytes of the SRAM array that L1 and shared memory split per SM (0: separate arrays)."""
    shared_carveouts: tuple[int, ...]
    """The shared-memory sizes the unified array can be split at (ascending; the L1 gets the
    rest). On Volta and later the driver picks the split per kernel, and a session simulates the
    L1 it leaves (`tuiprof.arch.occupancy.carveout_arch`); ``l1.size`` is the L1 beside the
    smallest step, or less where measured (a cap: `tuiprof calibrate`), and setting ``l1.size`` or
    ``l1.assoc`` as a what-if override fixes the L1 instead."""
    address_hash: str
    """One of `ADDRESS_HASHES`."""
    departure_del_coal: float
    """MWP/CWP (HongKim09): cycles between the departures of two coalesced memory warp requests
    from one SM."""
    departure_del_uncoal: float
    """MWP/CWP: cycles between the departures of two transactions of one uncoalesced memory warp
    request."""
    l1: CacheConfig
    l2: L2Config
    dram: DramConfig
    shared_latency: int = 30
    """Cycles of a shared-memory load without bank conflicts (each extra wavefront adds one:
    `tuiprof.model.shared`). Presets give the microbenchmarked figure; 30 for an Arch file that
    predates the field."""

    def __post_init__(self) -> None:
        validate(self)

    @property
    def cc(self) -> tuple[int, int]:
        """The compute capability as (major, minor)."""
        major, minor = self.compute_capability.split(".")
        return int(major), int(minor)

    def with_overrides(self, overrides: Mapping[str, str]) -> "Arch":
        """A new Arch with ``--set`` style overrides applied and validated."""
        data = arch_to_mapping(self)
        for key, raw in overrides.items():
            _assign(data, key, raw)
        data["name"] = self.name + ("*" if overrides else "")
        return arch_from_mapping(data)

    def to_dict(self) -> dict[str, Any]:
        return arch_to_mapping(self)


_SECTIONS = {"l1": CacheConfig, "l2": L2Config, "dram": DramConfig}
_STR_FIELDS = {"name", "description", "compute_capability", "register_allocation", "replacement", "store_policy",
               "write_policy", "address_hash"}
_SIZE_FIELDS = {"size", "line", "sector", "fetch_granularity", "interleave", "row_size", "transaction",
                "shared_per_sm", "shared_per_cta", "shared_alloc_unit", "shared_reserved_per_cta", "unified_l1_shared"}
_SIZE_LIST_FIELDS = {"shared_carveouts"}
_FLOAT_FIELDS = {"bandwidth_gbs", "departure_del_coal", "departure_del_uncoal"}


def arch_to_mapping(arch: Arch) -> dict[str, Any]:
    """Nested plain data (lists, not tuples: what a TOML file holds)."""
    data = dataclasses.asdict(arch)
    return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}


def _coerce_float(key: str, value: Any) -> float:
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ArchError(f"{key}: {value!r} is not a number", "write e.g. 900 or 2.5") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ArchError(f"{key}: {value!r} is not a finite number", "write e.g. 900 or 2.5")
    return float(value)


def _coerce_sizes(key: str, value: Any) -> tuple[int, ...]:
    """A list of sizes from a TOML list or a comma-separated string ('0,8KiB,16KiB')."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise ArchError(f"{key}: expected a list of sizes, got {value!r}", "write e.g. [\"16KiB\", \"48KiB\"] or 16KiB,48KiB")
    return tuple(parse_size(x.strip() if isinstance(x, str) else x, key) for x in items)


def _coerce(key: str, name: str, value: Any) -> Any:
    if name in _STR_FIELDS:
        if not isinstance(value, str):
            raise ArchError(f"{key}: expected text, got {value!r}", "write it in quotes, e.g. \"lru\"")
        return value
    if name in _SIZE_FIELDS:
        return parse_size(value, key)
    if name in _SIZE_LIST_FIELDS:
        return _coerce_sizes(key, value)
    if name in _FLOAT_FIELDS:
        return _coerce_float(key, value)
    if isinstance(value, str):
        try:
            return int(value.strip(), 0)
        except ValueError:
            raise ArchError(f"{key}: {value!r} is not a whole number", "write e.g. 8") from None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ArchError(f"{key}: {value!r} is not a whole number", "write e.g. 8")
    return value


def _known(cls: type) -> dict[str, Any]:
    return {f.name: f for f in fields(cls)}


def _assign(data: dict[str, Any], key: str, raw: str) -> None:
    """Set ``section.field`` or ``field`` in a mapping from an override string."""
    parts = key.strip().split(".")
    if len(parts) == 2 and parts[0] in _SECTIONS:
        section, name = parts
        if name not in _known(_SECTIONS[section]):
            _unknown_key(key)
        data[section][name] = _coerce(key, name, raw)
    elif len(parts) == 1 and parts[0] in _known(Arch) and parts[0] not in _SECTIONS:
        data[parts[0]] = _coerce(key, parts[0], raw)
    else:
        _unknown_key(key)


def _unknown_key(key: str, origin: str = "") -> None:
    """An unknown setting, with the closest known one suggested (not the list of all ~60)."""
    import difflib

    top = [n for n in _known(Arch) if n not in _SECTIONS and n not in ("name", "description")]
    sec = [f"{s}.{n}" for s, c in _SECTIONS.items() for n in _known(c)]
    where = f"{origin}: " if origin else ""
    close = difflib.get_close_matches(str(key)[:80], top + sec, n=1)
    every = "`tuiprof archs --show h100` shows every setting"
    raise ArchError(f"{where}unknown arch setting {str(key)[:80]!r}",
                    f"did you mean {close[0]}? {every}" if close else every)


def arch_from_mapping(data: Mapping[str, Any], origin: str = "arch") -> Arch:
    """Build and validate an Arch from nested plain data (a parsed TOML file)."""
    if not isinstance(data, Mapping):
        raise ArchError(f"{origin}: expected a table of settings", "see `tuiprof archs --show h100` for a full example")
    kwargs: dict[str, Any] = {}
    for name, f in _known(Arch).items():
        if name not in data:
            if f.default is not dataclasses.MISSING:
                continue
            raise ArchError(f"{origin}: missing setting {name}", "see `tuiprof archs --show h100` for a full example")
        value = data[name]
        if name in _SECTIONS:
            cls = _SECTIONS[name]
            if not isinstance(value, Mapping):
                raise ArchError(f"{origin}: [{name}] must be a table", "see `tuiprof archs --show h100` for a full example")
            sub: dict[str, Any] = {}
            for sname, sf in _known(cls).items():
                if sname in value:
                    sub[sname] = _coerce(f"{name}.{sname}", sname, value[sname])
                elif sf.default is dataclasses.MISSING:
                    raise ArchError(f"{origin}: missing setting {name}.{sname}",
                                    "see `tuiprof archs --show h100` for a full example")
            extra = set(value) - set(_known(cls))
            if extra:
                _unknown_key(f"{name}.{sorted(extra)[0]}", origin)
            kwargs[name] = cls(**sub)
        else:
            kwargs[name] = _coerce(name, name, value)
    extra = set(data) - set(_known(Arch))
    if extra:
        _unknown_key(sorted(extra)[0], origin)
    return Arch(**kwargs)


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _check(cond: bool, arch: Arch, what: str, hint: str = "") -> None:
    if not cond:
        raise ArchError(f"arch {arch.name!r}: {what}", hint or "fix the preset file or the --set value")


def _validate_cache(arch: Arch, label: str, c: CacheConfig) -> None:
    _check(c.size >= 0, arch, f"{label}.size must not be negative")
    for name in ("line", "sector", "assoc", "partitions"):
        _check(getattr(c, name) > 0, arch, f"{label}.{name} must be positive")
    _check(c.hit_latency >= 0, arch, f"{label}.hit_latency must not be negative")
    _check(_is_pow2(c.line), arch, f"{label}.line ({c.line} B) must be a power of two")
    _check(_is_pow2(c.sector), arch, f"{label}.sector ({c.sector} B) must be a power of two")
    _check(c.line % c.sector == 0, arch, f"{label}.line ({c.line} B) must be a multiple of {label}.sector ({c.sector} B)")
    _check(c.line // c.sector <= 32, arch, f"{label}: at most 32 sectors per line")
    _check(c.replacement in REPLACEMENTS, arch, f"{label}.replacement must be one of {', '.join(REPLACEMENTS)}",
           f"e.g. --set {label}.replacement=lru")
    _check(c.store_policy in STORE_POLICIES, arch, f"{label}.store_policy must be one of {', '.join(STORE_POLICIES)}")
    if c.enabled:
        per_set = c.line * c.assoc * c.partitions
        _check(c.size % per_set == 0, arch,
               f"{label}.size ({c.size} B) is not a whole number of sets of {c.assoc} x {c.line} B lines in {c.partitions} partition(s)",
               _sets_hint(label, c))


def _sets_hint(label: str, c: CacheConfig) -> str:
    """How to make `c` a whole number of sets (any number of sets is fine): a size that is a
    multiple of a set, or the associativity nearest to `c.assoc` that divides the lines."""
    per_set = c.line * c.assoc * c.partitions
    hint = f"choose a {label}.size that is a multiple of {per_set} B"
    lines, rest = divmod(c.size, c.line * c.partitions)
    if rest:
        return f"{hint} (at least a multiple of {c.line * c.partitions} B: whole lines in every partition)"
    divisors = {d for i in range(1, math.isqrt(lines) + 1) if lines % i == 0 for d in (i, lines // i)
                if d <= LIMITS["assoc"]}
    ways = min(divisors, key=lambda a: (abs(a - c.assoc), a))
    return f"{hint}, or set {label}.assoc={ways} ({lines // ways} set(s) per partition)"


KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
LIMITS: dict[str, int] = {
    "sm_count": 1024, "clock_mhz": 10_000, "max_threads_per_sm": 8192, "max_warps_per_sm": 256,
    "max_ctas_per_sm": 256, "max_threads_per_cta": 8192, "registers_per_sm": 1 << 20,
    "max_registers_per_thread": 1024, "register_alloc_unit": 1 << 16, "register_subpartitions": 64,
    "warp_alloc_granularity": 256, "shared_per_sm": 16 * MiB, "shared_per_cta": 16 * MiB,
    "shared_alloc_unit": MiB, "shared_reserved_per_cta": MiB, "cores_per_sm": 4096, "shared_banks": 1024,
    "l1.size": 16 * MiB, "l2.size": GiB, "l2.fetch_granularity": 4096, "line": 4096, "sector": 4096, "assoc": 1024, "partitions": 1024,
    "hit_latency": 100_000, "shared_latency": 100_000,
    "dram.channels": 1024, "dram.banks": 1024, "dram.interleave": MiB, "dram.row_size": MiB,
    "dram.base_latency": 1_000_000, "dram.row_hit_cycles": 1_000_000, "dram.row_miss_cycles": 1_000_000,
    "dram.burst_cycles": 1_000_000, "dram.transaction": 4096,
    "unified_l1_shared": 16 * MiB, "shared_carveouts": 16 * MiB,
    "departure_del_coal": 100_000, "departure_del_uncoal": 100_000,
    "l2.bandwidth_gbs": 1_000_000, "dram.bandwidth_gbs": 1_000_000,
}
"""Upper bounds of every Arch value: generous beyond any GPU built (the largest L2s are about 100 MiB,
the most SMs about 200), tight enough that no value makes the simulator allocate without end.
Cache keys without a level (``line``) apply to both L1 and L2."""


def _check_limits(arch: Arch) -> None:
    for section, values in arch_to_mapping(arch).items():
        items = values.items() if isinstance(values, dict) else [("", values)]
        for name, value in items:
            key = f"{section}.{name}" if name else section
            limit = LIMITS.get(key, LIMITS.get(name))
            sizes = name in _SIZE_FIELDS or section in _SIZE_FIELDS or section in _SIZE_LIST_FIELDS
            shown = format_size if sizes else (lambda x: f"{x:g}")
            for v in (value if isinstance(value, list) else [value]):
                if limit is not None and isinstance(v, (int, float)) and not isinstance(v, bool):
                    _check(v <= limit, arch, f"{key} = {shown(v)} is beyond what a GPU has (at most {shown(limit)})",
                           f"choose {key} of at most {shown(limit)}")


def validate(arch: Arch) -> None:
    """Raise ArchError naming the first impossible value."""
    _check(bool(arch.name), arch, "name must not be empty")
    _check(re.fullmatch(r"[1-9]\.[0-9]", arch.compute_capability) is not None, arch,
           f"compute_capability must be major.minor such as \"7.0\", got {arch.compute_capability!r}")
    for name in ("sm_count", "warp_size", "clock_mhz", "max_threads_per_sm", "max_warps_per_sm",
                 "max_ctas_per_sm", "max_threads_per_cta", "registers_per_sm", "max_registers_per_thread",
                 "register_alloc_unit", "register_subpartitions", "warp_alloc_granularity",
                 "shared_alloc_unit", "cores_per_sm", "shared_banks", "shared_latency"):
        _check(getattr(arch, name) > 0, arch, f"{name} must be positive")
    for name in ("shared_per_sm", "shared_per_cta", "shared_reserved_per_cta"):
        _check(getattr(arch, name) >= 0, arch, f"{name} must not be negative")
    _check_limits(arch)
    _check(arch.warp_size == 32, arch, "warp_size must be 32 (traces hold 32 lanes per warp access)")
    _check(arch.max_warps_per_sm * arch.warp_size >= arch.max_threads_per_sm, arch,
           "max_warps_per_sm x warp_size must cover max_threads_per_sm")
    _check(arch.max_threads_per_cta <= arch.max_threads_per_sm, arch, "max_threads_per_cta exceeds max_threads_per_sm")
    _check(arch.shared_per_cta <= arch.shared_per_sm, arch, "shared_per_cta exceeds shared_per_sm")
    _check(arch.register_allocation in REGISTER_ALLOCATION, arch, "register_allocation must be 'warp' or 'cta'")
    _check(arch.registers_per_sm % arch.register_subpartitions == 0, arch,
           "registers_per_sm must divide evenly among register_subpartitions")
    _validate_cache(arch, "l1", arch.l1)
    _validate_cache(arch, "l2", arch.l2)
    fg = arch.l2.fetch_granularity
    _check(fg == 0 or (_is_pow2(fg) and arch.l2.sector <= fg <= arch.l2.line), arch,
           f"l2.fetch_granularity ({fg} B) must be 0 or a power of two from l2.sector ({arch.l2.sector} B) "
           f"to l2.line ({arch.l2.line} B)", "the CUDA limit takes 0..128 B; write e.g. l2.fetch_granularity=64")
    _check(arch.l2.halves in (1, 2), arch, f"l2.halves must be 1 or 2, got {arch.l2.halves}",
           "1: one shared L2; 2: the two partitions of A100 and H100")
    if arch.l2.halves == 2 and arch.l2.enabled:
        _check(arch.l2.sets * arch.l2.partitions % 2 == 0 and arch.l2.line <= arch.l1.line, arch,
               "l2.halves = 2 needs an even number of L2 sets and L2 lines no longer than the L1's",
               "set l2.halves=1, or size the L2 in an even number of sets")
    if arch.l1.enabled and arch.l2.enabled:
        _check(arch.l1.line % arch.l2.sector == 0 or arch.l2.line % arch.l1.sector == 0, arch,
               "l1 and l2 sector/line sizes must nest (one a multiple of the other)")
    d = arch.dram
    for name in ("channels", "banks", "interleave", "row_size", "transaction"):
        _check(getattr(d, name) > 0, arch, f"dram.{name} must be positive")
    for name in ("base_latency", "row_hit_cycles", "row_miss_cycles", "burst_cycles"):
        _check(getattr(d, name) >= 0, arch, f"dram.{name} must not be negative")
    _check(_is_pow2(d.interleave) and _is_pow2(d.row_size) and _is_pow2(d.transaction), arch,
           "dram.interleave, dram.row_size and dram.transaction must be powers of two")
    _check(d.row_hit_cycles <= d.row_miss_cycles, arch, "dram.row_hit_cycles must not exceed dram.row_miss_cycles")
    _check(d.bandwidth_gbs > 0, arch, "dram.bandwidth_gbs must be positive", "write the DRAM bandwidth in GB/s, e.g. 900")
    l2 = arch.l2
    _check(l2.write_policy in L2_WRITE_POLICIES, arch, f"l2.write_policy must be one of {', '.join(L2_WRITE_POLICIES)}")
    _check(l2.bandwidth_gbs > 0 if l2.enabled else l2.bandwidth_gbs >= 0, arch,
           "l2.bandwidth_gbs must be positive when the L2 is present (0 only when l2.size is 0)",
           "write the sustained L2 bandwidth in GB/s, e.g. 2500")
    _check(arch.address_hash in ADDRESS_HASHES, arch, f"address_hash must be one of {', '.join(ADDRESS_HASHES)}")
    for name in ("departure_del_coal", "departure_del_uncoal"):
        _check(getattr(arch, name) > 0, arch, f"{name} must be positive (cycles between two request departures)")
    c = arch.shared_carveouts
    _check(all(a < b for a, b in zip(c, c[1:])) and c[0] >= 0, arch,
           "shared_carveouts must be distinct sizes in ascending order", "write e.g. 0,8KiB,16KiB,32KiB,64KiB,96KiB")
    _check(arch.shared_per_sm <= c[-1], arch,
           f"shared_per_sm ({size(arch.shared_per_sm)}) exceeds the largest shared_carveouts step ({size(c[-1])})",
           "add a carve-out step that holds it to shared_carveouts, or lower shared_per_sm")
    _check(arch.unified_l1_shared == 0 or c[-1] <= arch.unified_l1_shared, arch,
           f"the largest shared_carveouts step ({size(c[-1])}) exceeds unified_l1_shared "
           f"({size(arch.unified_l1_shared)})", "raise unified_l1_shared or lower the carve-out steps")
