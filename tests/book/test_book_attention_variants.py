"""Attention variants: cache sizes per variant and absorbed MLA against the module."""

from dataclasses import replace

import pytest
import torch
from hymo_book.attention_variants import (
    absorb_mla,
    absorbed_attention,
    cache_table,
    decode_flops,
    layer_position_table,
)

from hymo_mini.config import ModelConfig, load_config
from hymo_mini.mla import MultiHeadLatentAttention


def rel_err(a, b):
    return ((a - b).double().pow(2).mean().sqrt() / b.double().pow(2).mean().sqrt()).item()


def randomised(config, dtype=torch.float32):
    """An attention whose scales and norm weights are not 1, so the folds see them act."""
    attn = MultiHeadLatentAttention(config).to(dtype)
    with torch.no_grad():
        for t in (attn.q_scale, attn.k_scale, attn.q_norm.weight, attn.kv_norm.weight):
            t.uniform_(0.5, 1.5)
    return attn


@pytest.fixture
def mini():
    return load_config("hymo_mini").model


def test_cache_table_production_values():
    table = cache_table(ModelConfig())
    assert table["MHA"].bytes_per_token == 2 * 16 * 128 * 2  # K and V, 16 heads, bf16
    assert table["GQA-4"].bytes_per_token == 2 * 4 * 128 * 2
    assert table["MQA"].bytes_per_token == 2 * 128 * 2
    assert table["MLA (latent cache)"].bytes_per_token == (128 + 32) * 2  # not 256 values
    assert table["MLA (latent cache)"].vs_mha == pytest.approx(25.6)
    assert table["MHA"].per_sequence == 8_192 * 4_096 * 8
    gdn = table["GDN state (fp32) + conv tail"]
    assert gdn.per_sequence == 8 * (40 * 32 * 32 * 4 + 3 * 1280 * 2)
    text = str(table)
    assert "MLA (latent cache)" in text and "25.6x" in text
    assert table._repr_html_().startswith("<table")
    with pytest.raises(KeyError, match="no variant"):
        table["MHA-2"]


def test_cache_table_rejects_bad_sizes():
    with pytest.raises(ValueError, match="T must"):
        cache_table(ModelConfig(), T=0)
    with pytest.raises(ValueError, match="n_layers"):
        cache_table(ModelConfig(), n_layers=-1)


@pytest.mark.parametrize("t", [1, 7, 13])
def test_absorbed_equals_explicit_forward(mini, t):
    attn = randomised(mini, torch.float64)
    x = torch.randn(2, t, mini.dim, dtype=torch.float64)
    latent, k_pe = attn.latent_kv(x)
    # the module's RoPE tables are fp32, so agreement is to fp32 rounding, not fp64
    assert rel_err(absorbed_attention(attn, x, latent, k_pe), attn(x)) < 1e-6


def test_absorbed_equals_explicit_when_decoding_from_a_cache(mini):
    attn = randomised(mini)
    x = torch.randn(1, 12, mini.dim)
    latent, k_pe = attn.latent_kv(x)
    for start in (11, 8, 0):  # one new token, three new tokens, all of them
        new = x[:, start:]
        explicit = attn.attend(new, latent, k_pe, start_pos=start)
        assert rel_err(absorbed_attention(attn, new, latent, k_pe, start), explicit) < 1e-5


def test_absorbed_with_shifted_positions_and_production_widths():
    # production head shapes (rope 32 of 128, 4 groups of 4 heads), a small dim
    config = replace(ModelConfig(), dim=64, q_lora_rank=48, kv_lora_rank=32, max_seq_len=64)
    attn = randomised(config)
    x = torch.randn(1, 9, config.dim)
    latent, k_pe = attn.latent_kv(x)
    assert rel_err(absorbed_attention(attn, x, latent, k_pe, start_pos=20),
                   attn(x, start_pos=20)) < 1e-5


def test_absorption_is_not_trivially_exact(mini):
    """Folding the wrong group into the query side must be caught by the comparison."""
    attn = randomised(mini, torch.float64)
    x = torch.randn(1, 6, mini.dim, dtype=torch.float64)
    latent, k_pe = attn.latent_kv(x)
    w = absorb_mla(attn)
    wrong = type(w)(w.w_q_pe, w.w_q_latent.flip(0), w.w_out_latent)
    assert rel_err(absorbed_attention(attn, x, latent, k_pe, weights=wrong), attn(x)) > 1e-2


def test_absorbed_weight_shapes(mini):
    w = absorb_mla(MultiHeadLatentAttention(mini))
    h, p, r, q = mini.n_heads, mini.qk_rope_head_dim, mini.kv_lora_rank, mini.q_lora_rank
    assert w.w_q_pe.shape == (h, p, q)
    assert w.w_q_latent.shape == (h, r, q)
    assert w.w_out_latent.shape == (h, mini.dim, r)


def test_absorbed_attention_errors(mini):
    attn = MultiHeadLatentAttention(mini)
    x = torch.randn(1, 4, mini.dim)
    latent, k_pe = attn.latent_kv(x)
    with pytest.raises(TypeError, match="MultiHeadLatentAttention"):
        absorb_mla(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="x must be"):
        absorbed_attention(attn, x[..., :3], latent, k_pe)
    with pytest.raises(ValueError, match="latent must be"):
        absorbed_attention(attn, x, latent[..., :-1], k_pe)
    with pytest.raises(ValueError, match="cache holds"):
        absorbed_attention(attn, x, latent[:, :2], k_pe[:, :2])


def test_decode_flops():
    c = ModelConfig()
    small, large = decode_flops(c, 16), decode_flops(c, 4096)
    assert set(small) == {"explicit (expand the latent cache)", "expanded K/V cache", "absorbed"}
    # re-expanding the cache costs 2·s·r·G·(n+dv) more than keeping K/V expanded
    gap = lambda f, s: f["explicit (expand the latent cache)"] - f["expanded K/V cache"]
    assert gap(large, 4096) - gap(small, 16) == 2 * (4096 - 16) * 128 * 4 * (96 + 128)
    assert large["absorbed"] < large["explicit (expand the latent cache)"]
    with pytest.raises(ValueError, match="s \\(cached tokens\\)"):
        decode_flops(c, 0)


@pytest.mark.parametrize("position, nope_layers", [
    ("first", [3, 7, 11, 15, 19, 23, 27]),  # the document's list, for its text's layout
    ("last", [2, 6, 10, 14, 18, 22, 26, 30]),  # the default: MLA last in each group of four
])
def test_layer_position_table_follows_the_config(position, nope_layers):
    prod = replace(ModelConfig(), mla_position=position)
    rows = layer_position_table(prod)
    mla = [r[0] for r in rows if r[1] == "MLA"]
    assert mla == list(prod.mla_positions)
    assert {r[2] for r in rows if r[1] == "MLA"} == {"RoPE on 32 of 128 q/k channels"}
    assert {r[2] for r in rows if r[1] == "GDN"} == {"RoPE on 32 of 32 b/c channels"}
    nope = layer_position_table(replace(prod, nope_hybrid_gdn=True))
    assert [r[0] for r in nope if r[2].startswith("NoPE")] == nope_layers  # just before MLA
