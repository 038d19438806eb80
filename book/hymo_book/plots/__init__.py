"""The book's figures, one module per topic (the chapter in brackets): the model's, then the
measured runs'.

    architecture.py   the layer map, compute and cache of whole stacks, the soft-cap (01, 13)
    norms_and_swiglu.py  RMSNorm's output scale and SiLU, SwiGLU's gate (03)
    rope.py           rotary frequencies, the rotation of a pair, scores against distance (04)
    attention.py      KV-cache bytes per way of caching, attention maps (05, 06)
    gdn.py            decay spectrum, the recurrence as a matrix, the state over time (07)
    delta_rule.py     the delta rule's erasure, recall against a pair's age (07)
    chunked_form.py   the recurrence matrix cut into chunks (08)
    moe.py            routing, capacity, balancing, the fp32 router (11)
    initialisation.py  parameter statistics and the residual stream through depth at init (06, 13)
    mhc.py            Sinkhorn's convergence, mixing matrices, the composite gain (16)
    lr_schedule.py    the warmup-stable-decay learning rate (17)
    optimizers.py     AdamW against Muon and NorMuon at one budget, measured on a CPU (17)
    mqar.py           the recall experiment's accuracies and the state's capacity (19)
    hybrid_text.py    the layouts trained on English: bits per byte, loss by position (19)
    kernel_benchmarks.py  the GDN kernels against the loop and fla, measured on a GPU (21)
    figures.py        the registry that redraws the repository's figures/

Every plot is a plain function that takes the values a widget would set and returns a
``matplotlib.figure.Figure`` built with the object-oriented API (no pyplot state), so the
same function serves the static figure, the live ``interact`` and the test. The model's
numbers come from the library (``hymo_mini``), so a figure cannot drift from what the model
computes; a measured figure reads its run through :mod:`hymo_book.results`.

A module that owns files in the repository's ``figures/`` lists them in a module-level dict
``FIGURES = {"file_name.png": zero_argument_function_returning_a_figure}``;
:mod:`hymo_book.plots.figures` collects them, with the figures of measured runs, and redraws the
folder (``cd book && python3 -m hymo_book.plots``).
"""
