"""`python -m tuiprof`."""

from tuiprof.cli import main

raise SystemExit(main())
