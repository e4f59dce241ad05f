"""tuiprof's theme files (themes/*.toml), turned into Textual themes."""

from __future__ import annotations

import sys
from pathlib import Path

from textual.theme import BUILTIN_THEMES, Theme

from tuiprof.errors import UsageError
from tuiprof.resources import data_dir

DEFAULT_THEME = "tuiprof-dark"
MUTED = "$foreground-muted"
"""Muted text in a Content span. Not `$text-muted`: Textual 8.2.8 loses the 60% of its value
("auto 60%") in a span's style and draws the full contrast colour, brighter than the normal text
(a rerun's dimmed results came out brighter than fresh ones)."""
FIELDS = ("primary", "secondary", "accent", "warning", "error", "success", "foreground", "background",
          "surface", "panel", "boost")


def _toml(path: Path) -> dict[str, object]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    with path.open("rb") as fh:
        return tomllib.load(fh)


def load_themes(folder: Path | None = None) -> list[Theme]:
    """Every theme file in `folder` (default: the shipped themes), sorted by name."""
    folder = folder or data_dir("themes")
    themes = []
    for path in sorted(folder.glob("*.toml")):
        try:
            d = _toml(path)
            kwargs = {k: str(d[k]) for k in FIELDS if k in d}  # colours
            extra = {k: float(str(d[k])) for k in ("luminosity_spread", "text_alpha") if k in d}
            variables = d.get("variables", {})
            if not isinstance(variables, dict):
                raise ValueError("[variables] must be a table")
            themes.append(Theme(name=str(d.get("name", path.stem)), dark=bool(d.get("dark", True)),
                                variables={str(k): str(v) for k, v in variables.items()},
                                **kwargs, **extra))  # type: ignore[arg-type]  # keys are Theme's own fields
        except Exception as exc:  # a broken theme file must not stop the profiler
            print(f"warning: theme file {path} ignored: {exc}", file=sys.stderr)
    return themes


def theme_names() -> list[str]:
    """tuiprof's themes, then Textual's own."""
    return [t.name for t in load_themes()] + sorted(BUILTIN_THEMES)


def check_theme(name: str | None) -> str:
    """The theme to start with; a name that is neither tuiprof's nor Textual's raises."""
    if name is None:
        return DEFAULT_THEME
    names = theme_names()
    if name not in names:
        raise UsageError(f"unknown theme {name!r}", "themes are: " + ", ".join(names))
    return name
