"""The cost model (hymo_mini.analysis.costs): hand-checked values, and FLOPs checked against
PyTorch's own FLOP counter running the real modules."""

import importlib.util

import pytest
import torch
from einops import einsum
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from hymo_mini.analysis.costs import (
    LayerCost,
    attention_pairs,
    gdn_cost,
    hybrid_layer_counts,
    kv_cache_bytes_per_token,
    mha_cost,
    mla_cost,
    moe_cost,
    stack_cost,
)
from hymo_mini.blocks import GDNBlock
from hymo_mini.config import load_config, replace

PROD = load_config("hymo_750m").model
MINI = load_config("hymo_mini").model


def counted(fn) -> dict[str, int]:
    with FlopCounterMode(display=False) as counter:
        fn()
    return {str(op).split(".")[-1]: n for op, n in counter.get_flop_counts()["Global"].items()}


def test_attention_pairs():
    assert attention_pairs(4) == 10 and attention_pairs(4, causal=False) == 16
    assert attention_pairs(0) == 0
    with pytest.raises(ValueError, match="T"):
        attention_pairs(-1)


def test_mha_cache_matches_the_textbook_formula():
    # 2 (K and V) x 16 heads x 128 x 4096 tokens x 2 bytes: section 4.1.1's 32 MiB
    assert mha_cost(PROD, 4096).cache_bytes == 2 * 16 * 128 * 4096 * 2 == 32 * 2**20
    assert mha_cost(PROD, 4096, n_kv_heads=1).cache_bytes == 2 * 128 * 4096 * 2
    assert mha_cost(PROD, 7).kind == "MHA"
    assert mha_cost(PROD, 7, n_kv_heads=4).kind == "GQA-4"
    assert mha_cost(PROD, 7, n_kv_heads=1).kind == "MQA"
    with pytest.raises(ValueError, match="n_kv_heads"):
        mha_cost(PROD, 7, n_kv_heads=3)


def test_mla_cache_per_token():
    per_token = kv_cache_bytes_per_token(PROD)
    assert per_token["MLA (latent cache)"] == (128 + 32) * 2  # one shared k_pe, not 4
    assert per_token["MLA (expanded cache)"] == 4 * (128 + 128) * 2
    assert per_token["MHA"] == 16 * 256 * 2
    assert list(per_token) == ["MHA", "GQA-8", "GQA-4", "MQA", "MLA (expanded cache)",
                               "MLA (latent cache)"]
    with pytest.raises(ValueError, match="cache"):
        mla_cost(PROD, 8, cache="compressed")


def test_gdn_cache_is_independent_of_T():
    a, b = gdn_cost(PROD, 16), gdn_cost(PROD, 16_384)
    assert a.cache_bytes == b.cache_bytes == 40 * 32 * 32 * 4 + 3 * 1280 * 2
    assert b.mixing_flops == 1024 * a.mixing_flops


def test_mha_flops_against_the_flop_counter():
    T, c = 6, MINI
    H, dk, dv, d = c.n_heads, c.head_dim, c.v_head_dim, c.dim
    wq, wk = nn.Linear(d, H * dk, bias=False), nn.Linear(d, H * dk, bias=False)
    wv, wo = nn.Linear(d, H * dv, bias=False), nn.Linear(H * dv, d, bias=False)
    x = torch.randn(T, d)

    def layer():
        q = wq(x).view(T, H, dk)
        k = wk(x).view(T, H, dk)
        v = wv(x).view(T, H, dv)
        w = einsum(q, k, "t h d, s h d -> h t s").softmax(-1)
        o = einsum(w, v, "h t s, s h d -> t h d")
        return wo(o.reshape(T, H * dv))

    flops = counted(layer)
    cost = mha_cost(c, T, causal=False)  # the plain layer scores every pair
    assert flops["mm"] == cost.projection_flops
    assert flops["bmm"] == cost.mixing_flops


def test_gdn_flops_against_the_real_block():
    """FlopCounterMode sees the block's linear layers and conv, and the read c^T H (a
    batched matmul); the decay and b ⊗ v are element-wise, which it does not count."""
    T, c = 10, replace(MINI, gdn_backend="naive")
    block = GDNBlock(c)
    flops = counted(lambda: block(torch.randn(1, T, c.dim)))
    cost = gdn_cost(c, T)
    conv_model = 2 * T * c.gdn_d_inner * c.gdn_d_conv
    # the padded conv computes d_conv - 1 extra outputs that the block then drops
    assert flops["convolution"] == conv_model * (T + c.gdn_d_conv - 1) // T
    assert flops["mm"] == cost.projection_flops - conv_model
    assert flops["bmm"] == cost.mixing_flops * 2 // 5
    delta = gdn_cost(replace(c, gdn_rule="delta"), T)
    assert delta.mixing_flops * 5 == cost.mixing_flops * 7
    assert delta.projection_flops - cost.projection_flops == 2 * T * c.gdn_d_inner * c.gdn_n_heads


@pytest.mark.skipif(importlib.util.find_spec("hymo_mini.mla") is None,
                    reason="hymo_mini.mla not written yet")
def test_mla_projection_flops_against_the_real_attention():
    """Every weight matrix of the attention is used once per token: 2 FLOPs per weight,
    and the FLOP counter's matrix products over the real module agree."""
    from hymo_mini.mla import MultiHeadLatentAttention

    attn = MultiHeadLatentAttention(MINI)
    weights = sum(m.weight.numel() for m in attn.modules() if isinstance(m, nn.Linear))
    assert mla_cost(MINI, 1).projection_flops == 2 * weights
    T = 5
    flops = counted(lambda: attn(torch.randn(1, T, MINI.dim)))
    assert flops["mm"] == mla_cost(MINI, T).projection_flops


def test_hybrid_layer_counts_and_stack():
    assert hybrid_layer_counts(32, 3) == (8, 24)
    assert hybrid_layer_counts(32, 0) == (32, 0)
    assert hybrid_layer_counts(32, 31) == (1, 31)
    assert hybrid_layer_counts(32, 7) == (4, 28)
    with pytest.raises(ValueError, match="gdn_per_mla"):
        hybrid_layer_counts(32, -1)
    T = 2048
    hybrid, all_mla = stack_cost(PROD, T), stack_cost(PROD, T, 0)
    mla, gdn = mla_cost(PROD, T), gdn_cost(PROD, T)
    assert hybrid.flops == 8 * mla.flops + 24 * gdn.flops
    assert hybrid.cache_bytes == 8 * mla.cache_bytes + 24 * gdn.cache_bytes
    assert all_mla.flops == 32 * mla.flops
    all_gdn = stack_cost(replace(PROD, mla_every=0), T)
    assert all_gdn.flops == 32 * gdn.flops
    assert isinstance(hybrid, LayerCost) and hybrid.flops_per_token == hybrid.flops / T


def test_hybrid_saving_grows_with_T():
    """At 4K tokens the 3:1 stack costs ~80% of an all-MLA stack, not the document's ~40%:
    GDN projections are not free. The saving approaches 4x only for long sequences."""
    ratios = [stack_cost(PROD, T).flops / stack_cost(PROD, T, 0).flops
              for T in (1024, 4096, 32_768, 1 << 20)]
    assert ratios == sorted(ratios, reverse=True)
    assert 0.75 < ratios[1] < 0.85
    assert 0.25 < ratios[-1] < 0.26


def test_bad_arguments():
    with pytest.raises(ValueError, match="cache_dtype_bytes"):
        mha_cost(PROD, 8, cache_dtype_bytes=0)
    with pytest.raises(ValueError, match="state_dtype_bytes"):
        gdn_cost(PROD, 8, state_dtype_bytes=-4)
    with pytest.raises(ValueError, match="T"):
        gdn_cost(PROD, 2.5)


def test_moe_cost_matches_the_flop_counter_when_nothing_is_dropped():
    from hymo_mini.moe import DeepSeekMoE

    config = replace(MINI, capacity_factor=float(MINI.n_routed_experts))  # nothing dropped
    moe = DeepSeekMoE(config)
    x = torch.randn(2, 7, config.dim)
    with FlopCounterMode(display=False) as counter:
        moe(x)
    assert moe.last_dropped == 0
    cost = moe_cost(config, 14)
    assert counter.get_total_flops() == cost.flops
    assert cost.mixing_flops == 0 and cost.cache_bytes == 0
    with pytest.raises(ValueError, match="T"):
        moe_cost(MINI, -1)


def test_the_whole_stack_counts_a_moe_after_every_attention_layer():
    T = 4096
    mla, gdn, mha, moe = mla_cost(PROD, T), gdn_cost(PROD, T), mha_cost(PROD, T), moe_cost(PROD, T)
    hybrid = stack_cost(PROD, T, feed_forward=True)
    assert hybrid.flops == 8 * (mla.flops + moe.flops) + 24 * gdn.flops
    assert hybrid.cache_bytes == stack_cost(PROD, T).cache_bytes  # a MoE caches nothing
    all_mla = stack_cost(PROD, T, 0, feed_forward=True)
    assert all_mla.flops == 32 * (mla.flops + moe.flops)
    all_mha = stack_cost(PROD, T, 0, attention="mha", feed_forward=True)
    assert all_mha.flops == 32 * (mha.flops + moe.flops) and all_mha.kind == "0 GDN + 32 MHA + MoE"
    assert stack_cost(PROD, T, 3, attention="mha").flops == 8 * mha.flops + 24 * gdn.flops
    # the mixers alone understate the saving: the all-MLA stack carries 32 MoE layers, the
    # hybrid 8
    mixers = stack_cost(PROD, T).flops / stack_cost(PROD, T, 0).flops
    assert hybrid.flops / all_mla.flops < mixers
    with pytest.raises(ValueError, match="attention"):
        stack_cost(PROD, T, attention="gqa")
    with pytest.raises(ValueError, match="feed_forward"):
        stack_cost(PROD, T, feed_forward="yes")


def test_the_whole_stack_follows_the_layout():
    """All-GDN has no attention layer, hence no MoE; the config's own layout and the
    equivalent gdn_per_mla agree, wherever the MLA layer sits in its group."""
    T = 256
    all_gdn = replace(PROD, mla_every=0)
    assert stack_cost(all_gdn, T, feed_forward=True).flops == 32 * gdn_cost(PROD, T).flops
    for position in ("first", "last"):
        config = replace(PROD, mla_position=position)
        assert (stack_cost(config, T, feed_forward=True).flops
                == stack_cost(config, T, 3, feed_forward=True).flops)
