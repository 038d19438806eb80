"""The document's claims of sections 1 to 5: overview, configuration, stack, MLA, GDN."""

from __future__ import annotations

import math

from hymo_book.claims.core import Claim
from hymo_book.claims.values import (
    batch_tokens,
    cfg,
    crossing,
    decay,
    decay_gate_source,
    embedding,
    gate_at_init,
    gdn_block,
    hybrid_share,
    layout,
    n_params,
    softcap_grad,
)
from hymo_book.prose import fmt
from hymo_mini.analysis import costs


def _mha(T: int = 4096, causal: bool = True):
    return costs.mha_cost(cfg(), T, causal=causal)


def _gdn(T: int = 4096):
    return costs.gdn_cost(cfg(), T)


def _mla_cache(T: int) -> int:
    return costs.mla_cost(cfg(), T, cache="latent").cache_bytes


def _mixing_400() -> int:
    return crossing(lambda T: _mha(T).mixing_flops / _gdn(T).mixing_flops, 400)


def _tokens_for_capacity(capacity: int) -> int:
    """The batch tokens whose capacity is ``capacity`` (the inverse of moe_capacity)."""
    c = cfg()
    return round(capacity * c.n_routed_experts / (c.capacity_factor * c.n_activated_experts))


def _wkv_a() -> int:
    return cfg().dim * (cfg().kv_lora_rank + cfg().qk_rope_head_dim)


def _wkv_b() -> int:
    c = cfg()
    return c.kv_lora_rank * c.n_kv_groups * (c.qk_nope_head_dim + c.v_head_dim)


def _latent_values() -> int:
    return cfg().kv_lora_rank + cfg().qk_rope_head_dim


def _mha_values() -> int:
    return cfg().n_heads * (cfg().head_dim + cfg().v_head_dim)


def _steps_below(share: float) -> int:
    """Steps after which head 0 keeps less than ``share`` of a token at the initial gate."""
    return math.ceil(math.log(share) / (gate_at_init() * decay(0)))


def _mixers_share(T: int = 4096) -> float:
    """The mixers alone (no MoE): what the cost model of chapter 01 draws."""
    return costs.stack_cost(cfg(), T).flops / costs.stack_cost(cfg(), T, gdn_per_mla=0).flops

CLAIMS_01_05: list[Claim] = [
    # section 1
    Claim("attn-flops", "1.1.1", "full attention at T=4096: 4096² × 896 ≈ 15 GFLOPs per layer",
          15e9, lambda: _mha(causal=False).mixing_flops, "G",
          lambda: (f"q·kᵀ and p·v over {cfg().n_heads} heads of {cfg().head_dim}: "
                   f"{fmt(_mha(causal=False).mixing_flops / 1e9)} GFLOPs "
                   f"({fmt(_mha().mixing_flops / 1e9)} with a causal mask, "
                   f"{fmt(_mha().flops / 1e9)} with the projections); {cfg().dim} is the model "
                   f"width, not the attention width ({fmt(cfg().n_heads * cfg().head_dim)})")),
    Claim("kv-16mb", "1.1.1", "KV memory: 4096 × 16 × 128 × 2 bytes ≈ 16 MB per layer",
          16 * 2 ** 20, lambda: _mha().cache_bytes, "MiB",
          lambda: (f"counts K only; K and V take {fmt(_mha().cache_bytes / 2 ** 20)} MiB, as "
                   f"section 4.1.1 itself computes; HyMo's MLA latent cache takes "
                   f"{fmt(_mla_cache(4096) / 2 ** 20)} MiB")),
    Claim("kv-8-layers", "1.1.1", "8 attention layers: 128 MB of KV cache at T=4096",
          128 * 2 ** 20, lambda: 8 * _mha().cache_bytes, "MiB",
          lambda: (f"full K and V of {cfg().n_heads} heads; HyMo's 8 MLA layers cache "
                   f"{fmt(8 * _mla_cache(4096) / 2 ** 20)} MiB of latents")),
    Claim("gdn-400x", "1.1.2", "GDN (S=D=32) is ~400× faster than full attention",
          400, lambda: _mha().mixing_flops / _gdn().mixing_flops, "×",
          lambda: (f"token-mixing FLOPs at T=4096, causal attention against the recurrence "
                   f"({fmt(_mha(causal=False).mixing_flops / _gdn().mixing_flops)}× without "
                   f"the mask); whole layers with their projections: "
                   f"{fmt(_mha().flops / _gdn().flops)}×. The mixing ratio grows with T and "
                   f"reaches 400× at T = {fmt(_mixing_400())}")),
    Claim("hybrid-40pct", "1.1.3", "the 3:1 hybrid costs ~40% of full attention's compute",
          0.40, lambda: hybrid_share(4096), "%",
          lambda: (f"forward FLOPs per token of the whole stack at T=4096, "
                   f"{len(cfg().gdn_positions)} GDN + {len(cfg().mla_positions)} MLA layers "
                   f"(MoE on {len(cfg().mla_positions)}) against {cfg().n_layers} MLA layers "
                   f"(MoE on all {cfg().n_layers}): the MoE counts in both. "
                   f"The mixers alone give {fmt(100 * _mixers_share())}%; the whole stack "
                   f"reaches 40% at T = {fmt(crossing(hybrid_share, 0.40, 1, 1 << 20))}")),
    Claim("mla-positions", "1.2.1", "MLA layers at {0, 4, ..., 28}", "0, 4, ..., 28",
          lambda: layout(cfg().mla_positions), "",
          "reading: the figure's, MLA last in each group of four, on the MQAR seeds "
          "(book/results/mqar_seeds_h200_2026-12-01.json): the 3:1 hybrids with MLA last "
          "learned the task in 3 of 6 runs, those with MLA first in none. The text states "
          "its layout five times, with a rationale and a per-layer RoPE table; "
          "config.mla_position = 'first' gives it",
          versus="the closing figure draws MLA at L03, L07, ..., L31"),
    Claim("gdn-params-2.5M", "1.3.1", "a GDN layer has ~2.5M parameters", 2.5e6,
          lambda: n_params("gdn") / len(cfg().gdn_positions), "M",
          "reading: the modules (section 5's block), whose tensors 12.2.2 lists correctly",
          versus="12.2.2: ~8.07M per GDN block"),
    Claim("mla-params-5.8M", "1.3.1", "an MLA layer has ~5.8M parameters", 5.8e6,
          lambda: n_params("mla") / len(cfg().mla_positions), "M",
          "reading: the attention of section 4 (wq_a, wq_b, wkv_a, wkv_b, wo, norms, scales); "
          "12.2.3's list describes matrices it does not have",
          versus="12.2.3 list: ~1.23M; 12.3 table: 22.2M / 8 = 2.78M"),
    Claim("tied-saves", "1.5", "weight tying saves 57.6M parameters", 57.6e6,
          lambda: cfg().vocab_size * cfg().dim, "M"),
    # section 2
    Claim("gdn-heads", "2.5.2", "gdn_n_heads = 1280 / 32 = 40", 40, lambda: cfg().gdn_n_heads,
          approx=0.0),
    Claim("capacity", "2.5.3",
          "capacity = 1.5 × (4 × 4096 × 2) / 16 = 768 per expert (again in 8.2.3)", 768,
          lambda: cfg().moe_capacity(batch_tokens()), "",
          lambda: (f"{fmt(batch_tokens())} tokens × {cfg().n_activated_experts} choices / "
                   f"{cfg().n_routed_experts} experts = "
                   f"{fmt(batch_tokens() * cfg().n_activated_experts // cfg().n_routed_experts)}"
                   f", × {cfg().capacity_factor} = {fmt(cfg().moe_capacity(batch_tokens()))}; "
                   f"768 is the capacity of {fmt(_tokens_for_capacity(768))} tokens"),
          approx=0.0),
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
    # section 4
    Claim("kv-32mb", "4.1.1", "KV cache 2 × 16 × 128 × 4096 × 2 bytes = 33,554,432 B", 33_554_432,
          lambda: costs.mha_cost(cfg(), 4096).cache_bytes),
    Claim("pairs-2G", "4.1.2", "T=4096: ~2 billion query-key pairs (16 heads × 8 layers)", 2e9,
          lambda: costs.attention_pairs(4096, causal=False) * cfg().n_heads * 8, "B",
          lambda: (f"4096² × {cfg().n_heads} × 8 = "
                   f"{fmt(costs.attention_pairs(4096, causal=False) * cfg().n_heads * 8 / 1e9)} "
                   "billion; about half of them with a causal mask"), approx=0.1),
    Claim("kv-proj-mha", "4.2.1", "standard K, V projections: 2 × d × (16 × 128) = 1.84M",
          1.84e6, lambda: 2 * cfg().dim * cfg().n_heads * cfg().head_dim, "M",
          "1.84M is one of the two matrices"),
    Claim("kv-proj-mla", "4.2.1", "MLA KV projections: d × 160 + 128 × 896 = 257K", 257e3,
          lambda: cfg().dim * (cfg().kv_lora_rank + cfg().qk_rope_head_dim)
          + cfg().kv_lora_rank * cfg().n_kv_groups * (cfg().qk_nope_head_dim + cfg().v_head_dim),
          "K", lambda: (f"{fmt(_wkv_a())} + {fmt(_wkv_b())} = {fmt(_wkv_a() + _wkv_b())}")),
    Claim("mla-cache-256", "4.2.1", "MLA caches 128 + 4 × 32 = 256 values per token", 256,
          lambda: costs.mla_cost(cfg(), 1, cache="latent", cache_dtype_bytes=1).cache_bytes,
          "", lambda: (f"k_pe is one {cfg().qk_rope_head_dim}-channel key shared by the "
                       f"{cfg().n_kv_groups} groups: {cfg().kv_lora_rank} + "
                       f"{cfg().qk_rope_head_dim} = {_latent_values()} values"),
          approx=0.0),
    Claim("mla-16x", "4.2.1", "16× KV cache compression against MHA", 16,
          lambda: (costs.mha_cost(cfg(), 1).cache_bytes
                   / costs.mla_cost(cfg(), 1, cache="latent").cache_bytes), "×",
          lambda: (f"{fmt(_mha_values())} / {_latent_values()} values per token, bf16 both")),
    Claim("q-lowrank", "4.3.1", "low-rank queries: 659K vs 1.84M parameters (2.8× savings)", 2.8,
          lambda: (cfg().dim * cfg().n_heads * cfg().head_dim)
          / (cfg().dim * cfg().q_lora_rank + cfg().q_lora_rank * cfg().n_heads * cfg().head_dim),
          "×", tol=0.01),
    Claim("kv-rank-32mb", "4.5.1", "kv_lora_rank = 128: KV cache 32 MB per layer", 32e6,
          lambda: costs.mla_cost(cfg(), 4096, cache="latent").cache_bytes, "MB",
          "the latent cache of 4,096 tokens in bf16; 32 MB is full MHA's"),
    Claim("q-rank-pct", "4.5.2", "q_lora_rank 224 = 22.5% of the 2,048-wide query", 0.225,
          lambda: cfg().q_lora_rank / (cfg().n_heads * cfg().head_dim), "%",
          lambda: (f"{cfg().q_lora_rank} / {fmt(cfg().n_heads * cfg().head_dim)} = "
                   f"{fmt(100 * cfg().q_lora_rank / (cfg().n_heads * cfg().head_dim))}%; 22.5% "
                   f"of {fmt(cfg().n_heads * cfg().head_dim)} would be "
                   f"{fmt(round(0.225 * cfg().n_heads * cfg().head_dim))}")),
    # section 5
    Claim("decay-head0", "5.3.2", "head 0 decays by exp(−1) = 0.37 per step (~3 steps)", 0.37,
          lambda: math.exp(gate_at_init() * decay(0)), "",
          lambda: (f"the decay is exp(g·A), and at init g = sigmoid(dt_proj(u) + 0) has mean "
                   f"{fmt(gate_at_init())}: head 0 keeps {fmt(math.exp(gate_at_init() * decay(0)))}"
                   f" per step and falls below 5% after {_steps_below(0.05)} steps")),
    Claim("decay-head10", "5.3.2", "head 10: A = −10", -10.0, lambda: decay(10), "",
          "A_log = log(1..40), so head h has A = −(h + 1)", approx=0.0),
    Claim("decay-head39", "5.3.2", "head 39: A = −39", -39.0, lambda: decay(39), "",
          approx=0.0),
    Claim("A_log-shape", "5.2.1", "A ∈ R^S; A_log initialised as log(arange(1, H+1))",
          "(32,) / (40,)", lambda: str(tuple(gdn_block()[0].mixer.A_log.shape)), "",
          "reading: per head and state dimension, as the parameter count says (a per-head "
          "vector is its special case); every column starts at log(h + 1)",
          versus="12.2.2: A_log is 40 × 32"),
    Claim("decay-gate", "5.2.1", "the decay gate g_t = sigmoid(dt_proj(...))", "dt_proj",
          decay_gate_source, "",
          "reading: g = sigmoid(dt_proj(u) + dt_bias), found by perturbing each projection; "
          "g_proj's mean is the output gate, so every projection gets a gradient (with g_proj "
          "for both, dt_proj and dt_bias would be dead)",
          versus="5.4.3: g = mean over D of sigmoid(g_proj(v))"),
    Claim("state-500x", "5.3.3", "GDN state 1,024 per head: ~500× smaller than 4096 × 128",
          500, lambda: 4096 * cfg().head_dim / (cfg().gdn_d_state * cfg().gdn_headdim), "×",
          lambda: (f"4096 × {cfg().head_dim} / ({cfg().gdn_d_state} × {cfg().gdn_headdim}) = "
                   f"{fmt(4096 * cfg().head_dim / (cfg().gdn_d_state * cfg().gdn_headdim))}×"),
          tol=0.03),
    Claim("d-inner-ratio", "5.4.1", "d_inner / d_model ≈ 1.43 (896 × 1.43 ≈ 1280)", 1.43,
          lambda: cfg().gdn_d_inner / cfg().dim, ""),
]
