"""hymo_book.mqar (chapter 19): the task generator, the layer-layout variants, the accuracy
at the queries, and a training smoke run."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hymo_book.mqar import (
    IGNORE,
    VARIANTS,
    MQARTask,
    mqar_accuracy,
    mqar_batch,
    run_sweep,
    variant_config,
)


# ---- the task ---------------------------------------------------------------------------
@pytest.mark.parametrize("n_pairs, seq_len", [(1, 3), (5, 23), (16, 64)])
def test_batch_structure(n_pairs, seq_len):
    task = MQARTask(n_pairs, seq_len, n_keys=20, n_values=30)
    inputs, targets = mqar_batch(task, 8, torch.Generator().manual_seed(0))
    assert inputs.shape == targets.shape == (8, seq_len)
    K = task.n_keys
    for x, y in zip(inputs.tolist(), targets.tolist(), strict=True):
        keys, values = x[0:2 * n_pairs:2], x[1:2 * n_pairs:2]
        assert all(1 <= k <= K for k in keys) and len(set(keys)) == n_pairs
        assert all(K < v <= K + task.n_values for v in values)
        assert all(t == IGNORE for t in y[:2 * n_pairs])  # no loss on the pairs
        pair = dict(zip(keys, values, strict=True))
        asked = [(x[i], y[i]) for i in range(2 * n_pairs, seq_len) if y[i] != IGNORE]
        assert sorted(k for k, _ in asked) == sorted(keys)  # every key asked once
        assert all(pair[k] == v for k, v in asked)  # target = the value after that key
        fillers = [x[i] for i in range(2 * n_pairs, seq_len) if y[i] == IGNORE]
        assert all(f == 0 for f in fillers)


def test_batches_are_seeded():
    task = MQARTask(4, 16)
    a = mqar_batch(task, 4, torch.Generator().manual_seed(1))
    b = mqar_batch(task, 4, torch.Generator().manual_seed(1))
    c = mqar_batch(task, 4, torch.Generator().manual_seed(2))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


def test_task_errors():
    with pytest.raises(ValueError, match="seq_len >= 24"):
        MQARTask(8, 20)
    with pytest.raises(ValueError, match="n_keys"):
        MQARTask(10, 64, n_keys=8)
    with pytest.raises(ValueError, match="n_pairs"):
        MQARTask(0, 8)
    with pytest.raises(ValueError, match="batch_size"):
        mqar_batch(MQARTask(2, 8), 0, torch.Generator())


# ---- the models -------------------------------------------------------------------------
def test_variant_layouts():
    layout = {name: variant_config(name, 129, 64).layer_types for name in VARIANTS}
    assert layout["GDN (gla)"] == ("gdn",) * 4 == layout["GDN (delta)"]
    assert layout["MLA"] == ("mla",) * 4
    assert layout["3:1 MLA first (gla)"] == ("mla", "gdn", "gdn", "gdn")
    assert layout["3:1 MLA last (delta)"] == ("gdn", "gdn", "gdn", "mla")
    assert variant_config("GDN (delta)", 129, 64).gdn_rule == "delta"
    c = variant_config("MLA", 129, 64)
    assert c.mtp_depth == 0 and c.vocab_size == 129
    assert c.moe_capacity(100) >= 100  # no token dropped
    with pytest.raises(ValueError, match="variant"):
        variant_config("transformer", 129, 64)


def test_sweep_smoke():
    tasks = [MQARTask(2, 12, n_keys=8, n_values=8)]
    result = run_sweep(["GDN (gla)", "MLA"], tasks, tasks, steps=3, batch_size=4,
                       n_eval=8, n_layers=2)
    assert set(result["variants"]) == {"GDN (gla)", "MLA"}
    for v in result["variants"].values():
        (n, t, acc), = v["accuracy"]
        assert (n, t) == (2, 12) and 0 <= acc <= 1
        assert v["parameters"] > 0 and len(v["loss_curve"]) == 3
    assert result["variants"]["MLA"]["layer_types"] == "AA"


def test_accuracy_counts_only_queries():
    """A model that always answers the right value scores 1; one that answers 0 scores 0."""
    task = MQARTask(3, 12, n_keys=5, n_values=5)

    class Oracle(torch.nn.Module):
        def forward(self, inputs):
            gen = torch.Generator().manual_seed(99)  # the same draw as mqar_accuracy
            _, targets = mqar_batch(task, inputs.shape[0], gen)
            return F.one_hot(targets.clamp(min=0), task.vocab_size).float()

    assert mqar_accuracy(Oracle(), task, n_sequences=4, batch_size=4, seed=99) == 1.0

    class Zero(torch.nn.Module):
        def forward(self, inputs):
            return F.one_hot(torch.zeros_like(inputs), task.vocab_size).float()

    assert mqar_accuracy(Zero(), task, n_sequences=4, batch_size=4) == 0.0

