"""`tuiprof validate --per-op`: ncu's source page (per SASS instruction, under its source line)
parsed and matched to tuiprof's ops. The fixture tests/ncu/vecadd_source_page.csv is written by
hand to the layout of ``--page source --print-source cuda,sass --csv`` exports that public
scripts rely on, with the source-counter names NVIDIA documents (tests/ncu/README.md), NOT
recorded from a real ncu; its counters are demo vecadd's, counted by
hand (640 warps; two loads and one store of 4 sectors each per warp). Hostile or malformed pages
give one error and one hint, exit 2, through the command line (``--source-csv``, which needs no
GPU). The GPU path (ncu run by validate itself) is marked gpu."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tuiprof.cli.main import main
from tuiprof.collect.gpu.ncu import ValidateError
from tuiprof.validate_ops import SassRow, parse_source_page, source_page_commands

FIXTURE = Path(__file__).resolve().parents[1] / "ncu" / "vecadd_source_page.csv"


def test_the_fixture_parses_into_its_instructions_under_their_lines() -> None:
    rows = parse_source_page(FIXTURE.read_text())
    assert [(r.line, r.instruction.split()[0]) for r in rows] == [
        (5, "S2R"), (5, "S2R"), (5, "IMAD"), (6, "IMAD.WIDE"), (6, "LDG.E"), (6, "LDG.E"), (6, "IADD3"),
        (6, "STG.E"), (7, "EXIT")]
    mem = [r for r in rows if r.kind]
    assert [r.kind for r in mem] == ["load", "load", "store"]
    assert all(r.file.endswith("vecadd.cu") and r.executed == 640 and r.requests == 640 and r.sectors == 2560
               and r.ideal == 2560 and r.excessive == 0 for r in mem)
    assert mem[0].address == "0x7f3a2c000140"


def test_header_spellings() -> None:
    """A header written "# Line","Source","# Address",... (the spelling some ncu versions use for
    their first columns) reads the same."""
    text = FIXTURE.read_text().replace('"Line No","Source","Address"', '"# Line","Source","# Address"', 1)
    assert parse_source_page(text) == parse_source_page(FIXTURE.read_text())


@pytest.mark.parametrize("text, kind", [
    ("LDG.E.128.CONSTANT R4, desc[UR6][R2.64]", "load"), ("@P0 LDG.E R2, [R2.64]", "load"),
    ("@!P1 STG.E.64 [R4.64], R6", "store"), ("LD.E R3, [R4.64]", "load"), ("ST.E [R4.64], R3", "store"),
    ("RED.E.ADD.STRONG.GPU [R2.64], R5", "atomic"), ("ATOMG.E.ADD.STRONG.GPU PT, R3, [R2.64], R5", "atomic"),
    ("LDGSTS.E [R5], [R2.64]", "load"), ("LDS R3, [R2]", None), ("STS [R2], R3", None), ("LDL R1, [R1]", None),
    ("LDC R1, c[0x0][0x28]", None), ("IMAD R2, R3, R4, R5", None), ("", None)])
def test_the_kind_of_a_sass_instruction(text: str, kind: str | None) -> None:
    assert SassRow("k.cu", 1, "0x0", text, 1, 1, 1, 1, 0).kind == kind


HEADER = FIXTURE.read_text().splitlines()[2]
BAD = {
    "empty": ("", "no \"Line No\" header row"),
    "ncu's metrics page": ('"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n"0","k","a","%","1"\n',
                           "no \"Line No\" header row"),
    "SASS only": ('"Address","Source","Instructions Executed"\n"0x10","LDG.E R2, [R2.64]","640"\n',
                  "SASS only, no source lines"),
    "no source counters": ('"Line No","Source","Address","Source","Instructions Executed"\n"6","x","",""," 1"\n',
                           "lacks the columns L2 Theoretical Sectors Global"),
    "ragged row": (HEADER + '\n"6","x"\n', "row 2 of ncu's source page has 2 cells, its header 24"),
    "text in a count": (FIXTURE.read_text().replace('"Load","32","640"', '"Load","32","lots"', 1),
                        "has 'lots' where a count belongs (row 12)"),
    "negative count": (FIXTURE.read_text().replace('"Load","32","640"', '"Load","32","-3"', 1),
                       "has '-3' where a count belongs"),
    "nan count": (FIXTURE.read_text().replace('"Load","32","640"', '"Load","32","nan"', 1),
                  "has 'nan' where a count belongs"),
    "line number not a number": (FIXTURE.read_text().replace('"6","    C[id]', '"six","    C[id]'),
                                 "has the line number 'six'"),
    "instruction before any line": (HEADER + '\n' + FIXTURE.read_text().splitlines()[10] + "\n",
                                    "an instruction under no source line"),
    "no memory instruction": ("\n".join(FIXTURE.read_text().splitlines()[:9]) + "\n",
                              "lists no global memory instruction"),
    "NUL bytes": ("\0\0\0\0", "NUL bytes"),
    "huge field": ('"Line No","Source","Address","Source"\n"' + "x" * 200_000 + '"\n', "not valid CSV"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_malformed_page_is_one_error(case: str) -> None:
    text, message = BAD[case]
    with pytest.raises(ValidateError, match=None) as info:
        parse_source_page(text)
    assert message in info.value.message and info.value.hint


def test_the_source_page_commands() -> None:
    collect, page = source_page_commands("ncu", ["python", "-m", "x"], kernel="_Z1kPf", launch_index=2,
                                         report="/tmp/r/source")
    assert collect[:9] == ["ncu", "--section", "SourceCounters", "--import-source", "yes", "--cache-control", "all",
                           "--launch-skip", "2"]
    assert collect[collect.index("--export") + 1] == "/tmp/r/source"
    assert collect[collect.index("--kernel-name") + 1] == "_Z1kPf" and collect[-4:] == ["--", "python", "-m", "x"]
    assert page == ["ncu", "--import", "/tmp/r/source.ncu-rep", "--csv", "--page", "source", "--print-source",
                    "cuda,sass"]


def test_per_op_table_for_vecadd(capsys: pytest.CaptureFixture[str]) -> None:
    """Through the command line, no GPU: demo vecadd against the fixture. Hand counts: line 6's
    two loads are 2/3 of the kernel's sectors on both sides (2 x 2,560 of 7,680; 2 x 640 x 4 of
    3 x 640 x 4 in the trace), its store 1/3, 4.00 sectors per request everywhere, none
    excessive. Each load's line is read once, so the predicted L1 hit ratio is 0."""
    assert main(["validate", "vecadd", "--source-csv", str(FIXTURE), "--trials", "4", "--no-sweep"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    load = next(ln for ln in lines if ln.startswith("vecadd.cu:6") and " load " in ln)
    store = next(ln for ln in lines if ln.startswith("vecadd.cu:6") and " store " in ln)
    assert load.split()[:11] == ["vecadd.cu:6", "load", "0,1", "2", "4.00", "4.00", "0.0%", "0.0%", "66.7%", "66.7%",
                                 "0.0%"]
    assert store.split()[:10] == ["vecadd.cu:6", "store", "2", "1", "4.00", "4.00", "0.0%", "0.0%", "33.3%", "33.3%"]
    assert "2 of 2 line(s) on both sides: mean |sectors/request error| 0.00, mean |sector share error| 0.0 points" in out


@pytest.mark.parametrize("case", ["ragged row", "SASS only", "NUL bytes", "text in a count"])
def test_a_malformed_page_through_the_command_line(case: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "page.csv"
    path.write_text(BAD[case][0])
    assert main(["validate", "vecadd", "--source-csv", str(path), "--trials", "2", "--no-sweep"]) == 2
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), err
    assert BAD[case][1] in lines[0] or BAD[case][1] in err


def test_not_a_trace_or_not_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "vecadd", "--source-csv", str(tmp_path / "missing.csv")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and err[0].startswith("error: cannot read ") and err[1].startswith("hint: ")
    (tmp_path / "latin.csv").write_bytes(b"\xff\xfe\xfa")
    assert main(["validate", "vecadd", "--source-csv", str(tmp_path / "latin.csv")]) == 2
    assert "is not UTF-8 text" in capsys.readouterr().err
    shutil.copy(FIXTURE, tmp_path / "p.csv")
    assert main(["validate", "nothing-here", "--source-csv", str(tmp_path / "p.csv")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: --source-csv compares a recorded trace") and err[1].startswith("hint: ")


STAND_IN = """#!{python}
import os, sys
args = sys.argv[1:]
if "--export" in args:
    assert os.environ.get("TUIPROF_JIT_LINEINFO") == "1", "the plain run must keep line information"
    if {fail_collect}:
        print("==ERROR== Failed to profile: ERR_NVGPUCTRPERM-like trouble")
        sys.exit(1)
    open(args[args.index("--export") + 1] + ".ncu-rep", "w").write("report")
    sys.exit(0)
sys.stdout.write(open({page!r}).read())
"""


@pytest.mark.parametrize("fail_collect, page, error", [
    (False, FIXTURE, None),
    (True, FIXTURE, "ncu could not collect the source counters (status 1)"),
    (False, Path(__file__), "no \"Line No\" header row"),
])
def test_the_source_page_run_with_a_stand_in_ncu(tmp_path: Path, fail_collect: bool, page: Path,
                                                 error: str | None) -> None:
    """validate --per-op's ncu runs (`tuiprof.cli.gpu._source_page`) against a stand-in: the
    plain run is asked for line information, the printed page is parsed; a failed collection or a
    page that is not one is one ValidateError."""
    import sys

    from tuiprof.cli.gpu import _source_page

    ncu = tmp_path / "ncu"
    ncu.write_text(STAND_IN.format(python=sys.executable, fail_collect=fail_collect, page=str(page)))
    ncu.chmod(0o755)
    if error is None:
        rows = _source_page(str(ncu), ["prog"], "kernel_vec_add", 0)
        assert rows == parse_source_page(FIXTURE.read_text())
    else:
        with pytest.raises(ValidateError) as info:
            _source_page(str(ncu), ["prog"], None, 0)
        assert error in info.value.message and info.value.hint


@pytest.mark.gpu
def test_per_op_on_the_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU with ncu: validate vecadd --per-op prints a row for line 6's loads with ncu's
    4.00 sectors per request (the JIT keeps line information, ncu's page names the lines)."""
    from tuiprof.collect.gpu.driver import gpu_problem
    from tuiprof.collect.gpu.ncu import find_ncu

    if gpu_problem() is not None or find_ncu() is None:
        pytest.skip("needs a GPU and ncu")
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "vecadd", "--per-op", "--trials", "4", "--no-sweep"]) == 0
    out = capsys.readouterr().out
    load = next(ln for ln in out.splitlines() if ln.startswith("vecadd.cu:6") and " load " in ln)
    assert load.split()[4] == "4.00" and load.split()[5] == "4.00"
