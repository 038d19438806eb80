"""The GDN recurrences and the one place that chooses how to run them.

Two rules, one folder each (flash-linear-attention's ``ops/<op>/`` layout), both standing
on one shared floor; neither imports the other. Each folder's ``__init__`` lists its files:

    utils/        the floor: input checks, chunks, precise products, the pair weights
    gla/          the document's recurrence, gated linear attention: decay and write
    gated_delta/  the true gated delta rule: decay, erase, write

:func:`gated_linear_attention` and :func:`gated_delta_rule` dispatch by ``backend``:
"naive", "chunk_torch", "recurrent_triton", "chunk_triton", or "auto" (the fastest correct
path for the device, dtype and length). The Triton modules are imported on first use, so
``TRITON_INTERPRET=1`` may be set after ``import hymo_mini``.
"""

import functools
import os

import torch

from hymo_mini.choices import did_you_mean
from hymo_mini.ops.gated_delta.chunk import chunk_gated_delta_torch
from hymo_mini.ops.gated_delta.naive import naive_gated_delta
from hymo_mini.ops.gla.chunk import chunk_gla_torch
from hymo_mini.ops.gla.naive import naive_gla
from hymo_mini.ops.utils.checks import check_inputs, check_triton_device, empty_sequence
from hymo_mini.ops.utils.chunks import one_product_chunks

__all__ = ["RULES", "gated_linear_attention", "gated_delta_rule", "auto_backend",
           "check_inputs", "empty_sequence", "naive_gla", "naive_gated_delta",
           "chunk_gla_torch", "chunk_gated_delta_torch", "triton_usable", "one_product_chunks"]

# rule -> the backends it has, slowest first
RULES = {
    "gla": ("naive", "chunk_torch", "recurrent_triton", "chunk_triton"),
    "delta": ("naive", "chunk_torch", "chunk_triton"),
}
TRITON_BACKENDS = ("recurrent_triton", "chunk_triton")


@functools.cache
def _triton_installed() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def triton_usable(device: torch.device) -> bool:
    """Whether a Triton kernel can run on ``device``: Triton is installed, and the kernel
    is compiled on CUDA or interpreted on the CPU when ``TRITON_INTERPRET=1``."""
    return _triton_installed() and (torch.device(device).type == "cuda" or _interpreting())


def auto_backend(rule: str, v: torch.Tensor) -> str:
    """The backend "auto" picks for tensors like ``v`` (B, T, H, D): on a CUDA GPU the chunked
    kernel, except where a chunk is mostly empty (T < 64, decoding) or few (batch, head) pairs
    leave the GPU idle (T <= 1024 with B·H <= 160: the recurrent kernel); fp64 and the CPU
    take the chunked PyTorch form (the interpreter is far slower)."""
    backends = RULES[rule]
    if v.device.type == "cuda" and v.dtype != torch.float64 and _triton_installed():
        B, T, H = v.shape[:3]
        recurrent = T < 64 or (T <= 1024 and B * H <= 160)
        order = ("recurrent_triton", "chunk_triton") if recurrent else TRITON_BACKENDS[::-1]
        for name in order:
            if name in backends:
                return name
    return "chunk_torch" if "chunk_torch" in backends else "naive"


def _resolve(rule: str, backend: str, v) -> str:
    if not isinstance(v, torch.Tensor):
        raise TypeError(f"v must be a torch.Tensor of shape (B, T, H, D), got {type(v).__name__}")
    if backend == "auto":
        return auto_backend(rule, v)
    if backend not in RULES[rule]:
        raise ValueError(f"backend={backend!r}: the {rule!r} rule has the backends "
                         f"{', '.join(map(repr, ('auto',) + RULES[rule]))}"
                         f"{did_you_mean(backend, ('auto',) + RULES[rule])}")
    if backend in TRITON_BACKENDS:
        if not _triton_installed():
            raise RuntimeError(f"backend={backend!r} needs Triton, which is not installed; "
                               "use backend='auto' or 'chunk_torch'")
        if v.device.type != "cuda":  # (reading the environment costs a microsecond)
            check_triton_device(v, _interpreting(), f"backend={backend!r}", "the first kernel",
                                "backend='auto' or 'chunk_torch'")
    return backend


def gated_linear_attention(v, b, c, g, A, *, initial_state=None, output_final_state=False,
                           backend: str = "auto", check_values: bool = True):
    """The document's GDN recurrence, H_t = exp(g_t A) ⊙ H_{t-1} + b_t ⊗ v_t, o_t = c_tᵀ H_t.

    v (B, T, H, D); b, c (B, T, H, S); g (B, T, H); A (H, S); initial_state (B, H, S, D).
    Returns ``(o, final_state)``: o in v's dtype; final_state (B, H, S, D) fp32 (fp64 for
    fp64 inputs) if ``output_final_state``, else None. ``check_values=False`` skips the
    finiteness check of g and A (a host-device sync on a GPU).
    """
    name = _resolve("gla", backend, v)
    args = (v, b, c, g, A, initial_state, output_final_state)
    if name == "naive":
        o, state = naive_gla(v, b, c, g, A, initial_state, check_values=check_values)
        return o, (state if output_final_state else None)
    if name == "chunk_torch":
        return chunk_gla_torch(*args, check_values=check_values)
    if name == "recurrent_triton":
        from hymo_mini.ops.gla.recurrent_triton import recurrent_gla_triton
        return recurrent_gla_triton(*args, check_values=check_values)
    from hymo_mini.ops.gla.chunk_triton import chunk_gla_triton
    return chunk_gla_triton(*args, check_values=check_values)


def gated_delta_rule(v, b, c, g, A, beta, *, initial_state=None, output_final_state=False,
                     backend: str = "auto", check_values: bool = True):
    """The true gated delta rule: decay by exp(g_t A), erase along b_t, write β_t v_t.

    Layouts as :func:`gated_linear_attention`, plus beta (B, T, H) in (0, 1); the caller
    L2-normalises b and c. Returns ``(o, final_state or None)``.
    """
    name = _resolve("delta", backend, v)
    args = (v, b, c, g, A, beta, initial_state, output_final_state)
    if name == "naive":
        o, state = naive_gated_delta(v, b, c, g, A, beta, initial_state, check_values=check_values)
        return o, (state if output_final_state else None)
    if name == "chunk_torch":
        return chunk_gated_delta_torch(*args, check_values=check_values)
    from hymo_mini.ops.gated_delta.chunk_triton import chunk_gated_delta_triton
    return chunk_gated_delta_triton(*args, check_values=check_values)
