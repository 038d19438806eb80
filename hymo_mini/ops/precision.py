"""How a Triton kernel multiplies fp32 blocks (``tl.dot(..., input_precision=...)``).

fp32 inputs get fp32-grade products by default: "tf32x3" (three TF32 products that
together carry about fp32's 24-bit mantissa, on the tensor cores). Plain TF32 (10-bit
mantissa, relative error about 1e-3) is an opt-in that follows PyTorch's own switch:
``torch.backends.cuda.matmul.allow_tf32 = True`` or ``torch.set_float32_matmul_precision
("high")`` (or "medium"). bf16 and fp16 inputs already carry fewer bits than TF32, so
their kernels use TF32 (the products still accumulate in fp32); the forwards of both chunk
kernels (gla and gated delta) go further on a GPU and multiply bf16 roundings (each
kernel's CONFIGS["half_products"], ``kernel_precision``). fp64 inputs are computed
in fp32 by the kernels, as fp32. The Triton interpreter ignores the setting and multiplies
in plain fp32.

An fp32-grade product can also be six bf16 products ("bf16x6"): each fp32 operand split into
three bf16 pieces, a = a₁ + a₂ + a₃ with each piece the bf16 rounding of what the pieces
before it left, which together carry 24 bits; the six products of pieces whose orders add up
to at most four are summed, smallest first (what is left out is below fp32's own rounding). Each
kernel chooses between the two per direction (its CONFIGS["fp32_products"]).
"""

from __future__ import annotations

import torch

from hymo_mini.choices import one_of

__all__ = ["dot_precision", "kernel_precision", "tf32_allowed", "HALF_PRODUCTS",
           "FP32_PRODUCTS", "FP32_GRADE"]

# what the forward of bf16 / fp16 inputs multiplies (each kernel's CONFIGS["half_products"]):
# "tf32", its fp32 blocks as TF32 (10-bit mantissa); "bf16", the blocks rounded to bf16
# (8 bits, the tensor cores' 16-bit rate). Both accumulate in fp32.
HALF_PRODUCTS = ("tf32", "bf16")
# how an fp32-grade product multiplies (each kernel's CONFIGS["fp32_products"], per
# direction): "tf32x3", three TF32 products; "bf16x6", six products of bf16 pieces.
FP32_PRODUCTS = ("tf32x3", "bf16x6")
# every product ``kernel_precision`` may return for an fp32-grade direction (the
# interpreter's "bf16x6" arrives as "bf16x6_rounded")
FP32_GRADE = (*FP32_PRODUCTS, "bf16x6_rounded")


def tf32_allowed() -> bool:
    """Whether the user let PyTorch's own fp32 matmuls use TF32."""
    return (bool(torch.backends.cuda.matmul.allow_tf32)
            or torch.get_float32_matmul_precision() != "highest")


def dot_precision(dtype: torch.dtype) -> str:
    """The ``input_precision`` for a kernel whose inputs have ``dtype``."""
    if dtype in (torch.bfloat16, torch.float16):
        return "tf32"
    return "tf32" if tf32_allowed() else "tf32x3"


def kernel_precision(dtype: torch.dtype, half_products: str, *, forward: bool,
                     interpret: bool, fp32_products: dict | None = None) -> str:
    """What a chunk kernel's products (``hymo_mini.ops.gla.chunk_states._dot``) multiply for
    inputs of ``dtype``: dot_precision's grade, except in the forward of 16-bit inputs,
    where ``half_products`` (one of HALF_PRODUCTS) decides. Under the Triton interpreter
    "bf16" becomes "bf16_rounded", the same roundings multiplied in fp32. The backwards
    keep TF32: with bf16 operands their gate gradients, sums of many cancelling terms,
    drift from the loop's. Where the grade is fp32's, ``fp32_products`` ({"forward": ...,
    "backward": ...}, each one of FP32_PRODUCTS; three TF32 products if not given) says how
    this direction multiplies; under the interpreter "bf16x6" becomes "bf16x6_rounded"."""
    if fp32_products is not None:
        for direction in ("forward", "backward"):
            one_of(fp32_products.get(direction), f"CONFIGS['fp32_products'][{direction!r}]",
                   FP32_PRODUCTS)
    if not forward or dtype not in (torch.bfloat16, torch.float16):
        grade = dot_precision(dtype)
        if grade != "tf32x3" or fp32_products is None:
            return grade
        way = fp32_products["forward" if forward else "backward"]
        return "bf16x6_rounded" if way == "bf16x6" and interpret else way
    one_of(half_products, "CONFIGS['half_products']", HALF_PRODUCTS)
    return "bf16_rounded" if half_products == "bf16" and interpret else half_products
