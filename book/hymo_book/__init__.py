"""The book's helpers: what the chapters and the book's site need and the library does not.

The library (``hymo_mini``) computes; this package serves the book. Notebooks run from
``book/`` and import it directly (``import hymo_book``); the tests put ``book/`` on
``sys.path``.

* :mod:`hymo_book.site` builds the book as a static website (``cd book && python3 -m
  hymo_book.site``).
* :mod:`hymo_book.offline` is the Sphinx extension that makes that site work with no
  network: MathJax and the Jupyter widget embedder are served from the site itself.
* :mod:`hymo_book.legibility` says at what size a figure's text shows on the site.
"""
