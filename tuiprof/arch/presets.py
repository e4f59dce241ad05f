"""Loading an Arch: a preset name, or a TOML file, then ``--set`` overrides."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from tuiprof.arch.spec import Arch, arch_from_mapping
from tuiprof.errors import ArchError
from tuiprof.files import FileRole, read_regular

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PRESET_DIR = Path(__file__).resolve().parent / "presets"


def preset_names() -> list[str]:
    """Names of the shipped presets, sorted."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


MAX_ARCH_FILE_BYTES = 1 << 20
"""An arch TOML is a few KiB; anything past 1 MiB is not one (and /dev/zero never ends)."""


ARCH_FILE = FileRole(noun="arch file ", expected="a regular file", error=ArchError,
                     missing_hint="give a preset name (see `tuiprof archs`) or a .toml path",
                     other_hint="save the arch as a .toml file and pass its path", folder_hint="give a .toml file",
                     too_large=": not an arch description (an arch TOML is a few KiB; compare with "
                     "`tuiprof archs --show h100`)")


def _read_toml(path: Path) -> dict[str, Any]:
    """Parse an arch TOML file: a regular file of at most MAX_ARCH_FILE_BYTES, never a device or FIFO."""
    from tuiprof.output import shown

    data = read_regular(path, ARCH_FILE, MAX_ARCH_FILE_BYTES)
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ArchError(f"arch file {shown(path)} is not valid TOML: {exc}",
                        "compare with a preset: `tuiprof archs --show h100`") from None


@cache
def _preset(name: str) -> Arch:
    return arch_from_mapping(_read_toml(PRESET_DIR / f"{name}.toml"), origin=f"preset {name}")


def preset_arch(name: str, overrides: Mapping[str, str] | None = None, *, origin: str = "the trace") -> Arch:
    """A preset by name only, never a path: what a trace file may name (a trace is a file users
    exchange; a name it carries must never open another file)."""
    if name not in preset_names():
        from tuiprof.output import shown

        raise ArchError(f"{origin} names arch {shown(name)[:80]!r}, which is not a preset",
                        "choose the GPU model with --arch NAME (presets: " + ", ".join(preset_names()) + ") or --arch FILE.toml")
    arch = _preset(name)
    return arch.with_overrides(overrides) if overrides else arch


def load_arch(spec: str, overrides: Mapping[str, str] | None = None) -> Arch:
    """An Arch from a preset name or a TOML path (the command line's --arch), with validated
    ``--set`` overrides."""
    if spec in preset_names():
        arch = _preset(spec)
    elif spec == CALIBRATED:  # written by `tuiprof calibrate` (tuiprof.collect.gpu.calibrate)
        arch = load_calibrated()
    elif spec.endswith(".toml") or "/" in spec or Path(spec).exists():
        path = Path(spec)
        arch = arch_from_mapping(_read_toml(path), origin=str(path))
    else:
        raise ArchError(f"unknown arch {spec!r}", "presets are: " + ", ".join(preset_names())
                        + "; or give a .toml file, or `calibrated` after `tuiprof calibrate`")
    return arch.with_overrides(overrides) if overrides else arch


CALIBRATED = "calibrated"
"""The name ``--arch`` takes for the calibrated file."""


def config_dir() -> Path:
    """The user's tuiprof configuration folder (XDG)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "tuiprof"


def calibrated_path() -> Path:
    """Where `tuiprof calibrate` writes, and ``--arch calibrated`` reads."""
    return config_dir() / "arch" / f"{CALIBRATED}.toml"


def load_calibrated() -> Arch:
    """The calibrated Arch; ArchError when `tuiprof calibrate` never ran here."""
    path = calibrated_path()
    if not path.is_file():
        raise ArchError(f"no calibrated arch: {path} does not exist",
                        "run `tuiprof calibrate` on the GPU first, or choose a preset (`tuiprof archs`)")
    return load_arch(str(path))


def parse_overrides(items: list[str] | None) -> dict[str, str]:
    """``["l1.size=48KiB", ...]`` -> ``{"l1.size": "48KiB"}``; malformed items raise."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ArchError(f"--set {item!r} is not KEY=VALUE", "for example --set l1.size=48KiB")
        out[key.strip()] = value.strip()
    return out
