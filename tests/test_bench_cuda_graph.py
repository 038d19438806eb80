"""benchmarks/cuda_graph.py's GraphedStep: a training step of the fast path replayed as one
CUDA graph equals the same steps run eagerly (GPU only), and says plainly what it needs."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.cuda_graph import GraphedStep  # noqa: E402
from hymo_mini.config import load_config, replace  # noqa: E402
from hymo_mini.model import build_hymo  # noqa: E402
from hymo_mini.optim import clip_and_step  # noqa: E402

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU's answer")
def test_without_a_gpu_it_says_so():
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        GraphedStep(lambda: torch.zeros(()))


def _step(model, opt, tokens):
    """The benchmark's step: bf16 autocast, backward, folded clip, fused AdamW, bias update."""
    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model.loss(tokens)[0]
        loss.backward()
        clip_and_step(opt, model.parameters(), 1.0)
        opt.zero_grad(set_to_none=True)
        model.update_moe_biases()
        return loss.detach()
    return step


@cuda
@pytest.mark.parametrize("rule", ["gla", "delta"])
def test_replays_equal_the_eager_steps(rule):
    """Six steps, each on a new batch copied into the graph's input: the losses, weights,
    optimizer moments and balancing biases of the replays match the eager run, with either
    GDN rule (each on its chunked Triton kernel)."""
    config = replace(load_config("hymo_mini").model, max_seq_len=64, loss_impl="chunked",
                     moe_impl="auto", gdn_impl="eager", mla_impl="eager", swiglu_impl="eager",
                     gdn_rule=rule)
    torch.manual_seed(0)
    eager_model = build_hymo(config).cuda().train()
    graph_model = copy.deepcopy(eager_model)
    gen = torch.Generator("cuda").manual_seed(1)
    batches = [torch.randint(0, config.vocab_size, (2, 64), device="cuda", generator=gen)
               for _ in range(6)]
    runs = {}
    for name, model in (("eager", eager_model), ("graph", graph_model)):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True, capturable=True)
        tokens = batches[0].clone()  # the static input: each step copies its batch in
        step = _step(model, opt, tokens)
        if name == "graph":
            step = GraphedStep(step, warmup=2, optimizers=(opt,))
        losses = []
        for batch in batches:
            tokens.copy_(batch)
            losses.append(float(step()))
        runs[name] = (losses, model, opt)
    (eager_losses, eager_model, eager_opt), (graph_losses, graph_model, graph_opt) = (
        runs["eager"], runs["graph"])
    assert graph_losses == pytest.approx(eager_losses, rel=1e-4)
    for (name, a), b in zip(eager_model.named_parameters(), graph_model.parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=name)
        for key in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(graph_opt.state[b][key], eager_opt.state[a][key],
                                       rtol=1e-3, atol=1e-7, msg=f"{name} {key}")
    for a, b in zip(eager_model.moe_layers(), graph_model.moe_layers(), strict=True):
        torch.testing.assert_close(b.expert_bias, a.expert_bias)


@cuda
def test_bad_settings_are_named():
    model = torch.nn.Linear(4, 4).cuda()
    opt = torch.optim.AdamW(model.parameters(), fused=True)
    with pytest.raises(ValueError, match="capturable=True"):
        GraphedStep(lambda: torch.zeros(()), optimizers=(opt,))
    with pytest.raises(ValueError, match="warmup must be a whole number >= 1"):
        GraphedStep(lambda: torch.zeros(()), warmup=0)


def _recurrence_inputs(rule, dtype, seed, B=2, T=300, H=3, S=32, D=32):
    """Unit-scale inputs of one rule's recurrence on the GPU: T spans several chunks and
    ends inside one; b and c unit vectors (the delta rule needs them); A = -exp(A_log)."""
    gen = torch.Generator().manual_seed(seed)
    v = torch.randn(B, T, H, D, generator=gen)
    b = torch.nn.functional.normalize(torch.randn(B, T, H, S, generator=gen), dim=-1)
    c = torch.nn.functional.normalize(torch.randn(B, T, H, S, generator=gen), dim=-1)
    g = torch.sigmoid(torch.randn(B, T, H, generator=gen))
    A_log = torch.empty(H, S).uniform_(-3.0, 0.5, generator=gen)
    beta = torch.sigmoid(torch.randn(B, T, H, generator=gen))
    do = torch.randn(B, T, H, D, generator=gen)
    leaves = [t.to("cuda", dtype) for t in (v, b, c, g)] + [A_log.cuda()]
    if rule == "delta":
        leaves.append(beta.to("cuda", dtype))
    return leaves, do.to("cuda", dtype)


def _recurrence_step(rule, leaves, do):
    """o and every leaf's gradient, flattened into one fp32 tensor: the mixer's call of the
    rule's chunked Triton kernel (no value check), forward and backward."""
    from hymo_mini import ops

    def step():
        v, b, c, g, A_log, *beta = leaves
        run = dict(backend="chunk_triton", check_values=False)
        if rule == "gla":
            o = ops.gated_linear_attention(v, b, c, g, -torch.exp(A_log), **run)[0]
        else:
            o = ops.gated_delta_rule(v, b, c, g, -torch.exp(A_log), beta[0], **run)[0]
        grads = torch.autograd.grad(o, leaves, do)
        return torch.cat([t.detach().float().flatten() for t in (o, *grads)])
    return step


@cuda
@pytest.mark.parametrize("rule", ["gla", "delta"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_the_chunk_kernels_replay_in_a_graph(rule, dtype):
    """Each rule's chunked Triton kernels, forward and backward as the GDN mixer calls them,
    recorded once as a CUDA graph: replays on new inputs copied into the recorded ones give
    what eager calls give (nothing in them waits for the host, and the flags the one-launch
    forwards count on are zeroed inside the recording)."""
    leaves, do = _recurrence_inputs(rule, dtype, seed=0)
    leaves = [t.requires_grad_() for t in leaves]
    graphed = GraphedStep(_recurrence_step(rule, leaves, do), warmup=2)
    for seed in range(4):
        new, new_do = _recurrence_inputs(rule, dtype, seed=seed + 1)
        with torch.no_grad():
            for t, x in zip((*leaves, do), (*new, new_do), strict=True):
                t.copy_(x)
        got = graphed().clone()
        fresh = [t.requires_grad_() for t in new]
        want = _recurrence_step(rule, fresh, new_do)()
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5,
                                   msg=f"{rule} {dtype} replay {seed}")
    assert graphed.graph is not None  # the last calls were replays
