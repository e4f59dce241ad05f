"""Fold an accuracy session's results (benchmarks/gpu_accuracy.sh: ``results.json`` and ncu's
CSV files beside it) into demo_traces/measured.json, the file CI checks the prediction against.

    python benchmarks/fold_measured.py OUT/results.json [--into demo_traces/measured.json]
        [--out FILE] [--gpu NAME] [--arch h100]

Per GPU (the name the session read from the driver, or ``--gpu``), into the entry CI reads:

- ``demos.<demo>``: ncu's headline values of the demo at the driver's default fetch granularity
  (L1 read, L2 read and write hit ratios, sectors and wavefronts per request), replacing the
  earlier ones key by key; other demos and keys (``mae_bound``, ``mae_bounds``) are kept, and the
  entry's ``date`` and ``source`` then name this session;
- ``counters.<demo>``: every counter ncu gave for it, raw (research: DRAM sectors, the L2's
  lookups from the L1 and across the two partitions, the carve-out, the launch's shape);
- ``micro.<kernel run>``: per profiled launch of each micro-kernel its kernel, values, counters
  and the environment that sized it; from the partition map's, ``sm_partition`` (`partition_map`);
- ``l2_fetch_granularity``: the value queried (default, and what each setting read back) and, per
  demo or micro-kernel run, the values and counters with the limit set to 32, 64 and 128 B;
- ``accuracy_session``: the date, the metrics the ncu at hand lacked, the steps skipped or failed,
  the source pages saved (for ``tuiprof validate DEMO --source-csv``).

A CSV that cannot be read is reported and left out; the rest is folded. Writes ``--out`` (default:
the ``--into`` file itself), atomically.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuiprof.collect.gpu.ncu import NcuLaunch, ValidateError, measured_values, parse_ncu_csv

MEASURED = ROOT / "demo_traces" / "measured.json"
SOURCE = "benchmarks/gpu_accuracy.sh (ncu --cache-control all, whole kernel)"


def raw_counters(launch: NcuLaunch) -> dict[str, float]:
    """Every metric of the launch that has a value, as ncu gave it."""
    return {m: float(v) for m, v in sorted(launch.metrics.items()) if v is not None}


def launch_record(launch: NcuLaunch) -> dict[str, object]:
    return {"kernel": launch.kernel, "values": measured_values(launch), "counters": raw_counters(launch)}


def _mapping(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _items(value: object) -> list[dict[str, object]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


FABRIC, NEAR = "lts__t_sectors_srcunit_ltcfabric_op_read.sum", "lts__t_sectors_srcunit_tex_op_read.sum"


def partition_map(launches: list[dict[str, object]]) -> dict[str, object]:
    """SM 0's L2 partition and each probed SM's (launch k probes SM k + 1, benchmarks/micro/
    partition_map.cu): 0 where the probe's reads barely crossed the fabric (SM 0's copies served
    them), 1 where a quarter or more of its sectors did (about half are homed in SM 0's partition)."""
    sms, shares = [0], [0.0]
    for launch in launches:
        c = _mapping(launch.get("counters"))
        near = float(c.get(NEAR, 0.0) or 0.0)  # type: ignore[arg-type]
        share = float(c.get(FABRIC, 0.0) or 0.0) / near if near else float("nan")  # type: ignore[arg-type]
        shares.append(round(share, 4))
        sms.append(1 if share >= 0.25 else 0)
    return {"partition": sms, "fabric_share": shares,
            "rule": "SM s shares SM 0's L2 partition when its reads of lines SM 0 just read crossed the fabric for "
                    "under a quarter of their sectors (benchmarks/micro/partition_map.cu)"}


def fold(results: dict[str, object], base: Path, measured: dict[str, dict[str, object]], gpu: str | None = None,
         arch: str = "h100") -> tuple[dict[str, dict[str, object]], list[str]]:
    """`measured` with the session's values folded in (a new dict), and the notes on what was
    left out. `base` is the folder `results`' CSV paths are relative to."""
    notes: list[str] = []
    name = gpu or str(_mapping(results.get("gpu")).get("gpu") or "")
    if not name:
        raise SystemExit("error: the results name no GPU (the fetch-granularity step did not run)\n"
                         "hint: give the GPU's name as measured.json spells it: --gpu 'NVIDIA H100 80GB HBM3'")
    out = json.loads(json.dumps(measured))  # a deep copy
    entry = out.setdefault(name, {"arch": arch, "date": results.get("date", ""), "demos": {}})
    demos, counters = entry.setdefault("demos", {}), entry.setdefault("counters", {})
    micro, gran = entry.setdefault("micro", {}), entry.setdefault("l2_fetch_granularity", {})
    if isinstance(results.get("l2_fetch_granularity"), dict):
        gran["queried"] = results["l2_fetch_granularity"]
    for m in _items(results.get("measurements")):
        path = base / str(m.get("csv"))
        try:
            launches = parse_ncu_csv(path.read_text(errors="replace"))
        except OSError as exc:
            notes.append(f"{m.get('step')}: cannot read {path.name} ({exc.strerror})")
            continue
        except ValidateError as exc:
            notes.append(f"{m.get('step')}: {path.name}: {exc.message}")
            continue
        if not launches:
            notes.append(f"{m.get('step')}: {path.name} holds no launch")
            continue
        g, subject, what = m.get("granularity"), m.get("subject"), str(m.get("name"))
        if subject == "demo" and g is None:
            demos.setdefault(what, {}).update(measured_values(launches[0]))
            counters[what] = raw_counters(launches[0])
            entry["date"], entry["source"] = results.get("date", ""), SOURCE
        elif subject == "demo":
            gran.setdefault("demos", {}).setdefault(what, {})[str(g)] = launch_record(launches[0])
        elif g is None:
            micro[what] = {"env": m.get("env", {}), "launches": [launch_record(x) for x in launches]}
        else:
            gran.setdefault("micro", {}).setdefault(what, {})[str(g)] = [launch_record(x) for x in launches]
    if "partition_map" in micro:
        entry["sm_partition"] = partition_map(_items(_mapping(micro["partition_map"]).get("launches")))
    steps = _items(results.get("steps"))
    metrics = _mapping(results.get("metrics"))
    entry["accuracy_session"] = {
        "date": results.get("date", ""), "source": SOURCE,
        "metrics_missing": metrics.get("missing", []),
        "not_done": {s["name"]: s.get("skipped") or f"rc {s.get('rc')}" for s in steps
                     if s.get("skipped") or s.get("rc") not in (0, None)},
        "source_pages": results.get("source_pages", {})}
    return out, notes


def write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--into", type=Path, default=MEASURED, help="the measured.json to start from")
    ap.add_argument("--out", type=Path, help="where to write (default: --into)")
    ap.add_argument("--gpu", help="the GPU's name when the results lack it")
    ap.add_argument("--arch", default="h100", help="the preset of a GPU new to the file (default h100)")
    args = ap.parse_args(argv)
    try:
        results = json.loads(args.results.read_text())
        measured = json.loads(args.into.read_text()) if args.into.is_file() else {}
    except (OSError, ValueError) as exc:
        print(f"error: cannot read the results or {args.into}: {exc}\nhint: give the results.json the session "
              "wrote", file=sys.stderr)
        return 2
    folded, notes = fold(results, args.results.parent, measured, args.gpu, args.arch)
    target = args.out or args.into
    write_atomically(target, json.dumps(folded, indent=1) + "\n")
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    count = len(_items(results.get("measurements")))
    print(f"folded {count - len(notes)} of {count} measurement(s) into {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
