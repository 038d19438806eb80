"""``python3 -m hymo_book.plots``: redraw every figure of ``figures/``
(:mod:`hymo_book.plots.figures`)."""

from hymo_book.plots.figures import main

raise SystemExit(main())
