"""Exercises of chapter 19 (the hybrid experiment): one MQAR sequence laid out by hand, and
the accuracy of a model's answers at the query positions only."""

from __future__ import annotations

import torch

from hymo_book.exercises import Case, Exercise
from hymo_book.mqar import IGNORE


# ---- mqar_sequence(keys, values, order, slots, seq_len) -> (inputs, targets) ---------------
def _mqar_sequence_oracle(keys, values, order, slots, seq_len):
    """One sequence as hymo_book.mqar.mqar_batch lays it out, from given choices."""
    n = len(keys)
    inputs = torch.zeros(seq_len, dtype=torch.long)
    inputs[0:2 * n:2], inputs[1:2 * n:2] = keys, values  # k v k v ...
    targets = torch.full((seq_len,), IGNORE, dtype=torch.long)
    inputs[slots] = keys[order]  # query i asks for pair order[i], at position slots[i]
    targets[slots] = values[order]
    return inputs, targets


def _mqar_sequence_cases():
    gen = torch.Generator().manual_seed(19)
    long = torch.long

    def random_case(n, t, n_keys=16, n_values=16):
        keys = torch.randperm(n_keys, generator=gen)[:n] + 1
        values = torch.randint(n_values, (n,), generator=gen) + 1 + n_keys
        order = torch.randperm(n, generator=gen)
        slots = torch.randperm(t - 2 * n, generator=gen)[:n] + 2 * n
        return (keys, values, order, slots, t)

    return [
        Case("one pair, the shortest sequence", (torch.tensor([3]), torch.tensor([9]),
                                                 torch.tensor([0]), torch.tensor([2]), 3)),
        Case("queries in reverse order", (torch.tensor([1, 2, 3]), torch.tensor([7, 7, 8]),
                                          torch.tensor([2, 1, 0]), torch.tensor([6, 7, 8]), 9)),
        Case("queries out of order, with gaps", (torch.tensor([4, 1]), torch.tensor([6, 5]),
                                                 torch.tensor([1, 0]), torch.tensor([7, 4]), 9)),
        Case("a query at the last position", (torch.tensor([2, 5]), torch.tensor([9, 10]),
                                              torch.tensor([0, 1]), torch.tensor([9, 4]), 10)),
        Case("random: 4 pairs in 32 tokens", random_case(4, 32)),
        Case("random: 8 pairs, the shortest sequence", random_case(8, 24)),
        Case("random: 16 pairs in 128 tokens", random_case(16, 128)),
        Case("a large vocabulary", random_case(5, 40, n_keys=1000, n_values=5000)),
        Case("every value the same", (torch.tensor([1, 2, 3], dtype=long),
                                      torch.tensor([5, 5, 5], dtype=long),
                                      torch.tensor([1, 2, 0]), torch.tensor([8, 6, 7]), 10)),
    ]


def _values_first(keys, values, order, slots, seq_len):
    """The pairs written v k instead of k v."""
    inputs, targets = _mqar_sequence_oracle(values, keys, order, slots, seq_len)
    inputs[slots] = keys[order]
    targets[slots] = values[order]
    return inputs, targets


def _answers_in_pair_order(keys, values, order, slots, seq_len):
    """The query asks for pair order[i], but the target is pair i's value."""
    inputs, targets = _mqar_sequence_oracle(keys, values, order, slots, seq_len)
    targets[slots] = values
    return inputs, targets


def _zero_elsewhere(keys, values, order, slots, seq_len):
    """Targets 0 (the filler) where there is no query, instead of IGNORE."""
    inputs, targets = _mqar_sequence_oracle(keys, values, order, slots, seq_len)
    return inputs, torch.where(targets == IGNORE, torch.zeros_like(targets), targets)


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
    if abs(got - expected) > 1e-6 * max(1.0, abs(expected)):  # a float32 mean is fine
        return f"case {case.name}: got {got:.9g}, expected {expected:.9g}"
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
        name="mqar_sequence", chapter="19_hybrid_experiment", cases=_mqar_sequence_cases,
        oracle=_mqar_sequence_oracle,
        wrong=[
            (_values_first,
             "case one pair, the shortest sequence: output 0 differs at position (0,): got 9, "
             "expected 3",
             "write each pair as value, key (it is key, value)"),
            (_answers_in_pair_order,
             "case queries in reverse order: output 1 differs at position (6,): got 7, expected 8",
             "give query i the value of pair i (it asks for pair order[i])"),
            (_zero_elsewhere,
             "case one pair, the shortest sequence: output 1 differs at position (0,): got 0, "
             "expected -100",
             "fill the other targets with 0 (they are IGNORE, so the loss skips them)")],
    ),
    Exercise(
        name="recall_accuracy", chapter="19_hybrid_experiment", cases=_recall_cases,
        oracle=_recall_accuracy_oracle, compare=_compare_float,
        wrong=[
            (_every_position,
             "case random (4, 16, 10), 3 queries a row: got 0.078125, expected 0.416666667",
             "score every position (only the query positions count)"),
            (_mean_of_rows,
             "case rows with different numbers of queries: got 0.444444444, expected 0.666666667",
             "average each row's accuracy (every query weighs the same)"),
            (_probability_of_the_answer,
             "case one query: got 0.153289299, expected 0",
             "average the probability of the answer (an accuracy counts argmax hits)")],
    ),
]
