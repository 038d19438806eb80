"""Claims of sections 1 to 5 that the teaching chapters' errata tables listed (chapters 01,
02, 05, 06, 07 and 13 of the book), beyond those of :mod:`hymo_book.claims.sections_01_05`.

Each is computed like every other claim; notes that state numbers compute them.
"""

from __future__ import annotations

import inspect
import math

from hymo_book.claims.core import Claim
from hymo_book.claims.values import batch_tokens, cfg, moe_layer, n_params, stored
from hymo_book.claims.values_errata import state_read_share
from hymo_book.claims.values_models import (
    checkpoint_profile,
    checkpoint_saving,
    documented_block_cosine,
    gate_per,
    head_calls_in_forward,
    linear_attention_gate,
    longest_half_life,
    saved_layer_inputs_per_layer,
    second_write,
    state_shape,
)
from hymo_book.prose import fmt
from hymo_mini.analysis import costs


def _mha_cache_8(T: int) -> int:
    return 8 * costs.mha_cost(cfg(), T).cache_bytes


def _mla_cache_8(T: int) -> int:
    return 8 * costs.mla_cost(cfg(), T, cache="latent").cache_bytes


def _kv_cache_note(T: int):
    return lambda: (f"K and V of 16 heads, bf16, 8 layers; HyMo's MLA latent cache of the same "
                    f"8 layers is {fmt(_mla_cache_8(T) / 2 ** 20)} MiB")


def _mla_layers_note(T: int):
    c = cfg()
    return lambda: (f"the arithmetic is full MHA's K and V ({fmt(_mha_cache_8(T) / 2 ** 20)} MiB "
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


def _recurrence_cost() -> str:
    """How the recurrence's FLOPs per token and head grow with S and D (costs.gdn_cost)."""
    from hymo_mini.config import replace

    def per(S, D):
        c = replace(cfg(), gdn_d_state=S, gdn_headdim=D, gdn_d_inner=D * cfg().gdn_n_heads)
        return costs.gdn_cost(c, 64).mixing_flops / (64 * c.gdn_n_heads)

    base = per(32, 32)
    factors = {"S": per(64, 32) / base, "D": per(32, 64) / base}
    return " × ".join(n for n, f in factors.items() if f == 2) if set(factors.values()) <= {
        1.0, 2.0} else "other"


def _ckpt_extra_compute() -> float:
    """Recomputing every layer once: the layers' forward FLOPs over the training step's
    (about 3 × the forward, head and MTP included), for the production model at T=4096."""
    from hymo_book.claims.values import flops, stack_flops

    return stack_flops(4096) / (3 * flops()["total"])


def _ckpt_mini() -> float:
    p = checkpoint_profile()
    return p["checkpointed"]["flops"] / p["plain"]["flops"] - 1


CLAIMS_ERRATA_01_05: list[Claim] = [
    # section 1
    Claim("kv-8-layers-32k", "1.1.1", "8 attention layers: 1 GB of KV cache at T=32K", 2 ** 30,
          lambda: _mha_cache_8(32_768), "GiB", _kv_cache_note(32_768)),
    Claim("kv-8-layers-128k", "1.1.1", "8 attention layers: 4 GB of KV cache at T=128K",
          4 * 2 ** 30, lambda: _mha_cache_8(131_072), "GiB", _kv_cache_note(131_072)),
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
    # section 4
    Claim("kv-8-mla", "4.1.1", "with 8 MLA layers: 256 MB of KV cache at T=4096", 256 * 2 ** 20,
          lambda: _mla_cache_8(4096), "MiB", _mla_layers_note(4096)),
    Claim("kv-8-mla-32k", "4.1.1", "with 8 MLA layers at T=32K: 2 GB of KV cache", 2 * 2 ** 30,
          lambda: _mla_cache_8(32_768), "MiB", _mla_layers_note(32_768)),
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
    # section 5
    Claim("linattn-cost", "5.1.2", "linear attention costs O(T × S²)", "S × S",
          _recurrence_cost, "",
          "how the FLOPs per token and head grow (costs.gdn_cost with S and then D doubled): "
          "the recurrence touches its S × D state, S keys by D values"),
    Claim("linattn-state", "5.1.3", "the linear-attention state is S × S", "S × S", state_shape,
          "", "the state the loop returns for S = 3 keys and D = 5 values per head: one row "
          "per key dimension, one column per value dimension"),
    Claim("delta-name", "5.2.2", "the update H + b ⊗ v is a delta rule",
          "overwrites (reads v2)", second_write, "",
          "two writes under one key, no decay, read with that key: the documented rule sums "
          "them (gated linear attention); the delta rule (gdn_rule='delta', β = 1) returns v2"),
    Claim("linattn-special", "5.2.3", "linear attention is the case b = c = k and g = 1", "g = 1",
          linear_attention_gate, "",
          lambda: ("g scales the log-decay: g = 0 keeps the state (exp(0) = 1), g = 1 is the "
                   f"strongest decay, exp(A) ({fmt(math.exp(-1))} at A = −1)")),
    Claim("erasure-per-dim", "5.2.3", "the gate g_t selectively decays specific state dimensions",
          "state dimension", gate_per, "",
          "g_t is one scalar per head and step; the per-dimension rates come from A, fixed "
          "per layer"),
    Claim("slow-heads", "5.3.2", "slow heads remember distant context; head 0 '~3 steps'", 3.0,
          longest_half_life, "",
          "the longest half-life of any head at init, in steps (the mean initial gate is "
          "about 0.5): long memory has to be learned through dt_bias and A_log"),
    Claim("qk-matrix", "5.3.3", "full attention stores 4,096 × 128 = 524,288 scalars per head "
          "(the QKᵀ matrix)", 524_288, lambda: 4096 * 4096, "",
          lambda: (f"QKᵀ of one head at T = 4,096 is 4,096²; its K and V cache is 4,096 × "
                   f"{cfg().head_dim + cfg().v_head_dim} = "
                   f"{fmt(4096 * (cfg().head_dim + cfg().v_head_dim))} values")),
    Claim("block-identity", "5.6", "at init the GDN block is approximately an identity", 1.0,
          documented_block_cosine, "",
          lambda: ("the cosine between the documented block's input and output at init (mean "
                   "over 32 tokens, production width, to two decimals). o ≈ D·v holds inside the "
                   f"mixer (the read c_tᵀH_t is {fmt(state_read_share(), 2)} of D·v in size, a "
                   "random input: the keys are small at init), but out_proj and skip_proj are "
                   "random, so the block's output is unrelated to its input")),
]


def _mini_vocab() -> str:
    from hymo_mini.config import load_config

    return fmt(load_config("hymo_mini").model.vocab_size)


def _active() -> int:
    from hymo_book.claims.values import active

    return active()
