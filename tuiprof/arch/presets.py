"""Loading an Arch: a preset name, or a TOML file, then ``--set`` overrides."""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from tuiprof.arch.model import Arch, arch_from_mapping
from tuiprof.errors import ArchError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PRESET_DIR = Path(__file__).resolve().parent / "presets"


def preset_names() -> list[str]:
    """Names of the shipped presets, sorted."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ArchError(f"arch file {path} does not exist", "give a preset name (see `tuiprof archs`) or a .toml path") from None
    except IsADirectoryError:
        raise ArchError(f"arch file {path} is a directory", "give a .toml file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ArchError(f"arch file {path} is not valid TOML: {exc}", "compare with a preset: `tuiprof archs --show h100`") from None
    except OSError as exc:
        raise ArchError(f"cannot read arch file {path}: {exc.strerror}") from None


@lru_cache(maxsize=None)
def _preset(name: str) -> Arch:
    return arch_from_mapping(_read_toml(PRESET_DIR / f"{name}.toml"), origin=f"preset {name}")


def load_arch(spec: str, overrides: Mapping[str, str] | None = None) -> Arch:
    """An Arch from a preset name or a TOML path, with validated ``--set`` overrides."""
    if spec in preset_names():
        arch = _preset(spec)
    elif spec.endswith(".toml") or "/" in spec or Path(spec).exists():
        path = Path(spec)
        arch = arch_from_mapping(_read_toml(path), origin=str(path))
    else:
        raise ArchError(f"unknown arch {spec!r}", "presets are: " + ", ".join(preset_names()) + "; or give a .toml file")
    return arch.with_overrides(overrides) if overrides else arch


def parse_overrides(items: list[str] | None) -> dict[str, str]:
    """``["l1.size=48KiB", ...]`` -> ``{"l1.size": "48KiB"}``; malformed items raise."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ArchError(f"--set {item!r} is not KEY=VALUE", "for example --set l1.size=48KiB")
        out[key.strip()] = value.strip()
    return out
