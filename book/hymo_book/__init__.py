"""The book's helpers: what the chapters and the book's site need and the library does not.

The library (``hymo_mini``) computes; this package serves the book. Notebooks run from
``book/`` and import it directly (``import hymo_book``); the tests put ``book/`` on
``sys.path``.

* :mod:`hymo_book.site` builds the book as a static website (``cd book && python3 -m
  hymo_book.site``).
* :mod:`hymo_book.offline` is the Sphinx extension that makes that site work with no
  network: MathJax and the Jupyter widget embedder are served from the site itself.
* :mod:`hymo_book.legibility` says at what size a figure's text shows on the site.
* :mod:`hymo_book.claims` is the audit of the design document (chapter 20);
  :mod:`hymo_book.forward_pass` and :mod:`hymo_book.parameters` serve chapters 14 and 15;
  :mod:`hymo_book.env` the environment check (chapter 00);
  :mod:`hymo_book.attention_variants` the cache table and absorbed MLA (chapter 13).
* :mod:`hymo_book.results` reads the measured runs in ``book/results/`` and captions them;
  :mod:`hymo_book.style` holds every series' label, colour, marker, line style and hatch.
* The kernel chapter (06): :mod:`hymo_book.kernel_chapter`, :mod:`hymo_book.chunk_levels`,
  :mod:`hymo_book.kernel_results` (tables), :mod:`hymo_book.kernel_plots` (figures),
  :mod:`hymo_book.kernel_targets`; the MQAR chapter (16): :mod:`hymo_book.recall`,
  :mod:`hymo_book.mqar_plots`; training (15): :mod:`hymo_book.optim_plots`,
  :mod:`hymo_book.training`.
* :mod:`hymo_book.figures` redraws the result-based figures of ``figures/``
  (``cd book && python3 -m hymo_book.figures``).
"""
