"""Arch presets, validation and --set overrides."""

from __future__ import annotations

import pytest

from tuiprof.arch import load_arch, preset_names
from tuiprof.arch.presets import parse_overrides
from tuiprof.arch.spec import parse_size
from tuiprof.errors import ArchError

PRESETS = ["a100", "gtx285", "gtx480", "h100", "tesla-c2050", "v100"]


def test_all_presets_load() -> None:
    assert preset_names() == PRESETS
    for name in PRESETS:
        assert load_arch(name).name == name


@pytest.mark.parametrize("name,sms,l1,l2", [
    ("tesla-c2050", 14, 16 << 10, 768 << 10),   # Baghsorkhi12 sec. 2.1 and 5.3
    ("gtx480", 15, 16 << 10, 0),                 # Yen14 Table 8: 15 shaders, L2 disabled
    ("gtx285", 30, 0, 0),                        # Zhang11: GT200 has no data caches
    ("v100", 80, 128 << 10, 6 << 20),
    ("a100", 108, 192 << 10, 40 << 20),
    ("h100", 132, 217 << 10, 50 << 20),         # L1 measured by tuiprof calibrate on an H100 (2026-11-26)
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
])
def test_invalid_override_rejected(key: str, value: str, needle: str) -> None:
    with pytest.raises(ArchError) as e:
        load_arch("v100", {key: value})
    assert needle in str(e.value) + e.value.hint


@pytest.mark.parametrize("preset,settings,sets", [
    ("tesla-c2050", {"l1.size": "48KiB"}, 6),      # the README's what-if: 6 sets of 64 ways
    ("v100", {"l2.size": "9MiB"}, 48),             # 64 slices of 24 ways: 48 sets per slice
    ("a100", {"l1.size": "96KiB", "l1.assoc": "256"}, 3),
])
def test_any_whole_number_of_sets_is_accepted(preset: str, settings: dict[str, str], sets: int) -> None:
    a = load_arch(preset, settings)
    level = a.l2 if "l2.size" in settings else a.l1
    assert level.sets == sets


@pytest.mark.parametrize("preset,key,value", [
    ("a100", "l1.size", "100KiB"),   # 800 lines: not 384-way sets
    ("h100", "l1.size", "200KiB"),
    ("v100", "l1.size", "3KiB"),
    ("tesla-c2050", "l2.size", "700KiB"),
    ("v100", "l1.size", "1000"),     # not even whole lines
])
def test_the_whole_sets_hint_names_settings_that_load(preset: str, key: str, value: str) -> None:
    import re

    with pytest.raises(ArchError) as e:
        load_arch(preset, {key: value})
    hint = e.value.hint
    level = key.split(".")[0]
    multiple = int(re.search(r"a multiple of (\d+) B", hint).group(1))
    size = parse_size(value, key)
    assert load_arch(preset, {key: str(-(-size // multiple) * multiple)}).to_dict()[level]["size"] % multiple == 0
    ways = re.search(rf"set {level}\.assoc=(\d+) \((\d+) set", hint)
    c = load_arch(preset).to_dict()[level]
    assert (ways is None) == (size % (c["line"] * c["partitions"]) != 0)  # offered whenever the lines allow one
    if ways:
        a = load_arch(preset, {key: value, f"{level}.assoc": ways.group(1)})
        assert getattr(a, level).sets == int(ways.group(2))


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


# --- issue 14 part 2: bandwidths, departure delays, L2 write policy, address hash, carve-outs ---

@pytest.mark.parametrize("name,dram_gbs,write_policy,address_hash", [
    ("tesla-c2050", 144.0, "write-through", "linear"),   # C2050 datasheet; Baghsorkhi12 sec. 2.1's store-miss rule
    ("gtx480", 88.7, "write-through", "linear"),         # Yen14 Table 8: 12 x 8 B x 924 MHz
    ("gtx285", 159.0, "write-through", "linear"),        # Zhang11 sec. 4.3: 2.484 GHz x 512 bit / 8
    ("v100", 900.0, "write-back", "xor"),
    ("a100", 1555.0, "write-back", "xor"),
    ("h100", 3350.0, "write-back", "xor"),
])
def test_memory_system_fields(name: str, dram_gbs: float, write_policy: str, address_hash: str) -> None:
    a = load_arch(name)
    assert (a.dram.bandwidth_gbs, a.l2.write_policy, a.address_hash) == (dram_gbs, write_policy, address_hash)
    assert (a.l2.bandwidth_gbs > 0) == a.l2.enabled
    assert a.departure_del_coal > 0 and a.departure_del_uncoal > 0


def test_departure_delays_are_the_sms_share_of_bandwidth() -> None:
    # V100: 2800 GB/s over 80 SMs at 1.53 GHz = 22.9 B/cycle per SM: a 128 B coalesced request
    # departs every 5.6 cycles, a 32 B sector every 1.4 (the preset comments' derivation).
    a = load_arch("v100")
    per_sm = a.l2.bandwidth_gbs / a.sm_count / (a.clock_mhz / 1000)
    assert a.departure_del_coal == pytest.approx(128 / per_sm, abs=0.05)
    assert a.departure_del_uncoal == pytest.approx(32 / per_sm, abs=0.05)
    # GT200 has no L2: the DRAM share, 159 / 30 / 1.476 = 3.59 B/cycle; 32 B transactions.
    g = load_arch("gtx285")
    per_sm = g.dram.bandwidth_gbs / g.sm_count / (g.clock_mhz / 1000)
    assert g.departure_del_uncoal == pytest.approx(32 / per_sm, abs=0.05)


@pytest.mark.parametrize("name,carveouts_kib,unified_kib", [
    ("tesla-c2050", [16, 48], 64), ("gtx480", [16, 48], 64), ("gtx285", [16], 0),
    ("v100", [0, 8, 16, 32, 64, 96], 128),
    ("a100", [0, 8, 16, 32, 64, 100, 132, 164], 192),
    ("h100", [0, 8, 16, 32, 64, 100, 132, 164, 196, 228], 256),
])
def test_shared_memory_carveouts(name: str, carveouts_kib: list[int], unified_kib: int) -> None:
    a = load_arch(name)
    assert [c >> 10 for c in a.shared_carveouts] == carveouts_kib
    assert a.unified_l1_shared == unified_kib << 10
    assert a.shared_per_sm == a.shared_carveouts[-1]


def test_new_fields_take_overrides() -> None:
    a = load_arch("v100", {"shared_carveouts": "0,32KiB,96KiB", "l2.write_policy": "write-through",
                           "address_hash": "linear", "dram.bandwidth_gbs": "850.5", "departure_del_coal": "4"})
    assert a.shared_carveouts == (0, 32 << 10, 96 << 10) and a.l2.write_policy == "write-through"
    assert a.address_hash == "linear" and a.dram.bandwidth_gbs == 850.5 and a.departure_del_coal == 4.0


@pytest.mark.parametrize("key,value,needle", [
    ("address_hash", "modulo", "address_hash must be one of linear, xor"),
    ("l2.write_policy", "write-around", "write_policy must be one of"),
    ("shared_carveouts", "96KiB,0", "ascending"),
    ("shared_carveouts", "0,8KiB", "largest shared_carveouts step"),       # shared_per_sm 96 KiB does not fit
    ("shared_carveouts", "0,96KiB,256KiB", "exceeds unified_l1_shared"),
    ("dram.bandwidth_gbs", "0", "dram.bandwidth_gbs must be positive"),
    ("dram.bandwidth_gbs", "nan", "finite"),
    ("dram.bandwidth_gbs", "fast", "not a number"),
    ("l2.bandwidth_gbs", "0", "l2.bandwidth_gbs must be positive"),
    ("departure_del_uncoal", "-1", "positive"),
    ("dram.bandwidth_gbs", "2000000", "at most 1e+06"),
    ("shared_carveouts", "0,96KiB,32MiB", "at most 16 MiB"),
    ("l2.replacement", "plru", "l2.replacement must be one of lru, fifo, mru, random"),
    ("l1.replacement", "LRU", "e.g. --set l1.replacement=lru"),
])
def test_new_fields_are_validated(key: str, value: str, needle: str) -> None:
    with pytest.raises(ArchError) as e:
        load_arch("v100", {key: value})
    assert needle in str(e.value) + e.value.hint


def test_l2_bandwidth_may_be_zero_only_without_an_l2() -> None:
    assert load_arch("gtx480").l2.bandwidth_gbs == 0 and not load_arch("gtx480").l2.enabled


def test_archs_show_is_a_loadable_arch_file(tmp_path, capsys) -> None:
    """`tuiprof archs --show` prints TOML that loads back to the same Arch (lists and floats included)."""
    from tuiprof.cli.main import main

    for name in PRESETS:
        assert main(["archs", "--show", name]) == 0
        p = tmp_path / f"{name}.toml"
        p.write_text(capsys.readouterr().out)
        assert load_arch(str(p)) == load_arch(name)
