"""The run cache: finished runs kept on disk, so that comparing two runs already made is instant.

A run is keyed by everything its results depend on and nothing else:

- the trace: the digest of the ``.tptrace`` file's bytes (read in milliseconds, without loading
  it), or of a trace's contents when it only exists in memory (a ``.cu`` target just recorded);
- the GPU simulated: every value of the resolved Arch, what-if overrides applied (so an edited
  preset or arch file is a new key);
- the settings that change results: trials, seed, MD, early-stop tolerance, the MD sweep's
  settings (the thread count does not: a run gives the same trials on any number of threads);
- the model itself: a digest of the modules that simulate and analyse (`MODEL_SOURCES`), and the
  version of the record (`RECORD_VERSION`, raised when what a record holds changes), so that a
  changed model never reuses a stale result.

Entries live in ``<user cache>/runs/`` (``XDG_CACHE_HOME``), one ``.npz`` per run, written
atomically through `tuiprof.output`. An entry that cannot be read back is ignored (and replaced
by the next run); the folder is kept under `LIMIT_BYTES` and `LIMIT_ENTRIES`, the least recently
used going first. A cache that cannot be written costs the speed, never the result.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from tuiprof import __version__
from tuiprof.resources import user_cache_dir

if TYPE_CHECKING:
    from tuiprof.arch.spec import Arch
    from tuiprof.compare.record import RunRecord
    from tuiprof.model.analysis import Analysis
    from tuiprof.session import RunConfig, Session
    from tuiprof.trace.data import Trace

MODEL_SOURCES = ("jit.py", "session.py", "sim/*.py", "model/*.py", "arch/*.py", "arch/presets/*.toml",
                 "trace/data.py")
"""The files, relative to the package, whose change may change a run's results (globs)."""
LIMIT_BYTES = 256 << 20
LIMIT_ENTRIES = 256
SUFFIX = ".npz"


@functools.lru_cache(maxsize=1)
def model_digest() -> str:
    """A digest of tuiprof's version and of every file in `MODEL_SOURCES`."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256(__version__.encode())
    for path in sorted({p for pattern in MODEL_SOURCES for p in root.glob(pattern)}):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:20]


def file_digest(path: str | os.PathLike[str]) -> str:
    """The digest of a trace file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return "file:" + h.hexdigest()


def trace_digest(trace: "Trace") -> str:
    """The digest of a trace in memory: its header fields and every array."""
    from tuiprof.trace.io import _launch_json, _op_json

    h = hashlib.blake2b(digest_size=32)
    P = trace.provenance
    header = {"launch": _launch_json(trace.launch), "ops": [_op_json(o) for o in trace.ops],
              "rule": trace.snapshot.rule, "sources": [[s.name, s.text] for s in trace.sources],
              "provenance": [P.backend, P.arch, P.gpu, P.tool_version, P.date, P.generator, P.measured]}
    h.update(json.dumps(header, sort_keys=True, default=str).encode())
    import numpy as np

    from tuiprof.trace.packed import address_blocks

    def update(a: "np.ndarray | None") -> None:
        if a is None:
            h.update(b"-")
            return
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).data.cast("B"))

    for a in (trace.snapshot.cta_ids, trace.warp_offsets, trace.warp_cta, trace.warp_index, trace.op, trace.mask):
        update(a)
    # Every access's lane addresses, as one uint64 [R, 32] array would hash, a block at a time
    # (a loaded trace keeps its shared-memory accesses packed).
    h.update(f"{np.dtype(np.uint64).str}{(trace.n_accesses, 32)}".encode())
    for block in address_blocks(trace):
        h.update(np.ascontiguousarray(block).data.cast("B"))
    for f in dataclasses.fields(trace.ctas):
        update(getattr(trace.ctas, f.name))
    return "trace:" + h.hexdigest()


def run_key(trace: str, arch: "Arch", config: "RunConfig") -> str:
    """The key of a run of the trace with digest `trace` on `arch` (resolved, overrides applied)
    under `config`."""
    settings = {"trials": config.trials, "seed": config.seed, "md": config.md, "tolerance": config.tolerance,
                "sweep": config.sweep, "sweep_trials": config.sweep_trials, "sweep_tolerance": config.sweep_tolerance}
    from tuiprof.compare.record import RECORD_VERSION

    text = json.dumps({"model": model_digest(), "record": RECORD_VERSION, "trace": trace, "arch": arch.to_dict(), "settings": settings},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def cache_dir() -> Path:
    return user_cache_dir() / "runs"


class RunCache:
    """Finished runs by key (see the module docstring)."""

    def __init__(self, folder: Path | None = None, limit_bytes: int = LIMIT_BYTES,
                 limit_entries: int = LIMIT_ENTRIES) -> None:
        self.folder = folder or cache_dir()
        self.limit_bytes = limit_bytes
        self.limit_entries = limit_entries
        self.problem: str | None = None
        """Why the last write failed (None when it did not)."""

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}{SUFFIX}"

    def get(self, key: str) -> "RunRecord | None":
        """The run stored under `key`; None when there is none or it cannot be read back."""
        from tuiprof.compare.record import RecordError, RunRecord

        path = self._path(key)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        try:
            record = RunRecord.from_bytes(data)
        except RecordError:
            return None
        try:
            os.utime(path)  # recently used: kept longest
        except OSError:
            pass
        return record

    def put(self, key: str, record: "RunRecord") -> bool:
        """Store `record` under `key` (atomically), then trim the folder; False (and `problem`
        says why) when it cannot be written."""
        from tuiprof.errors import OutputError
        from tuiprof.output import write_bytes_to

        data = record.to_bytes()
        if len(data) > self.limit_bytes:
            self.problem = "the run is larger than the whole cache"
            return False
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            def write(fh: BinaryIO) -> None:
                fh.write(data)

            write_bytes_to(str(self._path(key)), write)
        except (OSError, OutputError) as exc:
            self.problem = getattr(exc, "message", None) or str(exc)
            return False
        self.problem = None
        self.trim(keep=key)
        return True

    def _entries(self) -> Iterable[tuple[float, int, Path]]:
        for p in self.folder.glob(f"*{SUFFIX}"):
            try:
                st = p.stat()
            except OSError:
                continue
            yield st.st_mtime, st.st_size, p

    def trim(self, keep: str = "") -> None:
        """Remove the least recently used entries beyond the limits (never `keep`)."""
        entries = sorted(self._entries(), reverse=True)
        total = 0
        for i, (_, size, path) in enumerate(entries):
            total += size
            if (i >= self.limit_entries or total > self.limit_bytes) and path.stem != keep:
                try:
                    path.unlink()
                except OSError:
                    pass

    def describe(self) -> dict[str, Any]:
        entries = list(self._entries())
        return {"folder": str(self.folder), "entries": len(entries), "bytes": sum(e[1] for e in entries)}


class SessionRuns:
    """The finished runs of this process (the UI's session) by run key, kept whole (Session and
    Analysis) so that going back to settings seen before (an arch, an MD, a seed) shows that run
    again at once instead of simulating it: the same keys as the run cache, in memory."""

    LIMIT = 8
    """Runs kept (the least recently used go first): each may hold a packing of the trace."""

    def __init__(self) -> None:
        self._runs: OrderedDict[str, tuple["Session", "Analysis"]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> tuple["Session", "Analysis"] | None:
        with self._lock:
            found = self._runs.get(key)
            if found is not None:
                self._runs.move_to_end(key)
            return found

    def put(self, key: str, session: "Session", analysis: "Analysis") -> None:
        with self._lock:
            self._runs[key] = (session, analysis)
            self._runs.move_to_end(key)
            while len(self._runs) > self.LIMIT:
                self._runs.popitem(last=False)

    def __len__(self) -> int:
        return len(self._runs)
