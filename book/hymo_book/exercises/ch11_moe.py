"""Exercises of chapter 11 (mixture of experts): which assignments an expert's capacity
drops, and the router's top-k choice with the balancing bias."""

from __future__ import annotations

import torch
from einops import rearrange

from hymo_book.exercises import Case, Exercise
from hymo_mini.moe import queue_positions


# ---- kept_assignments -----------------------------------------------------------------
def _kept_oracle(indices, n_experts, capacity):
    """The library's rule: choice-major serving order, one stable sort by expert."""
    n, k = indices.shape
    order = rearrange(indices, "n k -> (k n)")  # (k*n,) all first choices, then seconds
    position, _, _ = queue_positions(order, n_experts)  # (k*n,) place in its expert's queue
    return rearrange(position, "(k n) -> n k", k=k) < capacity  # (n, k) bool


def _distinct_choices(gen, n, k, n_experts):
    """(n, k) expert ids, distinct within each row (as top-k picks them)."""
    return torch.rand(n, n_experts, generator=gen).argsort(dim=-1)[:, :k]


def _kept_cases():
    gen = torch.Generator().manual_seed(11)
    cases = [
        # token 0's 2nd choice and token 1's 1st choice want expert 1's only slot
        Case("second choices wait", (torch.tensor([[0, 1], [1, 0]]), 2, 1)),
        Case("earlier tokens first", (torch.tensor([[2], [2], [2]]), 3, 2)),
        Case("capacity 0", (torch.tensor([[0, 1], [1, 2]]), 3, 0)),
        Case("room for everyone", (_distinct_choices(gen, 6, 2, 4), 4, 6)),
        Case("one token", (torch.tensor([[3, 0]]), 4, 1)),
        Case("everyone's favourite", (torch.tensor([[0, 1], [0, 2], [0, 3], [0, 1]]), 4, 2)),
        Case("one expert", (torch.zeros(5, 1, dtype=torch.long), 1, 3)),
    ]
    for i, (n, k, e, c) in enumerate([(16, 2, 4, 6), (37, 2, 8, 7), (64, 3, 6, 20),
                                      (9, 1, 3, 2)]):
        cases.append(Case(f"random {i} ({n} tokens, top-{k}, {e} experts, capacity {c})",
                          (_distinct_choices(gen, n, k, e), e, c)))
    return cases


def _compare_kept(got, expected, case):
    if not isinstance(got, torch.Tensor):
        return f"case {case.name}: return a tensor, got {type(got).__name__}"
    if tuple(got.shape) != tuple(expected.shape):
        return f"case {case.name}: shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
    if got.dtype != torch.bool:
        return f"case {case.name}: dtype {got.dtype}, expected torch.bool"
    bad = (got != expected).nonzero()
    if len(bad):
        token, choice = (int(i) for i in bad[0])
        expert = int(case.args[0][token, choice])
        verdict = "kept" if expected[token, choice] else "dropped"
        return (f"case {case.name}: token {token}'s choice {choice} (expert {expert}) should "
                f"be {verdict}")
    return None


# ---- topk_routing ---------------------------------------------------------------------
def _topk_oracle(logits, bias, k):
    probs = logits.double().softmax(dim=-1)  # (n, e)
    indices = torch.topk(probs + bias.double(), k, dim=-1).indices  # (n, k)
    return indices, probs.gather(-1, indices)  # unbiased, not renormalised


def _topk_cases():
    gen = torch.Generator().manual_seed(12)

    def logits(n, e, scale=1.0):
        return torch.randn(n, e, generator=gen) * scale

    return [
        Case("no bias", (logits(5, 4), torch.zeros(4), 2)),
        Case("the bias changes the choice",
             (torch.tensor([[2.0, 1.0, 0.0, -1.0]]), torch.tensor([-0.5, 0.0, 0.5, 0.0]), 2)),
        Case("top-1", (logits(7, 6), torch.randn(6, generator=gen) * 0.05, 1)),
        Case("all experts", (logits(3, 4), torch.randn(4, generator=gen) * 0.1, 4)),
        Case("one token", (logits(1, 8), torch.zeros(8), 2)),
        Case("extreme logits", (torch.tensor([[50.0, 20.0, -30.0, 0.0],
                                              [-100.0, -60.0, 100.0, 99.0]]), torch.zeros(4), 2)),
        Case("near-uniform router", (logits(16, 16, 0.2), torch.randn(16, generator=gen) * 0.01,
                                     2)),
        Case("random", (logits(32, 8), torch.randn(8, generator=gen) * 0.05, 3)),
    ]


def _compare_topk(got, expected, case):
    if not isinstance(got, tuple | list) or len(got) != 2:
        return f"case {case.name}: return (indices, weights), got {type(got).__name__}"
    indices, weights = torch.as_tensor(got[0]), torch.as_tensor(got[1]).double()
    for name, g, e in (("indices", indices, expected[0]), ("weights", weights, expected[1])):
        if tuple(g.shape) != tuple(e.shape):
            return (f"case {case.name}: {name} have shape {tuple(g.shape)}, expected "
                    f"{tuple(e.shape)}")
    wrong = (indices != expected[0]).nonzero()
    if len(wrong):
        token, rank = (int(i) for i in wrong[0])
        return (f"case {case.name}: token {token}'s choice {rank} is expert "
                f"{int(indices[token, rank])}, expected expert {int(expected[0][token, rank])} "
                "(indices differ)")
    wrong = (~torch.isclose(weights, expected[1], rtol=1e-5, atol=1e-7)).nonzero()
    if len(wrong):
        token, rank = (int(i) for i in wrong[0])
        return (f"case {case.name}: token {token}'s weight {rank} is "
                f"{float(weights[token, rank]):.6g}, expected {float(expected[1][token, rank]):.6g}"
                " (weights differ)")
    return None


def _topk_unbiased_choice(logits, bias, k):  # chooses by the probabilities alone
    probs = logits.softmax(-1)
    weights, indices = probs.topk(k, dim=-1)
    return indices, weights


def _topk_biased_weights(logits, bias, k):  # lets the bias into the weights
    scores = logits.softmax(-1) + bias
    weights, indices = scores.topk(k, dim=-1)
    return indices, weights


def _topk_renormalised(logits, bias, k):  # renormalises the chosen weights to sum to 1
    probs = logits.softmax(-1)
    indices = (probs + bias).topk(k, dim=-1).indices
    weights = probs.gather(-1, indices)
    return indices, weights / weights.sum(-1, keepdim=True)


def _topk_naive_softmax(logits, bias, k):  # exp overflows for large logits
    e = logits.exp()
    probs = e / e.sum(-1, keepdim=True)
    indices = (probs + bias).topk(k, dim=-1).indices
    return indices, probs.gather(-1, indices)


EXERCISES = [
    Exercise(
        name="kept_assignments", chapter="11_moe", cases=_kept_cases, oracle=_kept_oracle,
        compare=_compare_kept,
        wrong=[
            (lambda indices, n_experts, capacity: _kept_oracle(
                indices.flatten()[:, None], n_experts, capacity).reshape(indices.shape),
             "case second choices wait: token 0's choice 1 (expert 1) should be dropped",
             "serve the assignments token by token (every first choice is served before any "
             "second choice)"),
            (lambda indices, n_experts, capacity: _kept_oracle(indices, n_experts, capacity + 1),
             "case second choices wait: token 0's choice 1 (expert 1) should be dropped",
             "keep one assignment too many (queue places start at 0: a place < capacity is kept)"),
            (lambda indices, n_experts, capacity: torch.ones(indices.shape, dtype=torch.bool),
             "case second choices wait: token 0's choice 1 (expert 1) should be dropped",
             "keep every assignment (an expert holds at most capacity of them)"),
            (lambda indices, n_experts, capacity: _kept_oracle(
                indices, n_experts, capacity).long(),
             "case second choices wait: dtype torch.int64, expected torch.bool",
             "return integers (return a bool mask)")],
    ),
    Exercise(
        name="topk_routing", chapter="11_moe", cases=_topk_cases, oracle=_topk_oracle,
        compare=_compare_topk,
        wrong=[
            (_topk_unbiased_choice,
             "case the bias changes the choice: token 0's choice 0 is expert 0, expected expert 2 "
             "(indices differ)",
             "choose by the probabilities alone (the choice adds the bias)"),
            (_topk_biased_weights,
             "case the bias changes the choice: token 0's weight 0 is 0.587144, expected "
             "0.0871443 (weights differ)",
             "let the bias into the weights (it changes the choice, not the weights)"),
            (_topk_renormalised,
             "case no bias: token 0's weight 0 is 0.615325, expected 0.370748 (weights differ)",
             "renormalise the chosen weights (they stay the router's probabilities)"),
            (_topk_naive_softmax,
             "case extreme logits: token 1's weight 0 is nan, expected 0.731059 (weights differ)",
             "write the softmax as exp / sum (exp overflows for large logits: use softmax)")],
    ),
]
