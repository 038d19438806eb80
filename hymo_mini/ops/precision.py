"""How a Triton kernel multiplies fp32 blocks (``tl.dot(..., input_precision=...)``).

fp32 inputs get fp32-grade products by default: "tf32x3" (three TF32 products that
together carry about fp32's 24-bit mantissa, on the tensor cores). Plain TF32 (10-bit
mantissa, relative error about 1e-3) is an opt-in that follows PyTorch's own switch:
``torch.backends.cuda.matmul.allow_tf32 = True`` or ``torch.set_float32_matmul_precision
("high")`` (or "medium"). bf16 and fp16 inputs already carry fewer bits than TF32, so
their kernels use TF32 (the products still accumulate in fp32); the gla kernel's forward
goes further on a GPU and multiplies bf16 roundings (``hymo_mini.ops.gla.chunk_triton``,
CONFIGS["half_products"]). fp64 inputs are computed
in fp32 by the kernels, as fp32. The Triton interpreter ignores the setting and multiplies
in plain fp32.
"""

from __future__ import annotations

import torch

__all__ = ["dot_precision", "tf32_allowed"]


def tf32_allowed() -> bool:
    """Whether the user let PyTorch's own fp32 matmuls use TF32."""
    return (bool(torch.backends.cuda.matmul.allow_tf32)
            or torch.get_float32_matmul_precision() != "highest")


def dot_precision(dtype: torch.dtype) -> str:
    """The ``input_precision`` for a kernel whose inputs have ``dtype``."""
    if dtype in (torch.bfloat16, torch.float16):
        return "tf32"
    return "tf32" if tf32_allowed() else "tf32x3"
