"""The kernel chapters' helpers: chapter 09 (the GPU primer), 10 (the Triton kernels) and 21
(the kernel report), one module a topic.

    primer.py         chapter 09: the machine's numbers, the two floors, TF32 on the CPU
    source.py         chapter 10: the package's kernel source shown with notes beside it
    arithmetic.py     chapters 10 and 21: error checks, decay weights, launches, memory
    chunk_levels.py   chapter 10: the chunked kernel's levels, in einops
    report.py         chapter 21: the kernels now, the launch arithmetic
    gdn_runs.py       the benchmark of record (gdn_*.json) as tables
    targets.py        the targets set for the chunked kernels and the kernel-only run
    runs.py           the first runs: precision, the delta rule beside chunk_kda, MoE, sweeps
    forward.py        the forwards against a copy of their bytes, the one-launch forwards
    settings.py       the settings tried once the pairs were "auto", and the rule that keeps one
    standing.py       both rules beside their peers, run by run; what fp32-grade products cost
    delta_forward.py  the delta forward's last settings: caps, groups, walks
    one_product.py    the one product by a shared rate
    tuning.py         what was tried, what won, and by how much, in one table
    restructure.py    the restructured library against the tree before it

Every table names its runs (``book/results/``, read through :mod:`hymo_book.results`);
nothing here measures time.
"""
