"""hymo_mini.launching: every function of the package that launches a Triton kernel runs
with its tensors' GPU current (Triton launches on the current device, not on its
arguments'). On the CPU the guard is a no-op, and each launching function is checked to
enter it; with two GPUs, each op on the second equals the same op on the first."""

from __future__ import annotations

import contextlib

import pytest
import torch
from test_moe_rows import routing_like

from hymo_mini import launching
from hymo_mini.moe.dispatch import combine_rows, gather_rows, row_maps

pytestmark = pytest.mark.triton
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def test_off_the_gpu_it_does_nothing():
    for t in (torch.zeros(2), None, 3.0):
        assert isinstance(launching.on_device(t), contextlib.nullcontext)


def test_the_first_tensor_argument_decides(monkeypatch):
    seen = []
    monkeypatch.setattr(launching, "on_device", lambda t: seen.append(t) or
                        contextlib.nullcontext())

    @launching.on_inputs_device
    def add(ctx, x, y, scale=1.0):
        """x + y, scaled."""
        return (x + y) * scale

    x, y = torch.ones(2), torch.full((2,), 2.0)
    assert torch.equal(add(None, x, y, scale=2.0), torch.full((2,), 6.0))
    assert seen == [x] and add.__name__ == "add" and add.__doc__ == "x + y, scaled."
    add("not a tensor", 1, 2)  # no tensor at all: the guard gets None
    assert seen[-1] is None


def _gdn_inputs(rule, B=1, T=5, H=1, S=4, D=4):
    gen = torch.Generator().manual_seed(0)
    v = torch.randn(B, T, H, D, generator=gen)
    b = torch.nn.functional.normalize(torch.randn(B, T, H, S, generator=gen), dim=-1)
    c = torch.nn.functional.normalize(torch.randn(B, T, H, S, generator=gen), dim=-1)
    g = torch.sigmoid(torch.randn(B, T, H, generator=gen))
    A = -torch.rand(H, S, generator=gen)
    extra = [torch.sigmoid(torch.randn(B, T, H, generator=gen))] if rule == "delta" else []
    return [t.to(DEVICE).requires_grad_() for t in (v, b, c, g, A, *extra)]


def _run_gdn(rule, backend, inputs):
    from hymo_mini import ops

    if rule == "gla":
        o = ops.gated_linear_attention(*inputs, backend=backend)[0]
    else:
        o = ops.gated_delta_rule(*inputs, backend=backend)[0]
    return [o, *torch.autograd.grad(o.sum(), inputs)]


def _run_gdn_forward(rule, inputs):
    """The forward alone under torch.no_grad: nothing kept for a backward."""
    from hymo_mini import ops

    with torch.no_grad():
        if rule == "gla":
            return list(ops.gated_linear_attention(*inputs, backend="chunk_triton",
                                                   output_final_state=True))
        return list(ops.gated_delta_rule(*inputs, backend="chunk_triton",
                                         output_final_state=True))


def _run_rows(inputs):
    x, y, w = inputs
    by_expert, kept, _ = (t.to(x.device) for t in routing_like(3, 2, 4, 0.0))
    maps = row_maps(by_expert, kept)
    xs = gather_rows(x, maps, x.dtype, "triton")
    out = combine_rows(y, maps, w, "triton")
    return [xs, out, *torch.autograd.grad(xs.sum() + out.sum(), inputs)]


def _run_loss(inputs):
    from hymo_mini.loss_triton import softcap_ce_rows_triton

    z, = inputs
    targets = torch.tensor([0, 3, 1], device=z.device)
    return list(softcap_ce_rows_triton(z.detach().clone(), targets, 15.0, -100, grad=True))


CASES = {  # name -> (run, inputs): every Function and function that launches a kernel
    "gla chunk": (lambda i: _run_gdn("gla", "chunk_triton", i), lambda: _gdn_inputs("gla")),
    "gla recurrent": (lambda i: _run_gdn("gla", "recurrent_triton", i),
                      lambda: _gdn_inputs("gla")),
    "delta chunk": (lambda i: _run_gdn("delta", "chunk_triton", i),
                    lambda: _gdn_inputs("delta")),
    "gla chunk, no grad": (lambda i: _run_gdn_forward("gla", i), lambda: _gdn_inputs("gla")),
    "delta chunk, no grad": (lambda i: _run_gdn_forward("delta", i),
                             lambda: _gdn_inputs("delta")),
    "moe rows": (_run_rows, lambda: [torch.randn(3, 8, device=DEVICE).requires_grad_(),
                                     torch.randn(6, 8, device=DEVICE).requires_grad_(),
                                     torch.rand(3, 2, device=DEVICE).requires_grad_()]),
    "softcap loss": (_run_loss, lambda: [torch.randn(3, 5, device=DEVICE)]),
}
# the launching functions each case passes through, forward and backward
GUARDED = {"gla chunk": 2, "gla recurrent": 2, "delta chunk": 2, "gla chunk, no grad": 1,
           "delta chunk, no grad": 1, "moe rows": 4, "softcap loss": 1}


@pytest.mark.parametrize("name", list(CASES))
def test_every_launch_enters_the_guard(monkeypatch, name):
    """Each case's forward and backward pass through on_device with one of its tensors."""
    seen = []
    real = launching.on_device
    monkeypatch.setattr(launching, "on_device", lambda t: seen.append(t) or real(t))
    run, inputs = CASES[name]
    run(inputs())
    assert len(seen) == GUARDED[name], [type(t) for t in seen]
    assert all(isinstance(t, torch.Tensor) and t.device.type == DEVICE for t in seen)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
@pytest.mark.parametrize("name", list(CASES))
def test_a_second_gpu_gives_what_the_first_does(name):
    """With cuda:0 current, each case on cuda:1 equals the same case on cuda:0: its kernels
    ran on its tensors' GPU, ordered with the work around them."""
    run, inputs = CASES[name]
    with torch.cuda.device(0):
        base = inputs()
        first = run(base)
        second = run([t.detach().to("cuda:1").requires_grad_(t.requires_grad) for t in base])
    for a, b in zip(first, second, strict=True):
        assert b.device == torch.device("cuda:1")
        torch.testing.assert_close(b.cpu(), a.cpu(), rtol=1e-5, atol=1e-5)


def test_host_arithmetic_matches_tritons():
    """cdiv and next_power_of_2, the launchers' plain-int arithmetic, give triton's answers."""
    import triton

    from hymo_mini.launching import cdiv, next_power_of_2

    for n in range(1, 3000):
        assert next_power_of_2(n) == triton.next_power_of_2(n)
        for d in (1, 2, 3, 16, 64, 100):
            assert cdiv(n, d) == triton.cdiv(n, d)
    assert cdiv(0, 16) == 0
