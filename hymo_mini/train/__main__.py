"""``python -m hymo_mini.train ...``: the same as ``hymo-mini train ...``."""

from hymo_mini.cli.train import train_main

raise SystemExit(train_main())
