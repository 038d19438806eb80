"""Exercises of chapter 12 (multi-token prediction): which tokens each depth's
predictions are scored against, and the weighted loss of the MTP depths."""

from __future__ import annotations

import torch

from hymo_book.exercises import Case, Exercise
from hymo_mini.mtp import mtp_loss
from hymo_mini.mtp import mtp_targets as _mtp_targets


# ---- mtp_targets ----------------------------------------------------------------------
def _target_cases():
    gen = torch.Generator().manual_seed(21)

    def tokens(b, t):
        return torch.randint(0, 256, (b, t), generator=gen)

    counting = torch.arange(10)[None, :]  # (1, 10): token i is i, so targets are readable
    return [Case("the main head", (counting, 0)), Case("depth 1", (counting, 1)),
            Case("depth 2", (counting, 2)),
            Case("one target left", (tokens(2, 5), 3)),
            Case("a batch", (tokens(4, 16), 2)),
            Case("deep", (tokens(3, 33), 7))]


def _compare_targets(got, expected, case):
    if not isinstance(got, tuple | list) or len(got) != 2:
        return f"case {case.name}: return (n, targets), got {type(got).__name__}"
    n, targets = got
    if int(n) != expected[0]:
        return f"case {case.name}: n is {int(n)}, expected {expected[0]}"
    targets = torch.as_tensor(targets)
    if tuple(targets.shape) != tuple(expected[1].shape):
        return (f"case {case.name}: targets have shape {tuple(targets.shape)}, expected "
                f"{tuple(expected[1].shape)}")
    wrong = (targets != expected[1]).nonzero()
    if len(wrong):
        b, i = (int(j) for j in wrong[0])
        return (f"case {case.name}: the target of prediction {i} (sequence {b}) is token "
                f"{int(targets[b, i])}, expected {int(expected[1][b, i])}")
    return None


# ---- weighted_mtp_loss ----------------------------------------------------------------
def _loss_cases():
    gen = torch.Generator().manual_seed(22)

    def batch(b, T, V, depth, scale=1.0):
        tokens = torch.randint(0, V, (b, T), generator=gen)
        logits = [torch.randn(b, T - d, V, generator=gen) * scale for d in range(1, depth + 1)]
        return tokens, logits

    cases = []
    for name, (b, T, V, depth, scale), weights in [
            ("depth 1", (2, 6, 5, 1, 1.0), (0.3,)),
            ("the document's weights", (2, 8, 7, 2, 1.0), (0.3, 0.1)),
            ("zero weights", (1, 5, 4, 2, 1.0), (0.0, 0.0)),
            ("one target at the last depth", (3, 4, 6, 2, 1.0), (0.3, 0.1)),
            ("large logits", (2, 9, 5, 2, 30.0), (0.3, 0.1)),
            ("three depths", (4, 12, 11, 3, 1.0), (0.5, 0.25, 0.125))]:
        tokens, logits = batch(b, T, V, depth, scale)
        cases.append(Case(name, (logits, tokens, weights)))
    return cases


def _compare_loss(got, expected, case):
    try:
        value = float(got)
    except (TypeError, ValueError, RuntimeError):
        return f"case {case.name}: return a number (a 0-d tensor), got {type(got).__name__}"
    if not abs(value - float(expected)) <= 1e-5 * abs(float(expected)) + 1e-6:
        return f"case {case.name}: loss is {value:.6g}, expected {float(expected):.6g}"
    return None


def _ce(logits, targets):
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())


def _loss_shifted_by_one(logits_list, tokens, weights):  # scores position i against i + d
    return sum(w * _ce(lg[:, :-1], tokens[:, d:-1])
               for d, (lg, w) in enumerate(zip(logits_list, weights, strict=True), start=1))


def _loss_unweighted(logits_list, tokens, weights):  # forgets the weights
    return sum(_ce(lg[:, :-1], tokens[:, d + 1:]) for d, lg in enumerate(logits_list, start=1))


def _loss_every_position(logits_list, tokens, weights):  # scores the last state too
    T = tokens.shape[1]
    return sum(w * _ce(lg, torch.cat([tokens[:, d + 1:], tokens[:, :1]], dim=1)[:, :T - d])
               for d, (lg, w) in enumerate(zip(logits_list, weights, strict=True), start=1))


EXERCISES = [
    Exercise(
        name="mtp_targets", chapter="12_mtp", cases=_target_cases, oracle=_mtp_targets,
        compare=_compare_targets,
        wrong=[
            (lambda tokens, depth: (tokens.shape[1] - depth, tokens[:, depth:]),
             "case the main head: n is 10, expected 9",
             "shift the targets by depth (depth d predicts the token d + 1 ahead)"),
            (lambda tokens, depth: (tokens.shape[1] - depth - 1, tokens[:, depth:-1]),
             "case the main head: the target of prediction 0 (sequence 0) is token 0, expected 1",
             "start the targets at token depth (prediction i at depth d is scored against token "
             "i + d + 1)"),
            (lambda tokens, depth: (tokens.shape[1] - 1, tokens[:, 1:]),
             "case depth 1: n is 9, expected 8",
             "ignore depth (depth d shifts by d + 1)")],
    ),
    Exercise(
        name="weighted_mtp_loss", chapter="12_mtp", cases=_loss_cases, oracle=mtp_loss,
        compare=_compare_loss,
        wrong=[
            (_loss_shifted_by_one,
             "case depth 1: loss is 0.553905, expected 0.380658",
             "score position i against token i + d (depth d predicts token i + d + 1)"),
            (_loss_unweighted,
             "case depth 1: loss is 1.26886, expected 0.380658",
             "leave out the weights"),
            (_loss_every_position,
             "case depth 1: loss is 0.421906, expected 0.380658",
             "score every position (the last positions of a depth have no target)")],
    ),
]
