"""The report: one plain-data document describing a run, rendered as text, JSON or Markdown.

The document is a dict of JSON types so that JSON is a dump of it and the text and Markdown
views show exactly the same data. Its shape is `tuiprof.report_schema.ReportDocument` (TypedDicts,
and the JSON Schema shipped beside this module), versioned by its ``schema_version``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np

from tuiprof import __version__, units
from tuiprof.metrics import BY_KEY
from tuiprof.model.advice import insight
from tuiprof.model.analysis import HEADLINES, Analysis, OpStats
from tuiprof.model.decisions import Decisions, sm_list, summary
from tuiprof.model.latency import Estimate
from tuiprof.model.md import LOW_CONFIDENCE_RATIO
from tuiprof.model.pattern import AddressPattern
from tuiprof.model.shared import PassStats
from tuiprof.model.timing import DEPARTURE_RANGE, L2_BANDWIDTH_RANGE
from tuiprof.report_schema import (
    SCHEMA_VERSION,
    AnalysisOp,
    AnalysisSection,
    ConstSection,
    DecisionsSection,
    Histogram,
    MdSection,
    MdSimulated,
    MdTimingRow,
    ReportDocument,
    SharedSection,
    ThesisRow,
    TimeRow,
    TraceSection,
)
from tuiprof.report_schema import Estimate as EstimateDict
from tuiprof.session import RunConfig, Session
from tuiprof.toolchain.demangle import display_name
from tuiprof.trace.data import MAX_LABEL_CHARS, MAX_LINE_CHARS, Trace
from tuiprof.trace.text import clip, excerpt, one_line, printable, shown_path
from tuiprof.tui.format import cycles, pct

HIST_BINS = 20
UNCERTAINTY_NOTE = ("trials 95% = spread of trials, mean +- 1.96 std (where one run may fall);",
                    "CI 95% = confidence interval of the mean, mean +- t std/sqrt(n), Student's t for n-1 df (where the mean is);",
                    "both cover only the model's randomness, not the error of its assumptions")
"""What the two uncertainties of every estimate are (Baghsorkhi12 sec. 5.2), one line each."""


class _SourceLines:
    """Source lines by (file, line number), each split once and cut to MAX_LINE_CHARS: a report
    of thousands of ops on one enormous line allocates that line once, not once per op."""

    def __init__(self, trace: Trace) -> None:
        self._texts: dict[str, str] = {}
        for src in trace.sources:
            self._texts.setdefault(src.name, src.text)
        self._lines: dict[str, list[str]] = {}
        self._cut: dict[tuple[str, int], str] = {}

    def __call__(self, file: str, line: int) -> str:
        key = (file, line)
        if key not in self._cut:
            if file not in self._lines:
                self._lines[file] = self._texts[file].splitlines() if file in self._texts else []
            lines = self._lines[file]
            self._cut[key] = excerpt(lines[line - 1], MAX_LINE_CHARS) if 0 < line <= len(lines) else ""
        return self._cut[key]


def trace_section(trace: Trace, path: Path | None = None) -> TraceSection:
    """Launch, snapshot, provenance and static ops of a trace. Per-op strings are cut to the
    caps of `trace.data` (the whole strings are in the trace), so the report stays small."""
    L, P = trace.launch, trace.provenance
    counts = trace.accesses_per_op()  # of the counted CTAs, as every figure of the run
    counted = trace.counted_accesses()
    lanes = trace.active_lanes()[counted]
    lane_sum = [int(x) for x in np.bincount(trace.op[counted], weights=lanes, minlength=len(trace.ops))]
    source_line = _SourceLines(trace)
    return {
        "path": str(path) if path else None,
        "kernel": L.kernel,
        "launch": {"grid": list(L.grid), "block": list(L.block), "registers_per_thread": L.registers_per_thread,
                   "static_shared": L.static_shared, "dynamic_shared": L.dynamic_shared, "ctas_per_sm": L.ctas_per_sm},
        "snapshot": {"ctas": trace.snapshot.n_ctas, "first_cta": int(trace.snapshot.cta_ids[0]) if trace.snapshot.n_ctas else None,
                     "warm_ctas": trace.snapshot.warm,
                     "warps": trace.n_warps, "warp_accesses": trace.n_accesses, "rule": trace.snapshot.rule},
        "provenance": {"backend": P.backend, "arch": P.arch, "gpu": P.gpu, "tool_version": P.tool_version,
                       "date": P.date, "generator": P.generator, "measured": P.measured},
        "sources": [s.name for s in trace.sources],
        "ops": [{"id": o.id, "kind": o.kind, "space": o.space, "bytes": o.bytes, "file": clip(o.file, MAX_LABEL_CHARS), "line": o.line,
                 "label": clip(o.label, MAX_LABEL_CHARS), "source": source_line(o.file, o.line), "starts_sequence": o.starts_sequence,
                 "ptx": [{"line": line, "instruction": clip(text, MAX_LINE_CHARS)} for line, text in o.ptx],
                 "warp_accesses": int(counts[o.id]),
                 "mean_active_lanes": round(lane_sum[o.id] / counts[o.id], 2) if counts[o.id] else 0.0}
                for o in trace.ops],
    }


def run_section(session: Session) -> dict[str, Any]:  # the ArchSection, OccupancySection, RunSection keys
    """Arch, occupancy and run parameters of a session."""
    arch, occ, cfg = session.arch, session.occupancy, session.config
    return {
        "arch": {"name": arch.name, "description": arch.description, "sm_count": arch.sm_count,
                 "l1": {"size": arch.l1.size, "line": arch.l1.line, "sector": arch.l1.sector, "assoc": arch.l1.assoc,
                        "hit_latency": arch.l1.hit_latency, "store_policy": arch.l1.store_policy},
                 "l2": {"size": arch.l2.size, "line": arch.l2.line, "sector": arch.l2.sector, "assoc": arch.l2.assoc,
                        "hit_latency": arch.l2.hit_latency},
                 "shared_carveout": session.shared_carveout, "l2_write_policy": arch.l2.write_policy,
                 "address_hash": arch.address_hash, "dram_base_latency": arch.dram.base_latency,
                 "overrides": dict(cfg.overrides)},
        "occupancy": {"ctas_per_sm": occ.ctas_per_sm, "limiter": occ.limiter, "warps_per_sm": occ.warps_per_sm,
                      "fraction": round(occ.fraction(arch), 4)},
        "run": {"trials": cfg.trials, "seed": cfg.seed, "md": session.md, "tolerance": cfg.tolerance,
                "stopped": session.stop_reason, "sweep": cfg.sweep,
                "sweep_trials": session.sweep_trial_count() if cfg.sweep else 0},
    }


RATIO_DIGITS = 6
"""Decimals a ratio keeps in the document: enough that the text report, which renders from it,
writes the same figure as the UI, which renders the unrounded value (`tuiprof.tui.format.pct`
shows two significant digits down to 0.001%)."""


def _finite(x: float, digits: int = RATIO_DIGITS) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), digits)


def analysis_section(a: Analysis, patterns: dict[int, AddressPattern] | None = None,
                     line_bytes: int = 128) -> AnalysisSection:
    """The simulated results as plain data; with the ops' address `patterns`, each op's reason
    and advice (as the UI's drill-down gives them)."""
    def hist(values: np.ndarray) -> Histogram:
        v = values[~np.isnan(values)]
        if not v.size:
            return {"counts": [], "edges": []}
        counts, edges = np.histogram(v, bins=HIST_BINS, range=(max(0.0, v.min() - 0.005), min(1.0, v.max() + 0.005)))
        return {"counts": counts.tolist(), "edges": [round(float(e), 4) for e in edges]}

    shared: dict[tuple[int, int], EstimateDict] = {}

    def as_dict(e: Estimate, digits: int = RATIO_DIGITS) -> EstimateDict:
        """`e.to_dict`, once per Estimate object (ops the snapshot never reaches share theirs)."""
        key = (id(e), digits)
        if key not in shared:
            shared[key] = cast(EstimateDict, e.to_dict(digits))
        return EstimateDict(**shared[key])

    ranks = a.ranks()

    def why(s: OpStats) -> tuple[str, list[str]] | tuple[None, None]:
        if patterns is None or not s.warp_accesses:
            return None, None
        return insight(s, patterns.get(s.op.id), a, line_bytes)

    ops: list[AnalysisOp] = []
    for s in a.by_cost():
        reason, tips = why(s)
        ops.append({"id": s.op.id, "rank": ranks.get(s.op.id), "kind": s.op.kind, "line": s.op.line,
                    "label": clip(s.op.label, MAX_LABEL_CHARS), "warp_accesses": s.warp_accesses,
                    "requests_per_access": _finite(s.requests_per_access, 3),
                    "sectors_per_request": _finite(s.sectors_per_access, 3), "ideal_sectors": _finite(s.ideal_sectors, 1),
                    "sectors_per_l1_request": _finite(s.sectors_per_request, 3),
                    "h1": as_dict(s.h1), "h2": as_dict(s.h2), "x": as_dict(s.x, 3), "tm": as_dict(s.tm, 3),
                    "cost": _finite(s.cost, 1), "cost_share": _finite(s.cost_share),
                    "latency_shares": {"l1": _finite(s.l1_share), "l2": _finite(s.l2_share), "dram": _finite(s.dram_share)},
                    "shared": shared_section(s.passes) if s.passes is not None and s.passes.space == "shared" else None,
                    "constant": const_section(s.passes) if s.passes is not None and s.passes.space == "const" else None,
                    "reason": reason, "advice": tips})
    return {
        "trials": a.trials, "planned": a.planned, "md": a.md, "elapsed_s": round(a.elapsed, 3),
        "l1_requests_per_second": round(a.requests_per_second),
        "headline": {k: {**as_dict(e), "histogram": hist(a.samples[k])} for k, e in a.headline.items()},
        "dram_latency": {"tm": cast(EstimateDict, a.tm.to_dict(1)), "counts": a.dram_hist[0].tolist(),
                         "edges": [round(float(e), 1) for e in a.dram_hist[1]]},
        "convergence": {k: [_finite(x) for x in v] for k, v in a.convergence.items()},
        "sm_requests": [round(float(x), 1) for x in a.sm_requests],
        "ops": ops,
        "decisions": decisions_section(a.decisions) if a.decisions is not None else None,
    }


def shared_section(sh: PassStats) -> SharedSection:
    """A shared-memory op's bank conflicts as Nsight Compute counts them (`tuiprof.model.shared`)."""
    return {"wavefronts_per_request": _finite(sh.passes, 3), "ideal_wavefronts": _finite(sh.ideal, 3),
            "worst_wavefronts": sh.worst, "conflicted_share": _finite(sh.conflicted), "latency": _finite(sh.latency, 1),
            "wavefronts": round(sh.total, 1)}


def const_section(c: PassStats) -> ConstSection:
    """A constant op's constant-cache requests per warp access (distinct addresses: a broadcast is
    one; `tuiprof.model.constant`)."""
    return {"requests_per_access": _finite(c.passes, 3), "ideal_requests": _finite(c.ideal, 3),
            "worst_requests": c.worst, "serialised_share": _finite(c.conflicted), "latency": _finite(c.latency, 1),
            "requests": round(c.total, 1)}


def _row(r: Any) -> ThesisRow:
    return {"miss_rate": _finite(r.miss_rate), "dram_reads_per_cta": _finite(r.dram_reads_per_cta, 2),
            "dr_inc_rate": _finite(r.dr_inc_rate), "mf_latency": _finite(r.mf_latency, 1),
            "mf_latency_rate": _finite(r.mf_latency_rate), "pipeline_effect": _finite(r.pipeline_effect),
            "cta_exe_rate": _finite(r.cta_exe_rate), "cta_exe_ratio": _finite(r.cta_exe_ratio),
            "relative_performance": _finite(r.relative_performance)}


def _time_row(k: Any) -> TimeRow:
    """One KernelTime of the timing model as plain data."""
    w = k.mwp
    return {"time_s": _finite(k.time_s, 12), "bound": k.bound, "bound_label": k.bound_label, "mwp_s": _finite(k.mwp_s, 12),
            "dram_floor_s": _finite(k.dram_floor_s, 12), "l2_floor_s": _finite(k.l2_floor_s, 12),
            "issue_floor_s": _finite(k.issue_floor_s, 12),
            "mem_ld": _finite(w.mem_l_coal, 1),
            "load_bytes_per_warp": _finite(k.load_bytes_per_warp, 1), "bandwidth_level": k.bandwidth_level,
            "dram_bytes": _finite(k.dram_bytes, 0), "l2_bytes": _finite(k.l2_bytes, 0),
            "n": _finite(w.n, 2), "mwp": _finite(w.mwp, 3), "cwp": _finite(w.cwp, 3), "case": w.case}


def md_section(d: Decisions) -> MdSection | None:
    """The MD decision: the timing model per MD (headline), Yen14's thesis rules beside it, and
    the recommendation."""
    m = d.md
    if m is None:
        return None
    sims = {s.md: s for s in d.md_samples}

    def simulated(md: int) -> MdSimulated | None:
        s = sims.get(md)
        return None if s is None else {"miss_rate": _finite(s.miss_rate), "l2_read_hit_ratio": _finite(s.l2_hit_rate),
                                       "dram_reads_per_cta": _finite(s.dram_reads_per_cta, 2),
                                       "mf_latency": _finite(s.mf_latency, 1), "trials": s.trials}

    def timing(md: int) -> MdTimingRow | None:
        if m.timing is None:
            return None
        return {**_time_row(m.timing.time(md)), "relative_performance": _finite(m.timing.relative_performance(md))}

    return {
        "default_md": m.default_md, "limiter": m.limiter, "headline": m.headline,
        "recommended_md": m.recommended_md, "gain": _finite(m.gain),
        "gain_range": [_finite(x) for x in m.gain_range] if m.gain_range else None,
        "low_confidence": m.low_confidence, "thesis_md": m.thesis_md,
        "thesis_gain": _finite(m.thesis_gain), "dynamic_shared": m.dynamic_shared, "apply": m.apply,
        "advice": m.advice, "compute_bound": m.thesis.compute_bound,
        "dram_per_inst": _finite(m.thesis.dram_per_inst, 5),
        "sweep_trials": d.sweep_trials, "sweep_elapsed_s": round(d.sweep_elapsed, 3),
        "rows": [{"md": r.md, "simulated": simulated(r.md), "timing": timing(r.md), "thesis": _row(r)}
                 for r in m.thesis.rows],
    }


def decisions_section(d: Decisions) -> DecisionsSection:
    """The decision models (Zhang11, Yen14, Farooqui11, HongKim09 and the timing model) as plain data."""
    w, b, u = d.mwp, d.bottleneck, d.sm
    return {
        "advice": summary(d),
        "md": md_section(d), "md_note": d.md_note or None,
        "timing": _time_row(d.time),
        "mwp_cwp": {"n": _finite(w.n, 2), "mwp": _finite(w.mwp, 3), "mwp_limiter": w.mwp_limiter,
                    "cwp": _finite(w.cwp, 3), "case": w.case, "mem_l": _finite(w.mem_l, 1),
                    "departure_delay": _finite(w.departure_delay, 2), "bw_per_warp": _finite(w.bw_per_warp, 3),
                    "mem_cycles": _finite(w.mem_cycles, 1), "comp_cycles": _finite(w.comp_cycles, 1),
                    "rep": _finite(w.rep, 3), "exec_cycles_app": _finite(w.exec_cycles_app, 0),
                    "cpi": _finite(w.cpi, 3), "insts_source": w.insts_source},
        "bottleneck": {"times_s": {k: _finite(v, 12) for k, v in b.times.items()}, "bottleneck": b.bottleneck,
                       "time_s": _finite(b.time, 12), "next_bottleneck": b.next_bottleneck,
                       "time_without_bottleneck_s": _finite(b.time_without_bottleneck, 12),
                       "speedup_if_removed": _finite(b.speedup_if_removed, 3), "serialized": b.serialized,
                       "throughputs": {"instruction_gips": _finite(b.throughputs.instruction_gips, 3),
                                       "shared_gbs": _finite(b.throughputs.shared_gbs, 3),
                                       "global_gbs": _finite(b.throughputs.global_gbs, 3),
                                       "source": b.throughputs.source}},
        "sm_utilisation": {"source": u.source, "unit": u.unit, "imbalance": _finite(u.imbalance, 3),
                           "utilisation": _finite(u.utilisation), "idle_sms": list(u.idle_sms),
                           "busy_fraction": [_finite(x) for x in u.busy_fraction],
                           "ctas": [int(x) for x in u.ctas], "caveat": u.caveat},
    }


def document(session: Session, analysis: Analysis | None, *, partial: bool = False) -> ReportDocument:
    """The report of `session` with `analysis` (its final or current one) as plain data;
    `partial`: written while the run goes on (the UI's export), so said in the report."""
    section = None
    if analysis is not None:
        section = analysis_section(analysis, session.patterns(), session.arch.l1.line)
    run = run_section(session)
    return {"schema_version": SCHEMA_VERSION, "tuiprof": __version__, "partial": partial,
            "trace": trace_section(session.trace, session.path), "arch": run["arch"], "occupancy": run["occupancy"],
            "run": run["run"], "analysis": section}


def build_report(target: str | Path, config: RunConfig, on_event: Any = None) -> ReportDocument:
    """Open `target` (a trace, a demo name or a .cu source), simulate it under `config`, and
    describe the run; a note on standard error says when the simulator compiles first (a pause of
    half a minute without a word otherwise)."""
    from tuiprof.output import note
    from tuiprof.progress import SlowPhases
    from tuiprof.session import SweepProgress, TrialDone

    slow = SlowPhases.on_stderr()
    try:
        slow.set("opening the target")
        session = Session.open(target, config, progress=slow.phase)
        sweep = [session.arch_at(m) for m in session.sweep_mds()] if config.sweep else []
        compiles = any(session.compiles(arch) for arch in {session.arch, *sweep})
        if compiles:
            note("note: compiling the simulator for this GPU's cache geometry first (once: later runs load it from the "
                 "cache; about half a minute)...")
        slow.set("compiling the simulator, then the trials" if compiles else "simulating", f"0/{config.trials} trials")

        def listen(ev: Any) -> None:
            if isinstance(ev, TrialDone):
                slow.set("simulating", f"{ev.done}/{ev.planned} trials")
            elif isinstance(ev, SweepProgress):
                slow.set("MD sweep (one simulation per MD)", f"{ev.sweep_done}/{ev.sweep_planned} trials, MD {ev.md}")
            if on_event is not None:
                on_event(ev)

        analysis = session.run(listen)
        slow.set("writing the report")
        return document(session, analysis)
    finally:
        slow.close()


def render(report: ReportDocument, fmt: str) -> str:
    """The document as JSON (control characters escaped by JSON itself), Markdown or text.

    Every string from the trace is shown through `printable` field by field (a newline in a label
    is escaped, never a new line), and the whole text once more, so that nothing from a trace
    reaches a terminal as a control sequence."""
    doc = cast("dict[str, Any]", report)  # the views below read it as plain JSON data
    if fmt == "json":
        return json.dumps(doc, indent=2)
    return printable(_render_md(doc) if fmt == "md" else _render_text(doc), keep="\n")


_WIDE = 2 * MAX_LINE_CHARS
"""Characters of a one-off string in the summary (kernel name, snapshot rule, arch description)."""


def _cell(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """A string from the trace (or a TOML file) as one line of text: tabs as spaces, control
    characters escaped, at most `limit` characters."""
    return one_line(text, limit)


def _table(rows: list[list[str]], md: bool) -> list[str]:
    if md:
        out = ["| " + " | ".join(rows[0]) + " |", "|" + "|".join("---" for _ in rows[0]) + "|"]
        return out + ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows[1:]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def _caches_line(a: dict[str, Any]) -> str:
    """The simulated L1 (and the carve-out that sized it), the L2's store policy, the hash."""
    l1, l2, carve = a["l1"]["size"], a["l2"]["size"], a["shared_carveout"]
    out = f"L1 {units.size(l1) if l1 else 'none'}"
    if carve is not None:
        out += f" (beside a {units.size(carve) if carve else '0 KiB'} shared-memory carve-out)"
    out += f", L2 {units.size(l2) + ' ' + _cell(a['l2_write_policy']) if l2 else 'none'}"
    return out + f", {_cell(a['address_hash'])} slice/channel mapping"


def _summary_lines(doc: dict[str, Any]) -> list[tuple[str, str]]:
    t, a, o, r = doc["trace"], doc["arch"], doc["occupancy"], doc["run"]
    L, S, P = t["launch"], t["snapshot"], t["provenance"]
    over = ", ".join(f"{_cell(k)}={_cell(str(v))}" for k, v in a["overrides"].items())
    path = shown_path(t["path"]) if t["path"] else "-"
    return [
        ("kernel", f"{_cell(display_name(t['kernel']), _WIDE)}  grid {tuple(L['grid'])}  block {tuple(L['block'])}  {L['registers_per_thread']} regs/thread"),
        ("trace", f"{path}  ({_cell(P['backend'])}, made for {_cell(P['arch'])}{', ' + _cell(P['gpu']) if P['gpu'] else ''})"),
        ("snapshot", f"{S['ctas']} CTAs from CTA {S['first_cta']}"
                     + (f" (the first {S['warm_ctas']} warm the caches, not counted)" if S.get("warm_ctas") else "")
                     + f", {S['warps']} warps, {S['warp_accesses']} warp accesses"),
        ("rule", _cell(S["rule"], _WIDE) or "-"),
        ("arch", f"{_cell(a['name'])}: {_cell(a['description'], _WIDE)}" + (f"  [what-if: {over}]" if over else "")),
        ("caches", _caches_line(a)),
        ("occupancy", f"{o['ctas_per_sm']} CTAs/SM ({o['warps_per_sm']} warps, {o['fraction']:.0%}), limited by {o['limiter']}"),
        ("run", f"{r['trials']} trials, seed {r['seed']}, MD {r['md']}"
                + (f", early stop at +-{100 * r['tolerance']:.2g} points" if r["tolerance"] else "")),
    ]


def _op_rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = [["op", "kind", "space", "B/lane", "line", "label", "accesses", "lanes", "seq", "source"]]
    for op in doc["trace"]["ops"]:
        rows.append([str(op["id"]), _cell(op["kind"]), _cell(op["space"]), str(op["bytes"]), f"{_cell(op['file'])}:{op['line']}",
                     _cell(op["label"]), str(op["warp_accesses"]), f"{op['mean_active_lanes']:.1f}",
                     "new" if op["starts_sequence"] else "", _cell(op["source"])])
    return rows


def _partial(doc: dict[str, Any]) -> list[str]:
    """The banner of a report written while its run went on (the UI's export)."""
    if not doc.get("partial"):
        return []
    a = doc["analysis"]
    done = f"{a['trials']}/{a['planned']} trials" if a else "no trial"
    md = a and a["decisions"] and a["decisions"]["md"] is not None
    return [f"PARTIAL REPORT: written while the run was in progress ({done}"
            + ("" if md else ", MD sweep not finished") + "); the figures will still change"]


def _render_text(doc: dict[str, Any]) -> str:
    lines = _partial(doc) + [f"tuiprof {doc['tuiprof']}"]
    lines += [f"  {k:<10} {v}" for k, v in _summary_lines(doc)]
    lines += ["", "static memory ops (dynamic warp accesses in the snapshot):"]
    lines += ["  " + x for x in _table(_op_rows(doc), md=False)]
    a = doc["analysis"]
    if a is None:
        lines += ["", "analysis: no trial finished"]
        return "\n".join(lines) + "\n"
    lines += ["", f"kernel-wide hit ratios over {a['trials']} trials (Baghsorkhi12 sec. 5.2):", *(f"  {x}" for x in UNCERTAINTY_NOTE)]
    for key, h in a["headline"].items():
        m = _measured(doc, key, h)
        lines.append(f"  {HEADLINES[key]:<20} {_est(h, pct=True)}" + (f"  measured (ncu) {m}" if m else ""))
        lines += ["    " + x for x in _bars(h["histogram"], pct=True)]
    tm = a["dram_latency"]
    lines += ["", f"DRAM batch latency Tm (cycles, Baghsorkhi12 sec. 3.2.3): {_est(tm['tm'], pct=False)}"]
    lines += ["    " + x for x in _bars({"counts": tm["counts"], "edges": tm["edges"]}, pct=False)]
    lines += ["", "static ops by cost (warp accesses x expected latency X; X = H1 t1 + (1-H1)(H2 t2 + (1-H2) Tm), Baghsorkhi12 sec. 6.1;",
              f"  {COST_NOTE}):"]
    for kind, rows in _cost_tables(doc):
        lines += [f"  {kind}:"] + ["    " + x for x in _table(rows, md=False)]
    lines += ["", "advice for the hottest ops:"] + [f"  {x}" for x in _op_advice(doc)]
    lines += _decision_lines(a["decisions"], md=False)
    lines += ["", f"run: {a['trials']}/{a['planned']} trials{_stopped(doc['run'])}, simulated in {a['elapsed_s']:.2f} s "
              "(wall time from the simulation's start, its preparation and the simulator's compile included when it "
              f"ran); median trial {_rate(a['l1_requests_per_second'])} L1 requests/s per worker"]
    return "\n".join(lines) + "\n"


def _render_md(doc: dict[str, Any]) -> str:
    lines = [f"# tuiprof report: `{_cell(display_name(doc['trace']['kernel']), _WIDE).replace('`', chr(39))}`", ""]
    lines += [f"**{x}**" for x in _partial(doc)] + ([""] if doc.get("partial") else [])
    lines += [f"- **{k}**: {v}" for k, v in _summary_lines(doc)]
    lines += ["", "## Static memory ops", ""] + _table(_op_rows(doc), md=True)
    a = doc["analysis"]
    if a is not None:
        lines += ["", f"## Kernel-wide hit ratios ({a['trials']} trials)", "", "Trials 95% " + " ".join(UNCERTAINTY_NOTE)[len("trials 95% "):] + ".", "",
                  "| metric | mean | std | trials 95% | CI 95% | measured (ncu) |", "|---|---|---|---|---|---|"]
        for key, h in a["headline"].items():
            lines.append(f"| {HEADLINES[key]} | {_pct(h['mean'])} | {_pct(h['std'])} | "
                         f"{_pct(h['spread_lo'])} - {_pct(h['spread_hi'])} | {_pct(h['ci_lo'])} - {_pct(h['ci_hi'])} |"
                         f" {_measured(doc, key, h) or '-'} |")
        lines += ["", f"DRAM batch latency Tm: {_est(a['dram_latency']['tm'], pct=False)} cycles", "",
                  "## Static ops by cost", "", COST_NOTE[0].upper() + COST_NOTE[1:] + "."]
        for kind, rows in _cost_tables(doc):
            lines += ["", f"### {kind.capitalize()}", ""] + _table(rows, md=True)
        lines += ["", "## Advice for the hottest ops", ""] + [f"- {x}" for x in _op_advice(doc)]
        lines += _decision_lines(a["decisions"], md=True)
        lines += ["", f"{a['trials']}/{a['planned']} trials{_stopped(doc['run'])} in {a['elapsed_s']:.2f} s."]
    return "\n".join(lines) + "\n"


def _stopped(run: dict[str, Any]) -> str:
    if run["stopped"] == "converged":
        return (f" (converged: every headline ratio's 95% confidence interval within +-{100 * run['tolerance']:.2g} "
                "points)")
    return " (cancelled)" if run["stopped"] == "cancelled" else ""


def _pct(x: float | None) -> str:
    """A ratio as every view writes it (`tuiprof.tui.format.pct`), "-" when undefined."""
    return pct(x, missing="-")


def _num(x: float | None) -> str:
    """Cycles as every view writes them (`tuiprof.tui.format.cycles`), "-" when undefined."""
    return cycles(x, missing="-")


def _measured(doc: dict[str, Any], key: str, h: dict[str, Any]) -> str:
    """The value of headline `key` that `tuiprof validate` stored in the trace (ncu on the plain
    kernel) and the prediction `h`'s distance from it; "" when the trace carries none."""
    value = (doc["trace"]["provenance"].get("measured") or {}).get(key)
    if value is None or h["mean"] is None:
        return ""
    return f"{_pct(value)}, {BY_KEY[key].format_error(abs(h['mean'] - value))} off"


def _est(e: dict[str, Any], pct: bool) -> str:
    f = _pct if pct else _num
    if e["mean"] is None:
        return "n/a (no accesses)"
    return (f"{f(e['mean'])}  std {f(e['std'])}  trials 95% [{f(e['spread_lo'])}, {f(e['spread_hi'])}]  "
            f"CI 95% [{f(e['ci_lo'])}, {f(e['ci_hi'])}]")


def _bars(h: dict[str, list[float]], pct: bool, width: int = 40) -> list[str]:
    counts, edges = h["counts"], h["edges"]
    if not counts:
        return []
    top = max(counts) or 1
    f: Callable[[float], str] = (lambda x: f"{100 * x:6.1f}%") if pct else (lambda x: f"{x:7.0f}")
    single = sum(1 for c in counts if c) == 1  # every trial in one bin: that bin alone says it
    return [f"{f(edges[i])} - {f(edges[i + 1])} | {'#' * round(width * c / top):<{width}} {c}"
            for i, c in enumerate(counts) if c or (0 < i < len(counts) - 1 and not single)]


COST_NOTE = ("rank #1, #2, ... = loads by cost, w1, w2, ... = stores and atomics (writes, ranked apart: their latency is mostly "
             "hidden from the warp); sect/req = sectors per request as Nsight Compute counts them, per warp "
             "instruction (4 ideal for 32 lanes of 4 B, 32 worst)")
HOT_ADVICE = 3
"""Loads (and stores) whose advice the text report prints."""


def _cost_tables(doc: dict[str, Any]) -> list[tuple[str, list[list[str]]]]:
    """The ops by cost as two tables, loads and then stores and atomics (those with any)."""
    src = {o["id"]: o for o in doc["trace"]["ops"]}
    l1, l2 = doc["arch"]["l1"]["size"], doc["arch"]["l2"]["size"]  # no figures for an absent level
    head = ["rank", "op", "line", "label", "accesses", "sect/req", "ideal", "H1", "H2", "X cyc [trials 95%] +-CI",
            "share", "why", "source"]
    tables = []
    for kind, loads in (("loads", True), ("stores and atomics", False)):
        rows = [head]
        for o in doc["analysis"]["ops"]:
            if (o["kind"] == "load") != loads or o["shared"] is not None or o["constant"] is not None:
                continue
            x = o["x"]
            rows.append([o["rank"] or "-", str(o["id"]), str(o["line"]), _cell(o["label"]), str(o["warp_accesses"]),
                         _ratio(o["sectors_per_request"], 1), _ratio(o["ideal_sectors"], 0),
                         _pct(o["h1"]["mean"]) if l1 else "-", _pct(o["h2"]["mean"]) if l2 else "-",
                         "-" if x["mean"] is None else f"{_num(x['mean'])} [{_num(x['spread_lo'])}, "
                         f"{_num(x['spread_hi'])}] +-{_num((x['ci_hi'] - x['ci_lo']) / 2)}",
                         _pct(o["cost_share"]), o["reason"] or "-", _cell(src[o["id"]]["source"])])
        if len(rows) > 1:
            tables.append((kind, rows))
    for key, count, per_head, conflicted, title in (
            ("shared", "requests", "wavefronts/req", "conflicted", "shared memory: bank conflicts (wavefronts per request, as Nsight "
             "Compute counts them)"),
            ("constant", "accesses", "requests/acc", "serialised", "constant memory: constant-cache requests per warp access (one per "
             "distinct address: 1 is a broadcast)")):
        rows = [["rank", "op", "kind", "line", "label", count, per_head, "ideal", "worst", conflicted,
                 "X cyc", "share", "why", "source"]]
        for o in doc["analysis"]["ops"]:
            p = o[key]
            if p is None:
                continue
            per, ideal, worst, share = (("wavefronts_per_request", "ideal_wavefronts", "worst_wavefronts", "conflicted_share")
                                        if key == "shared" else
                                        ("requests_per_access", "ideal_requests", "worst_requests", "serialised_share"))
            rows.append([o["rank"] or "-", str(o["id"]), o["kind"], str(o["line"]), _cell(o["label"]),
                         str(o["warp_accesses"]), _ratio(p[per], 2), _ratio(p[ideal], 0), str(p[worst]), _pct(p[share]),
                         _num(p["latency"]), _pct(o["cost_share"]), o["reason"] or "-", _cell(src[o["id"]]["source"])])
        if len(rows) > 1:
            tables.append((title, rows))
    return tables


def _op_advice(doc: dict[str, Any]) -> list[str]:
    """The advice of the hottest loads and stores (rank #1..#3, w1..w3), as the drill-down gives it."""
    out = []
    for o in doc["analysis"]["ops"]:
        rank = o["rank"]
        if not rank or int(rank[1:]) > HOT_ADVICE or not o["advice"]:
            continue
        why = f" ({o['reason']})" if o["reason"] else ""
        out.append(f"{rank} op {o['id']} line {o['line']} {_cell(o['label'])}{why}:")
        out += [f"  - {one_line(t)}" for t in o["advice"]]  # whole: a sentence is never cut
    return out or ["(no ranked op)"]


def _rate(per_s: float) -> str:
    """A rate with the unit prefix that keeps two significant digits (4.4M, 850k, 12)."""
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if per_s >= scale:
            return f"{per_s / scale:.2g}{unit}" if per_s < 10 * scale else f"{per_s / scale:.0f}{unit}"
    return f"{per_s:.2g}"


def _ratio(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _us(x: float | None) -> str:
    return "-" if x is None else f"{1e6 * x:.1f}"


def _short_bound(k: dict[str, Any]) -> str:
    """'DRAM', 'L2', or MWP/CWP's limiter ('mwp:latency', 'mwp:bandwidth', 'mwp:warps')."""
    if not k:
        return "-"
    if k["bound"] == "MWP/CWP":
        return "mwp:" + k["bound_label"].rsplit(" ", 1)[-1]
    return k["bound"].split(" ")[0]


def _md_rows(m: dict[str, Any]) -> list[list[str]]:
    rows = [["MD", "sim L1 miss", "sim L2 hit", "sim DRAM/CTA", "Mem_LD", "MWP", "bound", "T us", "perf", "thesis L1 miss",
             "thesis DRAM/CTA", "thesis perf", ""]]
    for r in m["rows"]:
        s, k, t = r["simulated"] or {}, r["timing"] or {}, r["thesis"]
        mark = []
        if r["md"] == m["default_md"]:
            mark.append("default")
        if r["md"] == m["recommended_md"]:
            mark.append("recommended")
        if r["md"] == m["thesis_md"] and m["thesis_md"] != m["recommended_md"]:
            mark.append("thesis pick")
        rows.append([str(r["md"]), _pct(s.get("miss_rate")), _pct(s.get("l2_read_hit_ratio")),
                     _ratio(s.get("dram_reads_per_cta"), 1),
                     _num(k.get("mem_ld")), _ratio(k.get("mwp"), 1), _short_bound(k),
                     _us(k.get("time_s")), _ratio(k.get("relative_performance")), _pct(t["miss_rate"]),
                     _ratio(t["dram_reads_per_cta"], 1), _ratio(t["relative_performance"]), ", ".join(mark)])
    return rows


def _sm_bars(u: dict[str, Any], width: int = 30) -> list[str]:
    """One bar per SM (Farooqui11 Fig. 6); a compact strip of block glyphs when there are many."""
    frac = [f or 0.0 for f in u["busy_fraction"]]
    if len(frac) <= 32:
        return [f"SM{i:<3} {'#' * round(width * f):<{width}} {f:4.0%}  {c} CTAs"
                for i, (f, c) in enumerate(zip(frac, u["ctas"]))]
    glyphs = " .:-=+*#%@"
    out = []
    for lo in range(0, len(frac), 64):
        strip = "".join(glyphs[min(len(glyphs) - 1, round(f * (len(glyphs) - 1)))] for f in frac[lo:lo + 64])
        out.append(f"SM {f'{lo}-{min(lo + 63, len(frac) - 1)}':<7} |{strip}|")
    return out + [f"(busy fraction per SM, '{glyphs[1]}' low to '{glyphs[-1]}' full)"]


def _decision_lines(d: dict[str, Any] | None, md: bool) -> list[str]:
    """The decision sections (Zhang11, Yen14, Farooqui11, HongKim09 and the timing model), as text or Markdown."""
    if d is None:
        return []
    head: Callable[[str], list[str]] = (lambda t: ["", f"## {t}", ""]) if md else (lambda t: ["", f"{t}:"])
    ind = "" if md else "  "
    out = head("Advice") + [f"{ind}- {a}" for a in d["advice"]]
    m = d["md"]
    out += head("MD decision (CTAs per SM: timing model, Yen14's thesis rules beside it)")
    if m is None:
        out.append(f"{ind}{d['md_note'] or 'the MD sweep has not run'}")
    else:
        rng = f" [{_pct(m['gain_range'][0])}..{_pct(m['gain_range'][1])}]" if m["gain_range"] else ""
        out += [f"{ind}default {m['default_md']} CTAs/SM (limited by {m['limiter']}); recommended "
                f"{m['recommended_md']} ({m['headline']}): gain {_pct(m['gain'])}{rng}; thesis rules pick "
                f"{m['thesis_md']} ({_pct(m['thesis_gain'])})"]
        if m["gain_range"]:
            out.append(f"{ind}the range spans the sweep's trials (bootstrap) and the uncertain departure delays "
                       f"(x{DEPARTURE_RANGE[0]:g}..x{DEPARTURE_RANGE[1]:g}) and L2 bandwidth "
                       f"(x{L2_BANDWIDTH_RANGE[0]:g}..x{L2_BANDWIDTH_RANGE[1]:g})")
        if m["low_confidence"]:
            out.append(f"{ind}LOW CONFIDENCE: the timing model and the thesis rules predict speedups more than "
                       f"{LOW_CONFIDENCE_RATIO:g}x apart")
        out += [f"{ind}sweep: up to {m['sweep_trials']} trials per MD in {m['sweep_elapsed_s']:.2f} s; T = timing "
                "model (MWP/CWP on each MD's simulated Mem_LD and bytes, floored by DRAM and L2 bandwidth); perf = "
                "throughput relative to MD 1; sim DRAM/CTA = DRAM read transactions (32 B) per snapshot CTA, the L2's "
                "read misses, so it moves with sim L2 hit; thesis columns predict MD > 1 from MD 1 alone with Yen14's "
                "rules, which assume no L2 (its GTX480 has it disabled) and scale DRAM reads with the L1 miss rate", ""]
        out += [ind + x for x in _table(_md_rows(m), md=md)]
    k, w = d["timing"], d["mwp_cwp"]
    out += head("Kernel time (timing model: MWP/CWP on the simulated latency and bytes, floored by bandwidth and issue)")
    out += [f"{ind}T {_us(k['time_s'])} us, bound by {k['bound_label']}: MWP/CWP {_us(k['mwp_s'])} us, DRAM floor "
            f"{_us(k['dram_floor_s'])} us ({units.size(k['dram_bytes'])}), L2 floor {_us(k['l2_floor_s'])} us "
            f"({units.size(k['l2_bytes'])}), issue floor {_us(k['issue_floor_s'])} us",
            f"{ind}MWP/CWP (HongKim09): case {w['case']}; N {_ratio(w['n'], 1)} warps/SM, MWP "
            f"{_ratio(w['mwp'])} (limited by {w['mwp_limiter']}), CWP {_ratio(w['cwp'])}; Mem_LD {_num(k['mem_ld'])} "
            f"cycles (simulated X), Load_bytes_per_warp {_num(k['load_bytes_per_warp'])} B moved at {k['bandwidth_level']}",
            f"{ind}Mem_L {_num(w['mem_l'])} cycles, departure delay {_ratio(w['departure_delay'])}, Mem_cycles "
            f"{_num(w['mem_cycles'])}, Comp_cycles {_num(w['comp_cycles'])} per warp; Exec_cycles_app "
            f"{_num(w['exec_cycles_app'])}, CPI {_ratio(w['cpi'])} (instructions {w['insts_source']})"]
    b = d["bottleneck"]
    out += head("Bottleneck (Zhang11)")
    t = b["throughputs"]
    out += [f"{ind}{k}: {1e6 * v:.2f} us" + ("  <- bottleneck" if k == b["bottleneck"] else "")
            for k, v in b["times_s"].items() if v is not None]
    out += [f"{ind}if {b['bottleneck']} took no time: {b['next_bottleneck']} would bound the kernel, "
            f"{_ratio(b['speedup_if_removed'])}x less time (the most that improving {b['bottleneck']} alone can gain)",
            f"{ind}throughputs: {t['instruction_gips']} Ginst/s, shared {t['shared_gbs']} GB/s, global "
            f"{t['global_gbs']} GB/s ({t['source']})"]
    u = d["sm_utilisation"]
    out += head(f"SM utilisation ({u['source']}, Farooqui11 Fig. 6)")
    out += [f"{ind}mean busy {_pct(u['utilisation'])}, imbalance (max/mean busy) {_ratio(u['imbalance'])}, "
            f"idle SMs: {sm_list(tuple(u['idle_sms'])) if u['idle_sms'] else 'none'}"]
    if u.get("caveat"):
        out.append(f"{ind}note: {u['caveat']}")
    bars = _sm_bars(u)
    out += (["```"] + bars + ["```"]) if md else [ind + x for x in bars]
    return out
