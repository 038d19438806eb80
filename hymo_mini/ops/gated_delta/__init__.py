"""The gated delta rule, decay, erase and write: the loop first, then the chunked PyTorch
form (WY), then the Triton kernels, named after the step they compute:

    naive.py         naive_gated_delta         the loop over time (the oracle)
    chunk.py         chunk_gated_delta_torch   chunkwise (WY form), PyTorch + einops
    wy.py            the WY form               each chunk's erasures, solved
    chunk_h.py       the state pass            chunk to chunk, over groups when long
    chunk_o.py       the outputs               O = Q̃ H_0 + P U
    chunk_chain.py   the forward in one launch  for 16-bit inputs: stretches hand on
    chunk_bwd.py     the gradients             every gradient of one chunk
    chunk_triton.py  chunk_gated_delta_triton  the launchers and the autograd Function

The Triton kernels are built on first use, so TRITON_INTERPRET=1 may be set after import.
"""

from hymo_mini.ops.gated_delta.chunk import chunk_gated_delta_torch
from hymo_mini.ops.gated_delta.naive import naive_gated_delta

__all__ = ["naive_gated_delta", "chunk_gated_delta_torch", "chunk_gated_delta_triton"]


def __getattr__(name):
    if name == "chunk_gated_delta_triton":
        from hymo_mini.ops.gated_delta.chunk_triton import chunk_gated_delta_triton
        return chunk_gated_delta_triton
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
