"""The harness the fast gated delta paths are tested with: random leaves (unit keys, a
decay scaled as asked, β in a chosen range), one loss through the outputs and the final
state, every gradient, and relative RMS errors against the plain loop
``naive_gated_delta`` run in fp64 on the same (already rounded) values.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from gdn_oracle import rel_err

from hymo_mini.ops import naive_gated_delta

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
NAMES = ("v", "b", "c", "g", "A", "beta", "h0")
GATE_GRADS = ("dg", "dA", "dbeta")
BETA_RANGES = {"mid": (0.05, 0.95), "near0": (1e-4, 1e-2), "near1": (0.99, 0.9999)}


def make_leaves(B, T, H, S, D, dtype, decay_scale=1.0, beta="mid", with_h0=True,
                device=DEVICE, keys="random"):
    """Leaves [v, b, c, g, A, beta, h0 or None]. b, c unit vectors (keys="aligned": every
    key of a head one direction, slightly jittered, the hardest case for the in-chunk
    solve); A = -(rates 1..H, jittered per state dim) * decay_scale, as the GDN block
    initialises it."""
    lo, hi = BETA_RANGES[beta]
    b = torch.randn(B, T, H, S)
    if keys == "aligned":
        b = torch.randn(1, 1, H, S) + 0.05 * b
    leaves = [
        torch.randn(B, T, H, D),
        F.normalize(b, dim=-1),
        F.normalize(torch.randn(B, T, H, S), dim=-1),
        torch.rand(B, T, H).clamp(0.02, 0.98),
        -torch.exp(torch.log(torch.arange(1, H + 1.0))[:, None] + 0.3 * torch.randn(H, S))
        * decay_scale,
        lo + (hi - lo) * torch.rand(B, T, H),
        torch.randn(B, H, S, D) if with_h0 else None,
    ]
    return [t.to(device, dtype).requires_grad_() if t is not None else None for t in leaves]


def run(fn, leaves, do, dht, output_final_state=True):
    """Forward, loss = <o, do> (+ <final, dht>), backward: o, final and every gradient.
    ``fn(v, b, c, g, A, beta, h0, output_final_state) -> (o, final)``."""
    o, final = fn(*leaves, output_final_state)
    loss = (o.double() * do).sum()
    if output_final_state:
        loss = loss + (final.double() * dht).sum()
    loss.backward()
    return o, final, {n: t.grad for n, t in zip(NAMES, leaves, strict=True) if t is not None}


def reference(v, b, c, g, A, beta, h0, output_final_state=True):
    return naive_gated_delta(v, b, c, g, A, beta, h0)


def compare_to_naive(fn, B, T, H, S, D, dtype, tol, *, decay_scale=1.0, beta="mid",
                     with_h0=True, output_final_state=True, gate_tol=None, device=DEVICE,
                     keys="random"):
    """o, the final state and all gradients of ``fn`` against the fp64 loop; asserts every
    relative error is below ``tol`` (``gate_tol`` for dg, dA, dbeta) and returns them."""
    gate_tol = tol if gate_tol is None else gate_tol
    leaves = make_leaves(B, T, H, S, D, dtype, decay_scale, beta, with_h0, device, keys)
    do = torch.randn(B, T, H, D, dtype=torch.float64, device=device)
    dht = torch.randn(B, H, S, D, dtype=torch.float64, device=device)
    o, final, grads = run(fn, leaves, do, dht, output_final_state)
    ref_leaves = [t.detach().double().requires_grad_() if t is not None else None
                  for t in leaves]
    o_ref, final_ref, grads_ref = run(reference, ref_leaves, do, dht, output_final_state)
    assert o.dtype == dtype and o.shape == (B, T, H, D)
    errors = {"o": rel_err(o, o_ref)}
    if output_final_state:
        assert final.shape == (B, H, S, D)
        assert final.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
        errors["final"] = rel_err(final, final_ref)
    else:
        assert final is None
    for name, grad in grads.items():
        assert grad is not None and grad.dtype == dtype, name
        errors["d" + name] = rel_err(grad, grads_ref[name])
    bad = {k: e for k, e in errors.items()  # `not <` also catches NaN
           if not e < (gate_tol if k in GATE_GRADS else tol)}
    assert not bad, f"relative RMS errors above {tol} (gates {gate_tol}): {bad} (all: {errors})"
    return errors
