"""Multi-head latent attention: shapes, causality, explicit = SDPA, the cache split,
relative positions, gradients and the parameter count."""

import math
from dataclasses import replace

import pytest
import torch

from hymo_mini.blocks import MLABlock
from hymo_mini.config import ModelConfig, load_config
from hymo_mini.mla import (
    MultiHeadLatentAttention,
    causal_mask,
    explicit_attention,
    mla_param_count,
    sdpa_attention,
)


@pytest.fixture
def config():
    return load_config("hymo_mini").model


def rel_err(a, b):
    return ((a - b).float().pow(2).mean().sqrt() / b.float().pow(2).mean().sqrt()).item()


def randomise_scales(attn):
    """Scales start at 1; give each channel its own value so tests see them act."""
    with torch.no_grad():
        attn.q_scale.uniform_(0.5, 1.5)
        attn.k_scale.uniform_(0.5, 1.5)
        attn.q_norm.weight.uniform_(0.5, 1.5)
        attn.kv_norm.weight.uniform_(0.5, 1.5)


def loop_attention(attn, x, start_pos=0):
    """One query position, one head at a time, from the module's projections."""
    latent, k_pe = attn.latent_kv(x)
    q, k, v = attn.project(x, latent, k_pe, start_pos)  # (b h t d), (b g s d), (b g s dv)
    b, h, t, _ = q.shape
    r = h // k.shape[1]
    out = torch.zeros(b, h, t, v.shape[-1], dtype=torch.float64)
    for head in range(h):
        g = head // r
        for i in range(t):
            scores = k[:, g, : i + 1].double() @ q[:, head, i].double()[..., None]  # (b, i+1, 1)
            p = torch.softmax(scores[..., 0] / math.sqrt(q.shape[-1]), dim=-1)
            out[:, head, i] = (p[..., None] * v[:, g, : i + 1].double()).sum(1)
    return out


def test_output_shape_and_param_count(config):
    attn = MultiHeadLatentAttention(config)
    x = torch.randn(2, 9, config.dim)
    assert attn(x).shape == (2, 9, config.dim)
    assert sum(p.numel() for p in attn.parameters()) == mla_param_count(config)
    assert mla_param_count(ModelConfig()) == 2_755_040  # hymo_750m; the document says 1.23M


@pytest.mark.parametrize("variant", [{}, {"n_kv_groups": 1}, {"n_kv_groups": 4, "v_head_dim": 12},
                                     {"qk_rope_head_dim": 0}])
def test_sdpa_equals_explicit_and_loop(config, variant):
    config = replace(config, **variant)
    attn = MultiHeadLatentAttention(config)
    randomise_scales(attn)
    x = torch.randn(2, 13, config.dim)
    latent, k_pe = attn.latent_kv(x)
    q, k, v = attn.project(x, latent, k_pe)
    fused = sdpa_attention(q, k, v)
    written, probs = explicit_attention(q, k, v)
    assert rel_err(written, fused) < 1e-5
    assert rel_err(fused, loop_attention(attn, x)) < 1e-5
    assert probs.shape == (2, config.n_heads, 13, 13)
    assert torch.allclose(probs.sum(-1), torch.ones(()))
    assert (probs.triu(diagonal=1) == 0).all()  # causal
    assert torch.equal(attn.attention_weights(x), probs)


def test_query_heads_share_kv_groups_in_blocks(config):
    # heads 0, 1 read group 0 and heads 2, 3 read group 1 (n_heads=4, n_kv_groups=2)
    q = torch.randn(1, 1, 5, 8).repeat(1, 4, 1, 1)  # identical queries in every head
    k, v = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 6)
    out, _ = explicit_attention(q, k, v)
    assert torch.allclose(out[:, 0], out[:, 1]) and torch.allclose(out[:, 2], out[:, 3])
    assert not torch.allclose(out[:, 1], out[:, 2])
    assert rel_err(sdpa_attention(q, k, v), out) < 1e-5


def test_causal(config):
    attn = MultiHeadLatentAttention(config)
    x = torch.randn(2, 12, config.dim)
    y = x.clone()
    y[:, 7:] = torch.randn(2, 5, config.dim)
    a, b = attn(x), attn(y)
    assert torch.allclose(a[:, :7], b[:, :7], atol=1e-6)
    assert not torch.allclose(a[:, 7:], b[:, 7:], atol=1e-3)


def test_cache_split_equals_full_forward(config):
    attn = MultiHeadLatentAttention(config)
    randomise_scales(attn)
    x = torch.randn(2, 11, config.dim)
    full = attn(x)
    latent, k_pe = attn.latent_kv(x)  # the cache of all 11 tokens
    for start in (0, 6, 10):  # prefill nothing, 6 tokens, all but the last
        out = attn.attend(x[:, start:], latent, k_pe, start_pos=start)
        assert rel_err(out, full[:, start:]) < 1e-5, start
    # token by token, as a decoder would, growing the cache
    steps = []
    for pos in range(11):
        steps.append(attn.attend(x[:, pos:pos + 1], latent[:, :pos + 1], k_pe[:, :pos + 1], pos))
    assert rel_err(torch.cat(steps, dim=1), full) < 1e-5


def test_relative_positions_only(config):
    """Shifting every position leaves the output unchanged: RoPE scores depend on the
    offset only. This fails if the per-group key scale is applied after the rotation."""
    attn = MultiHeadLatentAttention(config)
    randomise_scales(attn)
    x = torch.randn(1, 10, config.dim)
    assert rel_err(attn(x, start_pos=37), attn(x)) < 1e-5


def test_bad_inputs(config):
    attn = MultiHeadLatentAttention(config)
    with pytest.raises(ValueError, match="dim=64"):
        attn(torch.randn(2, 3, 65))
    x = torch.randn(1, 4, config.dim)
    latent, k_pe = attn.latent_kv(x)
    with pytest.raises(ValueError, match="cache"):
        attn.attend(x, latent[:, :2], k_pe[:, :2], start_pos=0)
    with pytest.raises(ValueError, match="latent must be"):
        attn.attend(x, latent[..., :3], k_pe)


def test_every_parameter_gets_a_gradient(config):
    block = MLABlock(config)
    x = torch.randn(2, 8, config.dim, requires_grad=True)
    block(x).square().sum().backward()
    for name, p in block.named_parameters():
        if name.startswith("moe.experts."):
            continue  # routed experts only get tokens if chosen (tested in test_moe)
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_block_is_two_residuals(config):
    block = MLABlock(config)
    x = torch.randn(2, 6, config.dim)
    h = x + block.attn(block.attn_norm(x))
    assert torch.allclose(block(x), h + block.moe(block.moe_norm(h)), atol=1e-6)


def test_causal_mask_alignment():
    assert causal_mask(2, 4).tolist() == [[True, True, True, False], [True, True, True, True]]
    assert torch.equal(causal_mask(3, 3), torch.ones(3, 3, dtype=torch.bool).tril())
