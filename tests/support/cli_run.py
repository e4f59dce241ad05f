"""The CLI in a child process for the output tests: `tuiprof(*args)` runs `python -m tuiprof`,
`assert_one_error` checks the one `error:` line, its `hint:` and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

RUN = ("--trials", "2", "--no-sweep")
"""A quick report: two trials, no MD sweep."""


def tuiprof(*args: str | bytes, env: dict[str, str] | None = None, cwd: Path | None = None,
            preexec=None, stdout=subprocess.PIPE) -> subprocess.CompletedProcess[bytes]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "tuiprof", *args], stdout=stdout, stderr=subprocess.PIPE,
                          env=full_env, cwd=cwd, preexec_fn=preexec, timeout=300)


def assert_one_error(r: subprocess.CompletedProcess[bytes], *needles: str) -> None:
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 2, err
    assert "Traceback" not in err
    assert err.startswith("error: ") and "\nhint: " in err, err
    for needle in needles:
        assert needle in err, err
