"""The document's claims about the mixture of experts (section 8)."""

from __future__ import annotations

from hymo_book.claims.core import Claim
from hymo_book.claims.values import (
    active,
    bf16_tie,
    cfg,
    n_params,
    router_dtype,
    stored,
)
from hymo_book.claims.values_errata import (
    documented_expert_params,
    documented_gate_bias,
    dropped_share,
    expert_bias_is_buffer,
    gate_bias_gradient,
    router_round_trip,
)
from hymo_book.prose import fmt

SKEW = 0.1  # chapter 11's mild preference of the router for the last experts


def _expert_bias_note() -> str:
    c = cfg()
    extra = documented_expert_params() - 3 * c.dim * c.moe_inter_dim
    experts = (c.n_routed_experts + c.n_shared_experts) * len(c.mla_positions)
    return (f"nn.Linear's default bias=True adds {fmt(extra)} per expert "
            f"({c.moe_inter_dim} + {c.dim} + {c.moe_inter_dim}; {fmt(extra * experts)} over the "
            f"{experts} experts of the {len(c.mla_positions)} MoE layers): the count has none, "
            "and hymo_mini's experts have bias=False")


def _dropped_note() -> str:
    c = cfg()
    return (f"assignments dropped in one training batch of 4,096 tokens (capacity "
            f"{c.moe_capacity(4096)} per expert) by the production router at factor "
            f"{c.capacity_factor} when it prefers the last experts slightly (skew {SKEW}, "
            f"chapter 11's experiment); {fmt(100 * dropped_share(SKEW / 2), 2)}% at skew "
            f"{SKEW / 2} and {fmt(100 * dropped_share(0.0), 2)}% for the random router at init: "
            "the share depends on how balanced the router is, not on the factor alone")


def _gate_bias_note() -> str:
    grads = documented_gate_bias()
    kept = "a buffer outside parameters()" if expert_bias_is_buffer() else "a parameter"
    return (f"section 8.2.1's gate is nn.Linear({cfg().dim}, {cfg().n_routed_experts}, "
            f"bias=True), and the bias sits inside the softmax: a loss through the mixed output "
            f"{'reaches' if grads['bias'] > 0 else 'misses'} it (64 random tokens, top-2), so the "
            f"optimizer moves the biases the balancing adjusts. hymo_mini's balancing bias is "
            f"{kept} that only picks the experts (DeepSeek-V3's method)")


def _round_trip_note() -> str:
    found = router_round_trip()
    return (f"tokens whose top-{cfg().n_activated_experts} pair of experts changes when the "
            f"production router at init (4,096 tokens) is rounded to bf16, as gate_forward "
            f"returns it, against fp32; bf16 ties the 2nd place for {fmt(100 * found['tied'])}% "
            "(chapter 11's router_precision)")


CLAIMS: list[Claim] = [
    # section 8
    Claim("expert", "8.5", "one SwiGLU expert: 896 × 2304 × 3 = 6.19M", 6.19e6,
          lambda: n_params("moe_shared") / len(cfg().mla_positions), "M"),
    Claim("capacity-2.6x", "8.1.2", "1.13B stored = 2.6× the 434M active", 2.6,
          lambda: stored() / active(), "×"),
    Claim("bf16-tie", "8.7", "0.1234567 and 0.1234570: equal in BF16, distinct in FP32",
          "bf16 equal, fp32 distinct", bf16_tie),
    Claim("router-fp32", "8.7", "the FP32 upcast keeps routing decisions precise",
          "fp32 routing", router_dtype, "",
          "reading: the text; hymo_mini keeps logits, probabilities and top-k in fp32",
          versus="the same section's code returns logits.to(x.dtype), i.e. bf16 again"),
    # section 8
    Claim("expert-bias", "8.5", "the expert nn.Linear(dim, inter_dim) × 3 has 896 × 2304 × 3 "
          "parameters", 896 * 2304 * 3, documented_expert_params, "", _expert_bias_note,
          tol=0.0, approx=0.0),
    Claim("moe-dropped", "8.2.3", "at capacity_factor 1.5, <0.1% of tokens are dropped", 0.001,
          lambda: dropped_share(SKEW), "%", _dropped_note),
    Claim("gate-bias-grad", "8.4.2", "the balancing adjusts gate biases with 'no gradient "
          "pollution'", "no gradient", gate_bias_gradient, "", _gate_bias_note),
    Claim("router-roundtrip", "8.7", "gate_forward returns logits.to(x.dtype): routing stays "
          "precise (no choice changes)", 0.0, lambda: router_round_trip()["changed"], "%",
          _round_trip_note),
]
