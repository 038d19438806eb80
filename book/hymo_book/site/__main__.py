"""``python3 -m hymo_book.site``: build the website (:mod:`hymo_book.site.build`)."""

import sys

from hymo_book.site.build import main

sys.exit(main())
