"""flops: per-component FLOPs against FlopCounterMode on real modules, activation shapes
against the shapes the modules produce, and the memory / throughput arithmetic."""

from dataclasses import replace

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from hymo_mini.analysis.flops import (
    activation_shapes,
    activation_table,
    flops_table,
    forward_flops,
    tokens_per_second,
    training_memory,
)
from hymo_mini.blocks import GDNBlock
from hymo_mini.config import ModelConfig, load_config
from hymo_mini.mla import MultiHeadLatentAttention
from hymo_mini.moe import DeepSeekMoE
from hymo_mini.mtp import MTPBlock
from hymo_mini.ops import naive_gla


def counted(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


@pytest.fixture
def mini():
    return load_config("hymo_mini").model


def test_moe_flops_match_the_flop_counter_when_nothing_is_dropped(mini):
    config = replace(mini, capacity_factor=float(mini.n_routed_experts))  # no drops
    moe = DeepSeekMoE(config)
    x = torch.randn(3, 10, config.dim)
    measured = counted(lambda: moe(x))
    assert moe.last_dropped == 0
    n_mla = len(config.mla_positions)
    expected = forward_flops(config, 10)["MoE (router, top-k routed, shared)"] / n_mla
    assert measured == expected * 30  # 30 tokens


def test_moe_flops_fall_when_tokens_are_dropped(mini):
    # the loop skips dropped assignments (the grouped path computes them as zero rows)
    config = replace(mini, capacity_factor=0.25, moe_impl="loop")
    moe = DeepSeekMoE(config)
    x = torch.randn(2, 16, config.dim)
    measured = counted(lambda: moe(x))
    assert moe.last_dropped > 0
    per_token = forward_flops(config, 16)["MoE (router, top-k routed, shared)"] / 2
    assert measured < per_token * 32


def test_head_and_mtp_flops_match_the_flop_counter(mini):
    head = torch.nn.Linear(mini.dim, mini.vocab_size, bias=False)
    block = MTPBlock(mini.dim, mini.mtp_inter_dim)
    x = torch.randn(2, 5, mini.dim)
    flops = forward_flops(mini, 5)
    assert counted(lambda: head(x)) == flops["output head (logits)"] * 10
    assert counted(lambda: block(x)) == flops["MTP blocks"] / mini.mtp_depth * 10
    assert flops["MTP logits (shared head)"] == mini.mtp_depth * flops["output head (logits)"]


def test_gdn_projection_split_adds_up_to_the_real_block(mini):
    """The two GDN projection rows together equal the block's matrix products exactly,
    plus its depthwise conv (which the counter charges for the padded outputs too)."""
    config = replace(mini, gdn_residual="document")
    block = GDNBlock(config)
    T = 8
    x = torch.randn(1, T, config.dim)
    with FlopCounterMode(display=False) as counter:
        block.mixer.gdn_inputs(x)
        block.mixer.out_proj(torch.randn(1, T, config.gdn_d_inner))
        block.mixer.skip_proj(x)
    by_op = {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}
    conv = 2 * T * config.gdn_d_inner * config.gdn_d_conv
    flops = forward_flops(config, T)
    per_layer = (flops["GDN projections (in, g, out, skip)"]
                 + flops["GDN projections (b, c, dt) and conv"]) / len(config.gdn_positions)
    assert by_op["aten.mm"] == per_layer * T - conv
    padded = 2 * (T + config.gdn_d_conv - 1) * config.gdn_d_inner * config.gdn_d_conv
    assert by_op["aten.convolution"] == padded


def test_production_numbers():
    flops = forward_flops(ModelConfig(), 4096)
    assert flops["output head (logits)"] == 2 * 896 * 64_256
    assert flops["MLA attention core (q·k, p·v)"] == pytest.approx(8 * 16 * 256 * 4097)
    assert flops["MoE (router, top-k routed, shared)"] == 8 * 2 * 18_593_792
    assert flops["GDN projections (in, g, out, skip)"] == pytest.approx(227.3e6, rel=1e-3)
    assert 0.9e9 < flops["total"] < 1.3e9  # the document says 413e9
    no_mtp = forward_flops(ModelConfig(), 4096, include_mtp=False)
    assert "MTP blocks" not in no_mtp and no_mtp["total"] < flops["total"]
    full = forward_flops(ModelConfig(), 4096, causal=False)
    assert full["MLA attention core (q·k, p·v)"] == 8 * 2 * 16 * 256 * 4096


def test_activation_shapes_are_the_modules_shapes(mini):
    B, T = 2, 6
    shapes = activation_shapes(mini, B, T)
    x = torch.randn(B, T, mini.dim)
    attn = MultiHeadLatentAttention(mini)
    latent, k_pe = attn.latent_kv(x)
    q, k, v = attn.project(x, latent, k_pe)
    assert (B, T, q.shape[1] * q.shape[3]) == shapes["MLA queries"]
    assert torch.cat([latent, k_pe], -1).shape == shapes["MLA latent + k_pe"]
    assert (B, T, k.shape[1] * (k.shape[3] - mini.qk_rope_head_dim + v.shape[3])) == \
        shapes["MLA keys and values (k, v per group)"]
    assert attn.attention_weights(x).shape == shapes["MLA attention scores"]
    moe = DeepSeekMoE(mini)
    assert moe.route(x).probs.reshape(B, T, -1).shape == shapes["MoE router logits"]
    assert moe.shared_experts[0].w1(x).shape == shapes["shared expert hidden"]
    gdn = GDNBlock(mini)
    assert gdn.mixer.in_proj(x).shape == shapes["GDN in_proj output"]
    v, b, c, g, A, _ = gdn.mixer.gdn_inputs(x)
    assert torch.stack([b, c]).shape == shapes["GDN b and c"]
    assert g.shape == shapes["GDN dt / decay gate"]
    assert naive_gla(v, b, c, g, A)[1].shape == shapes["GDN recurrent state"]


def test_tables_print_and_compare(mini):
    table = flops_table(ModelConfig())
    assert table["total"].documented == 413e9
    assert "MLA attention core" in str(table) and "MLA attention core" in table._repr_html_()
    acts = activation_table(ModelConfig())
    assert acts["MLA attention scores"].value == 2 * 16 * 128 * 128 * 4  # document: 0.52 MB
    assert acts["logits"].value == 2 * 128 * 64_256 * 4  # document: 57.6 MB
    with pytest.raises(KeyError, match="no component"):
        acts["nothing"]
    with pytest.raises(ValueError, match="B and T"):
        activation_table(mini, B=0)
    with pytest.raises(ValueError, match="T must"):
        forward_flops(mini, 0)


def test_memory_and_throughput():
    mem = training_memory(1_000)
    assert mem == {"weights": 4_000, "gradients": 4_000, "optimizer": 8_000, "total": 16_000}
    assert tokens_per_second(413e9) == pytest.approx(377.7, rel=1e-3)  # the document's sum
    with pytest.raises(ValueError):
        tokens_per_second(1e9, mfu=1.5)
