"""GDN: the reference recurrence against an independent loop, the dispatcher's errors, and
the block (causality in both residual modes, gradients to every parameter)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from hymo_mini.blocks import GDNBlock
from hymo_mini.config import load_config
from hymo_mini.ops import RULES, check_inputs, gated_delta_rule, gated_linear_attention, naive_gla


def rel_err(a: torch.Tensor, ref: torch.Tensor) -> float:
    return ((a - ref).double().pow(2).mean().sqrt() / ref.double().pow(2).mean().sqrt()).item()


def make_inputs(B=2, T=13, H=3, S=5, D=7, dtype=torch.float64, strong=False):
    """Awkward sizes; `strong` makes decays fast (A up to -8) to stress the gate."""
    v = torch.randn(B, T, H, D, dtype=dtype)
    b = torch.randn(B, T, H, S, dtype=dtype) / S**0.5
    c = torch.randn(B, T, H, S, dtype=dtype) / S**0.5
    g = torch.rand(B, T, H, dtype=dtype).clamp(0.01, 0.99)
    scale = 8.0 if strong else 1.0
    A = -scale * torch.rand(H, S, dtype=dtype) - 0.01
    return v, b, c, g, A


def double_loop(v, b, c, g, A, state0):
    """One (batch, head) at a time, one step at a time, in fp64: written independently of
    hymo_mini.gdn so that a shared mistake cannot hide."""
    B, T, H, D = v.shape
    S = b.shape[-1]
    out = torch.zeros(B, T, H, D, dtype=torch.float64)
    final = torch.zeros(B, H, S, D, dtype=torch.float64)
    for i in range(B):
        for h in range(H):
            state = state0[i, h].double().clone()  # (S, D)
            for t in range(T):
                for s in range(S):
                    decay = torch.exp(g[i, t, h].double() * A[h, s].double())
                    state[s] = decay * state[s] + b[i, t, h, s].double() * v[i, t, h].double()
                out[i, t, h] = c[i, t, h].double() @ state  # sum_s c_s H[s, :]
            final[i, h] = state
    return out, final


@pytest.mark.parametrize("strong", [False, True])
def test_reference_against_double_loop(strong):
    v, b, c, g, A = make_inputs(strong=strong)
    state0 = torch.randn(2, 3, 5, 7, dtype=torch.float64)
    o, final = naive_gla(v, b, c, g, A, initial_state=state0)
    o_loop, final_loop = double_loop(v, b, c, g, A, state0)
    assert o.dtype == torch.float64 and final.shape == (2, 3, 5, 7)
    assert rel_err(o, o_loop) < 1e-12
    assert rel_err(final, final_loop) < 1e-12


def test_reference_zero_state_and_fp32():
    v, b, c, g, A = make_inputs(B=1, T=9, H=2, S=4, D=3, dtype=torch.float32)
    o, final = naive_gla(v, b, c, g, A)
    o_loop, final_loop = double_loop(v, b, c, g, A, torch.zeros(1, 2, 4, 3))
    assert o.dtype == torch.float32 and final.dtype == torch.float32
    assert rel_err(o, o_loop) < 1e-6
    assert rel_err(final, final_loop) < 1e-6


def test_initial_state_chains_two_halves():
    v, b, c, g, A = make_inputs(T=12)
    o_full, s_full = naive_gla(v, b, c, g, A)
    o1, s1 = naive_gla(v[:, :5], b[:, :5], c[:, :5], g[:, :5], A)
    o2, s2 = naive_gla(v[:, 5:], b[:, 5:], c[:, 5:], g[:, 5:], A, initial_state=s1)
    assert rel_err(torch.cat([o1, o2], dim=1), o_full) < 1e-12
    assert rel_err(s2, s_full) < 1e-12


def test_dispatcher_eager_matches_reference():
    v, b, c, g, A = make_inputs(dtype=torch.float32)
    o_ref, s_ref = naive_gla(v, b, c, g, A)
    o, s = gated_linear_attention(v, b, c, g, A, backend="naive")
    assert s is None and torch.equal(o, o_ref)
    o, s = gated_linear_attention(v, b, c, g, A, backend="naive", output_final_state=True)
    assert torch.equal(s, s_ref)
    o_auto, _ = gated_linear_attention(v, b, c, g, A)  # whatever "auto" picks on CPU
    assert rel_err(o_auto, o_ref) < 1e-4


def test_dispatcher_shape_errors():
    v, b, c, g, A = make_inputs(dtype=torch.float32)
    with pytest.raises(ValueError, match="v must have rank 4"):
        gated_linear_attention(v[0], b, c, g, A)
    with pytest.raises(ValueError, match="g must have rank 3"):
        gated_linear_attention(v, b, c, g[..., None], A)
    with pytest.raises(ValueError, match="A must have rank 2"):
        gated_linear_attention(v, b, c, g, A[0])
    with pytest.raises(ValueError, match="c must have shape"):
        gated_linear_attention(v, b, c[:, :-1], g, A)
    with pytest.raises(ValueError, match="g must have shape"):
        gated_linear_attention(v, b, c, g[:, :, :2], A)
    with pytest.raises(ValueError, match="A must have shape"):
        gated_linear_attention(v, b, c, g, A[:, :3])
    with pytest.raises(ValueError, match="initial_state must have shape"):
        gated_linear_attention(v, b, c, g, A, initial_state=torch.zeros(2, 3, 7, 5))
    with pytest.raises(TypeError, match="b must be a torch.Tensor"):
        gated_linear_attention(v, b.numpy(), c, g, A)


def test_dispatcher_dtype_device_and_value_errors():
    v, b, c, g, A = make_inputs(dtype=torch.float32)
    with pytest.raises(TypeError, match="v has dtype torch.int64"):
        gated_linear_attention(v.to(torch.int64), b, c, g, A)
    with pytest.raises(ValueError, match="one device"):
        check_inputs(v, b, c.to("meta"), g, A)
    g_bad = g.clone()
    g_bad[0, 3, 1] = float("nan")
    with pytest.raises(ValueError, match="finite"):
        gated_linear_attention(v, b, c, g_bad, A)
    A_bad = A.clone()
    A_bad[0, 0] = -float("inf")
    with pytest.raises(ValueError, match="finite"):
        gated_linear_attention(v, b, c, g, A_bad)
    with pytest.raises(ValueError, match="backend"):
        gated_linear_attention(v, b, c, g, A, backend="cuda")


def test_a_backend_the_rule_lacks_is_named():
    """The delta rule has no recurrent kernel: an error names its backends, nothing is
    silently replaced."""
    v, b, c, g, A = make_inputs(dtype=torch.float32)
    beta = torch.rand_like(g)
    with pytest.raises(ValueError, match="the 'delta' rule has the backends 'auto', 'naive', "
                       "'chunk_torch', 'chunk_triton'"):
        gated_delta_rule(v, b, c, g, A, beta, backend="recurrent_triton")
    with pytest.raises(ValueError, match="gdn_backend"):
        dataclasses.replace(load_config("hymo_mini").model, gdn_rule="delta",
                            gdn_backend="recurrent_triton")


def test_every_path_returns_its_inputs_dtype():
    v, b, c, g, A = (t.to(torch.bfloat16) for t in make_inputs(dtype=torch.float32))
    for backend in ("naive", "chunk_torch"):
        o, state = gated_linear_attention(v, b, c, g, A, backend=backend, output_final_state=True)
        assert o.dtype == torch.bfloat16 and state.dtype == torch.float32, backend
    o, _ = gated_delta_rule(v, b, c, g, A, torch.rand_like(g), backend="naive")
    assert o.dtype == torch.bfloat16


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-without-interpreter path")
@pytest.mark.parametrize("backend", ["recurrent_triton", "chunk_triton"])
def test_triton_backend_without_gpu_or_interpreter(monkeypatch, backend):
    assert backend in RULES["gla"]
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    v, b, c, g, A = make_inputs(dtype=torch.float32)
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        gated_linear_attention(v, b, c, g, A, backend=backend)


# ---- the block ----------------------------------------------------------------------
def mini_model_config(**overrides):
    return dataclasses.replace(load_config("hymo_mini").model, gdn_backend="naive", **overrides)


@pytest.mark.parametrize("residual", ["identity", "document"])
@pytest.mark.parametrize("use_rope", [True, False])
def test_block_is_causal(residual, use_rope):
    config = mini_model_config(gdn_residual=residual)
    block = GDNBlock(config, layer_idx=1, use_rope=use_rope)
    x = torch.randn(2, 24, config.dim)
    y = block(x)
    assert y.shape == x.shape and torch.isfinite(y).all()
    t = 10
    x2 = x.clone()
    x2[:, t + 1:] = torch.randn_like(x2[:, t + 1:])
    y2 = block(x2)
    assert torch.allclose(y2[:, :t + 1], y[:, :t + 1], atol=1e-6)
    assert not torch.allclose(y2[:, t + 1:], y[:, t + 1:], atol=1e-3)  # later ones do change


def test_block_residual_modes():
    torch.manual_seed(0)
    identity = GDNBlock(mini_model_config(gdn_residual="identity"))
    torch.manual_seed(0)
    document = GDNBlock(mini_model_config(gdn_residual="document"))
    assert identity.norm is not None and document.norm is None
    x = torch.randn(1, 6, identity.mixer.config.dim)
    # the documented block returns out_proj(o) + skip_proj(x); with the norm's weight at 1 and
    # x already unit-RMS, identity mode must return exactly x + that
    x = x / x.pow(2).mean(-1, keepdim=True).add(identity.mixer.config.norm_eps).sqrt()
    assert torch.allclose(identity(x), x + document(x), atol=1e-5)


@pytest.mark.parametrize("residual", ["identity", "document"])
def test_block_every_parameter_gets_a_gradient(residual):
    config = mini_model_config(gdn_residual=residual)
    block = GDNBlock(config, layer_idx=2, use_rope=True)
    x = torch.randn(2, 16, config.dim, requires_grad=True)
    block(x).pow(2).mean().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    for name, p in block.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


def test_block_inputs_shapes():
    config = mini_model_config()
    block = GDNBlock(config)
    v, b, c, g, A, out_gate = block.mixer.gdn_inputs(torch.randn(2, 9, config.dim))
    H, S, D = config.gdn_n_heads, config.gdn_d_state, config.gdn_headdim
    assert v.shape == (2, 9, H, D) and b.shape == c.shape == (2, 9, H, S)
    assert g.shape == out_gate.shape == (2, 9, H) and A.shape == (H, S)
    assert (g > 0).all() and (g < 1).all() and (A < 0).all()
