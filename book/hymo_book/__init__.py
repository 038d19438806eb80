"""The book's helpers: what the chapters and the book's site need and the library does not.

The library (``hymo_mini``) computes; this package serves the book. Notebooks run from
``book/`` and import it directly (``import hymo_book``); the tests put ``book/`` on
``sys.path``. The library never imports it.

    curriculum.py           the reading order and the terms each chapter teaches
    prose.py                sentences whose numbers come from a computation
    style.py                every measured series' label, colour, marker, line style and hatch
    notebooks.py            execute a chapter and store it as JupyterLab saves it
    results.py              the one reader of the measured runs in book/results/
    results_index.py        book/results/README.md: what each run is, and who reads it
    exercises/              the exercises and their checker, one module a chapter
    plots/                  the figures, the model's and the measured runs', one module a topic
    kernels/                the kernel chapters' helpers (09, 10, 21)
    claims/                 the audit of the design document, one module a topic (20)
    site/                   the website, and the generated parts of the landing pages
    env.py                  chapter 00: the environment check
    attention_variants.py   chapters 05 and 06: the attention variants' arithmetic
    moe_experiments.py      chapter 11: the experiments behind the MoE figures
    forward_pass.py         chapter 14: the forward pass end to end
    parameters.py           chapter 15: parameters, active and stored
    training.py             chapter 17: the whole training step's runs, as tables
    fsdp.py                 chapter 18: FSDP2's memory and the one-GPU run
    mqar.py                 chapter 19: the associative-recall task and its sweep
    recall.py               chapter 19: two demos of recall without training
"""
