"""Comparing two runs: `tuiprof diff` and the UI's baseline (issue 26)."""
