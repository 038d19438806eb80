"""The HyMo stack: layout, tied head, forward/backward, loss parts, MTP lengths,
determinism, causality, meta-device construction, checkpointing and input errors."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

from hymo_mini.blocks import GDNBlock, MLABlock
from hymo_mini.config import ConfigError, load_config
from hymo_mini.model import HyMo, build_hymo, softcap


def mini(**overrides):
    return dataclasses.replace(load_config("hymo_mini").model, **overrides)


def tokens_for(config, b=2, t=32, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, config.vocab_size, (b, t), generator=gen)


@pytest.mark.parametrize("position, types, nope", [
    ("last", ("gdn", "gdn", "gdn", "mla") * 2, (2, 6)),  # the default, the document's figure
    ("first", ("mla", "gdn", "gdn", "gdn") * 2, (3,)),  # its text: layer 7 has no MLA after it
])
def test_layout_follows_config(position, types, nope):
    config = mini(nope_hybrid_gdn=True, mla_position=position)
    model = HyMo(config)
    assert config.nope_gdn_positions == nope
    kinds = ["mla" if isinstance(layer, MLABlock) else "gdn" for layer in model.layers]
    assert tuple(kinds) == config.layer_types == types
    for i, layer in enumerate(model.layers):
        if isinstance(layer, GDNBlock):
            assert layer.mixer.use_rope == (i not in nope), i
            assert (layer.mixer.rope is None) == (i in nope)
        assert layer.layer_idx == i
    assert len(model.mtp.blocks) == config.mtp_depth


def test_tied_head_is_one_tensor():
    model = HyMo(mini())
    assert model.head.weight is model.embed.weight
    names = [n for n, _ in model.named_parameters()]
    assert "embed.weight" in names and "head.weight" not in names  # counted once
    assert model.head.bias is None


def test_forward_backward_reaches_every_parameter():
    config = mini()
    model = build_hymo(load_config("hymo_mini"))
    tokens = tokens_for(config, b=4, t=48)
    total, parts = model.loss(tokens)
    assert torch.isfinite(total)
    total.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, f"{name} gets no gradient"
        assert torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, f"{name} has an all-zero gradient"


def test_initial_loss_is_near_uniform():
    """With the scaled embedding, initial logits are about unit scale, so the first loss
    is close to ln(vocab) = 5.55 for the byte vocabulary."""
    config = mini()
    model = HyMo(config)
    with torch.no_grad():
        logits = model(tokens_for(config))
        _, parts = model.loss(tokens_for(config))
    assert 0.3 < logits.std().item() < 3.0
    assert abs(parts["main"].item() - math.log(config.vocab_size)) < 1.0


def test_torch_embed_init_saturates_the_softcap():
    config = mini(embed_init="torch", dim=256, n_heads=4, head_dim=16)
    scaled = HyMo(dataclasses.replace(config, embed_init="scaled"))
    plain = HyMo(config)
    assert abs(scaled.embed.weight.std().item() - 256 ** -0.5) < 0.01
    assert abs(plain.embed.weight.std().item() - 1.0) < 0.05
    with torch.no_grad():
        raw = plain.head(plain.norm(plain.forward_with_hidden(tokens_for(config))[1]))
    assert raw.std().item() > 8  # ~sqrt(dim) = 16 before the cap
    assert plain(tokens_for(config)).abs().max() <= config.logit_softcap


def test_softcap():
    x = torch.linspace(-100, 100, 201)
    y = softcap(x, 15.0)
    assert y.abs().max() <= 15.0 and torch.all(y[1:] > y[:-1])
    assert torch.allclose(softcap(torch.tensor([0.1]), 15.0), torch.tensor([0.1]), atol=1e-4)
    assert torch.equal(softcap(x, 0.0), x)
    model = HyMo(mini(logit_softcap=0.0))
    assert torch.equal(model.softcap(x), x)


def test_hidden_is_pre_norm_and_logits_use_it():
    config = mini()
    model = HyMo(config)
    tokens = tokens_for(config)
    with torch.no_grad():
        logits, hidden = model.forward_with_hidden(tokens)
        assert hidden.shape == (2, 32, config.dim) and logits.shape == (2, 32, config.vocab_size)
        expected = softcap(model.norm(hidden) @ model.embed.weight.T, config.logit_softcap)
        assert torch.allclose(logits, expected, atol=1e-5)
        assert torch.equal(model(tokens), logits)
        rms = hidden.pow(2).mean(-1).sqrt()
        assert not torch.allclose(rms, torch.ones_like(rms), atol=1e-2)  # not normed yet


def test_mtp_lengths_and_loss_parts():
    config = mini()
    model = HyMo(config)
    tokens = tokens_for(config, t=20)
    with torch.no_grad():
        logits, hidden = model.forward_with_hidden(tokens)
        states = model.mtp(hidden, tokens, model.embed)
        assert [h.shape for h in states] == [(2, 19, config.dim), (2, 18, config.dim)]
        total, parts = model.loss(tokens)
    assert set(parts) == {"main", "mtp_1", "mtp_2"}
    main = F.cross_entropy(logits[:, :-1].reshape(-1, config.vocab_size), tokens[:, 1:].reshape(-1))
    assert torch.allclose(parts["main"], main, atol=1e-5)
    # depth d, position i predicts tokens[i + d + 1]
    for d, h in enumerate(states, start=1):
        logits_d = model.logits(h)[:, :20 - d - 1]
        ce = F.cross_entropy(logits_d.reshape(-1, config.vocab_size), tokens[:, d + 1:].reshape(-1))
        assert torch.allclose(parts[f"mtp_{d}"], ce, atol=1e-5)
    expected = parts["main"] + 0.3 * parts["mtp_1"] + 0.1 * parts["mtp_2"]
    assert torch.allclose(total, expected, atol=1e-6)


def test_no_mtp():
    config = mini(mtp_depth=0, mtp_loss_weights=())
    model = HyMo(config)
    assert model.mtp is None
    total, parts = model.loss(tokens_for(config, t=8))
    assert set(parts) == {"main"} and torch.equal(total.detach(), parts["main"])


def test_same_seed_same_model():
    config = mini()
    torch.manual_seed(123)
    a = HyMo(config)
    torch.manual_seed(123)
    b = HyMo(config)
    for (name, pa), (_, pb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert torch.equal(pa, pb), name
    tokens = tokens_for(config)
    with torch.no_grad():
        assert torch.equal(a(tokens), b(tokens))
    torch.manual_seed(124)
    c = HyMo(config)
    assert not torch.equal(a.embed.weight, c.embed.weight)


def test_production_model_on_meta_allocates_nothing():
    config = load_config("hymo_750m").model
    with torch.device("meta"):
        model = HyMo(config)
    params = list(model.parameters())
    assert all(p.is_meta for p in params)
    assert all(b.is_meta for b in model.buffers())
    assert sum(p.numel() for p in params) == 1_128_087_040
    assert len(model.layers) == 32 and model.head.weight is model.embed.weight


@pytest.mark.parametrize("gdn_residual", ["identity", "document"])
def test_whole_model_is_causal(gdn_residual):
    """Changing tokens after position t leaves logits 0..t unchanged. The MoE capacity is
    raised so nothing is dropped: capacity dropping is decided over the whole batch (a
    later token's first choice is served before an earlier token's second choice), so
    with drops the future *can* change the past. The test checks nothing was dropped."""
    config = mini(gdn_residual=gdn_residual, capacity_factor=8.0)
    model = HyMo(config).eval()
    tokens = tokens_for(config, t=24)
    changed = tokens.clone()
    t = 11
    changed[:, t + 1:] = (changed[:, t + 1:] + 7) % config.vocab_size
    with torch.no_grad():
        a, b = model(tokens), model(changed)
    assert all(m.last_dropped == 0 for m in model.moe_layers())
    assert torch.allclose(a[:, :t + 1], b[:, :t + 1], atol=1e-5)
    assert not torch.allclose(a[:, t + 1:], b[:, t + 1:], atol=1e-3)
    # and one sequence does not see another
    other = tokens.clone()
    other[1] = (other[1] + 3) % config.vocab_size
    with torch.no_grad():
        assert torch.allclose(model(other)[0], a[0], atol=1e-5)


def test_gradient_checkpointing_gives_the_same_gradients():
    config = mini(capacity_factor=8.0)
    torch.manual_seed(5)
    model = HyMo(config).train()
    tokens = tokens_for(config, t=24)
    loss, _ = model.loss(tokens)
    loss.backward()
    plain = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    model.gradient_checkpointing = True
    loss2, _ = model.loss(tokens)
    loss2.backward()
    assert torch.allclose(loss, loss2, atol=1e-6)
    for name, p in model.named_parameters():
        assert torch.allclose(p.grad, plain[name], rtol=1e-4, atol=1e-6), name


def test_update_moe_biases():
    config = mini(load_ema_alpha=0.5, load_deadband=0.0)
    model = HyMo(config).train()
    moes = model.moe_layers()
    assert len(moes) == len(config.mla_positions) == 2
    model.loss(tokens_for(config, b=4, t=32))[0].backward()
    before = [m.load_ema.clone() for m in moes]
    model.update_moe_biases()
    for moe, old in zip(moes, before, strict=True):
        assert not torch.equal(moe.load_ema, old)  # the step's load was folded in
        assert moe.expert_bias.abs().sum() > 0  # no deadband: every off-uniform expert moves
        assert moe.last_counts.sum() == 4 * 31 * config.n_activated_experts  # 31 read, 1 predicted


def test_build_hymo_accepts_both_configs():
    full = load_config("hymo_mini")
    assert isinstance(build_hymo(full), HyMo)
    assert build_hymo(full.model).config == full.model
    with pytest.raises(TypeError, match="HyMoConfig or ModelConfig"):
        build_hymo({"dim": 64})
    with pytest.raises(TypeError, match="ModelConfig"):
        HyMo(full)
    with pytest.raises(ValueError, match="gdn_residual='identity'"):
        HyMo(mini(hc_mult=2, gdn_residual="document"))  # mHC wraps a residual branch
    with pytest.raises(ConfigError):
        mini(n_kv_groups=3)


def test_input_errors():
    config = mini()
    model = HyMo(config)
    good = tokens_for(config, t=8)
    with pytest.raises(TypeError, match="torch.Tensor"):
        model([[1, 2, 3]])
    with pytest.raises(ValueError, match="2-D"):
        model(good[0])
    with pytest.raises(ValueError, match="2-D"):
        model(good[..., None])
    with pytest.raises(TypeError, match="integer"):
        model(good.float())
    with pytest.raises(TypeError, match="integer"):
        model(good > 3)
    with pytest.raises(ValueError, match=r"\[0, vocab_size=256\)"):
        model(good - 1 - good.max())
    with pytest.raises(ValueError, match=r"\[0, vocab_size=256\)"):
        model(torch.full((1, 4), 256))
    with pytest.raises(ValueError, match="max_seq_len=512"):
        model(torch.zeros(1, 513, dtype=torch.long))
    with pytest.raises(ValueError, match="at least 4"):
        model.loss(good[:, :3])  # MTP depth 2 needs T >= 4 to have a target
    with pytest.raises(ValueError, match="at least 1"):
        model(good[:, :0])
    assert model(good.int()).shape == (2, 8, config.vocab_size)  # int32 is fine
