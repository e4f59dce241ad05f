"""tuiprof in a real terminal (tmux) for the signal tests: a shell script that runs it and then
reports its exit status and the terminal's modes (`script`), its pid (`read_pid`), and the check
that the shell got a sane terminal back (`assert_sane`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.support.tui_support import Tmux

ROOT = Path(__file__).resolve().parents[2]


def script(tmp_path: Path, *args: str) -> tuple[str, Path]:
    """A shell script that runs tuiprof with `args` (its pid written to a file), then prints its
    exit status and the terminal's echo/icanon modes, then leaves a shell prompt."""
    pidfile = tmp_path / "tuiprof.pid"
    py = " ".join(map(shlex_quote, (sys.executable, "-m", "tuiprof", *args)))
    env = f"PYTHONPATH={shlex_quote(os.pathsep.join(filter(None, [str(ROOT), os.environ.get('PYTHONPATH')])))}"
    text = (f"cd {shlex_quote(str(ROOT))}\n"
            f"sh -c 'echo $$ > {pidfile}; exec env -u COLUMNS -u LINES {env} \"$@\"' sh {py}\n"
            'echo "EXIT=$?"\n'
            "echo \"TTY=$(stty -a | tr ' ;' '\\n\\n' | grep -x -e echo -e -echo -e icanon -e -icanon | tr '\\n' ' ')\"\n"
            "PS1='PROMPT$ ' exec sh -i\n")
    return text, pidfile


def shlex_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def read_pid(pidfile: Path) -> int:
    return int(pidfile.read_text().strip())


def assert_sane(tmux: Tmux, status: int) -> str:
    """The shell got the terminal back in a sane state; returns the screen."""
    text = tmux.wait_screen("PROMPT$", 10)
    assert f"EXIT={status}" in text, text
    tty = next(line for line in text.splitlines() if line.startswith("TTY="))
    assert tty.split("=", 1)[1].split() == ["icanon", "echo"], tty      # not -echo / -icanon (raw)
    flags = tmux.flags()
    assert flags["alternate_on"] == "0" and flags["cursor_flag"] == "1", flags
    assert {flags[k] for k in flags if k.startswith("mouse")} == {"0"}, flags
    assert "Traceback" not in text
    return text
