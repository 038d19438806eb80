"""Two demos of the hybrid experiment (chapter 19) that need no training.

:func:`state_recall` writes random key/value pairs into one fixed-size memory (the GDN
state under the documented rule or the delta rule, or attention's list of pairs) and counts
how many read back right; :func:`context_guess_accuracy` is the score of a model that only
knows which values occur in the context, the floor the MQAR figures draw. The task itself,
the models and their training are in :mod:`hymo_book.mqar`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import einsum

__all__ = ["state_recall", "context_guess_accuracy"]


def context_guess_accuracy(n_pairs: int, n_values: int, n_sequences: int = 4096,
                           seed: int = 0) -> float:
    """The score of a model that knows which values are in the context but not which key
    each belongs to: it answers with one of the distinct values present, uniformly. Values
    are drawn with repeats, so this is above 1/N when N is not small against n_values."""
    gen = torch.Generator().manual_seed(seed)
    values = torch.randint(n_values, (n_sequences, n_pairs), generator=gen).sort(-1).values
    distinct = 1 + (values[:, 1:] != values[:, :-1]).sum(-1)  # (r,) values present
    return (1.0 / distinct.double()).mean().item()


@torch.no_grad()
def state_recall(n_pairs: int, rule: str, d_state: int = 16, d_value: int = 16,
                 trials: int = 100, sharpness: float = 20.0, seed: int = 0) -> float:
    """No training: write ``n_pairs`` random unit key/value pairs into one memory, read
    every key back, and count the reads whose nearest value (by cosine) is the right one.

    rule "gla": H = sum_i k_i v_i^T (the documented recurrence, no decay);
    "delta": one pass of H += k_i (v_i - H^T k_i)^T (the delta rule, beta = 1);
    "attention": softmax(sharpness * K k) V over the stored pairs (what MLA keeps).
    The state holds d_state x d_value numbers whatever n_pairs is; attention keeps them all.
    """
    if rule not in ("gla", "delta", "attention"):
        raise ValueError(f"rule must be 'gla', 'delta' or 'attention', got {rule!r}")
    gen = torch.Generator().manual_seed(seed)
    k = F.normalize(torch.randn(trials, n_pairs, d_state, generator=gen), dim=-1)  # (r, n, s)
    v = F.normalize(torch.randn(trials, n_pairs, d_value, generator=gen), dim=-1)  # (r, n, d)
    if rule == "attention":
        read = torch.softmax(sharpness * k @ k.transpose(1, 2), dim=-1) @ v  # (r, n, d)
    else:
        H = torch.zeros(trials, d_state, d_value)  # (r, s, d): one state per trial
        for i in range(n_pairs):
            ki, vi = k[:, i], v[:, i]  # (r, s), (r, d)
            error = vi - einsum(ki, H, "r s, r s d -> r d") if rule == "delta" else vi
            H = H + einsum(ki, error, "r s, r d -> r s d")  # (r, s, d)
        read = k @ H  # (r, n, d): every key's read-out
    nearest = (F.normalize(read, dim=-1) @ v.transpose(1, 2)).argmax(-1)  # (r, n)
    return (nearest == torch.arange(n_pairs)).float().mean().item()
