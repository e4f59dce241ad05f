"""`python -m tuiprof`."""

from tuiprof.cli.main import main

raise SystemExit(main())
