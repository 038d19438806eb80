"""Cached decoding: the same logits as the full forward at every position, a cache of
exactly the documented size, and sampling that matches a cache-free rollout."""

from __future__ import annotations

import pytest
import torch

from hymo_mini.analysis.costs import gdn_cost, mla_cost
from hymo_mini.blocks import GDNBlock
from hymo_mini.config import load_config, replace
from hymo_mini.generate import GDNCache, HyMoCache, MLACache, cache_bytes, forward_cached, generate
from hymo_mini.model import build_hymo


def rel_err(a: torch.Tensor, ref: torch.Tensor) -> float:
    return ((a - ref).double().pow(2).mean().sqrt() / ref.double().pow(2).mean().sqrt()).item()



def model_config(**fields):
    """hymo_mini with 5 layers (three GDN, MLA, GDN) and MoE capacity = all tokens, so the full
    forward drops no token (capacity couples the tokens of one forward; one decoded token
    alone is never dropped)."""
    m = load_config("hymo_mini").model
    base = dict(n_layers=5, max_seq_len=64,
                capacity_factor=m.n_routed_experts / m.n_activated_experts)
    base.update(fields)
    return replace(m, **base)


def decode_all(model, tokens, prefill):
    """Logits of tokens, prefill tokens at once, then one token at a time."""
    cache = HyMoCache.empty(model)
    outs = [forward_cached(model, tokens[:, :prefill], cache)] if prefill else []
    for t in range(prefill, tokens.shape[1]):
        outs.append(forward_cached(model, tokens[:, t:t + 1], cache))
    return torch.cat(outs, dim=1), cache


@pytest.mark.parametrize("fields", [
    dict(),  # the 3:1 layout, documented recurrence
    dict(gdn_rule="delta"),
    dict(mla_every=0, n_layers=3),  # all GDN
    dict(mla_every=1, n_layers=2),  # all MLA
    dict(nope_hybrid_gdn=True, gdn_residual="document", mla_position="first"),
])
@pytest.mark.parametrize("prefill", [0, 7])
def test_cached_logits_equal_full_forward(fields, prefill):
    torch.manual_seed(0)
    model = build_hymo(model_config(**fields)).eval()
    tokens = torch.randint(0, 256, (2, 19))
    full = model(tokens)  # (b, t, vocab)
    cached, cache = decode_all(model, tokens, prefill)
    assert cached.shape == full.shape
    assert rel_err(cached, full) < 1e-5
    for t in (0, 6, 7, 18):  # and position by position, not just on average
        assert rel_err(cached[:, t], full[:, t]) < 1e-5
    assert cache.position == 19


def test_cached_logits_in_float64_are_exact():
    torch.manual_seed(1)
    model = build_hymo(model_config(gdn_backend="naive")).double().eval()
    tokens = torch.randint(0, 256, (1, 11))
    cached, _ = decode_all(model, tokens, 3)
    assert rel_err(cached, model(tokens)) < 1e-7  # RoPE tables are built in fp32


@pytest.mark.parametrize("rule", ["gla", "delta"])
def test_gdn_block_step_equals_forward(rule):
    torch.manual_seed(2)
    config = model_config(gdn_rule=rule, gdn_d_conv=3)
    block = GDNBlock(config).double()
    x = torch.randn(2, 13, config.dim, dtype=torch.float64)
    window = state = None
    ys = []
    for a, b in ((0, 5), (5, 6), (6, 13)):  # uneven pieces
        y, window, state = block.step(x[:, a:b], window, state, a)
        ys.append(y)
    assert rel_err(torch.cat(ys, 1), block(x)) < 1e-12
    assert window.shape == (2, config.gdn_d_inner, 2)
    assert state.shape == (2, config.gdn_n_heads, config.gdn_d_state, config.gdn_headdim)


def test_mla_cache_is_latent_and_shared_rope_key():
    config = model_config(n_layers=8)  # two MLA layers
    assert config.layer_types.count("mla") == 2
    model = build_hymo(config).eval()
    _, cache = decode_all(model, torch.randint(0, 256, (3, 9)), 4)
    kinds = [type(layer) for layer in cache.layers]
    assert kinds == [MLACache if t == "mla" else GDNCache for t in config.layer_types]
    mla = cache.layers[config.mla_positions[0]]
    assert mla.latent.shape == (3, 9, config.kv_lora_rank)  # not K, not V
    assert mla.k_pe.shape == (3, 9, config.qk_rope_head_dim)  # one key for all groups


def test_cache_bytes_match_the_formula():
    config = model_config(n_layers=8)  # two MLA layers
    assert len(config.mla_positions) == 2
    model = build_hymo(config).eval()
    cache = HyMoCache.empty(model)
    tokens = torch.randint(0, 256, (2, 12))
    forward_cached(model, tokens[:, :5], cache)
    sizes = {5: cache.nbytes()}
    for t in range(5, 12):
        forward_cached(model, tokens[:, t:t + 1], cache)
        sizes[t + 1] = cache.nbytes()
    for n, size in sizes.items():
        assert size == cache_bytes(config, n, batch=2, element_bytes=4)
    # per token: 2 MLA layers x (kv_lora_rank + rope dim) x 4 bytes, per sequence
    per_token = len(config.mla_positions) * (config.kv_lora_rank + config.qk_rope_head_dim) * 4
    assert all(sizes[n + 1] - sizes[n] == 2 * per_token for n in range(5, 11))
    # the same numbers as the book's cost model (hymo_mini.analysis.costs), at fp32
    n_mla, n_gdn = len(config.mla_positions), len(config.gdn_positions)
    book = (n_mla * mla_cost(config, 12, cache="latent", cache_dtype_bytes=4).cache_bytes
            + n_gdn * gdn_cost(config, 12, state_dtype_bytes=4, cache_dtype_bytes=4).cache_bytes)
    assert sizes[12] == 2 * book


def test_documented_model_cache_per_token():
    """hymo_750m, bf16: 8 MLA layers x 160 values x 2 bytes = 2,560 bytes per token."""
    config = load_config("hymo_750m").model
    grow = (cache_bytes(config, 1001, element_bytes=2) - cache_bytes(config, 1000,
                                                                     element_bytes=2))
    assert grow == 8 * (128 + 32) * 2 == 2560


def test_greedy_generate_matches_cache_free_rollout():
    torch.manual_seed(3)
    model = build_hymo(model_config()).eval()
    prompt = torch.randint(0, 256, (2, 6))
    out = generate(model, prompt, 8, temperature=0)
    assert out.shape == (2, 14) and torch.equal(out[:, :6], prompt)
    tokens = prompt
    for _ in range(8):  # the slow way: a full forward for each new token
        nxt = model(tokens)[:, -1].argmax(-1, keepdim=True)
        tokens = torch.cat([tokens, nxt], dim=1)
    assert torch.equal(out, tokens)


def test_sampling_is_seeded_and_top_k_restricts():
    torch.manual_seed(4)
    model = build_hymo(model_config()).eval()
    prompt = torch.randint(0, 256, (1, 4))
    a = generate(model, prompt, 6, temperature=1.0, seed=5)
    assert torch.equal(a, generate(model, prompt, 6, temperature=1.0, seed=5))
    top1 = generate(model, prompt, 6, temperature=1.0, top_k=1, seed=6)
    assert torch.equal(top1, generate(model, prompt, 6, temperature=0))
    assert model.training is False


def test_generate_errors():
    model = build_hymo(model_config())
    prompt = torch.zeros(1, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(model, prompt, -1)
    with pytest.raises(ValueError, match="top_k"):
        generate(model, prompt, 2, top_k=0)
    with pytest.raises(ValueError, match="temperature"):
        generate(model, prompt, 2, temperature=-1)
    with pytest.raises(ValueError, match="max_seq_len"):
        forward_cached(model, torch.zeros(1, 65, dtype=torch.long), HyMoCache.empty(model))
    with pytest.raises(ValueError, match="layers"):
        forward_cached(model, prompt, HyMoCache())
    out = generate(model, torch.zeros(1, 60, dtype=torch.long), 10, temperature=0)
    assert out.shape == (1, 64)  # stops at max_seq_len


def test_mhc_models_refuse_cached_decoding():
    config = replace(load_config("hymo_mini").model, n_layers=2, mla_every=2, hc_mult=2)
    model = build_hymo(config).eval()
    with pytest.raises(NotImplementedError, match="hc_mult"):
        forward_cached(model, torch.zeros(1, 3, dtype=torch.long), HyMoCache.empty(model))
