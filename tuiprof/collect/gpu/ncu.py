"""Nsight Compute for `tuiprof validate`: found (`find_ncu`), run on the uninstrumented kernel
(`ncu_command`, `measure`, `plain_run`) and its CSV read (`parse_ncu_csv`, `measured_values`); the
comparison with the prediction is `tuiprof.validate`'s.

ncu runs the *uninstrumented* kernel (the launch script on the program's own PTX, or the
program built by plain nvcc) with caches flushed before it (``--cache-control all``, as the
simulation starts cold) and reports, for the chosen launch:

==========  =========================================================  ====================
key         ncu metric                                                 tuiprof's prediction
==========  =========================================================  ====================
l1_read     l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct     kernel L1 read hit ratio
l2_read     lts__t_sector_op_read_hit_rate.pct                         kernel L2 read hit ratio
l2_write    lts__t_sector_op_write_hit_rate.pct                        kernel L2 write hit ratio
sectors     l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum /           sectors per request of
            l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum            global loads
==========  =========================================================  ====================

The measured values go into the trace's ``provenance.measured`` (ratios in 0..1, the keys the UI's
histogram marks), and `tuiprof validate`'s report puts each prediction, its 95% interval, the
measurement and the absolute error side by side. The CSV parsing follows the layout NVIDIA documents for ``ncu
--csv`` (one row per metric: "ID", ..., "Kernel Name", ..., "Metric Name", "Metric Unit",
"Metric Value"); the test sample was written from that layout, not captured from a real ncu.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tuiprof.errors import TuiprofError
from tuiprof.metrics import BY_KEY, HEADLINE_METRICS
from tuiprof.metrics import METRICS as REGISTRY

HIT_RATES = tuple((m.key, m.ncu[0]) for m in HEADLINE_METRICS)
"""The headline hit ratios' keys and ncu metrics (`tuiprof.metrics`)."""
SECTORS, REQUESTS = BY_KEY["sectors_per_request"].ncu
METRICS = tuple(m for _, m in HIT_RATES) + (SECTORS, REQUESTS)
"""The ncu metrics every validation asks for."""
SHARED_WAVEFRONTS = tuple((m.key, *m.ncu) for m in REGISTRY if m.key.endswith("_wavefronts_per_request"))
"""Shared-memory bank conflicts as Nsight Compute counts them: wavefronts over warp instructions
(`tuiprof.model.shared`)."""
RESEARCH = (
    "dram__sectors_read.sum", "dram__sectors_write.sum",
    "lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum",
    "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum",
    "lts__t_sectors_srcunit_ltcfabric_op_read.sum", "lts__t_sectors_srcunit_ltcfabric_op_read_lookup_hit.sum",
    "lts__t_sectors_srcunit_ltcfabric_op_read_lookup_miss.sum",
    "lts__t_requests_srcunit_tex_op_read.sum", "lts__t_sectors_op_write.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_miss.sum",
    "l1tex__m_xbar2l1tex_read_sectors_mem_lg_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_lg_cmd_read.sum",
    "launch__shared_mem_config_size", "launch__registers_per_thread", "launch__occupancy_limit_shared_mem",
)
"""Raw counters for the accuracy work (issue 24): how many sectors DRAM delivers against the L2's
read misses (the L2's fetch granularity), the reads between the two L2 partitions (ltcfabric),
the L1's lookups, the carve-out the driver chose. Kept as counters, never compared: each metric
the ncu at hand lacks is left out (`usable_metrics`), so one missing name cannot fail the run."""
NCU_HINT = ("install Nsight Compute (it comes with the CUDA toolkit, or from developer.nvidia.com/nsight-compute) "
            "and put ncu on PATH")


class ValidateError(TuiprofError):
    """ncu is missing, refused to profile, or its output cannot be read."""


# --------------------------------------------------------------------------- ncu output


@dataclass(frozen=True)
class NcuLaunch:
    """One profiled launch in ncu's CSV: its ID, kernel name and metric values (None for n/a)."""

    id: str
    kernel: str
    metrics: dict[str, float | None]
    units: dict[str, str]


def _number(text: str) -> float | None:
    t = text.strip().replace(",", "")
    if not t or t.lower() in ("n/a", "nan", "-"):
        return None
    try:
        return float(t)
    except ValueError:
        return None


def parse_ncu_csv(text: str) -> list[NcuLaunch]:
    """The launches in ``ncu --csv`` output (profiler chatter such as ``==PROF==`` lines and the
    program's own output before the header are skipped; columns are found by name, so added
    columns of newer ncu versions do not matter; thousands separators are removed)."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID",')), None)
    if start is None:
        raise ValidateError("ncu printed no CSV table (no line starting with \"ID\")",
                            "ncu may have profiled no kernel: check the kernel name and launch index")
    reader = csv.DictReader(io.StringIO("\n".join(ln for ln in lines[start:] if ln.startswith('"'))))
    need = {"ID", "Kernel Name", "Metric Name", "Metric Value"}
    if not reader.fieldnames or not need <= set(reader.fieldnames):
        raise ValidateError("ncu's CSV lacks the columns " + ", ".join(sorted(need - set(reader.fieldnames or []))),
                            "this ncu prints another layout; please report its version")
    out: dict[str, NcuLaunch] = {}
    for row in reader:
        if row.get("ID") is None or row.get("Metric Name") is None:
            continue
        lid = row["ID"]
        launch = out.get(lid)
        if launch is None:
            launch = out[lid] = NcuLaunch(lid, row.get("Kernel Name") or "", {}, {})
        launch.metrics[row["Metric Name"]] = _number(row.get("Metric Value") or "")
        launch.units[row["Metric Name"]] = row.get("Metric Unit") or ""
    return list(out.values())


def measured_values(launch: NcuLaunch) -> dict[str, float]:
    """The validation keys of one launch: hit ratios in 0..1, global-load sectors per request and
    shared-memory wavefronts per request (keys whose metric ncu could not give are left out)."""
    out: dict[str, float] = {}
    for m in REGISTRY:
        v = m.from_ncu(launch.metrics, launch.units)
        if v is not None:
            out[m.key] = v
    return out


def counters(launch: NcuLaunch) -> dict[str, float]:
    """The `RESEARCH` counters of one launch that ncu gave (raw values, ncu's units)."""
    return {m: float(v) for m in RESEARCH if (v := launch.metrics.get(m)) is not None}


_METRIC_NAME = re.compile(r"\b[a-z0-9]+__[a-z0-9_]+\b")


def metric_base(metric: str) -> str:
    """A metric's base name, without its roll-up or sub-metric (``dram__sectors_read.sum`` ->
    ``dram__sectors_read``), as ``ncu --query-metrics`` lists them."""
    return metric.split(".", 1)[0]


def usable_metrics(wanted: Sequence[str], listing: str | None) -> tuple[str, ...]:
    """The metrics of `wanted` that ``ncu --query-metrics`` (its output `listing`) knows, and the
    ``launch__`` attributes (not counters: a listing may leave them out, and ncu still gives them;
    one refused is dropped by `measure`); all of them when the listing names no metric at all (an
    ncu that printed something else)."""
    if not listing:
        return tuple(wanted)
    known = set(_METRIC_NAME.findall(listing))
    if not known:
        return tuple(wanted)
    return tuple(m for m in wanted if metric_base(m) in known or m.startswith("launch__"))


def query_metrics(ncu: str, timeout: float = 60) -> str | None:
    """``ncu --query-metrics``'s output (the base metrics of the GPU at hand), None if it fails."""
    try:
        r = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout if r.returncode == 0 else None


def missing_metrics(text: str, asked: Sequence[str]) -> set[str]:
    """The metrics of `asked` that ncu's output `text` says it cannot find (``==ERROR== Failed to
    find metric ...``, in whatever words a version uses: each asked name on an error line)."""
    errors = [ln for ln in text.splitlines() if "ERROR" in ln or "rror:" in ln]
    return {m for m in asked for ln in errors if metric_base(m) in ln}


# --------------------------------------------------------------------------- running ncu


def find_ncu() -> str | None:
    """ncu on PATH, else in the toolkit (CUDA_HOME, /usr/local/cuda) or Nsight Compute's folders."""
    found = shutil.which("ncu")
    if found:
        return found
    roots = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    for root in roots:
        if root and (Path(root) / "bin" / "ncu").is_file():
            return str(Path(root) / "bin" / "ncu")
    for base in (Path("/opt/nvidia/nsight-compute"), Path("/usr/local/NVIDIA-Nsight-Compute")):
        if base.is_dir():
            for cand in sorted(base.glob("*/ncu"), reverse=True) + [base / "ncu"]:
                if cand.is_file():
                    return str(cand)
    return None


def ncu_command(ncu: str, program: Sequence[str], *, kernel: str | None, launch_index: int, log: Path,
                metrics: Sequence[str] = METRICS) -> list[str]:
    """ncu on `program` (a command line): the chosen launch only (`launch_index` counts launches
    of `kernel`, a mangled name, or of every kernel when None), caches flushed, CSV to `log`."""
    cmd = [ncu, "--csv", "--cache-control", "all", "--metrics", ",".join(metrics), "--launch-skip",
           str(launch_index), "--launch-count", "1", "--log-file", str(log)]
    if kernel:
        cmd += ["--kernel-name-base", "mangled", "--kernel-name", kernel]
    return cmd + ["--", *program]


def run_ncu(cmd: list[str], timeout: float | None = None) -> str:
    """Run ncu (the program's own output stays on the terminal) and return its CSV text."""
    log = Path(cmd[cmd.index("--log-file") + 1])
    try:
        code = subprocess.run(cmd, timeout=timeout).returncode
    except OSError as exc:
        raise ValidateError(f"cannot run ncu: {exc.strerror}", NCU_HINT) from None
    except subprocess.TimeoutExpired:
        raise ValidateError("ncu took too long", "profile a smaller input") from None
    text = log.read_text(errors="replace") if log.is_file() else ""
    if "ERR_NVGPUCTRPERM" in text:
        raise ValidateError("ncu may not read the GPU's performance counters here (ERR_NVGPUCTRPERM)",
                            "run as root, or ask the administrator to allow profiling "
                            "(NVreg_RestrictProfilingToAdminUsers=0)")
    if code != 0 and '"ID",' not in text:
        raise ValidateError(f"ncu exited with status {code}:\n" + text[-1500:].strip(),
                            "run the same ncu command by hand to see why")
    return text


def measure(ncu: str, command: Callable[[Sequence[str]], list[str]], timeout: float | None = None
            ) -> list[NcuLaunch]:
    """Run ncu with the headline `METRICS` and whatever of `SHARED_WAVEFRONTS` and `RESEARCH` the
    ncu at hand lists; a metric it still refuses is dropped and the run repeated (at most twice),
    so that an optional metric never costs the headline figures."""
    optional = [m for _, w, n in SHARED_WAVEFRONTS for m in (w, n)] + list(RESEARCH)
    extra = list(usable_metrics(optional, query_metrics(ncu)))
    for _ in range(3):
        cmd = command(tuple(METRICS) + tuple(extra))
        try:
            return parse_ncu_csv(run_ncu(cmd, timeout))
        except ValidateError as exc:
            gone = missing_metrics(exc.message, extra)
            if not extra or not gone and not any(m in exc.message for m in METRICS):
                if not extra:
                    raise
                gone = set(extra)  # an error that names none of them: retry with the headline only
            extra = [m for m in extra if m not in gone]
    return parse_ncu_csv(run_ncu(command(METRICS), timeout))


# --------------------------------------------------------------------------- the plain run ncu profiles


def plain_run(source: str, script: str, compute_capability: tuple[int, int], flags: Sequence[str],
              compiler: str, cuda: str) -> None:
    """Run the launch script on the program's own PTX (no probes): what ncu measures."""
    from tuiprof.collect.gpu.device import GpuDevice
    from tuiprof.collect.script import read_launch_script
    from tuiprof.ptx import parse_module
    from tuiprof.toolchain import build_program

    program = build_program(source, compute_capability=compute_capability, flags=flags, compiler=compiler)
    with GpuDevice(program, parse_module(program.ptx), mode="plain", cuda=cuda) as dev:
        read_launch_script(script).run(dev)


def plain_command(source: str, script: str, compute_capability: tuple[int, int], flags: Sequence[str],
                  compiler: str, cuda: str) -> list[str]:
    """The command line of `plain_run` in a fresh Python (what ncu launches)."""
    return [sys.executable, "-m", "tuiprof.collect.gpu.ncu", "--plain-run", source, script,
            f"{compute_capability[0]}.{compute_capability[1]}", compiler, cuda, *flags]


def plain_binary(nvcc_args: Sequence[str], binary: Path, cwd: Path) -> Path:
    """The program built by plain nvcc (the same arguments), beside its instrumented metadata."""
    from tuiprof.toolchain.locate import find_nvcc

    out = binary.with_name(binary.name + ".tuiprof") / "plain"
    if out.is_file():
        return out
    nvcc = find_nvcc()
    if nvcc is None:
        raise ValidateError("nvcc is needed to build the uninstrumented program for ncu", "install the CUDA toolkit")
    r = subprocess.run([str(nvcc), *nvcc_args, "-o", str(out)], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise ValidateError(f"the plain build failed:\n{(r.stdout + r.stderr)[-2000:]}", "the same arguments built "
                            "the instrumented program; please report it")
    return out


def _main(argv: list[str]) -> int:
    """``python -m tuiprof.collect.gpu.ncu --plain-run SOURCE SCRIPT CC COMPILER CUDA [FLAGS...]``."""
    if len(argv) < 6 or argv[0] != "--plain-run":
        print("usage: python -m tuiprof.collect.gpu.ncu --plain-run SOURCE SCRIPT CC COMPILER CUDA [FLAGS...]",
              file=sys.stderr)
        return 2
    source, script, cc, compiler, cuda, *flags = argv[1:]
    major, minor = (int(x) for x in cc.split("."))
    try:
        plain_run(source, script, (major, minor), flags, compiler, cuda)
    except TuiprofError as exc:
        print(exc.render(), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

