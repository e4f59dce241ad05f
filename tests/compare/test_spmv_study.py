"""The worked example of docs/compare.md (Baghsorkhi12 sec. 6.2 with `tuiprof diff`, made by
benchmarks/spmv_study.py) says what the command prints: its table is consistent with itself and
with the paper, its words with its table, a fresh `tuiprof diff spmv-u spmv-vec-u` of a few trials
lands within the model's randomness of its figures, and (slow) the four diffs under docs/compare.md's
own options print exactly its section again (same seed, same results)."""

from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path

import pytest

import tuiprof.jit  # noqa: F401  (the compiled kernels' folder is chosen before a test moves XDG_CACHE_HOME)

ROOT = Path(__file__).resolve().parents[2]


def study():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("spmv_study", ROOT / "benchmarks" / "spmv_study.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


S = study()


def readme_section() -> str:
    text = (ROOT / "docs" / "compare.md").read_text()
    return text[text.index(S.BEGIN):text.index(S.END) + len(S.END)]


ROW = re.compile(r"^\| (\w) \| ([\d.]+) ±([\d.]+) \| ([\d.]+) ±([\d.]+) \| ([\d.]+)x\**"
                 r" \| ([\d.]+)x \| ([-+\d.]+)%\** \|")


def table() -> dict[str, dict[str, float]]:
    rows = {}
    for line in readme_section().splitlines():
        m = ROW.match(line)
        if m:
            k, ta, ca, tb, cb, sp, paper, cost = m.groups()
            rows[k] = {"ta": float(ta), "ca": float(ca), "tb": float(tb), "cb": float(cb), "speedup": float(sp),
                       "paper": float(paper), "cost": float(cost)}
    return rows


def test_the_table_is_consistent_with_itself_and_the_paper() -> None:
    rows = table()
    assert list(rows) == [m for m, *_ in S.STUDY]
    for m, a, b, paper, _ in S.STUDY:
        r = rows[m]
        assert r["paper"] == paper  # 2.4 (u), 3.63 (b), 2.5 (U), 14.8 (B): Baghsorkhi12 sec. 6.2
        assert r["speedup"] == pytest.approx(r["ta"] / r["tb"], abs=0.006)
        assert f"tuiprof diff {a} {b}" in readme_section()


def test_the_words_say_what_the_table_says() -> None:
    rows, text = table(), " ".join(readme_section().split())
    measured = {m: r["paper"] for m, r in rows.items()}
    predicted = {m: r["speedup"] for m, r in rows.items()}
    assert f"The paper's speed-ups rank {' > '.join(S.order(measured))}" in text
    assert f"the model's rank {' > '.join(S.order(predicted))}" in text
    wrong = [(x, y) for x, y in S._pairs(S.order(measured)) if S.order(predicted).index(x) > S.order(predicted).index(y)]
    if wrong:
        assert ", ".join(f"{x} against {y}" for x, y in wrong) + " the other way round" in text
    else:
        assert "the same order" in text
    below = all(p < m for p, m in zip(predicted.values(), measured.values()))
    assert ("Every predicted speed-up is below the measured one" in text) == below


def test_a_fresh_diff_lands_within_the_randomness_of_the_readme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """spmv-u against spmv-vec-u with 4 trials (the first 4 of docs/compare.md's seed): each kernel
    time within 4 standard errors (of the two means together) of docs/compare.md's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    doc = S.diff("spmv-u", "spmv-vec-u", ("--trials", "4", "--no-sweep", "--tolerance", "0"))
    t = S.time_row(doc)
    r = table()["u"]
    for side, key in ((0, "a"), (1, "b")):
        e = t["per_trial"][side]
        se_fresh = 1e6 * e["stderr"]
        se_readme = r[f"c{key}"] / 1.96
        allowed = 4 * math.hypot(se_fresh, se_readme) + 1e-3 * r[f"t{key}"]
        assert abs(1e6 * t[key] - r[f"t{key}"]) <= allowed, (key, 1e6 * t[key], r[f"t{key}"], allowed)
    assert t["speedup"] > 1 and t["significant"]


@pytest.mark.slow
def test_the_four_diffs_print_the_readme_section_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under docs/compare.md's own options (tuiprof's defaults, seed 0) the runs are the same runs:
    the section comes out the same, figure for figure. Cold (its own cache folder: the U demos
    are recorded again), about fifteen minutes on two cores."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    docs = {m: S.diff(a, b) for m, a, b, _, _ in S.STUDY}
    assert S.section(docs) == readme_section()
