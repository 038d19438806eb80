"""The gla rule, H_t = exp(g_t A) ⊙ H_{t-1} + b_t ⊗ v_t, o_t = c_tᵀ H_t: the loop first,
then the chunked PyTorch form, then the Triton kernels, named after the step they compute:

    naive.py             naive_gla             the loop over time (the oracle)
    chunk.py             chunk_gla_torch       chunkwise-parallel, PyTorch + einops
    recurrent_triton.py  recurrent_gla_triton  one Triton program per (batch, head)
    chunk_h.py           the state pass        each chunk's start state; dH backward
    chunk_o.py           the outputs           each chunk's blocks from its start state
    chunk_bwd.py         the gradients         dv, db, dc, dg, dA of each chunk
    chunk_triton.py      chunk_gla_triton      the launchers and the autograd Function

The Triton kernels are built on first use, so TRITON_INTERPRET=1 may be set after import.
"""

from hymo_mini.ops.gla.chunk import chunk_gla_torch
from hymo_mini.ops.gla.naive import naive_gla

__all__ = ["naive_gla", "chunk_gla_torch", "chunk_gla_triton", "recurrent_gla_triton"]


def __getattr__(name):
    if name == "chunk_gla_triton":
        from hymo_mini.ops.gla.chunk_triton import chunk_gla_triton
        return chunk_gla_triton
    if name == "recurrent_gla_triton":
        from hymo_mini.ops.gla.recurrent_triton import recurrent_gla_triton
        return recurrent_gla_triton
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
