"""Attention variants and absorbed MLA, for book chapters 05 (attention and the KV cache)
and 06 (multi-head latent attention); the helpers live beside the book, in ``hymo_book``.

1. **What each variant caches** per token and layer (:func:`cache_table`): MHA keeps K and V
   of every head, GQA of ``g`` shared KV heads, MQA of one, MLA a ``kv_lora_rank`` latent
   plus one shared RoPE key. The byte counts come from :mod:`hymo_mini.analysis.costs`.

2. **Absorbed MLA** (:func:`absorb_mla`, :func:`absorbed_attention`, :func:`decode_flops`).
   The MLA module rebuilds, from the cached latent ``c_s`` (r values), each KV group's keys
   and values: ``k_nope[g] = W_uk[g] c_s`` and ``v[g] = W_uv[g] c_s`` (the two halves of
   ``wkv_b``). Both are linear in ``c_s``, so they can be moved to the other side of the
   dot products:

       q_nope[h] · (W_uk[g] c_s) = (W_uk[g]^T q_nope[h]) · c_s          query side
       wo_h (W_uv[g] sum_s p_s c_s) = (wo_h W_uv[g]) (sum_s p_s c_s)    output side

   ``W_uk`` is folded into the query projection (one (r × q_lora_rank) matrix per head,
   which also absorbs ``q_scale``), ``W_uv`` into the output projection (one (dim × r)
   matrix per head). Attention then scores and averages the latent itself: the keys and
   values of the groups are never formed, and nothing but ``c_s`` and ``k_pe`` is read
   from the cache. The RoPE part cannot be folded (the rotation depends on the position),
   which is why MLA keeps the 32-channel ``k_pe`` beside the latent.

   What is cached is decided by what the keys and values are computed *from*:
   ``MultiHeadLatentAttention`` already caches only ``(c_t, k_pe)`` and re-expands it.
   Absorption changes the *compute* of decoding, not the cache; it is a rearrangement of
   trained weights for inference.

3. **Positions per layer** (:func:`layer_position_table`): which layers rotate what, and
   which GDN layers skip RoPE under ``nope_hybrid_gdn``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from einops import einsum, rearrange

from hymo_mini.analysis.costs import gdn_cost, kv_cache_bytes_per_token
from hymo_mini.analysis.tables import RenderedTable, TextTable
from hymo_mini.config import ModelConfig
from hymo_mini.mla import MultiHeadLatentAttention, causal_mask

__all__ = [
    "CacheRow",
    "CacheTable",
    "cache_table",
    "AbsorbedMLA",
    "absorb_mla",
    "absorbed_attention",
    "decode_flops",
    "layer_position_table",
]


# ---- 1. cache sizes --------------------------------------------------------------------
@dataclass(frozen=True)
class CacheRow:
    variant: str
    cached: str  # what is kept per token
    bytes_per_token: int  # one layer
    per_sequence: int  # bytes for T tokens and n_layers attention layers
    vs_mha: float  # MHA bytes / these bytes


class CacheTable(RenderedTable):
    """Cache per token and per sequence for each attention variant; text and HTML."""

    def __init__(self, rows: list[CacheRow], T: int, n_layers: int, dtype_bytes: int):
        self.rows, self.T, self.n_layers, self.dtype_bytes = rows, T, n_layers, dtype_bytes

    def __getitem__(self, variant: str) -> CacheRow:
        for row in self.rows:
            if row.variant == variant:
                return row
        raise KeyError(f"no variant {variant!r}; have {[r.variant for r in self.rows]}")

    def _table(self) -> TextTable:
        header = ("variant", "cached per token and layer", f"bytes/token ({self.dtype_bytes} B)",
                  f"T={self.T:,}, {self.n_layers} layers", "smaller than MHA")
        return TextTable(header, [(r.variant, r.cached,
                                   f"{r.bytes_per_token:,}" if r.bytes_per_token else "fixed",
                                   _mib(r.per_sequence), f"{r.vs_mha:.1f}x") for r in self.rows],
                         align="llrrr")


def _mib(n: int) -> str:
    return f"{n / 2**20:,.2f} MiB"


def cache_table(config: ModelConfig, T: int | None = None, n_layers: int | None = None,
                dtype_bytes: int = 2) -> CacheTable:
    """MHA → GQA → MQA → MLA for ``config``'s widths, and the GDN state for comparison.

    ``T`` defaults to ``max_seq_len``, ``n_layers`` to the number of MLA layers (for GDN:
    the same number of GDN layers, whose state does not grow with T)."""
    T = config.max_seq_len if T is None else T
    n_layers = len(config.mla_positions) if n_layers is None else n_layers
    if not isinstance(T, int) or T <= 0:
        raise ValueError(f"T must be a positive integer, got {T!r}")
    if not isinstance(n_layers, int) or n_layers <= 0:
        raise ValueError(f"n_layers must be a positive integer, got {n_layers!r}")
    c = config
    per_token = kv_cache_bytes_per_token(c, cache_dtype_bytes=dtype_bytes)  # {kind: bytes}
    mha = per_token["MHA"]
    what = {
        "MHA": f"K, V of {c.n_heads} heads: {c.n_heads} × ({c.head_dim} + {c.v_head_dim})",
        "MQA": f"K, V of 1 head: {c.head_dim} + {c.v_head_dim}",
        "MLA (expanded cache)": f"K, V of {c.n_kv_groups} groups: "
                                f"{c.n_kv_groups} × ({c.head_dim} + {c.v_head_dim})",
        "MLA (latent cache)": f"latent + shared k_pe: {c.kv_lora_rank} + {c.qk_rope_head_dim}",
    }
    rows = []
    for kind, nbytes in per_token.items():
        label = what.get(kind)
        if label is None:  # GQA-g
            g = int(kind.split("-")[1])
            label = f"K, V of {g} heads: {g} × ({c.head_dim} + {c.v_head_dim})"
        rows.append(CacheRow(kind, label, nbytes, nbytes * T * n_layers, mha / nbytes))
    state = gdn_cost(c, T, state_dtype_bytes=4, cache_dtype_bytes=dtype_bytes).cache_bytes
    rows.append(CacheRow("GDN state (fp32) + conv tail", f"{c.gdn_n_heads} × {c.gdn_d_state} × "
                         f"{c.gdn_headdim}, fixed: not per token", 0, state * n_layers,
                         mha * T / state))
    return CacheTable(rows, T, n_layers, dtype_bytes)


# ---- 2. absorbed MLA -------------------------------------------------------------------
@dataclass(frozen=True)
class AbsorbedMLA:
    """Folded weights of one ``MultiHeadLatentAttention`` (r = kv_lora_rank,
    p = qk_rope_head_dim, q = q_lora_rank)."""

    w_q_pe: torch.Tensor  # (h, p, q): q_pe = w_q_pe @ q_latent, q_scale folded in
    w_q_latent: torch.Tensor  # (h, r, q): query in latent space, W_uk^T diag(q_scale) wq_b
    w_out_latent: torch.Tensor  # (h, dim, r): wo_h @ W_uv[g(h)]


def absorb_mla(attn: MultiHeadLatentAttention) -> AbsorbedMLA:
    """Fold ``wkv_b`` into the query projection (its key half) and the output projection
    (its value half). Pure weight algebra: no input needed."""
    if not isinstance(attn, MultiHeadLatentAttention):
        raise TypeError(f"attn must be a MultiHeadLatentAttention, got {type(attn).__name__}")
    h, g, p, n = attn.n_heads, attn.n_kv_groups, attn.rope_dim, attn.nope_dim
    dv = attn.v_head_dim
    with torch.no_grad():
        wq_b = rearrange(attn.wq_b.weight, "(h d) q -> h d q", h=h)  # (h, d, q)
        wq_b = wq_b * attn.q_scale[:, :, None]  # q ⊙ q_scale, folded: (h, d, q)
        w_q_pe, w_q_nope = wq_b.split([p, n], dim=1)  # (h, p, q), (h, n, q)
        wkv_b = rearrange(attn.wkv_b.weight, "(g e) r -> g e r", g=g)  # (g, n + dv, r)
        w_uk, w_uv = wkv_b.split([n, dv], dim=1)  # (g, n, r), (g, dv, r)
        group = torch.arange(h) // (h // g)  # KV group read by each query head
        w_q_latent = einsum(w_uk[group], w_q_nope, "h n r, h n q -> h r q")  # (h, r, q)
        wo = rearrange(attn.wo.weight, "e (h dv) -> h e dv", h=h)  # (h, dim, dv)
        w_out_latent = einsum(wo, w_uv[group], "h e dv, h dv r -> h e r")  # (h, dim, r)
    return AbsorbedMLA(w_q_pe.clone(), w_q_latent, w_out_latent)


def _rotate(attn: MultiHeadLatentAttention, x: torch.Tensor, start: int) -> torch.Tensor:
    return x if attn.rope is None else attn.rope(x, start)  # first rope_dim channels


def absorbed_attention(attn: MultiHeadLatentAttention, x: torch.Tensor, latent: torch.Tensor,
                       k_pe: torch.Tensor, start_pos: int = 0,
                       weights: AbsorbedMLA | None = None) -> torch.Tensor:
    """The output of ``attn.attend(x, latent, k_pe, start_pos)`` computed from the cache
    (``latent`` (b, s, r), unrotated ``k_pe`` (b, s, p)) without forming any key or value.

    ``x`` (b, t, dim) holds the t newest tokens, at positions start_pos..; the cache holds
    the s tokens ending with them (s >= t)."""
    if x.ndim != 3 or x.shape[-1] != attn.dim:
        raise ValueError(f"x must be (batch, time, dim={attn.dim}), got {tuple(x.shape)}")
    b, t, _ = x.shape
    s = latent.shape[1]
    if latent.shape != (b, s, attn.kv_lora_rank) or k_pe.shape != (b, s, attn.rope_dim):
        raise ValueError(f"latent must be (b, s, {attn.kv_lora_rank}) and k_pe "
                         f"(b, s, {attn.rope_dim}) with b={b}; got {tuple(latent.shape)} "
                         f"and {tuple(k_pe.shape)}")
    key_start = start_pos + t - s
    if s < t or key_start < 0:
        raise ValueError(f"the cache holds {s} tokens; it must include the {t} queries at "
                         f"positions {start_pos}.. and start at position >= 0")
    w = absorb_mla(attn) if weights is None else weights
    g = attn.n_kv_groups
    q_latent_in = attn.q_norm(attn.wq_a(x))  # (b, t, q_lora_rank)
    q_pe = einsum(q_latent_in, w.w_q_pe, "b t q, h p q -> b t h p")  # (b, t, h, p)
    q_lat = einsum(q_latent_in, w.w_q_latent, "b t q, h r q -> b t h r")  # (b, t, h, r)
    q_pe = _rotate(attn, q_pe, start_pos)  # (b, t, h, p), rotated at the query positions
    k_rot = rearrange(k_pe, "b s p -> b s 1 p") * attn.k_scale  # (b, s, g, p)
    k_rot = _rotate(attn, k_rot, key_start)  # (b, s, g, p), rotated at the key positions
    q_pe = rearrange(q_pe, "b t (g r) p -> b t g r p", g=g)  # head i reads group i // r
    scores_pe = einsum(q_pe, k_rot, "b t g r p, b s g p -> b g r t s")
    scores_lat = einsum(rearrange(q_lat, "b t (g r) c -> b t g r c", g=g), latent,
                        "b t g r c, b s c -> b g r t s")
    scores = (scores_pe + scores_lat) * attn.head_dim ** -0.5  # same scale as the module
    scores = scores.masked_fill(~causal_mask(t, s, x.device), float("-inf"))
    probs = scores.float().softmax(dim=-1).to(latent.dtype)  # (b, g, r, t, s)
    o_lat = einsum(probs, latent, "b g r t s, b s c -> b t g r c")  # average the latent
    o_lat = rearrange(o_lat, "b t g r c -> b t (g r) c")  # (b, t, h, kv_lora_rank)
    return einsum(o_lat, w.w_out_latent, "b t h c, h e c -> b t e")  # (b, t, dim)


def decode_flops(config: ModelConfig, s: int) -> dict[str, int]:
    """FLOPs (2 per multiply-add) of one MLA layer to decode one token against a cache of
    ``s`` tokens, three ways: expanding the latent cache (``explicit``), keeping expanded
    K/V (``expanded cache``), or absorbed. Projections of the new token included."""
    if not isinstance(s, int) or s <= 0:
        raise ValueError(f"s (cached tokens) must be a positive integer, got {s!r}")
    c = config
    H, G, d = c.n_heads, c.n_kv_groups, c.dim
    r, p, n, dk, dv, ql = (c.kv_lora_rank, c.qk_rope_head_dim, c.qk_nope_head_dim, c.head_dim,
                           c.v_head_dim, c.q_lora_rank)
    new_token = 2 * d * (ql + r + p)  # wq_a and wkv_a of the new token
    q_std = 2 * ql * H * dk  # wq_b
    attend_std = 2 * s * H * (dk + dv)  # scores and weighted values
    out_std = 2 * H * dv * d  # wo
    expand = 2 * s * r * G * (n + dv)  # wkv_b over the whole cache
    absorbed = (new_token + 2 * ql * H * (p + r)  # query straight into latent space
                + 2 * s * H * (p + r) + 2 * s * H * r  # scores, then average the latent
                + 2 * H * r * d)  # folded output projection
    return {
        "explicit (expand the latent cache)": new_token + q_std + expand + attend_std + out_std,
        "expanded K/V cache": new_token + q_std + 2 * r * G * (n + dv) + attend_std + out_std,
        "absorbed": absorbed,
    }


# ---- 3. positions ----------------------------------------------------------------------
def layer_position_table(config: ModelConfig) -> list[tuple[int, str, str]]:
    """(layer, type, position information) for every layer, as hymo_mini builds it."""
    nope = set(config.nope_gdn_positions)
    rows = []
    for i, kind in enumerate(config.layer_types):
        if kind == "mla":
            info = (f"RoPE on {config.qk_rope_head_dim} of {config.head_dim} q/k channels"
                    if config.qk_rope_head_dim else "NoPE (qk_rope_head_dim = 0)")
        elif i in nope or config.gdn_rope_dim == 0:
            info = "NoPE: no rotation"
        else:
            info = f"RoPE on {config.gdn_rope_dim} of {config.gdn_d_state} b/c channels"
        rows.append((i, kind.upper(), info))
    return rows
