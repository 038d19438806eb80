"""One-line errors for a setting outside its choices: ``one_of`` raises ValueError naming
the setting, the choices and the nearest of them to what was given (``did_you_mean``).
No dependencies inside the package, so that every module can use it."""

from __future__ import annotations

import difflib
from typing import Any

__all__ = ["did_you_mean", "one_of"]


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def did_you_mean(value: Any, choices) -> str:
    """" (did you mean 'x'?)" for the closest of ``choices`` to ``value`` (by distance for
    numbers, by spelling otherwise), or "" when none is close."""
    choices = list(choices)
    if _number(value) and choices and all(_number(c) for c in choices):
        return f" (did you mean {min(choices, key=lambda c: abs(c - value))!r}?)"
    close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def one_of(value: Any, name: str, choices, extra: str = "") -> None:
    """Raise ValueError("{name} must be one of ...{extra}, got ... (did you mean ...?)")
    unless ``value`` is one of ``choices``."""
    if value not in choices:
        listed = ", ".join(map(repr, choices))
        raise ValueError(f"{name} must be one of {listed}{extra}, got {value!r}"
                         f"{did_you_mean(value, choices)}")
