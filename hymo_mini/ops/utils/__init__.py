"""The floor both rules stand on: what ``gla/`` and ``gated_delta/`` share. No rule imports
the other's folder; both import from here.

    checks.py     the one input check of every path, the device check, the start state
    chunks.py     time cut into chunks (PyTorch), the causal decays, which chunks fit one product
    precision.py  what tl.dot multiplies for each input dtype, and ``dot`` itself (Triton)
    tiles.py      a block of rows, the gate's running sums, the rates in base 2 (Triton)
    pairs.py      a block's decay-weighted pair weights, by levels or by one product (Triton)

The Triton modules are imported by the kernels that use them, never here: a kernel is built
when its module is imported, and ``TRITON_INTERPRET=1`` must be set before that.
"""
