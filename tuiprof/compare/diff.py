"""`tuiprof diff`: two runs side by side, per kernel and per op, with the significance of every
change.

The document (`diff_document`) is plain JSON data, like the report's, so that the JSON output is
a dump of it and the text and Markdown views (`render`) show the same figures. Every delta is
B - A and carries the p-value of Welch's t-test over the two runs' trials
(`tuiprof.model.significance`): significant at 5% per test, and, for the whole family of tests of
one diff, after Holm's correction (a diff makes dozens of tests: about 5% of them come out
"significant" by chance when nothing changed).

The kernel time's test: the timing model is run on each trial's simulated traffic (the trial's
Mem_LD, DRAM transactions and L2 sectors) as well as on their mean; the headline times and their
relative change are the report's (mean traffic), the test is over the per-trial times.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tuiprof import __version__
from tuiprof.compare.baseline import Delta, delta_of
from tuiprof.compare.match import Matching, match_ops, refs_of_ops
from tuiprof.compare.record import HEADLINE_KEYS, RunRecord
from tuiprof.errors import UsageError
from tuiprof.model.analysis import HEADLINES
from tuiprof.model.latency import estimate
from tuiprof.model.significance import ALPHA, TEST_NAME, holm
from tuiprof.report import UNCERTAINTY_NOTE, _cell, _pct, _table, _us
from tuiprof.toolchain.demangle import display_name
from tuiprof.trace.data import CACHED_SPACES
from tuiprof.trace.text import printable

if TYPE_CHECKING:
    from tuiprof.compare.cache import RunCache
    from tuiprof.session import RunConfig


@dataclass(frozen=True)
class Side:
    """One run to compare: a target (a .cu source, a .tptrace file or a demo name) under a config."""

    name: str
    """'A' or 'B'."""
    target: str
    config: "RunConfig"


def vs_config(config: "RunConfig", *, arch: str | None = None, overrides: dict[str, str] | None = None,
              md: int | None = None, seed: int | None = None, launch: Path | None = None) -> "RunConfig":
    """B's config: A's with the ``--vs-*`` settings in place of its own (``--vs-set`` adds to A's
    ``--set``)."""
    out = replace(config, arch=arch or config.arch, overrides={**config.overrides, **(overrides or {})},
                  md=md if md is not None else config.md, seed=seed if seed is not None else config.seed)
    if launch is not None:
        out = replace(out, collect=replace(out.collect, launch=launch))
    return out


def run_side(side: Side, cache: "RunCache | None", note: Callable[[str], None] = lambda s: None) -> tuple[RunRecord, bool]:
    """The record of `side`'s run, from `cache` when it holds it (True) or simulated now (and
    stored there). A trace file is keyed by its bytes before it is loaded, so a cached run costs
    no load."""
    from tuiprof.compare.cache import file_digest, run_key, trace_digest
    from tuiprof.compare.record import record_of
    from tuiprof.demos import load, resolve_target
    from tuiprof.session import Session, arch_for
    from tuiprof.trace.io import read_header

    shown = printable(side.target, 80)
    session: Session | None = None
    path: Path | None = None
    if Path(side.target).suffix == ".cu":
        note(f"{side.name}: recording {shown}...")
        session = Session.open(side.target, side.config)
        key = run_key(trace_digest(session.trace), session.requested_arch, side.config)
    else:
        path = resolve_target(side.target)
        key = run_key(file_digest(path), arch_for(read_header(path)["provenance"]["arch"], side.config), side.config)
    found = cache.get(key) if cache is not None else None
    if found is not None:
        return _named(found, side), True
    if session is None:
        assert path is not None
        session = Session(load(path), side.config, path)
    note(f"{side.name}: simulating {shown} on {session.arch.name} (MD {session.md}, seed {side.config.seed}, "
         f"up to {side.config.trials} trials)...")
    analysis = session.run()
    if analysis is None or session.stop_reason == "cancelled":
        raise UsageError(f"the run of {shown} was cancelled", "run the diff again")
    record = record_of(session, analysis, side.target)
    if cache is not None and not cache.put(key, record):
        note(f"note: run cache not written ({cache.problem}); the next diff simulates again")
    return record, False


def _named(record: RunRecord, side: Side) -> RunRecord:
    """A cached record under the name this diff gives its target."""
    return replace(record, meta={**record.meta, "target": side.target})


# --- the document ----------------------------------------------------------------------------

def _est(x: np.ndarray, lo: float = -math.inf, hi: float = math.inf, digits: int = 4) -> dict[str, Any]:
    return estimate(x, lo, hi).to_dict(digits)


def _finite(x: float | None, digits: int = 6) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), digits)


def _delta(a: np.ndarray, b: np.ndarray, digits: int = 4) -> tuple[dict[str, Any], Delta]:
    """B's trials against A's as a row's cell (means rounded to `digits`), and the change itself."""
    d = delta_of(a, b)
    return {"a": _finite(d.base, digits), "b": _finite(d.now, digits), "delta": _finite(d.delta, digits),
            "p": _finite(d.p, 6), "significant": d.significant}, d


def _load_cost(r: RunRecord) -> np.ndarray:
    """Per trial: the cost (warp accesses in the grid x X) of all the cached loads together."""
    total = np.zeros(r.time.size)
    for o in r.ops:
        if o["kind"] == "load" and o["space"] in CACHED_SPACES and o["warp_accesses"]:
            total += np.nan_to_num(r.samples(o["id"], "cost"))
    return total


def _run_info(r: RunRecord, cached: bool) -> dict[str, Any]:
    run, arch = r.meta["run"], r.meta["run"]["arch"]
    return {"target": r.meta["target"], "kernel": r.meta["trace"]["kernel"], "arch": arch["name"],
            "overrides": arch["overrides"], "l1_size": arch["l1"]["size"], "md": run["run"]["md"], "seed": run["run"]["seed"],
            "trials": r.meta["trials"], "planned": run["run"]["trials"], "stopped": run["run"]["stopped"],
            "sweep": run["run"]["sweep"], "elapsed_s": r.meta["elapsed_s"], "cached": cached,
            "backend": r.meta["trace"]["provenance"]["backend"]}


KERNEL_ROWS = {**HEADLINES, "tm": "DRAM latency Tm (cyc)", "load_cost": "loads' cost (cyc, grid)",
               "time_s": "kernel time (timing model)"}


def _kernel_rows(a: RunRecord, b: RunRecord) -> list[tuple[dict[str, Any], Delta]]:
    rows = []
    for i, key in enumerate(HEADLINE_KEYS):
        d, w = _delta(a.headline[i], b.headline[i])
        rows.append(({"metric": key, "name": KERNEL_ROWS[key], **d}, w))
    d, w = _delta(a.tm, b.tm, 1)
    rows.append(({"metric": "tm", "name": KERNEL_ROWS["tm"], **d}, w))
    d, w = _delta(_load_cost(a), _load_cost(b), 0)
    rows.append(({"metric": "load_cost", "name": KERNEL_ROWS["load_cost"], **d}, w))
    d, w = _delta(a.time, b.time, 12)
    ta, tb = a.meta["time"]["time_s"], b.meta["time"]["time_s"]
    d.update(a=ta, b=tb, delta=_finite(tb - ta, 12) if ta is not None and tb is not None else None,
             change=_finite(tb / ta - 1.0, 4) if ta and tb is not None else None,
             speedup=_finite(ta / tb, 3) if ta is not None and tb else None,
             per_trial=[_est(a.time, digits=12), _est(b.time, digits=12)],
             bound=[a.meta["time"]["bound_label"], b.meta["time"]["bound_label"]])
    rows.append(({"metric": "time_s", "name": KERNEL_ROWS["time_s"], **d}, w))
    return rows


def _op_brief(r: RunRecord, op_id: int) -> dict[str, Any]:
    o = r.ops[op_id]
    return {"id": op_id, "kind": o["kind"], "space": o["space"], "line": o["line"], "label": o["label"],
            "source": o["source"], "warp_accesses": o["warp_accesses"], "grid_accesses": round(r.grid_accesses(op_id))}


OP_METRICS = ("h1", "h2", "x", "cost")
COST_NOTE = ("accesses = warp accesses in the whole grid (the snapshot's x grid CTAs / snapshot CTAs: two versions may "
             "record snapshots of different sizes); cost = accesses x X, cycles")


def _op_rows(a: RunRecord, b: RunRecord, m: Matching) -> list[tuple[dict[str, Any], list[Delta]]]:
    rows = []
    for p in m.pairs:
        row: dict[str, Any] = {"a": _op_brief(a, p.a), "b": _op_brief(b, p.b), "match": p.how}
        tests = []
        for metric in OP_METRICS:
            digits = 4 if metric in ("h1", "h2") else 1
            row[metric], w = _delta(a.samples(p.a, metric), b.samples(p.b, metric), digits)
            tests.append(w)
        rows.append((row, tests))
    rows.sort(key=lambda rt: -abs(rt[0]["cost"]["delta"]) if rt[0]["cost"]["delta"] is not None else math.inf)
    return rows


def _unmatched(r: RunRecord, ids: Sequence[int]) -> list[dict[str, Any]]:
    out = []
    for i in ids:
        x, cost = _est(r.samples(i, "x"), digits=1)["mean"], _est(r.samples(i, "cost"), digits=1)["mean"]
        out.append({**_op_brief(r, i), "x": x, "cost": cost})
    return sorted(out, key=lambda o: -(o["cost"] or 0.0))


def resolve_ops(names: Sequence[str], doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The matched op rows that `--op` names (A's op id, or either version's label); a name that
    matches no pair is a UsageError naming the labels there are."""
    out = []
    for name in names:
        if name.isdigit():
            found = [r for r in doc["ops"] if r["a"]["id"] == int(name)]
        else:
            found = [r for r in doc["ops"] if name in (r["a"]["label"], r["b"]["label"])]
        if not found:
            labels = sorted({r["a"]["label"] for r in doc["ops"]})
            raise UsageError(f"--op {name!r} names no op found in both versions",
                             "give an op id of A (as `tuiprof report A` numbers them) or a label: "
                             + ", ".join(repr(x) for x in labels[:12]))
        out += [r for r in found if r not in out]
    return out


def _checks(doc: dict[str, Any], a: RunRecord, b: RunRecord, pct: float, names: Sequence[str]) -> dict[str, Any]:
    """`--fail-if-worse PCT`: the kernel time and each named op's X, each failing when B is more
    than PCT% worse than A and the change is significant."""
    t = next(r for r in doc["kernel"] if r["metric"] == "time_s")
    checks = [{"what": "kernel time", "a": t["a"], "b": t["b"], "change": t["change"], "p": t["p"],
               "significant": t["significant"]}]
    for r in resolve_ops(names, doc):
        xa, xb = r["x"]["a"], r["x"]["b"]
        checks.append({"what": f"op {r['a']['id']}->{r['b']['id']} {r['a']['label']} X", "a": xa, "b": xb,
                       "change": _finite(xb / xa - 1.0, 4) if xa and xb is not None else None,
                       "p": r["x"]["p"], "significant": r["x"]["significant"]})
    for c in checks:
        c["failed"] = bool(c["change"] is not None and 100 * c["change"] > pct and c["significant"])
    return {"threshold_pct": pct, "checks": checks, "failed": any(c["failed"] for c in checks)}


def diff_document(a: RunRecord, b: RunRecord, *, cached: tuple[bool, bool] = (False, False),
                  fail_if_worse: float | None = None, ops: Sequence[str] = ()) -> dict[str, Any]:
    """The comparison of run B against run A as plain data (see the module docstring)."""
    matching = match_ops(refs_of_ops(a.ops), a.sources, refs_of_ops(b.ops), b.sources)
    kernel = _kernel_rows(a, b)
    op_rows = _op_rows(a, b, matching)
    tests = [w for _, w in kernel] + [w for _, ws in op_rows for w in ws]
    family = holm([w.p for w in tests])
    it = iter(family)
    for row, _ in kernel:
        row["significant_holm"] = next(it)
    for row, _ws in op_rows:
        for metric in OP_METRICS:
            row[metric]["significant_holm"] = next(it)
    tested = sum(w.p is not None for w in tests)
    doc: dict[str, Any] = {
        "tuiprof": __version__, "kind": "diff",
        "a": {**_run_info(a, cached[0]), "md_decision": a.meta["md"]},
        "b": {**_run_info(b, cached[1]), "md_decision": b.meta["md"]},
        "test": {"name": TEST_NAME, "alpha": ALPHA, "tests": tested, "significant": sum(w.significant for w in tests),
                 "significant_holm": sum(family), "expected_by_chance": round(ALPHA * tested, 1)},
        "kernel": [row for row, _ in kernel],
        "ops": [row for row, _ in op_rows],
        "removed": _unmatched(a, matching.removed),
        "added": _unmatched(b, matching.added),
        "fail_if_worse": None,
    }
    if fail_if_worse is not None:
        doc["fail_if_worse"] = _checks(doc, a, b, fail_if_worse, ops)
    elif ops:
        resolve_ops(ops, doc)  # a bad --op is an error with or without a threshold
    return doc


# --- rendering -------------------------------------------------------------------------------

def render(doc: dict[str, Any], fmt: str) -> str:
    """The diff as JSON, Markdown or text (every string from a trace shown through `printable`)."""
    import json

    if fmt == "json":
        return json.dumps(doc, indent=2)
    return printable(_render(doc, md=fmt == "md"), keep="\n")


def _mark(d: dict[str, Any]) -> str:
    if d["p"] is None:
        return ""
    return "**" if d.get("significant_holm") else "*" if d["significant"] else ""


def _p(p: float | None) -> str:
    return "n/a" if p is None else "<0.001" if p < 0.001 else f"{p:.3f}"


def _pts(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f} pts"


def _count(x: float | None) -> str:
    """A large count (cycles x accesses) in k, M or G."""
    if x is None:
        return "-"
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.3g}{unit}"
    return f"{x:.0f}"


def _signed(x: float | None, f: Callable[[float], str]) -> str:
    return "-" if x is None else ("+" if x > 0 else "") + f(x)


def _kernel_cells(r: dict[str, Any]) -> list[str]:
    k = r["metric"]
    if k in HEADLINES:
        a, b, d = _pct(r["a"]), _pct(r["b"]), _pts(r["delta"])
    elif k == "time_s":
        a, b = f"{_us(r['a'])} us", f"{_us(r['b'])} us"
        d = "-" if r["change"] is None else f"{100 * r['change']:+.1f}%"
        s = r["speedup"]
        if s:
            d += f" ({s:.2f}x faster)" if s >= 1 else f" ({1 / s:.2f}x slower)"
    else:
        f = (lambda x: f"{x:.1f}") if k == "tm" else _count
        a, b = ("-" if r["a"] is None else f(r["a"])), ("-" if r["b"] is None else f(r["b"]))
        d = _signed(r["delta"], f)
        if r["a"] and r["b"] is not None:
            d += f" ({100 * (r['b'] / r['a'] - 1):+.1f}%)"
    return [r["name"], a, b, d + _mark(r), _p(r["p"])]


def _op_delta(d: dict[str, Any], metric: str) -> str:
    if metric in ("h1", "h2"):
        if d["a"] is None and d["b"] is None:
            return "-"
        return f"{_pct(d['a'])}->{_pct(d['b'])} {_pts(d['delta']).replace(' pts', '')}{_mark(d)}"
    f = (lambda x: f"{x:.0f}") if metric == "x" else _count
    a = "-" if d["a"] is None else f(d["a"])
    b = "-" if d["b"] is None else f(d["b"])
    return f"{a}->{b} {_signed(d['delta'], f)}{_mark(d)}"


def _op_table(doc: dict[str, Any]) -> list[list[str]]:
    rows = [["#", "op A->B", "line A->B", "label", "kind", "accesses A->B", "H1 (pts)", "H2 (pts)", "X cyc",
             "cost", "p(cost)", "match"]]
    for i, r in enumerate(doc["ops"], 1):
        a, b = r["a"], r["b"]
        label = _cell(a["label"], 40) + ("" if a["label"] == b["label"] else f" -> {_cell(b['label'], 40)}")
        rows.append([str(i), f"{a['id']}->{b['id']}", f"{a['line']}->{b['line']}", label, a["kind"],
                     f"{_count(a['grid_accesses'])}->{_count(b['grid_accesses'])}",
                     _op_delta(r["h1"], "h1"), _op_delta(r["h2"], "h2"), _op_delta(r["x"], "x"),
                     _op_delta(r["cost"], "cost"), _p(r["cost"]["p"]), r["match"]])
    return rows


def _unmatched_table(ops: list[dict[str, Any]]) -> list[list[str]]:
    rows = [["op", "line", "label", "kind", "accesses", "X cyc", "cost", "source"]]
    for o in ops:
        rows.append([str(o["id"]), str(o["line"]), _cell(o["label"], 40), o["kind"], _count(o["grid_accesses"]),
                     "-" if o["x"] is None else f"{o['x']:.0f}", _count(o["cost"]), _cell(o["source"], 60)])
    return rows


def _side(s: dict[str, Any]) -> str:
    over = ", ".join(f"{_cell(k)}={_cell(str(v))}" for k, v in s["overrides"].items())
    md = f"MD {s['md']}"
    if s["md_decision"]:
        md += f" (recommended {s['md_decision']['recommended_md']})"
    return (f"{_cell(s['target'], 80)}: {_cell(display_name(s['kernel']), 80)} on {_cell(s['arch'])}"
            + (f" [what-if: {over}]" if over else "") + f", {md}, seed {s['seed']}, {s['trials']} trials"
            + (" (cached run)" if s["cached"] else ""))


def _render(doc: dict[str, Any], md: bool) -> str:
    t = doc["test"]
    head = (lambda x: ["", f"## {x}", ""]) if md else (lambda x: ["", f"{x}:"])
    ind = "" if md else "  "
    lines = (["# tuiprof diff", ""] if md else [f"tuiprof {doc['tuiprof']} diff"])
    lines += [f"{'- **A**' if md else '  A'} {_side(doc['a'])}", f"{'- **B**' if md else '  B'} {_side(doc['b'])}"]
    sig = (f"{TEST_NAME} at {t['alpha']:.0%}: `*` significant per test, `**` also after Holm's correction "
           f"over all {t['tests']} tests of this diff ({t['significant']} significant per test, about "
           f"{t['expected_by_chance']:g} expected by chance when nothing changed; {t['significant_holm']} after Holm)")
    lines += head("Significance" if md else "significance") + [ind + (sig if md else sig.replace("`", ""))]
    lines += [ind + x for x in UNCERTAINTY_NOTE[2:]]
    lines += head("Kernel" if md else "kernel (B - A)")
    rows = [["metric", "A", "B", "B - A", "p"]] + [_kernel_cells(r) for r in doc["kernel"]]
    lines += [ind + x for x in _table(rows, md)]
    time = next(r for r in doc["kernel"] if r["metric"] == "time_s")
    lines += ([""] if md else []) + [f"{ind}bound: A {_cell(time['bound'][0], 80)}; B {_cell(time['bound'][1], 80)}"]
    lines += head("Ops in both versions, by |Δcost|" if md else "ops in both versions, by |cost change|")
    lines += [ind + COST_NOTE]
    lines += [ind + x for x in _table(_op_table(doc), md)] if doc["ops"] else [ind + "(none)"]
    for key, title in (("removed", "Removed (only in A)"), ("added", "Added (only in B)")):
        if doc[key]:
            lines += head(title if md else title.lower()) + [ind + x for x in _table(_unmatched_table(doc[key]), md)]
    f = doc["fail_if_worse"]
    if f is not None:
        lines += head(f"Fail if worse than {f['threshold_pct']:g}%" if md else f"fail if worse than {f['threshold_pct']:g}%")
        for c in f["checks"]:
            change = "-" if c["change"] is None else f"{100 * c['change']:+.1f}%"
            state = "FAIL" if c["failed"] else "ok"
            lines.append(f"{ind}{'- ' if md else ''}{state}: {_cell(c['what'], 80)} {change}, p {_p(c['p'])}"
                         f" ({'significant' if c['significant'] else 'not significant'})")
    return "\n".join(lines) + "\n"
