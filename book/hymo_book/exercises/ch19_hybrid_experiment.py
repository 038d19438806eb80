"""Exercises of chapter 19 (the hybrid experiment): which layers of a stack are MLA, and the
accuracy of a model's answers at the query positions only."""

from __future__ import annotations

import torch

from hymo_book.exercises import Case, Exercise
from hymo_mini.config import load_config, replace
from hymo_mini.mqar import IGNORE


# ---- mla_layers(n_layers, mla_every, position) -> tuple of layer indices -------------------
def _mla_layers_oracle(n_layers, mla_every, position):
    """The library's own layout: ModelConfig.mla_positions."""
    model = load_config("hymo_mini").model
    return replace(model, n_layers=n_layers, mla_every=mla_every,
                   mla_position=position).mla_positions


def _mla_layers_cases():
    gen = torch.Generator().manual_seed(19)
    cases = [Case("the default, 32 layers", (32, 4, "last")),
             Case("the text's layout, 32 layers", (32, 4, "first")),
             Case("one group of four, last", (4, 4, "last")),
             Case("6 layers, every 4, last", (6, 4, "last")),
             Case("6 layers, every 4, first", (6, 4, "first")),
             Case("all GDN (mla_every 0)", (5, 0, "last")),
             Case("all MLA (mla_every 1)", (3, 1, "first")),
             Case("one layer, every 4, last", (1, 4, "last")),
             Case("every 3, last", (7, 3, "last"))]
    for i in range(4):
        n_layers = int(torch.randint(1, 40, (1,), generator=gen))
        every = int(torch.randint(0, 9, (1,), generator=gen))
        position = ("first", "last")[i % 2]
        cases.append(Case(f"random {i}: {n_layers} layers, every {every}, {position}",
                          (n_layers, every, position)))
    return cases


def _compare_layers(got, expected, case):
    try:
        got = tuple(int(i) for i in got)
    except TypeError:
        return f"case {case.name}: expected a tuple of layer indices, got {type(got).__name__}"
    if got != tuple(expected):
        return f"case {case.name}: got layers {got}, expected {tuple(expected)}"
    return None


def _counted_from_the_top(n_layers, mla_every, position):
    """"last" read as: the top layer and every mla_every-th below it."""
    if mla_every == 0:
        return ()
    if position == "first":
        return tuple(range(0, n_layers, mla_every))
    return tuple(sorted(range(n_layers - 1, -1, -mla_every)))


def _no_all_gdn(n_layers, mla_every, position):
    """Forgets that mla_every = 0 means no MLA layer at all."""
    start = 0 if position == "first" else mla_every - 1
    return tuple(range(start, n_layers, mla_every))


def _ignores_position(n_layers, mla_every, position):
    """The text's layout whatever ``position`` says."""
    return () if mla_every == 0 else tuple(range(0, n_layers, mla_every))


# ---- recall_accuracy(logits, targets) -> float ---------------------------------------------
def _recall_accuracy_oracle(logits, targets):
    asked = targets != IGNORE  # (b, t) the query positions
    return float((logits.argmax(-1)[asked] == targets[asked]).double().mean())


def _recall_cases():
    gen = torch.Generator().manual_seed(7)

    def batch(b, t, v, queries_per_row, scale=1.0):
        logits = torch.randn(b, t, v, generator=gen, dtype=torch.float64) * scale
        if scale == 0.0:
            logits[..., 0] = 1.0  # the same answer, value 0, everywhere (no ties)
        targets = torch.full((b, t), IGNORE, dtype=torch.long)
        for row, q in enumerate(queries_per_row):
            where = torch.randperm(t, generator=gen)[:q]
            targets[row, where] = torch.randint(v, (q,), generator=gen)
        # make about half of the queries right, so that the score is not near 0 or 1
        right = (targets != IGNORE) & (torch.rand(b, t, generator=gen) < 0.5)
        rows, cols = right.nonzero(as_tuple=True)
        top = logits[rows, cols].abs().max(-1).values * 2 + 1  # above every logit: no tie
        logits[rows, cols, targets[rows, cols]] = top
        return logits, targets

    return [
        Case("one query", batch(1, 5, 4, [1])),
        Case("random (4, 16, 10), 3 queries a row", batch(4, 16, 10, [3] * 4)),
        Case("rows with different numbers of queries", batch(3, 12, 6, [1, 6, 2])),
        Case("every position a query", batch(2, 6, 5, [6, 6])),
        Case("the same answer everywhere", batch(2, 8, 3, [4, 1], scale=0.0)),
        Case("large logits", batch(3, 10, 7, [2, 5, 3], scale=1e30)),
        Case("a wide vocabulary", batch(2, 9, 200, [4, 3])),
    ]


def _compare_float(got, expected, case):
    try:
        got = float(got)
    except (TypeError, ValueError, RuntimeError):
        return f"case {case.name}: expected one number, got {type(got).__name__}"
    if abs(got - expected) > 1e-9:
        return f"case {case.name}: got {got:.6g}, expected {expected:.6g}"
    return None


def _every_position(logits, targets):
    """Scores every position, counting the non-queries as wrong."""
    return float((logits.argmax(-1) == targets).double().mean())


def _mean_of_rows(logits, targets):
    """Averages each row's accuracy: rows with fewer queries weigh as much as full ones."""
    asked = targets != IGNORE
    right = (logits.argmax(-1) == targets) & asked
    return float((right.sum(-1).double() / asked.sum(-1)).mean())


def _probability_of_the_answer(logits, targets):
    """The mean softmax probability of the right value: a likelihood, not an accuracy."""
    asked = targets != IGNORE
    probs = logits.softmax(-1)[asked]  # (queries, v)
    return float(probs.gather(-1, targets[asked][:, None]).mean())


EXERCISES = [
    Exercise(
        name="mla_layers", chapter="19_hybrid_experiment", cases=_mla_layers_cases,
        oracle=_mla_layers_oracle, compare=_compare_layers,
        wrong=[(_counted_from_the_top, "case 6 layers, every 4, last: got layers (1, 5)"),
               (_no_all_gdn, "case all GDN (mla_every 0) raised ValueError"),
               (_ignores_position, "case the default, 32 layers: got layers (0, 4,")],
    ),
    Exercise(
        name="recall_accuracy", chapter="19_hybrid_experiment", cases=_recall_cases,
        oracle=_recall_accuracy_oracle, compare=_compare_float,
        wrong=[(_every_position, "case random (4, 16, 10), 3 queries a row: got"),
               (_mean_of_rows, "case rows with different numbers of queries: got"),
               (_probability_of_the_answer, "case one query: got")],
    ),
]
