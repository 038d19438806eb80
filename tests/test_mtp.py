"""Multi-token prediction: lengths, which tokens each position sees, target alignment,
loss weights, errors."""

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hymo_mini.config import ModelConfig, load_config
from hymo_mini.ffn import SwiGLU
from hymo_mini.mtp import (
    MTPBlock,
    MultiTokenPrediction,
    alignment_table,
    mtp_loss,
    mtp_losses,
    mtp_targets,
)


@pytest.fixture
def config():
    return load_config("hymo_mini").model


def setup(config, b=2, T=10):
    mtp = MultiTokenPrediction(config)
    embed = nn.Embedding(config.vocab_size, config.dim)
    hidden = torch.randn(b, T, config.dim)
    tokens = torch.randint(0, config.vocab_size, (b, T))
    return mtp, embed, hidden, tokens


def test_lengths_and_params(config):
    mtp, embed, hidden, tokens = setup(config)
    outs = mtp(hidden, tokens, embed)
    assert [o.shape for o in outs] == [(2, 9, config.dim), (2, 8, config.dim)]
    assert isinstance(mtp.blocks[0], SwiGLU) and isinstance(mtp.blocks[0], MTPBlock)
    n = sum(p.numel() for p in mtp.parameters())
    assert n == config.mtp_depth * 3 * config.dim * config.mtp_inter_dim
    big = ModelConfig()
    assert big.mtp_depth * 3 * big.dim * big.mtp_inter_dim == 12_386_304


def test_chain_formula(config):
    mtp, embed, hidden, tokens = setup(config, T=7)
    h1, h2 = mtp(hidden, tokens, embed)
    ref1 = mtp.blocks[0](hidden[:, :6] + embed(tokens[:, 1:]))
    ref2 = mtp.blocks[1](ref1[:, :5] + embed(tokens[:, 2:]))
    assert torch.allclose(h1, ref1) and torch.allclose(h2, ref2)


def test_each_position_sees_exactly_tokens_up_to_i_plus_d(config):
    """Perturb one input at a time and record which output positions move."""
    T = 8
    mtp, embed, hidden, tokens = setup(config, b=1, T=T)
    base = mtp(hidden, tokens, embed)
    for j in range(T):
        changed_tok = tokens.clone()
        changed_tok[0, j] = (tokens[0, j] + 1) % config.vocab_size
        changed_hid = hidden.clone()
        changed_hid[0, j] += 1.0
        for out_tok, out_hid, ref, d in zip(mtp(hidden, changed_tok, embed),
                                            mtp(changed_hid, tokens, embed), base, (1, 2),
                                            strict=True):
            moved_tok = {i for i in range(T - d) if not torch.equal(out_tok[0, i], ref[0, i])}
            moved_hid = {i for i in range(T - d) if not torch.equal(out_hid[0, i], ref[0, i])}
            # token j enters position i at depth d when i + 1 <= j <= i + d
            assert moved_tok == {i for i in range(T - d) if i + 1 <= j <= i + d}, (j, d)
            assert moved_hid == ({j} if j < T - d else set()), (j, d)


def test_targets_alignment_with_position_tokens(config):
    T = 9
    tokens = torch.arange(T)[None].repeat(2, 1)  # the token at index i is i
    for d in range(3):
        n, targets = mtp_targets(tokens, d)
        assert n == T - d - 1
        assert targets[0].tolist() == [i + d + 1 for i in range(n)]
    rows = alignment_table(T, 2)
    assert len(rows) == (T - 1) + (T - 2) + (T - 3)
    for row in rows:
        assert row.target == row.position + row.depth + 1 == max(row.seen) + 1
        assert list(row.seen) == list(range(row.position + row.depth + 1))
        _, targets = mtp_targets(tokens, row.depth)
        assert targets[0, row.position] == row.target


def test_loss_alignment_and_weights(config):
    T, V = 9, config.vocab_size
    tokens = torch.randint(0, V, (2, T))
    # logits that are right exactly when position i of depth d predicts token i+d+1
    perfect = [F.one_hot(torch.cat([tokens[:, d + 1:], tokens[:, :1]], 1), V).float() * 50
               for d in (1, 2)]  # (b, T-d, V); the last position has no target
    assert mtp_loss(perfect, tokens, (0.3, 0.1)) < 1e-6
    shifted = [F.one_hot(tokens[:, d:], V).float() * 50 for d in (1, 2)]  # off by one
    assert mtp_loss(shifted, tokens, (0.3, 0.1)) > 1.0
    # the weighted sum, against a loop over positions
    logits = [torch.randn(2, T - d, V) for d in (1, 2)]
    per_depth = []
    for d, lg in zip((1, 2), logits, strict=True):
        terms = [F.cross_entropy(lg[b, i], tokens[b, i + d + 1], reduction="none")
                 for b in range(2) for i in range(T - d - 1)]
        per_depth.append(torch.stack(terms).mean())
    got = mtp_losses(logits, tokens)
    assert all(torch.allclose(g, r) for g, r in zip(got, per_depth, strict=True))
    total = mtp_loss(logits, tokens, (0.3, 0.1))
    assert torch.allclose(total, 0.3 * per_depth[0] + 0.1 * per_depth[1])
    assert torch.allclose(mtp_loss(logits, tokens, (1.0, 0.0)), per_depth[0])


def test_gradients_reach_blocks_embedding_and_hidden(config):
    mtp, embed, hidden, tokens = setup(config)
    hidden.requires_grad_(True)
    outs = mtp(hidden, tokens, embed)
    logits = [o @ embed.weight.T for o in outs]  # a tied head
    mtp_loss(logits, tokens, config.mtp_loss_weights).backward()
    for name, p in mtp.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert embed.weight.grad.abs().sum() > 0 and hidden.grad.abs().sum() > 0


def test_errors(config):
    mtp, embed, hidden, tokens = setup(config, T=2)
    with pytest.raises(ValueError, match="T=2 must exceed mtp_depth=2"):
        mtp(hidden, tokens, embed)
    with pytest.raises(ValueError, match="tokens"):
        mtp(hidden, tokens[:, :1], embed)
    with pytest.raises(TypeError, match="integer"):
        mtp(hidden, tokens.float(), embed)
    with pytest.raises(ValueError, match="at least 4 tokens"):
        mtp_targets(torch.zeros(1, 3, dtype=torch.long), 2)
    with pytest.raises(ValueError, match="one weight per depth"):
        mtp_loss([torch.randn(1, 4, 8)], torch.zeros(1, 5, dtype=torch.long), (0.3, 0.1))
    with pytest.raises(ValueError, match="depth 1"):
        mtp_losses([torch.randn(1, 5, 8)], torch.zeros(1, 5, dtype=torch.long))


def test_depth_three_variant(config):
    config = replace(config, mtp_depth=3, mtp_loss_weights=(0.3, 0.1, 0.05))
    mtp, embed, hidden, tokens = setup(config, T=6)
    assert [o.shape[1] for o in mtp(hidden, tokens, embed)] == [5, 4, 3]


def test_compiled_activation_equals_eager(config, monkeypatch):
    """swiglu_impl reaches the MTP blocks: compiled (aot_eager) against eager, forward and
    every gradient."""
    from torch._dynamo.utils import counters

    from hymo_mini import compiling

    monkeypatch.setattr(compiling, "COMPILE_BACKEND", "aot_eager")
    torch._dynamo.reset()
    counters.clear()
    results = []
    for impl in ("eager", "compiled"):
        torch.manual_seed(0)
        mtp, embed, hidden, tokens = setup(replace(config, swiglu_impl=impl))
        assert all(block.impl == impl for block in mtp.blocks)
        hidden.requires_grad_()
        loss = sum(o.square().mean() for o in mtp(hidden, tokens, embed))
        loss.backward()
        results.append([loss.detach(), hidden.grad, *(p.grad for p in mtp.parameters())])
    assert counters["stats"]["unique_graphs"] >= 1
    for got, ref in zip(results[1], results[0], strict=True):
        assert torch.allclose(got, ref, rtol=1e-5, atol=1e-7)
    torch._dynamo.reset()
