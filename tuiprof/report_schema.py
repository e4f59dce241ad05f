"""The JSON report's shape, a contract users script against: TypedDicts that `tuiprof.report`
builds (mypy checks every key and value type there), and the JSON Schema generated from them,
shipped as ``tuiprof/report.schema.json`` (`schema_text`; tests/report/test_report_schema.py checks that
the shipped file is the generated one and that a real report validates against it).

``schema_version`` in every report says which shape it has: it changes when a key is removed or
renamed or its type changes; adding a key leaves it unchanged (a consumer ignores keys it does not
know). Regenerate the file after changing a TypedDict here:

    python -m tuiprof.report_schema > tuiprof/report.schema.json
"""

from __future__ import annotations

import json
import sys
import types
from typing import Any, Literal, TypedDict, Union, get_args, get_origin, get_type_hints

SCHEMA_VERSION = 1
"""The version of the report's shape (see the module docstring)."""


class Estimate(TypedDict):
    """An estimate over the trials: the spread of single trials and the confidence interval of the
    mean (mean +- 1.96 std, and mean +- t std / sqrt(n) with Student's t for n - 1 degrees of freedom);
    None where undefined."""

    mean: float | None
    std: float | None
    spread_lo: float | None
    spread_hi: float | None
    ci_lo: float | None
    ci_hi: float | None
    stderr: float | None
    n: int


class Histogram(TypedDict):
    counts: list[int]
    edges: list[float]


class HeadlineEstimate(Estimate):
    histogram: Histogram


class LaunchSection(TypedDict):
    grid: list[int]
    block: list[int]
    registers_per_thread: int
    static_shared: int
    dynamic_shared: int
    ctas_per_sm: int


class SnapshotSection(TypedDict):
    ctas: int
    first_cta: int | None
    warm_ctas: int
    warps: int
    warp_accesses: int
    rule: str


class ProvenanceSection(TypedDict):
    backend: Literal["gpu", "emulator", "synthetic"]
    arch: str
    gpu: str
    tool_version: str
    date: str
    generator: dict[str, Any]
    measured: dict[str, float]


class PtxLine(TypedDict):
    line: int
    instruction: str


class TraceOp(TypedDict):
    id: int
    kind: Literal["load", "store", "atomic"]
    space: Literal["global", "shared", "local", "const", "texture"]
    bytes: int
    file: str
    line: int
    label: str
    source: str
    starts_sequence: bool
    ptx: list[PtxLine]
    warp_accesses: int
    mean_active_lanes: float


class TraceSection(TypedDict):
    path: str | None
    kernel: str
    launch: LaunchSection
    snapshot: SnapshotSection
    provenance: ProvenanceSection
    sources: list[str]
    ops: list[TraceOp]


class L1Section(TypedDict):
    size: int
    line: int
    sector: int
    assoc: int
    hit_latency: float
    store_policy: str


class L2Section(TypedDict):
    size: int
    line: int
    sector: int
    assoc: int
    hit_latency: float


class ArchSection(TypedDict):
    name: str
    description: str
    sm_count: int
    l1: L1Section
    l2: L2Section
    shared_carveout: int | None
    l2_write_policy: str
    address_hash: str
    dram_base_latency: float
    overrides: dict[str, str]


class OccupancySection(TypedDict):
    ctas_per_sm: int
    limiter: str
    warps_per_sm: int
    fraction: float


class RunSection(TypedDict):
    trials: int
    seed: int
    md: int
    tolerance: float | None
    stopped: str | None
    sweep: bool
    sweep_trials: int


class SharedSection(TypedDict):
    wavefronts_per_request: float | None
    ideal_wavefronts: float | None
    worst_wavefronts: int
    conflicted_share: float | None
    latency: float | None
    wavefronts: float


class ConstSection(TypedDict):
    requests_per_access: float | None
    ideal_requests: float | None
    worst_requests: int
    serialised_share: float | None
    latency: float | None
    requests: float


class LatencyShares(TypedDict):
    l1: float | None
    l2: float | None
    dram: float | None


class AnalysisOp(TypedDict):
    id: int
    rank: str | None
    kind: Literal["load", "store", "atomic"]
    line: int
    label: str
    warp_accesses: int
    requests_per_access: float | None
    sectors_per_request: float | None
    ideal_sectors: float | None
    sectors_per_l1_request: float | None
    h1: Estimate
    h2: Estimate
    x: Estimate
    tm: Estimate
    cost: float | None
    cost_share: float | None
    latency_shares: LatencyShares
    shared: SharedSection | None
    constant: ConstSection | None
    reason: str | None
    advice: list[str] | None


class DramLatency(TypedDict):
    tm: Estimate
    counts: list[int]
    edges: list[float]


class TimeRow(TypedDict):
    time_s: float | None
    bound: str
    bound_label: str
    mwp_s: float | None
    dram_floor_s: float | None
    l2_floor_s: float | None
    issue_floor_s: float | None
    mem_ld: float | None
    load_bytes_per_warp: float | None
    bandwidth_level: str
    dram_bytes: float | None
    l2_bytes: float | None
    n: float | None
    mwp: float | None
    cwp: float | None
    case: str


class MdTimingRow(TimeRow):
    relative_performance: float | None


class MdSimulated(TypedDict):
    miss_rate: float | None
    l2_read_hit_ratio: float | None
    dram_reads_per_cta: float | None
    mf_latency: float | None
    trials: int


class ThesisRow(TypedDict):
    miss_rate: float | None
    dram_reads_per_cta: float | None
    dr_inc_rate: float | None
    mf_latency: float | None
    mf_latency_rate: float | None
    pipeline_effect: float | None
    cta_exe_rate: float | None
    cta_exe_ratio: float | None
    relative_performance: float | None


class MdRow(TypedDict):
    md: int
    simulated: MdSimulated | None
    timing: MdTimingRow | None
    thesis: ThesisRow


class MdSection(TypedDict):
    default_md: int
    limiter: str
    headline: str
    recommended_md: int
    gain: float | None
    gain_range: list[float | None] | None
    low_confidence: bool
    thesis_md: int
    thesis_gain: float | None
    dynamic_shared: int | None
    apply: str
    advice: str
    compute_bound: bool
    dram_per_inst: float | None
    sweep_trials: int
    sweep_elapsed_s: float
    rows: list[MdRow]


class MwpCwpSection(TypedDict):
    n: float | None
    mwp: float | None
    mwp_limiter: str
    cwp: float | None
    case: str
    mem_l: float | None
    departure_delay: float | None
    bw_per_warp: float | None
    mem_cycles: float | None
    comp_cycles: float | None
    rep: float | None
    exec_cycles_app: float | None
    cpi: float | None
    insts_source: str


class Throughputs(TypedDict):
    instruction_gips: float | None
    shared_gbs: float | None
    global_gbs: float | None
    source: str


class BottleneckSection(TypedDict):
    times_s: dict[str, float | None]
    bottleneck: str
    time_s: float | None
    next_bottleneck: str | None
    time_without_bottleneck_s: float | None
    speedup_if_removed: float | None
    serialized: bool
    throughputs: Throughputs


class SmUtilisationSection(TypedDict):
    source: str
    unit: str
    imbalance: float | None
    utilisation: float | None
    idle_sms: list[int]
    busy_fraction: list[float | None]
    ctas: list[int]
    caveat: str


class DecisionsSection(TypedDict):
    advice: list[str]
    md: MdSection | None
    md_note: str | None
    timing: TimeRow
    mwp_cwp: MwpCwpSection
    bottleneck: BottleneckSection
    sm_utilisation: SmUtilisationSection


class AnalysisSection(TypedDict):
    trials: int
    planned: int
    md: int
    elapsed_s: float
    l1_requests_per_second: int
    headline: dict[str, HeadlineEstimate]
    dram_latency: DramLatency
    convergence: dict[str, list[float | None]]
    sm_requests: list[float]
    ops: list[AnalysisOp]
    decisions: DecisionsSection | None


class ReportDocument(TypedDict):
    """The whole JSON report (`tuiprof report --format json`, the UI's export)."""

    schema_version: int
    tuiprof: str
    partial: bool
    trace: TraceSection
    arch: ArchSection
    occupancy: OccupancySection
    run: RunSection
    analysis: AnalysisSection | None


# --------------------------------------------------------------------------- the JSON Schema

def _schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a type annotation; TypedDicts go into `defs` once, by name."""
    origin = get_origin(tp)
    if tp is type(None):
        return {"type": "null"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    if tp is Any:
        return {}
    if origin is Literal:
        return {"enum": list(get_args(tp))}
    if origin in (Union, types.UnionType):
        return {"anyOf": [_schema(a, defs) for a in get_args(tp)]}
    if origin is list:
        return {"type": "array", "items": _schema(get_args(tp)[0], defs)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _schema(get_args(tp)[1], defs)}
    if isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__"):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # placeholder: a recursive reference stops here
            hints = get_type_hints(tp)
            defs[name] = {"type": "object", "properties": {k: _schema(v, defs) for k, v in hints.items()},
                          "required": sorted(tp.__required_keys__), "additionalProperties": False}
            doc = (tp.__doc__ or "").strip()
            if doc and not doc.startswith(name + "("):
                defs[name]["description"] = " ".join(doc.split())
        return {"$ref": f"#/$defs/{name}"}
    raise TypeError(f"no JSON Schema for {tp!r}")


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of `ReportDocument`."""
    defs: dict[str, Any] = {}
    root = _schema(ReportDocument, defs)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://tuiprof.invalid/report.schema.v{SCHEMA_VERSION}.json",
            "title": "tuiprof JSON report", "description": f"schema_version {SCHEMA_VERSION}", **root,
            "$defs": dict(sorted(defs.items()))}


def schema_text() -> str:
    """The shipped file's text: `json_schema` as indented JSON."""
    return json.dumps(json_schema(), indent=1) + "\n"


if __name__ == "__main__":
    sys.stdout.write(schema_text())
