"""Arch presets, validation and --set overrides."""

from __future__ import annotations

import pytest

from tuiprof.arch import load_arch, preset_names
from tuiprof.arch.model import parse_size
from tuiprof.arch.presets import parse_overrides
from tuiprof.errors import ArchError

PRESETS = ["a100", "gtx285", "gtx480", "h100", "tesla-c2050", "v100"]


def test_all_presets_load() -> None:
    assert preset_names() == PRESETS
    for name in PRESETS:
        assert load_arch(name).name == name


@pytest.mark.parametrize("name,sms,l1,l2", [
    ("tesla-c2050", 14, 16 << 10, 768 << 10),   # paper 000 sec. 2.1 and 5.3
    ("gtx480", 15, 16 << 10, 0),                 # paper 002 Table 8: 15 shaders, L2 disabled
    ("gtx285", 30, 0, 0),                        # paper 001: GT200 has no data caches
    ("v100", 80, 128 << 10, 6 << 20),
    ("a100", 108, 192 << 10, 40 << 20),
    ("h100", 132, 256 << 10, 50 << 20),
])
def test_key_figures(name: str, sms: int, l1: int, l2: int) -> None:
    a = load_arch(name)
    assert (a.sm_count, a.l1.size, a.l2.size) == (sms, l1, l2)


def test_paper000_cache_geometry() -> None:
    a = load_arch("tesla-c2050")
    assert (a.l1.line, a.l1.assoc, a.l2.line, a.l2.assoc) == (128, 64, 32, 64)
    assert a.l1.hit_latency == 52


def test_volta_and_later_are_sectored() -> None:
    for name in ("v100", "a100", "h100"):
        a = load_arch(name)
        assert (a.l1.line, a.l1.sector, a.l2.line, a.l2.sector) == (128, 32, 128, 32)
        assert a.l1.sectors_per_line == 4


def test_every_preset_value_has_a_source_comment() -> None:
    from tuiprof.arch.presets import PRESET_DIR

    for path in PRESET_DIR.glob("*.toml"):
        for line in path.read_text().splitlines():
            if "=" in line and not line.startswith("#") and line.split("=")[0].strip() not in ("name", "description", "warp_size", "partitions", "replacement", "max_threads_per_cta", "register_allocation", "shared_per_cta", "line", "sector", "transaction"):
                assert "#" in line, f"{path.name}: {line!r} has no source comment"


@pytest.mark.parametrize("text,value", [("48KiB", 48 << 10), ("6MiB", 6 << 20), ("128", 128), (256, 256), ("1.5KiB", 1536)])
def test_parse_size(text: object, value: int) -> None:
    assert parse_size(text, "k") == value


@pytest.mark.parametrize("text", ["-", "12 parsecs", "1.3", True, None, "KiB"])
def test_parse_size_rejects(text: object) -> None:
    with pytest.raises(ArchError):
        parse_size(text, "k")


def test_override_changes_value_and_name() -> None:
    a = load_arch("v100", {"l1.size": "64KiB", "dram.base_latency": "500"})
    assert a.l1.size == 64 << 10 and a.dram.base_latency == 500 and a.name == "v100*"
    assert load_arch("v100").l1.size == 128 << 10  # the preset itself is untouched


@pytest.mark.parametrize("key,value,needle", [
    ("l1.size", "3KiB", "sets"),                 # not a whole number of sets
    ("l1.line", "96", "power of two"),
    ("l1.sector", "256", "multiple"),            # line 128 not a multiple of sector 256
    ("l2.assoc", "0", "positive"),
    ("l1.size", "-16KiB", "size"),
    ("sm_count", "0", "positive"),
    ("l1.store_policy", "write-back", "store_policy"),
    ("l1.colour", "red", "unknown"),
    ("nonsense", "1", "unknown"),
    ("sm_count", "many", "whole number"),
    ("l2.size", "9MiB", "power of two"),         # 9 MiB over 64 slices of 24 ways: 48 sets per slice
])
def test_invalid_override_rejected(key: str, value: str, needle: str) -> None:
    with pytest.raises(ArchError) as e:
        load_arch("v100", {key: value})
    assert needle in str(e.value) + e.value.hint


@pytest.mark.parametrize("item", ["l1.size", "=3", "l1.size=", ""])
def test_malformed_set_items(item: str) -> None:
    with pytest.raises(ArchError):
        parse_overrides([item])


def test_arch_file(tmp_path) -> None:
    from tuiprof.arch.presets import PRESET_DIR

    text = (PRESET_DIR / "v100.toml").read_text().replace('name = "v100"', 'name = "mygpu"')
    p = tmp_path / "mygpu.toml"
    p.write_text(text)
    assert load_arch(str(p)).name == "mygpu"
    p.write_text(text.replace("sm_count = 80", "sm_count = -1"))
    with pytest.raises(ArchError, match="sm_count"):
        load_arch(str(p))
    p.write_text("this is [ not toml")
    with pytest.raises(ArchError, match="TOML"):
        load_arch(str(p))
    p.write_text("\n".join(l for l in text.splitlines() if not l.startswith("sm_count")))
    with pytest.raises(ArchError, match="missing setting sm_count"):
        load_arch(str(p))
    with pytest.raises(ArchError, match="does not exist"):
        load_arch(str(tmp_path / "nope.toml"))
