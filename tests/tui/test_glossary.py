"""Every term the screen shows is defined (issue 27): the glossary (`tuiprof.glossary`) is the one
source of the help screen's terms and of docs/glossary.md; the abbreviations and units on the main
screen, the drill-down and the model pane are all in it; the README cites the papers it defines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.fixed_analysis import fixed_app
from tests.support.tui_support import screen_text
from tuiprof.glossary import GLOSSARY, REFERENCES, glossary_markdown, retag, terms

ROOT = Path(__file__).resolve().parents[2]

ABBREVIATION = re.compile(r"(?<![\w\[.])(#\d+|w\d+|σ|[A-Z][A-Z0-9_]*\d*|[A-Z][a-z]\w*_\w+|Tm|cyc|pts|s/r|shm|cst"
                          r"|ms|us)(?![\w\]\(.:/])")
"""What a newcomer would have to look up: ranks, capitals (H1, MD, MWP, DRAM, X), Mem_LD-like
names, and the short units; words in ordinary English are not matched."""
NOT_TERMS = {"CTAs", "SMs", "I", "A"}
"""Plurals of defined terms and English words in capitals."""


def defined() -> set[str]:
    words: set[str] = set()
    for t in terms():
        words.add(t)
        words.update(re.findall(r"[#\w/σ]+", t))
    return words


def unexplained(text: str) -> set[str]:
    known = defined()
    found = {"#1" if m.startswith("#") else "w1" if re.fullmatch(r"w\d+", m) else m
             for m in ABBREVIATION.findall(text)}
    return {m for m in found if m not in known and m not in NOT_TERMS and not m.startswith("Fig")}


def without_code(screen: str) -> str:
    """The screen less the source code (its identifiers are the user's, not tuiprof's words): on a
    row with the gutter, what lies between the gutter's │ and the side panes' ▏; the footer's keys."""
    lines = screen.splitlines()
    head = next((ln for ln in lines if " ln H1%" in ln and "│" in ln), "")
    col = head.index("│") if head else 19  # the gutter is wider with a baseline (its ΔX column)
    out = []
    for line in lines:
        if "? Help" in line:  # the footer: keys, which the help screen explains
            continue
        if len(line) > col and line[col] == "│":
            line = line[:col] + (line[line.index("▏"):] if "▏" in line else "")
        out.append(line)
    return "\n".join(out)


def test_docs_glossary_is_generated_from_the_module() -> None:
    assert (ROOT / "docs" / "glossary.md").read_text() == glossary_markdown(), \
        "run: python -m tuiprof.glossary > docs/glossary.md"


def test_terms_are_unique_and_defined() -> None:
    names = [t.term for _, group in GLOSSARY for t in group]
    assert len(names) == len(set(names))
    assert all(t.meaning and not t.meaning.endswith(".") for _, group in GLOSSARY for t in group)
    for needed in ("MD", "MWP", "CWP", "H1", "H2", "X", "t1", "t2", "Tm", "pts", "thesis rules", "#1", "w1", "σ", "CI"):
        assert needed in defined(), needed


def test_readme_cites_every_reference_by_its_tag() -> None:
    readme = (ROOT / "README.md").read_text()
    refs = readme[readme.index("## References"):]
    for r in REFERENCES:
        assert f"**{r.tag}**" in refs and r.title.split(":")[0][:40] in " ".join(refs.split()), r.tag
    assert "paper 00" not in readme and all("paper 00" not in p.read_text() for p in (ROOT / "docs").glob("*.md"))


def test_old_paper_numbers_become_tags() -> None:
    assert retag("84 CTAs (paper 000 sec. 3.1), paper 002's rules") == "84 CTAs (Baghsorkhi12 sec. 3.1), Yen14's rules"
    from tuiprof.trace.io import _reworded

    old = "16 consecutive CTAs from CTA 0 (paper 000 sec. 3.1): 0.0185 x the 864 CTAs (110592 threads) that run"
    assert _reworded(old) == ("16 consecutive CTAs from CTA 0 (Baghsorkhi12 sec. 3.1): 1.9% of the 864 CTAs "
                              "(110592 threads) that run")
    assert _reworded("336 consecutive CTAs: 4 x the 84 CTAs") == "336 consecutive CTAs: 4 x the 84 CTAs"


def test_the_matcher_finds_what_it_should() -> None:
    assert unexplained("#1 op 2 · H1 0.2% · X 660 cyc · QQ9 and Foo_bar") == {"QQ9", "Foo_bar"}
    assert unexplained("load indices[j] in the L1 (NVRTC)") == {"NVRTC"}


pytest.importorskip("textual")


async def test_every_term_on_the_screen_is_in_the_glossary() -> None:
    """The main screen with every pane beside the source, the drill-down of #1, and the help
    screen's own term list (which must show the glossary)."""
    app = fixed_app("spmv-u")
    async with app.run_test(size=(190, 48)) as pilot:
        await pilot.pause(0.3)
        main = without_code(screen_text(app))
        assert "MD decision" in main and "#1" in main and "H1" in main
        await pilot.press("enter")
        await pilot.pause(0.3)
        drill = without_code(screen_text(app))
        await pilot.press("escape", "b")      # a baseline: the Δ columns and fields
        await pilot.pause(0.5)
        compared = without_code(screen_text(app))
        assert "Δ" in compared
        await pilot.press("question_mark")
        await pilot.pause(0.3)
        from tuiprof.tui.screens.modals import HelpScreen

        assert isinstance(app.screen, HelpScreen)
        assert any(title.startswith("Terms: ") for title, _ in app.screen.groups)
        shown = {k for _, rows in app.screen.groups for k, _ in rows}
        assert {t.term for _, group in GLOSSARY for t in group} <= shown
    missing = unexplained(main) | unexplained(drill) | unexplained(compared)
    assert not missing, f"on screen but not in tuiprof/glossary.py: {sorted(missing)}"
