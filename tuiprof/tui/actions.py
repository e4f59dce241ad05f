"""Every key of the app in one registry: the bindings, the help screen's groups and the command
palette are all derived from it, and the app's `check_action` decides which are available now."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True)
class Action:
    """One user action: its key(s), the action string it runs, a short label (footer), the help
    text (help screen, tooltip), its help group and, when it belongs there, its palette name."""

    id: str
    keys: str
    action: str
    label: str
    help: str
    group: str
    palette: str = ""
    """Name in the command palette ("" = not listed)."""
    show: bool = True
    """Shown in the footer."""
    key_display: str | None = None

    def binding(self) -> Binding:
        return Binding(self.keys, self.action, self.label, show=self.show, key_display=self.key_display,
                       tooltip=self.help, id=self.id)


GROUPS = ("Runs", "Navigation", "Views", "App")

ACTIONS: tuple[Action, ...] = (
    Action("rerun", "r", "rerun", "Rerun", "Rerun with a new seed (seed + 1), cancelling any run in progress; the "
           "previous results stay visible, dimmed, until the new ones arrive", "Runs", "Rerun with a new seed"),
    Action("cancel", "c", "cancel_run", "Cancel", "Cancel the run after the trials in flight (the results so far stay)",
           "Runs", "Cancel the run"),
    Action("trials-more", "T", "precision(1)", "Precision+",
           "More precision: halve the tolerance (the 95% confidence interval the run stops at) and allow 4x the "
           "trials, then rerun", "Runs", "More precision (tighter tolerance)", key_display="T"),
    Action("trials-fewer", "t", "precision(-1)", "Precision-",
           "Less precision, sooner: double the tolerance and allow a quarter of the trials, then rerun", "Runs",
           "Less precision (looser tolerance)", show=False, key_display="t"),
    Action("arch", "a", "arch", "Arch", "GPU model: presets and what-if L1/L2 size and associativity, then rerun",
           "Runs", "Choose the GPU model"),
    Action("md", "m", "md", "MD", "Choose the MD (CTAs per SM) and rerun at it", "Runs", "Choose the MD"),
    Action("recollect", "R", "recollect", "Recollect", "Recompile a .cu target and re-run its launch script (on the "
           "GPU when one is usable, else in the emulator: --backend) after an edit, keeping the cursor's line", "Runs", "Recollect from the .cu source",
           show=False, key_display="R"),
    Action("baseline", "b", "baseline", "Baseline",
           "Pin the run shown as the baseline: the gutter (ΔX), the op under the cursor, the drill-down, the "
           "histogram (the baseline's behind, ░) and the model pane then show changes against it, * when "
           "significant (Welch's t-test over the trials), across reruns, MD and arch changes, what-ifs and R",
           "Runs", "Pin the run as the baseline", show=False),
    Action("baseline-clear", "B", "clear_baseline", "Clear baseline", "Clear the baseline", "Runs",
           "Clear the baseline", show=False, key_display="B"),
    Action("export", "e", "export", "Export", "Export the report (.txt, .md or .json; partial while a run goes on)",
           "Runs", "Export the report"),
    Action("hot-next", "n", "hot(1)", "Next hot", "Next load by cost (#1, the costliest, first)", "Navigation",
           "Jump to the hottest load"),
    Action("hot-prev", "N", "hot(-1)", "Prev hot", "Previous load by cost", "Navigation", show=False),
    Action("file-next", "f", "next_file", "File", "Next source file holding ops (a kernel or device functions in a "
           "header; the pane's title names the file shown)", "Navigation", "Show the next source file", show=False),
    Action("search", "slash", "search", "Search", "Search the source (enter: next match, esc: close)", "Navigation",
           "Search the source", key_display="/"),
    Action("drill", "enter", "drill", "Drill", "Drill into the op under the cursor (esc: back; n/N there too)",
           "Navigation", "Drill into the op under the cursor", show=False),
    Action("metric-next", "right_square_bracket", "metric(1)", "Metric",
           "Next histogram metric: the op's X, H1, H2, then the kernel's L1 read, L2 read, L2 write hit ratios",
           "Views", key_display="]"),
    Action("metric-prev", "left_square_bracket", "metric(-1)", "Prev metric", "Previous histogram metric", "Views",
           show=False, key_display="["),
    Action("zoom", "z", "zoom", "Zoom", "Zoom: the source alone (hide the side panes), z again to bring them back",
           "Views", "Zoom the source"),
    Action("pane-source", "1", "pane('source')", "Source", "Source pane (tabs when the panes do not fit beside it)",
           "Views", "Show the source pane", show=False),
    Action("pane-hist", "2", "pane('hist')", "Histogram", "Histogram pane", "Views", "Show the histogram pane", show=False),
    Action("pane-sm", "3", "pane('sm')", "SMs", "SM utilisation pane", "Views", "Show the SM pane", show=False),
    Action("pane-md", "4", "pane('md')", "Model", "Model pane: kernel time, bottleneck, MWP/CWP, MD decision", "Views",
           "Show the model pane", show=False),
    Action("help", "question_mark", "help", "Help", "This list of keys (scrolls: ↑↓, PgUp/PgDn)", "App", "Keys",
           key_display="?"),
    Action("quit", "q", "quit", "Quit", "Quit (cancels the run)", "App"),
)

def bindings() -> list[Binding]:
    return [a.binding() for a in ACTIONS]
