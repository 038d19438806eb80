"""Multi-head latent attention: section 4 of the design document (the MLA block, attention
plus MoE, is assembled in ``hymo_mini.blocks``).

Per token, the keys and values of all heads are rebuilt from a small cache entry:

    x ──wkv_a──> [latent (r) | k_pe (p)]           r = kv_lora_rank, p = qk_rope_head_dim
    latent ──kv_norm──wkv_b──> per KV group g: k_nope (n), v (dv)
    k_pe: ONE key for all groups; group g uses R(pos) (k_scale[g] ⊙ k_pe)
    x ──wq_a──q_norm──wq_b──> q per head, ⊙ q_scale, RoPE on its first p channels
    q = [q_pe_rot | q_nope],  k = [k_pe_rot | k_nope];  head i reads KV group i // (h/g)

so a decoder only has to keep ``latent`` and ``k_pe``: :meth:`latent_kv` computes them,
:meth:`attend` turns them (for the current and all earlier tokens) into the output, and
``forward`` is the two composed.

Readings chosen where the document contradicts itself (the book shows each one):

* **RMSNorms have a weight.** Section 4.5.4 says the norms have "no learnable parameters
  (unlike LayerNorm) — just per-feature scaling", which contradicts itself (a per-feature
  scale *is* a learnable parameter). We use ``nn.RMSNorm`` with its weight.
* **Scale, then rotate.** The per-group key scale multiplies k_pe before RoPE (section
  4.4 step 3), and q_scale multiplies q before RoPE. Rotating first and scaling after
  would make the score depend on absolute positions once the two channels of a rotary
  pair get different scales. So the cache keeps k_pe *unrotated* (it is shared by the
  groups, the scale is not), and :meth:`attend` scales and rotates it at the keys'
  positions, which it knows: the keys are the last positions, ending at the last query.
* **KV cache size.** Per token and layer the cache holds kv_lora_rank + qk_rope_head_dim
  = 128 + 32 = **160** values. Section 4.2.1's "128 + 4 × 32 = 256, 16× compression"
  counts k_pe once per group; it is stored once. Against standard 16-head attention
  (2 × 16 × 128 = 4,096 values) that is **25.6×** smaller; against the K and V this
  module actually attends with (4 groups × (128 + 128) = 1,024 values) it is **6.4×**.
  At bf16, T = 4096, 8 MLA layers: 160 × 2 B × 4096 × 8 = 10.5 MB per sequence.
* **Parameter count** (:func:`mla_param_count`). For hymo_750m one attention has
  wq_a 896·224 = 200,704, q_norm 224, wq_b 224·2048 = 458,752, q_scale 16·128 = 2,048,
  wkv_a 896·160 = 143,360, kv_norm 128, wkv_b 128·896 = 114,688, k_scale 4·32 = 128,
  wo 2048·896 = 1,835,008: **2,755,040** in all. Section 12.2.3 lists q_proj 896×256,
  k/v projections 896×32, w_proj 896×896 and "~1.23M per layer": that is not this module
  (it has no such matrices), and its own lines add up to 1.147M. Other numbers in the
  section to correct: standard attention's K and V projections are 2 × 896 × 2048 =
  3.67M, not 1.84M (4.2.1); q_lora_rank 224 is 10.9% of the 2,048-wide query, not
  22.5% (4.5.2).
* **Causal masking with a cache.** Queries are the last ``t`` of the ``s`` key positions;
  query i may read key j when j <= i + s - t (the bottom-right aligned causal mask).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import einsum, rearrange
from torch import nn

from hymo_mini.config import ModelConfig
from hymo_mini.rope import RotaryEmbedding

__all__ = [
    "MultiHeadLatentAttention",
    "causal_mask",
    "sdpa_attention",
    "explicit_attention",
    "mla_param_count",
]


def mla_param_count(config: ModelConfig) -> int:
    """Parameters of one ``MultiHeadLatentAttention`` (no block norms, no MoE)."""
    c = config
    kv_width = c.n_kv_groups * (c.qk_nope_head_dim + c.v_head_dim)
    return (c.dim * c.q_lora_rank + c.q_lora_rank  # wq_a, q_norm
            + c.q_lora_rank * c.n_heads * c.head_dim + c.n_heads * c.head_dim  # wq_b, q_scale
            + c.dim * (c.kv_lora_rank + c.qk_rope_head_dim) + c.kv_lora_rank  # wkv_a, kv_norm
            + c.kv_lora_rank * kv_width + c.n_kv_groups * c.qk_rope_head_dim  # wkv_b, k_scale
            + c.n_heads * c.v_head_dim * c.dim)  # wo


def causal_mask(t: int, s: int, device=None) -> torch.Tensor:
    """(t, s) bool, True where query i may read key j: the queries are the last t of the s
    key positions, so j <= i + s - t."""
    return torch.ones(t, s, dtype=torch.bool, device=device).tril(diagonal=s - t)


def sdpa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal grouped attention with PyTorch's fused kernel.
    q (b, h, t, d), k (b, g, s, d), v (b, g, s, dv) -> (b, h, t, dv)."""
    t, s = q.shape[-2], k.shape[-2]
    if t == s:  # no cache: the plain causal mask lets SDPA pick its fastest kernel
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    mask = causal_mask(t, s, q.device)  # (t, s)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


def explicit_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    """The same as :func:`sdpa_attention`, written out: softmax(q k^T / sqrt(d)) v.
    Returns (out (b, h, t, dv), probs (b, h, t, s))."""
    r = q.shape[1] // k.shape[1]  # query heads per KV group
    t, s = q.shape[-2], k.shape[-2]
    q = rearrange(q, "b (g r) t d -> b g r t d", r=r)  # head i = g * r + ...: group i // r
    scores = einsum(q, k, "b g r t d, b g s d -> b g r t s") * q.shape[-1] ** -0.5
    scores = scores.masked_fill(~causal_mask(t, s, q.device), float("-inf"))
    probs = scores.float().softmax(dim=-1).to(v.dtype)  # (b g r t s)
    out = einsum(probs, v, "b g r t s, b g s dv -> b g r t dv")
    return (rearrange(out, "b g r t dv -> b (g r) t dv"),
            rearrange(probs, "b g r t s -> b (g r) t s"))


class MultiHeadLatentAttention(nn.Module):
    """Low-rank queries, a compressed KV latent, one shared RoPE key, grouped KV heads."""

    def __init__(self, config: ModelConfig, layer_idx: int = 0):
        super().__init__()
        c = config
        self.config, self.layer_idx = c, layer_idx
        self.dim, self.n_heads, self.n_kv_groups = c.dim, c.n_heads, c.n_kv_groups
        self.head_dim, self.v_head_dim = c.head_dim, c.v_head_dim
        self.rope_dim, self.nope_dim = c.qk_rope_head_dim, c.qk_nope_head_dim
        self.kv_lora_rank = c.kv_lora_rank
        # queries: dim -> q_lora_rank -> n_heads * head_dim
        self.wq_a = nn.Linear(c.dim, c.q_lora_rank, bias=False)
        self.q_norm = nn.RMSNorm(c.q_lora_rank, eps=c.norm_eps)
        self.wq_b = nn.Linear(c.q_lora_rank, c.n_heads * c.head_dim, bias=False)
        self.q_scale = nn.Parameter(torch.ones(c.n_heads, c.head_dim))
        # keys and values: dim -> [latent | k_pe] ; latent -> per group [k_nope | v]
        self.wkv_a = nn.Linear(c.dim, c.kv_lora_rank + c.qk_rope_head_dim, bias=False)
        self.kv_norm = nn.RMSNorm(c.kv_lora_rank, eps=c.norm_eps)
        self.wkv_b = nn.Linear(c.kv_lora_rank,
                               c.n_kv_groups * (c.qk_nope_head_dim + c.v_head_dim), bias=False)
        self.k_scale = nn.Parameter(torch.ones(c.n_kv_groups, c.qk_rope_head_dim))
        self.wo = nn.Linear(c.n_heads * c.v_head_dim, c.dim, bias=False)
        self.rope = (RotaryEmbedding(c.qk_rope_head_dim, c.max_seq_len, c.rope_theta)
                     if c.qk_rope_head_dim > 0 else None)

    def _rotate(self, x: torch.Tensor, start_pos: int) -> torch.Tensor:
        return x if self.rope is None else self.rope(x, start_pos)  # first rope_dim channels

    def _check(self, x: torch.Tensor) -> None:
        if x.ndim != 3 or x.shape[-1] != self.dim:
            raise ValueError(f"x must be (batch, time, dim={self.dim}), got {tuple(x.shape)}")

    def latent_kv(self, x: torch.Tensor):
        """What a decoder caches per token: (normed latent (b, t, kv_lora_rank),
        shared unrotated k_pe (b, t, qk_rope_head_dim))."""
        self._check(x)
        kv = self.wkv_a(x)  # (b, t, r + p)
        latent, k_pe = kv.split([self.kv_lora_rank, self.rope_dim], dim=-1)  # (b t r), (b t p)
        return self.kv_norm(latent), k_pe

    def project(self, x: torch.Tensor, latent: torch.Tensor, k_pe: torch.Tensor,
                start_pos: int = 0):
        """Queries for x's t tokens at positions start_pos.., keys and values for the s
        cached tokens, which end at the last query. Returns q (b, h, t, d),
        k (b, g, s, d), v (b, g, s, dv), laid out for SDPA."""
        self._check(x)
        b, t, _ = x.shape
        s = latent.shape[1]
        if latent.shape != (b, s, self.kv_lora_rank) or k_pe.shape != (b, s, self.rope_dim):
            raise ValueError(f"latent must be (b, s, {self.kv_lora_rank}) and k_pe "
                             f"(b, s, {self.rope_dim}) with b={b}; got {tuple(latent.shape)} "
                             f"and {tuple(k_pe.shape)}")
        key_start = start_pos + t - s  # position of the first cached token
        if s < t or key_start < 0:
            raise ValueError(f"the cache holds {s} tokens; it must include the {t} queries "
                             f"at positions {start_pos}.. and start at position >= 0")
        q = self.wq_b(self.q_norm(self.wq_a(x)))  # (b, t, h*d)
        q = rearrange(q, "b t (h d) -> b t h d", h=self.n_heads) * self.q_scale  # (b t h d)
        q = self._rotate(q, start_pos)  # [q_pe_rot | q_nope]
        kv = rearrange(self.wkv_b(latent), "b s (g e) -> b s g e", g=self.n_kv_groups)
        k_nope, v = kv.split([self.nope_dim, self.v_head_dim], dim=-1)  # (b s g n), (b s g dv)
        k_pe = rearrange(k_pe, "b s p -> b s 1 p") * self.k_scale  # (b s g p): shared key
        k_pe = self._rotate(k_pe, key_start)  # (b s g p)
        k = torch.cat([k_pe, k_nope], dim=-1)  # (b s g d)
        return (rearrange(q, "b t h d -> b h t d"), rearrange(k, "b s g d -> b g s d"),
                rearrange(v, "b s g dv -> b g s dv"))

    def attend(self, x: torch.Tensor, latent: torch.Tensor, k_pe: torch.Tensor,
               start_pos: int = 0) -> torch.Tensor:
        """Output for x (b, t, dim) at positions start_pos.., reading the cache
        (latent, k_pe) of the s tokens ending with x's last token."""
        q, k, v = self.project(x, latent, k_pe, start_pos)
        o = sdpa_attention(q, k, v)  # (b, h, t, dv)
        return self.wo(rearrange(o, "b h t dv -> b t (h dv)"))  # (b, t, dim)

    def forward(self, x: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
        latent, k_pe = self.latent_kv(x)  # (b t r), (b t p)
        return self.attend(x, latent, k_pe, start_pos)  # (b, t, dim)

    def attention_weights(self, x: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
        """Softmax probabilities (b, h, t, t) computed explicitly, for attention maps."""
        latent, k_pe = self.latent_kv(x)
        q, k, v = self.project(x, latent, k_pe, start_pos)
        return explicit_attention(q, k, v)[1]

    def extra_repr(self) -> str:
        return f"layer_idx={self.layer_idx}"
