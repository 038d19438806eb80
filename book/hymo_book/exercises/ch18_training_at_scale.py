"""Exercises of chapter 18 (training at scale with FSDP2): the bytes of sharded training state
per GPU, and which rows of a global batch a rank reads."""

from __future__ import annotations

import math

from hymo_book.exercises import Case, Exercise


# ---- sharded state per GPU -----------------------------------------------------------------
def _state_oracle(shapes, n_gpus):
    """fp32 parameter + fp32 gradient + AdamW's two fp32 moments = 16 bytes per element of
    each GPU's shard; a shard holds ceil(rows / N) rows (the first dim padded to N)."""
    total = 0
    for shape in shapes:
        shape = tuple(shape)
        rows = math.ceil(shape[0] / n_gpus) if shape else 1
        total += rows * math.prod(shape[1:])
    return 16 * total


def _state_cases():
    return [Case("one matrix on one GPU", ([(4, 3)], 1)),
            Case("one matrix on two GPUs", ([(4, 3)], 2)),
            Case("rows that do not split evenly", ([(5, 3)], 2)),
            Case("a vector", ([(896,)], 8)),
            Case("fewer rows than GPUs", ([(3, 10)], 8)),
            Case("a stack of experts", ([(16, 512, 896)], 64)),
            Case("a scalar", ([()], 4)),
            Case("hymo-like mix", ([(64256, 896), (896,), (16, 512, 896), (3,)], 32))]


def _state_compare(got, expected, case):
    if not isinstance(got, int | float) or isinstance(got, bool):
        return f"case {case.name}: return a number of bytes, got {type(got).__name__}"
    if got != expected:
        return f"case {case.name}: got {got:,} bytes, expected {expected:,}"
    return None


def _no_padding(shapes, n_gpus):  # P / N: what an even split would give
    return sum(16 * math.prod(tuple(s)) / n_gpus for s in shapes)


def _no_gradients(shapes, n_gpus):  # parameters and moments only
    return _state_oracle(shapes, n_gpus) // 16 * 12


# ---- a rank's rows -------------------------------------------------------------------------------
def _rows_oracle(batch_size, rank, world_size):
    share = batch_size // world_size
    return list(range(rank * share, (rank + 1) * share))


def _rows_cases():
    return [Case("one process", (4, 0, 1)),
            Case("rank 0 of 2", (4, 0, 2)),
            Case("rank 1 of 2", (4, 1, 2)),
            Case("the last rank of 8", (64, 7, 8)),
            Case("one sequence per rank", (4, 2, 4)),
            Case("rank 3 of 4, batch 12", (12, 3, 4))]


def _rows_compare(got, expected, case):
    if isinstance(got, slice):
        got = list(range(case.args[0]))[got]
    elif isinstance(got, range | list | tuple):
        got = list(got)
    else:
        return f"case {case.name}: return a slice (or the row indices), got {type(got).__name__}"
    if got != expected:
        return f"case {case.name}: rank {case.args[1]} reads rows {got}, expected {expected}"
    return None


EXERCISES = [
    Exercise(
        name="sharded_state_bytes", chapter="18_training_at_scale", cases=_state_cases,
        oracle=_state_oracle, compare=_state_compare,
        wrong=[
            (_no_padding,
             "case rows that do not split evenly: got 120.0 bytes, expected 144",
             "split the bytes evenly (a shard holds ceil(rows / N) rows)"),
            (_no_gradients,
             "case one matrix on one GPU: got 144 bytes, expected 192",
             "leave out the gradient (16 bytes an element: parameter, gradient and two moments)")],
    ),
    Exercise(
        name="rank_rows", chapter="18_training_at_scale", cases=_rows_cases, oracle=_rows_oracle,
        compare=_rows_compare,
        wrong=[
            (lambda batch_size, rank, world_size: slice(rank, batch_size, world_size),
             "case rank 0 of 2: rank 0 reads rows [0, 2], expected [0, 1]",
             "interleave the ranks (each rank reads one block of batch_size // world_size rows)"),
            (lambda batch_size, rank, world_size: slice(rank * batch_size // world_size,
                                                        (rank + 1) * batch_size // world_size
                                                        + 1),
             "case rank 0 of 2: rank 0 reads rows [0, 1, 2], expected [0, 1]",
             "stop one row late (a slice's end is excluded)")],
    ),
]
