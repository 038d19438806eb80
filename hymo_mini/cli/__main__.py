"""``python -m hymo_mini.cli ...``: the same as ``hymo-mini ...``."""

from hymo_mini.cli import main

raise SystemExit(main())
