"""The two blocks of the stack, assembled from their parts in one place.

    MLA block:  x + attn(norm(x)), then + moe(norm(·))          attention, then its MoE
    GDN block:  x + mixer(norm(x))                               no feed-forward

Readings chosen where the document contradicts itself:

* **No feed-forward on GDN blocks** (section 1.3.3, and the parameter count): the MoE sits
  on the MLA blocks only.
* **The GDN residual path.** The document's GDN layer returns ``out_proj(o) +
  skip_proj(x)`` (the mixer, ``hymo_mini.gdn``) and its block adds nothing around it:
  there is no identity path, so the residual stream is replaced, not added to, in 24 of
  32 layers, and at PyTorch's default init each such layer shrinks the signal (the
  book's initialisation chapter measures it). hymo_mini's default,
  ``gdn_residual="identity"``, is a pre-norm residual block like the MLA block:
  ``x + mixer(norm(x))``. ``gdn_residual="document"`` gives the documented block
  exactly (no norm, no identity).

**The compiled GDN block** (``config.gdn_impl``: "eager", "compiled", or "auto", which
compiles while training on a CUDA GPU and runs eagerly otherwise, so CPU runs and the book
use the eager block, the oracle). Both run one function, :func:`hymo_mini.gdn.gdn_forward`,
the compiled block through ``torch.compile``, which traces it up to the recurrence, marked
``torch.compiler.disable`` (``hymo_mini.gdn.recurrence``) and stays the Triton kernel's
custom autograd Function; so each block becomes two graphs with the kernel between them.
What compile fuses, forward and backward: in the first graph the norm, the depthwise conv
(written there as d_conv shifted multiply-adds, ``hymo_mini.gdn.shifted_causal_conv``) with
the SiLU after it, the RoPE of b and c (their fp32 upcast, rotation and downcast), the decay
gate sigmoid(dt + dt_bias), the output gate's sigmoid and mean, and -exp(A_log), each a
chain of element-wise passes in eager mode; in the second, the D·v skip, the output gate and
the residual add, with the casts between bf16 and fp32 that autocast puts around every
matmul. The matmuls stay library calls (cuBLAS). Fewer passes also means fewer saved
intermediates: the partitioner recomputes cheap element-wise results in the backward instead
of keeping them. One compiled function serves every GDN block (parameters are graph inputs);
blocks with and without RoPE get a first graph each and share the second.

**The compiled MLA attention** (``config.mla_impl``, the same three choices):
:func:`mla_attention_forward`, the block up to its MoE, is one graph, SDPA inside it. The
MoE stays eager: its grouped path has its own autograd (``hymo_mini.moe.dispatch``).
Decoding (``start_pos`` > 0, the KV cache) always runs eagerly.
"""

from __future__ import annotations

import torch
from torch import nn

from hymo_mini.compiling import compiled_forward, runs_compiled
from hymo_mini.config import ModelConfig
from hymo_mini.gdn import GatedDeltaNet, gdn_forward
from hymo_mini.mla import MultiHeadLatentAttention
from hymo_mini.moe import DeepSeekMoE

__all__ = ["MLABlock", "GDNBlock", "sublayers", "mla_attention_forward", "compiled_forward"]


class MLABlock(nn.Module):
    """Pre-norm residual block: x + attn(norm(x)), then + moe(norm(x))."""

    def __init__(self, config: ModelConfig, layer_idx: int = 0):
        super().__init__()
        self.layer_idx = layer_idx
        self.attn_norm = nn.RMSNorm(config.dim, eps=config.norm_eps)
        self.attn = MultiHeadLatentAttention(config, layer_idx)
        self.moe_norm = nn.RMSNorm(config.dim, eps=config.norm_eps)
        self.moe = DeepSeekMoE(config, layer_idx)
        self.impl = config.mla_impl

    def compiled(self, x: torch.Tensor) -> bool:
        """Whether this call's attention sublayer runs compiled (``mla_impl``)."""
        return runs_compiled(self.impl, x, self.training, "mla_impl")

    def forward(self, x: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
        if start_pos == 0 and self.compiled(x):
            x, h = compiled_forward(mla_attention_forward)(self, x)
        else:
            x, h = mla_attention_forward(self, x, start_pos)  # (b, t, dim) each
        return x + self.moe(h)  # (b, t, dim)


class GDNBlock(nn.Module):
    """The GDN mixer as a pre-norm residual block (``gdn_residual="identity"``), or
    exactly as documented, the mixer alone (``"document"``)."""

    def __init__(self, config: ModelConfig, layer_idx: int = 0, use_rope: bool = True):
        super().__init__()
        self.layer_idx = layer_idx
        self.residual = config.gdn_residual
        identity = self.residual == "identity"
        self.norm = nn.RMSNorm(config.dim, eps=config.norm_eps) if identity else None
        self.mixer = GatedDeltaNet(config, layer_idx, use_rope)
        self.impl = config.gdn_impl

    def _norm(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x) if self.norm is not None else x

    def branch(self, x: torch.Tensor) -> torch.Tensor:
        """The residual branch y (b, t, dim) alone: forward(x) = x + y with
        gdn_residual="identity". mHC (hymo_mini.mhc) wraps this instead of forward."""
        return self.mixer(self._norm(x))  # (b, t, dim)

    def compiled(self, x: torch.Tensor) -> bool:
        """Whether this call runs compiled (``gdn_impl``)."""
        return runs_compiled(self.impl, x, self.training, "gdn_impl")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        layer = compiled_forward(gdn_forward) if self.compiled(x) else gdn_forward
        y, _, _ = layer(self.mixer, x, norm=self.norm, residual=self.residual == "identity")
        return y  # (b, t, dim)

    def step(self, x: torch.Tensor, conv_window: torch.Tensor | None = None,
             state: torch.Tensor | None = None, start_pos: int = 0):
        """Continue a sequence from its cache (see ``GatedDeltaNet.step``); returns
        ``(block output, conv_window, state)``."""
        return gdn_forward(self.mixer, x, norm=self.norm, residual=self.residual == "identity",
                           conv_window=self.mixer.window(x, conv_window), state=state,
                           start_pos=start_pos, keep_state=True)


def mla_attention_forward(block: MLABlock, x: torch.Tensor, start_pos: int = 0):
    """The MLA block up to its MoE: (x + attn(attn_norm(x)), moe_norm of that), the second
    the MoE's input. What ``mla_impl`` compiles, SDPA included: the RMSNorms, the query
    scale and the partial RoPE of q and of the shared key (fp32 rotation, casts), the
    concatenations into SDPA's layout and the residual add, each a separate pass in eager
    mode, become a few fused kernels; the matmuls and the attention kernel stay library
    calls."""
    x = x + block.attn(block.attn_norm(x), start_pos)  # (b, t, dim)
    return x, block.moe_norm(x)


def sublayers(block: nn.Module) -> tuple:
    """A block's residual branches in order, each x (b, t, dim) -> F(x) (b, t, dim):
    ``block(x)`` is ``x + F_1(x)``, then ``+ F_2(.)`` of that. mHC wraps each one."""
    if isinstance(block, MLABlock):
        return (lambda x: block.attn(block.attn_norm(x)),  # attention
                lambda x: block.moe(block.moe_norm(x)))  # MoE
    if isinstance(block, GDNBlock):
        return (block.branch,)  # the GDN mixer with its skip path
    raise TypeError(f"no residual branches known for {type(block).__name__}")
