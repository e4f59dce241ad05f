"""Compiled Programs kept on disk, so that reopening an unchanged kernel costs no compile.

The key is a digest of everything the PTX depends on: the source path and text, the paths and
texts of its local headers, the flags, the target and the compiler (name, version and path).
Entries are JSON files under ``<user cache>/build``, written atomically; at most `MAX_ENTRIES`
are kept (least recently used go first). A cache folder that cannot be written, or an entry that
cannot be read, simply means a compile: the cache never fails a build.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from tuiprof.resources import user_cache_dir
from tuiprof.toolchain.program import InputFile, KernelInfo, KernelResources, Program

CACHE_VERSION = 1
MAX_ENTRIES = 256


def cache_dir() -> Path:
    return user_cache_dir() / "build"


def cache_key(source: InputFile, headers: Sequence[InputFile], flags: Sequence[str], target: str,
              compiler: str, compiler_path: str) -> str:
    """The digest naming the cache entry of one compile."""
    doc = {
        "version": CACHE_VERSION,
        "compiler": [compiler, compiler_path],
        "target": target,
        "flags": list(flags),
        "files": [[f.path, hashlib.sha256(f.text.encode("utf-8", "surrogatepass")).hexdigest()]
                  for f in (source, *headers)],
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:40]


def to_json(program: Program) -> str:
    return json.dumps({"version": CACHE_VERSION, "program": asdict(program)})


def from_json(text: str) -> Program | None:
    """The Program stored in `text`, or None when it is not a valid entry of this version."""
    try:
        doc = json.loads(text)
        if doc.get("version") != CACHE_VERSION:
            return None
        p = doc["program"]
        kernels = tuple(
            KernelInfo(k["name"], k["demangled"],
                       None if k["resources"] is None else KernelResources(**k["resources"]))
            for k in p["kernels"])
        return Program(ptx=p["ptx"], compiler=p["compiler"], target=p["target"],
                       requested=tuple(p["requested"]), flags=tuple(p["flags"]),
                       source=InputFile(**p["source"]), headers=tuple(InputFile(**h) for h in p["headers"]),
                       kernels=kernels, resources_from=p["resources_from"], log=p["log"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def load(key: str) -> Program | None:
    path = cache_dir() / f"{key}.json"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    program = from_json(text)
    if program is not None:
        try:
            os.utime(path)
        except OSError:
            pass
    return program


def store(key: str, program: Program) -> None:
    """Write the entry atomically; silently give up when the folder is not writable."""
    folder = cache_dir()
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(to_json(program))
        os.replace(tmp, folder / f"{key}.json")
        tmp = None
        _prune(folder)
    except OSError:
        pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _prune(folder: Path) -> None:
    entries = list(folder.glob("*.json"))
    if len(entries) <= MAX_ENTRIES:
        return
    entries.sort(key=lambda p: p.stat().st_mtime)
    for path in entries[:len(entries) - MAX_ENTRIES]:
        try:
            path.unlink()
        except OSError:
            pass
