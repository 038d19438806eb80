"""DeepSeekMoE: routing, capacity, balancing bias, fp32 router, against a plain loop."""

import copy
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from hymo_mini.config import ModelConfig, load_config
from hymo_mini.moe import DeepSeekMoE, SwiGLU, moe_param_counts, swiglu_param_count


@pytest.fixture
def config():
    return load_config("hymo_mini").model


def rel_err(a, b):
    return ((a - b).float().pow(2).mean().sqrt() / b.float().pow(2).mean().sqrt()).item()


def loop_reference(moe: DeepSeekMoE, x: torch.Tensor):
    """Token by token, choice by choice: the literal reading of the routing rules."""
    moe = copy.deepcopy(moe).double()
    xs = x.reshape(-1, moe.dim).double()
    n, E, k = xs.shape[0], moe.n_routed, moe.top_k
    capacity = moe.config.moe_capacity(n)
    probs = torch.softmax(xs @ moe.gate.weight.double().T, dim=-1)  # (n, e)
    chosen = [torch.topk(probs[i] + moe.expert_bias.double(), k).indices.tolist()
              for i in range(n)]
    used = [0] * E
    kept = [[False] * k for _ in range(n)]
    for slot in range(k):  # first choices before second choices
        for i in range(n):  # then token order
            e = chosen[i][slot]
            if used[e] < capacity:
                used[e] += 1
                kept[i][slot] = True
    out = torch.zeros_like(xs)
    for i in range(n):
        for slot in range(k):
            if kept[i][slot]:
                e = chosen[i][slot]
                out[i] += probs[i, e] * moe.experts[e](xs[i])
        for shared in moe.shared_experts:
            out[i] += shared(xs[i])
    return out.reshape(x.shape), torch.tensor(chosen), torch.tensor(kept)


def test_swiglu_matches_formula_and_has_no_bias():
    ffn = SwiGLU(8, 12)
    x = torch.randn(3, 8)
    ref = F.silu(x @ ffn.w1.weight.T) * (x @ ffn.w3.weight.T) @ ffn.w2.weight.T
    assert rel_err(ffn(x), ref) < 1e-6
    assert sum(p.numel() for p in ffn.parameters()) == swiglu_param_count(8, 12) == 3 * 8 * 12


def test_shapes_and_param_count(config):
    moe = DeepSeekMoE(config)
    x = torch.randn(2, 7, config.dim)
    assert moe(x).shape == (2, 7, config.dim)
    r = moe.route(x)
    n, E, k = 14, config.n_routed_experts, config.n_activated_experts
    assert r.probs.shape == (n, E) and r.indices.shape == (n, k) and r.kept.shape == (n, k)
    stored, _ = moe_param_counts(config)
    assert sum(p.numel() for p in moe.parameters()) == stored


def test_production_counts_and_capacity():
    big = ModelConfig()  # hymo_750m defaults; counted, not built
    assert moe_param_counts(big) == (105_297_920, 18_593_792)
    assert big.moe_capacity(4 * 4096) == 3072  # the document says 768


@pytest.mark.parametrize("capacity_factor", [0.3, 1.5])
def test_forward_matches_loop_with_capacity(config, capacity_factor):
    config = replace(config, capacity_factor=capacity_factor, n_routed_experts=5,
                     n_activated_experts=2, n_shared_experts=2)
    moe = DeepSeekMoE(config)
    with torch.no_grad():
        moe.gate.weight.normal_(0, 1.0)  # a decisive router so loads are uneven
        moe.expert_bias.copy_(torch.tensor([0.3, 0.0, -0.1, 0.0, 0.05]))
    x = torch.randn(3, 11, config.dim)
    y = moe(x)
    ref, chosen, kept = loop_reference(moe, x)
    r = moe.route(x)
    assert torch.equal(r.indices, chosen)
    assert torch.equal(r.kept, kept)
    assert rel_err(y, ref) < 1e-5
    counts = torch.bincount(chosen.flatten(), minlength=5)
    assert torch.equal(moe.last_counts, counts)
    dropped = int((counts - r.capacity).clamp(min=0).sum())
    assert moe.last_dropped == dropped == int((~kept).sum())
    assert moe.last_capacity == config.moe_capacity(33)
    if capacity_factor < 1:
        assert dropped > 0  # the test must exercise dropping
        assert (r.kept.sum(0) >= 0).all() and r.kept[:, 0].sum() >= r.kept[:, 1].sum()


def test_combine_weights(config):
    moe = DeepSeekMoE(replace(config, capacity_factor=0.25))
    x = torch.randn(4, 9, config.dim)
    r = moe.route(x)
    assert (~r.kept).any()
    assert (r.combine[~r.kept] == 0).all()
    assert torch.equal(r.combine[r.kept], r.probs.gather(-1, r.indices)[r.kept])
    # not renormalised: the kept weights of a token sum to less than 1
    assert (r.weights.sum(-1) < 1).all()


def test_bias_changes_choice_not_weight(config):
    moe = DeepSeekMoE(config)
    x = torch.randn(2, 6, config.dim)
    with torch.no_grad():
        moe.expert_bias[3] = 10.0
    r = moe.route(x)
    assert (r.indices[:, 0] == 3).all()
    assert torch.equal(r.weights[:, 0], r.probs[:, 3])  # the unbiased probability
    assert (r.weights[:, 0] < 0.5).all()


def test_gradients_reach_gate_and_experts(config):
    moe = DeepSeekMoE(config)
    x = torch.randn(2, 16, config.dim, requires_grad=True)
    moe(x).square().sum().backward()
    assert moe.gate.weight.grad is not None and moe.gate.weight.grad.abs().sum() > 0
    used = set(moe.route(x).indices[moe.route(x).kept].tolist())
    for e, expert in enumerate(moe.experts):
        grads = [p.grad for p in expert.parameters()]
        if e in used:
            assert all(g is not None and g.abs().sum() > 0 for g in grads), e
    for p in moe.shared_experts.parameters():
        assert p.grad.abs().sum() > 0
    assert x.grad.abs().sum() > 0
    assert not moe.expert_bias.requires_grad


def test_update_bias_direction(config):
    config = replace(config, load_ema_alpha=1.0, load_deadband=0.05, bias_update_rate=0.01)
    moe = DeepSeekMoE(config)  # 4 experts: uniform load 0.25, band (0.2375, 0.2625)
    moe.pending_counts.copy_(torch.tensor([40, 25, 35, 0]))
    moe.update_bias()
    assert torch.allclose(moe.load_ema, torch.tensor([0.40, 0.25, 0.35, 0.0]))
    assert torch.allclose(moe.expert_bias, torch.tensor([-0.01, 0.0, -0.01, 0.01]))
    assert moe.pending_counts.sum() == 0
    moe.update_bias()  # nothing seen since: no change
    assert torch.allclose(moe.expert_bias, torch.tensor([-0.01, 0.0, -0.01, 0.01]))


def test_update_bias_ema_and_counting(config):
    alpha = 0.1
    moe = DeepSeekMoE(replace(config, load_ema_alpha=alpha))
    x1, x2 = torch.randn(2, 8, config.dim), torch.randn(3, 5, config.dim)
    moe(x1)
    c1 = moe.last_counts
    moe(x2)  # two micro-batches in one step
    c2 = moe.last_counts
    moe.eval()
    moe(torch.randn(1, 4, config.dim))  # evaluation does not count
    moe.train()
    expected = (1 - alpha) * torch.full((4,), 0.25) + alpha * (c1 + c2).float() / (c1 + c2).sum()
    moe.update_bias()
    assert torch.allclose(moe.load_ema, expected)


def test_balancing_pulls_a_favoured_expert_to_its_share(config):
    config = replace(config, load_ema_alpha=0.5, bias_update_rate=0.01)
    moe = DeepSeekMoE(config)
    with torch.no_grad():
        moe.gate.weight[0, :] += 0.01  # expert 0 favoured for inputs with a positive mean
    x = torch.randn(4, 32, config.dim) + 1.0  # 128 tokens, fair share 128 * 2 / 4 = 64
    assert moe.route(x).counts[0] == 128  # every token picks expert 0
    late = []
    for step in range(40):
        moe(x)
        moe.update_bias()
        if step >= 30:
            late.append(moe.route(x).counts[0].item())
    assert moe.expert_bias[0] < 0 < moe.expert_bias[1:].min()
    assert 40 <= sum(late) / len(late) <= 90


def test_router_is_fp32_for_bf16(config):
    moe = DeepSeekMoE(config).bfloat16()
    assert moe.expert_bias.dtype == moe.load_ema.dtype == torch.float32
    x = torch.randn(2, 5, config.dim).bfloat16()
    r = moe.route(x)
    assert r.probs.dtype == torch.float32
    ref = torch.softmax(x.reshape(-1, config.dim).float() @ moe.gate.weight.float().T, -1)
    assert torch.equal(r.probs, ref)
    assert moe(x).dtype == torch.bfloat16


def test_bf16_facts_in_the_docstring():
    a, b = torch.tensor(0.1234567), torch.tensor(0.1234570)
    assert a != b  # fp32 tells them apart
    assert a.bfloat16() == b.bfloat16() == 0.12353515625
    assert torch.tensor(1 - 0.001).bfloat16() == 1.0


def test_wrong_dim_raises(config):
    moe = DeepSeekMoE(config)
    with pytest.raises(ValueError, match="dim=64"):
        moe(torch.randn(2, 3, config.dim + 1))
