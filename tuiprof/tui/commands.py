"""tuiprof's own commands in the command palette (ctrl+p), next to Textual's (themes, keys)."""

from __future__ import annotations

from textual.command import DiscoveryHit, Hit, Hits, Provider


class TuiprofCommands(Provider):
    """The app's actions by name: rerun, trials, arch, MD, export, metrics, panes, help."""

    async def discover(self) -> Hits:
        for name, help_text, callback in self.app.palette_commands():  # type: ignore[attr-defined]
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, callback in self.app.palette_commands():  # type: ignore[attr-defined]
            score = matcher.match(f"{name} {help_text}")
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)
