"""Figures and small computations for chapter 07 (Gated Delta Net, section 5).

The decay of the recurrence, per head h, state dimension n and step t, is
``exp(g_t · A[h, n])`` with ``A = -exp(A_log)`` and ``g_t = sigmoid(dt_proj(u_t) + dt_bias)``
in (0, 1). A contribution written at step s has been multiplied by
``exp(A[h, n] · (g_{s+1} + ... + g_t))`` by step t. With a constant gate g its **half-life**
is ``ln 2 / (g · |A|)`` steps. At initialisation ``A_log[h] = log(h + 1)`` (head h has the
rate h + 1) and g is close to 0.5 (dt_bias = 0 and a zero-mean projection):
:func:`decay_table` gives the numbers, :func:`decay_spectrum_figure` draws them.

:func:`effective_attention` writes the recurrence as the T × T matrix it applies to the
values (the "parallel form"), and :func:`state_trajectory` records the state after every step.
The delta rule's erasure has its own module (:mod:`hymo_book.plots.delta_rule`), the matrix
cut into chunks too (:mod:`hymo_book.plots.chunked_form`); their figures are registered here.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch
from einops import einsum, rearrange
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from hymo_book.plots import chunked_form, delta_rule
from hymo_mini.config import ModelConfig, load_config, replace
from hymo_mini.gdn import GatedDeltaNet
from hymo_mini.ops import naive_gla

__all__ = [
    "initial_a_log",
    "decay_table",
    "decay_spectrum_figure",
    "effective_attention",
    "weights_figure",
    "state_trajectory",
    "state_evolution_figure",
    "state_snapshot_figure",
    "toy_inputs",
    "FIGURES",
]


@lru_cache(maxsize=8)
def _a_log_cached(config: ModelConfig) -> tuple:
    # a block with every width shrunk except (heads, d_state): the real initialiser, no cost
    tiny = replace(config, dim=8, gdn_headdim=1, gdn_d_inner=config.gdn_n_heads, gdn_rope_dim=0)
    return tuple(map(tuple, GatedDeltaNet(tiny).A_log.detach().tolist()))


def initial_a_log(config: ModelConfig | None = None) -> torch.Tensor:
    """``A_log`` (heads, d_state) exactly as ``GatedDeltaNet`` initialises it."""
    config = config or load_config("hymo_750m").model
    return torch.tensor(_a_log_cached(config))


def decay_table(gate: float = 0.5, a_log: torch.Tensor | None = None,
                a_log_shift: float = 0.0) -> list[dict[str, float]]:
    """Per head: rate |A| (mean over state dims), per-step decay exp(-g|A|) and half-life
    ln 2 / (g |A|) in steps, for a constant gate ``gate`` and ``A_log + a_log_shift``."""
    if not 0 < gate <= 1:
        raise ValueError(f"gate must be in (0, 1] (it is a sigmoid), got {gate}")
    a_log = initial_a_log() if a_log is None else a_log
    rate = torch.exp(a_log.double() + a_log_shift).mean(dim=-1)  # |A| per head
    return [{"head": h, "rate": float(r), "decay": math.exp(-gate * float(r)),
             "half_life": math.log(2) / (gate * float(r))} for h, r in enumerate(rate)]


def decay_spectrum_figure(gate: float = 0.5, a_log_shift: float = 0.0,
                          config: ModelConfig | None = None,
                          show_document: bool = False) -> Figure:
    """Left: per-step decay exp(g·A) of every head and state dimension at initialisation.
    Right: the half-life of each head, with the document's "head 0 remembers ~3 steps"."""
    a_log = initial_a_log(config) + a_log_shift  # (H, S)
    if not 0 < gate <= 1:
        raise ValueError(f"gate must be in (0, 1] (it is a sigmoid), got {gate}")
    decay = torch.exp(-gate * torch.exp(a_log.double())).numpy()  # (H, S) per-step factor
    rows = decay_table(gate, a_log)
    fig = Figure(figsize=(11, 4))
    ax_map, ax_life = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.3]})
    image = ax_map.imshow(decay, aspect="auto", cmap="viridis", vmin=0, vmax=1,
                          interpolation="nearest")
    fig.colorbar(image, ax=ax_map, label="fraction kept per token, exp(g·A)")
    ax_map.set_xlabel("state dimension n")
    ax_map.set_ylabel("head h")
    # a slider's float arithmetic leaves digits such as +1.77636e-15 behind: show 6 decimals
    shift = round(a_log_shift, 6) + 0.0  # + 0.0: no "-0"
    ax_map.set_title(f"decay per step, g = {round(gate, 6):g}, A_log shift {shift:+g}",
                     fontsize=10)
    heads = [r["head"] for r in rows]
    ax_life.semilogy(heads, [r["half_life"] for r in rows], "o-", ms=3, color="#1b9e77",
                     label=f"half-life at g = {gate:g}")
    ax_life.semilogy(heads, [math.log(2) / r["rate"] for r in rows], ":", color="grey",
                     label="half-life at g = 1")
    if show_document and a_log_shift == 0:
        ax_life.plot([0], [3], "x", color="#c62828", ms=9, mew=2,
                     label='document: head 0 "remembers ~3 steps"')
    ax_life.axhline(1, color="black", lw=0.6)
    ax_life.set_xlabel("head h")
    ax_life.set_ylabel("half-life (steps)")
    ax_life.set_title(f"longest memory: head 0, half-life {rows[0]['half_life']:.3g} steps",
                      fontsize=10)
    for axis in (ax_map.xaxis, ax_map.yaxis, ax_life.xaxis):  # they count dims and heads
        axis.set_major_locator(MaxNLocator(integer=True))
    ax_life.grid(True, which="both", alpha=0.3)
    ax_life.legend(fontsize=8)
    fig.tight_layout()
    return fig


def effective_attention(b: torch.Tensor, c: torch.Tensor, g: torch.Tensor,
                        A: torch.Tensor) -> torch.Tensor:
    """The recurrence as a matrix: P (B, H, T, T) with o_t = sum_s P[t, s] v_s, where
    P[t, s] = sum_n c_t[n] b_s[n] exp(A[n] (L_t - L_s)) for s <= t, L_t = g_1 + ... + g_t.
    Same layouts as ``naive_gla``; memory grows like T² · S (keep T small)."""
    G = torch.cumsum(g.double(), dim=1)  # (B, T, H)
    gap = rearrange(G, "b t h -> b h t 1") - rearrange(G, "b s h -> b h 1 s")  # (B, H, T, T)
    T = g.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool, device=g.device).tril()
    log_decay = einsum(gap, A.double(), "b h t s, h n -> b h t s n")  # <= 0 where s <= t
    log_decay = log_decay.masked_fill(~causal[..., None], float("-inf"))
    return einsum(c.double(), b.double(), log_decay.exp(),
                  "b t h n, b s h n, b h t s n -> b h t s").to(b.dtype)


def weights_figure(matrices: dict[str, np.ndarray], suptitle: str = "") -> Figure:
    """Heatmaps of T × T mixing matrices side by side (row t: output, column s: input),
    each on a symmetric colour scale around 0."""
    if not matrices:
        raise ValueError("matrices is empty")
    fig = Figure(figsize=(3.6 * len(matrices) + 0.6, 3.7))
    axes = fig.subplots(1, len(matrices), squeeze=False)[0]
    for ax, (title, matrix) in zip(axes, matrices.items(), strict=True):
        m = np.asarray(matrix, dtype=float)
        scale = float(np.abs(m).max()) or 1.0
        image = ax.imshow(m, cmap="RdBu_r", vmin=-scale, vmax=scale, interpolation="nearest")
        fig.colorbar(image, ax=ax, fraction=0.046)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("input position s")
        ax.set_ylabel("output position t")
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    fig.tight_layout()
    return fig


def state_trajectory(v, b, c, g, A, initial_state=None) -> torch.Tensor:
    """The state after every step, (B, T, H, S, D), by running the reference recurrence
    one step at a time from the previous state."""
    state = initial_state
    states = []
    for t in range(v.shape[1]):
        step = slice(t, t + 1)
        _, state = naive_gla(v[:, step], b[:, step], c[:, step], g[:, step], A,
                             initial_state=state)
        states.append(state)
    return torch.stack(states, dim=1)


def state_snapshot_figure(states: torch.Tensor, t: int = 0, head: int = 0) -> Figure:
    """One state matrix H_t (S × D) of one head; ``states`` as from :func:`state_trajectory`
    for one batch element, (T, H, S, D)."""
    T = states.shape[0]
    if not 0 <= t < T:
        raise ValueError(f"t must be in [0, {T}), got {t}")
    return state_evolution_figure(states, times=(t,), head=head)


def state_evolution_figure(states: torch.Tensor, times: tuple[int, ...] = (0, 1, 3, 7, 15),
                           head: int = 0) -> Figure:
    """Heatmaps of the state H_t of one head at several steps, on one colour scale, and the
    Frobenius norm of H_t over all steps. ``states``: (T, H, S, D)."""
    if states.ndim != 4:
        raise ValueError(f"states must be (T, H, S, D), got shape {tuple(states.shape)}")
    T, H = states.shape[:2]
    times = tuple(t for t in times if 0 <= t < T)
    if not times or not 0 <= head < H:
        raise ValueError(f"need some times in [0, {T}) and head in [0, {H}); "
                         f"got times={times}, head={head}")
    per_head = states[:, head].double().numpy()  # (T, S, D)
    scale = float(np.abs(per_head[list(times)]).max()) or 1.0
    fig = Figure(figsize=(2.6 * len(times) + 4.0, 3.2))
    axes = fig.subplots(1, len(times) + 2,
                        gridspec_kw={"width_ratios": [1] * len(times) + [0.07, 1.6]})
    for ax, t in zip(axes[:len(times)], times, strict=True):
        image = ax.imshow(per_head[t], cmap="RdBu_r", vmin=-scale, vmax=scale,
                          interpolation="nearest")
        ax.set_title(f"H after step {t}", fontsize=9)
        ax.set_xlabel("value dim d")
        ax.set_ylabel("key dim n" if t == times[0] else "")
    fig.colorbar(image, cax=axes[len(times)])
    norms = np.linalg.norm(per_head.reshape(T, -1), axis=1)
    axes[-1].plot(range(T), norms, "o-", ms=3, color="#1b9e77")
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[-1].set_xlabel("step t")
    axes[-1].set_ylabel("‖H_t‖ (Frobenius)")
    axes[-1].set_title(f"head {head}: state size over time", fontsize=9)
    axes[-1].grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def toy_inputs(T: int = 16, H: int = 2, S: int = 8, D: int = 8, gate: float = 0.5,
               seed: int = 0):
    """Seeded random recurrence inputs (batch 1) with the block's decay initialisation:
    v, b, c (unit-scale), g = gate everywhere, A = -(h + 1)."""
    gen = torch.Generator().manual_seed(seed)
    v = torch.randn(1, T, H, D, generator=gen)
    b = torch.randn(1, T, H, S, generator=gen) / math.sqrt(S)
    c = torch.randn(1, T, H, S, generator=gen) / math.sqrt(S)
    g = torch.full((1, T, H), float(gate))
    A = -torch.arange(1, H + 1, dtype=torch.float32)[:, None].repeat(1, S)
    return v, b, c, g, A


def _default_state_figure() -> Figure:
    v, b, c, g, A = toy_inputs(T=16, gate=0.1)
    return state_evolution_figure(state_trajectory(v, b, c, g, A)[0])


FIGURES = {
    "gdn_decay_spectrum.png": lambda: decay_spectrum_figure(0.5),
    "gdn_state_evolution.png": _default_state_figure,
    "gdn_delta_erasure.png": delta_rule.erasure_figure,
    "gdn_recall_by_age.png": delta_rule.recall_by_age_figure,
    "gdn_chunk_matrix.png": chunked_form.chunk_matrix_figure,
}
