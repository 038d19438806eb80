"""What the ``*_impl`` switches share: when a part runs compiled, and the one compiled copy of
each function.

``gdn_impl``, ``mla_impl`` and ``swiglu_impl`` each take "eager", "compiled" or "auto";
"auto" compiles while training (grad enabled, training mode) on a CUDA GPU and runs the eager
code otherwise, so CPU runs and the book use the eager code, the oracle every compiled part
is tested against. ``COMPILE_BACKEND`` is torch.compile's backend; the tests set
"aot_eager", which traces and differentiates like inductor but generates no code.
"""

from __future__ import annotations

import torch

from hymo_mini.choices import one_of

__all__ = ["IMPLS", "COMPILE_BACKEND", "INDUCTOR_OPTIONS", "runs_compiled", "compiled_forward"]

IMPLS = ("auto", "eager", "compiled")
COMPILE_BACKEND = "inductor"
INDUCTOR_OPTIONS: dict = {}  # torch.compile(options=...) when the backend is inductor
_COMPILED: dict = {}  # (function name, backend, options) -> the compiled function


def runs_compiled(impl: str, x: torch.Tensor, training: bool, field: str) -> bool:
    """Whether a call on ``x`` runs compiled under the switch ``field`` set to ``impl``."""
    one_of(impl, field, IMPLS)
    if impl == "auto":
        return x.is_cuda and training and torch.is_grad_enabled()
    return impl == "compiled"


def compiled_forward(fn, backend: str | None = None):
    """``torch.compile(fn)`` for ``backend`` (default ``COMPILE_BACKEND``), made once and
    shared by every caller. Static shapes: a training run has one (B, T), and each new one
    compiles once (rather than to kernels for any shape after the second)."""
    backend = backend or COMPILE_BACKEND
    options = dict(INDUCTOR_OPTIONS) if backend == "inductor" else {}
    key = (fn.__name__, backend, tuple(sorted(options.items())))
    if key not in _COMPILED:
        _COMPILED[key] = torch.compile(fn, backend=backend, dynamic=False,
                                       options=options or None)
    return _COMPILED[key]
