"""Comparing two runs (issue 26): the t-test against tables and integration, op matching across
two versions of a kernel, significance on runs that differ only by seed (and one that halves the
L1), the run cache, and `tuiprof diff` with its exit codes."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

import tuiprof.jit  # noqa: F401  (the compiled kernels' folder is chosen before a test moves XDG_CACHE_HOME)
from tests.support.emu_support import cuda_ptx  # noqa: F401  (fixture)
from tests.support.sim_traces import FULL, lanes, op, trace_of
from tuiprof.cli.main import main
from tuiprof.compare.cache import RunCache, file_digest, run_key, trace_digest
from tuiprof.compare.diff import diff_document
from tuiprof.compare.match import EDITED, MOVED, SAME, OpRef, match_ops
from tuiprof.compare.record import RunRecord, record_of
from tuiprof.model.significance import betainc, holm, t_cdf, t_two_sided, welch
from tuiprof.session import RunConfig, Session
from tuiprof.trace.data import SourceFile
from tuiprof.trace.io import save_trace

# --- the Student t distribution and Welch's test --------------------------------------------

T_TABLE = {  # two-sided 5% and 1% critical values of Student's t (any statistics textbook's table)
    1: (12.706, 63.657), 2: (4.303, 9.925), 3: (3.182, 5.841), 5: (2.571, 4.032), 10: (2.228, 3.169),
    20: (2.086, 2.845), 30: (2.042, 2.750), 60: (2.000, 2.660), 120: (1.980, 2.617),
}


@pytest.mark.parametrize("df", sorted(T_TABLE))
def test_t_tail_at_tabulated_quantiles(df: int) -> None:
    q05, q01 = T_TABLE[df]
    assert t_two_sided(q05, df) == pytest.approx(0.05, abs=3e-4)
    assert t_two_sided(q01, df) == pytest.approx(0.01, abs=1e-4)
    assert t_two_sided(1.95996, 1e9) == pytest.approx(0.05, abs=1e-5)  # the normal limit


def _t_cdf_by_integration(t: float, df: float, steps: int = 20000) -> float:
    """0.5 + the integral of the t density from 0 to t (Simpson's rule): an oracle that shares
    nothing with the continued fraction."""
    x = np.linspace(0.0, abs(t), steps + 1)
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    f = c * (1 + x * x / df) ** (-(df + 1) / 2)
    h = abs(t) / steps
    area = h / 3 * (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum())
    return 0.5 + math.copysign(area, t)


@pytest.mark.parametrize("df", [1, 2.5, 7, 24.99, 300])
@pytest.mark.parametrize("t", [-6.0, -1.3, 0.2, 2.0, 4.5])
def test_t_cdf_against_numerical_integration(t: float, df: float) -> None:
    assert t_cdf(t, df) == pytest.approx(_t_cdf_by_integration(t, df), abs=1e-9)


def test_incomplete_beta_closed_forms() -> None:
    for x in (0.01, 0.3, 0.77, 0.999):
        assert betainc(2.5, 1, x) == pytest.approx(x ** 2.5, rel=1e-12)
        assert betainc(1, 3.5, x) == pytest.approx(1 - (1 - x) ** 3.5, rel=1e-12)
    # I_x(2, 3) = P(Binomial(4, x) >= 2)
    assert betainc(2, 3, 0.4) == pytest.approx(6 * .16 * .36 + 4 * .064 * .6 + .0256, rel=1e-12)
    assert betainc(3, 4, 0.0) == 0.0 and betainc(3, 4, 1.0) == 1.0


def test_welch_on_a_published_example() -> None:
    """Wikipedia's "Welch's t-test", example 1: t = 2.46, nu = 24.99, p = 0.021 (B against A)."""
    a = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4]
    b = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4]
    w = welch(a, b)
    assert (round(w.t, 2), round(w.df, 2), round(w.p, 3)) == (2.46, 24.99, 0.021)
    assert w.delta == pytest.approx(sum(b) / 15 - sum(a) / 15) and w.significant()
    assert welch(b, a).t == pytest.approx(-w.t) and welch(b, a).p == pytest.approx(w.p)


def test_welch_without_randomness_or_trials() -> None:
    assert welch([0.5] * 8, [0.5] * 8).p == 1.0
    assert welch([0.5] * 8, [0.75] * 8).p == 0.0
    # the same figure summed in another order: rounding, not a change
    noisy = [0.1 + 0.2, 0.3, 0.1 + 0.2, 0.3]
    assert welch(noisy, [0.3] * 4).p == 1.0
    assert welch([1.0], [2.0, 3.0]).p is None and not welch([1.0], [2.0, 3.0]).significant()
    assert welch([1.0, float("nan"), 2.0], [1.0, 2.0]).n_a == 2


def test_holm() -> None:
    assert holm([0.01, 0.04, 0.03, None]) == [True, False, False, False]
    assert holm([0.001, 0.012, 0.02]) == [True, True, True]
    assert holm([]) == []


# --- matching ops across versions -----------------------------------------------------------

def _refs(compiled, kernel: str) -> tuple[list[OpRef], dict[str, str]]:
    from tuiprof.ptx.ops import static_ops

    module, src, text = compiled
    ops = [o for _, _, o in static_ops(module, kernel, src, text)]
    return [OpRef(o.id, o.kernel, o.kind, o.file, o.line, o.label, o.column) for o in ops], {o.file: text for o in ops}


def test_matching_across_inserted_lines_and_a_renamed_variable(cuda_ptx) -> None:  # noqa: F811
    """tests/cuda/diff_after.cu moves every line, renames j to col, moves in[i] to a line of its
    own and adds a load: each op of the first version finds its own, the new ones are added."""
    a, a_src = _refs(cuda_ptx("diff_before"), "scale_gather")
    b, b_src = _refs(cuda_ptx("diff_after"), "scale_gather")
    m = match_ops(a, a_src, b, b_src)
    label = {("a", o.id): o.label for o in a} | {("b", o.id): o.label for o in b}
    got = {(label[("a", p.a)], label[("b", p.b)], p.how) for p in m.pairs}
    assert got == {("idx[i]", "idx[i]", EDITED), ("in[j]", "in[col]", EDITED), ("in[i]", "in[i]", MOVED),
                   ("out[i]", "out[i]", EDITED)}
    assert m.removed == ()
    assert sorted(label[("b", i)] for i in m.added) == ["idx[n - 1 - i]", "in[idx[n - 1 - i]]"]
    same = match_ops(a, a_src, a, a_src)  # a version against itself: every op is itself
    assert [(p.a, p.b, p.how) for p in same.pairs] == [(o.id, o.id, SAME) for o in sorted(a, key=lambda o: o.id)]


def test_matching_two_kernels_of_one_file_aligns_their_bodies() -> None:
    """The scalar and vector SpMV kernels share spmv.cu: the scalar loop's loads are found in the
    vector kernel's scalar remainder loop (the same text), the vector loads are added."""
    from tuiprof.demos import demo_path
    from tuiprof.trace.io import read_header

    def refs(name: str):
        h = read_header(demo_path(name))
        return ([OpRef(o["id"], o["kernel"], o["kind"], o["file"], o["line"], o["label"], o["column"]) for o in h["ops"]],
                {s["name"]: s["text"] for s in h["sources"]}, h["ops"])

    a, a_src, a_ops = refs("spmv-u")
    b, b_src, b_ops = refs("spmv-vec-u")
    m = match_ops(a, a_src, b, b_src)
    assert all(p.how == SAME and a_ops[p.a]["label"] == b_ops[p.b]["label"] for p in m.pairs)
    assert sorted(a_ops[p.a]["label"] for p in m.pairs) == sorted(o["label"] for o in a_ops)
    assert {b_ops[i]["label"] for i in m.added} >= {"indices4[j / 4]", "val4[j / 4]", "y[ind.x]", "y[ind.w]"}


# --- significance on simulated runs ---------------------------------------------------------

SOURCE = "\n".join(["// a test kernel"] * 9 + ["a = gather[r];", "b = mine[k % 4];", "c = stream[i];"]) + "\n"
SMALL = {"sm_count": "4", "l1.size": "4KiB", "l1.line": "128", "l1.sector": "32", "l1.assoc": "4",
         "l1.partitions": "1", "l1.store_policy": "write-no-allocate", "l1.replacement": "lru", "l2.size": "16KiB",
         "l2.line": "128", "l2.sector": "32", "l2.assoc": "8", "l2.partitions": "1", "l2.replacement": "lru",
         "l2.write_policy": "write-through", "address_hash": "linear"}
"""tests/sim/test_sim_montecarlo.py's GPU with a 4 KiB L1 (2 KiB halves it): 4 SMs, 8-way 16 KiB L2."""


def reuse_trace():
    """16 warps (2 per CTA), each 40 times: a load of a random line of 64 KiB (gather[r]), a load
    of one of its own 4 lines (mine[k % 4]: reuse that a 4 KiB L1 mostly keeps and a 2 KiB one
    mostly loses) and a load of a new line (stream[i])."""
    rng = np.random.default_rng(0)
    warps = []
    for w in range(16):
        acc = []
        for k in range(40):
            acc.append((0, lanes(0x100000 + int(rng.integers(0, 512)) * 128), FULL))
            acc.append((1, lanes(0x800000 + w * 0x10000 + (k % 4) * 128), FULL))
            acc.append((2, lanes(0x4000000 + (w * 40 + k) * 128), FULL))
        warps.append(acc)
    t = trace_of(warps, ops=(op(), op(), op()), warps_per_cta=2, ctas_per_sm=2)
    ops = tuple(dataclasses.replace(o, label=label) for o, label in zip(t.ops, ("gather[r]", "mine[k % 4]", "stream[i]")))
    return dataclasses.replace(t, ops=ops, sources=(SourceFile("k.cu", SOURCE),))


@pytest.fixture(scope="module")
def trace():
    return reuse_trace()


def config(seed: int = 0, trials: int = 20, **overrides: str) -> RunConfig:
    return RunConfig(arch="v100", overrides={**SMALL, **overrides}, trials=trials, seed=seed, md=2, sweep=False,
                     tolerance=None)


def record(trace, cfg: RunConfig) -> RunRecord:
    session = Session(trace, cfg)
    return record_of(session, session.run(), "reuse")


def test_two_seeds_show_no_significant_delta(trace) -> None:
    doc = diff_document(record(trace, config(0)), record(trace, config(1)))
    assert len(doc["ops"]) == 3 and not doc["added"] and not doc["removed"]
    flags = [row[m]["significant_holm"] for row in doc["ops"] for m in ("h1", "h2", "x", "cost")]
    flags += [row["significant_holm"] for row in doc["kernel"]]
    assert not any(flags)
    assert doc["test"]["significant_holm"] == 0


def test_false_positive_rate_over_many_seeds_is_near_five_percent(trace) -> None:
    """100 pairs of runs that differ only by their seeds: about 5% of the per-test verdicts are
    "significant" (the nominal rate) and about a quarter of the p-values are below 0.25 (they
    are uniform when nothing changed); a diff where Holm's correction finds anything is rare."""
    runs = [record(trace, config(seed, trials=12)) for seed in range(10, 210)]
    p_values, family = [], 0
    for a, b in zip(runs[::2], runs[1::2]):
        doc = diff_document(a, b)
        cells = [row[m] for row in doc["ops"] for m in ("h1", "h2", "x")] + doc["kernel"]
        p_values += [c["p"] for c in cells if c["p"] is not None and c["p"] < 1.0]  # constants test nothing
        family += doc["test"]["significant_holm"] > 0
    p = np.array(p_values)
    assert p.size >= 800
    assert 0.03 <= np.mean(p < 0.05) <= 0.075
    assert 0.18 <= np.mean(p < 0.25) <= 0.32
    assert family <= 10


def test_halving_the_l1_shows_a_significant_drop_of_h1_on_the_reused_load(trace) -> None:
    doc = diff_document(record(trace, config(0)), record(trace, config(0, **{"l1.size": "2KiB"})))
    rows = {row["a"]["label"]: row for row in doc["ops"]}
    mine = rows["mine[k % 4]"]
    assert mine["h1"]["delta"] < -0.03 and mine["h1"]["significant_holm"]
    assert mine["x"]["delta"] > 0 and mine["x"]["significant_holm"]
    assert doc["ops"][0]["a"]["label"] == "mine[k % 4]"  # ranked first by |cost change|
    assert not rows["stream[i]"]["h1"]["significant"]  # no reuse to lose
    l1 = next(r for r in doc["kernel"] if r["metric"] == "l1_read")
    assert l1["delta"] < 0 and l1["significant"]


# --- records and the run cache --------------------------------------------------------------

def test_record_round_trip_and_damaged_entries(trace, tmp_path: Path) -> None:
    rec = record(trace, config(3, trials=6))
    back = RunRecord.from_bytes(rec.to_bytes())
    assert back.meta == json.loads(json.dumps(rec.meta))
    for name in ("op_ids", "op_samples", "headline", "tm", "time"):
        np.testing.assert_array_equal(getattr(back, name), getattr(rec, name))
    cache = RunCache(tmp_path / "runs")
    assert cache.get("k1") is None
    assert cache.put("k1", rec) and cache.get("k1") is not None
    data = (tmp_path / "runs" / "k1.npz").read_bytes()
    (tmp_path / "runs" / "k1.npz").write_bytes(data[: len(data) // 2])  # a half-written entry
    assert cache.get("k1") is None
    (tmp_path / "runs" / "k1.npz").write_bytes(b"not a zip at all")
    assert cache.get("k1") is None
    assert cache.put("k1", rec) and cache.get("k1") is not None  # written again
    small = RunCache(tmp_path / "runs", limit_entries=2)
    for k in ("k2", "k3", "k4"):
        small.put(k, rec)
    assert len(list((tmp_path / "runs").glob("*.npz"))) == 2 and small.get("k4") is not None


def test_run_keys_change_with_what_changes_results(trace, tmp_path: Path) -> None:
    from tuiprof.session import resolve_arch

    digest = trace_digest(trace)
    base = config(0)
    key = run_key(digest, resolve_arch(trace, base), base)
    assert key == run_key(trace_digest(reuse_trace()), resolve_arch(trace, base), base)
    assert key == run_key(digest, resolve_arch(trace, base), dataclasses.replace(base, threads=1))
    for other in (config(1), config(0, trials=21), config(0, **{"l1.size": "2KiB"}), dataclasses.replace(base, md=1)):
        assert run_key(digest, resolve_arch(trace, other), other) != key
    moved = dataclasses.replace(trace, addr=trace.addr + np.uint64(128))
    assert run_key(trace_digest(moved), resolve_arch(trace, base), base) != key
    path = tmp_path / "t.tptrace"
    save_trace(trace, path)
    assert file_digest(path) == file_digest(path) != digest


# --- the command ----------------------------------------------------------------------------

SETS = [f"--set={k}={v}" for k, v in SMALL.items()]
RUN = ["--arch", "v100", "--md", "2", "--no-sweep", "--trials", "12", "--tolerance", "0", *SETS]


@pytest.fixture()
def reuse_file(trace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The trace as a file, with the run cache in a folder of the test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = tmp_path / "reuse.tptrace"
    save_trace(trace, path)
    return path


def test_diff_command_fail_if_worse_and_the_cache(reuse_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    halve = ["--vs-set", "l1.size=2KiB"]
    out = tmp_path / "d.json"
    assert main(["diff", str(reuse_file), *halve, *RUN, "--format", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert not doc["a"]["cached"] and not doc["b"]["cached"] and doc["b"]["overrides"]["l1.size"] == "2KiB"
    assert len(list((tmp_path / "cache" / "tuiprof" / "runs").glob("*.npz"))) == 2
    capsys.readouterr()
    # the reused load's X rises by about a quarter, significantly: fails at 5%, not at 50%
    assert main(["diff", str(reuse_file), *halve, *RUN, "--fail-if-worse", "5", "--op", "mine[k % 4]"]) == 1
    text = capsys.readouterr()
    assert "FAIL: op 1->1 mine[k % 4] X" in text.out and "(cached run)" in text.out
    assert "fail-if-worse: op 1->1 mine[k % 4] X more than 5% worse" in text.err
    assert main(["diff", str(reuse_file), *halve, *RUN, "--fail-if-worse", "50", "--op", "1"]) == 0
    # the kernel time alone (no --op): about 2.4% slower, significantly: fails at 1%, not at 10%
    capsys.readouterr()
    assert main(["diff", str(reuse_file), *halve, *RUN, "--fail-if-worse", "1"]) == 1
    text = capsys.readouterr()
    assert "FAIL: kernel time +" in text.out and "fail-if-worse: kernel time more than 1% worse" in text.err
    assert main(["diff", str(reuse_file), *halve, *RUN, "--fail-if-worse", "10"]) == 0
    # the other way round is an improvement: never a failure
    assert main(["diff", str(reuse_file), *RUN, "--set", "l1.size=2KiB", "--vs-set", "l1.size=4KiB",
                 "--fail-if-worse", "0", "--op", "1"]) == 0
    # the same run twice (another seed): nothing significant to fail on
    assert main(["diff", str(reuse_file), str(reuse_file), *RUN, "--fail-if-worse", "0"]) == 0
    capsys.readouterr()
    assert main(["diff", str(reuse_file), *halve, *RUN, "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("# tuiprof diff") and "| metric | A | B | B - A | p |" in md and "Welch's t-test" in md


@pytest.mark.parametrize("argv, message", [
    (["diff", "{f}", *RUN], "diff needs two targets"),
    (["diff", "{f}", *RUN, "--vs-md", "1", "--op", "nothing[here]", "--fail-if-worse", "1"], "--op 'nothing[here]'"),
    (["diff", "{f}", "--vs-seed", "1", "--fail-if-worse", "x"], "--fail-if-worse must be a percentage"),
    (["diff", "{f}", "no-such-demo", *RUN], "neither a file nor a demo name"),
    (["diff", "{f}", *RUN, "--vs-set", "l1.size=3.3KiB"], "l1.size"),
])
def test_diff_errors_are_one_line_with_a_hint(reuse_file: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                              message: str) -> None:
    assert main([a.replace("{f}", str(reuse_file)) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-2].startswith("error: ") and message in err[-2] and err[-1].startswith("hint: ")


def test_docs_document_every_diff_json_key(trace) -> None:
    from tests.support.json_keys import json_keys

    root = Path(__file__).resolve().parents[2]

    doc = diff_document(record(trace, config(0, trials=4)), record(trace, config(0, trials=4, **{"l1.size": "2KiB"})),
                        fail_if_worse=5, ops=["1"])
    json.dumps(doc)  # plain JSON data
    section = (root / "docs" / "compare.md").read_text()
    data = set(doc["a"]["overrides"]) | set(doc["b"]["overrides"])  # the what-if settings: data, not schema
    missing = sorted(json_keys(doc, set()) - data - set(re.findall(r"`([a-z0-9_]+)`", section)))
    assert not missing, f"docs/compare.md does not mention {missing}"


def test_diff_of_an_edited_demo_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """vecadd.cu against a copy with lines inserted, `id` renamed to `i` and one load added,
    each recorded from its .cu source by the emulator: the three accesses are matched across the
    rename and the new load is added; a second diff records again but simulates nothing."""
    from tests.support.ptx_support import require_compiler

    require_compiler()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    demo = Path(__file__).resolve().parents[2] / "demo_traces"
    before = tmp_path / "vecadd.cu"
    before.write_text((demo / "vecadd.cu").read_text())
    after = tmp_path / "vecadd_v2.cu"
    after.write_text("// version 2\n//\n" + before.read_text().replace("int id =", "int i =")
                     .replace("C[id] = A[id] + B[id];", "C[i] = A[i] + B[i] + A[i ^ 1];"))
    for name in ("vecadd_launch.py", "vecadd_v2_launch.py"):
        (tmp_path / name).write_text((demo / "vecadd_launch.py").read_text())
    argv = ["diff", str(before), str(after), "--trials", "4", "--no-sweep", "--format", "json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    pairs = {(r["a"]["label"], r["b"]["label"], r["match"]) for r in doc["ops"]}
    assert pairs == {("A[id]", "A[i]", EDITED), ("B[id]", "B[i]", EDITED), ("C[id]", "C[i]", EDITED)}
    assert [o["label"] for o in doc["added"]] == ["A[i ^ 1]"] and doc["removed"] == []
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["a"]["cached"] and again["b"]["cached"] and again["ops"] == doc["ops"]
