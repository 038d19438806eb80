"""The MoE layer: section 8 of the design document.

``DeepSeekMoE`` is the feed-forward of every MLA block. Each token goes through the shared
expert(s) and through ``top_k`` of ``n_routed`` SwiGLU experts chosen by a router:

    logits = W_gate x                       computed in fp32 whatever x's dtype
    probs  = softmax(logits)                (n, e), fp32
    chosen = top_k(probs + expert_bias)     the bias moves the choice, nothing else
    y      = sum_shared S(x) + sum_{i in chosen, kept} probs_i * E_i(x)

Readings chosen where the document is unclear or contradicts itself (the book shows each):

* **The balancing bias is not the gate's bias.** Section 8.2.1 builds the gate with
  ``bias=True`` and section 10 initialises ``gate.bias = 0`` inline, while section 8.4 says
  the aux-loss-free method "adjusts gate biases" with "no gradient pollution". A trained
  ``gate.bias`` would receive gradients and enter the mixing weights. We follow DeepSeek-V3:
  the gate has no bias; a separate buffer ``expert_bias`` (no gradient) is added to the
  probabilities *only to choose* experts, and ``update_bias`` moves it once per optimizer
  step from an EMA of each expert's load (±``bias_update_rate`` outside a ±``load_deadband``
  band around the uniform load 1/E).
* **Combine weights are the chosen experts' probabilities, not renormalised** (the
  document's ``top_weights`` are taken straight from ``softmax`` over all experts). With 16
  experts and a near-uniform router at init each weight is about 1/16.
* **Capacity.** In training, ``config.moe_capacity(n) = ceil(capacity_factor * n * top_k /
  n_routed)`` slots per expert. Assignments beyond an expert's capacity are dropped (they
  contribute zero); first choices are served before second choices, then earlier tokens
  first. The queue positions come from one stable sort of the choice-major assignments by
  expert (:func:`queue_positions`), not an (n·k, e) one-hot cumsum. The
  document's worked example "1.5 × (4 × 4096 × 2) / 16 = 768" is wrong:
  4 × 4096 × 2 = 32,768; / 16 = 2,048; × 1.5 = **3,072** slots per expert. (Its claim that
  fewer than 0.1% of tokens are dropped at this factor is a measurement we cannot repeat.)
  Dropping couples the tokens of a batch: since every first choice is served before any
  second choice, a later token's first choice can take the slot an earlier token's second
  choice needed. When something is dropped, a token's output can therefore depend on
  later tokens (and on other sequences in the batch); when nothing is dropped, it cannot.
  **In evaluation mode nothing is dropped** (capacity = every token, as DeepSeek-V3 does
  at inference), so ``eval()`` forwards and generation are causal and per-sequence.
* **No biases in the experts.** The document's expert code uses ``nn.Linear``'s default
  ``bias=True``, but its count 896 × 2304 × 3 = 6,193,152 per expert has none (the biases
  would add 2,304 + 896 + 2,304 = 5,504). We use ``bias=False``.
* **Parameter counts** (hymo_750m, see :func:`moe_param_counts`): per MoE layer the gate
  has 896 × 16 = 14,336; active = 2 routed + 1 shared expert + gate = **18,593,792**
  (18.59M); stored = 16 + 1 experts + gate = **105,297,920** (105.3M). Section 12.2.4's
  opening line "132.1M active and 1,170.4M stored per layer" is wrong; its own arithmetic
  a few lines below (18.57M / 105.2M, gate omitted) is right.
* **The fp32 router.** bf16 keeps 8 significant bits (7 stored + 1 implicit): near 0.12 its
  spacing is 2^-11 ≈ 4.9e-4, so 0.1234567 and 0.1234570 both round to 0.12353515625. fp32
  keeps 24 bits (spacing 2^-27 ≈ 7.5e-9 there) and does tell them apart, so that part of
  section 8.7 is true. But its ``gate_forward`` then returns ``logits.to(x.dtype)``,
  rounding the logits back to bf16 before softmax and top-k, which throws the precision
  away again. Here the logits, probabilities and the top-k stay fp32, under autocast too.
* **The routed experts** are three stacked weights (:class:`RoutedExperts`): ``w1`` and
  ``w3`` (e, inter, dim), ``w2`` (e, dim, inter), drawn expert by expert as ``E`` separate
  ``nn.Linear(bias=False)`` layers would be. ``moe.experts.expert(e)`` reads one as a SwiGLU.
* **Dispatch** (``config.moe_impl``). The same routing feeds the readable loop below (per
  expert: find its tokens, run it, scatter back; the one the book teaches) or a fast path
  in :mod:`hymo_mini.moe.dispatch` (a grouped matrix multiply over the assignments sorted
  by expert, or a padded batched one) with no host sync; ``"auto"`` picks the fast one.
  Drop statistics stay on the device.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from hymo_mini.config import ModelConfig
from hymo_mini.ffn import SwiGLU, activation_for, swiglu_param_count
from hymo_mini.moe.dispatch import compute_dtype, resolve_impl, routed_grouped, routed_padded

__all__ = ["Routing", "DeepSeekMoE", "RoutedExperts", "ExpertView", "swiglu",
           "queue_positions", "without_autocast", "moe_param_counts"]


def moe_param_counts(config: ModelConfig) -> tuple[int, int]:
    """(stored, active) parameters of one ``DeepSeekMoE`` layer."""
    expert = swiglu_param_count(config.dim, config.moe_inter_dim)
    gate = config.dim * config.n_routed_experts
    stored = (config.n_routed_experts + config.n_shared_experts) * expert + gate
    active = (config.n_activated_experts + config.n_shared_experts) * expert + gate
    return stored, active


# ---- the routed experts' weights --------------------------------------------------------
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
        # expert in SwiGLU's order w1, w3, w2: the numbers separate SwiGLU modules would get
        for e in range(self.n_experts):
            for w in (self.w1[e], self.w3[e], self.w2[e]):
                nn.init.kaiming_uniform_(w, a=math.sqrt(5))

    def expert(self, e: int) -> ExpertView:
        if not 0 <= e < self.n_experts:
            raise IndexError(f"expert index e must be in [0, {self.n_experts}), got {e}")
        return ExpertView(self, e)

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


# ---- the layer -------------------------------------------------------------------------
@dataclass
class Routing:
    """What the router decided for ``n`` tokens (flattened batch × time)."""

    probs: torch.Tensor  # (n, e) fp32 softmax over all routed experts
    indices: torch.Tensor  # (n, k) chosen experts, first choice first
    weights: torch.Tensor  # (n, k) fp32 probabilities of the chosen experts
    kept: torch.Tensor  # (n, k) bool, False where the expert was full
    combine: torch.Tensor  # (n, k) fp32 weights * kept: what multiplies each expert output
    counts: torch.Tensor  # (e,) assignments per expert before capacity
    capacity: int  # slots per expert (n in evaluation mode: nothing is dropped)
    position: torch.Tensor  # (n, k) place in the chosen expert's queue, 0-based
    by_expert: torch.Tensor  # (k*n,) assignment ids (choice * n + token) sorted by expert


class DeepSeekMoE(nn.Module):
    """Shared + routed SwiGLU experts with top-k routing, capacity and a balancing bias."""

    def __init__(self, config: ModelConfig, layer_idx: int = 0):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.dim = config.dim
        self.n_routed = config.n_routed_experts
        self.top_k = config.n_activated_experts
        self.experts = RoutedExperts(self.n_routed, config.dim, config.moe_inter_dim)
        self.shared_experts = nn.ModuleList(
            SwiGLU(config.dim, config.moe_inter_dim) for _ in range(config.n_shared_experts))
        self.swiglu_impl = config.swiglu_impl  # the routed and shared experts' activation
        self.gate = nn.Linear(config.dim, self.n_routed, bias=False)
        nn.init.normal_(self.gate.weight, mean=0.0, std=config.router_init_std)
        E = self.n_routed
        # routing state: persistent (saved with the model), never trained by gradients
        self.register_buffer("expert_bias", torch.zeros(E))  # (e,) used only to choose
        self.register_buffer("load_ema", torch.full((E,), 1.0 / E))  # (e,) fraction of load
        # assignments counted by training forwards since the last update_bias()
        self.register_buffer("pending_counts", torch.zeros(E, dtype=torch.long),
                             persistent=False)  # (e,) int64
        # the last forward's statistics, kept on the device (reading them is the sync)
        self.last_counts: torch.Tensor | None = None  # (e,) int64
        self.last_dropped = torch.zeros((), dtype=torch.long)  # () dropped assignments
        self.last_capacity: int = 0

    @property
    def swiglu_impl(self) -> str:
        """``swiglu_impl`` of every expert, routed and shared; setting it sets both."""
        return self._swiglu_impl

    @swiglu_impl.setter
    def swiglu_impl(self, impl: str) -> None:
        self._swiglu_impl = impl
        for shared in self.shared_experts:
            shared.impl = impl

    # ---- routing ---------------------------------------------------------------------
    def route(self, x: torch.Tensor) -> Routing:
        """Router decisions for x (..., dim); no side effects. In training mode each expert
        takes ``config.moe_capacity(n)`` assignments; in evaluation mode all of them."""
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must have last dimension dim={self.dim}, "
                             f"got shape {tuple(x.shape)}")
        x = x.reshape(-1, self.dim)  # (n, dim)
        n, E, k = x.shape[0], self.n_routed, self.top_k
        with without_autocast(x.device):  # the router is fp32 even under autocast
            logits = F.linear(x.float(), self.gate.weight.float())  # (n, e) fp32
        probs = logits.softmax(dim=-1)  # (n, e) fp32
        indices = torch.topk(probs + self.expert_bias, k, dim=-1).indices  # (n, k)
        weights = probs.gather(-1, indices)  # (n, k) unbiased, not renormalised
        capacity = self.config.moe_capacity(n) if self.training else n
        # queue position of each assignment at its expert: all first choices in token
        # order, then all second choices, ...
        order = rearrange(indices, "n k -> (k n)")  # (k*n,) choice-major
        position, by_expert, counts = queue_positions(order, E)  # (k*n,), (k*n,), (e,)
        position = rearrange(position, "(k n) -> n k", k=k)  # (n, k)
        kept = position < capacity  # (n, k) bool
        return Routing(probs=probs, indices=indices, weights=weights, kept=kept,
                       combine=weights * kept, counts=counts, capacity=capacity,
                       position=position, by_expert=by_expert)

    # ---- forward ---------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        routing = self.route(x)
        shape = x.shape
        x = x.reshape(-1, self.dim)  # (n, dim)
        impl = resolve_impl(self.config.moe_impl, x, self.experts)
        act = activation_for(self.swiglu_impl, x, self.training)
        if impl == "loop":
            out = self.routed_loop(x, routing)
        elif impl == "grouped":
            out = routed_grouped(x, routing, self.experts, act=act)
        else:
            out = routed_padded(x, routing, self.experts, act=act)
        for shared in self.shared_experts:
            out = out + shared(x)  # every token
        self._record(routing)
        return out.reshape(shape)  # (..., dim)

    def routed_loop(self, x: torch.Tensor, routing: Routing) -> torch.Tensor:
        """The routed experts' output (n, dim) for x (n, dim), expert by expert: the
        reference every fast path is tested against."""
        out = x.new_zeros(x.shape, dtype=compute_dtype(x))  # (n, dim) in the experts' dtype
        for e in range(self.n_routed):
            token, slot = torch.nonzero((routing.indices == e) & routing.kept, as_tuple=True)
            if token.numel() == 0:
                continue
            y = self.experts.expert(e)(x[token])  # (m, dim) for the m tokens it serves
            w = routing.combine[token, slot].to(y.dtype)  # (m,)
            out = out.index_add(0, token, y * w[:, None])  # scatter back: (n, dim)
        return out

    @torch.no_grad()
    def _record(self, routing: Routing) -> None:
        self.last_counts = routing.counts.detach()  # (e,)
        self.last_dropped = (~routing.kept).sum()  # () on the device: no sync
        self.last_capacity = routing.capacity
        if self.training:
            self.pending_counts += routing.counts

    def _apply(self, fn, recurse=True):
        # Keep the balancing state fp32 when the module is cast (``model.bfloat16()``):
        # in bf16, 1 - 0.001 rounds to 1, so the load EMA would never move.
        super()._apply(fn, recurse)
        self.expert_bias = self.expert_bias.float()
        self.load_ema = self.load_ema.float()
        return self

    # ---- aux-loss-free balancing -----------------------------------------------------
    @torch.no_grad()
    def update_bias(self) -> None:
        """Once per optimizer step: fold the load seen since the last call into
        ``load_ema`` and nudge ``expert_bias`` against over- and under-loaded experts.

        The load is counted over every *training* forward since the last call (all
        gradient-accumulation micro-batches; evaluation forwards do not count). With a
        single forward per step this is ``last_counts``. Does nothing if no training
        forward has run since the last call.
        """
        total = self.pending_counts.sum()  # () int64
        seen = total > 0  # () bool; no Python branch on it, so no host sync
        c = self.config
        E = self.n_routed
        load = self.pending_counts.float() / total.clamp(min=1)  # (e,) fractions summing to 1
        ema = torch.where(seen, self.load_ema * (1 - c.load_ema_alpha) + c.load_ema_alpha * load,
                          self.load_ema)  # (e,)
        overloaded = ema > (1 + c.load_deadband) / E  # (e,) bool
        underloaded = ema < (1 - c.load_deadband) / E  # (e,) bool
        step = (underloaded.float() - overloaded.float()) * seen  # (e,) in {-1, 0, 1}
        self.load_ema.copy_(ema)
        self.expert_bias += c.bias_update_rate * step.to(self.expert_bias.dtype)
        self.pending_counts.zero_()

    def extra_repr(self) -> str:
        return (f"layer_idx={self.layer_idx}, n_routed={self.n_routed}, top_k={self.top_k}, "
                f"n_shared={len(self.shared_experts)}")
