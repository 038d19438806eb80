"""The document's claims about the whole model and its configuration (sections 1 and 2)."""

from __future__ import annotations

import inspect

from hymo_book.claims.core import Claim
from hymo_book.claims.values import (
    batch_tokens,
    cfg,
    crossing,
    hybrid_share,
    layout,
    mha_cache_8,
    mla_cache_8,
    moe_layer,
    n_params,
)
from hymo_book.claims.values_measured import (
    MQAR_LONG_RUN,
    MQAR_RUN,
    STEP_RUN,
    hybrid_over_all_mla,
    mqar_layout_note,
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


def _mixers_share(T: int = 4096) -> float:
    """The mixers alone (no MoE): what the cost model of chapter 01 draws."""
    return costs.stack_cost(cfg(), T).flops / costs.stack_cost(cfg(), T, gdn_per_mla=0).flops


def _kv_cache_note(T: int):
    return lambda: (f"K and V of 16 heads, bf16, 8 layers; HyMo's MLA latent cache of the same "
                    f"8 layers is {fmt(mla_cache_8(T) / 2 ** 20)} MiB")


def _error_of(fn) -> str:
    try:
        fn()
    except Exception as err:  # noqa: BLE001 - the claim reports whatever it raises
        return type(err).__name__
    return "a variant"


def _replace_whole_config() -> str:
    from hymo_mini.config import load_config, replace

    return _error_of(lambda: replace(load_config("hymo_750m"), dim=512, n_heads=8))


def _config_check_example() -> str:
    """What the config says to an inconsistent head count (n_heads = 15, 4 KV groups)."""
    from hymo_mini.config import replace

    try:
        replace(cfg(), n_heads=15)
    except Exception as err:  # noqa: BLE001
        return f"{type(err).__name__}: {err}"
    return "accepted"


def _property_names() -> list[str]:
    from hymo_mini.model_config import ModelConfig

    return [n for n, v in inspect.getmembers(ModelConfig) if isinstance(v, property)]


def _yaml_sections() -> str:
    from hymo_mini.config import config_to_dict, load_config

    return ", ".join(config_to_dict(load_config("hymo_750m")))


def _mini_vocab() -> str:
    from hymo_mini.config import load_config

    return fmt(load_config("hymo_mini").model.vocab_size)


CLAIMS: list[Claim] = [
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
          lambda: ("reading: the figure's, MLA last in each group of four, the layout that "
                   f"learned on the MQAR seeds ({MQAR_RUN}: {mqar_layout_note()}; at three "
                   f"times the steps, {MQAR_LONG_RUN}: {mqar_layout_note(MQAR_LONG_RUN)}). "
                   "All-MLA never learning says the recipe, not the budget, held attention-first "
                   "stacks back, so this is a reading within that recipe. The text states its "
                   "layout five times, with a rationale and a per-layer RoPE table; "
                   "config.mla_position = 'first' gives it"),
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
    # section 1
    Claim("kv-8-layers-32k", "1.1.1", "8 attention layers: 1 GB of KV cache at T=32K", 2 ** 30,
          lambda: mha_cache_8(32_768), "GiB", _kv_cache_note(32_768)),
    Claim("kv-8-layers-128k", "1.1.1", "8 attention layers: 4 GB of KV cache at T=128K",
          4 * 2 ** 30, lambda: mha_cache_8(131_072), "GiB", _kv_cache_note(131_072)),
    Claim("moe-9M", "1.3.1", "the MoE on an MLA layer: ~9M parameters per token", 9e6,
          lambda: moe_layer("active"), "M",
          lambda: (f"2 routed + 1 shared SwiGLU expert and the router: {fmt(moe_layer('active'))}"
                   f" active, {fmt(moe_layer('stored'))} stored per layer")),
    # section 2
    Claim("vocab-constant", "2.1",
          "the only numeric literals in code are constants such as vocab_size = 64,256",
          "a constant in code", lambda: "a config field", "",
          lambda: (f"hymo_mini reads it from the config: {fmt(cfg().vocab_size)} in hymo_750m, "
                   f"{_mini_vocab()} in the byte-level hymo_mini preset")),
    Claim("replace-variant", "2.4", "replace(config, dim=512, n_heads=8) makes a variant",
          "a variant", _replace_whole_config, "",
          "the whole config has no field dim: replace its model section, then the config "
          "(hymo_mini.config.replace(config.model, dim=512, n_heads=8) is a variant)"),
    Claim("derive-config", "2.4",
          "derive_config() computes the RoPE split and both LoRA ranks by an empirical formula",
          None, lambda: "the ranks are fields; qk_nope_head_dim is a property", "",
          lambda: (f"no formula is given; hymo_750m sets q_lora_rank = {cfg().q_lora_rank}, "
                   f"kv_lora_rank = {cfg().kv_lora_rank}, qk_rope_head_dim = "
                   f"{cfg().qk_rope_head_dim}, and derives qk_nope_head_dim = "
                   f"{cfg().qk_nope_head_dim}")),
    Claim("cross-checks", "2.6", "cross-field validation: VRAM budget, throughput, data checks",
          None, lambda: _config_check_example().split(":")[0], "",
          lambda: ("the three checks need the hardware and the data, and no rule is given; the "
                   "config checks its own fields together, e.g. n_heads = 15 with 4 KV groups: "
                   f"'{_config_check_example()}'")),
    Claim("computed-props", "2.7", "computed properties (a heading with no content)", None,
          lambda: f"{len(_property_names())} properties", "",
          lambda: f"ModelConfig's derived fields: {', '.join(_property_names())}"),
    Claim("yaml-structure", "2.8", "the hymo_750m.yaml structure (a heading with no content)",
          None, _yaml_sections, "", "the preset's top-level sections, as hymo_mini stores it"),
    # section 1.1.3, as measured (the README's numbers)
    Claim("hybrid-3-5x", "1.1.3", "the 3:1 hybrid trains 3-5× faster than all attention", 3,
          lambda: hybrid_over_all_mla(4096), "×",
          lambda: (f"measured training tokens/s, hybrid over all-MLA, both on the fast path, one "
                   f"H200: {fmt(hybrid_over_all_mla(4096))}× at B = 4, T = 4,096 and "
                   f"{fmt(hybrid_over_all_mla(16384))}× at B = 1, T = 16,384 "
                   f"({STEP_RUN}). The table's baseline is unclear (its "
                   "slowest row is 16 MLA + 16 GDN); all-MLA, the slowest stack, is the reading "
                   "most favourable to the claim, compared with the range's low end")),
]
