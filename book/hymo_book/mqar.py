"""Multi-query associative recall (MQAR): does the 3:1 hybrid need its attention layers?

The document argues that GDN layers summarise cheaply and the MLA layers give "full book"
access when exact retrieval is needed, but never tests it. MQAR (Arora et al., 2023,
"Zoology") is the standard test of exactly that ability. A sequence of length T starts
with N key-value pairs, then the N keys come back in random order at random places in
the rest of the sequence (the other places hold a filler token, 0):

    k3 v3 k7 v7 k1 v1 | 0 0 k7 0 k1 0 0 0 k3 0 ...        inputs
                      |     v7   v1       v3               targets (at the queries only)

At each query the model must output the value that followed that key. A softmax
attention layer can look the pair up at any distance; a recurrent state of fixed size
(S x D per head) has to hold all N pairs at once, and its decay forgets old ones.

Experiment (``benchmarks/mqar.py`` runs it; the book's hybrid experiment shows it): models of
equal width and depth that differ only in their layer types, built from the hymo_mini
preset: all-GDN (``mla_every=0``), all-MLA (``mla_every=1``) and the 3:1 hybrid, each GDN
with the documented recurrence (``gdn_rule="gla"``) or the true gated delta rule
(``"delta"``). Every model trains on the same mixture of (N, T) and is scored on held-out
sequences: accuracy = fraction of queries whose argmax prediction is the right value.
Equal width and depth is not equal parameters: an MLA block also carries the MoE
feed-forward and a GDN block has none, so :func:`run_sweep` records each model's count.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from hymo_mini.choices import one_of
from hymo_mini.config import ModelConfig, OptimizerConfig, load_config, replace

__all__ = [
    "MQARTask",
    "mqar_batch",
    "VARIANTS",
    "variant_config",
    "train_mqar",
    "mqar_accuracy",
    "run_sweep",
]

IGNORE = -100  # cross-entropy's ignore_index: no loss where there is no query


@dataclass(frozen=True)
class MQARTask:
    """N key-value pairs in a sequence of T tokens, keys and values from disjoint ranges."""

    n_pairs: int
    seq_len: int
    n_keys: int = 64
    n_values: int = 64

    def __post_init__(self) -> None:
        for name in ("n_pairs", "seq_len", "n_keys", "n_values"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value > 0):
                raise ValueError(f"MQARTask.{name} must be a positive integer, got {value!r}")
        if self.n_pairs > self.n_keys:
            raise ValueError(f"MQARTask.n_pairs={self.n_pairs} needs as many distinct keys; "
                             f"n_keys is {self.n_keys}")
        if self.seq_len < 3 * self.n_pairs:
            raise ValueError(f"MQARTask.seq_len={self.seq_len} is too short for "
                             f"n_pairs={self.n_pairs}: the pairs take 2N tokens and the N "
                             f"queries N more, so seq_len >= {3 * self.n_pairs}")

    @property
    def vocab_size(self) -> int:
        return 1 + self.n_keys + self.n_values  # filler 0, keys 1..K, values K+1..K+V


def mqar_batch(task: MQARTask, batch_size: int, generator: torch.Generator):
    """(inputs (b, T), targets (b, T)) int64; targets are IGNORE except at the queries."""
    if not (isinstance(batch_size, int) and batch_size > 0):
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    b, N, T = batch_size, task.n_pairs, task.seq_len
    # N distinct keys per row (a random permutation's first N), values with repeats
    keys = torch.rand(b, task.n_keys, generator=generator).argsort(-1)[:, :N] + 1  # (b, N)
    values = torch.randint(task.n_values, (b, N), generator=generator) + 1 + task.n_keys
    inputs = torch.zeros(b, T, dtype=torch.long)
    inputs[:, 0:2 * N:2], inputs[:, 1:2 * N:2] = keys, values  # k v k v ...
    # each key is asked once, at a random free place after the pairs
    slots = torch.rand(b, T - 2 * N, generator=generator).argsort(-1)[:, :N] + 2 * N  # (b, N)
    order = torch.rand(b, N, generator=generator).argsort(-1)  # which pair each query asks
    targets = torch.full((b, T), IGNORE, dtype=torch.long)
    inputs.scatter_(1, slots, keys.gather(1, order))
    targets.scatter_(1, slots, values.gather(1, order))
    return inputs, targets


# ------------------------------------------------------------------------------------------
# Models
# ------------------------------------------------------------------------------------------
# name -> (layer layout, GDN rule): mla_every 0 = all GDN, 1 = all MLA, 4 = the 3:1 hybrid
# "MLA first" is the document's text layout (MLA at 0, 4, ...), "MLA last" its figure's
# (MLA at 3, 7, ...); with 4 layers each hybrid has one MLA layer and three GDN layers.
VARIANTS = {
    "GDN (gla)": dict(mla_every=0, gdn_rule="gla"),
    "GDN (delta)": dict(mla_every=0, gdn_rule="delta"),
    "MLA": dict(mla_every=1, gdn_rule="gla"),
    "3:1 MLA first (gla)": dict(mla_every=4, mla_position="first", gdn_rule="gla"),
    "3:1 MLA first (delta)": dict(mla_every=4, mla_position="first", gdn_rule="delta"),
    "3:1 MLA last (gla)": dict(mla_every=4, mla_position="last", gdn_rule="gla"),
    "3:1 MLA last (delta)": dict(mla_every=4, mla_position="last", gdn_rule="delta"),
}


def variant_config(variant: str, vocab_size: int, max_seq_len: int, *, n_layers: int = 4,
                   base: str = "hymo_mini", **model_overrides) -> ModelConfig:
    """The hymo_mini model with ``n_layers`` layers laid out as ``variant``, no MTP (the
    MQAR loss is the query positions' cross-entropy), and enough MoE capacity that no
    token is dropped (a dropped query would be a wrong answer for reasons beside recall)."""
    one_of(variant, "variant", sorted(VARIANTS))
    model = load_config(base).model
    no_drop = model.n_routed_experts / model.n_activated_experts  # capacity = n tokens
    fields = dict(vocab_size=vocab_size, max_seq_len=max_seq_len, n_layers=n_layers,
                  mtp_depth=0, mtp_loss_weights=(), capacity_factor=no_drop)
    fields.update(VARIANTS[variant])
    fields.update(model_overrides)
    return replace(model, **fields)


def _lr_scale(step: int, steps: int, warmup: int) -> float:
    """Linear warmup then cosine decay to 10%: the MQAR runs are short."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(steps - warmup, 1)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


def train_mqar(model_config: ModelConfig, tasks: list[MQARTask], *, steps: int = 600,
               batch_size: int = 64, lr: float = 3e-3, weight_decay: float = 0.1,
               seed: int = 0, device="cpu", log_every: int = 0,
               max_seconds: float | None = None):
    """Train ``HyMo(model_config)`` on batches drawn from ``tasks`` (one task per step, in
    a seeded random order). Returns (model, losses per step). ``max_seconds`` is a safety
    net for a fixed time budget: training stops early (fewer losses) once it is spent."""
    from hymo_mini.model import build_hymo
    from hymo_mini.optim import build_optimizer

    vocab = {t.vocab_size for t in tasks}
    if len(vocab) != 1 or model_config.vocab_size != vocab.pop():
        raise ValueError("every task must share the model's vocab_size "
                         f"({model_config.vocab_size})")
    if max(t.seq_len for t in tasks) > model_config.max_seq_len:
        raise ValueError("a task is longer than the model's max_seq_len")
    torch.manual_seed(seed)
    model = build_hymo(model_config).to(device)
    opt = build_optimizer(model, OptimizerConfig(lr=lr, betas=(0.9, 0.98),
                                                 weight_decay=weight_decay))
    gen = torch.Generator().manual_seed(seed)
    pick = random.Random(seed)
    losses = []
    model.train()
    start = time.perf_counter()
    for step in range(steps):
        if max_seconds is not None and time.perf_counter() - start > max_seconds:
            break
        for g in opt.param_groups:
            g["lr"] = g["initial_lr"] * _lr_scale(step, steps, warmup=max(steps // 10, 1))
        inputs, targets = mqar_batch(pick.choice(tasks), batch_size, gen)
        logits = model(inputs.to(device))  # (b, T, vocab)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.to(device).flatten(),
                               ignore_index=IGNORE)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        model.update_moe_biases()
        losses.append(loss.detach())
        if log_every and (step + 1) % log_every == 0:
            print(f"step {step + 1:5d}  loss {losses[-1].item():.3f}")
    return model, [float(x) for x in losses]


@torch.no_grad()
def mqar_accuracy(model, task: MQARTask, *, n_sequences: int = 256, batch_size: int = 64,
                  seed: int = 1234, device="cpu") -> float:
    """Fraction of queries answered with the right value (argmax), on fresh sequences."""
    was_training = model.training
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    right = total = 0
    for start in range(0, n_sequences, batch_size):
        inputs, targets = mqar_batch(task, min(batch_size, n_sequences - start), gen)
        pred = model(inputs.to(device)).argmax(-1).cpu()  # (b, T)
        asked = targets != IGNORE
        right += int((pred[asked] == targets[asked]).sum())
        total += int(asked.sum())
    model.train(was_training)
    return right / total


def run_sweep(variants: list[str], train_tasks: list[MQARTask], eval_tasks: list[MQARTask],
              *, steps: int, batch_size: int = 64, lr: float = 3e-3, n_layers: int = 4,
              seed: int = 0, device="cpu", n_eval: int = 256, verbose: bool = False,
              max_seconds: float | None = None, **model_overrides) -> dict:
    """Train each variant on ``train_tasks`` and score it on every task of ``eval_tasks``.
    Returns a JSON-ready dict (settings, and per variant: parameters, final loss, the
    accuracy of each eval task, seconds)."""
    max_len = max(t.seq_len for t in train_tasks + eval_tasks)
    vocab = train_tasks[0].vocab_size
    results = {
        "settings": {"steps": steps, "batch_size": batch_size, "lr": lr, "n_layers": n_layers,
                     "seed": seed, "n_eval_sequences": n_eval, "model_overrides": model_overrides,
                     "train_tasks": [[t.n_pairs, t.seq_len] for t in train_tasks],
                     "n_keys": train_tasks[0].n_keys, "n_values": train_tasks[0].n_values},
        "variants": {},
    }
    for name in variants:
        config = variant_config(name, vocab, max_len, n_layers=n_layers, **model_overrides)
        start = time.perf_counter()
        model, losses = train_mqar(config, train_tasks, steps=steps, batch_size=batch_size,
                                   lr=lr, seed=seed, device=device, max_seconds=max_seconds)
        accuracy = [[t.n_pairs, t.seq_len,
                     mqar_accuracy(model, t, n_sequences=n_eval, device=device)]
                    for t in eval_tasks]
        seconds = time.perf_counter() - start
        tail = losses[-max(len(losses) // 20, 1):]
        results["variants"][name] = {
            "layer_types": "".join("A" if k == "mla" else "G" for k in config.layer_types),
            "gdn_rule": config.gdn_rule,
            "parameters": sum(p.numel() for p in model.parameters()),
            "steps_done": len(losses),
            "final_loss": sum(tail) / len(tail),
            "loss_curve": losses[:: max(len(losses) // 100, 1)],
            "accuracy": accuracy,  # [n_pairs, seq_len, accuracy]
            "seconds": seconds,
        }
        if verbose:
            accs = ", ".join(f"N={n},T={t}: {a:.2f}" for n, t, a in accuracy)
            print(f"{name:20s} loss {results['variants'][name]['final_loss']:.3f}  {accs}  "
                  f"({seconds:.0f} s)", flush=True)
    return results
