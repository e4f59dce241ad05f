"""NVRTC in a child process: ``python -m tuiprof.toolchain.nvrtc_child FOLDER``.

NVRTC compiles inside the process that calls it, where no limit can stop it: a source that
includes ``/dev/zero`` by a macro would grow tuiprof itself until the machine ran out of memory.
`tuiprof.toolchain.compilers.compile_nvrtc` therefore runs this module as a compiler of its own,
under `tuiprof.toolchain.child.run_bounded` (memory and time limits, killed with tuiprof).

The request is ``FOLDER/request.json`` (the program's name, the options, the source's file); the
answer is ``FOLDER/result.json`` (the NVRTC status of each step) with the log, the PTX and the
cubin beside it. Imports only cuda-bindings and the standard library.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

REQUEST = "request.json"
RESULT = "result.json"
LOG, PTX, CUBIN = "log.txt", "out.ptx", "out.cubin"


def compile_request(folder: Path) -> dict[str, Any]:
    """Compile the request in `folder`; write the outputs there; return the result."""
    from cuda.bindings import nvrtc

    req = json.loads((folder / REQUEST).read_text(encoding="utf-8"))
    text = (folder / req["source"]).read_bytes()
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    err, prog = nvrtc.nvrtcCreateProgram(text, req["name"].encode(), 0, [], [])
    if err != ok:
        return {"stage": "create", "error": err.name}
    try:
        options = [o.encode() for o in req["options"]]
        err, = nvrtc.nvrtcCompileProgram(prog, len(options), options)
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        if size > 1:
            buf = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, buf)
            (folder / LOG).write_bytes(buf[:req["max_log"]].rstrip(b"\0"))
        if err != ok:
            return {"stage": "compile", "error": err.name}
        err, size = nvrtc.nvrtcGetPTXSize(prog)
        if err != ok or size > req["max_ptx"]:
            return {"stage": "ptx", "error": err.name, "size": int(size)}
        buf = b" " * size
        nvrtc.nvrtcGetPTX(prog, buf)
        (folder / PTX).write_bytes(buf.rstrip(b"\0"))
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        if err == ok and size > 0:
            cubin = b" " * size
            nvrtc.nvrtcGetCUBIN(prog, cubin)
            (folder / CUBIN).write_bytes(cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return {"stage": "done", "error": ""}


def main(argv: list[str]) -> int:
    folder = Path(argv[0])
    result = compile_request(folder)
    (folder / RESULT).write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
