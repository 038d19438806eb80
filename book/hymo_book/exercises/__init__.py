"""Exercises a checker grades: the learner writes a function, ``check`` runs it on random and
awkward inputs against an oracle and answers in one line what is wrong.

In a chapter::

    from hymo_book.exercises import check

    def rotate_pair(x0, x1, angle):
        \"\"\"Rotate the 2-D point (x0, x1) by ``angle`` radians; return (y0, y1).\"\"\"
        ...

    check(rotate_pair)    # "rotate_pair: not written yet (its body is `...`)"

and, in a solution cell the learner can open (tagged ``solution``: collapsed in JupyterLab, a
dropdown on the site), a worked solution followed by ``check(rotate_pair)`` again
("rotate_pair: all 9 cases pass").

Each chapter's exercises live in one module of this package (``ch04_rope.py``, ...), each
an :class:`Exercise` in a module-level list ``EXERCISES``; they are found by module name,
so chapters can add theirs without editing this file. Every exercise also lists plausible
wrong answers with the message ``check`` must give them and the mistake each makes; the
tests run every checker against its chapter's solution (must pass) and against each wrong
answer (must fail with that message). A failure names its likely cause: the catalogued
mistake whose output the learner's matches, or the shape of the difference (``causes``).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from hymo_book.exercises import causes

__all__ = ["Case", "Exercise", "Result", "check", "grade", "registry", "compare_tensors"]


@dataclass
class Case:
    """One input: ``fn(*args, **kwargs)`` is compared with ``expected`` (or, when
    ``expected`` is None, with the exercise's oracle on the same arguments)."""

    name: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    expected: Any = None


@dataclass
class Exercise:
    """``name`` is the function the learner writes; ``cases()`` the inputs (random and
    awkward), ``oracle`` the reference, ``compare(got, expected, case) -> str | None`` the
    one-line complaint (None when right); ``wrong`` the plausible wrong answers, each with
    the message ``check`` must give it (or a fragment of it) and, third, the mistake it
    makes as a phrase that completes "did you ...?" (the cause ``check`` names when a
    learner's output on the failing case is that wrong answer's)."""

    name: str
    chapter: str
    cases: Callable[[], Iterable[Case]]
    oracle: Callable | None = None
    compare: Callable[[Any, Any, Case], str | None] | None = None
    wrong: list[tuple] = field(default_factory=list)

    def expected(self, case: Case):
        if case.expected is not None:
            return case.expected
        if self.oracle is None:
            raise ValueError(f"exercise {self.name!r}: case {case.name!r} has no expected "
                             "value and the exercise no oracle")
        return self.oracle(*case.args, **case.kwargs)


@dataclass
class Result:
    name: str
    passed: bool
    message: str

    def __repr__(self) -> str:
        return self.message

    def _repr_pretty_(self, p, cycle) -> None:  # IPython: the message, not the dataclass
        p.text(self.message)

    def __bool__(self) -> bool:
        return self.passed


def compare_tensors(got, expected, case: Case, *, rtol: float = 1e-5, atol: float = 1e-6,
                    what: str = "output") -> str | None:
    """None if ``got`` matches ``expected`` (same shape, close values); else one line that
    names the case, the shape or the first position that differs, and both values."""
    if isinstance(expected, tuple | list):
        if not isinstance(got, tuple | list) or len(got) != len(expected):
            return (f"case {case.name}: expected {len(expected)} results, got "
                    f"{len(got) if isinstance(got, tuple | list) else type(got).__name__}")
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            if (msg := compare_tensors(g, e, case, rtol=rtol, atol=atol, what=f"{what} {i}")):
                return msg
        return None
    if not isinstance(got, torch.Tensor):
        try:
            got = torch.as_tensor(got, dtype=torch.as_tensor(expected).dtype)
        except (TypeError, ValueError, RuntimeError):
            return f"case {case.name}: {what} should be a tensor, got {type(got).__name__}"
    expected = torch.as_tensor(expected)
    if tuple(got.shape) != tuple(expected.shape):
        return (f"case {case.name}: {what} has shape {tuple(got.shape)}, expected "
                f"{tuple(expected.shape)}")
    got, expected = got.double(), expected.double()
    bad = ~torch.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=False)
    if bad.any():
        where = tuple(int(i) for i in bad.nonzero()[0])
        g, e = got[where].item(), expected[where].item()
        digits = 6 if f"{g:.6g}" != f"{e:.6g}" else 9  # never two equal numbers
        return (f"case {case.name}: {what} differs at position {where}: got "
                f"{g:.{digits}g}, expected {e:.{digits}g}")
    return None


def _empty():
    """A function whose body is only ``...``."""
    ...


def _not_written(fn: Callable) -> bool:
    """Whether ``fn``'s body does nothing (the stub as given: a docstring and ``...``):
    its byte code is that of an empty function."""
    code = getattr(fn, "__code__", None)
    return code is not None and code.co_code == _empty.__code__.co_code


def registry() -> dict[str, Exercise]:
    """Every exercise of the book, by the name of the function the learner writes."""
    found: dict[str, Exercise] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for exercise in getattr(module, "EXERCISES", []):
            if exercise.name in found:
                raise ValueError(f"two exercises named {exercise.name!r} "
                                 f"({found[exercise.name].chapter} and {exercise.chapter})")
            found[exercise.name] = exercise
    return found


def check(fn: Callable, name: str | None = None) -> Result:
    """Grade ``fn`` against the exercise of the same name (or ``name``). The result shows
    as its one-line message (make ``check(...)`` a cell's last line)."""
    name = name or getattr(fn, "__name__", None)
    exercises = registry()
    if name not in exercises:
        raise KeyError(f"no exercise named {name!r}; the exercises are {sorted(exercises)}")
    return grade(fn, exercises[name])


def grade(fn: Callable, exercise: Exercise) -> Result:
    """``check`` for a given exercise: the learner's function on every case. A failure's
    message ends with its likely cause where one is recognised (see ``causes``)."""
    if _not_written(fn):
        return Result(exercise.name, False, f"{exercise.name}: not written yet (its body is "
                                            "`...`)")
    compare = exercise.compare or compare_tensors
    cases = list(exercise.cases())
    for case in cases:
        expected = exercise.expected(case)
        try:
            got = fn(*case.args, **case.kwargs)
        except Exception as err:  # noqa: BLE001 - the learner's code may raise anything
            cause = causes.catalogued_cause(fn, exercise, case, causes.RaisedError(
                type(err).__name__))
            return Result(exercise.name, False, causes.with_cause(
                f"{exercise.name}: case {case.name} raised {type(err).__name__}: {err}", cause))
        if got is None and expected is not None:
            return Result(exercise.name, False, f"{exercise.name}: case {case.name} returned "
                                                "None (not written yet?)")
        if (msg := compare(got, expected, case)):
            cause = (causes.catalogued_cause(fn, exercise, case, got)
                     or causes.pattern_cause(got, expected))
            return Result(exercise.name, False, causes.with_cause(f"{exercise.name}: {msg}",
                                                                  cause))
    return Result(exercise.name, True, f"{exercise.name}: all {len(cases)} cases pass")
