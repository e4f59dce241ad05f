"""The keys of a JSON document, for the tests that check the docs mention every one."""

from __future__ import annotations


def json_keys(obj: object, out: set[str]) -> set[str]:
    """Every key of a JSON document, added to `out` (a list's first element stands for all)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.add(k)
            json_keys(v, out)
    elif isinstance(obj, list) and obj:
        json_keys(obj[0], out)
    return out
