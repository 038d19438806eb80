"""The gated delta rule: the loop, the chunked PyTorch form (WY) and the Triton kernels
(built on first use, so that TRITON_INTERPRET=1 may be set after import)."""

from hymo_mini.ops.gated_delta.chunk import chunk_gated_delta_torch
from hymo_mini.ops.gated_delta.naive import naive_gated_delta

__all__ = ["naive_gated_delta", "chunk_gated_delta_torch", "chunk_gated_delta_triton"]


def __getattr__(name):
    if name == "chunk_gated_delta_triton":
        from hymo_mini.ops.gated_delta.chunk_triton import chunk_gated_delta_triton
        return chunk_gated_delta_triton
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
