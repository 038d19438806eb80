"""A cost model: compute and cache memory against sequence length (section 1.1).

Pure arithmetic on a ``ModelConfig``; nothing is allocated. Counted for one sequence of
``T`` tokens (batch 1) through one layer, forward pass only:

* **FLOPs** count matrix products only, two FLOPs per multiply-add. Norms, softmax,
  activations and RoPE are left out: they are linear in T and small beside the products.
  ``projection_flops`` is the part that grows like T (the linear layers); ``mixing_flops``
  is the part that mixes tokens (the attention core, or the GDN recurrence).
* **Causal attention** (the default) scores each query against itself and the tokens
  before it: ``T(T+1)/2`` query-key pairs, not ``T²``.
* **Cache bytes** is what a decoder keeps per layer to generate token ``T + 1``.

The layers counted:

``mha_cost``
    Ordinary multi-head attention of the same width (``n_heads`` heads of ``head_dim``
    for q/k and ``v_head_dim`` for v), the document's "full attention". ``n_kv_heads``
    gives GQA (fewer K/V heads) and MQA (one).
``mla_cost``
    HyMo's MLA as ``hymo_mini.mla`` computes it in training: low-rank query
    (dim → q_lora_rank → heads), joint KV latent (dim → kv_lora_rank + rope) expanded to
    ``n_kv_groups`` K/V heads, grouped attention, output projection. Two caches: the
    ``"latent"`` (kv_lora_rank + qk_rope_head_dim values per token: what MLA is for) or
    the ``"expanded"`` K and V of the ``n_kv_groups`` heads (what a naive cache holds).
``gdn_cost``
    One GDN block (section 5): its seven projections, the depthwise conv and the
    recurrence, ``5·S·D`` FLOPs per head per token for the documented rule (decay the
    state S·D, add b ⊗ v 2·S·D, read with c 2·S·D) and ``7·S·D`` for
    ``gdn_rule="delta"`` (reading the old value H'^T b̂ costs another 2·S·D; it also has
    ``beta_proj``). Its cache is the fixed state, H·S·D values, plus the last
    ``d_conv − 1`` conv inputs, whatever T is.
``moe_cost``
    One DeepSeekMoE feed-forward (section 8): the routing layer, the shared experts and the
    top-k routed experts a token passes through, two FLOPs per weight it meets. Nothing
    mixes tokens and nothing is cached.

``stack_cost`` adds up a stack with a given number of GDN layers per attention layer: the
token mixers alone by default, or the whole stack with ``feed_forward=True``, which puts a
MoE after every attention layer and none after a GDN layer (HyMo's rule). The layouts cost
different amounts of feed-forward: an all-MLA stack of 32 layers carries 32 MoE layers,
the 3:1 hybrid 8, so comparing the mixers alone understates what the hybrid saves.
"""

from __future__ import annotations

from dataclasses import dataclass

from hymo_mini.config import ModelConfig
from hymo_mini.moe import moe_param_counts

__all__ = [
    "LayerCost",
    "attention_pairs",
    "mha_cost",
    "mla_cost",
    "gdn_cost",
    "moe_cost",
    "kv_cache_bytes_per_token",
    "stack_cost",
    "hybrid_layer_counts",
]


@dataclass(frozen=True)
class LayerCost:
    """Forward cost of one layer on one sequence of ``T`` tokens."""

    kind: str
    T: int
    projection_flops: int  # the linear layers: grows like T
    mixing_flops: int  # attention core (like T²) or recurrence (like T)
    cache_bytes: int  # what a decoder keeps for this layer after T tokens

    @property
    def flops(self) -> int:
        return self.projection_flops + self.mixing_flops

    @property
    def flops_per_token(self) -> float:
        return self.flops / self.T if self.T else 0.0


def _check_T(T: int) -> None:
    if not isinstance(T, int) or isinstance(T, bool) or T < 0:
        raise ValueError(f"T (sequence length) must be a non-negative integer, got {T!r}")


def _check_bytes(name: str, value: int) -> None:
    if not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive number of bytes, got {value!r}")


def attention_pairs(T: int, causal: bool = True) -> int:
    """Query-key pairs scored: ``T(T+1)/2`` with a causal mask, ``T²`` without."""
    _check_T(T)
    return T * (T + 1) // 2 if causal else T * T


def mha_cost(config: ModelConfig, T: int, *, n_kv_heads: int | None = None,
             causal: bool = True, cache_dtype_bytes: int = 2) -> LayerCost:
    """Full attention of HyMo's width. ``n_kv_heads`` (default ``n_heads``) K/V heads."""
    _check_T(T)
    _check_bytes("cache_dtype_bytes", cache_dtype_bytes)
    H, dk, dv, d = config.n_heads, config.head_dim, config.v_head_dim, config.dim
    kv = H if n_kv_heads is None else n_kv_heads
    if not isinstance(kv, int) or kv <= 0 or H % kv:
        raise ValueError(f"n_kv_heads must divide n_heads={H}, got {n_kv_heads!r}")
    proj = 2 * T * d * (H * dk + kv * dk + kv * dv) + 2 * T * H * dv * d  # q, k, v, o
    mixing = 2 * attention_pairs(T, causal) * H * (dk + dv)  # q·k, then weights·v
    cache = T * kv * (dk + dv) * cache_dtype_bytes
    name = "MHA" if kv == H else ("MQA" if kv == 1 else f"GQA-{kv}")
    return LayerCost(name, T, proj, mixing, cache)


def mla_cost(config: ModelConfig, T: int, *, cache: str = "latent", causal: bool = True,
             cache_dtype_bytes: int = 2) -> LayerCost:
    """HyMo's MLA (attention only, no MoE). ``cache``: "latent" or "expanded"."""
    _check_T(T)
    _check_bytes("cache_dtype_bytes", cache_dtype_bytes)
    if cache not in ("latent", "expanded"):
        raise ValueError(f"cache must be 'latent' or 'expanded', got {cache!r}")
    c = config
    H, G, d = c.n_heads, c.n_kv_groups, c.dim
    dk, dv, rope, nope = c.head_dim, c.v_head_dim, c.qk_rope_head_dim, c.qk_nope_head_dim
    proj = 2 * T * (
        d * c.q_lora_rank  # wq_a
        + c.q_lora_rank * H * dk  # wq_b
        + d * (c.kv_lora_rank + rope)  # wkv_a: latent and the shared k_pe
        + c.kv_lora_rank * G * (nope + dv)  # wkv_b: k_nope and v for each group
        + H * dv * d  # wo
    )
    mixing = 2 * attention_pairs(T, causal) * H * (dk + dv)  # every query head attends
    per_token = c.kv_lora_rank + rope if cache == "latent" else G * (dk + dv)
    return LayerCost(f"MLA ({cache} cache)", T, proj, mixing,
                     T * per_token * cache_dtype_bytes)


def gdn_cost(config: ModelConfig, T: int, *, state_dtype_bytes: int = 4,
             cache_dtype_bytes: int = 2) -> LayerCost:
    """One GDN block. The state is fp32 in hymo_mini (``state_dtype_bytes=4``)."""
    _check_T(T)
    _check_bytes("state_dtype_bytes", state_dtype_bytes)
    _check_bytes("cache_dtype_bytes", cache_dtype_bytes)
    c = config
    d, inner = c.dim, c.gdn_d_inner
    H, S, D = c.gdn_n_heads, c.gdn_d_state, c.gdn_headdim
    proj = 2 * T * (
        d * inner  # in_proj
        + inner * c.gdn_d_conv  # depthwise causal conv
        + 2 * inner * H * S  # b_proj and c_proj
        + inner * H  # dt_proj
        + inner * inner  # g_proj
        + inner * d  # out_proj
        + d * d  # skip_proj
        + (inner * H if c.gdn_rule == "delta" else 0)  # beta_proj
    )
    # per head and token: decay H (S·D mult), add b ⊗ v (S·D mult + S·D add), read c^T H
    # (2·S·D); the delta rule also reads the old value H'^T b̂ (2·S·D) before writing
    mixing = (7 if c.gdn_rule == "delta" else 5) * T * H * S * D
    state = H * S * D * state_dtype_bytes + (c.gdn_d_conv - 1) * inner * cache_dtype_bytes
    return LayerCost("GDN", T, proj, mixing, state)


def moe_cost(config: ModelConfig, T: int) -> LayerCost:
    """One MoE feed-forward on ``T`` tokens: 2 FLOPs per active weight per token (the
    routing layer, the shared experts and the top-k routed ones; no token is dropped)."""
    _check_T(T)
    _, active = moe_param_counts(config)
    return LayerCost("MoE", T, 2 * T * active, 0, 0)


def kv_cache_bytes_per_token(config: ModelConfig, cache_dtype_bytes: int = 2) -> dict[str, int]:
    """Bytes one attention layer caches per token, for each way of keeping K and V."""
    H = config.n_heads
    out = {"MHA": mha_cost(config, 1, cache_dtype_bytes=cache_dtype_bytes).cache_bytes}
    for kv in (8, config.n_kv_groups, 1):
        if kv < H and H % kv == 0:
            cost = mha_cost(config, 1, n_kv_heads=kv, cache_dtype_bytes=cache_dtype_bytes)
            out[cost.kind] = cost.cache_bytes
    for form in ("expanded", "latent"):
        cost = mla_cost(config, 1, cache=form, cache_dtype_bytes=cache_dtype_bytes)
        out[cost.kind] = cost.cache_bytes
    return out


def hybrid_layer_counts(n_layers: int, gdn_per_mla: int) -> tuple[int, int]:
    """(MLA layers, GDN layers) when one MLA layer opens every ``gdn_per_mla + 1`` layers
    (``ModelConfig``'s layout rule: one MLA layer in each group; counts do not depend on
    where in the group it sits)."""
    if not isinstance(gdn_per_mla, int) or gdn_per_mla < 0:
        raise ValueError(f"gdn_per_mla must be a non-negative integer, got {gdn_per_mla!r}")
    if not isinstance(n_layers, int) or n_layers <= 0:
        raise ValueError(f"n_layers must be a positive integer, got {n_layers!r}")
    n_mla = len(range(0, n_layers, gdn_per_mla + 1))
    return n_mla, n_layers - n_mla


def stack_cost(config: ModelConfig, T: int, gdn_per_mla: int | None = None, *,
               attention: str = "mla", feed_forward: bool = False, mla_cache: str = "latent",
               causal: bool = True) -> LayerCost:
    """A whole stack of layers on one sequence of ``T`` tokens.

    ``gdn_per_mla=None`` takes the config's own layout (8 attention + 24 GDN layers for
    HyMo); an integer k puts one attention layer in every group of k + 1 layers (0: all
    attention). ``attention`` is the kind of those layers: ``"mla"`` (HyMo's) or ``"mha"``
    (ordinary multi-head attention of the same width). ``feed_forward=False`` counts the
    token mixers only; ``True`` adds one MoE after each attention layer (GDN layers have
    none), which is what a whole layer of HyMo costs. The embedding and the output head
    cost the same in every layout and are not counted."""
    if attention not in ("mla", "mha"):
        raise ValueError(f"attention must be 'mla' or 'mha', got {attention!r}")
    if not isinstance(feed_forward, bool):
        raise ValueError(f"feed_forward must be True or False, got {feed_forward!r}")
    if gdn_per_mla is None:
        n_att = len(config.mla_positions)
        n_gdn = config.n_layers - n_att
    else:
        n_att, n_gdn = hybrid_layer_counts(config.n_layers, gdn_per_mla)
    if attention == "mla":
        att = mla_cost(config, T, cache=mla_cache, causal=causal)
    else:
        att = mha_cost(config, T, causal=causal)
    gdn = gdn_cost(config, T)
    ffn = moe_cost(config, T).projection_flops if feed_forward else 0
    name = f"{n_gdn} GDN + {n_att} {attention.upper()}" + (" + MoE" if feed_forward else "")
    return LayerCost(
        name, T,
        n_att * (att.projection_flops + ffn) + n_gdn * gdn.projection_flops,
        n_att * att.mixing_flops + n_gdn * gdn.mixing_flops,
        n_att * att.cache_bytes + n_gdn * gdn.cache_bytes,
    )
