"""GraphedStep: a training step of the fast path replayed as one CUDA graph equals the same
steps run eagerly (GPU only), and says plainly what it needs."""

from __future__ import annotations

import copy

import pytest
import torch

from hymo_mini.config import load_config, replace
from hymo_mini.model import build_hymo
from hymo_mini.optim import clip_and_step
from hymo_mini.train.cuda_graph import GraphedStep

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
def test_replays_equal_the_eager_steps():
    """Six steps, each on a new batch copied into the graph's input: the losses, weights,
    optimizer moments and balancing biases of the replays match the eager run."""
    config = replace(load_config("hymo_mini").model, max_seq_len=64, loss_impl="chunked",
                     moe_impl="auto", gdn_impl="eager", mla_impl="eager", swiglu_impl="eager")
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
