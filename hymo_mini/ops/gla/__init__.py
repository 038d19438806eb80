"""The gla rule: the loop, the chunked PyTorch form and the Triton kernels (built on first
use, so that TRITON_INTERPRET=1 may be set after import)."""

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
