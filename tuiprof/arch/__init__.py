"""GPU models: the Arch dataclass, TOML presets, occupancy."""

from tuiprof.arch.presets import load_arch, preset_names
from tuiprof.arch.spec import Arch, CacheConfig, DramConfig, parse_size

__all__ = ["Arch", "CacheConfig", "DramConfig", "load_arch", "parse_size", "preset_names"]
