"""The accuracy session of issue 24 on a lent GPU: ncu on every demo and on the micro-kernels of
benchmarks/micro/, the L2's fetch granularity queried and set, ncu's source pages for the per-op
comparison; everything into ``results.json`` beside ncu's CSV files, for
``benchmarks/fold_measured.py`` to fold into demo_traces/measured.json. Run by
benchmarks/gpu_accuracy.sh (which says how); ``--dry-run`` prints the plan, commands and time
caps without running anything (tests/gpu/test_gpu_accuracy.py checks it).

    python benchmarks/gpu_accuracy.py --out DIR [--budget SECONDS] [--cc 9.0] [--skip NAME ...] [--dry-run]

Each step runs under its own cap and the time left (a step that finds less than `MIN_STEP`
seconds left is skipped and recorded so): a slow step cannot eat the rest. Steps, most needed
first (names as ``--skip`` takes them; a prefix skips a group, ``ncu-demo`` all the demos):

  metrics              ``ncu --query-metrics``: every metric name checked against the ncu at hand
                       (``launch__`` attributes are kept: they are not counters; one refused later
                       is dropped at its first step and never asked again)
  fetch-granularity    cudaLimitMaxL2FetchGranularity: the default, then set to 32, 64, 128 B
  ncu-micro:NAME       ncu on each micro-kernel at GPU size (one effect each)
  ncu-map:partition    which SMs share an L2 partition: SM 0 warms a buffer, SM s reads it, for
                       every s; the fabric lookups of each read, caches not flushed
  ncu-gran:NAME:BYTES  the neighbour-sector kernel with the granularity set to 32, 64, 128 B
  source:NAME          ncu's source page (SourceCounters, cuda,sass CSV) of a few demos: per-op data
  ncu-gran:DEMO:BYTES  the SpMV demos with the granularity set
  ncu-demo:NAME        ncu on every demo (caches flushed, the demo's own launch), SpMV first
  per-op               ``tuiprof validate vecadd --per-op`` end to end (records, simulates, compares)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuiprof.collect.gpu.ncu import METRICS, RESEARCH, SHARED_WAVEFRONTS, missing_metrics, usable_metrics
from tuiprof.demos import CATALOGUE
from tuiprof.validate_ops import source_page_commands

MICRO = ROOT / "benchmarks" / "micro"
MIN_STEP = 15
"""A step that finds fewer seconds left than this is skipped."""
GRANULARITIES = (32, 64, 128)
SPMV = ("spmv-u", "spmv-b", "spmv-vec-u", "spmv-vec-b", "spmv-u128", "spmv-b128", "spmv-vec-u128", "spmv-vec-b128")
GRANULARITY_DEMOS = SPMV[:4]
"""The SpMV demos run with the granularity set (all eight with ``--all-spmv``)."""
SOURCE_DEMOS = ("vecadd", "spmv-u", "matmul16")
EXTRA = (
    "lts__t_sectors_op_read.sum", "lts__t_sectors_srcunit_tex_op_write.sum",
    "lts__t_sectors_srcunit_tex_op_write_lookup_hit.sum", "lts__t_sectors_srcunit_tex_op_write_lookup_miss.sum",
    "lts__t_sectors_srcunit_ltcfabric_op_write.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", "launch__grid_size", "launch__block_size",
    "launch__waves_per_multiprocessor", "launch__occupancy_limit_blocks", "gpu__time_duration.sum",
)
"""Counters of this session beyond `tuiprof.collect.gpu.ncu.RESEARCH` (stores, the fabric's writes, the
launch's shape, the kernel's time)."""
WANTED = tuple(dict.fromkeys(METRICS + tuple(m for _, w, n in SHARED_WAVEFRONTS for m in (w, n)) + RESEARCH + EXTRA))

MICRO_RUNS: tuple[tuple[str, str, dict[str, str], int, int], ...] = (
    # (step suffix, kernel file stem, environment, launches ncu profiles, cap in seconds)
    ("neighbour_sector", "neighbour_sector", {"MICRO_N": "1048576"}, 1, 30),
    ("chase-25MiB", "chase", {"MICRO_FOOTPRINT_KIB": str(25 * 1024)}, 1, 40),
    ("chase-50MiB", "chase", {"MICRO_FOOTPRINT_KIB": str(50 * 1024)}, 1, 50),
    ("streaming", "streaming", {"MICRO_N": "16777216"}, 2, 30),
    ("partial_store", "partial_store", {"MICRO_N": "2097152"}, 1, 30),
    ("l1_sweep", "l1_sweep", {"MICRO_CTAS": "512", "MICRO_WINDOWS_KIB": "4,8,16,24,32,48,64,96", "MICRO_REPS": "4"},
     8, 60),
)
"""The micro-kernels at GPU size: inputs past the 50 MiB L2 (the chase at 25 and 50 MiB, the
two L2 partitions' capacity question), the L1 sweep at SpMV's grid of 512 CTAs of 256 threads."""
MAP_SMS = 132
"""SMs the partition map probes (the H100 SXM's; a GPU with fewer profiles fewer launches)."""
MAP_METRICS = ("lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,"
               "lts__t_sectors_srcunit_ltcfabric_op_read.sum,lts__t_sectors_srcunit_ltcfabric_op_read_lookup_hit.sum")
"""The partition map's counters: one pass (kernel replay of a second pass would find the caches its
first left), caches not flushed (the warm launch's lines must stay)."""
METRICS_PLACEHOLDER = "{metrics}"


@dataclass(frozen=True)
class Step:
    """One step: its name, cap (seconds), command line and environment, and what its output is."""

    name: str
    cap: int
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    kind: str = "ncu"
    """metrics | granularity | ncu | source | per-op"""
    meta: dict[str, object] = field(default_factory=dict)
    """For ncu steps: subject ("demo" | "micro"), name, granularity (bytes or None), csv (path in OUT)."""
    estimate: int = 10
    """Seconds it is expected to take on an H100 (ncu's start, the program's CUDA start and build,
    a few replay passes): the dry run sums them against the budget."""


def plain_program(source: Path, script: Path, cc: str) -> list[str]:
    """The uninstrumented run ncu profiles (`tuiprof.collect.gpu.ncu.plain_command`'s command line)."""
    return [sys.executable, "-m", "tuiprof.collect.gpu.ncu", "--plain-run", str(source), str(script), cc, "nvcc",
            "cuda-bindings"]


def ncu_argv(ncu: str, program: list[str], log: str, *, kernel: str | None = None, skip: int = 0,
             count: int = 1, cache: str = "all", metrics: str = METRICS_PLACEHOLDER) -> tuple[str, ...]:
    """ncu on `program`: `count` launches from the `skip`-th (of `kernel`, or of every kernel),
    caches flushed before each (`cache` "none": not), the metrics filled in at run time
    (`METRICS_PLACEHOLDER`) or as given."""
    cmd = [ncu, "--csv", "--cache-control", cache, "--metrics", metrics, "--launch-skip", str(skip),
           "--launch-count", str(count), "--log-file", log]
    if kernel:
        cmd += ["--kernel-name-base", "mangled", "--kernel-name", kernel]
    return tuple(cmd + ["--", *program])


def plan(out: Path, cc: str, ncu: str = "ncu", all_spmv: bool = False) -> list[Step]:
    """Every step, in the order they run (module docstring)."""
    py = sys.executable
    steps = [Step("metrics", 40, (ncu, "--query-metrics"), kind="metrics", estimate=5)]
    query = ("import json; from tuiprof.collect.gpu.driver import gpu_info; i = gpu_info('cuda-bindings'); "
             "print(json.dumps({'gpu': i.name, 'driver': i.driver, 'l2_bytes': i.l2_bytes, "
             "'l2_fetch_granularity': i.l2_fetch_granularity}))")
    steps.append(Step("fetch-granularity", 40, (py, "-c", query), kind="granularity",
                      meta={"settings": [None, *GRANULARITIES]}, estimate=12))

    def demo_step(prefix: str, name: str, cap: int, granularity: int | None = None) -> Step:
        d = CATALOGUE[name]
        tag = f"{name}" + (f":{granularity}" if granularity else "")
        csv = f"ncu/{prefix}_{tag.replace(':', '_')}.csv"
        env = {"TUIPROF_L2_FETCH_GRANULARITY": str(granularity)} if granularity else {}
        program = plain_program(ROOT / "demo_traces" / d.source, ROOT / "demo_traces" / d.script, cc)
        return Step(f"{prefix}:{tag}", cap, ncu_argv(ncu, program, str(out / csv), kernel=d.kernel, skip=d.launch_index),
                    env, meta={"subject": "demo", "name": name, "granularity": granularity, "csv": csv, "launches": 1},
                    estimate=8 if granularity else 10)

    for suffix, stem, env, launches, cap in MICRO_RUNS:
        csv = f"ncu/micro_{suffix}.csv"
        program = plain_program(MICRO / f"{stem}.cu", MICRO / f"{stem}_launch.py", cc)
        steps.append(Step(f"ncu-micro:{suffix}", cap, ncu_argv(ncu, program, str(out / csv), count=launches), env,
                          meta={"subject": "micro", "name": suffix, "granularity": None, "csv": csv, "launches": launches,
                                "env": env}, estimate=cap // 3))
    program = plain_program(MICRO / "partition_map.cu", MICRO / "partition_map_launch.py", cc)
    steps.append(Step("ncu-map:partition", 120, ncu_argv(ncu, program, str(out / "ncu/micro_partition_map.csv"),
                                                         kernel="probe", count=MAP_SMS - 1, cache="none",
                                                         metrics=MAP_METRICS),
                      {"MICRO_SMS": str(MAP_SMS), "MICRO_LINES": "512"},
                      meta={"subject": "micro", "name": "partition_map", "granularity": None,
                            "csv": "ncu/micro_partition_map.csv", "launches": MAP_SMS - 1,
                            "env": {"MICRO_SMS": str(MAP_SMS), "MICRO_LINES": "512"}}, estimate=30))
    for g in GRANULARITIES:
        suffix, stem, env, launches, _ = MICRO_RUNS[0]
        csv = f"ncu/gran_{suffix}_{g}.csv"
        program = plain_program(MICRO / f"{stem}.cu", MICRO / f"{stem}_launch.py", cc)
        steps.append(Step(f"ncu-gran:{suffix}:{g}", 30, ncu_argv(ncu, program, str(out / csv)),
                          {**env, "TUIPROF_L2_FETCH_GRANULARITY": str(g)},
                          meta={"subject": "micro", "name": suffix, "granularity": g, "csv": csv, "launches": 1,
                                "env": env}, estimate=8))
    for name in SOURCE_DEMOS:
        d = CATALOGUE[name]
        program = plain_program(ROOT / "demo_traces" / d.source, ROOT / "demo_traces" / d.script, cc)
        collect, page = source_page_commands(ncu, program, kernel=d.kernel, launch_index=d.launch_index,
                                             report=str(out / "ncu" / f"source_{name}"))
        steps.append(Step(f"source:{name}", 60, tuple(collect), {"TUIPROF_JIT_LINEINFO": "1"}, kind="source",
                          meta={"name": name, "page": page, "csv": f"ncu/source_{name}.csv"}, estimate=12))
    for name in (SPMV if all_spmv else GRANULARITY_DEMOS):
        for g in GRANULARITIES:
            steps.append(demo_step("ncu-gran", name, 30, g))
    order = sorted(CATALOGUE, key=lambda n: (0 if n.startswith("spmv") else 1 if n.startswith("matmul") else 2, n))
    steps += [demo_step("ncu-demo", name, 45) for name in order]
    steps.append(Step("per-op", 150, (py, "-m", "tuiprof", "validate", "vecadd", "--per-op", "--trials", "8",
                                      "--no-sweep", "--trace", str(out / "val_vecadd.tptrace")), kind="per-op",
                      estimate=60))
    return steps


def skipped(name: str, skip: list[str]) -> bool:
    return any(name == s or name.startswith((s + ":", s + "-")) for s in skip)


def render_plan(steps: list[Step], budget: int) -> str:
    """The dry run: each step's cap, environment and command (metrics as asked before the check)."""
    lines = [f"budget {budget} s; {len(steps)} steps; a step with under {MIN_STEP} s left is skipped",
             f"metrics asked (checked against `ncu --query-metrics` first): {','.join(WANTED)}"]
    total = expected = 0
    for s in steps:
        total += s.cap
        expected += s.estimate
        env = " ".join(f"{k}={v}" for k, v in s.env.items())
        argv = " ".join(a if a != METRICS_PLACEHOLDER else "<metrics>" for a in s.argv)
        lines.append(f"[{s.name}] cap {s.cap}s{(' env ' + env) if env else ''}: {argv}")
        if s.kind == "source":
            lines.append(f"[{s.name}] then: {' '.join(s.meta['page'])} > {s.meta['csv']}")  # type: ignore[arg-type]
    lines.append(f"expected {expected} s in all (caps {total} s: the budget cuts the tail, the steps are in priority order)")
    return "\n".join(lines) + "\n"


def run_capped(argv: list[str], env: dict[str, str], cap: float, log: Path) -> tuple[int, str]:
    """Run `argv` in its own process group under `cap` seconds (the whole group killed past it):
    its status (124 on timeout) and its output, also appended to `log`."""
    try:
        proc = subprocess.Popen(argv, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
    except OSError as exc:  # no ncu on PATH, say
        with log.open("a") as fh:
            fh.write(f"### {' '.join(argv)}\ncannot run it: {exc}\n### status 127\n")
        return 127, str(exc)
    try:
        text, _ = proc.communicate(timeout=cap)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the group this call started: ncu and the program it launched
        text, _ = proc.communicate()
        code = 124
    with log.open("a") as fh:
        fh.write(f"### {' '.join(argv)}\n{text}\n### status {code}\n")
    return code, text


def _last_json(text: str) -> dict[str, object] | None:
    """The last line of `text` read as a JSON object, None when it is not one."""
    lines = text.strip().splitlines()
    try:
        value = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def run(steps: list[Step], out: Path, budget: int, skip: list[str]) -> dict[str, object]:
    """Run the steps in order under the budget; the results (see `benchmarks/fold_measured.py`)."""
    end = time.monotonic() + budget
    (out / "ncu").mkdir(parents=True, exist_ok=True)
    log = out / "steps.log"
    records: list[dict[str, object]] = []
    measurements: list[dict[str, object]] = []
    pages: dict[str, str] = {}
    results: dict[str, object] = {"date": time.strftime("%Y-%m-%d", time.gmtime()), "budget_s": budget,
                                  "metrics": {"asked": list(WANTED)}, "steps": records, "measurements": measurements,
                                  "source_pages": pages}
    metrics = list(WANTED)
    for s in steps:
        left = end - time.monotonic()
        record: dict[str, object] = {"name": s.name, "cap": s.cap}
        records.append(record)
        if skipped(s.name, skip):
            record["skipped"] = "--skip"
            continue
        if left < MIN_STEP:
            record["skipped"] = "out of time"
            continue
        cap = min(s.cap, left)
        t0 = time.monotonic()
        if s.kind == "granularity":
            values: dict[str, int | None] = {}
            for g in list(s.meta["settings"]):  # type: ignore[call-overload]
                env = {"TUIPROF_L2_FETCH_GRANULARITY": str(g)} if g else {}
                code, text = run_capped(list(s.argv), env, max(5.0, cap / 4), log)
                info = _last_json(text) if code == 0 else None
                got = None if info is None else info.get("l2_fetch_granularity")
                values["default" if g is None else str(g)] = got if isinstance(got, int) else None
                if info is not None and g is None:
                    results["gpu"] = {k: info.get(k) for k in ("gpu", "driver", "l2_bytes")}
            results["l2_fetch_granularity"] = values
            record["rc"] = 0 if any(v is not None for v in values.values()) else 1
        elif s.kind == "metrics":
            code, text = run_capped(list(s.argv), {}, cap, log)
            record["rc"] = code
            if code == 0:  # launch__ attributes are not counters: a listing may leave them out, ncu still gives them
                listed = set(usable_metrics(WANTED, text))
                metrics = [m for m in WANTED if m in listed or m.startswith("launch__")]
            results["metrics"] = {"asked": list(WANTED), "usable": metrics,  # type: ignore[index]
                                  "missing": [m for m in WANTED if m not in metrics], "listing_ok": code == 0}
        elif s.kind == "ncu":
            asked = list(metrics)
            for attempt in range(2):  # a metric this ncu refuses is dropped and the step run again
                csv = out / str(s.meta["csv"])
                csv.unlink(missing_ok=True)
                argv = [",".join(asked) if a == METRICS_PLACEHOLDER else a for a in s.argv]
                code, text = run_capped(argv, s.env, min(cap, end - time.monotonic()) if attempt else cap, log)
                said = text + (csv.read_text(errors="replace") if csv.is_file() else "")
                gone = missing_metrics(said, [m for m in asked if m not in METRICS])
                if code == 0 or not gone or code == 124:
                    break
                asked = [m for m in asked if m not in gone]
                metrics = [m for m in metrics if m not in gone]  # never asked again in this session
                record["dropped"] = sorted(gone)
            record["rc"] = code
            if csv.is_file():
                measurements.append({**s.meta, "step": s.name, "rc": code})
        elif s.kind == "source":
            code, text = run_capped(list(s.argv), s.env, cap, log)
            if code == 0:
                page_argv = [str(a) for a in s.meta["page"]]  # type: ignore[attr-defined]
                code, text = run_capped(page_argv, {}, max(5.0, end - time.monotonic()), out / "source.log")
                if code == 0:
                    (out / str(s.meta["csv"])).write_text(text)
                    pages[str(s.meta["name"])] = str(s.meta["csv"])
            record["rc"] = code
        else:
            code, _ = run_capped(list(s.argv), s.env, cap, out / "per_op.log")
            record["rc"] = code
        record["seconds"] = round(time.monotonic() - t0, 1)
        (out / "results.json").write_text(json.dumps(results, indent=1))  # kept after every step
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--budget", type=int, default=540, help="seconds for every step together (default 540)")
    ap.add_argument("--cc", default="9.0", help="the GPU's compute capability (default 9.0)")
    ap.add_argument("--ncu", default="ncu")
    ap.add_argument("--skip", action="append", default=[], metavar="NAME")
    ap.add_argument("--all-spmv", action="store_true", help="the granularity runs on all eight SpMV demos")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and run nothing")
    args = ap.parse_args(argv)
    steps = [s for s in plan(args.out.resolve(), args.cc, args.ncu, args.all_spmv)]
    if args.dry_run:
        kept = [s for s in steps if not skipped(s.name, args.skip)]
        sys.stdout.write(render_plan(kept, args.budget))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    results = run(steps, args.out.resolve(), args.budget, args.skip)
    steps_run = results["steps"]
    done = sum(1 for s in steps_run if isinstance(s, dict) and s.get("rc") == 0) if isinstance(steps_run, list) else 0
    print(f"{done} of {len(steps)} steps done; results in {args.out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
