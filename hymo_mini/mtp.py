"""Multi-token prediction: section 9 of the design document.

Besides the next token, the model is trained to predict the tokens after it. Depth d takes
the previous depth's hidden states (depth 0: the main model's), adds the embedding of the
token d places ahead, and passes the sum through its own SwiGLU block:

    x_d = h_{d-1}[:, :T-d] + embed(tokens[:, d:T])      (b, T-d, dim)
    h_d = block_d(x_d)                                  (b, T-d, dim)

Position i of h_d has seen tokens 0..i+d (h_0[i] saw 0..i, then d more embeddings) and
predicts token i+d+1, so ``logits_d[:, :T-d-1]`` is scored against ``tokens[:, d+1:]``
(the last position of each depth has no target inside the sequence).
:func:`alignment_table` lists every (depth, position, seen, target) for the book.

Readings chosen where the document is unclear or contradicts itself:

* **No norm and no residual inside the block.** Section 9.2.1's MTPBlock is a bare SwiGLU,
  h_d = block(x_d), and we keep it so. (DeepSeek-V3's MTP module normalises both inputs,
  projects their concatenation and runs a full transformer block; HyMo's does not.)
* **Which hidden state.** Section 3.7 returns the *normed* hidden state. We chain from the
  main model's residual stream *before* the final norm, so that the main states and every
  h_d reach the head the same way: shared final norm, tied head, soft-cap, applied by the
  model. No extra vocabulary parameters; the MTP adds ``mtp_depth`` SwiGLUs
  (2 × 3 × 896 × 2304 = 12,386,304 for hymo_750m, matching section 12.2.5).
* **Section 9.1.2's formula** P(x_{t+2} | h_t) = softmax(W · MTP_1(h_t)) leaves out the
  embedding of x_{t+1} that the block receives (section 9.2.2); the block sees it.
* **"Head 0 predicts T-1 tokens, head 1 T-2"** (9.2.2): the depths *produce* T-1 and T-2
  states, but only T-2 and T-3 of them have a target.
* **"MTP contributes ~30% additional gradient signal"** (9.4.3). The loss weights
  (0.3, 0.1) sum to 0.4: the MTP terms weigh 40% as much as the main loss, or
  0.4 / 1.4 = 28.6% of the total loss weight. How much of the *gradient* they contribute
  depends on the size of each term's gradient, not only on its weight, and has to be
  measured (the book does).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from hymo_mini.config import ModelConfig
from hymo_mini.ffn import SwiGLU

__all__ = [
    "MTPBlock",
    "MultiTokenPrediction",
    "mtp_targets",
    "mtp_losses",
    "mtp_loss",
    "AlignmentRow",
    "alignment_table",
]


class MTPBlock(SwiGLU):
    """One MTP depth: a SwiGLU ``w2(silu(w1 x) * w3 x)`` with no norm and no residual."""


class MultiTokenPrediction(nn.Module):
    """``config.mtp_depth`` chained blocks; returns one hidden-state tensor per depth."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.depth = config.mtp_depth
        self.blocks = nn.ModuleList(
            MTPBlock(config.dim, config.mtp_inter_dim, config.swiglu_impl)
            for _ in range(config.mtp_depth))

    def forward(self, hidden: torch.Tensor, tokens: torch.Tensor,
                embed: nn.Embedding) -> list[torch.Tensor]:
        """hidden (b, T, dim): the main model's states before its final norm;
        tokens (b, T) int; embed: the model's embedding. Returns [h_1, ..., h_D],
        h_d of shape (b, T-d, dim)."""
        if hidden.ndim != 3 or tokens.shape != hidden.shape[:2]:
            raise ValueError(f"hidden must be (b, T, dim) and tokens (b, T); got "
                             f"{tuple(hidden.shape)} and {tuple(tokens.shape)}")
        if tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
            raise TypeError(f"tokens must be integer token ids, got {tokens.dtype}")
        T = tokens.shape[1]
        if self.depth and T <= self.depth:
            raise ValueError(f"sequence length T={T} must exceed mtp_depth={self.depth}: "
                             f"depth {self.depth} looks {self.depth} tokens ahead")
        outputs, h = [], hidden  # h_0: (b, T, dim)
        for d, block in enumerate(self.blocks, start=1):
            x = h[:, :T - d] + embed(tokens[:, d:T])  # (b, T-d, dim): i has seen 0..i+d
            h = block(x)  # (b, T-d, dim)
            outputs.append(h)
        return outputs


def mtp_targets(tokens: torch.Tensor, depth: int) -> tuple[int, torch.Tensor]:
    """For depth ``depth`` (0 = the main head): how many leading predictions have a
    target, and the targets: ``(T - depth - 1, tokens[:, depth + 1:])``."""
    T = tokens.shape[1]
    if T < depth + 2:
        raise ValueError(f"depth {depth} needs at least {depth + 2} tokens to have a "
                         f"target, got T={T}")
    return T - depth - 1, tokens[:, depth + 1:]  # (b, T-depth-1)


def mtp_losses(logits_list: list[torch.Tensor], tokens: torch.Tensor) -> list[torch.Tensor]:
    """Mean cross-entropy of each depth d = 1, 2, ...; logits_list[d-1] is (b, T-d, V)."""
    losses = []
    for d, logits in enumerate(logits_list, start=1):
        if logits.shape[:2] != (tokens.shape[0], tokens.shape[1] - d):
            raise ValueError(f"logits of depth {d} must be (b, T-{d}, vocab) = "
                             f"({tokens.shape[0]}, {tokens.shape[1] - d}, V), "
                             f"got {tuple(logits.shape)}")
        n, targets = mtp_targets(tokens, d)  # n predictions have a target
        scores = rearrange(logits[:, :n].float(), "b t v -> (b t) v")
        losses.append(F.cross_entropy(scores, rearrange(targets, "b t -> (b t)")))
    return losses


def mtp_loss(logits_list: list[torch.Tensor], tokens: torch.Tensor,
             weights: tuple[float, ...] | list[float]) -> torch.Tensor:
    """sum_d weights[d-1] * cross_entropy(depth d): the term added to the main loss."""
    if len(weights) != len(logits_list):
        raise ValueError(f"need one weight per depth: {len(logits_list)} logits tensors, "
                         f"{len(weights)} weights")
    losses = mtp_losses(logits_list, tokens)
    return sum((w * loss for w, loss in zip(weights, losses, strict=True)),
               tokens.new_zeros((), dtype=torch.float32))


class AlignmentRow(NamedTuple):
    depth: int  # 0 = the main head
    position: int  # i, the input position
    seen: range  # token indices the prediction may use: 0..i+depth
    target: int  # index of the predicted token: i + depth + 1


def alignment_table(T: int, depth: int) -> list[AlignmentRow]:
    """Every prediction with a target in a sequence of T tokens, depths 0..depth."""
    return [AlignmentRow(d, i, range(i + d + 1), i + d + 1)
            for d in range(depth + 1) for i in range(T - d - 1)]
