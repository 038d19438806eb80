"""The gated delta rule's backends, inputs, loop check and timing for benchmarks/gated_delta.py.

Every backend is a ``Backend``: ``call(v, b, c, g, A, beta) -> o`` is what the check
differentiates (A = -exp(A_log) in the graph), ``timed(inputs) -> (leaves, fn)`` what is
timed, on the backend's own leaves (fla's per-key gate computed once, outside the timing).
"""

from __future__ import annotations

import math
import sys
from collections import namedtuple
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# the hymo_mini names this script uses, in one place
from benchmarks.gdn import peak_mib, rel_err, time_ms  # noqa: E402
from hymo_mini import ops  # noqa: E402
from hymo_mini.ops import naive_gated_delta, naive_gla  # noqa: E402


def kernel_alone(rule):
    """The rule's chunked-kernel autograd Function, with no dispatch and no input check."""
    if rule == "gla":
        from hymo_mini.ops.gla.chunk_triton import ChunkGLAFunction
        return lambda v, b, c, g, A, beta: ChunkGLAFunction.apply(
            v, b, c, g, A, None, False, torch.is_grad_enabled())[0]
    from hymo_mini.ops.gated_delta.chunk_triton import ChunkGatedDeltaFunction
    return lambda v, b, c, g, A, beta: ChunkGatedDeltaFunction.apply(
        v, b, c, g, A, beta, None, False, torch.is_grad_enabled())[0]


def dispatched(rule, backend, check_values):
    if rule == "gla":
        return lambda v, b, c, g, A, beta: ops.gated_linear_attention(
            v, b, c, g, A, backend=backend, check_values=check_values)[0]
    return lambda v, b, c, g, A, beta: ops.gated_delta_rule(
        v, b, c, g, A, beta, backend=backend, check_values=check_values)[0]


def naive(rule, v, b, c, g, A, beta):
    if rule == "gla":
        return naive_gla(v, b, c, g, A)[0]
    return naive_gated_delta(v, b, c, g, A, beta)[0]


DELTA_BACKENDS = ["chunk_triton", "chunk_triton_kernel", "chunk_triton_kernel_tf32",
                  "chunk_torch", "fla_chunk_kda", "fla_chunk_gdr"]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
GRAD_NAMES = ["dv", "db", "dc", "dg", "dA_log", "dbeta"]


# ------------------------------------------------------------------------------ backends
# call(v, b, c, g, A, beta) -> o, the form the check differentiates (A = -exp(A_log));
# timed(inputs) -> (leaves, fn): what is timed, on the backend's own leaves
Backend = namedtuple("Backend", "call timed scalar_decay")


def with_A_log(call):
    """``call`` as a function of the leaves (v, b, c, g, A_log[, beta])."""
    return lambda v, b, c, g, A_log, beta=None: call(v, b, c, g, -torch.exp(A_log), beta)


def with_tf32(call):
    """``call`` with PyTorch's TF32 switch on: the delta kernel then multiplies fp32 in plain
    TF32, as fla's kernels do (it keeps the choice made at the forward for the backward)."""
    def run(*args):
        before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return call(*args)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = before
    return run


def hymo_backend(call):
    return Backend(call, lambda inputs: (inputs, with_A_log(call)), False)


def fla_kda():
    from fla.ops.kda import chunk_kda

    def call(v, b, c, g, A, beta):
        return chunk_kda(c, b, v, g.float()[..., None] * A, beta, scale=1.0)[0]

    def timed(inputs):
        v, b, c, g, A_log, beta = inputs
        gk = (g.float()[..., None] * -torch.exp(A_log)).contiguous()  # (B, T, H, K)
        return (c, b, v, gk, beta), lambda q, k, v, gk, beta: chunk_kda(
            q, k, v, gk, beta, scale=1.0)[0]
    return Backend(call, timed, False)


def fla_gdr():
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    def call(v, b, c, g, A, beta):
        return chunk_gated_delta_rule(c, b, v, g.float() * A.mean(-1), beta, scale=1.0)[0]

    def timed(inputs):
        v, b, c, g, A_log, beta = inputs
        g_head = (g.float() * -torch.exp(A_log).mean(-1)).contiguous()  # (B, T, H)
        return (c, b, v, g_head, beta), lambda q, k, v, gh, beta: chunk_gated_delta_rule(
            q, k, v, gh, beta, scale=1.0)[0]
    return Backend(call, timed, True)


def delta_backends(names, device):
    """The delta rule's backends that can run here; (name -> Backend, name -> why not)."""
    triton_ok = ops.triton_usable(device)
    found, missing = {}, {}
    for name in names:
        try:
            if name == "chunk_torch":
                found[name] = hymo_backend(dispatched("delta", "chunk_torch", False))
            elif not triton_ok:
                missing[name] = "no CUDA GPU and no Triton interpreter"
            elif name == "chunk_triton":
                found[name] = hymo_backend(dispatched("delta", "chunk_triton", False))
            elif name == "chunk_triton_kernel":
                found[name] = hymo_backend(kernel_alone("delta"))
            elif name == "chunk_triton_kernel_tf32":
                found[name] = hymo_backend(with_tf32(kernel_alone("delta")))
            elif device.type != "cuda":
                missing[name] = "fla's chunk kernels need a CUDA GPU"
            else:
                found[name] = fla_kda() if name == "fla_chunk_kda" else fla_gdr()
        except ImportError as err:
            missing[name] = f"ImportError: {err}"
    return found, missing


# ------------------------------------------------------------------------------ inputs, checks
RATES = ("weak", "model", "spread")  # make_inputs's decay rates


def make_inputs(B, T, H, S, D, dtype, device, seed=0, rates="weak"):
    """[v, b, c, g, A_log, beta] (A_log fp32, the rest in ``dtype``) and an output gradient.
    ``rates``: "weak", A_log uniform in (log 0.05, 0) per (head, key); "model", A_log =
    log(h + 1) for head h on every key, as the GDN block initialises it; "spread", the
    model's plus a jitter uniform in (-1, 1) per (head, key), so that a head's keys decay at
    rates up to e² apart. On the first two every chunk's pairs fit one product
    (``hymo_mini.ops.one_product_chunks``: a head's keys share one rate in the second), on
    the third most chunks take the levels. The other tensors are the same draws either
    way."""
    if rates not in RATES:
        raise ValueError(f"rates must be one of {RATES}, got {rates!r}")
    gen = torch.Generator().manual_seed(seed)
    v = torch.randn(B, T, H, D, generator=gen)
    b = F.normalize(torch.randn(B, T, H, S, generator=gen), dim=-1)
    c = F.normalize(torch.randn(B, T, H, S, generator=gen), dim=-1)
    g = torch.sigmoid(torch.randn(B, T, H, generator=gen))
    A_log = torch.empty(H, S).uniform_(math.log(0.05), 0.0, generator=gen)
    if rates != "weak":
        A_log = torch.log(torch.arange(1, H + 1, dtype=torch.float32))[:, None].repeat(1, S)
    if rates == "spread":  # its own generator: the draws below stay the same
        A_log += torch.empty(H, S).uniform_(-1.0, 1.0,
                                            generator=torch.Generator().manual_seed(seed + 1))
    beta = torch.sigmoid(torch.randn(B, T, H, generator=gen))
    do = torch.randn(B, T, H, D, generator=gen)
    inputs = [t.to(device, dtype) for t in (v, b, c, g)] + [A_log.to(device),
                                                            beta.to(device, dtype)]
    return inputs, do.to(device, dtype)


def cut(inputs, do, T):
    """Batch row 0 and the first T steps of every (B, T, ...) tensor; A_log whole."""
    return [t[:1, :T] if t.ndim >= 3 else t for t in inputs], do[:1, :T]


def oracle(rule, inputs, do, scalar_decay=False):
    """The loop in fp64 on these (rounded) inputs: o and the gradient of every leaf."""
    leaves = [t.detach().double().requires_grad_() for t in inputs]
    v, b, c, g, A_log, *beta = leaves
    A = -torch.exp(A_log)
    if scalar_decay:  # one decay per head, as fla's chunk_gated_delta_rule takes it
        A = A.mean(-1, keepdim=True).expand_as(A)
    o = naive(rule, v, b, c, g, A, beta[0] if beta else None)
    return o.detach(), torch.autograd.grad(o, leaves, do.double())


def check(fn, inputs, do, ref, tol, refused=None):
    """Relative RMS of o and every gradient against ``ref``; "agrees" gates the timing.
    ``refused``: a backward error seen before, recorded instead of trying again."""
    o_ref, grads_ref = ref
    leaves = [t.detach().requires_grad_() for t in inputs]
    out = {}
    try:
        o = fn(*leaves)
        out["o"] = rel_err(o, o_ref)
        out["agrees"] = out["o"] < tol  # False on NaN too
        if refused:
            out["bwd_error"] = f"not run again: {refused}"[:500]
            return out
        grads = torch.autograd.grad(o, leaves, do)
        names = GRAD_NAMES[:len(leaves)]  # the gla rule has no beta
        out.update({n: rel_err(x, r) for n, x, r in zip(names, grads, grads_ref, strict=True)})
    except Exception as err:  # a backend that fails is reported, not timed
        out["error" if "o" not in out else "bwd_error"] = f"{type(err).__name__}: {err}"[:500]
        out.setdefault("agrees", False)
    return out


def measure(fn, leaves, do, device, backward=True):
    """fwd_ms, and unless ``backward`` is False fwdbwd_ms and peak_mib, each after a warm-up
    call; {"error": ...} (with what was measured before it) if a call raises."""
    def fwd():
        with torch.no_grad():
            return fn(*leaves)
    grad_leaves = [t.detach().requires_grad_() for t in leaves]

    def fwdbwd():
        return torch.autograd.grad(fn(*grad_leaves), grad_leaves, do)
    result = {}
    try:
        fwd()
        result["fwd_ms"] = time_ms(fwd, device)
        if backward:
            fwdbwd()
            result["fwdbwd_ms"] = time_ms(fwdbwd, device)
            result["peak_mib"] = peak_mib(fwdbwd, device)
    except Exception as err:  # e.g. out of memory: reported, the run goes on
        result["error"] = f"{type(err).__name__}: {err}"[:500]
    return result
