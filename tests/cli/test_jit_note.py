"""The one-line note on stderr before Numba compiles a kernel that its disk cache does not hold
(the emulator's take about a minute on the first run after an install): printed when the cache
misses, not when it hits, nor where the caller says what it compiles (`tuiprof warmup`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

KERNEL = """from tuiprof.jit import KERNEL, njit


@njit(**KERNEL)
def add_one(x):
    return x + 1


@njit(**KERNEL)
def add_two(x):
    return x + 2
"""

RUN = """import sys
sys.path.insert(0, {folder!r})
import tiny
from tuiprof.jit import compiles_announced, note_first_compile
with compiles_announced():  # as tuiprof warmup runs its steps: it says what it compiles itself
    note_first_compile(tiny.add_two, "the announced kernel")
note_first_compile(tiny.add_one, "the tiny kernel")
print(tiny.add_one(41))
note_first_compile(tiny.add_one, "the tiny kernel")
"""


def test_the_compile_note_appears_only_when_numba_must_compile(tmp_path: Path) -> None:
    (tmp_path / "tiny.py").write_text(KERNEL)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=str(ROOT))

    def stderr_of_a_run() -> str:
        r = subprocess.run([sys.executable, "-c", RUN.format(folder=str(tmp_path))], env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0 and r.stdout == "42\n", r.stderr
        return r.stderr

    first, second = stderr_of_a_run(), stderr_of_a_run()
    assert first.count("note: compiling the tiny kernel (first run") == 1, first   # once per process
    assert "the announced kernel" not in first, first
    assert "note: compiling" not in second, second                                 # cached on disk by the first
    (tmp_path / "tiny.py").write_text(KERNEL + "\n")  # an edited source: Numba's index is stale
    os.utime(tmp_path / "tiny.py", (1, 1))
    assert "note: compiling the tiny kernel" in stderr_of_a_run()
