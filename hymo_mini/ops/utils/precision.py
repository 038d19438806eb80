"""What a chunk kernel's products multiply, and ``dot``, the one product every kernel calls.

A tensor core multiplies 16-bit or TF32 operands (TF32 keeps 10 of fp32's 23 mantissa bits)
and adds in fp32. What that means for each input dtype:

* **fp32 inputs** get fp32-grade products, "bf16x6": each operand split into three bf16
  pieces (each the rounding of what the pieces before it left; 24 bits together), and the
  six products of pieces whose orders add up to at most four summed, smallest first; what
  is left out is below fp32's rounding. PyTorch's own switch
  (``torch.set_float32_matmul_precision("high")``) trades that for plain TF32.
* **bf16 and fp16 inputs** carry fewer bits than TF32 already. The forward multiplies
  their blocks rounded to bf16, "bf16"; the backward multiplies in TF32, since its gate
  gradients are sums of many cancelling terms that bf16 operands would blur.
* **fp64 inputs** are computed as fp32.

Under the Triton interpreter ``tl.dot`` multiplies in plain fp32 whatever it is asked, so
fp32-grade products are plain fp32 ("ieee") there, and "bf16" rounds the operands by their
bits first (the interpreter's own conversion truncates).
"""

import os

import torch
import triton
import triton.language as tl

__all__ = ["products", "tf32_allowed", "dot", "bf16_pieces", "INTERPRET"]

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
_INTERPRET = tl.constexpr(INTERPRET)


def tf32_allowed() -> bool:
    """Whether the user let PyTorch's own fp32 matmuls use TF32."""
    return (bool(torch.backends.cuda.matmul.allow_tf32)
            or torch.get_float32_matmul_precision() != "highest")


def products(dtype: torch.dtype, forward: bool) -> str:
    """``dot``'s PRECISION for inputs of ``dtype`` in one direction (see the module)."""
    if dtype in (torch.bfloat16, torch.float16):
        return "bf16" if forward else "tf32"
    if tf32_allowed():
        return "tf32"
    return "ieee" if INTERPRET else "bf16x6"


@triton.jit
def to_bf16(x):
    """fp32 x rounded to the nearest bf16 (ties to even): a bf16 block on the GPU, the
    same values kept in fp32 under the interpreter (rounded by their bits)."""
    if _INTERPRET:
        bits = x.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return bits.to(tl.float32, bitcast=True)
    else:
        return x.to(tl.bfloat16)


@triton.jit
def bf16_pieces(x):
    """Three bf16 pieces of fp32 x, x = x₁ + x₂ + x₃ to fp32's precision: each the bf16
    rounding of what the pieces before it left (exact differences in fp32)."""
    x1 = to_bf16(x)
    rest = x - x1.to(tl.float32)
    x2 = to_bf16(rest)
    x3 = to_bf16(rest - x2.to(tl.float32))
    return x1, x2, x3


@triton.jit
def dot(a, b, PRECISION: tl.constexpr):
    """a @ b accumulated in fp32, multiplied as PRECISION says: "tf32" or "ieee" (tl.dot's
    own), "bf16" (both rounded to bf16), "bf16x6" (six products of bf16 pieces)."""
    if PRECISION == "bf16":
        return tl.dot(to_bf16(a), to_bf16(b))
    elif PRECISION == "bf16x6":
        a1, a2, a3 = bf16_pieces(a)
        b1, b2, b3 = bf16_pieces(b)
        acc = tl.dot(a3, b1)  # the smallest first: each later term is larger
        acc = tl.dot(a1, b3, acc)
        acc = tl.dot(a2, b2, acc)
        acc = tl.dot(a2, b1, acc)
        acc = tl.dot(a1, b2, acc)
        return tl.dot(a1, b1, acc)
    else:
        return tl.dot(a, b, input_precision=PRECISION)
