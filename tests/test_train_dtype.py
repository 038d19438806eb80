"""``training.dtype: bfloat16`` (bf16 autocast over fp32 weights) trains on a CPU: forward,
backward and optimizer step, with fp32 weights, gradients and optimizer state throughout."""

from __future__ import annotations

import math

import pytest
import torch

from hymo_mini.config import load_config, replace
from hymo_mini.data import load_corpus
from hymo_mini.model import build_hymo
from hymo_mini.train import train


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("text")
    for i in range(8):
        (folder / f"f{i}.py").write_text(f"def mul_{i}(a, b):\n    return a * b\n" * 30)
    return load_corpus(folder, val_percent=25)


def bf16_config(**model):
    cfg = load_config("hymo_mini")
    training = replace(cfg.training, dtype="bfloat16", batch_size=2, seq_len=16, max_steps=2,
                       eval_every=2, eval_batches=1, log_every=1)
    return replace(cfg, model=replace(cfg.model, max_seq_len=64, **model), training=training)


def check_bf16_run(cfg, corpus):
    torch.manual_seed(cfg.run.seed)  # what train() builds from
    before = {n: p.detach().clone() for n, p in build_hymo(cfg).named_parameters()}
    result = train(cfg, corpus, progress=False)
    h = result.history
    assert h["step"] == [1, 2] and all(math.isfinite(x) for x in h["loss"] + h["val_loss"])
    params = dict(result.model.named_parameters())
    assert all(p.dtype == torch.float32 for p in params.values())  # autocast, fp32 weights
    moved = [n for n, p in params.items() if not torch.equal(p.detach(), before[n])]
    assert len(moved) > len(params) // 2  # the step updated the weights
    for state in result.optimizer.state.values():
        assert all(v.dtype == torch.float32 for v in state.values() if v.is_floating_point())


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_bf16_trains_the_all_gdn_stack(corpus, optimizer):
    cfg = bf16_config(n_layers=2, mla_every=0)
    cfg = replace(cfg, optimizer=replace(cfg.optimizer, name=optimizer))
    check_bf16_run(cfg, corpus)


def test_bf16_trains_the_tiny_hybrid(corpus):
    check_bf16_run(bf16_config(n_layers=2, mla_every=2), corpus)
