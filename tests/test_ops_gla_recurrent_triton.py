"""The recurrent Triton GDN kernel (hymo_mini.ops.gla.recurrent_triton) against naive_gla.

Forward output, final state and every gradient (v, b, c, g, A, A_log, initial_state), by
relative RMS error, on awkward sizes. On CPU the kernels run under the Triton interpreter
(conftest.py sets TRITON_INTERPRET=1), about 2 ms per step per program: shapes stay small.
"""

from __future__ import annotations

import types

import pytest
import torch
from gdn_oracle import compare_to_reference, make_leaves, rel_err

import hymo_mini.ops as ops
import hymo_mini.ops.gla.recurrent_triton as gdn_triton
from hymo_mini.ops import gated_linear_attention, naive_gla
from hymo_mini.ops.gla.recurrent_triton import recurrent_gla_triton


def kernel(v, b, c, g, A, h0, output_final_state):
    return recurrent_gla_triton(v, b, c, g, A, h0, output_final_state)


def check_against_reference(B, T, H, S, D, dtype, decay_scale, with_h0, output_final_state, tol):
    return compare_to_reference(kernel, B, T, H, S, D, dtype, decay_scale, with_h0,
                                output_final_state, tol)


CASES = {
    # name: (B, T, H, S, D, dtype, decay_scale, with_h0, output_final_state, tol)
    "T63_S12_D20": (2, 63, 2, 12, 20, torch.float32, 1.0, True, True, 2e-5),
    "T1": (2, 1, 2, 12, 20, torch.float32, 1.0, True, True, 2e-5),
    "S32_D32_strong": (1, 16, 2, 32, 32, torch.float32, 10.0, True, True, 2e-5),
    "S32_D32_weak_no_state": (2, 16, 2, 32, 32, torch.float32, 0.1, False, False, 2e-5),
    "bf16": (2, 20, 2, 12, 20, torch.bfloat16, 1.0, True, True, 1e-2),
    "fp16_strong": (1, 9, 2, 12, 20, torch.float16, 10.0, False, True, 1e-2),
}


@pytest.mark.triton
@pytest.mark.parametrize("case", list(CASES))
def test_kernel_matches_reference(case):
    check_against_reference(*CASES[case])


@pytest.mark.triton
def test_split_blocks_with_masked_tails(monkeypatch):
    """D split in blocks of 8 (20 = 8 + 8 + 4) in the forward, as on the GPU, with masked
    tail blocks; and checkpoints every 4 steps, so T=7 ends in a partial segment."""
    if gdn_triton.INTERPRET:
        configs = {name: dict(cfg) for name, cfg in gdn_triton.INTERPRET_CONFIGS.items()}
        configs["fwd"]["block"], configs["bwd"]["chunk"] = 8, 4
        monkeypatch.setattr(gdn_triton, "INTERPRET_CONFIGS", configs)
    else:
        configs = {name: {k: dict(c) for k, c in cfg.items()}
                   for name, cfg in gdn_triton.CONFIGS.items()}
        configs["fwd"][4]["block"], configs["bwd"][4]["chunk"] = 8, 4
        monkeypatch.setattr(gdn_triton, "CONFIGS", configs)
    check_against_reference(1, 7, 2, 12, 20, torch.float32, 1.0, True, True, 2e-5)


@pytest.mark.triton
def test_only_final_state_used():
    """A loss on the final state alone: the backward runs with no gradient for o."""
    v, b, c, g, A_log, h0 = make_leaves(1, 5, 2, 12, 20, torch.float32)
    A = -torch.exp(A_log)
    _, final = recurrent_gla_triton(v, b, c, g, A, h0, output_final_state=True)
    grads = torch.autograd.grad(final.square().sum(), [v, b, c, g, A_log, h0])
    ref_leaves = [t.detach().double().requires_grad_() for t in (v, b, c, g, A_log, h0)]
    _, final_ref = naive_gla(*ref_leaves[:4], -torch.exp(ref_leaves[4]), ref_leaves[5])
    grads_ref = torch.autograd.grad(final_ref.square().sum(), ref_leaves, allow_unused=True)
    assert rel_err(final, final_ref) < 2e-5
    assert grads_ref[2] is None and not grads[2].any()  # the state never reads c
    errs = [rel_err(gr, ref) for gr, ref in zip(grads, grads_ref, strict=True) if ref is not None]
    assert max(errs) < 2e-5, errs


@pytest.mark.triton
def test_backward_saves_no_state_trajectory():
    """Only inputs and one final state are kept for the backward: no (B, T, H, S, D) tensor
    (the document's design saves B·T·H·S·D fp32 states)."""
    B, T, H, S, D = 1, 8, 2, 12, 20
    (v, b, c, g, A_log, h0) = make_leaves(B, T, H, S, D, torch.float32)
    saved = []

    def pack(t):
        saved.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        o, _ = recurrent_gla_triton(v, b, c, g, -torch.exp(A_log), h0, True)
    largest_input = max(v.numel(), b.numel(), h0.numel())  # 320, 192, 480
    assert saved and max(saved) <= largest_input < B * T * H * S * D, saved
    o.sum().backward()  # and the backward still runs from what was saved
    assert torch.isfinite(v.grad).all()


def test_empty_sequence_passes_the_state_through():
    (v, b, c, g, A_log, h0) = make_leaves(2, 0, 2, 3, 4, torch.float32)
    o, final = recurrent_gla_triton(v, b, c, g, -torch.exp(A_log), h0, True)
    assert o.shape == (2, 0, 2, 4)
    torch.testing.assert_close(final, h0.detach())


# ------------------------------------------------------------------------- dispatcher
@pytest.mark.triton
def test_dispatcher_triton_backend_matches_reference():
    (v, b, c, g, A_log, h0) = make_leaves(2, 6, 2, 3, 5, torch.float32)
    A = -torch.exp(A_log)
    with torch.no_grad():  # inference: the forward keeps no checkpoints
        o, final = gated_linear_attention(v, b, c, g, A, initial_state=h0, output_final_state=True,
                                    backend="recurrent_triton")
    o_ref, final_ref = naive_gla(v, b, c, g, A, h0)
    assert rel_err(o, o_ref) < 2e-5 and rel_err(final, final_ref) < 2e-5


def _fake_cuda(T: int, dtype=torch.float32, B: int = 1, H: int = 1):
    return types.SimpleNamespace(device=torch.device("cuda"), dtype=dtype, shape=(B, T, H, 1))


def test_auto_picks_a_kernel_on_cuda_tensors(monkeypatch):
    monkeypatch.setattr(ops, "_triton_installed", lambda: True)
    assert ops.auto_backend("gla", _fake_cuda(4096)) == "chunk_triton"  # the chunked kernel
    assert ops.auto_backend("gla", _fake_cuda(1)) == "recurrent_triton"  # decoding
    assert ops.auto_backend("gla", _fake_cuda(4096, torch.float64)) == "chunk_torch"  # fp32 only
    # short sequences with few (batch, head) pairs: the recurrent kernel up to T = 1024
    assert ops.auto_backend("gla", _fake_cuda(1024, H=40)) == "recurrent_triton"
    assert ops.auto_backend("gla", _fake_cuda(2048, H=40)) == "chunk_triton"
    assert ops.auto_backend("gla", _fake_cuda(1024, B=64, H=40)) == "chunk_triton"
    assert ops.auto_backend("delta", _fake_cuda(1)) == "chunk_triton"  # no recurrent kernel
    monkeypatch.setattr(ops, "_triton_installed", lambda: False)
    assert ops.auto_backend("gla", _fake_cuda(4096)) == "chunk_torch"


def test_auto_never_picks_a_kernel_on_cpu():
    assert ops.auto_backend("gla", torch.zeros(1, 1, 1, 1)) == "chunk_torch"


def test_explicit_triton_without_gpu_or_interpreter_says_how(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    (v, b, c, g, A_log) = make_leaves(1, 3, 1, 2, 2, torch.float32, with_h0=False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        gated_linear_attention(v, b, c, g, -torch.exp(A_log), backend="recurrent_triton")
    monkeypatch.setattr(gdn_triton, "INTERPRET", False)  # the kernel module checks too
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        recurrent_gla_triton(v, b, c, g, -torch.exp(A_log))


def test_unknown_backend_is_rejected():
    (v, b, c, g, A_log) = make_leaves(1, 3, 1, 2, 2, torch.float32, with_h0=False)
    with pytest.raises(ValueError, match="the 'gla' rule has the backends"):
        gated_linear_attention(v, b, c, g, -torch.exp(A_log), backend="cuda")


@pytest.mark.parametrize("bad", ["c_shape", "g_rank", "nan_g", "h0_shape", "int_v"])
def test_bad_inputs_are_named(bad):
    (v, b, c, g, A_log, h0) = make_leaves(1, 4, 2, 3, 5, torch.float32)
    v, b, c, g, h0 = (t.detach() for t in (v, b, c, g, h0))
    A = -torch.exp(A_log.detach())
    kwargs = dict(v=v, b=b, c=c, g=g, A=A, initial_state=h0)
    expected = {"c_shape": (ValueError, "c must have shape"),
                "g_rank": (ValueError, "g must have rank 3"),
                "nan_g": (ValueError, "must be finite"),
                "h0_shape": (ValueError, "initial_state must have shape"),
                "int_v": (TypeError, "v has dtype torch.int32")}[bad]
    if bad == "c_shape":
        kwargs["c"] = c[..., :2]
    elif bad == "g_rank":
        kwargs["g"] = g[..., None]
    elif bad == "nan_g":
        kwargs["g"] = g.clone().index_fill_(1, torch.tensor([2], device=g.device), float("nan"))
    elif bad == "h0_shape":
        kwargs["initial_state"] = h0[:, :1]
    else:
        kwargs["v"] = v.to(torch.int32)
    with pytest.raises(expected[0], match=expected[1]):
        recurrent_gla_triton(**kwargs)
