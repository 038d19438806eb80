"""The document's claims about the stack and the forward pass through it (sections 3 and 10)."""

from __future__ import annotations

from hymo_book.claims.core import Claim
from hymo_book.claims.values import (
    active,
    batch_tokens,
    cfg,
    embedding,
    flops,
    n_params,
    nope_positions,
    softcap_grad,
    stored,
)
from hymo_book.claims.values_errata import (
    first_logits,
)
from hymo_book.claims.values_models import (
    checkpoint_profile,
    checkpoint_saving,
    head_calls_in_forward,
    saved_layer_inputs_per_layer,
)
from hymo_book.prose import fmt


def _ckpt_extra_compute() -> float:
    """Recomputing every layer once: the layers' forward FLOPs over the training step's
    (about 3 × the forward, head and MTP included), for the production model at T=4096."""
    from hymo_book.claims.values import stack_flops

    return stack_flops(4096) / (3 * flops()["total"])


def _ckpt_mini() -> float:
    p = checkpoint_profile()
    return p["checkpointed"]["flops"] / p["plain"]["flops"] - 1


def _active() -> int:
    return active()


def _init_note() -> str:
    default, scaled = first_logits("torch"), first_logits("scaled")
    return (f"reading: section 3.2's, embed_init='scaled' (embed_init='torch' keeps the "
            f"default). With N(0, 1) the tied head's first logits at width {cfg().dim} have a "
            f"standard deviation of {fmt(default['std'])} and "
            f"{fmt(100 * default['beyond_cap'], 2)}% of them lie beyond the soft-cap of "
            f"{fmt(cfg().logit_softcap)}; with N(0, 1/{cfg().dim}), {fmt(scaled['std'])} and "
            f"{fmt(100 * scaled['beyond_cap'], 2)}%")


CLAIMS: list[Claim] = [
    # section 3
    Claim("embed-std", "3.2", "embedding init std = 1/√896 ≈ 0.033", 0.033,
          lambda: float(embedding().std()), "",
          lambda: f"measured on HyMo's embedding at dim {cfg().dim} (embed_init='scaled')",
          tol=0.02),
    Claim("embed-unit-var", "3.2", "so the embedding vectors have unit variance", 1.0,
          lambda: float(embedding().var()), "",
          lambda: (f"each coordinate has variance 1/{cfg().dim}; it is the vector's squared "
                   f"norm that is ~1 (measured: {fmt(float(embedding().pow(2).sum(1).mean()))}). "
                   "Section 10 then says no init pass runs: nn.Embedding's default N(0, 1)")),
    Claim("act-940mb", "3.4", "activations 32 × 4 × 4096 × 896 × 2 bytes ≈ 940 MB", 940e6,
          lambda: cfg().n_layers * batch_tokens() * cfg().dim * 2, "MB",
          "layer inputs only (bf16); everything inside a layer comes on top"),
    Claim("softcap-5", "3.5", "soft-cap 15: gradient ~0.91 for logits within ±5", 0.91,
          lambda: softcap_grad(5.0), "", "1 − tanh²(1/3) at the edge of the range"),
    Claim("softcap-10", "3.5", "soft-cap 15: gradient ~0.64 for logits within ±10", 0.64,
          lambda: softcap_grad(10.0), "", "1 − tanh²(2/3) at the edge of the range"),
    Claim("softcap-15", "3.5", "soft-cap 15: gradient → 0 beyond ±15", 0.0,
          lambda: softcap_grad(15.0), "",
          lambda: (f"at 15 the gradient is still {fmt(softcap_grad(15.0))} (1 − tanh²(1)); it "
                   f"is {fmt(softcap_grad(30.0))} at 30")),
    Claim("nope-positions", "3.3", "NoPE GDN layers {3, 7, ..., 27}", "3, 7, ..., 27",
          nope_positions, "",
          "reading: the GDN layer just before each MLA layer, the rule that gives the list "
          "for the text's layout (MLA first; after would be 1, 5, ..., 29). With the figure's "
          "layout, our default, the list's layers are MLA layers; before is 2, 6, ..., 30 "
          "and after would be 4, 8, ..., 28",
          versus="appendix: 'the GDN layer immediately after each MLA layer'"),
    # section 3
    Claim("tied-saves-3.1.1", "3.1.1", "weight tying: the embedding's 57.5M parameters saved",
          57.5e6, lambda: n_params("embedding"), "M"),
    Claim("embed-share", "3.1.1", "the embedding alone is 6.2% of the model", 0.062,
          lambda: n_params("embedding") / stored(), "%",
          lambda: (f"{fmt(100 * n_params('embedding') / stored())}% of the stored and "
                   f"{fmt(100 * n_params('embedding') / _active())}% of the active parameters")),
    Claim("act-per-layer", "3.4", "activation memory: one (B, T, d) tensor per layer", 1.0,
          saved_layer_inputs_per_layer, "",
          lambda: ("layer inputs' worth of bytes each layer keeps for the backward, counted with "
                   "saved_tensors_hooks on the mini model (2 × 64 tokens): its projections are "
                   "wider than the residual stream, and attention and the MoE keep their "
                   "intermediates")),
    Claim("ckpt-235mb", "3.4", "checkpoints every 4 layers: 8 layer inputs kept, 235 MB", 235e6,
          lambda: 8 * batch_tokens() * cfg().dim * 2, "MB",
          "8 (B, T, d) tensors in bf16: the arithmetic holds, for the layer inputs alone"),
    Claim("ckpt-60pct", "3.4", "checkpointing saves ~60% of the activation memory", 0.60,
          checkpoint_saving, "%",
          lambda: (f"measured on the mini model with every layer checkpointed; the section's own "
                   f"940 → 235 MB is a {fmt(100 * (1 - 235 / 940))}% saving")),
    Claim("ckpt-33pct", "3.4", "checkpointing costs ~33% more compute", 0.33,
          _ckpt_extra_compute, "%",
          lambda: (f"one more forward of the 32 layers over a training step of 3 × the forward "
                   f"(hymo_750m, T = 4,096): the head, MTP and loss are not recomputed; "
                   f"FlopCounterMode measures {fmt(100 * _ckpt_mini())}% on the mini model")),
    Claim("head-twice", "3.7", "forward applies the head to what forward_with_hidden returns",
          2, head_calls_in_forward, "",
          "head calls per forward: the document's forward_with_hidden already computes the "
          "logits, and its forward applies the 64,256-wide head a second time; hymo_mini's "
          "forward uses the logits it returns", approx=0.0),
    # section 10
    Claim("no-init-pass", "10", "no init pass: the embedding keeps nn.Embedding's N(0, 1) "
          "(std 1)", 1.0, lambda: float(embedding().std()), "", _init_note,
          versus="3.2: embedding init std = 1/√896 ≈ 0.033"),
]
