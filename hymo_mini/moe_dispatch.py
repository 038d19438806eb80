"""The routed experts as stacked tensors, and the two fast ways of running them.

:class:`RoutedExperts` holds the ``E`` routed SwiGLU experts of one MoE layer as three
stacked weights, ``w1`` and ``w3`` (e, inter, dim) and ``w2`` (e, dim, inter), initialised
as ``E`` separate ``nn.Linear(bias=False)`` layers would be (same draws, same order, so
a seed gives the numbers it gave when the experts were separate modules).
``experts.expert(e)`` reads expert ``e`` as a SwiGLU for teaching and for the reference
loop in :mod:`hymo_mini.moe`.

The same routing (:meth:`hymo_mini.moe.DeepSeekMoE.route`) feeds three dispatch paths,
chosen by ``ModelConfig.moe_impl`` (see :func:`resolve_impl`); all three compute the same
numbers (the tests check outputs and gradients against the loop):

* ``"loop"``: the readable reference in :mod:`hymo_mini.moe`: per expert, find its tokens
  (``nonzero``, a host sync on a GPU), run it, scatter back.
* ``"grouped"``: the ``k·n`` assignments sorted by expert (the stable sort the routing
  already did) and every expert run as one grouped matrix multiply, ``torch._grouped_mm``.
  Offsets are read on the device: no host sync. A dropped assignment keeps its row in its
  expert's group but the row's input is zeroed, so it adds exact zeros to the output and
  to the weight gradients (the rows are computed all the same).
* ``"padded"``: each expert gets ``C = min(capacity, n)`` slots, one batched matrix
  multiply over (e, C, dim), empty slots zero. Static shapes, works on every device and
  dtype; costs ``E·C`` rows instead of ``k·n`` (at inference, where ``C = n``, ``E/k``
  times the work of the other paths).
* ``"auto"``: ``"grouped"`` where :func:`grouped_mm_supported` says so, else ``"padded"``.

Where ``torch._grouped_mm`` runs without a host sync. Its signature is
``_grouped_mm(mat_a, mat_b, offs=None, bias=None, out_dtype=None)`` with int32 offsets, the
cumulative group ends, in torch's source since the bf16 kernel (pytorch/pytorch#150374, in
torch 2.8) and in torch 2.13 (checked). On CUDA, torch's CUTLASS kernel needs compute capability
9.0 or 10.0 and bf16 operands, and every other case falls back to a loop that copies the
offsets to the host. We use it on sm90 only: on sm100, zero-token groups have been
reported to get non-zero weight gradients (pytorch/pytorch#172439). On the CPU its loop
reads offsets that are already on the host; whether this torch has the CPU kernel is
probed once per dtype. All paths need 16-byte aligned rows (dim and inter_dim times the
element size divisible by 16). ``_grouped_mm`` is not an autocast op
(pytorch/pytorch#174763), so the fast paths cast to autocast's dtype themselves.
"""

from __future__ import annotations

import contextlib
import functools
import math

import torch
import torch.nn.functional as F
from einops import einsum, rearrange
from torch import nn
from torch.utils.flop_counter import flop_registry, register_flop_formula

from hymo_mini.choices import one_of
from hymo_mini.ffn import swiglu_activation
from hymo_mini.moe_rows import combine_rows, gather_rows, resolve_rows_backend, row_maps

__all__ = [
    "MOE_IMPLS",
    "RoutedExperts",
    "ExpertView",
    "swiglu",
    "queue_positions",
    "compute_dtype",
    "without_autocast",
    "grouped_mm_supported",
    "resolve_impl",
    "routed_grouped",
    "routed_padded",
]

MOE_IMPLS = ("auto", "loop", "grouped", "padded")
ROWS_BACKEND = "auto"  # the grouped path's row shuffles: hymo_mini.moe_rows.ROWS_BACKENDS


def swiglu(x: torch.Tensor, w1: torch.Tensor, w3: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """w2(silu(w1 x) * w3 x) with explicit weights (out, in), as ``SwiGLU`` computes it."""
    return F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2)  # (..., dim)


class ExpertView:
    """Routed expert ``e`` of a :class:`RoutedExperts` read as a SwiGLU. ``w1``, ``w3``
    (inter, dim) and ``w2`` (dim, inter) are views of the stacked weights, not copies:
    calling the view and back-propagating reaches the stack's parameters."""

    def __init__(self, experts: RoutedExperts, e: int):
        self.index = e
        self.w1, self.w3, self.w2 = experts.w1[e], experts.w3[e], experts.w2[e]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return swiglu(x, self.w1, self.w3, self.w2)  # (..., dim) -> (..., dim)

    def __repr__(self) -> str:
        return f"ExpertView(e={self.index}, dim={self.w1.shape[1]}, inter={self.w1.shape[0]})"


class RoutedExperts(nn.Module):
    """``n_experts`` SwiGLU experts as stacked weights: w1, w3 (e, inter, dim), w2 (e, dim,
    inter); expert e computes ``w2[e](silu(w1[e] x) * w3[e] x)``."""

    def __init__(self, n_experts: int, dim: int, inter_dim: int):
        super().__init__()
        self.n_experts, self.dim, self.inter_dim = n_experts, dim, inter_dim
        self.w1 = nn.Parameter(torch.empty(n_experts, inter_dim, dim))  # gate
        self.w3 = nn.Parameter(torch.empty(n_experts, inter_dim, dim))  # up
        self.w2 = nn.Parameter(torch.empty(n_experts, dim, inter_dim))  # down
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        # nn.Linear's default (kaiming-uniform, a = √5: U(±1/√fan_in)), drawn expert by
        # expert in SwiGLU's order w1, w3, w2: the same random numbers as separate modules
        for e in range(self.n_experts):
            for w in (self.w1[e], self.w3[e], self.w2[e]):
                nn.init.kaiming_uniform_(w, a=math.sqrt(5))

    def expert(self, e: int) -> ExpertView:
        if not 0 <= e < self.n_experts:
            raise IndexError(f"expert index e must be in [0, {self.n_experts}), got {e}")
        return ExpertView(self, e)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # checkpoints from before the stacking hold {prefix}{e}.w1.weight, ...: stack them
        for name in ("w1", "w3", "w2"):
            old = [f"{prefix}{e}.{name}.weight" for e in range(self.n_experts)]
            if prefix + name not in state_dict and all(k in state_dict for k in old):
                state_dict[prefix + name] = torch.stack([state_dict.pop(k) for k in old])
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def extra_repr(self) -> str:
        return f"n_experts={self.n_experts}, dim={self.dim}, inter_dim={self.inter_dim}"


# ---- routing helpers ------------------------------------------------------------------
def queue_positions(order: torch.Tensor, n_experts: int):
    """Place of each assignment in its expert's queue, given ``order`` (a,): the expert of
    each assignment, listed in serving order. A stable sort by expert keeps the serving
    order inside each expert; an assignment's place is its sorted row minus the row where
    its expert's group starts. Returns ``position`` (a,) 0-based, ``by_expert`` (a,) the
    assignments sorted by expert, and ``counts`` (e,) assignments per expert."""
    sorted_expert, by_expert = torch.sort(order, stable=True)  # (a,), (a,)
    experts = torch.arange(n_experts, device=order.device)  # (e,)
    starts = torch.searchsorted(sorted_expert, experts)  # (e,) first row of each group
    ends = torch.searchsorted(sorted_expert, experts, right=True)  # (e,) one past its last
    group_start = starts.gather(0, sorted_expert)  # (a,) the first row of each row's group
    rank = torch.arange(order.numel(), device=order.device) - group_start  # (a,)
    position = torch.empty_like(rank).scatter_(0, by_expert, rank)  # (a,) in serving order
    return position, by_expert, ends - starts


def without_autocast(device: torch.device):
    """A context with autocast off for ``device`` (nothing to switch off on meta)."""
    if torch.amp.is_autocast_available(device.type):
        return torch.autocast(device.type, enabled=False)
    return contextlib.nullcontext()


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype the experts compute in: autocast's where it is on for x's device, else x's."""
    kind = x.device.type
    if torch.amp.is_autocast_available(kind) and torch.is_autocast_enabled(kind):
        return torch.get_autocast_dtype(kind)
    return x.dtype


# ---- choosing the path ----------------------------------------------------------------
@functools.cache
def _cpu_grouped_mm_runs(dtype: torch.dtype) -> bool:
    """Whether this torch has a CPU kernel (forward and backward) for ``_grouped_mm``. The
    probe has no rows, so a FLOP counter that is on while it runs counts nothing."""
    # identity hooks: a checkpointed forward that runs the probe first must not count the
    # probe's saved tensors (its recomputation, with the answer cached, would not save them)
    identity = torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t)
    try:  # grad on: a first call under no_grad or inference_mode must not cache False
        with (torch.inference_mode(False), torch.enable_grad(),
              torch.autocast("cpu", enabled=False), identity):
            a = torch.zeros(0, 8, dtype=dtype, requires_grad=True)  # (m=0, k)
            b = torch.zeros(2, 8, 8, dtype=dtype, requires_grad=True)  # (g, k, n)
            y = torch._grouped_mm(a, b, offs=torch.zeros(2, dtype=torch.int32))  # (0, n)
            torch.autograd.grad(y, (a, b), torch.ones_like(y))
        return True
    except (RuntimeError, NotImplementedError):
        return False


def grouped_mm_supported(device: torch.device, dtype: torch.dtype, dim: int,
                         inter_dim: int) -> bool:
    """Whether ``torch._grouped_mm`` runs experts of this shape on ``device`` in ``dtype``
    without a host sync (see the module docstring for the rules and why)."""
    if not hasattr(torch, "_grouped_mm") or dtype not in (torch.float32, torch.bfloat16):
        return False
    if (dim * dtype.itemsize) % 16 or (inter_dim * dtype.itemsize) % 16:
        return False  # the kernels need 16-byte aligned rows
    if device.type == "cuda":
        return (torch.version.hip is None and dtype == torch.bfloat16
                and torch.cuda.get_device_capability(device) == (9, 0))
    return device.type == "cpu" and _cpu_grouped_mm_runs(dtype)


def resolve_impl(impl: str, x: torch.Tensor, experts: RoutedExperts) -> str:
    """The path for ``ModelConfig.moe_impl`` and this input: "loop", "grouped" or "padded".
    On the meta device (shapes only) it is always "padded": the loop needs values."""
    one_of(impl, "moe_impl", MOE_IMPLS)
    if x.is_meta:
        return "padded"
    if impl in ("loop", "padded"):
        return impl
    dtype = compute_dtype(x)
    ok = grouped_mm_supported(x.device, dtype, experts.dim, experts.inter_dim)
    if impl == "grouped" and not ok:
        raise ValueError(f"moe_impl='grouped': torch._grouped_mm cannot run experts "
                         f"(dim={experts.dim}, inter={experts.inter_dim}) on {x.device} in "
                         f"{dtype} without a host sync; use 'auto' or 'padded'")
    return "grouped" if ok else "padded"


# ---- the fast paths -------------------------------------------------------------------
def _combine(y: torch.Tensor, routing) -> torch.Tensor:
    """y (k*n, dim), one row per assignment in choice-major order -> (n, dim): each token's
    k expert outputs times its combine weights (0 where dropped), summed."""
    return _weighted_sum(rearrange(y, "(k n) d -> n k d", k=routing.indices.shape[1]), routing)


def _weighted_sum(ys: torch.Tensor, routing) -> torch.Tensor:
    """ys (n, k, dim) -> (n, dim): each token's k expert outputs times its combine weights
    (0 where dropped), summed."""
    return (ys * routing.combine.to(ys.dtype)[..., None]).sum(dim=1)


class _Rebuilt:
    """Saved-tensor hooks that store, for the tensors named with :meth:`rebuild`, the
    function that recomputes them instead of the tensor: autograd saves the closure and
    calls it when the backward (each backward, under ``retain_graph``) unpacks the slot.
    Any other tensor is saved as usual. The tensors a rebuild reads must not change in
    place before the backward (as autograd demands of what it saves itself): their
    versions are checked when it runs."""

    def __init__(self):
        self.rules = {}  # id(tensor) -> (tensor, function, its sources), during the forward

    def rebuild(self, t: torch.Tensor, fn, *sources: torch.Tensor) -> torch.Tensor:
        self.rules[id(t)] = (t, fn, sources)
        return t

    def pack(self, t):
        rule = self.rules.get(id(t))
        if rule is None or rule[0] is not t:
            return None, t
        _, fn, sources = rule
        return fn, (sources, [s._version for s in sources])

    @staticmethod
    def unpack(packed):
        fn, kept = packed
        if fn is None:
            return kept
        sources, versions = kept
        if any(s._version != v for s, v in zip(sources, versions, strict=True)):
            raise RuntimeError("routed_grouped(recompute=True): a tensor its backward "
                               "recomputes from (x, or x W1 and x W3) was modified in place "
                               "after the forward; change it after the backward, or pass "
                               "recompute=False")
        return fn()

    @contextlib.contextmanager
    def hooks(self, active: bool = True):
        if not active:
            yield self
            return
        try:
            with torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack):
                yield self
        finally:
            self.rules.clear()  # the forward's own references go; the closures stay


def routed_grouped(x: torch.Tensor, routing, experts: RoutedExperts, *,
                   recompute: bool = True, act=swiglu_activation,
                   rows_backend: str | None = None) -> torch.Tensor:
    """The routed experts' output (n, dim) for x (n, dim) with ``torch._grouped_mm``: the
    assignments in expert order, one group of rows per expert.

    The rows move into expert order and back with :mod:`hymo_mini.moe_rows`
    (``rows_backend``, default :data:`ROWS_BACKEND`: one kernel each way on a CUDA GPU, a
    chain of PyTorch ops elsewhere). With ``recompute``, the backward recomputes, instead
    of keeping them from the forward, the rows gathered from x (which the router keeps
    anyway) and the SwiGLU product silu(x W1) * x W3 (and, in the PyTorch chain, the
    output rows put back in token order): copies or element-wise work from tensors the
    backward keeps anyway, cheap against the products. What stays is x W1, x W3, the
    products' output and the weights cast to the compute dtype (under autocast as large
    as the experts' bf16 parameters: casting them again in the backward took longer than
    the products it saved memory for). The numbers are the same either way. ``act``
    computes silu(a) * b (eager or compiled, ``hymo_mini.ffn.activation_for``)."""
    dtype = compute_dtype(x)
    backend = resolve_rows_backend(rows_backend or ROWS_BACKEND, x.device)
    maps = row_maps(routing.by_expert, routing.kept)  # where each assignment's row lives
    ends = routing.counts.cumsum(0).to(torch.int32)  # (e,) one past each group's last row
    # a dropped row reads nothing: its input is zero, so it adds exact zeros (even for a
    # non-finite x) to the output and its expert's gradients; its combine weight is 0 too
    with _Rebuilt().hooks(recompute and torch.is_grad_enabled()) as saved:
        xs = saved.rebuild(gather_rows(x, maps, dtype, backend),  # (k*n, dim)
                           lambda: gather_rows(x, maps, dtype, backend, grad=False), x)
        w1, w3, w2 = (w.to(dtype).transpose(1, 2)
                      for w in (experts.w1, experts.w3, experts.w2))  # (e, in, out)
        h1, h3 = torch._grouped_mm(xs, w1, offs=ends), torch._grouped_mm(xs, w3, offs=ends)
        if act is swiglu_activation:  # eager: SiLU(h1) and the product both rebuilt
            a = saved.rebuild(F.silu(h1), lambda: F.silu(h1), h1)  # (k*n, inter)
            h = saved.rebuild(a * h3, lambda: F.silu(h1) * h3, h1, h3)
        else:  # compiled: one kernel, whose backward keeps h1 and h3 alone; the product is
            # rebuilt by the same compiled function (the closure runs inside the backward)
            h = saved.rebuild(act(h1, h3), lambda: act(h1, h3), h1, h3)
        y = torch._grouped_mm(h, w2, offs=ends)  # (k*n, inter) -> (k*n, dim), expert order
        return combine_rows(y, maps, routing.combine, backend, rebuild=saved.rebuild)


def routed_padded(x: torch.Tensor, routing, experts: RoutedExperts, *,
                  act=swiglu_activation) -> torch.Tensor:
    """The routed experts' output (n, dim) for x (n, dim) as one batched matrix multiply
    over (e, C, dim): assignment (token, choice) kept at queue position p of expert e
    fills slot (e, p); empty slots are zero. ``act`` computes silu(a) * b."""
    n, k = routing.indices.shape
    E, dim = experts.n_experts, experts.dim
    C = min(routing.capacity, n)  # top-k picks distinct experts: never more than n each
    dtype = compute_dtype(x)
    order = rearrange(routing.indices, "n k -> (k n)")  # (k*n,) choice-major
    kept = rearrange(routing.kept, "n k -> (k n)")  # (k*n,)
    position = rearrange(routing.position, "n k -> (k n)")  # (k*n,)
    token = torch.arange(k * n, device=x.device) % n  # (k*n,)
    slot = torch.where(kept, order * C + position, E * C)  # (k*n,); E*C: a spare, unused row
    xs = x.to(dtype).index_select(0, token)  # (k*n, dim)
    slots = xs.new_zeros(E * C + 1, dim).index_add(0, slot, xs)  # (E*C + 1, dim)
    slots = rearrange(slots[:E * C], "(e c) d -> e c d", e=E)  # (e, C, dim)
    w1, w3, w2 = (w.to(dtype) for w in (experts.w1, experts.w3, experts.w2))
    h = act(einsum(slots, w1, "e c d, e i d -> e c i"),
            einsum(slots, w3, "e c d, e i d -> e c i"))  # (e, C, inter)
    y = rearrange(einsum(h, w2, "e c i, e d i -> e c d"), "e c d -> (e c) d")  # (E*C, dim)
    y = torch.cat([y, y.new_zeros(1, dim)]).index_select(0, slot)  # (k*n, dim); dropped: 0
    return _combine(y, routing)


# ---- FLOP counting ----------------------------------------------------------------------
def _grouped_mm_flops(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """2 FLOPs per multiply-add of ``_grouped_mm`` (whose groups partition one operand)."""
    if len(a_shape) == 2 and len(b_shape) == 3:  # (m, k) x (g, k, n): rows split in groups
        return 2 * a_shape[0] * a_shape[1] * b_shape[2]
    if len(a_shape) == 2 and len(b_shape) == 2:  # (m, K) x (K, n): K split (weight grads)
        return 2 * a_shape[0] * a_shape[1] * b_shape[1]
    if len(a_shape) == 3 and len(b_shape) == 2:  # (g, m, k) x (k, N): columns split
        return 2 * a_shape[1] * a_shape[2] * b_shape[1]
    return 2 * a_shape[0] * a_shape[1] * a_shape[2] * b_shape[2]  # (g, m, k) x (g, k, n)


# FlopCounterMode knows no formula for _grouped_mm in torch <= 2.13 (it would count 0)
if hasattr(torch.ops.aten, "_grouped_mm") and torch.ops.aten._grouped_mm not in flop_registry:
    register_flop_formula(torch.ops.aten._grouped_mm)(_grouped_mm_flops)
