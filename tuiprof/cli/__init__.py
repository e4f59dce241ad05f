"""The command line: `main` (the parser, the subcommands and the entry point `tuiprof`), `gpu`
(the commands that need a GPU: record, validate, calibrate) and `options` (the collect options a
parsed command line gives, shared by both). Nothing is imported here, so `tuiprof --help` loads
only what it needs."""
