"""Figures and small computations for the delta rule's erasure (book chapter 07).

The gated delta rule (``hymo_mini.ops.naive_gated_delta``) writes a value v under a unit
key b in two moves: it first removes what the state already holds under b, then adds the
new value there,

    H ← (I - β b bᵀ) H + β b ⊗ v        H: (S, D), b: (S,) with |b| = 1, v: (D,)

while the gated-decay rule (``hymo_mini.ops.naive_gla``) only adds, H ← H + b ⊗ v (both
with their decay left out here). b bᵀ is the projection onto the key's direction, so
I - β b bᵀ shrinks the state along b by the factor 1 - β and leaves every direction
orthogonal to b alone. :func:`erasure_step` does one write both ways for a state with one
value column (D = 1: the state is a vector in key space, and key k reads k · h), and
:func:`erasure_figure` draws it. :func:`recall_by_age` stores many (key, value) pairs one
after another and reads each back: the delta rule remembers the recent ones best, the
gated-decay rule blurs them all alike.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from hymo_mini.ops import naive_gated_delta, naive_gla

__all__ = ["erasure_step", "erasure_figure", "recall_by_age", "recall_by_age_figure"]


def _unit_key(angle_deg: float) -> torch.Tensor:
    angle = math.radians(angle_deg)
    return torch.tensor([math.cos(angle), math.sin(angle)], dtype=torch.float64)  # (2,)


def erasure_step(state=(1.0, 1.0), angle_deg: float = 30.0, value: float = -1.0,
                 beta: float = 1.0) -> dict[str, torch.Tensor | float]:
    """One write of ``value`` under the unit key at ``angle_deg`` into a 2-D state ``state``
    (S = 2, D = 1), by both rules, with no decay. Returns the key ``b``, the states
    ``before``, ``erased`` ((I - β b bᵀ) h), ``delta`` (the delta rule's result) and ``gla``
    (the gated-decay rule's, h + b v), each (2,), and what b reads from each: ``read_*``."""
    if not 0 <= beta <= 1:
        raise ValueError(f"beta must be in [0, 1] (a sigmoid's range), got {beta}")
    h = torch.as_tensor(state, dtype=torch.float64)
    if h.shape != (2,):
        raise ValueError(f"state must be two numbers (a state in a 2-D key space), got {state}")
    b = _unit_key(angle_deg)  # (2,)
    erased = h - beta * b * (b @ h)  # (I - β b bᵀ) h, (2,)
    delta = erased + beta * value * b  # (2,)
    gla = h + value * b  # (2,)
    out = {"b": b, "before": h, "erased": erased, "delta": delta, "gla": gla}
    # + 0.0 turns a rounding residue of -0.0 into 0.0 (no "-0.00" in a legend)
    out.update({f"read_{k}": round(float(b @ out[k]), 12) + 0.0
                for k in ("before", "erased", "delta", "gla")})
    return out


def erasure_figure(state=(1.0, 1.0), angle_deg: float = 30.0, value: float = -1.0,
                   beta: float = 1.0) -> Figure:
    """The write of :func:`erasure_step` drawn in the key plane: each state is an arrow
    from the origin (marker at its tip), the key's direction a line through the origin.
    The delta rule's erasure moves the state parallel to b until b reads (1 - β) of what
    it read before; the write then moves it along b again."""
    step = erasure_step(state, angle_deg, value, beta)
    b = step["b"].numpy()
    fig = Figure(figsize=(6.2, 5.2), layout="constrained")
    ax = fig.subplots()
    ax.axline((0, 0), tuple(b), color="grey", lw=1, label="direction of key b")
    h, e = step["before"].numpy(), step["erased"].numpy()
    ax.plot([h[0], e[0]], [h[1], e[1]], color="grey", lw=3, alpha=0.4,
            label="_removed part, parallel to b")
    looks = (("before", "o", "-", "#1b9e77", "state before"),
             ("erased", "s", "--", "#7570b3", "after the erasure (I - βbbᵀ)h"),
             ("delta", "^", "-.", "#d95f02", "delta rule: erase, then write"),
             ("gla", "D", ":", "#e7298a", "gated-decay rule: add only"))
    for key, marker, style, colour, text in looks:
        x, y = step[key].numpy()
        ax.plot([0, x], [0, y], marker=marker, markevery=[1], linestyle=style, color=colour,
                ms=8, label=f"{text}: b reads {step['read_' + key]:.2f}")
    ax.plot([0], [0], "k.", ms=6, label="_origin")
    ax.set_aspect("equal")
    ax.grid(True, alpha=0.3)
    ax.set_xlabel("state component along key axis 1")
    ax.set_ylabel("state component along key axis 2")
    ax.set_title(f"writing v = {value:g} under key b at {angle_deg:g}°, β = {beta:g}\n"
                 "(no decay; S = 2 key dims, D = 1 value)", fontsize=10)
    ax.legend(fontsize=8, loc="best")
    return fig


def recall_by_age(n_pairs: int = 32, S: int = 16, D: int = 16, seeds: int = 20,
                  beta: float = 1.0) -> dict[str, torch.Tensor]:
    """Store ``n_pairs`` random values under random unit keys, one pair per step (no
    decay), then read every key back from the final state. Returns, per rule ("gla",
    "delta"), the relative error |read_i - v_i| / |v_i| of pair i (written i-th), (n_pairs,),
    averaged over ``seeds`` draws; float64."""
    if n_pairs < 1 or seeds < 1:
        raise ValueError(f"n_pairs and seeds must be at least 1, got {n_pairs}, {seeds}")
    errors = {"gla": torch.zeros(n_pairs, dtype=torch.float64),
              "delta": torch.zeros(n_pairs, dtype=torch.float64)}
    one_head = lambda x: x[None, :, None]  # (n, ...) -> (1, n, 1, ...)
    no_decay = torch.zeros(1, n_pairs, 1, dtype=torch.float64)  # g = 0: nothing fades
    A = -torch.ones(1, S, dtype=torch.float64)
    strength = torch.full((1, n_pairs, 1), float(beta), dtype=torch.float64)
    for seed in range(seeds):
        gen = torch.Generator().manual_seed(seed)
        keys = F.normalize(torch.randn(n_pairs, S, generator=gen, dtype=torch.float64), dim=-1)
        values = torch.randn(n_pairs, D, generator=gen, dtype=torch.float64)  # (n, D)
        k, v = one_head(keys), one_head(values)
        states = {"gla": naive_gla(v, k, k, no_decay, A)[1],
                  "delta": naive_gated_delta(v, k, k, no_decay, A, strength)[1]}
        for rule, state in states.items():
            read = keys @ state[0, 0]  # (n, D): every key read from the final state
            errors[rule] += (read - values).norm(dim=-1) / values.norm(dim=-1) / seeds
    return errors


def recall_by_age_figure(n_pairs: int = 32, S: int = 16, D: int = 16, seeds: int = 20,
                         beta: float = 1.0) -> Figure:
    """:func:`recall_by_age` drawn: the recall error of each pair against the order in
    which it was written, for both rules."""
    errors = recall_by_age(n_pairs, S, D, seeds, beta)
    fig = Figure(figsize=(7.0, 3.8), layout="constrained")
    ax = fig.subplots()
    index = range(n_pairs)
    ax.plot(index, errors["gla"].numpy(), "o-", ms=4, color="#1b9e77",
            label="gated-decay rule (adds only)")
    ax.plot(index, errors["delta"].numpy(), "s--", ms=4, color="#d95f02",
            label=f"delta rule, β = {beta:g} (erases, then writes)")
    ax.axvline(S - 0.5, color="grey", lw=0.8, ls=":")
    ax.text(S - 0.3, 0.02, f"S = {S} keys fit", fontsize=8, color="grey",
            transform=ax.get_xaxis_transform())
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("pair index (0 = written first)")
    ax.set_ylabel("relative recall error")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{n_pairs} pairs written into one {S} × {D} state, no decay; "
                 f"mean of {seeds} draws", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig
