"""The GPU accuracy session (benchmarks/gpu_accuracy.sh, .py, fold_measured.py) exercised without
a GPU: the dry run's plan (every demo, every micro-kernel, the granularity settings, metrics
checked first, caches flushed, the budget), the per-step caps and the budget with stand-in
commands, the driver against a stand-in ncu (its metric list filters the request; a metric it
refuses is dropped and the step run again), and the fold into measured.json on ncu CSV written
by hand to NVIDIA's documented ``--csv`` layout (one row per metric: "ID", ..., "Kernel Name",
..., "Metric Name", "Metric Unit", "Metric Value"), not recorded from a real ncu. What only a GPU
can check: that the ncu at hand accepts these command lines and metric names, and the values."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import fold_measured
import gpu_accuracy

from tuiprof.collect.gpu.ncu import METRICS, RESEARCH, metric_base
from tuiprof.demos import CATALOGUE


def dry_run(tmp_path: Path, **env: str) -> str:
    e = dict(os.environ, OUT=str(tmp_path / "out"), GA_WORK=str(tmp_path / "w"), PYTHONPATH=str(ROOT), **env)
    r = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_accuracy.sh"), "--dry-run"], capture_output=True,
                       text=True, cwd=ROOT, env=e, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout


def steps_of(text: str) -> dict[str, str]:
    return {ln[1:ln.index("]")]: ln for ln in text.splitlines() if ln.startswith("[") and " cap " in ln}


def test_the_dry_run_plans_every_measurement(tmp_path: Path) -> None:
    text = dry_run(tmp_path)
    steps = steps_of(text)
    names = list(steps)
    assert names[:2] == ["metrics", "fetch-granularity"]  # names checked before any profile
    assert "ncu --query-metrics" in steps["metrics"]
    for demo in CATALOGUE:
        assert f"ncu-demo:{demo}" in steps
    micro = {p.stem for p in (ROOT / "benchmarks" / "micro").glob("*.cu")}
    covered = {s.split(":")[1].split("-")[0] for s in names if s.startswith("ncu-micro:")}
    assert covered | {"partition_map"} == micro == {"neighbour_sector", "chase", "streaming", "partial_store",
                                                     "l1_sweep", "partition_map"}
    # the partition map: the probes alone, one pass of the fabric counters, caches kept from the warm launch
    pmap = steps["ncu-map:partition"]
    assert "--cache-control none" in pmap and "--kernel-name probe" in pmap and "--launch-count 131" in pmap
    assert "MICRO_SMS=132" in pmap and "--metrics " + gpu_accuracy.MAP_METRICS in pmap
    assert "MICRO_FOOTPRINT_KIB=25600" in steps["ncu-micro:chase-25MiB"]
    assert "MICRO_FOOTPRINT_KIB=51200" in steps["ncu-micro:chase-50MiB"]
    assert "MICRO_CTAS=512" in steps["ncu-micro:l1_sweep"] and "--launch-count 8" in steps["ncu-micro:l1_sweep"]
    for subject in ("neighbour_sector", *gpu_accuracy.GRANULARITY_DEMOS):
        for g in (32, 64, 128):
            assert f"TUIPROF_L2_FETCH_GRANULARITY={g}" in steps[f"ncu-gran:{subject}:{g}"]
    for name, line in steps.items():
        if name.startswith("ncu-") and name != "ncu-map:partition":
            assert "--cache-control all" in line and "--metrics <metrics>" in line and "--plain-run" in line
        if name.startswith("source:"):
            assert "TUIPROF_JIT_LINEINFO=1" in line and "--section SourceCounters" in line
    assert sum(ln.startswith("[source:") and "--print-source cuda,sass" in ln for ln in text.splitlines()) == 3
    asked = next(ln for ln in text.splitlines() if ln.startswith("metrics asked")).split(": ", 1)[1].split(",")
    assert set(METRICS) | set(RESEARCH) <= set(asked)
    assert "dram__sectors_read.sum" in asked and "launch__shared_mem_config_size" in asked
    expected = int(text.split("expected ")[1].split(" s")[0])
    assert expected <= 540  # the default budget holds the whole plan as estimated
    assert "fold_measured.py" in text


def test_skipping_and_the_budget_in_the_dry_run(tmp_path: Path) -> None:
    text = dry_run(tmp_path, GA_SKIP="ncu-demo per-op", GA_BUDGET="300")
    steps = steps_of(text)
    assert not any(s.startswith("ncu-demo:") or s == "per-op" for s in steps) and "ncu-micro:chase-25MiB" in steps
    assert text.count("budget 300 s") == 1


def test_caps_and_budget(tmp_path: Path) -> None:
    """A step past its cap is killed (status 124) with whatever it started; a step that finds
    less than MIN_STEP seconds left is skipped and says so; results.json is kept after each."""
    slow = gpu_accuracy.Step("per-op", 2, (sys.executable, "-c", "import time; time.sleep(60)"), kind="per-op")
    never = gpu_accuracy.Step("per-op-2", 5, (sys.executable, "-c", "print(1)"), kind="per-op")
    results = gpu_accuracy.run([slow, never], tmp_path, budget=gpu_accuracy.MIN_STEP + 1, skip=[])
    first, second = results["steps"]
    assert first["rc"] == 124 and second == {"name": "per-op-2", "cap": 5, "skipped": "out of time"}
    assert json.loads((tmp_path / "results.json").read_text())["steps"][0]["rc"] == 124


FAKE_NCU = r'''#!{python}
import sys
import tarfile
KNOWN = {known!r}
REFUSED = "lts__t_sectors_srcunit_ltcfabric_op_write"
args = sys.argv[1:]
if args == ["--query-metrics"]:
    print("Device GH100 (GH100)\n----\nMetric Name                 Metric Type  Metric Unit  Metric Description")
    for m in KNOWN:
        print(f"{{m:<60}} Counter  sector  some words")
    sys.exit(0)
if "--export" in args:  # the source counters' collection run: a report file
    open(args[args.index("--export") + 1] + ".ncu-rep", "w").write("report")
    sys.exit(0)
if "--import" in args:  # the source page printed from it
    assert args[args.index("--print-source") + 1] == "cuda,sass" and open(args[args.index("--import") + 1]).read()
    sys.stdout.write(open("{page}").read())
    sys.exit(0)
metrics = args[args.index("--metrics") + 1].split(",")
log = args[args.index("--log-file") + 1]
with open("{calls}", "a") as fh:
    fh.write(",".join(metrics) + "\n")
if any(m.startswith(REFUSED) for m in metrics):
    open(log, "w").write("==ERROR== Failed to find metric " + REFUSED + ".sum\n")
    sys.exit(1)
head = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
        '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')
rows = [head]
for lid in range(int(args[args.index("--launch-count") + 1])):
    for m in metrics:
        unit = "%" if m.endswith(".pct") else "sector"
        value = "50" if m.endswith(".pct") else "1,024"
        rows.append(f'"{{lid}}","77","python3","gpu01","k{{lid}}","1","7","(256, 1, 1)","(16, 1, 1)","0","9.0",'
                    f'"Command line profiler metrics","{{m}}","{{unit}}","{{value}}"')
open(log, "w").write("\n".join(rows) + "\n")
'''


def test_the_driver_against_a_stand_in_ncu(tmp_path: Path) -> None:
    """The whole plan but the last step against a stand-in ncu (the granularity query fails here:
    no GPU). The listing lacks gpu__time_duration: it is never asked; it lacks the launch__
    attributes too, which are asked all the same (not counters). The stand-in refuses the
    fabric's write counter at run time: the first step drops it and runs again, and no later
    step asks for it; every step's CSV is kept."""
    known = sorted({metric_base(m) for m in gpu_accuracy.WANTED if not m.startswith("launch__")}
                   - {"gpu__time_duration"})
    calls = tmp_path / "calls.txt"
    ncu = tmp_path / "ncu"
    fixture = ROOT / "tests" / "ncu" / "source_vecadd.csv"
    ncu.write_text(FAKE_NCU.format(python=sys.executable, known=known, calls=calls, page=fixture))
    ncu.chmod(ncu.stat().st_mode | stat.S_IXUSR)
    out = tmp_path / "out"
    assert gpu_accuracy.main(["--out", str(out), "--ncu", str(ncu), "--budget", "400", "--skip", "per-op"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["metrics"]["missing"] == ["gpu__time_duration.sum"]
    calls_made = calls.read_text().splitlines()
    asked = [a for a in calls_made if a != gpu_accuracy.MAP_METRICS]  # the partition map asks its own four
    assert len(asked) == len(calls_made) - 1
    assert all("launch__shared_mem_config_size" in a for a in asked)
    ncu_steps = [s for s in results["steps"] if s["name"].startswith("ncu-")]
    assert len(calls_made) == len(ncu_steps) + 1  # the first step: refused once, then run again
    assert all("gpu__time_duration.sum" not in a for a in asked)
    assert "lts__t_sectors_srcunit_ltcfabric_op_write.sum" in asked[0]
    assert all("lts__t_sectors_srcunit_ltcfabric_op_write.sum" not in a for a in asked[1:])
    micro = {m["name"]: m for m in results["measurements"] if m["subject"] == "micro" and m["granularity"] is None}
    assert set(micro) == {s for s, *_ in gpu_accuracy.MICRO_RUNS} | {"partition_map"}
    demos = {m["name"] for m in results["measurements"] if m["subject"] == "demo" and m["granularity"] is None}
    assert demos == set(CATALOGUE)
    grans = {(m["name"], m["granularity"]) for m in results["measurements"] if m["granularity"]}
    assert grans == {(n, g) for n in ("neighbour_sector", *gpu_accuracy.GRANULARITY_DEMOS) for g in (32, 64, 128)}
    # no GPU here: the granularity query fails and says so; the source pages are saved as printed
    assert results["l2_fetch_granularity"] == {"default": None, "32": None, "64": None, "128": None}
    assert next(s for s in results["steps"] if s["name"] == "fetch-granularity")["rc"] == 1
    assert results["source_pages"] == {n: f"ncu/source_{n}.csv" for n in gpu_accuracy.SOURCE_DEMOS}
    assert (out / "ncu" / "source_vecadd.csv").read_text() == fixture.read_text()
    first = next(s for s in results["steps"] if s["name"] == "ncu-micro:neighbour_sector")
    assert first["rc"] == 0 and first["dropped"] == ["lts__t_sectors_srcunit_ltcfabric_op_write.sum"]
    folded, notes = fold_measured.fold(results, out, {}, gpu="GPU X")
    assert notes == []
    assert set(folded["GPU X"]["demos"]) == set(CATALOGUE) and folded["GPU X"]["demos"]["bfs"]["l2_read"] == 0.5
    pmap = folded["GPU X"]["sm_partition"]  # SM 0, then the 131 probed
    assert len(pmap["partition"]) == len(pmap["fabric_share"]) == 132 and pmap["partition"][0] == 0
    sweep = folded["GPU X"]["micro"]["l1_sweep"]
    assert len(sweep["launches"]) == 8 and sweep["env"]["MICRO_CTAS"] == "512"
    assert sweep["launches"][3]["values"]["l1_read"] == 0.5
    assert sweep["launches"][3]["counters"]["dram__sectors_read.sum"] == 1024.0


# ncu --csv rows (NVIDIA's documented layout), written by hand for the fold's test.
HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def csv_text(launches: list[tuple[str, dict[str, tuple[str, str]]]]) -> str:
    rows = ["==PROF== Connected to process 4242 (/usr/bin/python3)", HEADER]
    for lid, (kernel, metrics) in enumerate(launches):
        for name, (unit, value) in metrics.items():
            rows.append(f'"{lid}","4242","python3","gpu01","{kernel}","1","7","(256, 1, 1)","(512, 1, 1)","0","9.0",'
                        f'"Command line profiler metrics","{name}","{unit}","{value}"')
    return "\n".join(rows) + "\n"


def headline(l1: str, l2: str, w: str, sectors: str, requests: str, dram: str) -> dict[str, tuple[str, str]]:
    return {"l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct": ("%", l1),
            "lts__t_sector_op_read_hit_rate.pct": ("%", l2), "lts__t_sector_op_write_hit_rate.pct": ("%", w),
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": ("sector", sectors),
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": ("request", requests),
            "dram__sectors_read.sum": ("sector", dram), "launch__shared_mem_config_size": ("Kbyte", "32"),
            "lts__t_sectors_srcunit_ltcfabric_op_read.sum": ("sector", "n/a")}


def test_fold_into_measured_json(tmp_path: Path) -> None:
    (tmp_path / "ncu").mkdir()
    (tmp_path / "ncu" / "d.csv").write_text(csv_text([("spmv_csr_scalar", headline("61.5", "70", "99.5", "1,600,000",
                                                                                    "100,000", "2,048,000"))]))
    (tmp_path / "ncu" / "g.csv").write_text(csv_text([("spmv_csr_scalar", headline("61.5", "82", "99.5", "1,600,000",
                                                                                    "100,000", "4,096,000"))]))
    (tmp_path / "ncu" / "s.csv").write_text(csv_text([("read_twice", headline("50", "0", "100", "8", "2", "4")),
                                                      ("read_twice_cs", headline("25", "0", "100", "8", "2", "6"))]))
    (tmp_path / "ncu" / "bad.csv").write_text("==ERROR== The application returned an error code (1).\n")
    results = {
        "date": "2026-12-01", "gpu": {"gpu": "NVIDIA H100 80GB HBM3", "driver": "580"},
        "l2_fetch_granularity": {"default": 64, "32": 32, "64": 64, "128": 128},
        "metrics": {"missing": ["gpu__time_duration.sum"]},
        "steps": [{"name": "ncu-demo:spmv-u", "rc": 0}, {"name": "ncu-demo:bfs", "rc": 124},
                  {"name": "per-op", "skipped": "out of time"}],
        "measurements": [
            {"subject": "demo", "name": "spmv-u", "granularity": None, "csv": "ncu/d.csv", "step": "ncu-demo:spmv-u"},
            {"subject": "demo", "name": "spmv-u", "granularity": 128, "csv": "ncu/g.csv", "step": "ncu-gran:spmv-u:128"},
            {"subject": "micro", "name": "streaming", "granularity": None, "csv": "ncu/s.csv", "step": "ncu-micro:streaming",
             "env": {"MICRO_N": "16777216"}},
            {"subject": "demo", "name": "bfs", "granularity": None, "csv": "ncu/bad.csv", "step": "ncu-demo:bfs"}],
        "source_pages": {"vecadd": "ncu/source_vecadd.csv"}}
    (tmp_path / "results.json").write_text(json.dumps(results))
    before = {"NVIDIA H100 80GB HBM3": {"arch": "h100", "mae_bound": 0.1, "mae_bounds": {"l2_read": 0.21},
                                        "demos": {"spmv-u": {"l1_read": 0.6, "l2_read": 0.5, "l2_write": 1.0,
                                                             "sectors_per_request": 15.0},
                                                  "bfs": {"l1_read": 0.62, "l2_read": 0.61, "l2_write": 0.99}}}}
    into = tmp_path / "measured.json"
    into.write_text(json.dumps(before))
    out = tmp_path / "folded.json"
    assert fold_measured.main([str(tmp_path / "results.json"), "--into", str(into), "--out", str(out)]) == 0
    assert json.loads(into.read_text()) == before  # --out leaves the original alone
    e = json.loads(out.read_text())["NVIDIA H100 80GB HBM3"]
    assert e["mae_bound"] == 0.1 and e["mae_bounds"] == {"l2_read": 0.21} and e["arch"] == "h100"
    assert e["demos"]["spmv-u"] == pytest.approx({"l1_read": 0.615, "l2_read": 0.70, "l2_write": 0.995,
                                                  "sectors_per_request": 16.0})
    assert e["demos"]["bfs"] == before["NVIDIA H100 80GB HBM3"]["demos"]["bfs"]  # its CSV was unreadable: kept
    assert e["counters"]["spmv-u"]["dram__sectors_read.sum"] == 2048000.0
    assert e["counters"]["spmv-u"]["launch__shared_mem_config_size"] == 32.0
    assert "lts__t_sectors_srcunit_ltcfabric_op_read.sum" not in e["counters"]["spmv-u"]  # n/a
    g = e["l2_fetch_granularity"]
    assert g["queried"]["default"] == 64 and g["demos"]["spmv-u"]["128"]["values"]["l2_read"] == pytest.approx(0.82)
    assert g["demos"]["spmv-u"]["128"]["counters"]["dram__sectors_read.sum"] == 4096000.0
    streaming = e["micro"]["streaming"]
    assert [x["kernel"] for x in streaming["launches"]] == ["read_twice", "read_twice_cs"]
    assert [x["values"]["l1_read"] for x in streaming["launches"]] == pytest.approx([0.5, 0.25])
    session = e["accuracy_session"]
    assert session["metrics_missing"] == ["gpu__time_duration.sum"]
    assert session["not_done"] == {"ncu-demo:bfs": "rc 124", "per-op": "out of time"}
    assert session["source_pages"] == {"vecadd": "ncu/source_vecadd.csv"}


def test_fold_needs_a_gpu_name(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text(json.dumps({"measurements": []}))
    with pytest.raises(SystemExit, match="name no GPU"):
        fold_measured.main([str(tmp_path / "results.json"), "--into", str(tmp_path / "m.json")])


def test_the_chase_at_gpu_size_is_one_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 50 MiB chase the session runs: every line's word visited once per pass, back at 0
    after a pass (its launch script's check, here without a GPU)."""
    import importlib.util

    monkeypatch.setenv("MICRO_FOOTPRINT_KIB", str(50 * 1024))
    spec = importlib.util.spec_from_file_location("chase_launch", ROOT / "benchmarks" / "micro" / "chase_launch.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    nxt = mod.cycle()
    lines = 50 * 1024 * 1024 // 128
    targets = nxt[::32]
    assert np.array_equal(np.sort(targets), np.arange(lines, dtype=np.uint32) * 32)  # a permutation of the lines
    j, seen = 0, 0
    for _ in range(lines):
        j = int(nxt[j])
        seen += 1
        if j == 0:
            break
    assert seen == lines and j == 0


def test_the_script_end_to_end_with_a_stand_in_ncu(tmp_path: Path) -> None:
    """The script itself, not dry (no nvidia-smi here: compute capability 9.0 assumed), with the
    stand-in ncu first on PATH and the last step skipped: summary.txt with each stage's status,
    results.json, ncu's CSVs, and the fold into OUT/measured.json, the shipped file untouched."""
    known = sorted({metric_base(m) for m in gpu_accuracy.WANTED})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ncu = bin_dir / "ncu"
    fixture = ROOT / "tests" / "ncu" / "source_vecadd.csv"
    ncu.write_text(FAKE_NCU.format(python=sys.executable, known=known, calls=tmp_path / "calls", page=fixture))
    ncu.chmod(0o755)
    out = tmp_path / "out"
    shipped = (ROOT / "demo_traces" / "measured.json").read_text()
    env = dict(os.environ, OUT=str(out), GA_WORK=str(tmp_path / "w"), GA_SKIP="per-op ncu-gran", GA_GPU="GPU X",
               PATH=f"{bin_dir}:{os.environ['PATH']}")
    r = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_accuracy.sh")], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr
    summary = (out / "summary.txt").read_text()
    assert "driver rc=0" in summary and "fold rc=0" in summary, summary
    results = json.loads((out / "results.json").read_text())
    assert {m["name"] for m in results["measurements"] if m["subject"] == "demo"} == set(CATALOGUE)
    folded = json.loads((out / "measured.json").read_text())
    assert set(folded["GPU X"]["demos"]) == set(CATALOGUE) and set(folded["GPU X"]["micro"]) == {
        s for s, *_ in gpu_accuracy.MICRO_RUNS} | {"partition_map"}
    assert "NVIDIA H100 80GB HBM3" in folded  # the shipped entries stay
    assert (ROOT / "demo_traces" / "measured.json").read_text() == shipped
    # the device tool brings back 8 files at most: ncu's CSVs travel in csv.tgz, and fold again from it
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= 8, sorted(p.name for p in files)
    with tarfile.open(out / "csv.tgz") as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "again", filter="data")
    assert {f"ncu/{m['csv'].split('/')[-1]}" for m in results["measurements"]} <= set(names)
    shutil.copy(out / "results.json", tmp_path / "again" / "results.json")
    refolded, notes = fold_measured.fold(results, tmp_path / "again", {}, "GPU X")
    assert not notes and refolded["GPU X"]["demos"] == folded["GPU X"]["demos"]


def test_the_partition_map_fold() -> None:
    """SM 0, then one probe each (benchmarks/micro/partition_map.cu): a quarter or more of a probe's
    sectors over the fabric puts its SM in the other partition than SM 0's."""
    near, fabric = fold_measured.NEAR, fold_measured.FABRIC
    launches = [{"counters": {near: 1000.0, fabric: f}} for f in (0.0, 510.0, 20.0, 250.0)]
    got = fold_measured.partition_map(launches)
    assert got["partition"] == [0, 0, 1, 0, 1] and got["fabric_share"][2] == 0.51
