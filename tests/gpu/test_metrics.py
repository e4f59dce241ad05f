"""The measured-metric registry (issue 28 item 6): each metric spelled once in tuiprof/metrics.py.
Oracles: the ncu names and labels NVIDIA's documentation and the validation table used before the
registry (written out by hand here), a hand-made ncu launch, and the spellings a trace may carry."""

from __future__ import annotations

import pytest

from tuiprof.metrics import BY_KEY, HEADLINE_METRICS, METRICS, measured_in


def test_the_registry_holds_the_metrics_validate_measures() -> None:
    assert [(m.key, m.ncu) for m in METRICS] == [
        ("l1_read", ("l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct",)),
        ("l2_read", ("lts__t_sector_op_read_hit_rate.pct",)),
        ("l2_write", ("lts__t_sector_op_write_hit_rate.pct",)),
        ("sectors_per_request", ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
                                 "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")),
        ("shared_ld_wavefronts_per_request", ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                                              "smsp__sass_inst_executed_op_shared_ld.sum")),
        ("shared_st_wavefronts_per_request", ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
                                              "smsp__sass_inst_executed_op_shared_st.sum")),
    ]
    assert [m.key for m in HEADLINE_METRICS] == ["l1_read", "l2_read", "l2_write"]
    assert BY_KEY["shared_st_wavefronts_per_request"].label == "wavefronts / request (shared stores)"
    assert (BY_KEY["sectors_per_request"].upper, BY_KEY["l2_read"].upper) == (64.0, 1.0)


def test_a_metric_reads_ncu_and_formats_its_values() -> None:
    metrics = {"lts__t_sector_op_read_hit_rate.pct": 71.5, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 300.0,
               "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 100.0,
               "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": 5.0,
               "smsp__sass_inst_executed_op_shared_ld.sum": 0.0, "lts__t_sector_op_write_hit_rate.pct": None}
    units = {"lts__t_sector_op_read_hit_rate.pct": "%"}
    got = {m.key: m.from_ncu(metrics, units) for m in METRICS}
    assert got == {"l1_read": None, "l2_read": pytest.approx(0.715), "l2_write": None, "sectors_per_request": 3.0,
                   "shared_ld_wavefronts_per_request": None, "shared_st_wavefronts_per_request": None}
    assert BY_KEY["l2_read"].from_ncu(metrics, {"lts__t_sector_op_read_hit_rate.pct": "ratio"}) == 71.5
    assert (BY_KEY["l2_read"].format(0.125), BY_KEY["l2_read"].format_error(0.0123)) == ("12.5%", "1.2 pts")
    assert (BY_KEY["sectors_per_request"].format(4.0), BY_KEY["sectors_per_request"].format_error(0.25)) == \
        ("4.00", "0.25")


def test_a_trace_may_spell_a_hit_ratio_four_ways() -> None:
    assert measured_in({"l1_read": 0.5}, "l1_read") == (0.5, "l1_read")
    assert measured_in({"l1_read_hit_rate": 47.5}, "l1_read") == (pytest.approx(0.475), "l1_read_hit_rate")
    assert measured_in({"op3.h1_hit_ratio": 0.25, "op3.h1_hit_rate": 90.0}, "op3.h1") == (0.25, "op3.h1_hit_ratio")
    assert measured_in({"l1_read": float("nan"), "l1_read_hit": 0.3}, "l1_read") == (0.3, "l1_read_hit")
    assert measured_in({"l2_read": 0.5}, "l1_read") is None
