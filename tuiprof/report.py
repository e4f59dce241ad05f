"""The report: one plain-data document describing a run, rendered as text, JSON or Markdown.

The document is a dict of JSON types so that JSON is a dump of it and the text and Markdown
views show exactly the same data.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tuiprof import __version__
from tuiprof.session import RunConfig, kernel_occupancy, resolve_arch, resolve_md
from tuiprof.trace.model import Trace


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
    lane_sum = [int(x) for x in __import__("numpy").bincount(trace.op, weights=lanes, minlength=len(trace.ops))]
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


def build_report(path: Path, config: RunConfig) -> dict[str, Any]:
    """Load the trace at `path`, resolve the arch and MD, and describe the run."""
    from tuiprof.trace.io import load_trace

    trace = load_trace(path)
    arch = resolve_arch(trace, config)
    md = resolve_md(trace, arch, config)
    occ = kernel_occupancy(trace, arch)
    return {
        "tuiprof": __version__,
        "trace": trace_section(trace, path),
        "arch": {"name": arch.name, "description": arch.description, "sm_count": arch.sm_count,
                 "l1": {"size": arch.l1.size, "line": arch.l1.line, "sector": arch.l1.sector, "assoc": arch.l1.assoc,
                        "hit_latency": arch.l1.hit_latency},
                 "l2": {"size": arch.l2.size, "line": arch.l2.line, "sector": arch.l2.sector, "assoc": arch.l2.assoc,
                        "hit_latency": arch.l2.hit_latency},
                 "dram_base_latency": arch.dram.base_latency, "overrides": dict(config.overrides)},
        "occupancy": {"ctas_per_sm": occ.ctas_per_sm, "limiter": occ.limiter, "warps_per_sm": occ.warps_per_sm,
                      "fraction": round(occ.fraction(arch), 4)},
        "run": {"trials": config.trials, "seed": config.seed, "md": md},
        "analysis": None,
    }


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
    if doc["analysis"] is None:
        lines += ["", "analysis: not simulated"]
    return "\n".join(lines) + "\n"


def _render_md(doc: dict[str, Any]) -> str:
    lines = [f"# tuiprof report: `{doc['trace']['kernel']}`", ""]
    lines += [f"- **{k}**: {v}" for k, v in _summary_lines(doc)]
    lines += ["", "## Static memory ops", ""] + _table(_op_rows(doc), md=True)
    return "\n".join(lines) + "\n"
