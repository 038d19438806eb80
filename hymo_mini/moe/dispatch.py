"""The MoE layer's fast dispatch: the routed experts run without a host sync.

The routing (:meth:`hymo_mini.moe.DeepSeekMoE.route`) feeds three paths, chosen by
``ModelConfig.moe_impl`` (see :func:`resolve_impl`); all three compute the same numbers
(the tests check outputs and gradients against the loop):

* ``"loop"``: the readable reference, ``DeepSeekMoE.routed_loop``: per expert, find its
  tokens (``nonzero``, a host sync on a GPU), run it, scatter back.
* ``"padded"`` (:func:`routed_padded`): each expert gets ``C = min(capacity, n)`` slots,
  one batched matrix multiply over (e, C, dim), empty slots zero. Static shapes, works on
  every device and dtype; costs ``E·C`` rows instead of ``k·n`` (at inference, where
  ``C = n``, ``E/k`` times the work of the other paths).
* ``"grouped"`` (:func:`routed_grouped`): the ``k·n`` assignments sorted by expert (the
  stable sort the routing already did) and every expert run as one grouped matrix multiply,
  ``torch._grouped_mm``. Offsets are read on the device: no host sync. A dropped assignment
  keeps its row in its expert's group but the row's input is zeroed, so it adds exact zeros
  to the output and to the weight gradients (the rows are computed all the same).
* ``"auto"``: ``"grouped"`` where :func:`grouped_mm_supported` says so, else ``"padded"``.

Where ``torch._grouped_mm`` runs without a host sync. Its signature is
``_grouped_mm(mat_a, mat_b, offs=None, bias=None, out_dtype=None)`` with int32 offsets, the
cumulative group ends (pytorch/pytorch#150374). On CUDA, torch's CUTLASS kernel needs
compute capability 9.0 or 10.0 and bf16 operands, and every other case falls back to a loop
that copies the offsets to the host. We use it on sm90 only: on sm100, zero-token groups
have been reported to get non-zero weight gradients (pytorch/pytorch#172439). On the CPU its
loop reads offsets that are already on the host; whether this torch has the CPU kernel is
probed once per dtype. All paths need 16-byte aligned rows (dim and inter_dim times the
element size divisible by 16). ``_grouped_mm`` is not an autocast op
(pytorch/pytorch#174763), so the fast paths cast to autocast's dtype themselves.

**The grouped path's two row shuffles**, into expert order and back:

    gather    xs[r] = x[token(r)] in the compute dtype, 0 if assignment r was dropped
                                                               (k·n, dim), expert order
    combine   out[t] = Σ_j combine[t, j] · y[row(t, j)]        (n, dim), token order

In PyTorch each is a chain of full passes: a cast, an ``index_select`` and a ``where`` for
the gather; an ``index_select`` (back to choice-major order), a multiply and a sum for the
combine, and their backwards as many again. On a CUDA GPU each direction is one Triton
kernel, one program per row, that reads its rows where they lie
(:mod:`hymo_mini.moe.kernels`, imported only when used). The index arrays, all (k·n,) int64,
choice-major (assignment a = j·n + t) or in expert order, are made by :func:`row_maps`.
``ROWS_BACKEND`` ("auto", "torch" or "triton"): "auto" takes the kernels on a CUDA GPU and
the PyTorch chain elsewhere (the tests run the kernels in the Triton interpreter against it).
"""

from __future__ import annotations

import contextlib
import functools

import torch
import torch.nn.functional as F
from einops import einsum, rearrange
from torch.utils.flop_counter import flop_registry, register_flop_formula

from hymo_mini.choices import one_of
from hymo_mini.ffn import swiglu_activation
from hymo_mini.ops import triton_usable

__all__ = [
    "MOE_IMPLS",
    "ROWS_BACKENDS",
    "compute_dtype",
    "grouped_mm_supported",
    "resolve_impl",
    "routed_padded",
    "routed_grouped",
    "RowMaps",
    "row_maps",
    "resolve_rows_backend",
    "gather_rows",
    "combine_rows",
]

MOE_IMPLS = ("auto", "loop", "grouped", "padded")
ROWS_BACKENDS = ("auto", "torch", "triton")
ROWS_BACKEND = "auto"  # the grouped path's row shuffles: one of ROWS_BACKENDS


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


def resolve_impl(impl: str, x: torch.Tensor, experts) -> str:
    """The path for ``ModelConfig.moe_impl`` and this input: "loop", "grouped" or "padded"
    (``experts``: the layer's ``RoutedExperts``). On the meta device (shapes only) it is
    always "padded": the loop needs values."""
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


# ---- the padded path -----------------------------------------------------------------
def routed_padded(x: torch.Tensor, routing, experts, *,
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
    ys = rearrange(y, "(k n) d -> n k d", k=k)  # each token's k expert outputs
    return (ys * routing.combine.to(ys.dtype)[..., None]).sum(dim=1)  # (n, dim)


# ---- the grouped path ----------------------------------------------------------------
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


def routed_grouped(x: torch.Tensor, routing, experts, *,
                   recompute: bool = True, act=swiglu_activation,
                   rows_backend: str | None = None) -> torch.Tensor:
    """The routed experts' output (n, dim) for x (n, dim) with ``torch._grouped_mm``: the
    assignments in expert order, one group of rows per expert.

    The rows move into expert order and back with :func:`gather_rows` and
    :func:`combine_rows` (``rows_backend``, default ``ROWS_BACKEND``: one kernel each way
    on a CUDA GPU, a chain of PyTorch ops elsewhere). With ``recompute``, the backward
    recomputes, instead of keeping them from the forward, the rows gathered from x (which
    the router keeps anyway) and the SwiGLU product silu(x W1) * x W3 (and, in the PyTorch
    chain, the output rows put back in token order): copies or element-wise work from
    tensors the backward keeps anyway, cheap against the products. What stays is x W1,
    x W3, the products' output and the weights cast to the compute dtype (under autocast as
    large as the experts' bf16 parameters: casting them again in the backward costs more
    time than the memory is worth). The numbers are the same either way. ``act`` computes
    silu(a) * b (eager or compiled, ``hymo_mini.ffn.activation_for``)."""
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


# ---- the grouped path's row shuffles ----------------------------------------------------
class RowMaps:
    """Where each assignment's row lives, for ``n`` tokens and ``k`` choices.

    ``src`` (k·n,) expert order: the token a row reads, -1 if dropped;
    ``row`` (k·n,) choice-major: the expert-order row of assignment j·n + t;
    ``kept_row`` (k·n,) choice-major: that row, or -1 if the assignment was dropped."""

    def __init__(self, src, row, kept_row, n, k):
        self.src, self.row, self.kept_row, self.n, self.k = src, row, kept_row, n, k


def row_maps(by_expert: torch.Tensor, kept: torch.Tensor) -> RowMaps:
    """The maps for ``by_expert`` (k·n,) (assignment ids sorted by expert) and ``kept``
    (n, k) bool."""
    n, k = kept.shape
    kept_flat = kept.t().reshape(-1)  # (k*n,) choice-major
    row = torch.empty_like(by_expert).scatter_(
        0, by_expert, torch.arange(by_expert.numel(), device=by_expert.device))  # (k*n,)
    src = torch.where(kept_flat.gather(0, by_expert), by_expert % n, -1)  # (k*n,)
    return RowMaps(src, row, torch.where(kept_flat, row, -1), n, k)


def resolve_rows_backend(backend: str, device: torch.device) -> str:
    """"torch" or "triton" for ``backend`` (one of ``ROWS_BACKENDS``) on ``device``."""
    one_of(backend, "rows backend", ROWS_BACKENDS)
    if backend == "auto":
        return "triton" if device.type == "cuda" and triton_usable(device) else "torch"
    if backend == "triton" and not triton_usable(device):
        raise RuntimeError("rows backend 'triton' needs a CUDA GPU, or the Triton interpreter "
                           "on CPU (TRITON_INTERPRET=1 before the kernels are imported); use "
                           "'torch'")
    return backend


# the PyTorch chains: the reference the kernels are tested against
def _gather_torch(x, maps: RowMaps, dtype):
    rows = x.to(dtype).index_select(0, maps.src.clamp(min=0))  # (k*n, dim)
    return torch.where((maps.src >= 0)[:, None], rows, 0)


def _unsort(y, maps: RowMaps):
    return y.index_select(0, maps.row).reshape(maps.k, maps.n, y.shape[1])  # (k, n, dim)


def _combine_torch(y, maps: RowMaps, w, rebuild=None):
    ys = _unsort(y, maps)
    if rebuild is not None:  # saved-tensor hooks: rebuild ys in the backward, keep y
        ys = rebuild(ys, lambda: _unsort(y, maps), y)
    return (ys * w.t().to(y.dtype)[..., None]).sum(dim=0)  # (n, dim)


def gather_rows(x: torch.Tensor, maps: RowMaps, dtype: torch.dtype, backend: str = "auto",
                grad: bool = True) -> torch.Tensor:
    """xs (k·n, dim) in ``dtype``: row r is x[maps.src[r]] (x (n, dim)), zeros where
    ``src`` is -1. Differentiable in x unless ``grad`` is False (a rebuild in a backward)."""
    if resolve_rows_backend(backend, x.device) == "torch":
        return _gather_torch(x, maps, dtype)
    from hymo_mini.moe.kernels import gather_rows_triton

    return gather_rows_triton(x, maps, dtype, grad)


def combine_rows(y: torch.Tensor, maps: RowMaps, w: torch.Tensor, backend: str = "auto",
                 rebuild=None) -> torch.Tensor:
    """out (n, dim) in y's dtype: out[t] = Σ_j w[t, j] · y[maps.row[j·n + t]] for y
    (k·n, dim) in expert order and w (n, k). Differentiable in y and w. The kernel keeps
    y for the backward; the PyTorch chain keeps the rows in token order, or, given
    ``rebuild`` (the grouped path's saved-tensor hooks), rebuilds them from y."""
    if resolve_rows_backend(backend, y.device) == "torch":
        return _combine_torch(y, maps, w, rebuild)
    from hymo_mini.moe.kernels import combine_rows_triton

    return combine_rows_triton(y, maps, w)


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
