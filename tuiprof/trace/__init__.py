"""Traces: the model, the .tptrace file, synthetic workloads."""

from tuiprof.trace.data import CtaRecords, Launch, Provenance, Snapshot, SourceFile, StaticOp, Trace

__all__ = ["CtaRecords", "Launch", "Provenance", "SourceFile", "Snapshot", "StaticOp", "Trace"]
