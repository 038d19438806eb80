"""The shape tracer: section 11 of the design document, computed instead of typed.

Section 11 lists, by hand, the shape of every tensor in a forward pass. Hand-written shape
lists go stale (the document's own list puts RoPE on ``v`` and quotes GDN sizes that do
not match its parameter count), so hymo_mini traces them from the running model:

    >>> from hymo_mini.analysis.trace import trace_shapes
    >>> table = trace_shapes(model, tokens, depth=2)
    >>> print(table)                                   # one row per module call

Every submodule gets a forward pre-hook (which reserves a row, so rows come in call order,
parents before children) and a forward hook (which fills in the output shapes). A module
called twice (the rotary table on ``b`` and then on ``c``) gives two rows. The root row
is the call itself. Nothing here depends on values, so a model built on the meta device
traces without allocating a byte::

    with torch.device("meta"):
        model = HyMo(load_config("hymo_750m").model)
    trace_shapes(model, torch.zeros(2, 128, dtype=torch.long, device="meta"))

(provided every module's forward is itself value-free on meta, i.e. never calls
``.item()``, ``bool(tensor)`` or ``nonzero``.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from torch import nn

from hymo_mini.analysis.tables import RenderedTable, TextTable

__all__ = ["ShapeRow", "ShapeTable", "trace_shapes", "describe"]


@dataclass(frozen=True)
class ShapeRow:
    """One call of one module."""

    path: str  # dotted name inside the traced model; "" for the model itself
    depth: int  # 0 for the model, 1 for its children, ...
    kind: str  # class name
    inputs: str  # shapes of the tensor arguments, e.g. "(2, 128, 896)"
    outputs: str
    params: int  # parameters of the module and its children (shared tensors once)


def describe(value) -> str:
    """A short, deterministic description of a module's input or output: tensors by shape
    (with the dtype when it is not float32), containers element by element, other values
    by type name. Never prints values or addresses."""
    if isinstance(value, torch.Tensor):
        shape = "(" + ", ".join(str(s) for s in value.shape) + ")"
        if value.ndim == 1:
            shape = shape[:-1] + ",)"
        return shape if value.dtype == torch.float32 else f"{shape} {_dtype_name(value.dtype)}"
    if isinstance(value, tuple) and len(value) == 1:
        return describe(value[0])  # a lone argument: no brackets
    if isinstance(value, (tuple, list)):
        inner = ", ".join(describe(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {describe(v)}" for k, v in value.items()) + "}"
    if value is None:
        return "None"
    if isinstance(value, (bool, int)):
        return repr(value)
    return type(value).__name__


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())  # .parameters() de-duplicates ties


class ShapeTable(RenderedTable):
    """Rows of a trace, printable as text (``str``) and as HTML in a notebook."""

    columns = ("module", "class", "input shapes", "output shapes", "params")

    def __init__(self, rows: list[ShapeRow]):
        self.rows = list(rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def __getitem__(self, index):
        return self.rows[index]

    def filter(self, depth: int | None = None, pattern: str | None = None,
               kind: str | None = None) -> ShapeTable:
        """Rows with ``depth <= depth``, whose path matches the regular expression
        ``pattern`` (``re.search``), and whose class name is ``kind``."""
        rows = self.rows
        if depth is not None:
            rows = [r for r in rows if r.depth <= depth]
        if pattern is not None:
            regex = re.compile(pattern)
            rows = [r for r in rows if regex.search(r.path)]
        if kind is not None:
            rows = [r for r in rows if r.kind == kind]
        return ShapeTable(rows)

    def _table(self) -> TextTable:
        rows = [(r.path or "(model)", r.kind, r.inputs, r.outputs, f"{r.params:,}")
                for r in self.rows]
        return TextTable(self.columns, rows, align="llllr")

    def __repr__(self) -> str:
        return f"ShapeTable({len(self.rows)} rows)\n{self}"


def trace_shapes(model: nn.Module, *inputs, depth: int | None = None,
                 method: str = "forward", **kwargs) -> ShapeTable:
    """Run ``model`` once on ``inputs`` (under ``torch.no_grad``) and record every module
    call down to ``depth`` (None: all). ``method`` picks what to call on the model
    (``"forward"`` calls the model itself; e.g. ``"loss"`` traces the loss path)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if depth is not None and (not isinstance(depth, int) or depth < 0):
        raise ValueError(f"depth must be None or a non-negative integer, got {depth!r}")
    slots: list[list] = []  # [path, depth, kind, inputs, outputs, params], in call order
    open_calls: dict[int, list[list]] = {}
    handles = []

    def pre_hook(path: str, module: nn.Module):
        def hook(mod, args, kw):
            slot = [path, path.count(".") + 1, type(mod).__name__,
                    describe(tuple(args) + tuple(kw.values())), "?", _count(mod)]
            slots.append(slot)
            open_calls.setdefault(id(mod), []).append(slot)
        return hook

    def post_hook(mod, args, kw, output):
        open_calls[id(mod)].pop()[4] = describe(output)

    for path, module in model.named_modules():
        if not path or (depth is not None and path.count(".") + 1 > depth):
            continue
        handles.append(module.register_forward_pre_hook(pre_hook(path, module), with_kwargs=True))
        handles.append(module.register_forward_hook(post_hook, with_kwargs=True))
    try:
        with torch.no_grad():
            call = model if method == "forward" else getattr(model, method)
            output = call(*inputs, **kwargs)
    finally:
        for handle in handles:
            handle.remove()
    root = ShapeRow("", 0, type(model).__name__, describe(tuple(inputs) + tuple(kwargs.values())),
                    describe(output), _count(model))
    return ShapeTable([root] + [ShapeRow(*slot) for slot in slots])
