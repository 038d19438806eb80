"""Decoding token by token with a cache per layer.

A full forward recomputes every earlier token for each new one. A decoder instead keeps,
per layer, exactly what the next token needs:

* **GDN layer** — the recurrent state H (b, h, s, d) in fp32 and the conv window, the
  last ``d_conv - 1`` inputs of the causal depthwise convolution (b, inner, d_conv - 1).
  Its size does not grow with the sequence.
* **MLA layer** — per token, the normed KV latent (``kv_lora_rank`` values) and the one
  shared, *unrotated* RoPE key (``qk_rope_head_dim`` values); ``attn.attend`` rebuilds
  the grouped K and V from them. Not the expanded K and V: for hymo_mini that is
  16 + 4 = 20 values per token instead of 2 groups × (16 + 16) = 64; for hymo_750m
  128 + 32 = 160 instead of 4 × (128 + 128) = 1,024.

So the cache after T tokens holds

    bytes(T) = n_mla · T · (kv_lora_rank + qk_rope_head_dim) · e
             + n_gdn · (H · S · D · 4 + (d_conv - 1) · d_inner · e)

with e the bytes of one activation value (4 in fp32, 2 in bf16), which is
:func:`cache_bytes`. ``tests/test_generate.py`` checks that the logits of cached decoding
equal the full forward's at every position, and that the cache's tensors take exactly
these bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from hymo_mini.blocks import GDNBlock, MLABlock
from hymo_mini.config import ModelConfig

__all__ = [
    "GDNCache",
    "MLACache",
    "HyMoCache",
    "cache_bytes",
    "forward_cached",
    "check_sampling",
    "next_token",
    "stream",
    "generate",
]


@dataclass
class GDNCache:
    conv_window: torch.Tensor | None = None  # (b, inner, d_conv - 1), activation dtype
    state: torch.Tensor | None = None  # (b, h, s, d) fp32

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.conv_window, self.state)
                   if t is not None)


@dataclass
class MLACache:
    latent: torch.Tensor | None = None  # (b, T, kv_lora_rank)
    k_pe: torch.Tensor | None = None  # (b, T, qk_rope_head_dim), unrotated

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.latent, self.k_pe)
                   if t is not None)


@dataclass
class HyMoCache:
    """One cache per layer and the number of tokens seen so far."""

    layers: list = field(default_factory=list)
    position: int = 0

    @classmethod
    def empty(cls, model) -> HyMoCache:
        kinds = {"mla": MLACache, "gdn": GDNCache}
        return cls([kinds[k]() for k in model.config.layer_types])

    def nbytes(self) -> int:
        return sum(layer.nbytes() for layer in self.layers)


def cache_bytes(config: ModelConfig, n_tokens: int, batch: int = 1,
                element_bytes: int = 4) -> int:
    """The formula: bytes a :class:`HyMoCache` holds after ``n_tokens`` tokens."""
    c = config
    n_mla, n_gdn = len(c.mla_positions), len(c.gdn_positions)
    mla = n_tokens * (c.kv_lora_rank + c.qk_rope_head_dim) * element_bytes
    state = c.gdn_n_heads * c.gdn_d_state * c.gdn_headdim * 4  # fp32 always
    window = (c.gdn_d_conv - 1) * c.gdn_d_inner * element_bytes
    return batch * (n_mla * mla + n_gdn * (state + window))


def _mla_step(block: MLABlock, x: torch.Tensor, cache: MLACache, start_pos: int):
    h = block.attn_norm(x)  # (b, t, dim)
    latent, k_pe = block.attn.latent_kv(h)  # (b, t, r), (b, t, p): all we keep
    if cache.latent is not None:
        latent = torch.cat([cache.latent, latent], dim=1)  # (b, T, r)
        k_pe = torch.cat([cache.k_pe, k_pe], dim=1)  # (b, T, p)
    cache.latent, cache.k_pe = latent, k_pe
    x = x + block.attn.attend(h, latent, k_pe, start_pos)  # (b, t, dim)
    return x + block.moe(block.moe_norm(x))


@torch.no_grad()
def forward_cached(model, tokens: torch.Tensor, cache: HyMoCache) -> torch.Tensor:
    """Logits (b, t, vocab) for ``tokens`` (b, t) that continue the sequence in ``cache``;
    updates the cache. t = 1 is one decoding step; a longer t is a prefill."""
    from hymo_mini.model import check_tokens

    if model.config.hc_mult > 1:
        # the per-layer steps below walk the ordinary residual stream; an mHC model's
        # widened streams would be skipped and its output silently wrong
        raise NotImplementedError(
            f"cached decoding is not implemented for mHC models (hc_mult="
            f"{model.config.hc_mult}); use model(tokens) on the whole sequence instead")
    if len(cache.layers) != len(model.layers):
        raise ValueError(f"the cache has {len(cache.layers)} layers, the model "
                         f"{len(model.layers)}: make it with HyMoCache.empty(model)")
    if cache.position + tokens.shape[-1] > model.config.max_seq_len:
        raise ValueError(f"decoding past max_seq_len={model.config.max_seq_len} "
                         f"(the cache is at {cache.position}, {tokens.shape[-1]} more)")
    check_tokens(tokens, model.config)
    start = cache.position
    x = model.embed(tokens)  # (b, t, dim)
    for layer, layer_cache in zip(model.layers, cache.layers, strict=True):
        if isinstance(layer, GDNBlock):
            x, layer_cache.conv_window, layer_cache.state = layer.step(
                x, layer_cache.conv_window, layer_cache.state, start)
        elif isinstance(layer, MLABlock):
            x = _mla_step(layer, x, layer_cache, start)
        else:
            raise TypeError(f"no cached path for layer type {type(layer).__name__}")
    cache.position += tokens.shape[-1]
    return model.logits(x)  # (b, t, vocab)


def check_sampling(model, max_new_tokens, temperature, top_k, top_p) -> None:
    """ValueError naming the first setting out of its range."""
    if not (isinstance(max_new_tokens, int) and max_new_tokens >= 0):
        raise ValueError(f"max_new_tokens must be a non-negative integer, got {max_new_tokens!r}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0: always the likeliest token), got "
                         f"{temperature}")
    if top_k is not None and not 0 < top_k <= model.config.vocab_size:
        raise ValueError(f"top_k must be in [1, vocab_size={model.config.vocab_size}], "
                         f"got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")


def next_token(logits: torch.Tensor, temperature: float, top_k: int | None,
               top_p: float | None, gen) -> torch.Tensor:
    """One token per row (b, 1) from the last position's logits (b, vocab).

    temperature 0: the likeliest token. Otherwise sample from softmax(logits / temperature),
    over the ``top_k`` likeliest tokens only and, with ``top_p``, over the fewest likeliest
    tokens whose probabilities add up to at least ``top_p`` (nucleus sampling)."""
    if temperature == 0:
        return logits.argmax(-1, keepdim=True)
    scaled = logits.float() / temperature
    if top_k is not None:
        kth = scaled.topk(top_k, dim=-1).values[:, -1:]  # (b, 1)
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = scaled.softmax(-1)  # (b, vocab)
    if top_p is not None:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        before = sorted_probs.cumsum(-1) - sorted_probs  # the mass ahead of each token
        sorted_probs = sorted_probs.masked_fill(before >= top_p, 0.0)  # the first always stays
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return torch.multinomial(probs, 1, generator=gen)  # (b, 1); multinomial renormalises


@torch.no_grad()
def stream(model, prompt: torch.Tensor, max_new_tokens: int, *, temperature: float = 1.0,
           top_k: int | None = None, top_p: float | None = None, seed: int | None = 0):
    """Continue ``prompt`` (b, t) from the cache, yielding each new token (b, 1) as soon as
    it is chosen (see :func:`next_token`); stops early at ``max_seq_len``."""
    if prompt.ndim == 1:
        prompt = prompt[None]
    check_sampling(model, max_new_tokens, temperature, top_k, top_p)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    gen = None if seed is None else torch.Generator(device=device).manual_seed(seed)
    cache = HyMoCache.empty(model)
    length = prompt.shape[1]
    try:
        logits = forward_cached(model, prompt.to(device), cache)[:, -1]  # prefill: (b, vocab)
        for _ in range(max_new_tokens):
            token = next_token(logits, temperature, top_k, top_p, gen)  # (b, 1)
            yield token
            length += 1
            if length >= model.config.max_seq_len:
                break  # the RoPE tables end here
            logits = forward_cached(model, token, cache)[:, -1]
    finally:
        model.train(was_training)


@torch.no_grad()
def generate(model, prompt: torch.Tensor, max_new_tokens: int, *, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None,
             seed: int | None = 0) -> torch.Tensor:
    """Continue ``prompt`` (b, t) by ``max_new_tokens`` tokens, one at a time from the cache
    (:func:`stream`). Returns (b, t + new tokens)."""
    if prompt.ndim == 1:
        prompt = prompt[None]
    device = next(model.parameters()).device
    new = list(stream(model, prompt, max_new_tokens, temperature=temperature, top_k=top_k,
                      top_p=top_p, seed=seed))
    return torch.cat([prompt.to(device), *new], dim=1)
