"""The HyMo stack: section 3 of the design document.

    tokens (b, t) ──embed──> x (b, t, dim)
      layer i = MLABlock (attention + MoE) if i in config.mla_positions
                GDNBlock                 otherwise (RoPE unless i in nope_gdn_positions)
      hidden = x after the last layer                   (b, t, dim)  ← MTP reads this
    logits = softcap(head(norm(hidden)))                (b, t, vocab), soft-capped in fp32
    head.weight IS embed.weight (one tensor: tied)

Every block adds to the residual stream itself (see blocks.py for the GDN block's choice).

Readings chosen where the document is wrong or contradicts itself (the book shows each):

* **Embedding initialisation** (``config.embed_init``). Section 3.2 says "std = 1/√d ...
  ensures the embedding vectors have unit variance". With std = 1/√d each *coordinate*
  has variance 1/d, so each *vector* has unit expected squared norm (d · 1/d = 1), not unit
  variance. That is still the right choice here, for another reason: the head is the
  same matrix and its input is RMS-normalised (each coordinate of ``norm(hidden)`` has
  mean square 1), so a logit ``sum_i h_i e_i`` has variance d · 1 · 1/d = 1: initial
  logits are about unit scale, the initial loss is close to ln(vocab), and the soft-cap
  (15) is far away. ``"scaled"`` (the default) is N(0, 1/dim). ``"torch"`` keeps
  ``nn.Embedding``'s N(0, 1), which is what the documented code actually does (section 10:
  "no init pass"): then logits have standard deviation √dim (30 for dim = 896) and most
  of them sit in the saturated part of the soft-cap at step 0.
* **The head is computed once.** The document's ``forward`` calls ``forward_with_hidden``
  (which already computes and soft-caps the logits), keeps only the hidden state and
  applies the head a second time: a 64,256-wide matmul done twice. Here ``forward``
  returns the logits ``forward_with_hidden`` computed, and ``loss`` applies the head once
  per MTP depth.
* **Which hidden state MTP reads.** The document's ``forward_with_hidden`` returns the
  normed hidden state; hymo_mini returns the *pre-norm* residual stream, the input of the
  final norm, which is what the MTP module consumes (see mtp.py).
* **Layer layout and NoPE positions** are chosen in config.py (MLA at 3, 7, ..., 31, the
  closing figure's layout, not the text's), the **GDN residual** in blocks.py.
* **mHC** (the second design document, ``config.hc_mult > 1``): the residual stream is
  widened to ``hc_mult`` streams (the embedding copied), each residual branch (MLA's
  attention, MLA's MoE, the GDN mixer) is wrapped in its own
  :class:`~hymo_mini.mhc.ManifoldHyperConnection`, and the mean of the streams is the
  hidden state. ``hc_mult = 1`` is the plain model, unchanged. See mhc.py.
* **The loss's two paths** (``config.loss_impl``). "plain" computes the (b, t, vocab)
  logits of each head and their cross-entropy: the readable reference, and what runs on a
  CPU by default. "chunked" computes the same losses and gradients without materialising
  the logits (:func:`hymo_mini.loss.linear_softcap_cross_entropy_heads`, all heads in one
  call); "auto" (the default) takes it on a CUDA GPU, where the plain path's fp32 logits
  cost gigabytes.
* **Gradient checkpointing** (section 3.4) is a switch on the model,
  ``model.gradient_checkpointing = True``: each layer is then recomputed in the backward
  pass instead of keeping its activations (training mode only). The MoE routing
  counters see each recomputed forward again; that doubles every expert's count alike,
  so the load *fractions* the balancing bias uses are unchanged.
"""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from hymo_mini.blocks import GDNBlock, MLABlock, sublayers
from hymo_mini.config import HyMoConfig, ModelConfig
from hymo_mini.loss import linear_softcap_cross_entropy_heads, resolve_loss_impl
from hymo_mini.mhc import ManifoldHyperConnection, collapse, expand
from hymo_mini.moe import DeepSeekMoE
from hymo_mini.mtp import MultiTokenPrediction

__all__ = ["HyMo", "build_hymo", "check_tokens", "softcap", "sublayers"]


def softcap(logits: torch.Tensor, cap: float) -> torch.Tensor:
    """cap · tanh(logits / cap): about the identity for |logits| ≪ cap, bounded by ±cap.
    ``cap = 0`` switches it off."""
    return logits if cap <= 0 else cap * torch.tanh(logits / cap)


def check_tokens(tokens, config: ModelConfig, min_len: int = 1, targets: int = 0) -> None:
    """Raise a clear error unless ``tokens`` is a (batch, time) integer tensor of ids in
    [0, vocab_size) with min_len <= time <= max_seq_len + targets (ids are checked on CPU
    only). ``targets``: trailing tokens that are only predicted, never read."""
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(f"tokens must be a torch.Tensor of token ids, got {type(tokens).__name__}")
    if tokens.ndim != 2:
        raise ValueError(f"tokens must be 2-D (batch, time), got shape {tuple(tokens.shape)}")
    if tokens.dtype == torch.bool or tokens.is_floating_point() or tokens.is_complex():
        raise TypeError(f"tokens must be an integer tensor (e.g. torch.long), got {tokens.dtype}")
    T = tokens.shape[1]
    if T < min_len:
        raise ValueError(f"tokens has {T} positions; this needs at least {min_len}")
    if T > config.max_seq_len + targets:
        raise ValueError(f"tokens has {T} positions, more than max_seq_len={config.max_seq_len}"
                         + (f" + {targets} predicted only" if targets else ""))
    # The value check reads two numbers back from the device: free on the CPU, but a
    # host-device synchronisation per step on a GPU, so it runs on CPU tensors only (on a
    # GPU an out-of-range id still stops the embedding, with a less helpful message).
    if tokens.device.type == "cpu" and tokens.numel():
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high >= config.vocab_size:
            raise ValueError(f"token ids must be in [0, vocab_size={config.vocab_size}), "
                             f"got values from {low} to {high}")


class HyMo(nn.Module):
    """Embedding, the hybrid stack, final norm, tied head, soft-cap, MTP heads."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise TypeError(f"HyMo takes a ModelConfig (use build_hymo for a HyMoConfig), "
                            f"got {type(config).__name__}")
        if config.hc_mult > 1 and config.gdn_residual != "identity":
            raise ValueError(f"hc_mult={config.hc_mult} wraps each residual branch in mHC, which "
                             "needs gdn_residual='identity' (the 'document' GDN block has no "
                             f"residual branch to wrap), got {config.gdn_residual!r}")
        self.config = config
        self.gradient_checkpointing = False
        self.embed = nn.Embedding(config.vocab_size, config.dim)  # (vocab, dim)
        if config.embed_init == "scaled":
            nn.init.normal_(self.embed.weight, mean=0.0, std=config.dim ** -0.5)
        nope = set(config.nope_gdn_positions)
        self.layers = nn.ModuleList(
            MLABlock(config, layer_idx=i) if kind == "mla"
            else GDNBlock(config, layer_idx=i, use_rope=i not in nope)
            for i, kind in enumerate(config.layer_types))
        self.norm = nn.RMSNorm(config.dim, eps=config.norm_eps)
        self.head = nn.Linear(config.dim, config.vocab_size, bias=False)
        self.head.weight = self.embed.weight  # tied: one tensor, one gradient
        self.mtp = MultiTokenPrediction(config) if config.mtp_depth > 0 else None
        # mHC, one per residual branch; built last so that every other weight is the same,
        # seed for seed, as with hc_mult = 1
        self.mhc = nn.ModuleList(
            nn.ModuleList(ManifoldHyperConnection(config.dim, config.hc_mult,
                                                  config.hc_sinkhorn_iters,
                                                  norm_eps=config.norm_eps)
                          for _ in sublayers(layer))
            for layer in self.layers) if config.hc_mult > 1 else None

    # ---- pieces -----------------------------------------------------------------------
    def softcap(self, logits: torch.Tensor) -> torch.Tensor:
        return softcap(logits, self.config.logit_softcap)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """softcap(head(norm(hidden))): pre-norm hidden (b, t, dim) -> (b, t, vocab) fp32.
        The cap is applied in fp32: under bf16 autocast, tanh of a bf16 logit would round
        the logit a second time (bf16 holds 3 significant digits; logits reach ±15)."""
        return self.softcap(self.head(self.norm(hidden)).float())

    def run_layers(self, x: torch.Tensor) -> torch.Tensor:
        if self.mhc is not None:
            return self._run_streams(x)
        for layer in self.layers:
            if self.gradient_checkpointing and self.training and torch.is_grad_enabled():
                x = checkpoint(layer, x, use_reentrant=False)  # recomputed in backward
            else:
                x = layer(x)  # (b, t, dim)
        return x

    def _run_streams(self, x: torch.Tensor) -> torch.Tensor:
        """hc_mult > 1: the widened residual through the stack, then the mean stream."""
        streams = expand(x, self.config.hc_mult)  # (b, t, n, dim)
        for layer, hcs in zip(self.layers, self.mhc, strict=True):
            step = partial(_mhc_layer, layer, hcs)
            if self.gradient_checkpointing and self.training and torch.is_grad_enabled():
                streams = checkpoint(step, streams, use_reentrant=False)
            else:
                streams = step(streams)  # (b, t, n, dim)
        return collapse(streams)  # (b, t, dim)

    def moe_layers(self) -> list[DeepSeekMoE]:
        return [m for m in self.modules() if isinstance(m, DeepSeekMoE)]

    # ---- forward ----------------------------------------------------------------------
    def forward_with_hidden(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits (b, t, vocab) soft-capped, hidden (b, t, dim) before the final norm)."""
        check_tokens(tokens, self.config)
        hidden = self.run_layers(self.embed(tokens))  # (b, t, dim)
        return self.logits(hidden), hidden

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.forward_with_hidden(tokens)[0]  # (b, t, vocab)

    def loss(self, tokens: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Next-token cross-entropy plus sum_d w_d · CE_d over the MTP depths.

        tokens (b, T + 1): the model reads ``tokens[:, :-1]`` (T <= max_seq_len positions);
        position i of the main logits predicts tokens[:, i + 1], position i of MTP depth d
        predicts tokens[:, i + d + 1]. Returns ``(total, parts)`` with parts
        {"main": CE, "mtp_1": CE_1, ...} (detached) and ``total`` differentiable.
        """
        depth = self.config.mtp_depth
        check_tokens(tokens, self.config, min_len=depth + 2, targets=1)
        weights = self.config.mtp_loss_weights
        if resolve_loss_impl(self.config.loss_impl, tokens.device) == "chunked":
            total, (main, *losses) = self._chunked_losses(tokens)
        else:
            main, *losses = self._plain_losses(tokens)
            total = main
            for ce, w in zip(losses, weights, strict=True):
                total = total + w * ce
        parts = {"main": main.detach()}
        for d, ce in enumerate(losses, start=1):
            parts[f"mtp_{d}"] = ce.detach()
        return total, parts

    def _plain_losses(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """[main CE, CE_1, ...] from the full logits of each head (the reference)."""
        inputs = tokens[:, :-1]  # (b, T): every position has a target
        logits, hidden = self.forward_with_hidden(inputs)  # (b, T, V), (b, T, dim)
        losses = [_cross_entropy(logits, tokens[:, 1:])]
        if self.mtp is not None:  # h_d (b, T-d, dim): position i predicts token i + d + 1
            for d, h in enumerate(self.mtp(hidden, inputs, self.embed), start=1):
                losses.append(_cross_entropy(self.logits(h), tokens[:, d + 1:]))
        return losses

    def _chunked_losses(self, tokens: torch.Tensor):
        """(total, [main CE, CE_1, ...] detached) without any (b, t, V) tensor: every head
        chunk by chunk, in one call that shares the tied weight's cast and its gradient
        buffer."""
        inputs = tokens[:, :-1]
        hidden = self.run_layers(self.embed(inputs))  # (b, T, dim)
        hiddens, targets = [self.norm(hidden)], [tokens[:, 1:]]
        if self.mtp is not None:
            for d, h in enumerate(self.mtp(hidden, inputs, self.embed), start=1):
                hiddens.append(self.norm(h))  # (b, T-d, dim)
                targets.append(tokens[:, d + 1:])
        lambdas = [1.0, *self.config.mtp_loss_weights[:len(hiddens) - 1]]
        return linear_softcap_cross_entropy_heads(hiddens, self.head.weight, targets,
                                                  self.config.logit_softcap, lambdas)

    @torch.no_grad()
    def update_moe_biases(self) -> None:
        """Once per optimizer step: the aux-loss-free balancing update of every MoE."""
        for moe in self.moe_layers():
            moe.update_bias()

    def extra_repr(self) -> str:
        c = self.config
        return (f"layers={c.n_layers} (mla at {list(c.mla_positions)}), dim={c.dim}, "
                f"vocab={c.vocab_size}, mtp_depth={c.mtp_depth}, tied head"
                + (f", hc_mult={c.hc_mult}" if c.hc_mult > 1 else ""))


def _mhc_layer(block: nn.Module, hcs: nn.ModuleList, streams: torch.Tensor) -> torch.Tensor:
    for hc, branch in zip(hcs, sublayers(block), strict=True):
        streams = hc(streams, branch)  # (b, t, n, dim)
    return streams


def _cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean CE over every position, in fp32 whatever the logits' dtype."""
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())


def build_hymo(config: HyMoConfig | ModelConfig) -> HyMo:
    """The model for a full config or a model config. (The document's factory is a
    pass-through kept "for extensibility"; so is this one.)"""
    if isinstance(config, HyMoConfig):
        config = config.model
    if not isinstance(config, ModelConfig):
        raise TypeError(f"build_hymo takes a HyMoConfig or ModelConfig, "
                        f"got {type(config).__name__}")
    return HyMo(config)
