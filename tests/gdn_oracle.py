"""The harness every fast GDN path is tested with: random leaves, one loss through the
outputs and the final state, every gradient, and relative RMS errors against the plain
loop ``naive_gla`` run in fp64 on the same (already rounded) values.
"""

from __future__ import annotations

import torch

from hymo_mini.ops import naive_gla

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
GATE_GRADS = ("dg", "dA", "dA_log")
def too_far(got, ref, tol: float, gate_grads) -> dict:
    """The relative errors of a run's (o, final, grads) against the loop's that are not
    below ``tol`` (5 × ``tol`` for the gradients named in ``gate_grads``), by name: empty
    when every one agrees."""
    (o, final, grads), (o_ref, final_ref, grads_ref) = got, ref
    errors = {"o": rel_err(o, o_ref), "final": rel_err(final, final_ref)}
    errors.update({"d" + n: rel_err(x, grads_ref[n]) for n, x in grads.items()})
    return {k: e for k, e in errors.items() if not e < (5 if k in gate_grads else 1) * tol}


def rel_err(a: torch.Tensor, ref: torch.Tensor) -> float:
    """RMS(a - ref) / RMS(ref); where ref is exactly zero (dg, dA at T = 1 from a zero
    state), the absolute RMS of a."""
    a, ref = a.double(), ref.double()
    diff, scale = (a - ref).pow(2).mean().sqrt().item(), ref.pow(2).mean().sqrt().item()
    return diff / scale if scale > 0 else diff


def make_leaves(B, T, H, S, D, dtype, with_h0=True, device=DEVICE):
    """Leaves [v, b, c, g, A_log (, h0)]; A = -exp(A_log) * decay_scale is built by `run`.
    Per-head decay rates 1..H as in the block's init, jittered per state dim."""
    v = torch.randn(B, T, H, D)
    b = torch.randn(B, T, H, S) / S**0.5
    c = torch.randn(B, T, H, S) / S**0.5
    g = torch.rand(B, T, H).clamp(0.02, 0.98)
    A_log = torch.log(torch.arange(1, H + 1.0))[:, None] + 0.3 * torch.randn(H, S)
    h0 = torch.randn(B, H, S, D) if with_h0 else None
    leaves = [v, b, c, g, A_log] + ([h0] if with_h0 else [])
    return [t.to(device, dtype).requires_grad_() for t in leaves]


def run(fn, leaves, decay_scale, do, dht, output_final_state=True):
    """Forward, loss = <o, do> (+ <final, dht>), backward: outputs and every gradient.
    ``fn(v, b, c, g, A, h0, output_final_state) -> (o, final)``."""
    v, b, c, g, A_log = leaves[:5]
    h0 = leaves[5] if len(leaves) > 5 else None
    A = -torch.exp(A_log) * decay_scale
    A.retain_grad()
    o, final = fn(v, b, c, g, A, h0, output_final_state)
    loss = (o.double() * do).sum()
    if output_final_state:
        loss = loss + (final.double() * dht).sum()
    loss.backward()
    grads = {n: t.grad for n, t in zip([*"vbcg", "A_log", "h0"], leaves, strict=False)}
    grads["A"] = A.grad
    return o, final, grads


def reference(v, b, c, g, A, h0, output_final_state=True):
    return naive_gla(v, b, c, g, A, h0)


def compare_to_reference(fn, B, T, H, S, D, dtype, decay_scale, with_h0, output_final_state,
                         tol, gate_tol=None, device=DEVICE):
    """Output, final state and all gradients of ``fn`` against the fp64 loop; asserts every
    relative error is below ``tol`` (``gate_tol`` for dg, dA, dA_log) and returns them."""
    gate_tol = tol if gate_tol is None else gate_tol
    leaves = make_leaves(B, T, H, S, D, dtype, with_h0, device)
    do = torch.randn(B, T, H, D, dtype=torch.float64, device=device)
    dht = torch.randn(B, H, S, D, dtype=torch.float64, device=device)
    o, final, grads = run(fn, leaves, decay_scale, do, dht, output_final_state)
    ref_leaves = [t.detach().double().requires_grad_() for t in leaves]
    o_ref, final_ref, grads_ref = run(reference, ref_leaves, decay_scale, do, dht,
                                      output_final_state)
    assert o.dtype == dtype and o.shape == (B, T, H, D)
    errors = {"o": rel_err(o, o_ref)}
    if output_final_state:
        assert final.shape == (B, H, S, D)
        assert dtype == torch.float64 or final.dtype == torch.float32  # fp32 state

        errors["final"] = rel_err(final, final_ref)
    else:
        assert final is None
    for name, grad in grads.items():
        if grad is None and grads_ref[name] is None:
            continue
        assert grad.dtype == dtype, name
        errors["d" + name] = rel_err(grad, grads_ref[name])
    bad = {k: e for k, e in errors.items()  # `not <` also catches NaN
           if not e < (gate_tol if k in GATE_GRADS else tol)}
    assert not bad, f"relative RMS errors above {tol} (gates {gate_tol}): {bad} (all: {errors})"
    return errors


def mixed_decay(leaves, T, block=16):
    """In place of leaves[3] (g), gates tiny in blocks 0, 2, ... of ``block`` steps and 0.6
    in blocks 1, 3, ...: with rates of about 10-20, the tiny blocks' decay stays within
    2^±64 (their pairs one product) and the others' goes far past it (the levels), in one
    sequence. ``block``: the steps over which the kernel makes that choice (a chunk, or a
    stretch of chunks). Returns the leaves."""
    g = leaves[3].detach().clone()
    fits = (torch.arange(T, device=g.device) // block) % 2 == 0
    g[:, fits], g[:, ~fits] = 0.01, 0.6
    leaves[3] = g.requires_grad_()
    return leaves
