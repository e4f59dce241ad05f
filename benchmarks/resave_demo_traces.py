"""Re-save the shipped demo traces in the current .tptrace format version, proving each unchanged.

    python benchmarks/resave_demo_traces.py [NAME ...] [--dry-run]

For each demo (default: `make_demo_traces.SHIPPED`): load ``demo_traces/<name>.tptrace``, save it
to a temporary file beside it, load that back, and replace the old file only when both hold the
same trace: equal `tuiprof.compare.cache.trace_digest` (launch, ops, sources, provenance and
every array, lane addresses decoded) and equal JSON headers apart from what a format version
lays out differently (``version``, ``arrays``, ``address_unit``). Prints the sizes before and after.
Re-recording with `make_demo_traces` would do too, but takes minutes per demo and proves less.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from make_demo_traces import SHIPPED  # noqa: E402

from tuiprof.compare.cache import trace_digest  # noqa: E402
from tuiprof.trace.io import HEADER, SUFFIX, VERSION, load_trace, save_trace  # noqa: E402

LAYOUT = ("version", "arrays", "address_unit")
"""Header fields that describe how the arrays are laid out, not what they hold."""


def header(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as zf:
        return json.loads(zf.read(HEADER))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", metavar="NAME", help="demos to re-save (default: the shipped ones)")
    ap.add_argument("--dry-run", action="store_true", help="check, but leave the files as they are")
    args = ap.parse_args(argv)
    folder = ROOT / "demo_traces"
    total = [0, 0]
    failed = 0
    print(f"{'demo':16} {'version':>7} {'before':>10} {'after':>10}  same trace")
    for name in args.names or SHIPPED:
        path = folder / f"{name}{SUFFIX}"
        old_header = header(path)
        new = folder / f".{name}.resave{SUFFIX}"
        try:
            before = trace_digest(load_trace(path))
            save_trace(load_trace(path), new)
            after = trace_digest(load_trace(new))
            new_header = header(new)
            same = before == after and all(old_header.get(k) == new_header.get(k)
                                           for k in set(old_header) | set(new_header) if k not in LAYOUT)
            sizes = path.stat().st_size, new.stat().st_size
            print(f"{name:16} {old_header['version']:>3} -> {VERSION} {sizes[0] / 1024:>8,.0f} K {sizes[1] / 1024:>8,.0f} K  "
                  f"{'yes' if same else 'NO: left as it was'}", flush=True)
            if same:
                total[0] += sizes[0]
                total[1] += sizes[1]
            else:
                failed += 1
            if same and not args.dry_run:
                os.replace(new, path)
        finally:
            new.unlink(missing_ok=True)
    print(f"{'total':16} {'':>7} {total[0] / 1024:>8,.0f} K {total[1] / 1024:>8,.0f} K")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
