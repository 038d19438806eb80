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
"""

from __future__ import annotations

import torch
from torch import nn

from hymo_mini.config import ModelConfig
from hymo_mini.gdn import GatedDeltaNet
from hymo_mini.mla import MultiHeadLatentAttention
from hymo_mini.moe import DeepSeekMoE

__all__ = ["MLABlock", "GDNBlock", "sublayers"]


class MLABlock(nn.Module):
    """Pre-norm residual block: x + attn(norm(x)), then + moe(norm(x))."""

    def __init__(self, config: ModelConfig, layer_idx: int = 0):
        super().__init__()
        self.layer_idx = layer_idx
        self.attn_norm = nn.RMSNorm(config.dim, eps=config.norm_eps)
        self.attn = MultiHeadLatentAttention(config, layer_idx)
        self.moe_norm = nn.RMSNorm(config.dim, eps=config.norm_eps)
        self.moe = DeepSeekMoE(config, layer_idx)

    def forward(self, x: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), start_pos)  # (b, t, dim)
        return x + self.moe(self.moe_norm(x))  # (b, t, dim)


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

    def _norm(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x) if self.norm is not None else x

    def branch(self, x: torch.Tensor) -> torch.Tensor:
        """The residual branch y (b, t, dim) alone: forward(x) = x + y with
        gdn_residual="identity". mHC (hymo_mini.mhc) wraps this instead of forward."""
        return self.mixer(self._norm(x))  # (b, t, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.branch(x)
        return x + y if self.residual == "identity" else y  # (b, t, dim)

    def step(self, x: torch.Tensor, conv_window: torch.Tensor | None = None,
             state: torch.Tensor | None = None, start_pos: int = 0):
        """Continue a sequence from its cache (see ``GatedDeltaNet.step``); returns
        ``(block output, conv_window, state)``."""
        y, conv_window, state = self.mixer.step(self._norm(x), conv_window, state, start_pos)
        return (x + y if self.residual == "identity" else y), conv_window, state


def sublayers(block: nn.Module) -> tuple:
    """A block's residual branches in order, each x (b, t, dim) -> F(x) (b, t, dim):
    ``block(x)`` is ``x + F_1(x)``, then ``+ F_2(.)`` of that. mHC wraps each one."""
    if isinstance(block, MLABlock):
        return (lambda x: block.attn(block.attn_norm(x)),  # attention
                lambda x: block.moe(block.moe_norm(x)))  # MoE
    if isinstance(block, GDNBlock):
        return (block.branch,)  # the GDN mixer with its skip path
    raise TypeError(f"no residual branches known for {type(block).__name__}")
