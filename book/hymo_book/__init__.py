"""The book's helpers: what the chapters and the book's site need and the library does not.

The library (``hymo_mini``) computes; this package serves the book. Notebooks run from
``book/`` and import it directly (``import hymo_book``); the tests put ``book/`` on
``sys.path``. The library never imports it.

* The course: :mod:`hymo_book.curriculum` (the reading order, the terms each chapter
  teaches), :mod:`hymo_book.exercises` (the exercises and their checker, one module per
  chapter), :mod:`hymo_book.prose` (sentences whose numbers come from a computation).
* The figures of the model: :mod:`hymo_book.plots`, one module per topic (most chapters).
* Chapter helpers: :mod:`hymo_book.env` (00), :mod:`hymo_book.attention_variants` (05, 06),
  :mod:`hymo_book.kernels.primer` (09), :mod:`hymo_book.kernels.source`,
  :mod:`hymo_book.kernels.arithmetic`, :mod:`hymo_book.kernels.chunk_levels` (10),
  :mod:`hymo_book.moe_experiments` (11), :mod:`hymo_book.forward_pass` (14),
  :mod:`hymo_book.parameters` (15), :mod:`hymo_book.training`, :mod:`hymo_book.plots.optimizers`
  (17), :mod:`hymo_book.mqar`, :mod:`hymo_book.recall`, :mod:`hymo_book.plots.mqar` (19).
* The Reports part: :mod:`hymo_book.claims` (the audit of the design document, 20),
  :mod:`hymo_book.kernels.report`, :mod:`hymo_book.kernels.runs`,
  :mod:`hymo_book.kernels.gdn_runs`, :mod:`hymo_book.plots.kernel_benchmarks`,
  :mod:`hymo_book.kernels.targets` (21).
* Measured runs: :mod:`hymo_book.results` reads ``book/results/`` and captions every table
  and figure; :mod:`hymo_book.style` holds every series' label, colour, marker, line style
  and hatch; :mod:`hymo_book.plots.figures` redraws every figure of ``figures/``, the model's and
  the measured runs' (``cd book && python3 -m hymo_book.plots``).
* Generated pages: :mod:`hymo_book.site.readme` (README.md's measured numbers and parts),
  :mod:`hymo_book.site.book_index` (book/README.md's chapter table), :mod:`hymo_book.notebooks`
  (execute a chapter and store it as JupyterLab saves it).
* The site: :mod:`hymo_book.site.build` builds the book as a static website (``cd book && python3
  -m hymo_book.site``); :mod:`hymo_book.site.offline` serves MathJax and the widget embedder from
  the site itself; :mod:`hymo_book.site.legibility` says at what size a figure's text shows.
"""
