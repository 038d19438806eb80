"""Launching Triton kernels on the GPU their tensors live on.

A Triton kernel launches on the *current* CUDA device, whatever device its pointer
arguments point into. With a model on ``cuda:1`` while ``cuda:0`` is current, a kernel
would run on the wrong GPU, unordered with the work around it. PyTorch's own operators
follow their tensors instead, so every function of this package that launches a Triton
kernel runs with its first tensor argument's device made current:

    @staticmethod
    @on_inputs_device
    def forward(ctx, v, b, c, ...): ...

On the CPU (the Triton interpreter) this does nothing. :func:`cdiv` and
:func:`next_power_of_2` are the launchers' grid arithmetic, on plain Python ints.
"""

from __future__ import annotations

import contextlib
import functools

import torch

__all__ = ["on_device", "on_inputs_device", "cdiv", "next_power_of_2"]


def cdiv(a: int, b: int) -> int:
    """⌈a / b⌉ of two ints (b > 0)."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of two at least ``n`` (an int ≥ 1)."""
    return 1 << (n - 1).bit_length()


def on_device(t):
    """A context in which ``t``'s CUDA device is the current one (nothing for a tensor off
    the GPU, or None)."""
    if isinstance(t, torch.Tensor) and t.device.type == "cuda":
        return torch.cuda.device(t.device)
    return contextlib.nullcontext()


def on_inputs_device(fn):
    """``fn`` run with the device of its first tensor argument current (see the module)."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        with on_device(first):
            return fn(*args, **kwargs)
    return run
