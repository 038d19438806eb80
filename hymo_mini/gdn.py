"""Gated Delta Net linear attention: section 5 of the design document.

The recurrence, per batch element and head (S = key size, D = value size):

    H_t = exp(g_t * A) ⊙ H_{t-1} + b_t ⊗ v_t        H_t: (S, D), decay broadcast over D
    o_t = c_t^T H_t                                  o_t: (D,)

``b`` writes, ``c`` reads, ``g_t`` in (0, 1) is a per-head gate and ``A = -exp(A_log)`` is a
negative per-head, per-state-dimension rate, so the log-decay ``g_t * A`` is a scalar times
a vector. Note the update has no erasure term: the document calls it a delta rule, but it
is gated linear attention (a true delta rule subtracts ``b_t b_t^T H_{t-1}``).

**The true gated delta rule** (``config.gdn_rule = "delta"``, Yang et al. 2025). Their
update, in the (D, S) layout S_t = S_{t-1} α_t (I - β_t k_t k_t^T) + β_t v_t k_t^T, reads in
our (S, D) layout (the transpose), with our per-dimension decay applied first:

    H'_t = exp(g_t * A) ⊙ H_{t-1}                       decay, as above
    H_t  = (I - β_t b̂_t b̂_t^T) H'_t + β_t b̂_t ⊗ v_t     erase what b̂_t reads, then write
         = H'_t + β_t b̂_t ⊗ (v_t - H'_t^T b̂_t)          the "delta": new value minus old
    o_t  = ĉ_t^T H_t

b̂, ĉ are the L2-normalised write and read keys (so I - β b̂ b̂^T is a contraction for β in
(0, 1)) and β_t = sigmoid(beta_proj(u_t)) is a per-head write strength. With a scalar decay
(A constant over S) the order "decay, then erase" is exactly Yang et al.'s; with a
per-dimension decay it is the order of Kimi Delta Attention. :func:`delta_rule_ref` is its
loop; it has no chunked or Triton form in hymo_mini, so it is slow for long sequences.

Layouts used everywhere in hymo_mini: v (B, T, H, D); b, c (B, T, H, S); g (B, T, H);
A (H, S); state (B, H, S, D) in fp32.

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
* **No feed-forward on GDN blocks** (section 1.3.3, and the parameter count).
* **The residual path.** The document's block returns ``out_proj(o) + skip_proj(x)``:
  there is no identity path, so the residual stream is replaced, not added to, in 24 of
  32 layers, and at PyTorch's default init each such layer shrinks the signal (the book's
  chapter 10 measures it). hymo_mini's default, ``gdn_residual="identity"``, is a
  pre-norm residual block like the MLA block: ``x + out_proj(o) + skip_proj(norm(x))``.
  ``gdn_residual="document"`` gives the documented block exactly (no norm, no identity).
"""

from __future__ import annotations

import importlib
import os

import torch
import torch.nn.functional as F
from einops import rearrange, reduce
from torch import nn

from hymo_mini.config import ModelConfig
from hymo_mini.rope import RotaryEmbedding

__all__ = [
    "gated_delta_rule_ref",
    "delta_rule_ref",
    "gated_delta_rule",
    "check_gdn_inputs",
    "empty_sequence",
    "BACKENDS",
    "GatedDeltaNetBlock",
]


# --------------------------------------------------------------------------------------
# The recurrence
# --------------------------------------------------------------------------------------
def check_gdn_inputs(v, b, c, g, A, initial_state=None) -> None:
    """Raise a clear error for inputs no backend can take. Shared by every backend."""
    tensors = {"v": v, "b": b, "c": c, "g": g, "A": A}
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    expected_rank = {"v": 4, "b": 4, "c": 4, "g": 3, "A": 2}
    layout = {"v": "(B, T, H, D)", "b": "(B, T, H, S)", "c": "(B, T, H, S)", "g": "(B, T, H)",
              "A": "(H, S)"}
    for name, rank in expected_rank.items():
        if tensors[name].ndim != rank:
            raise ValueError(f"{name} must have rank {rank} {layout[name]}, "
                             f"got shape {tuple(tensors[name].shape)}")
    B, T, H, D = v.shape
    S = b.shape[-1]
    wanted = {"b": (B, T, H, S), "c": (B, T, H, S), "g": (B, T, H), "A": (H, S)}
    for name, shape in wanted.items():
        if tuple(tensors[name].shape) != shape:
            raise ValueError(f"{name} must have shape {layout[name]} = {shape} to match "
                             f"v {tuple(v.shape)} and b {tuple(b.shape)}, "
                             f"got {tuple(tensors[name].shape)}")
    devices = {name: t.device for name, t in tensors.items()}
    if initial_state is not None:
        devices["initial_state"] = initial_state.device
    if len(set(devices.values())) > 1:
        raise ValueError(f"all inputs must be on one device, got {devices}")
    allowed = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
    for name, t in tensors.items():
        if t.dtype not in allowed:
            raise TypeError(f"{name} has unsupported dtype {t.dtype}; "
                            "use float32, bfloat16, float16 or float64")
    if initial_state is not None:
        if tuple(initial_state.shape) != (B, H, S, D):
            raise ValueError(f"initial_state must have shape (B, H, S, D) = {(B, H, S, D)}, "
                             f"got {tuple(initial_state.shape)}")
    if g.device.type == "meta":  # shape-only tracing: there are no values to check
        return
    with torch.no_grad():
        # one reduction, one host sync (on a GPU each bool() waits for the device)
        if not bool(torch.isfinite(g).all() & torch.isfinite(A).all()):
            raise ValueError("the decay g * A must be finite: g or A contains inf or nan")


def empty_sequence(v, b, initial_state, output_final_state):
    """The result for T = 0, where a kernel has nothing to run: an empty o, and the state
    passed through unchanged (fp32; zeros without an initial state)."""
    B, _, H, D = v.shape
    state = (initial_state.float() if initial_state is not None
             else v.new_zeros(B, H, b.shape[-1], D, dtype=torch.float32))
    return v.new_zeros(B, 0, H, D), (state if output_final_state else None)


def gated_delta_rule_ref(v, b, c, g, A, initial_state=None):
    """The recurrence as a plain loop over time: the oracle every faster path is tested
    against. Vectorised over batch and heads only; the state is fp32 (fp64 if the inputs
    are fp64). Returns ``(o, final_state)``: o (B, T, H, D) in v's dtype, state (B, H, S, D).
    """
    check_gdn_inputs(v, b, c, g, A, initial_state)
    B, T, H, D = v.shape
    S = b.shape[-1]
    acc = torch.float64 if v.dtype == torch.float64 else torch.float32
    state = (torch.zeros(B, H, S, D, dtype=acc, device=v.device) if initial_state is None
             else initial_state.to(acc))
    v, b, c, g, A = (t.to(acc) for t in (v, b, c, g, A))
    outputs = []
    for t in range(T):
        decay = torch.exp(g[:, t, :, None] * A)  # (B, H, S)
        write = torch.einsum("bhs,bhd->bhsd", b[:, t], v[:, t])  # b_t ⊗ v_t
        state = decay[..., None] * state + write  # (B, H, S, D)
        outputs.append(torch.einsum("bhs,bhsd->bhd", c[:, t], state))  # c_t^T H_t
    o = torch.stack(outputs, dim=1) if T else v.new_zeros(B, 0, H, D)
    return o.to(v.dtype if v.dtype != torch.float64 else torch.float64), state


def delta_rule_ref(v, b, c, g, A, beta, initial_state=None):
    """The gated delta rule *with* erasure (``gdn_rule="delta"``), as a plain loop.

    Same layouts as :func:`gated_delta_rule_ref`, plus beta (B, T, H) in (0, 1). The caller
    normalises b and c (the block does). Returns ``(o, final_state)``.
    """
    check_gdn_inputs(v, b, c, g, A, initial_state)
    if not isinstance(beta, torch.Tensor) or tuple(beta.shape) != tuple(g.shape):
        raise ValueError(f"beta must be a tensor of shape (B, T, H) = {tuple(g.shape)}, got "
                         f"{tuple(beta.shape) if isinstance(beta, torch.Tensor) else beta!r}")
    B, T, H, D = v.shape
    S = b.shape[-1]
    acc = torch.float64 if v.dtype == torch.float64 else torch.float32
    state = (torch.zeros(B, H, S, D, dtype=acc, device=v.device) if initial_state is None
             else initial_state.to(acc))
    v, b, c, g, A, beta = (t.to(acc) for t in (v, b, c, g, A, beta))
    outputs = []
    for t in range(T):
        state = torch.exp(g[:, t, :, None] * A)[..., None] * state  # decay, (B, H, S, D)
        old = torch.einsum("bhs,bhsd->bhd", b[:, t], state)  # what key b_t reads now
        delta = beta[:, t, :, None] * (v[:, t] - old)  # (B, H, D)
        state = state + torch.einsum("bhs,bhd->bhsd", b[:, t], delta)  # erase + write
        outputs.append(torch.einsum("bhs,bhsd->bhd", c[:, t], state))  # c_t^T H_t
    o = torch.stack(outputs, dim=1) if T else v.new_zeros(B, 0, H, D)
    return o.to(v.dtype), state


# backend name -> (module, function); every function takes
# (v, b, c, g, A, initial_state, output_final_state) and returns (o, final_state or None)
BACKENDS = {
    "eager": ("hymo_mini.gdn", "_eager_backend"),
    "chunk": ("hymo_mini.gdn_chunk", "gated_delta_rule_chunked"),
    "triton": ("hymo_mini.gdn_triton", "triton_gated_delta_rule"),
    "triton_chunk": ("hymo_mini.gdn_triton_chunk", "triton_chunk_gated_delta_rule"),
}


def _eager_backend(v, b, c, g, A, initial_state=None, output_final_state=False):
    o, state = gated_delta_rule_ref(v, b, c, g, A, initial_state)
    return o, (state if output_final_state else None)


def _available(name: str) -> bool:
    try:
        importlib.import_module(BACKENDS[name][0])
    except ImportError:
        return False
    return True


def _triton_usable(device: torch.device) -> bool:
    if device.type == "cuda":
        return True
    return os.environ.get("TRITON_INTERPRET") == "1"


def _auto_backend(v: torch.Tensor) -> str:
    """The fastest correct path for the tensors' device, dtype and length.

    CUDA: the chunked Triton kernel (fastest forward+backward at training lengths on the
    H200, see benchmarks/results/), the recurrent kernel for short sequences (T < 64, e.g.
    decoding) where a chunk would be mostly empty, and the PyTorch chunked form for fp64
    (the kernels compute in fp32). Between the two kernels the H200's T sweep decides
    (gdn_sweep_h200_2026-11-30.json, B·H = 40): with few (batch, head) pairs the chunked
    kernel has a fixed cost of about half a millisecond, and the recurrent one, about
    0.25 µs a step forward and 1 µs forward + backward, was faster in both directions at
    T = 1024 and slower forward + backward from T = 2048. So the recurrent kernel also
    runs T ≤ 1024 when B·H ≤ 160. The crossover was measured at B·H = 40 only; at
    B·H = 160 (B=4, T=4096) the recurrent kernel's time per step was the same, which is
    why the rule extends that far. Beyond it, untested, the chunked kernel is kept.
    CPU: the chunked PyTorch form (several times faster than the loop, and far faster than
    any kernel under the Triton interpreter), else the plain loop.
    """
    if v.device.type == "cuda" and v.dtype != torch.float64:
        B, T, H = v.shape[:3]
        recurrent = T < 64 or (T <= 1024 and B * H <= 160)
        order = ("triton", "triton_chunk") if recurrent else ("triton_chunk", "triton")
        for name in order:
            if _available(name):
                return name
    return "chunk" if _available("chunk") else "eager"


def gated_delta_rule(v, b, c, g, A, *, initial_state=None, output_final_state=False,
                     backend="auto"):
    """The one dispatch point for the GDN recurrence.

    backend: "auto" (fastest correct path for the device), "eager" (the reference loop),
    "chunk" (chunkwise-parallel PyTorch), "triton" (recurrent Triton kernel) or
    "triton_chunk" (chunked Triton kernel). Returns ``(o, final_state)``; final_state is
    None unless ``output_final_state=True``.
    """
    # every backend validates its inputs (check_gdn_inputs) itself: checking here as well
    # would cost a second GPU sync per call
    if not isinstance(v, torch.Tensor):
        raise TypeError(f"v must be a torch.Tensor, got {type(v).__name__}")
    if backend == "auto":
        backend = _auto_backend(v)
    if backend not in BACKENDS:
        raise ValueError(f"backend must be 'auto' or one of {sorted(BACKENDS)}, got {backend!r}")
    if backend.startswith("triton") and not _triton_usable(v.device):
        raise RuntimeError(
            f"backend={backend!r} needs a CUDA GPU, or the Triton interpreter on CPU: set the "
            "environment variable TRITON_INTERPRET=1 before hymo_mini's Triton module is "
            "imported (e.g. first line of the notebook), or use backend='auto'/'chunk'/'eager'.")
    module_name, function_name = BACKENDS[backend]
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise RuntimeError(f"backend {backend!r} is not available: {err}") from err
    fn = getattr(module, function_name)
    return fn(v, b, c, g, A, initial_state, output_final_state)


# --------------------------------------------------------------------------------------
# The block
# --------------------------------------------------------------------------------------
class GatedDeltaNetBlock(nn.Module):
    """One GDN layer: in_proj → causal depthwise conv → SiLU → b, c, gates → RoPE on b, c
    → recurrence → + D·v skip → output gate → out_proj (+ skip_proj, + identity).

    ``config.gdn_rule = "delta"`` adds ``beta_proj`` (per-head write strength), normalises
    b and c, and runs :func:`delta_rule_ref`. :meth:`step` runs the block with a cache
    (conv window + recurrent state) for token-by-token decoding."""

    def __init__(self, config: ModelConfig, layer_idx: int = 0, use_rope: bool = True):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.use_rope = use_rope
        dim, inner = config.dim, config.gdn_d_inner
        H, S, D = config.gdn_n_heads, config.gdn_d_state, config.gdn_headdim
        self.n_heads, self.d_state, self.headdim = H, S, D
        self.residual = config.gdn_residual
        self.norm = nn.RMSNorm(dim, eps=config.norm_eps) if self.residual == "identity" else None
        self.in_proj = nn.Linear(dim, inner, bias=False)
        self.conv1d = nn.Conv1d(inner, inner, config.gdn_d_conv, groups=inner,
                                padding=config.gdn_d_conv - 1, bias=False)
        self.b_proj = nn.Linear(inner, H * S, bias=False)  # write keys
        self.c_proj = nn.Linear(inner, H * S, bias=False)  # read keys
        self.dt_proj = nn.Linear(inner, H, bias=False)  # decay gate, one scalar per head
        self.g_proj = nn.Linear(inner, inner, bias=False)  # output gate
        self.out_proj = nn.Linear(inner, dim, bias=False)
        self.skip_proj = nn.Linear(dim, dim, bias=False)
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
        u = rearrange(self.in_proj(x), "b t e -> b e t")  # (b, inner, t)
        if window is None:  # training: zero history, drop the conv's tail
            return F.silu(rearrange(self.conv1d(u)[..., :T], "b e t -> b t e")), None
        history = torch.cat([window.to(u.dtype), u], dim=-1)  # (b, inner, d_conv - 1 + t)
        mixed = F.conv1d(history, self.conv1d.weight, groups=u.shape[1])  # (b, inner, t)
        keep = history[..., history.shape[-1] - window.shape[-1]:]  # last d_conv - 1
        return F.silu(rearrange(mixed, "b e t -> b t e")), keep

    def gdn_inputs(self, x: torch.Tensor, start_pos: int = 0):
        """The recurrence's inputs from the block input x (b, t, dim). Exposed so the book
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
        return self._run(x)[0]

    def branch(self, x: torch.Tensor) -> torch.Tensor:
        """The residual branch y (b, t, dim) alone: forward(x) = x + y with
        gdn_residual="identity". mHC (hymo_mini.mhc) wraps this instead of forward."""
        return self._run(x, add_identity=False)[0]

    def step(self, x: torch.Tensor, conv_window: torch.Tensor | None = None,
             state: torch.Tensor | None = None, start_pos: int = 0):
        """Run ``x`` (b, t, dim) as the continuation of a sequence whose cache is
        ``conv_window`` (b, inner, d_conv - 1) and ``state`` (b, h, s, d) fp32; None means
        the sequence starts here. Returns ``(y, conv_window, state)``; ``start_pos`` is the
        position of x's first token (for RoPE)."""
        if conv_window is None:
            conv_window = x.new_zeros(x.shape[0], self.config.gdn_d_inner,
                                      self.config.gdn_d_conv - 1)
        return self._run(x, conv_window, state, start_pos, keep_state=True)

    def _run(self, x, conv_window=None, state=None, start_pos=0, keep_state=False,
             add_identity=True):
        h = self.norm(x) if self.norm is not None else x
        u, conv_window = self._conv(h, conv_window)  # (b, t, inner)
        v, b, c, g, A, out_gate = self._heads(u, start_pos)
        if self.rule == "delta":
            beta = torch.sigmoid(self.beta_proj(u))  # (b, t, h) in (0, 1)
            o, state = delta_rule_ref(v, b, c, g, A, beta, state)  # (b t h d)
        else:
            o, state = gated_delta_rule(v, b, c, g, A, initial_state=state,
                                        output_final_state=keep_state,
                                        backend=self.config.gdn_backend)  # (b t h d)
        o = o + self.D[:, None] * v  # skip around the state
        o = o * out_gate[..., None]
        y = self.out_proj(rearrange(o, "b t h d -> b t (h d)")) + self.skip_proj(h)
        identity = self.residual == "identity" and add_identity
        return (x + y if identity else y), conv_window, state

