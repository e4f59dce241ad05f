"""The JSON report's schema: the file shipped in the package is the one generated from the
TypedDicts of `tuiprof.report_schema`, and real reports (with and without the MD decision, with
the shared-memory and constant sections) validate against it, extra keys included: a key the
report writes and the schema does not know fails here."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

import tuiprof
from tests.support.factories import make_trace
from tuiprof.cli.main import main
from tuiprof.report_schema import SCHEMA_VERSION, json_schema, schema_text
from tuiprof.trace.io import save_trace


def test_the_shipped_schema_is_the_generated_one() -> None:
    shipped = Path(tuiprof.__file__).parent / "report.schema.json"
    assert shipped.read_text() == schema_text(), "run: python -m tuiprof.report_schema > tuiprof/report.schema.json"
    jsonschema.Draft202012Validator.check_schema(json_schema())


def test_the_schema_rejects_what_the_report_never_writes() -> None:
    """The oracle is not vacuous: an unknown key, a missing key and a wrong type each fail."""
    validator = jsonschema.Draft202012Validator(json_schema())
    doc = {"schema_version": SCHEMA_VERSION, "tuiprof": "x", "partial": False, "trace": {}, "arch": {},
           "occupancy": {}, "run": {}, "analysis": None}
    errors = {e.validator for e in validator.iter_errors({**doc, "surprise": 1})}
    assert "additionalProperties" in errors and "required" in errors  # the empty sections miss their keys
    assert any(e.validator == "type" for e in validator.iter_errors({**doc, "partial": "no"}))


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4 one-warp CTAs reading their own lines and lines they share."""
    lane = np.arange(32, dtype=np.uint64) * 4
    rows, warps = [], []
    for c in range(4):
        for k in range(8):
            rows += [0x10000000 + (c * 8 + k) * 128 + lane, 0x20000000 + k * 128 + lane]
            warps += [c, c]
    t = make_trace(rows, warps=warps, starts=(True,), n_ctas=4)
    return save_trace(t, tmp_path_factory.mktemp("s") / "small.tptrace")


@pytest.mark.parametrize("sweep", [("--sweep-trials", "2"), ("--no-sweep",)], ids=["md-decision", "no-sweep"])
def test_a_report_validates_against_the_schema(small_trace: Path, sweep: tuple[str, ...],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(small_trace), "--format", "json", "--arch", "gtx480", "--trials", "2", *sweep]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema_version"] == SCHEMA_VERSION
    assert (doc["analysis"]["decisions"]["md"] is None) == (sweep == ("--no-sweep",))
    jsonschema.validate(doc, json_schema(), cls=jsonschema.Draft202012Validator)


def test_a_report_with_shared_and_constant_ops_validates(capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped transpose-tiled demo has shared-memory ops (their `shared` section)."""
    assert main(["report", "transpose-tiled", "--format", "json", "--trials", "2", "--no-sweep"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert any(o["shared"] is not None for o in doc["analysis"]["ops"])
    jsonschema.validate(doc, json_schema(), cls=jsonschema.Draft202012Validator)
