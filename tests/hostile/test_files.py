"""The one bounded reader of regular files (`tuiprof.files`): its quiet form, for the files tuiprof
only peeks at, never blocks on a FIFO, never reads a device, and stops one byte past its limit."""

from __future__ import annotations

import os
from pathlib import Path

from tuiprof.files import read_regular_quietly


def test_quiet_reader_reads_regular_files_only_and_bounded(tmp_path: Path) -> None:
    text = tmp_path / "k.cu"
    text.write_bytes(b"0123456789")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # no writer: a blocking open would hang the test
    assert read_regular_quietly(text, 4) == b"01234"       # limit + 1 bytes: "larger than 4"
    assert read_regular_quietly(text, 10) == b"0123456789"
    assert read_regular_quietly(fifo, 4) is None
    assert read_regular_quietly(tmp_path, 4) is None       # a folder
    assert read_regular_quietly(tmp_path / "missing", 4) is None
    assert read_regular_quietly("bad\0name", 4) is None
    assert read_regular_quietly("/dev/zero", 4) is None    # a device is never read
