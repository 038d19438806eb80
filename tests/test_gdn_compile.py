"""The compiled GDN block equals the eager one (the oracle), forward and backward, and compile
cuts it into two graphs, with the recurrence run eagerly between them. The compiler here
is "aot_eager" (traced and partitioned like Inductor's input, but no code generated), which
keeps the test cheap on a CPU."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.utils import counters

from hymo_mini import compiling
from hymo_mini.blocks import GDNBlock
from hymo_mini.config import ConfigError, ModelConfig, load_config, replace
from hymo_mini.model import build_hymo


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def loss_and_grads(config, tokens):
    torch.manual_seed(0)
    model = build_hymo(config)
    total, parts = model.loss(tokens)
    total.backward()
    return total.detach(), {n: p.grad for n, p in model.named_parameters()
                            if p.grad is not None}


def assert_same(got_loss, got, ref_loss, ref):
    assert rel(got_loss, ref_loss) < 1e-6
    assert got.keys() == ref.keys()
    bad = [k for k in ref if rel(got[k], ref[k]) > 1e-5]
    assert not bad, bad


@pytest.fixture
def aot_eager(monkeypatch):
    monkeypatch.setattr(compiling, "COMPILE_BACKEND", "aot_eager")
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


def test_compiled_block_equals_eager_forward_and_backward(aot_eager):
    # 3 layers: GDN with RoPE, the no-RoPE GDN layer before the MLA layer, MLA (with MoE)
    base = replace(load_config("hymo_mini").model, n_layers=3, mla_every=3, max_seq_len=64,
                   nope_hybrid_gdn=True)
    assert base.layer_types == ("gdn", "gdn", "mla") and base.nope_gdn_positions == (1,)
    tokens = torch.randint(0, 256, (2, 19))
    ref_loss, ref = loss_and_grads(replace(base, gdn_impl="eager"), tokens)
    assert counters["stats"]["unique_graphs"] == 0  # eager: nothing compiled
    got_loss, got = loss_and_grads(replace(base, gdn_impl="compiled"), tokens)
    # one break, at the recurrence: the graph before it once per kind of block (with RoPE,
    # without), the graph after it (the same code for both) once
    assert counters["stats"]["unique_graphs"] == 3
    assert_same(got_loss, got, ref_loss, ref)


@pytest.mark.parametrize("residual", ["identity", "document"])
def test_the_block_the_mixer_and_decoding_run_one_function(aot_eager, residual):
    """gdn_forward is the GDN layer's one code path: the eager block is x + mixer(norm(x))
    (or mixer(x) for the document's block), the compiled block equals it in two graphs, and
    a sequence decoded from the start in one step equals the forward."""
    config = replace(load_config("hymo_mini").model, n_layers=1, mla_every=0,
                     max_seq_len=64, gdn_residual=residual)
    torch.manual_seed(0)
    block = GDNBlock(config)
    x = torch.randn(2, 11, config.dim)
    eager = block(x)
    by_hand = x + block.mixer(block.norm(x)) if residual == "identity" else block.mixer(x)
    assert rel(eager, by_hand) < 1e-6
    block.impl = "compiled"
    assert rel(block(x), eager) < 1e-6
    assert counters["stats"]["unique_graphs"] == 2  # before the recurrence, after it
    decoded, _, _ = block.step(x)
    assert rel(decoded, eager) < 1e-5


@pytest.mark.parametrize("field, mla_every", [("gdn_impl", 0), ("mla_impl", 1)])
def test_auto_is_eager_on_cpu_and_bad_names_are_errors(field, mla_every):
    from hymo_mini.blocks import MLABlock
    config = replace(load_config("hymo_mini").model, n_layers=1, mla_every=mla_every)
    block = (GDNBlock if field == "gdn_impl" else MLABlock)(config)
    x = torch.randn(1, 3, config.dim)
    assert block.impl == "auto" and not block.compiled(x)
    block.impl = "compile"
    with pytest.raises(ValueError, match=field):
        block(x)
    with pytest.raises(ConfigError, match=f"{field}.*did you mean 'compiled'"):
        ModelConfig(**{field: "compile"})


@pytest.mark.parametrize("T", [1, 3, 17])
def test_shifted_conv_equals_the_depthwise_conv(T):
    """The compiled block's conv (d_conv shifted multiply-adds in (b, t, e) order) against
    nn.Conv1d with the eager block's padding and tail cut, T shorter and longer than the
    kernel; the gradients of the input and the weight too."""
    from hymo_mini.gdn import shifted_causal_conv
    torch.manual_seed(0)
    conv = torch.nn.Conv1d(6, 6, 4, groups=6, padding=3, bias=False).double()
    u = torch.randn(2, T, 6, dtype=torch.float64, requires_grad=True)
    ref = conv(u.transpose(1, 2))[..., :T].transpose(1, 2)
    got = shifted_causal_conv(u, conv.weight)
    assert rel(got, ref) < 1e-12
    dy = torch.randn_like(ref)
    g_ref = torch.autograd.grad(ref, (u, conv.weight), dy)
    g_got = torch.autograd.grad(got, (u, conv.weight), dy)
    assert all(rel(a, b) < 1e-12 for a, b in zip(g_got, g_ref, strict=True))


def test_compiled_mla_attention_equals_eager(aot_eager):
    """mla_impl="compiled": the MLA block up to its MoE (norms, attention with SDPA, the
    residual add, the MoE's norm) as one graph, against the eager block; MoE and GDN eager."""
    base = replace(load_config("hymo_mini").model, n_layers=2, mla_every=2, max_seq_len=64,
                   gdn_impl="eager")
    assert "mla" in base.layer_types
    tokens = torch.randint(0, 256, (2, 19))
    ref_loss, ref = loss_and_grads(replace(base, mla_impl="eager"), tokens)
    got_loss, got = loss_and_grads(replace(base, mla_impl="compiled"), tokens)
    assert counters["stats"]["unique_graphs"] == 1  # one MLA layer, one graph, no break
    assert_same(got_loss, got, ref_loss, ref)
