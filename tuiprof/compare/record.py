"""A finished run as a comparison needs it: every per-trial figure, the ops and their sources.

A `RunRecord` is what `tuiprof diff` compares and what the run cache keeps: the per-trial H1,
H2 and X of every accessed op, the kernel-wide hit ratios, Tm and the timing model's kernel time
of each trial (the samples Welch's test needs), plus the report's own plain-data sections of the
run (`tuiprof.report.run_section`, the trace's op table, the kernel time) and the source text
that matching aligns. It is made from a Session and its Analysis in milliseconds, and stored as
one ``.npz`` file (loaded with ``allow_pickle=False``).
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

if TYPE_CHECKING:
    from tuiprof.model.analysis import Analysis
    from tuiprof.session import Session

RECORD_VERSION = 1
HEADLINE_KEYS = ("l1_read", "l2_read", "l2_write")
OP_METRICS = ("h1", "h2", "x")


class RecordError(ValueError):
    """A stored record that cannot be read back (damaged, or of another version)."""


@dataclass(frozen=True, eq=False)
class RunRecord:
    """One finished run (see the module docstring). `meta` is plain JSON data: ``target``,
    ``trace`` (kernel, backend, snapshot), ``run`` (`run_section`), ``ops`` (the op table of
    `trace_section`, with each op's ``kernel`` and ``column``), ``sources`` (name -> text),
    ``time`` (the timing model's headline kernel time, as the report gives it), ``md`` (the MD
    decision's figures, or None), ``trials``, ``elapsed_s``."""

    meta: dict[str, Any]
    op_ids: np.ndarray
    """The ops whose samples are kept (those the snapshot reaches), int64 [k]."""
    op_samples: np.ndarray
    """float64 [3, k, trials]: H1, H2 and X of each kept op in each trial (NaN: undefined)."""
    headline: np.ndarray
    """float64 [3, trials]: the L1 read, L2 read and L2 write hit ratios of each trial."""
    tm: np.ndarray
    """float64 [trials]: the mean DRAM latency of each trial."""
    time: np.ndarray
    """float64 [trials]: the timing model's kernel time (s) of each trial."""

    @property
    def ops(self) -> list[dict[str, Any]]:
        return self.meta["ops"]

    @property
    def sources(self) -> dict[str, str]:
        return self.meta["sources"]

    @property
    def grid_scale(self) -> float:
        """Grid CTAs per snapshot CTA: two versions may record snapshots of different sizes (4 x
        the CTAs resident at once, which the occupancy sets), so counts are compared per grid."""
        launch, ctas = self.meta["trace"]["launch"], self.meta["trace"]["snapshot"]["ctas"]
        return math.prod(launch["grid"]) / max(ctas, 1)

    def grid_accesses(self, op_id: int) -> float:
        """Op `op_id`'s warp accesses in the whole grid (the snapshot's, scaled)."""
        return float(self.ops[op_id]["warp_accesses"]) * self.grid_scale

    def samples(self, op_id: int, metric: str) -> np.ndarray:
        """Per-trial `metric` of op `op_id`: h1, h2, x, or cost (its warp accesses in the whole
        grid x X, cycles); all NaN for an op never reached."""
        row = np.searchsorted(self.op_ids, op_id)
        if row >= self.op_ids.size or self.op_ids[row] != op_id:
            return np.full(self.time.size, np.nan)
        if metric == "cost":
            return self.op_samples[OP_METRICS.index("x"), row] * self.grid_accesses(op_id)
        return self.op_samples[OP_METRICS.index(metric), row]

    def to_bytes(self) -> bytes:
        """The record as an ``.npz`` file's bytes."""
        buf = io.BytesIO()
        meta = np.frombuffer(json.dumps({"version": RECORD_VERSION, **self.meta}, allow_nan=False).encode(), np.uint8)
        np.savez_compressed(buf, meta=meta, op_ids=self.op_ids, op_samples=self.op_samples, headline=self.headline,
                            tm=self.tm, time=self.time)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> "RunRecord":
        """A record from `to_bytes`'s output; RecordError when it is damaged or of another version."""
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                arrays = {k: z[k] for k in ("meta", "op_ids", "op_samples", "headline", "tm", "time")}
            meta = json.loads(arrays.pop("meta").tobytes().decode())
        except (OSError, ValueError, KeyError, EOFError, UnicodeDecodeError, zipfile.BadZipFile) as exc:
            raise RecordError(f"unreadable: {type(exc).__name__}: {exc}") from None
        if not isinstance(meta, dict) or meta.pop("version", None) != RECORD_VERSION:
            raise RecordError("another version")
        trials, k = arrays["time"].shape[0], arrays["op_ids"].shape[0]
        shapes = {"op_samples": (3, k, trials), "headline": (3, trials), "tm": (trials,), "time": (trials,)}
        if any(arrays[n].shape != s or arrays[n].dtype != np.float64 for n, s in shapes.items()) \
                or arrays["op_ids"].ndim != 1 or not _complete(meta, arrays["op_ids"]):
            raise RecordError("inconsistent arrays")
        return cls(meta, **arrays)


def _complete(meta: dict[str, Any], op_ids: np.ndarray) -> bool:
    keys = ("target", "trace", "run", "ops", "sources", "time", "md", "trials", "elapsed_s")
    if not all(k in meta for k in keys) or not isinstance(meta["ops"], list):
        return False
    return all(isinstance(o, dict) and o.get("id") == i for i, o in enumerate(meta["ops"])) \
        and bool(np.all((op_ids >= 0) & (op_ids < len(meta["ops"]))))


def md_figures(analysis: "Analysis") -> dict[str, Any] | None:
    """The MD decision's default and recommended MD and gain (None without a sweep)."""
    d = analysis.decisions
    m = d.md if d is not None else None
    if m is None:
        return None
    return {"default_md": m.default_md, "recommended_md": m.recommended_md,
            "gain": m.gain if math.isfinite(m.gain) else None}


def record_of(session: "Session", analysis: "Analysis", target: str) -> RunRecord:
    """The record of `session`'s finished `analysis`; `target` is how the run is named."""
    from tuiprof.report import _time_row, run_section, trace_section

    if analysis.decisions is None:
        raise RecordError("the run has no timing model (no trial finished)")
    trace = session.trace
    section = cast("dict[str, Any]", trace_section(trace, session.path))  # its ops are reshaped below
    ops = [{**{k: v for k, v in o.items() if k != "ptx"}, "kernel": op.kernel, "column": op.column}
           for o, op in zip(section.pop("ops"), trace.ops)]
    kept = np.array([o["id"] for o in ops if o["warp_accesses"] > 0], dtype=np.int64)
    T = analysis.trials
    op_samples = np.array([[analysis.samples[f"op{j}.{m}"] for j in kept] for m in OP_METRICS],
                          dtype=np.float64).reshape(3, kept.size, T)
    meta = {"target": target, "trace": section, "run": run_section(session), "ops": ops,
            "sources": {s.name: s.text for s in trace.sources}, "time": _time_row(analysis.decisions.time),
            "md": md_figures(analysis), "trials": T, "elapsed_s": round(analysis.elapsed, 3)}
    return RunRecord(meta=meta, op_ids=kept, op_samples=op_samples,
                     headline=np.array([analysis.samples[k] for k in HEADLINE_KEYS], dtype=np.float64).reshape(3, T),
                     tm=np.asarray(analysis.samples["tm"], dtype=np.float64).reshape(T),
                     time=np.asarray(analysis.decisions.time_trials, dtype=np.float64).reshape(T))

