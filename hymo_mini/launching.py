"""Launching Triton kernels on the GPU their tensors live on.

A Triton kernel launches on the *current* CUDA device, into that device's current stream,
whatever device its pointer arguments point into. With a model on ``cuda:1`` while
``cuda:0`` is current (one process, ``--device cuda:1``), a kernel would run on the wrong
GPU, unordered with the work around it on the right one. PyTorch's own operators follow
their tensors instead. So every function of this package that launches a Triton kernel
runs with its first tensor argument's device made current, as PyTorch's operators
effectively do:

    @staticmethod
    @on_inputs_device
    def forward(ctx, v, b, c, ...): ...

On the CPU (the Triton interpreter) this does nothing.
"""

from __future__ import annotations

import contextlib
import functools

import torch

__all__ = ["on_device", "on_inputs_device"]


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
