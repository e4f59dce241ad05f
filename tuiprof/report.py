"""The report: one plain-data document describing a run, rendered as text, JSON or Markdown.

The document is a dict of JSON types so that JSON is a dump of it and the text and Markdown
views show exactly the same data.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tuiprof import __version__
from tuiprof.model.analysis import Analysis
from tuiprof.session import RunConfig, Session
from tuiprof.trace.model import Trace

HIST_BINS = 20
HEADLINE_NAMES = {"l1_read": "L1 read hit ratio", "l2_read": "L2 read hit ratio", "l2_write": "L2 write hit ratio"}


def _source_line(trace: Trace, file: str, line: int) -> str:
    for src in trace.sources:
        if src.name == file:
            lines = src.text.splitlines()
            return lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return ""


def trace_section(trace: Trace, path: Path | None = None) -> dict[str, Any]:
    """Launch, snapshot, provenance and static ops of a trace."""
    L, P = trace.launch, trace.provenance
    counts = trace.accesses_per_op()
    lanes = trace.active_lanes()
    lane_sum = [int(x) for x in np.bincount(trace.op, weights=lanes, minlength=len(trace.ops))]
    return {
        "path": str(path) if path else None,
        "kernel": L.kernel,
        "launch": {"grid": list(L.grid), "block": list(L.block), "registers_per_thread": L.registers_per_thread,
                   "static_shared": L.static_shared, "dynamic_shared": L.dynamic_shared, "ctas_per_sm": L.ctas_per_sm},
        "snapshot": {"ctas": trace.snapshot.n_ctas, "first_cta": int(trace.snapshot.cta_ids[0]) if trace.snapshot.n_ctas else None,
                     "warps": trace.n_warps, "warp_accesses": trace.n_accesses, "rule": trace.snapshot.rule},
        "provenance": {"backend": P.backend, "arch": P.arch, "gpu": P.gpu, "tool_version": P.tool_version,
                       "date": P.date, "generator": P.generator, "measured": P.measured},
        "sources": [s.name for s in trace.sources],
        "ops": [{"id": o.id, "kind": o.kind, "space": o.space, "bytes": o.bytes, "file": o.file, "line": o.line,
                 "label": o.label, "source": _source_line(trace, o.file, o.line), "starts_sequence": o.starts_sequence,
                 "warp_accesses": int(counts[o.id]),
                 "mean_active_lanes": round(lane_sum[o.id] / counts[o.id], 2) if counts[o.id] else 0.0}
                for o in trace.ops],
    }


def run_section(session: Session) -> dict[str, Any]:
    """Arch, occupancy and run parameters of a session."""
    arch, occ, cfg = session.arch, session.occupancy, session.config
    return {
        "arch": {"name": arch.name, "description": arch.description, "sm_count": arch.sm_count,
                 "l1": {"size": arch.l1.size, "line": arch.l1.line, "sector": arch.l1.sector, "assoc": arch.l1.assoc,
                        "hit_latency": arch.l1.hit_latency, "store_policy": arch.l1.store_policy},
                 "l2": {"size": arch.l2.size, "line": arch.l2.line, "sector": arch.l2.sector, "assoc": arch.l2.assoc,
                        "hit_latency": arch.l2.hit_latency},
                 "dram_base_latency": arch.dram.base_latency, "overrides": dict(cfg.overrides)},
        "occupancy": {"ctas_per_sm": occ.ctas_per_sm, "limiter": occ.limiter, "warps_per_sm": occ.warps_per_sm,
                      "fraction": round(occ.fraction(arch), 4)},
        "run": {"trials": cfg.trials, "seed": cfg.seed, "md": session.md},
    }


def _finite(x: float, digits: int = 4) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), digits)


def analysis_section(a: Analysis) -> dict[str, Any]:
    """The simulated results as plain data."""
    def hist(values: np.ndarray) -> dict[str, list[float]]:
        v = values[~np.isnan(values)]
        if not v.size:
            return {"counts": [], "edges": []}
        counts, edges = np.histogram(v, bins=HIST_BINS, range=(max(0.0, v.min() - 0.005), min(1.0, v.max() + 0.005)))
        return {"counts": counts.tolist(), "edges": [round(float(e), 4) for e in edges]}

    return {
        "trials": a.trials, "planned": a.planned, "md": a.md, "elapsed_s": round(a.elapsed, 3),
        "l1_requests_per_second": round(a.requests_per_second),
        "headline": {k: {**e.to_dict(), "histogram": hist(a.samples[k])} for k, e in a.headline.items()},
        "dram_latency": {"tm": a.tm.to_dict(1), "counts": a.dram_hist[0].tolist(),
                         "edges": [round(float(e), 1) for e in a.dram_hist[1]]},
        "convergence": {k: [_finite(x) for x in v] for k, v in a.convergence.items()},
        "sm_requests": [round(float(x), 1) for x in a.sm_requests],
        "ops": [{"id": s.op.id, "kind": s.op.kind, "line": s.op.line, "label": s.op.label,
                 "warp_accesses": s.warp_accesses, "requests_per_access": _finite(s.requests_per_access, 3),
                 "sectors_per_request": _finite(s.sectors_per_request, 3),
                 "h1": s.h1.to_dict(), "h2": s.h2.to_dict(), "x": s.x.to_dict(1), "tm": s.tm.to_dict(1),
                 "cost": _finite(s.cost, 1), "cost_share": _finite(s.cost_share),
                 "latency_shares": {"l1": _finite(s.l1_share), "l2": _finite(s.l2_share), "dram": _finite(s.dram_share)}}
                for s in a.by_cost()],
    }


def build_report(path: Path, config: RunConfig, on_event: Any = None) -> dict[str, Any]:
    """Load the trace at `path`, simulate it under `config`, and describe the run."""
    from tuiprof.trace.io import load_trace

    trace = load_trace(path)
    session = Session(trace, config, path)
    analysis = session.run(on_event)
    return {"tuiprof": __version__, "trace": trace_section(trace, path), **run_section(session),
            "analysis": analysis_section(analysis) if analysis is not None else None}


def render(doc: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(doc, indent=2)
    return _render_md(doc) if fmt == "md" else _render_text(doc)


def _table(rows: list[list[str]], md: bool) -> list[str]:
    if md:
        out = ["| " + " | ".join(rows[0]) + " |", "|" + "|".join("---" for _ in rows[0]) + "|"]
        return out + ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows[1:]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def _summary_lines(doc: dict[str, Any]) -> list[tuple[str, str]]:
    t, a, o, r = doc["trace"], doc["arch"], doc["occupancy"], doc["run"]
    L, S, P = t["launch"], t["snapshot"], t["provenance"]
    over = ", ".join(f"{k}={v}" for k, v in a["overrides"].items())
    return [
        ("kernel", f"{t['kernel']}  grid {tuple(L['grid'])}  block {tuple(L['block'])}  {L['registers_per_thread']} regs/thread"),
        ("trace", f"{t['path']}  ({P['backend']}, made for {P['arch']}{', ' + P['gpu'] if P['gpu'] else ''})"),
        ("snapshot", f"{S['ctas']} CTAs from CTA {S['first_cta']}, {S['warps']} warps, {S['warp_accesses']} warp accesses"),
        ("rule", S["rule"] or "-"),
        ("arch", f"{a['name']}: {a['description']}" + (f"  [what-if: {over}]" if over else "")),
        ("occupancy", f"{o['ctas_per_sm']} CTAs/SM ({o['warps_per_sm']} warps, {o['fraction']:.0%}), limited by {o['limiter']}"),
        ("run", f"{r['trials']} trials, seed {r['seed']}, MD {r['md']}"),
    ]


def _op_rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = [["op", "kind", "space", "B/lane", "line", "label", "accesses", "lanes", "seq", "source"]]
    for op in doc["trace"]["ops"]:
        rows.append([str(op["id"]), op["kind"], op["space"], str(op["bytes"]), f"{op['file']}:{op['line']}",
                     op["label"], str(op["warp_accesses"]), f"{op['mean_active_lanes']:.1f}",
                     "new" if op["starts_sequence"] else "", op["source"]])
    return rows


def _render_text(doc: dict[str, Any]) -> str:
    lines = [f"tuiprof {doc['tuiprof']}"]
    lines += [f"  {k:<10} {v}" for k, v in _summary_lines(doc)]
    lines += ["", "static memory ops (dynamic warp accesses in the snapshot):"]
    lines += ["  " + x for x in _table(_op_rows(doc), md=False)]
    a = doc["analysis"]
    if a is None:
        lines += ["", "analysis: no trial finished"]
        return "\n".join(lines) + "\n"
    lines += ["", f"kernel-wide hit ratios over {a['trials']} trials (mean, std, 95% interval = mean +- 1.96 std, paper 000 sec. 5.2):"]
    for key, h in a["headline"].items():
        lines.append(f"  {HEADLINE_NAMES[key]:<20} {_est(h, pct=True)}")
        lines += ["    " + x for x in _bars(h["histogram"], pct=True)]
    tm = a["dram_latency"]
    lines += ["", f"DRAM batch latency Tm (cycles, paper 000 sec. 3.2.3): {_est(tm['tm'], pct=False)}"]
    lines += ["    " + x for x in _bars({"counts": tm["counts"], "edges": tm["edges"]}, pct=False)]
    lines += ["", "static ops by cost (warp accesses x expected latency X; X = H1 t1 + (1-H1)(H2 t2 + (1-H2) Tm), paper 000 sec. 6.1):"]
    lines += ["  " + x for x in _table(_cost_rows(doc), md=False)]
    lines += ["", f"run: {a['trials']}/{a['planned']} trials in {a['elapsed_s']:.2f} s, "
              f"{a['l1_requests_per_second'] / 1e6:.1f}M L1 requests/s per worker"]
    return "\n".join(lines) + "\n"


def _render_md(doc: dict[str, Any]) -> str:
    lines = [f"# tuiprof report: `{doc['trace']['kernel']}`", ""]
    lines += [f"- **{k}**: {v}" for k, v in _summary_lines(doc)]
    lines += ["", "## Static memory ops", ""] + _table(_op_rows(doc), md=True)
    a = doc["analysis"]
    if a is not None:
        lines += ["", f"## Kernel-wide hit ratios ({a['trials']} trials)", "",
                  "| metric | mean | std | 95% interval |", "|---|---|---|---|"]
        for key, h in a["headline"].items():
            lines.append(f"| {HEADLINE_NAMES[key]} | {_pct(h['mean'])} | {_pct(h['std'])} | {_pct(h['lo'])} - {_pct(h['hi'])} |")
        lines += ["", f"DRAM batch latency Tm: {_est(a['dram_latency']['tm'], pct=False)} cycles", "",
                  "## Static ops by cost", ""] + _table(_cost_rows(doc), md=True)
        lines += ["", f"{a['trials']}/{a['planned']} trials in {a['elapsed_s']:.2f} s."]
    return "\n".join(lines) + "\n"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


def _est(e: dict[str, Any], pct: bool) -> str:
    f = _pct if pct else _num
    if e["mean"] is None:
        return "n/a (no accesses)"
    return f"{f(e['mean'])}  std {f(e['std'])}  95% [{f(e['lo'])}, {f(e['hi'])}]"


def _bars(h: dict[str, list[float]], pct: bool, width: int = 40) -> list[str]:
    counts, edges = h["counts"], h["edges"]
    if not counts:
        return []
    top = max(counts) or 1
    f = (lambda x: f"{100 * x:6.1f}%") if pct else (lambda x: f"{x:7.0f}")
    return [f"{f(edges[i])} - {f(edges[i + 1])} | {'#' * round(width * c / top):<{width}} {c}"
            for i, c in enumerate(counts) if c or (0 < i < len(counts) - 1)]


def _cost_rows(doc: dict[str, Any]) -> list[list[str]]:
    src = {o["id"]: o for o in doc["trace"]["ops"]}
    rows = [["op", "line", "label", "kind", "accesses", "sect/req", "H1", "H2", "X cycles (95%)", "share", "source"]]
    for o in doc["analysis"]["ops"]:
        x = o["x"]
        rows.append([str(o["id"]), str(o["line"]), o["label"], o["kind"], str(o["warp_accesses"]),
                     "-" if o["sectors_per_request"] is None else f"{o['sectors_per_request']:.2f}",
                     _pct(o["h1"]["mean"]), _pct(o["h2"]["mean"]),
                     "-" if x["mean"] is None else f"{x['mean']:.0f} [{x['lo']:.0f}, {x['hi']:.0f}]",
                     _pct(o["cost_share"]), src[o["id"]]["source"]])
    return rows
