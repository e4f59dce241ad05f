"""Screens over the main view: drill-down, help, arch and MD pickers, export, errors."""
