"""The likely cause of a failed case, added to the checker's one-line message.

Two ways to recognise a mistake:

- **the catalogue**: an exercise lists plausible wrong answers, each with the mistake it
  makes (``(wrong_fn, message, cause)``). When the learner's output on the failing case is
  the output of one of them, the message asks about that mistake ("did you forget eps?").
- **the shape of the difference**, for any tensor answer: a mask inverted, every value
  with the wrong sign, the transpose of the expected answer, every value the same multiple
  of the expected one (a missing scale), or the expected answer moved by one position
  along an axis (an off-by-one index).

The cause is a verb phrase that completes "did you ...?"; :func:`with_cause` appends it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

SAME_RTOL, SAME_ATOL = 1e-4, 1e-6  # one mistake made in another order of operations


def with_cause(message: str, cause: str | None) -> str:
    return f"{message} — did you {cause}?" if cause else message


def outcome(fn: Callable, case):
    """``fn``'s output on ``case``, or the type of the exception it raised."""
    try:
        return fn(*case.args, **case.kwargs)
    except Exception as err:  # noqa: BLE001 - a wrong answer may raise anything
        return RaisedError(type(err).__name__)


class RaisedError(str):
    """The name of an exception a function raised (an outcome, not an output)."""


def same_output(a, b) -> bool:
    """Whether two outputs agree within float32 noise (NaN equal to NaN)."""
    if isinstance(a, RaisedError) or isinstance(b, RaisedError):
        return isinstance(a, RaisedError) and isinstance(b, RaisedError) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_output(a[k], b[k]) for k in a)
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(same_output(x, y) for x, y in zip(a, b, strict=True))
    try:
        ta, tb = torch.as_tensor(a), torch.as_tensor(b)
    except (TypeError, ValueError, RuntimeError):
        return a == b
    if ta.shape != tb.shape or (ta.dtype == torch.bool) != (tb.dtype == torch.bool):
        return False
    if not (ta.dtype.is_floating_point or tb.dtype.is_floating_point):
        return bool(torch.equal(ta, tb))  # integers and masks: exactly
    return bool(torch.allclose(ta.double(), tb.double(), rtol=SAME_RTOL, atol=SAME_ATOL,
                               equal_nan=True))


def catalogued_cause(fn: Callable, exercise, case, got) -> str | None:
    """The mistake of every catalogued wrong answer whose outcome on ``case`` is ``got``;
    where several agree there, those that also agree with ``fn`` on every case."""
    named = [(entry[0], entry[2]) for entry in exercise.wrong if len(entry) > 2]
    cases = list(exercise.cases())  # fresh inputs, in case the learner's code changed them
    case = next((k for k in cases if k.name == case.name), case)
    alike = [(wrong, cause) for wrong, cause in named if same_output(outcome(wrong, case), got)]
    if len(alike) > 1:
        everywhere = [(w, c) for w, c in alike
                      if all(same_output(outcome(w, k), outcome(fn, k)) for k in cases)]
        alike = everywhere or alike
    causes = list(dict.fromkeys(cause for _, cause in alike))
    return ", or ".join(causes) if causes else None


def pattern_cause(got, expected) -> str | None:
    """A cause read off the difference between two tensors of numbers (the first pair that
    differs, for tuples of them), or None."""
    if isinstance(got, tuple | list) and isinstance(expected, tuple | list) and not all(
            isinstance(x, int | float) for x in [*got, *expected]):
        pairs = [(g, e) for g, e in zip(got, expected, strict=False) if not same_output(g, e)]
        return pattern_cause(*pairs[0]) if len(got) == len(expected) and pairs else None
    try:
        got, expected = torch.as_tensor(got), torch.as_tensor(expected)
    except (TypeError, ValueError, RuntimeError):
        return None
    if torch.bool in (got.dtype, expected.dtype):
        if got.shape == expected.shape and got.numel() and bool((got != expected).all()):
            return "invert the mask (every entry is the opposite of the expected one)"
        return None
    numbers = got.dtype.is_floating_point or expected.dtype.is_floating_point
    got, expected = got.double(), expected.double()
    if got.numel() == 0 or not (got.isfinite().all() and expected.isfinite().all()):
        return None
    scale = float(expected.abs().max())
    if scale == 0:
        return None

    def close(a, b):
        return a.shape == b.shape and bool(torch.allclose(a, b, rtol=1e-4, atol=1e-6 * scale))

    if numbers and close(got, -expected):
        return "flip a sign (every value is minus the expected one)"
    if got.dim() >= 2 and close(got.transpose(-1, -2), expected) and not close(got, expected):
        return "transpose the result (swap its last two axes)"
    if got.shape == expected.shape and numbers:
        at = expected.abs().argmax()
        ratio = float(got.flatten()[at] / expected.flatten()[at])
        spread = expected.unique().numel() > 1
        if ratio != 0.0 and close(got, ratio * expected) and (
                round_ratio(ratio) or round_ratio(ratio**2) or (spread and abs(ratio - 1) > .01)):
            return f"miss a factor (the answer is {ratio:.4g} times the expected one)"
    return shift_cause(got, expected, close) if got.shape == expected.shape else None


def round_ratio(ratio: float) -> bool:
    """Whether one number being ``ratio`` times another looks like a missing factor: the
    ratio or its inverse is a whole number other than 1."""
    return any(abs(r - round(r)) < 1e-6 * r and round(r) > 1 for r in (abs(ratio), 1 / abs(ratio)))


def shift_cause(got, expected, close) -> str | None:
    """Whether ``got`` is ``expected`` moved by one position along some axis."""
    for axis in range(got.dim()):
        n = got.shape[axis]
        if n < 3 or close(expected.narrow(axis, 1, n - 1), expected.narrow(axis, 0, n - 1)):
            continue  # too short, or the same after a shift
        for step, mine, theirs in ((1, "i + 1", "i"), (-1, "i", "i + 1")):
            moved = got.narrow(axis, max(step, 0), n - 1)
            kept = expected.narrow(axis, max(-step, 0), n - 1)
            if close(moved, kept):
                return (f"shift by one position along axis {axis} (your value at {mine} is the "
                        f"expected one at {theirs}: an off-by-one index)")
    return None
