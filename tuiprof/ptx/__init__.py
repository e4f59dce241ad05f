"""The PTX front end: parse what nvcc/NVRTC emit, analyse control flow, map memory ops to source.

`parse_module` turns PTX text into a `Module` (tuiprof.ptx.module); the analysis module gives the
CFG, immediate post-dominators, bulk-sequence starts and the StaticOp table.
"""

from tuiprof.ptx.module import Module, PtxError
from tuiprof.ptx.parse import parse_module

__all__ = ["Module", "PtxError", "parse_module"]
