"""Claims of sections 7 to 10 and the appendix that the teaching chapters' errata tables
listed (chapters 04 RoPE, 05 attention, 06 MLA, 11 MoE, 12 MTP, 13 the stack), beyond those
of :mod:`hymo_book.claims.sections_06_12`.

Each is computed from the package, most from a small experiment in
:mod:`hymo_book.claims.values_errata`; notes that state numbers compute them.
"""

from __future__ import annotations

from hymo_book.claims.core import Claim
from hymo_book.claims.values import cfg, embedding
from hymo_book.claims.values_errata import (
    absorbed_cost,
    decode_flops,
    documented_expert_params,
    documented_gate_bias,
    dropped_share,
    expert_bias_is_buffer,
    first_logits,
    gate_bias_gradient,
    mla_decodes_from_latent,
    mtp_gradient_share,
    mtp_reads_next_token,
    pairs_without_a_turn,
    rope_distance_facts,
    rope_distance_reading,
    rope_wavelengths,
    router_round_trip,
    small_k_frequency,
)
from hymo_book.prose import fmt
from hymo_mini.analysis import costs

SKEW = 0.1  # chapter 11's mild preference of the router for the last experts


def _rope_distance_note() -> str:
    f = rope_distance_facts()
    yes = {True: "holds", False: "fails"}
    return (f"the identity rotates both vectors by the same p, so p drops out: it "
            f"{yes[f['random_keeps_distance']]} for a random orthogonal map drawn anew at every "
            f"position too, whose scores at one distance s − p "
            f"{'agree' if f['random_relative'] else 'disagree'}. What gives relative positions "
            f"is R(p)ᵀR(s) = R(s − p): R(p)x · R(s)y = x · R(s − p)y "
            f"{yes[f['rope_shift_rule']]} for the package's rotation (chapter 04)")


def _wavelength_note() -> str:
    w = rope_wavelengths()
    return (f"θ_k = base^(−2k/{cfg().qk_rope_head_dim}) falls with k: pair 0 turns once every "
            f"{fmt(float(w[0]))} tokens, pair {len(w) - 1} once every {fmt(round(float(w[-1])))}; "
            "the long-range pairs are those of large k")


def _extrapolation_note() -> str:
    c, n_pairs, slow = cfg(), len(rope_wavelengths()), pairs_without_a_turn()
    return (f"how many of the {n_pairs} pairs (rope_dim {c.qk_rope_head_dim}, base "
            f"{fmt(c.rope_theta)}) have a wavelength 2π/θ_k longer than the "
            f"{fmt(c.max_seq_len)} trained positions: those never complete a turn in training, "
            f"so past position {fmt(c.max_seq_len - 1)} their angles, and those of token pairs "
            f"further apart, were never seen. The other {n_pairs - slow} turn at least once, so "
            "any later angle of theirs was: only for those fast pairs is a new position 'one "
            "step beyond'")


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


def _mtp_signal_note() -> str:
    w = cfg().mtp_loss_weights
    share = mtp_gradient_share()
    return (f"the weighted MTP terms' gradient on the layers over the main loss's, in norm, "
            f"measured on the mini model at init (chapter 12's batch; the two gradients have a "
            f"cosine of {fmt(share['cosine'], 2)}). By weight the terms count "
            f"{' + '.join(map(str, w))} = {fmt(sum(w))} of the main loss "
            f"({fmt(100 * sum(w) / (1 + sum(w)))}% of the total weight)")


def _init_note() -> str:
    default, scaled = first_logits("torch"), first_logits("scaled")
    return (f"reading: section 3.2's, embed_init='scaled' (embed_init='torch' keeps the "
            f"default). With N(0, 1) the tied head's first logits at width {cfg().dim} have a "
            f"standard deviation of {fmt(default['std'])} and "
            f"{fmt(100 * default['beyond_cap'], 2)}% of them lie beyond the soft-cap of "
            f"{fmt(cfg().logit_softcap)}; with N(0, 1/{cfg().dim}), {fmt(scaled['std'])} and "
            f"{fmt(100 * scaled['beyond_cap'], 2)}%")


def _gqa_over_mha() -> float:
    c = cfg()
    return costs.mha_cost(c, 1, n_kv_heads=c.n_kv_groups).cache_bytes / costs.mha_cost(
        c, 1).cache_bytes


def _absorb_cache_note() -> str:
    c = cfg()
    return (f"hymo_mini's MLA is not absorbed and caches latent_kv's latent and k_pe, "
            f"{c.kv_lora_rank} + {c.qk_rope_head_dim} values per token; attend re-expands them "
            "through wkv_b and reproduces the module's full pass and its last token decoded "
            "from the cache (mini model, within 1e-5). Absorption changes the arithmetic of "
            "decoding (absorb-flops), not what is cached")


def _absorb_flops_note() -> str:
    c, f = cfg(), decode_flops(4096)
    explicit, kv, absorbed = (f["explicit (expand the latent cache)"], f["expanded K/V cache"],
                              f["absorbed"])
    larger = c.n_kv_groups * (c.head_dim + c.v_head_dim) / (c.kv_lora_rank + c.qk_rope_head_dim)
    return (f"FLOPs to decode one token per MLA layer at 4,096 cached tokens "
            f"(hymo_book.attention_variants.decode_flops): {fmt(explicit / 1e6)}M re-expanding "
            f"the latent cache as the module does, {fmt(absorbed / 1e6)}M absorbed "
            f"({fmt(explicit / absorbed, 2)}× fewer). Only against a cache of expanded K and V "
            f"({fmt(kv / 1e6)}M, a {fmt(larger, 2)}× larger cache) does absorbing cost more, "
            f"{fmt(absorbed / kv, 2)}×")


CLAIMS_ERRATA_07_12: list[Claim] = [
    # section 7
    Claim("rope-distance", "7.2.2", "‖R(p)x − R(p)y‖ = ‖x − y‖: so relative position is encoded",
          "relative position", rope_distance_reading, "", _rope_distance_note),
    Claim("rope-intuition", "7.2.3", "low-frequency components (small k) encode long-range "
          "position", "small k: low frequency", small_k_frequency, "", _wavelength_note),
    Claim("rope-extrapolation", "7.4.3", "RoPE extrapolates: position 4096 is only 'one step "
          "beyond' training (pairs at unseen angles: none)", 0, pairs_without_a_turn, "",
          _extrapolation_note),
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
    # section 9
    Claim("mtp-formula", "9.1.2", "P(x_{t+2} | h_t) = softmax(W_vocab · MTP_1(h_t))",
          "MTP_1(h_t)", mtp_reads_next_token, "",
          "changing token t + 1 with the main hidden states held fixed moves depth 1's output "
          "at t: each depth adds the embedding of the token d places ahead (section 9.2.2's "
          "chain, and hymo_mini's)"),
    Claim("mtp-signal", "9.4.3", "at weights 0.3 and 0.1, MTP adds '~30% additional gradient "
          "signal'", 0.30, lambda: mtp_gradient_share()["ratio"], "%", _mtp_signal_note),
    # section 10
    Claim("no-init-pass", "10", "no init pass: the embedding keeps nn.Embedding's N(0, 1) "
          "(std 1)", 1.0, lambda: float(embedding().std()), "", _init_note,
          versus="3.2: embedding init std = 1/√896 ≈ 0.033"),
    # appendix
    Claim("gqa-cache-text", "appendix", "GQA cache per token = n_heads / n_kv_groups × MHA",
          16 / 4, _gqa_over_mha, "×",
          lambda: (f"GQA-{cfg().n_kv_groups} keeps {cfg().n_kv_groups} of {cfg().n_heads} KV "
                   f"heads: its cache is n_kv_groups / n_heads = {cfg().n_kv_groups}/"
                   f"{cfg().n_heads} of MHA's")),
    Claim("absorb-cache", "appendix", "absorption is 'the trick that lets you store only c_t' "
          "(deferred: HyMo caches per-head k, v)", "per-head k and v", mla_decodes_from_latent,
          "", _absorb_cache_note),
    Claim("absorb-flops", "appendix", "absorbed MLA 'needs extra matmuls' at attention time "
          "(decoding)", "absorbed costs more", absorbed_cost, "", _absorb_flops_note),
]
