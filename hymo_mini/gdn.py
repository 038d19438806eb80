"""The Gated Delta Net mixer: section 5 of the design document.

One GDN layer mixes tokens through a recurrent state instead of attention:

    u = silu(causal_conv(in_proj(x)))                    (b, t, inner), inner = H · D
    v = u as heads                                       (b, t, H, D)
    b, c = b_proj(u), c_proj(u)  (+ RoPE)                (b, t, H, S): write, read keys
    g = sigmoid(dt_proj(u) + dt_bias)                    (b, t, H): decay gate in (0, 1)
    A = -exp(A_log)                                      (H, S): negative rates
    o = recurrence(v, b, c, g, A) + D ⊙ v                (b, t, H, D)
    y = out_proj(o · out_gate) + skip_proj(x)            (b, t, dim)

The recurrence is one of two rules (``hymo_mini.ops``): the document's (``gdn_rule="gla"``),
H_t = exp(g_t A) ⊙ H_{t-1} + b_t ⊗ v_t, o_t = c_tᵀ H_t, which has no erasure term and is
gated linear attention although the document calls it a delta rule; or the true gated
delta rule (``gdn_rule="delta"``), which decays, then erases what b_t reads before writing
β_t v_t, with unit keys b, c and a write strength β = sigmoid(beta_proj(u)) per head.

``skip_proj`` is the document's own linear path around the whole layer. The block around
the mixer (a norm and the residual, or neither: ``gdn_residual``) is
``hymo_mini.blocks.GDNBlock``. :func:`gdn_forward` is the one function that composes the
layer (norm, the steps before the recurrence, the recurrence, the steps after it, the
residual): the mixer, the block, eager, compiled and decoding all run it.

Readings chosen where the document contradicts itself:

* **RoPE goes on b and c, not on v.** Section 7.6 rotates v; the RoPE appendix rotates b
  and c. Only the two vectors that meet in a dot product give relative-position
  behaviour: with b_s, c_t rotated, o_t = sum_s w_ts (R_t c_t)·(R_s b_s) v_s and
  (R_t c)·(R_s b) = c·R_{s-t} b. Rotating v instead would put the absolute position of
  each written value into the output. (Exact only while the two dims of a rotary pair
  share one decay rate, as they do at initialisation.)
* **The decay gate is sigmoid(dt_proj(v) + dt_bias)**, one scalar per head (section
  5.2.1, and dt_bias is in the parameter count). The mean over D of sigmoid(g_proj(v))
  (section 5.4.3) is the *output* gate of step 6. Used this way every projection
  receives a gradient; using g_proj for both would leave dt_proj and dt_bias dead.
* **A_log has shape (heads, d_state)**, as the parameter count (40 × 32) says, initialised
  per head to log(1..H) as in section 5.3.2.

Layouts: v (B, T, H, D); b, c (B, T, H, S); g (B, T, H); A (H, S); state (B, H, S, D) fp32.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange, reduce
from torch import nn

from hymo_mini.config import ModelConfig
from hymo_mini.ops import gated_delta_rule, gated_linear_attention
from hymo_mini.rope import RotaryEmbedding

__all__ = ["GatedDeltaNet", "gdn_forward", "recurrence", "shifted_causal_conv"]


def shifted_causal_conv(u: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The causal depthwise conv of u (b, t, e) with ``nn.Conv1d``'s weight (e, 1, k) and
    zero history, as k shifted multiply-adds: out_t = Σ_j w_j u_(t - k + 1 + j)."""
    k, T = weight.shape[-1], u.shape[1]
    padded = F.pad(u, (0, 0, k - 1, 0))  # (b, k - 1 + t, e)
    w = weight[:, 0, :].to(u.dtype)  # (e, k)
    out = padded[:, :T] * w[:, 0]
    for j in range(1, k):
        out = out + padded[:, j:j + T] * w[:, j]
    return out  # (b, t, e)


@torch.compiler.disable
def recurrence(rule, v, b, c, g, A, beta, state, keep_state: bool, backend: str):
    """The mixer's call into ``hymo_mini.ops``: (o (b, t, h, d), final state or None).

    Marked ``torch.compiler.disable``: when the GDN block is compiled (``gdn_impl``), Dynamo
    stops here and runs this call eagerly (a graph break), so the kernels stay the custom
    autograd Functions they are and compile never traces into Triton launch code. The
    work before and after it is compiled as two graphs. (g and A are finite by
    construction, a sigmoid and -exp: no value check, no host sync.)"""
    run = dict(initial_state=state, output_final_state=keep_state, backend=backend,
               check_values=False)
    if rule == "delta":
        return gated_delta_rule(v, b, c, g, A, beta, **run)
    return gated_linear_attention(v, b, c, g, A, **run)


class GatedDeltaNet(nn.Module):
    """The GDN mixer: in_proj → causal depthwise conv → SiLU → b, c, gates (→ RoPE on b, c)
    → recurrence → + D·v skip → output gate → out_proj, plus skip_proj(x).

    ``config.gdn_rule = "delta"`` adds ``beta_proj`` (per-head write strength), normalises
    b and c, and runs the gated delta rule. :meth:`step` continues a sequence from a
    cache (conv window + recurrent state) for token-by-token decoding."""

    def __init__(self, config: ModelConfig, layer_idx: int = 0, use_rope: bool = True):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.use_rope = use_rope
        inner = config.gdn_d_inner
        H, S, D = config.gdn_n_heads, config.gdn_d_state, config.gdn_headdim
        self.n_heads, self.d_state, self.headdim = H, S, D
        self.in_proj = nn.Linear(config.dim, inner, bias=False)
        self.conv1d = nn.Conv1d(inner, inner, config.gdn_d_conv, groups=inner,
                                padding=config.gdn_d_conv - 1, bias=False)
        self.b_proj = nn.Linear(inner, H * S, bias=False)  # write keys
        self.c_proj = nn.Linear(inner, H * S, bias=False)  # read keys
        self.dt_proj = nn.Linear(inner, H, bias=False)  # decay gate, one scalar per head
        self.g_proj = nn.Linear(inner, inner, bias=False)  # output gate
        self.out_proj = nn.Linear(inner, config.dim, bias=False)
        self.skip_proj = nn.Linear(config.dim, config.dim, bias=False)  # around the layer
        # multi-scale init of section 5.3.2: head h decays at rate h + 1 on every state dim
        a_init = torch.log(torch.arange(1, H + 1, dtype=torch.float32))
        self.A_log = nn.Parameter(a_init[:, None].repeat(1, S))  # (H, S)
        self.dt_bias = nn.Parameter(torch.zeros(H))
        self.D = nn.Parameter(torch.ones(H))  # per-head skip of v around the state
        self.rope = (RotaryEmbedding(config.gdn_rope_dim, config.max_seq_len, config.rope_theta)
                     if use_rope and config.gdn_rope_dim > 0 else None)
        self.rule = config.gdn_rule
        if self.rule == "delta":
            self.beta_proj = nn.Linear(inner, H, bias=False)  # write strength per head

    def _conv(self, x: torch.Tensor, window: torch.Tensor | None = None):
        """in_proj → causal depthwise conv → SiLU. ``window`` (b, inner, d_conv - 1) holds
        the in_proj outputs of the previous tokens (decoding); returns (u, new window)."""
        T = x.shape[1]
        if window is None and torch.compiler.is_compiling():
            # compiled (gdn_impl): the conv as d_conv shifted multiply-adds in (b, t, inner)
            # order, which inductor fuses with the SiLU, forward and backward, where a
            # depthwise conv stays a library kernel with a layout copy on either side
            return F.silu(shifted_causal_conv(self.in_proj(x), self.conv1d.weight)), None
        u = rearrange(self.in_proj(x), "b t e -> b e t")  # (b, inner, t)
        if window is None:  # training: zero history, drop the conv's tail
            mixed, keep = self.conv1d(u)[..., :T], None  # (b, inner, t)
        else:
            history = torch.cat([window.to(u.dtype), u], dim=-1)  # (b, inner, d_conv - 1 + t)
            mixed = F.conv1d(history, self.conv1d.weight, groups=u.shape[1])  # (b, inner, t)
            keep = history[..., history.shape[-1] - window.shape[-1]:]  # last d_conv - 1
        # one copy into (b, t, inner) order here: left as a transposed view, every projection
        # that reads u (b, c, dt, g, beta) and the kernel's v would each copy it (and
        # autograd would keep each copy for the backward)
        mixed = rearrange(mixed, "b e t -> b t e").contiguous()  # (b, t, inner)
        return F.silu(mixed), keep

    def gdn_inputs(self, x: torch.Tensor, start_pos: int = 0):
        """The recurrence's inputs from the mixer input x (b, t, dim). Exposed so the book
        can show each tensor; returns v, b, c, g (decay gate), A, out_gate."""
        return self._heads(self._conv(x)[0], start_pos)

    def _heads(self, u: torch.Tensor, start_pos: int = 0):
        v = rearrange(u, "b t (h d) -> b t h d", h=self.n_heads)
        b = rearrange(self.b_proj(u), "b t (h s) -> b t h s", h=self.n_heads)
        c = rearrange(self.c_proj(u), "b t (h s) -> b t h s", h=self.n_heads)
        if self.rule == "delta":  # unit keys: the erasure I - β b bᵀ is a contraction
            b, c = F.normalize(b, dim=-1), F.normalize(c, dim=-1)
        if self.rope is not None:
            b, c = self.rope(b, start_pos), self.rope(c, start_pos)
        g = torch.sigmoid(self.dt_proj(u) + self.dt_bias)  # (b, t, h) in (0, 1)
        out_gate = reduce(torch.sigmoid(self.g_proj(u)), "b t (h d) -> b t h", "mean",
                          h=self.n_heads)
        A = -torch.exp(self.A_log)  # (h, s), strictly negative
        return v, b, c, g, A, out_gate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gdn_forward(self, x)[0]  # (b, t, dim)

    def step(self, x: torch.Tensor, conv_window: torch.Tensor | None = None,
             state: torch.Tensor | None = None, start_pos: int = 0):
        """Run ``x`` (b, t, dim) as the continuation of a sequence whose cache is
        ``conv_window`` (b, inner, d_conv - 1) and ``state`` (b, h, s, d) fp32; None means
        the sequence starts here. Returns ``(y, conv_window, state)``; ``start_pos`` is the
        position of x's first token (for RoPE)."""
        return gdn_forward(self, x, conv_window=self.window(x, conv_window), state=state,
                           start_pos=start_pos, keep_state=True)

    def window(self, x: torch.Tensor, conv_window: torch.Tensor | None) -> torch.Tensor:
        """``conv_window``, or the empty history (b, inner, d_conv - 1) of a new sequence."""
        if conv_window is not None:
            return conv_window
        return x.new_zeros(x.shape[0], self.config.gdn_d_inner, self.config.gdn_d_conv - 1)

    def prepare(self, x: torch.Tensor, conv_window: torch.Tensor | None = None,
                start_pos: int = 0):
        """Everything before the recurrence, from the mixer input x (b, t, dim):
        ``(v, b, c, g, A, beta or None, out_gate, conv_window)``."""
        u, conv_window = self._conv(x, conv_window)  # (b, t, inner)
        v, b, c, g, A, out_gate = self._heads(u, start_pos)
        beta = torch.sigmoid(self.beta_proj(u)) if self.rule == "delta" else None  # (b, t, h)
        return v, b, c, g, A, beta, out_gate, conv_window

    def finish(self, o: torch.Tensor, v: torch.Tensor, out_gate: torch.Tensor,
               x: torch.Tensor) -> torch.Tensor:
        """Everything after it: the D·v skip, the output gate, out_proj, + skip_proj(x)."""
        o = o + self.D[:, None] * v  # skip around the state
        o = o * out_gate[..., None]
        return self.out_proj(rearrange(o, "b t h d -> b t (h d)")) + self.skip_proj(x)


def gdn_forward(mixer: GatedDeltaNet, x: torch.Tensor, *, norm: nn.Module | None = None,
                residual: bool = False, conv_window: torch.Tensor | None = None,
                state: torch.Tensor | None = None, start_pos: int = 0,
                keep_state: bool = False):
    """The GDN layer on x (b, t, dim): h = norm(x) (x without a norm), ``mixer.prepare(h)``,
    the recurrence, ``mixer.finish``, then + x with ``residual``. Returns
    ``(y (b, t, dim), conv_window, final state or None)``.

    The mixer alone (``norm=None``) and the block (its norm, and the residual add under
    ``gdn_residual="identity"``) both run this function, eagerly or compiled
    (``gdn_impl``). It stays one frame so that compile, which stops at the recurrence
    (``torch.compiler.disable``), cuts a block into two graphs, before and after it; a stop
    inside a nested call would cut it into four."""
    h = x if norm is None else norm(x)  # (b, t, dim)
    v, b, c, g, A, beta, out_gate, conv_window = mixer.prepare(h, conv_window, start_pos)
    o, state = recurrence(mixer.rule, v, b, c, g, A, beta, state, keep_state,
                          mixer.config.gdn_backend)  # (b, t, h, d)
    y = mixer.finish(o, v, out_gate, h)  # (b, t, dim)
    return (x + y if residual else y), conv_window, state
