"""``@triton_exercise``, in place of ``@triton.jit``, for an exercise in which the learner writes
a Triton kernel: the same kernel, plus a handle ``check`` can call, which launches it on the
exercise's inputs (chapter 10's exercises; ``ch10_triton_puzzles`` has their checkers)."""

from __future__ import annotations

import os
from collections.abc import Callable

import torch

__all__ = ["ExerciseKernel", "triton_exercise"]


class ExerciseKernel:
    """A kernel the learner writes, which the checker launches: ``kernel(launch, *inputs)``
    calls ``launch(jitted, *inputs)``. It is jitted on its first launch, in the interpreter
    when there is no GPU (``TRITON_INTERPRET=1`` is set then, before the decoration: set it
before anything imports ``triton.language``, whose own functions are decorated on import)."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__code__ = fn.__code__  # lets the checker see a stub whose body is `...`
        self.jitted = None

    def __call__(self, launch: Callable, *inputs):
        if self.jitted is None:
            if not torch.cuda.is_available():
                os.environ.setdefault("TRITON_INTERPRET", "1")
            import triton
            import triton.language
            if not torch.cuda.is_available() and \
                    type(triton.language.sum).__name__ != "InterpretedFunction":
                raise RuntimeError("triton.language was imported before TRITON_INTERPRET=1 was "
                                   "set: set it first (then import triton), and restart")
            if self.fn.__globals__.get("tl") is None:  # a module that binds tl on first use
                self.fn.__globals__["tl"] = triton.language
            self.jitted = triton.jit(self.fn)
        return launch(self.jitted, *inputs)


def triton_exercise(fn: Callable) -> ExerciseKernel:
    """``@triton_exercise`` in place of ``@triton.jit``: the kernel, launchable by ``check``."""
    return ExerciseKernel(fn)
