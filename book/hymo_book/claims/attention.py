"""The document's claims about attention: MLA (section 4), the attention variants (section 12)
and the appendix's KV caches and absorption."""

from __future__ import annotations

from hymo_book.claims.core import Claim
from hymo_book.claims.values import (
    active,
    cfg,
    flops,
    mha_cache_8,
    mla_cache_8,
    moe_layer,
    n_params,
    stored,
)
from hymo_book.claims.values_errata import (
    absorbed_cost,
    decode_flops,
    mla_decodes_from_latent,
)
from hymo_book.prose import fmt
from hymo_mini.analysis import costs


def _wkv_a() -> int:
    return cfg().dim * (cfg().kv_lora_rank + cfg().qk_rope_head_dim)


def _wkv_b() -> int:
    c = cfg()
    return c.kv_lora_rank * c.n_kv_groups * (c.qk_nope_head_dim + c.v_head_dim)


def _latent_values() -> int:
    return cfg().kv_lora_rank + cfg().qk_rope_head_dim


def _mha_values() -> int:
    return cfg().n_heads * (cfg().head_dim + cfg().v_head_dim)


def _state_bytes() -> int:
    """One layer's recurrent state in fp32, as hymo_mini keeps it."""
    c = cfg()
    return c.gdn_n_heads * c.gdn_d_state * c.gdn_headdim * 4


def _mla_layers_note(T: int):
    c = cfg()
    return lambda: (f"the arithmetic is full MHA's K and V ({fmt(mha_cache_8(T) / 2 ** 20)} MiB "
                    f"for 8 layers); HyMo's MLA layers cache the latent and k_pe, "
                    f"({c.kv_lora_rank} + {c.qk_rope_head_dim}) values × 2 bytes per token and "
                    "layer: the saving section 4.2 is about")


def _latent_cache(rank: int, T: int = 4096) -> int:
    from hymo_mini.config import replace

    return costs.mla_cost(replace(cfg(), kv_lora_rank=rank), T, cache="latent").cache_bytes


def _latent_note(rank: int):
    c = cfg()
    return lambda: (f"({rank} + {c.qk_rope_head_dim}) values × 2 bytes × 4,096 tokens = "
                    f"{fmt(_latent_cache(rank) / 2 ** 20)} MiB; the table's MB are full MHA's "
                    "scale, not the latent's")


def _cache_by_groups() -> str:
    from hymo_mini.config import replace

    sizes = {g: costs.mla_cost(replace(cfg(), n_kv_groups=g), 1, cache="latent").cache_bytes
             for g in (1, 4, 8, 16)}
    if len(set(sizes.values())) == 1:
        return f"the same for {', '.join(map(str, sizes))} groups"
    return "grows with the groups"


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


CLAIMS: list[Claim] = [
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
    Claim("moe-active-layer", "12.2.4", "one MoE layer: 132.1M active parameters", 132.1e6,
          lambda: moe_layer("active"), "M",
          lambda: (f"reading: the section's own arithmetic, which is right "
                   f"({cfg().n_activated_experts} routed + {cfg().n_shared_experts} shared "
                   f"expert, plus the {fmt(cfg().dim * cfg().n_routed_experts)}-weight router it "
                   "leaves out)"),
          versus="same section: 2 × 6.19M + 6.19M = 18.57M"),
    Claim("moe-stored-layer", "12.2.4", "one MoE layer: 1,170.4M stored parameters", 1170.4e6,
          lambda: moe_layer("stored"), "M",
          "reading: the section's own arithmetic (16 routed + 1 shared expert, plus the router)",
          versus="same section: 16 × 6.19M + 6.19M = 105.2M"),
    Claim("moe-active-8", "12.2.4", "8 MoE layers: 148.6M active", 148.6e6,
          lambda: (n_params("moe_routed", "active") + n_params("moe_shared")
                   + n_params("moe_router")), "M"),
    Claim("moe-stored-8", "12.2.4", "8 MoE layers: 841.6M stored", 841.6e6,
          lambda: n_params("moe_routed") + n_params("moe_shared") + n_params("moe_router"), "M"),
    Claim("mtp-params", "12.2.5", "MTP heads: 2 × 6.19M = 12.38M", 12.38e6,
          lambda: n_params("mtp"), "M"),
    # section 12
    Claim("stored-gb", "12.1.1", "stored 1.13B × 4 bytes = 4.51 GB (BF16)", 4.51e9,
          lambda: 2 * stored(), "GB",
          lambda: f"4 bytes is fp32; bf16 weights take {fmt(2 * stored() / 1e9)} GB"),
    Claim("active-gb", "12.1.2", "active 434M × 4 bytes = 1.74 GB (BF16)", 1.74e9,
          lambda: 2 * active(), "GB", "again fp32 bytes labelled bf16"),
    Claim("efficiency", "12.1.3", "active / stored = 434M / 1.13B ≈ 40%", 0.40,
          lambda: active() / stored(), "%"),
    Claim("embedding", "12.2.1", "embedding 64,256 × 896 = 57.6M", 57.6e6,
          lambda: n_params("embedding"), "M"),
    Claim("gdn-layer", "12.2.2", "one GDN block: ~8.07M parameters", 8.07e6,
          lambda: n_params("gdn") / len(cfg().gdn_positions), "M"),
    Claim("gdn-total", "12.2.2", "24 GDN blocks: 193.7M", 193.7e6, lambda: n_params("gdn"), "M"),
    Claim("gdn-state-80k", "12.2.2", "recurrent state [40, 32, 32] bf16 = 80 KB per layer",
          80 * 2 ** 10, lambda: cfg().gdn_n_heads * cfg().gdn_d_state * cfg().gdn_headdim * 2,
          "KiB", lambda: (f"hymo_mini keeps the state in fp32: "
                          f"{fmt(_state_bytes() / 1024)} KiB")),
    Claim("mla-total", "12.3", "8 MLA attentions: 22.2M", 22.2e6, lambda: n_params("mla"), "M"),
    Claim("total-active", "12.3", "active parameters: ~434M", 434e6, active, "M"),
    Claim("total-stored", "12.3", "stored parameters: ~1.13B", 1.13e9, stored, "B"),
    Claim("flops-0.87G", "12.4.1", "2 × 434M = 0.87 GFLOPs per token", 0.87e9,
          lambda: 2 * active(), "G",
          "two FLOPs per active weight; attention's token mixing comes on top"),
    Claim("flops-1.5G", "12.4.1", "each token uses 1.5 GFLOPs", 1.5e9,
          lambda: flops()["total"], "G",
          lambda: (f"neither: the forward at T=4096 costs "
                   f"{fmt(flops(include_mtp=False)['total'] / 1e9)} G, "
                   f"{fmt(flops()['total'] / 1e9)} G with the MTP depths (chapter 14); 2 × "
                   "active counts the weight multiplies only"),
          versus="two lines earlier: 0.87 GFLOPs"),
    Claim("scale-7.44B", "12.4.2", "1.5B active would need 3B × 2.6 = 7.44B stored", 7.44e9,
          lambda: 1.5e9 * stored() / active(), "B",
          lambda: (f"1.5B × {fmt(stored() / active())} = {fmt(1.5 * stored() / active())}B; "
                   f"(3B × {fmt(stored() / active())} is {fmt(3 * stored() / active())}B, not "
                   "7.44B)")),
    Claim("model-750M", "12.5", "the model has ~750M (active) parameters (hymo_750m)", 750e6,
          active, "M", "reading: the count; no count gives 750M (12.5 reaches for it by adding "
          "a dense FFN the GDN blocks do not have)",
          versus="12.3: ~434M active"),
    # appendix
    Claim("gqa-cache", "appendix", "GQA cache per token = MHA / n_heads / n_kv_groups", 64,
          lambda: (costs.mha_cost(cfg(), 1).cache_bytes
                   / costs.mha_cost(cfg(), 1, n_kv_heads=cfg().n_kv_groups).cache_bytes), "×",
          lambda: (f"GQA-{cfg().n_kv_groups} keeps {cfg().n_kv_groups} of {cfg().n_heads} KV "
                   f"heads: MHA / {cfg().n_heads // cfg().n_kv_groups}; the table's formula "
                   "gives MHA / 64 (the text's formula is gqa-cache-text)")),
    Claim("latent-1mb", "appendix", "the latent cache: 4096 × 128 × 2 = 1 MB per token",
          2 ** 20, lambda: costs.mla_cost(cfg(), 1, cache="latent").cache_bytes, "",
          lambda: (f"1 MB is 4,096 tokens of one layer; one token takes ({cfg().kv_lora_rank} + "
                   f"{cfg().qk_rope_head_dim}) × 2 = "
                   f"{costs.mla_cost(cfg(), 1, cache='latent').cache_bytes} bytes"),
          approx=0.0),
    Claim("latent-4x", "appendix", "the shared latent saves ~4× on KV cache", 4,
          lambda: (costs.mha_cost(cfg(), 1).cache_bytes
                   / costs.mla_cost(cfg(), 1, cache="latent").cache_bytes), "×",
          lambda: (f"MHA's K and V over the latent and k_pe, per token: {fmt(_mha_values())} / "
                   f"{cfg().kv_lora_rank + cfg().qk_rope_head_dim} values; the section's own "
                   "byte counts, (4096 × 16 × 256 × 2) over (4096 × 128 × 2), give "
                   f"{fmt((4096 * 16 * 256 * 2) / (4096 * 128 * 2))}×")),
    # section 4
    Claim("kv-8-mla", "4.1.1", "with 8 MLA layers: 256 MB of KV cache at T=4096", 256 * 2 ** 20,
          lambda: mla_cache_8(4096), "MiB", _mla_layers_note(4096)),
    Claim("kv-8-mla-32k", "4.1.1", "with 8 MLA layers at T=32K: 2 GB of KV cache", 2 * 2 ** 30,
          lambda: mla_cache_8(32_768), "MiB", _mla_layers_note(32_768)),
    Claim("groups-cache", "4.2.3", "8 KV groups (GQA) would defeat the compression",
          "grows with the groups", _cache_by_groups, "",
          lambda: ("latent cache bytes per token with 1, 4, 8 and 16 KV groups: the latent and "
                   "the shared k_pe do not depend on the groups; only the expansion does")),
    Claim("kv-rank-64", "4.5.1", "kv_lora_rank = 64: KV cache 16 MB per layer", 16e6,
          lambda: _latent_cache(64), "MB", _latent_note(64)),
    Claim("kv-rank-256", "4.5.1", "kv_lora_rank = 256: KV cache 64 MB per layer", 64e6,
          lambda: _latent_cache(256), "MB", _latent_note(256)),
    Claim("kv-rank-512", "4.5.1", "kv_lora_rank = 512: KV cache 128 MB per layer", 128e6,
          lambda: _latent_cache(512), "MB", _latent_note(512)),
    Claim("latent-norm-params", "4.5.4", "RMSNorm on the latents has no learnable parameters",
          0, lambda: cfg().q_lora_rank + cfg().kv_lora_rank, "",
          "q_norm and kv_norm each have a per-feature weight (the section's next words: "
          "'just per-feature scaling')", approx=0.0),
    Claim("head-dim", "4.8", "head_dim = 128: '896/16 = 56? No — expanded to 128'", 128,
          lambda: cfg().head_dim, "",
          lambda: (f"a field of its own, not derived from dim: the queries are {cfg().n_heads} × "
                   f"{cfg().head_dim} = {fmt(cfg().n_heads * cfg().head_dim)} wide against "
                   f"dim {cfg().dim}")),
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
