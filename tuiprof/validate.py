"""`tuiprof validate`: the prediction against Nsight Compute's measurement of the same kernel.

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
histogram marks), and the report puts each prediction, its 95% interval, the measurement and the
absolute error side by side. The CSV parsing follows the layout NVIDIA documents for ``ncu
--csv`` (one row per metric: "ID", ..., "Kernel Name", ..., "Metric Name", "Metric Unit",
"Metric Value"); the test sample was written from that layout, not captured from a real ncu.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from tuiprof.errors import TuiprofError

if TYPE_CHECKING:
    from tuiprof.model.analysis import Analysis

HIT_RATES = (("l1_read", "l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct"),
             ("l2_read", "lts__t_sector_op_read_hit_rate.pct"),
             ("l2_write", "lts__t_sector_op_write_hit_rate.pct"))
SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
METRICS = tuple(m for _, m in HIT_RATES) + (SECTORS, REQUESTS)
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
    """The validation keys of one launch: hit ratios in 0..1 and global-load sectors per request
    (keys whose metric ncu could not give are left out)."""
    out: dict[str, float] = {}
    for key, metric in HIT_RATES:
        v = launch.metrics.get(metric)
        if v is not None:
            out[key] = v / 100.0 if launch.units.get(metric, "%") in ("%", "") else v
    sectors, requests = launch.metrics.get(SECTORS), launch.metrics.get(REQUESTS)
    if sectors is not None and requests:
        out["sectors_per_request"] = sectors / requests
    return out


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


def ncu_command(ncu: str, program: Sequence[str], *, kernel: str | None, launch_index: int, log: Path) -> list[str]:
    """ncu on `program` (a command line): the chosen launch only (`launch_index` counts launches
    of `kernel`, a mangled name, or of every kernel when None), caches flushed, CSV to `log`."""
    cmd = [ncu, "--csv", "--cache-control", "all", "--metrics", ",".join(METRICS), "--launch-skip",
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


# --------------------------------------------------------------------------- comparing


@dataclass(frozen=True)
class Comparison:
    """One metric: the prediction (mean and the spread of trials, where one run may fall), the
    measurement, |prediction - measurement|."""

    key: str
    predicted: float
    low: float
    high: float
    measured: float

    @property
    def abs_error(self) -> float:
        return abs(self.predicted - self.measured)

    @property
    def inside(self) -> bool:
        return self.low <= self.measured <= self.high


def predicted_sectors_per_request(analysis: "Analysis") -> float | None:
    """Global-load sectors per request as Nsight Compute counts them (a request is one warp
    instruction: l1tex__t_sectors / l1tex__t_requests), over the snapshot's global loads."""
    sectors = accesses = 0.0
    for s in analysis.ops:
        if s.op.kind == "load" and s.op.space == "global" and s.warp_accesses:
            accesses += s.warp_accesses
            sectors += s.warp_accesses * s.sectors_per_access
    return sectors / accesses if accesses else None


def compare(analysis: "Analysis", measured: dict[str, float]) -> list[Comparison]:
    """Each measured key against the analysis's headline estimate (sectors per request has no
    spread: the snapshot's coalescing is exact, its interval is the value itself)."""
    out: list[Comparison] = []
    for key, _ in HIT_RATES:
        est = analysis.headline.get(key)
        if key in measured and est is not None and est.mean == est.mean:
            out.append(Comparison(key, float(est.mean), float(est.spread_lo), float(est.spread_hi), measured[key]))
    spr = predicted_sectors_per_request(analysis)
    if "sectors_per_request" in measured and spr is not None:
        out.append(Comparison("sectors_per_request", spr, spr, spr, measured["sectors_per_request"]))
    return out


LABELS = {"l1_read": "L1 read hit ratio", "l2_read": "L2 read hit ratio", "l2_write": "L2 write hit ratio",
          "sectors_per_request": "sectors / request (global loads)"}


def render(rows: list[Comparison]) -> str:
    """Prediction against measurement, per metric, with the absolute error (percentage points for
    ratios)."""
    table = [["metric", "predicted", "95% interval", "measured (ncu)", "abs. error", ""]]
    for c in rows:
        if c.key == "sectors_per_request":
            table.append([LABELS[c.key], f"{c.predicted:.2f}", "-", f"{c.measured:.2f}", f"{c.abs_error:.2f}", ""])
        else:
            table.append([LABELS[c.key], f"{100 * c.predicted:.1f}%", f"{100 * c.low:.1f}-{100 * c.high:.1f}%",
                          f"{100 * c.measured:.1f}%", f"{100 * c.abs_error:.1f} pts",
                          "inside" if c.inside else "outside"])
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in table]
    ratios = [c.abs_error for c in rows if c.key != "sectors_per_request"]
    if ratios:
        lines.append(f"mean absolute error of the hit ratios: {100 * sum(ratios) / len(ratios):.1f} percentage points")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the plain run ncu profiles


def plain_run(source: str, script: str, compute_capability: tuple[int, int], flags: Sequence[str],
              compiler: str, cuda: str) -> None:
    """Run the launch script on the program's own PTX (no probes): what ncu measures."""
    from tuiprof.build import build_program
    from tuiprof.collect.gpu import GpuDevice
    from tuiprof.collect.script import read_launch_script
    from tuiprof.ptx import parse_module

    program = build_program(source, compute_capability=compute_capability, flags=flags, compiler=compiler)
    with GpuDevice(program, parse_module(program.ptx), mode="plain", cuda=cuda) as dev:
        read_launch_script(script).run(dev)


def plain_command(source: str, script: str, compute_capability: tuple[int, int], flags: Sequence[str],
                  compiler: str, cuda: str) -> list[str]:
    """The command line of `plain_run` in a fresh Python (what ncu launches)."""
    return [sys.executable, "-m", "tuiprof.validate", "--plain-run", source, script,
            f"{compute_capability[0]}.{compute_capability[1]}", compiler, cuda, *flags]


def plain_binary(nvcc_args: Sequence[str], binary: Path, cwd: Path) -> Path:
    """The program built by plain nvcc (the same arguments), beside its instrumented metadata."""
    from tuiprof.build.toolchain import find_nvcc

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
    """``python -m tuiprof.validate --plain-run SOURCE SCRIPT CC COMPILER CUDA [FLAGS...]``."""
    if len(argv) < 6 or argv[0] != "--plain-run":
        print("usage: python -m tuiprof.validate --plain-run SOURCE SCRIPT CC COMPILER CUDA [FLAGS...]",
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


__all__ = ["Comparison", "HIT_RATES", "METRICS", "NcuLaunch", "ValidateError", "compare", "find_ncu",
           "measured_values", "ncu_command", "parse_ncu_csv", "plain_binary", "plain_command", "plain_run",
           "predicted_sectors_per_request", "render", "run_ncu"]
