"""Arithmetic and figures of chapter 06, the Triton kernel (section 6 of the document).

Three groups, each checked by ``tests/test_viz_kernel_chapter.py``:

* **Errors** for the ladder loop → kernel → check: :func:`max_rel_error`, :func:`check_line`.
* **The chunkwise-parallel form drawn**: :func:`decay_matrix` builds, for one head, the
  (T, T) matrix M with o = M v that the recurrence amounts to, and
  :func:`chunk_matrix_figure` draws it cut into chunks.
* **The levels of the chunked Triton kernel**: :func:`pair_level` and :func:`level_map`
  sort a block's pairs s < t by the highest bit in which s and t differ,
  :func:`level_weights` computes the block's weights level by level as
  ``hymo_mini.gdn_triton_chunk`` does (every factor at most one), :func:`one_factor_weights`
  the one-product shortcut that overflows, and :func:`level_map_figure` draws the levels.
* **The document's arithmetic and the measured results**: :func:`document_launches`,
  :func:`launches_per_step` (kernels the eager loop launches per time step, counted by
  PyTorch's dispatcher), the memory of a stored state trajectory against checkpoints
  (:func:`memory_bytes`, :func:`recurrent_peak_bytes`, :func:`memory_figure`), and
  :func:`gpu_results`, which reads the committed ``benchmarks/results/gdn_*.json`` files
  and returns a table and a figure naming the GPU, the date and the command of each run;
  :func:`chunk_targets` scores the chunked kernel against its targets,
  :func:`chunk_forward_bytes` and :func:`chunk_peak_bytes` account for its traffic and
  memory, and :func:`sweep_table` reads the time-against-T sweep. Nothing here measures time.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from einops import einsum
from matplotlib.colors import ListedColormap, LogNorm
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

__all__ = ["RESULTS_DIR", "DOCUMENT", "TARGETS", "max_rel_error", "check_line", "decay_matrix",
           "chunk_matrix_figure", "pair_level", "level_map", "level_weights",
           "one_factor_weights", "level_map_figure", "document_launches", "launches_per_step",
           "memory_bytes", "recurrent_peak_bytes", "chunk_peak_bytes", "chunk_forward_bytes",
           "memory_figure", "load_reports", "Table", "results_table", "latest_run",
           "speedup_figure", "gpu_results", "Targets", "chunk_targets", "Text", "sweep_table"]

RESULTS_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "results"

# Section 6's numbers, as the document states them (6.1, 6.5, 6.8).
DOCUMENT = dict(B=4, T=4096, H=40, S=32, D=32, launches_per_step=2, launch_us=10.0,
                eager_s=13.1, kernel_ms=1.6, speedup=8000, trajectory_gb=2.6, n_gdn_layers=24)

# The targets set for the chunked Triton kernel (the project's issue #4), against fla's
# chunk_gla measured in the same run: forward + backward time at most 0.9 of the peer's,
# peak memory at most the peer's, forward at most 3 times a device copy of its minimum bytes.
TARGETS = {"fwdbwd_vs_peer": 0.9, "peak_vs_peer": 1.0, "fwd_vs_copy": 3.0}

_LABELS = {"eager": "eager loop", "chunk": "hymo chunk (torch)",
           "triton": "hymo Triton recurrent", "triton_kernel": "hymo Triton recurrent, no checks",
           "triton_chunk": "hymo Triton chunk",
           "triton_chunk_kernel": "hymo Triton chunk, no checks", "fla_fused_recurrent": "fla fused_recurrent_gla",
           "fla_chunk": "fla chunk_gla"}
_COLORS = {"eager": "#7f7f7f", "chunk": "#9467bd", "triton": "#d62728",
           "triton_kernel": "#e377c2", "triton_chunk": "#ff7f0e",
           "triton_chunk_kernel": "#ffbb78",
           "fla_fused_recurrent": "#1f77b4", "fla_chunk": "#17becf"}


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------
def max_rel_error(x: torch.Tensor, ref: torch.Tensor) -> float:
    """max |x - ref| / max |ref|, in float64: the largest error, on the scale of the values."""
    if x.shape != ref.shape:
        raise ValueError(f"x has shape {tuple(x.shape)} but ref has {tuple(ref.shape)}")
    x, ref = x.detach().double().cpu(), ref.detach().double().cpu()
    return ((x - ref).abs().max() / ref.abs().max()).item()


def check_line(name: str, x: torch.Tensor, ref: torch.Tensor, tol: float) -> str:
    """One rung of the ladder as a line that reads the same on every run: the max error
    (:func:`max_rel_error`) is compared with ``tol`` rather than printed, since its last
    digits vary between machines."""
    if not tol > 0:
        raise ValueError(f"tol must be positive, got {tol!r}")
    err = max_rel_error(x, ref)
    return f"{name:<44} max |x - loop| / max |loop| < {tol:.0e}: {err < tol}"


# --------------------------------------------------------------------------------------
# The chunkwise-parallel form, drawn
# --------------------------------------------------------------------------------------
def decay_matrix(b: torch.Tensor, c: torch.Tensor, g: torch.Tensor, A: torch.Tensor):
    """The recurrence of one head as a matrix: o = M v with, for s ≤ t,

        M_ts = Σ_n c_tn b_sn exp((L_t - L_s) A_n),   L_t = g_1 + ... + g_t

    b, c (T, S); g (T,); A (S,). Returns M (T, T), zero above the diagonal."""
    if b.ndim != 2 or c.shape != b.shape or g.shape != b.shape[:1] or A.shape != b.shape[1:]:
        raise ValueError("expected b, c (T, S), g (T,), A (S,); got "
                         f"{tuple(b.shape)}, {tuple(c.shape)}, {tuple(g.shape)}, {tuple(A.shape)}")
    L = g.cumsum(0)  # (T,)
    causal = torch.ones(len(g), len(g), dtype=torch.bool).tril()  # (t, s)
    gap = (L[:, None] - L[None, :]).masked_fill(~causal, 0.0)  # (t, s) ≥ 0 where s ≤ t
    decay = torch.exp(gap[..., None] * A)  # (t, s, n) in [0, 1]
    M = torch.einsum("tn,sn,tsn->ts", c, b, decay)
    return M * causal


def _example(T: int, S: int, decay: float, seed: int):
    gen = torch.Generator().manual_seed(seed)
    b = torch.randn(T, S, generator=gen, dtype=torch.float64) / S**0.5
    c = torch.randn(T, S, generator=gen, dtype=torch.float64) / S**0.5
    g = torch.sigmoid(torch.randn(T, generator=gen, dtype=torch.float64))
    A = -decay * torch.linspace(0.05, 1.0, S, dtype=torch.float64)  # slow to fast dims
    return b, c, g, A


def chunk_matrix_figure(T: int = 32, chunk: int = 8, decay: float = 0.5, S: int = 8,
                        seed: int = 0) -> Figure:
    """|M_ts| of one head (random unit-scale keys, gates in (0, 1), A spread over
    [-decay, -0.05·decay]) on a log colour scale, cut into chunks of ``chunk`` steps. The
    blocks on the diagonal are what the chunked form computes as masked attention; every
    block below them reaches the output only through the state carried between chunks."""
    for name, value in (("T", T), ("chunk", chunk), ("S", S)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if not decay > 0:
        raise ValueError(f"decay must be positive, got {decay!r}")
    M = decay_matrix(*_example(T, S, decay, seed)).abs().numpy()  # (T, T)
    shown = np.ma.masked_where(np.triu(np.ones_like(M, dtype=bool), k=1) | (M == 0), M)
    fig = Figure(figsize=(6.4, 5.4), layout="constrained")
    ax = fig.subplots()
    low = max(float(shown.min()), float(shown.max()) * 1e-8)
    image = ax.imshow(shown, cmap="viridis", norm=LogNorm(vmin=low, vmax=float(shown.max())),
                      extent=(-0.5, T - 0.5, T - 0.5, -0.5))
    fig.colorbar(image, ax=ax, label="|M_ts| (log scale)")
    for edge in range(chunk, T, chunk):  # chunk boundaries
        ax.axhline(edge - 0.5, color="white", lw=1.2)
        ax.axvline(edge - 0.5, color="white", lw=1.2)
    for start in range(0, T, chunk):  # the blocks done as attention
        size = min(chunk, T - start)
        ax.add_patch(_square(start - 0.5, size, "#ff7f0e"))
    n_chunks = math.ceil(T / chunk)
    ax.set_xlabel("s: step that wrote (b_s, v_s)")
    ax.set_ylabel("t: step that reads (c_t)")
    ax.set_title(f"o = M v for one head: T = {T}, chunks of {chunk} ({n_chunks} chunks), "
                 f"S = {S}, decay x{decay:g}\norange: inside a chunk, computed as masked "
                 "attention; below: through the carried state", fontsize=9)
    return fig


def _square(corner: float, size: int, color: str):
    return Rectangle((corner, corner), size, size, fill=False, edgecolor=color, lw=2)


# --------------------------------------------------------------------------------------
# The levels of the chunked Triton kernel
# --------------------------------------------------------------------------------------
def _check_block(block, name: str = "block") -> None:
    if not isinstance(block, int) or block < 2 or block & (block - 1):
        raise ValueError(f"{name} must be a power of two >= 2, got {block!r}")


def pair_level(t: int, s: int) -> tuple[int, int]:
    """Level k and split step r of the pair s < t (steps counted from the block start).

    k is the highest bit in which t and s differ: both lie in one sub-block of 2^(k+1)
    steps, s in its lower half and t in its upper half. r is the first step of that upper
    half (t with its bits below k cleared), so s < r ≤ t and the decay splits there:
    exp((l_t - l_s) A) = exp((l_t - l_r) A) · exp((l_r - l_s) A), each factor ≤ 1."""
    if not (isinstance(t, int) and isinstance(s, int) and 0 <= s < t):
        raise ValueError(f"need integer steps 0 <= s < t, got t={t!r}, s={s!r}")
    k = (t ^ s).bit_length() - 1
    return k, (t >> k) << k


def level_map(block: int = 16) -> torch.Tensor:
    """(block, block) int64, row t and column s: the level of each pair s < t
    (:func:`pair_level`), -1 on and above the diagonal. Level k holds block·2^(k-1) pairs:
    block / 2^(k+1) squares of 2^k x 2^k just below the diagonal."""
    _check_block(block)
    step = torch.arange(block)
    differ = step[:, None] ^ step[None, :]  # (t, s) bits in which t and s differ
    level = torch.zeros_like(differ)
    for k in range(1, block.bit_length() - 1):
        level += (differ >> k) > 0  # counts the bits above the lowest: floor(log2)
    return level.masked_fill(step[:, None] <= step[None, :], -1)


def _check_block_inputs(b, c, g, A) -> None:
    if b.ndim != 2 or c.shape != b.shape or g.shape != b.shape[:1] or A.shape != b.shape[1:]:
        raise ValueError("expected b, c (T, S), g (T,), A (S,); got "
                         f"{tuple(b.shape)}, {tuple(c.shape)}, {tuple(g.shape)}, {tuple(A.shape)}")
    _check_block(len(g), "T (the block length)")


def level_weights(b: torch.Tensor, c: torch.Tensor, g: torch.Tensor,
                  A: torch.Tensor) -> torch.Tensor:
    """The weights W_ts = Σ_n c_tn b_sn exp((l_t - l_s) A_n), s ≤ t, of one block, the way
    ``hymo_mini.gdn_triton_chunk`` computes them: the diagonal Σ_n c_tn b_tn, plus per
    level k one masked product

        W += [level = k] ⊙ (c ⊙ X_k)(b ⊙ X_k)^T,   X_k = exp(gap_k A) ≤ 1 (T, S)

    where gap_k of a step is its distance in gate sum to its split point r on level k:
    l_t - l_r for a step in an upper half (a t of the level), l_r - l_s for one in a lower
    half (an s). A step is one or the other on each level, so one (T, S) tensor of
    factors serves rows and columns. b, c (T, S); g (T,) in (0, 1) with l = cumsum(g) the
    gate summed from the block start; A (S,) < 0; T a power of two. Returns W (T, T),
    equal to :func:`decay_matrix` up to rounding."""
    _check_block_inputs(b, c, g, A)
    T = len(g)
    l = g.cumsum(0)  # (t,) gate summed from the block start
    step = torch.arange(T)
    levels = level_map(T)  # (t, s)
    W = torch.diag(einsum(c, b, "t n, t n -> t"))  # (t, s) the pairs s = t: no decay
    for k in range(T.bit_length() - 1):
        is_t = ((step >> k) & 1) == 1  # (t,) in an upper half on this level
        r = ((step >> k) | 1) << k  # (t,) first step of the upper half
        gap = torch.where(is_t, l - l[r], l[r] - l)  # (t,) ≥ 0
        X = torch.exp(einsum(gap, A, "t, n -> t n"))  # (t, n) in (0, 1]
        W = W + (levels == k) * einsum(c * X, b * X, "t n, s n -> t s")  # (t, s)
    return W


def one_factor_weights(b: torch.Tensor, c: torch.Tensor, g: torch.Tensor,
                       A: torch.Tensor) -> torch.Tensor:
    """The same W from one factor per step, (c ⊙ e^{lA})(b ⊙ e^{-lA})^T below the diagonal:
    a single matrix product, but e^{-lA} grows with l and overflows to inf once l·|A_n|
    passes the dtype's limit (~88 in float32, ~709 in float64), and 0 · inf = nan."""
    _check_block_inputs(b, c, g, A)
    l = g.cumsum(0)  # (t,)
    lA = einsum(l, A, "t, n -> t n")  # (t, n) ≤ 0
    W = einsum(c * torch.exp(lA), b * torch.exp(-lA), "t n, s n -> t s")  # (t, s)
    causal = torch.ones(len(g), len(g), dtype=torch.bool).tril()
    return torch.where(causal, W, torch.zeros_like(W))


_LEVEL_COLORS = ["#4c72b0", "#55a868", "#c44e52", "#8172b2", "#ccb974", "#64b5cd"]


def level_map_figure(block: int = 16, t: int = 13, s: int = 2) -> Figure:
    """Every pair (t, s) of one block coloured by its level (:func:`level_map`), the
    diagonal grey, the upper triangle blank; the example pair (t, s) starred, the square
    of its level outlined, and the two pairs its decay splits into, (t, r) and (r, s),
    circled: exp((l_t - l_s) A) = exp((l_t - l_r) A) · exp((l_r - l_s) A)."""
    _check_block(block)
    if block > 2 ** len(_LEVEL_COLORS):
        raise ValueError(f"block must be at most {2 ** len(_LEVEL_COLORS)}, got {block}")
    if not (isinstance(t, int) and isinstance(s, int) and 0 <= s < t < block):
        raise ValueError(f"t and s must satisfy 0 <= s < t < block = {block}, got t={t!r}, s={s!r}")
    n_levels = block.bit_length() - 1
    levels = level_map(block).numpy()
    image = np.where(np.eye(block, dtype=bool), n_levels, levels)  # the diagonal: its own colour
    shown = np.ma.masked_where(image < 0, image)
    fig = Figure(figsize=(6.6, 6.4), layout="constrained")
    ax = fig.subplots()
    cmap = ListedColormap(_LEVEL_COLORS[:n_levels] + ["#bbbbbb"])
    ax.imshow(shown, cmap=cmap, vmin=-0.5, vmax=n_levels + 0.5,
              extent=(-0.5, block - 0.5, block - 0.5, -0.5))
    k, r = pair_level(t, s)
    size = 1 << k  # the level-k square holding (t, s): rows r .. r+size-1, columns r-size .. r-1
    ax.add_patch(Rectangle((r - size - 0.5, r - 0.5), size, size, fill=False, edgecolor="k",
                           lw=2.5))
    ax.plot([s], [t], marker="*", ms=16, color="k", ls="none")
    ax.plot([r, s], [t, r], marker="o", ms=11, mfc="none", mec="k", mew=2, ls="none")
    ax.plot([s, r], [t, t], color="k", lw=1, ls=":")  # same row t: the factor (t, r)
    ax.plot([s, s], [t, r], color="k", lw=1, ls=":")  # same column s: the factor (r, s)
    label = dict(fontsize=8, fontweight="bold", va="center",
                 bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.8))
    ax.text(min(r + 0.5, block * 0.7), min(t + 0.05 * block, block - 1.2),
            r"$(t, r)$: $e^{(l_t - l_r)A}$", **label)
    ax.text(min(s + 0.5, block * 0.7), max(r - 0.05 * block, 0.5),
            r"$(r, s)$: $e^{(l_r - l_s)A}$", **label)
    ticks = range(0, block, 1 if block <= 16 else 2)
    ax.set_xticks(ticks)
    ax.set_yticks(ticks)
    ax.tick_params(labelsize=7)
    ax.set_xlabel("s: step that wrote (from the block start)")
    ax.set_ylabel("t: step that reads")
    counts = np.bincount(levels[levels >= 0], minlength=n_levels)
    handles = [Patch(color=_LEVEL_COLORS[j], label=f"level {j}: {2**j}x{2**j} squares, "
                     f"{counts[j]} pairs") for j in range(n_levels)]
    handles.append(Patch(color="#bbbbbb", label="s = t: no decay"))
    ax.legend(handles=handles, fontsize=7, loc="upper right")
    ax.set_title(f"The pairs s < t of a {block}-step block by level ({n_levels} levels, "
                 f"{int(counts.sum())} pairs)\n★ (t, s) = ({t}, {s}): level {k}, split at r = {r}: "
                 r"$e^{(l_t - l_s)A} = e^{(l_t - l_r)A} \cdot e^{(l_r - l_s)A}$", fontsize=9)
    return fig


# --------------------------------------------------------------------------------------
# Launch arithmetic
# --------------------------------------------------------------------------------------
def document_launches(B: int = 4, T: int = 4096, H: int = 40, per_step: int = 2,
                      launch_us: float = 10.0) -> dict:
    """Section 6.1's model: the loop launches ``per_step`` kernels per step *for every
    (batch, head)*, the kernel one per (batch, head); every launch costs ``launch_us``."""
    loop = T * per_step * H * B
    kernel = B * H
    return {"loop_launches": loop, "loop_s": loop * launch_us * 1e-6,
            "kernel_launches": kernel, "kernel_ms": kernel * launch_us * 1e-3,
            "ratio": loop / kernel}


_NO_KERNEL = {"_unsafe_view", "lift_fresh", "detach", "alias"}


def launches_per_step(B: int = 2, H: int = 3, S: int = 5, D: int = 4) -> Counter:
    """The operators ``gated_delta_rule_ref`` runs per time step that launch a kernel on a
    GPU (views excluded), counted by PyTorch's dispatcher: the count for T = 4 minus the
    count for T = 3. The count does not grow with B and H: the loop is vectorised over both.
    (With B = H = 1 one copy is skipped: the read's operand is already contiguous.)"""
    from torch.utils._python_dispatch import TorchDispatchMode

    from hymo_mini.gdn import gated_delta_rule_ref

    class _Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            if not func.is_view and name not in _NO_KERNEL:
                self.ops[name] += 1
            return func(*args, **(kwargs or {}))

    def count(T):
        gen = torch.Generator().manual_seed(0)
        v, b, c = (torch.randn(B, T, H, n, generator=gen) for n in (D, S, S))
        g, A = torch.rand(B, T, H, generator=gen), -torch.rand(H, S, generator=gen)
        with _Count() as counter:
            gated_delta_rule_ref(v, b, c, g, A)
        return counter.ops

    return count(4) - count(3)


# --------------------------------------------------------------------------------------
# Memory arithmetic
# --------------------------------------------------------------------------------------
def memory_bytes(B: int = 4, T: int = 4096, H: int = 40, S: int = 32, D: int = 32,
                 chunk: int = 64, block: int = 16) -> dict:
    """Bytes per GDN layer kept for the backward, fp32 states:

    trajectory    every H_t (the document's design): B·T·H·S·D·4
    checkpoints   the recurrent kernel: the state entering every ``chunk`` steps,
                  B·H·⌈T/chunk⌉·S·D·4, kept from forward to backward
    scratch       the recurrent kernel's backward: one segment of replayed states per
                  (b, h), B·H·chunk·S·D·4, only while that layer's backward runs
    block_states  the chunked kernel: the state at the start of every ``block``-step block,
                  B·H·⌈T/block⌉·S·D·4, stored by the forward so that the backward need
                  not rebuild them
    """
    for name, value in dict(B=B, T=T, H=H, S=S, D=D, chunk=chunk, block=block).items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    state = S * D * 4
    return {"trajectory": B * T * H * state,
            "checkpoints": B * H * math.ceil(T / chunk) * state,
            "scratch": B * H * chunk * state,
            "block_states": B * H * math.ceil(T / block) * state}


def recurrent_peak_bytes(B: int = 4, T: int = 4096, H: int = 40, S: int = 32, D: int = 32,
                         chunk: int = 32) -> dict:
    """What one forward + backward of the recurrent kernel allocates beyond its fp32 inputs
    (and the incoming gradient do), by tensor: the prediction of the benchmark's peak_mib.
    Everything is live at the end of the backward: the output o, the checkpoints, the
    scratch, the zero final-state gradient, and the gradients of v, b, c and g."""
    mem = memory_bytes(B, T, H, S, D, chunk)
    rows = {"o": B * T * H * D * 4, "checkpoints": mem["checkpoints"], "scratch": mem["scratch"],
            "d final_state (zeros)": B * H * S * D * 4,
            "dv, db, dc": B * T * H * (D + 2 * S) * 4, "dg": B * T * H * 4}
    rows["total"] = sum(rows.values())
    return rows


def chunk_peak_bytes(B: int = 4, T: int = 4096, H: int = 40, S: int = 32, D: int = 32,
                     itemsize: int = 4, chunk: int = 64, block: int = 16) -> dict:
    """The same prediction for the chunked kernel (``hymo_mini.gdn_triton_chunk``), whose
    inputs, o and gradients have ``itemsize`` bytes an element and whose states are fp32.
    Live at the end of its backward: o, the block-start states the forward stored, the
    state gradient at every chunk's end, the per-chunk partial sums of dA, and the
    gradients of v, b, c and g. (The chunk states of the forward are gone by then.)"""
    n_chunks = math.ceil(T / chunk)
    rows = {"o": B * T * H * D * itemsize,
            "block-start states": memory_bytes(B, T, H, S, D, chunk, block)["block_states"],
            "chunk-end state gradients": B * H * n_chunks * S * D * 4,
            "dA per chunk": B * H * n_chunks * S * 4,
            "dv, db, dc": B * T * H * (D + 2 * S) * itemsize, "dg": B * T * H * itemsize}
    rows["total"] = sum(rows.values())
    return rows


def chunk_forward_bytes(B: int = 4, T: int = 4096, H: int = 40, S: int = 32, D: int = 32,
                        itemsize: int = 4, chunk: int = 64) -> dict:
    """Bytes the chunked kernel's forward (no autograd, "scan" mode) reads and writes, by
    kernel, against the minimum (read v, b, c, g once, write o once), the benchmark's
    ``bytes_min_fwd``. Inputs and o have ``itemsize`` bytes an element, states fp32:

    chunk deltas   read b, v, g; write each chunk's own ΔH_k (S·D) and decay (S)
    scan           read ΔH_k and the decay, write H_k in place
    outputs        read v, b, c, g and H_k; write o
    """
    n = B * T * H  # steps of all (batch, head) pairs
    states = B * H * math.ceil(T / chunk)  # chunk states of all (batch, head) pairs
    rows = {"minimum": n * (2 * D + 2 * S + 1) * itemsize,
            "chunk deltas": n * (S + D + 1) * itemsize + states * (S * D + S) * 4,
            "scan": states * (2 * S * D + S) * 4,
            "outputs": n * (2 * D + 2 * S + 1) * itemsize + states * S * D * 4}
    rows["total"] = rows["chunk deltas"] + rows["scan"] + rows["outputs"]
    return rows


def memory_figure(T: int = 4096, chunk: int = 64, n_layers: int = 24, B: int = 4, H: int = 40,
                  S: int = 32, D: int = 32, gpu_gib: float | None = 139.8) -> Figure:
    """State memory kept for the backward (log scale, GiB): the document's trajectory
    against the recurrent kernel's checkpoints and the chunk kernel's block-start states
    (one per 16 steps), for one
    layer and for ``n_layers`` GDN layers (whose saved tensors all live at once before the
    backward starts); the line is the GPU's memory."""
    if not isinstance(n_layers, int) or n_layers < 1:
        raise ValueError(f"n_layers must be a positive int, got {n_layers!r}")
    mem = memory_bytes(B, T, H, S, D, chunk)
    kinds = [("trajectory", "every state H_t (document)", "#7f7f7f"),
             ("checkpoints", f"checkpoint every {chunk} steps (hymo Triton recurrent)", "#d62728"),
             ("block_states", "state every 16 steps (hymo Triton chunk)", "#ff7f0e")]
    fig = Figure(figsize=(8, 4.4), layout="constrained")
    ax = fig.subplots()
    width = 0.25
    for i, (key, label, color) in enumerate(kinds):
        values = [mem[key] / 2**30, n_layers * mem[key] / 2**30]
        bars = ax.bar([j + (i - 1) * width for j in range(2)], values, width, color=color,
                      label=label)
        ax.bar_label(bars, labels=[_gib(v) for v in values], fontsize=7, padding=2)
    if gpu_gib:
        ax.axhline(gpu_gib, color="k", ls="--", lw=1)
        ax.text(1.45, gpu_gib * 1.15, f"GPU memory {gpu_gib:g} GiB", ha="right", fontsize=7)
    ax.set_xticks([0, 1])
    ax.set_xticklabels(["one GDN layer", f"{n_layers} GDN layers"])
    ax.set_yscale("log")
    ax.set_ylabel("GiB kept for the backward (log)")
    ax.set_ylim(top=max(n_layers * mem["trajectory"] / 2**30, gpu_gib or 0) * 8)
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title(f"Saved states, fp32: B = {B}, T = {T:,}, H = {H}, S = {S}, D = {D}", fontsize=9)
    return fig


def _gib(x: float) -> str:
    return f"{x:.3g} GiB" if x >= 1 else f"{x * 1024:.3g} MiB"


# --------------------------------------------------------------------------------------
# The measured results
# --------------------------------------------------------------------------------------
def load_reports(paths=None) -> list[dict]:
    """The benchmark reports, oldest first: ``paths`` if given, else every
    ``benchmarks/results/gdn_*.json``. Each report's ``environment`` gets its file name.
    Raises FileNotFoundError if there is none."""
    files = ([Path(p) for p in paths] if paths is not None
             else sorted(RESULTS_DIR.glob("gdn_*.json")))
    missing = [str(f) for f in files if not f.is_file()]
    if missing or not files:
        raise FileNotFoundError(
            f"no GDN benchmark results ({', '.join(missing) or str(RESULTS_DIR / 'gdn_*.json')}):"
            " run `python3 benchmarks/gdn.py` on a GPU machine and commit the JSON it writes "
            "to benchmarks/results/")
    reports = []
    for file in files:
        report = json.loads(file.read_text())
        if "shapes" not in report or "environment" not in report:
            raise ValueError(f"{file} is not a benchmarks/gdn.py report (no 'shapes' or "
                             "'environment')")
        report["environment"]["file"] = file.name
        reports.append(report)
    return sorted(reports, key=lambda r: r["environment"].get("date", ""))


def _caption(reports: list[dict], letters: bool = False) -> str:
    lines = []
    for i, r in enumerate(reports):
        env = r["environment"]
        mark = f"[{_letter(i)}] " if letters else ""
        lines.append(f"{mark}{env.get('file', '')}: {env.get('gpu', 'no GPU')}, torch "
                     f"{env.get('torch', '?')}, Triton {env.get('triton', '?')}, fla-core "
                     f"{env.get('fla_core') or '-'}, {env.get('date', '?')}\n"
                     f"  {' ' * len(mark)}{env.get('command', '?')}")
    return "\n".join(lines)


def _letter(i: int) -> str:
    return "abcdefghijklmnopqrstuvwxyz"[i % 26]


@dataclass
class Table:
    """Rows of measured results; shows itself as aligned text, each row marked with the run
    it came from ([a], [b], ... as listed under the table)."""

    rows: list[dict]
    caption: str

    def __repr__(self) -> str:
        def fmt(x, spec):
            width = int(spec.split(".")[0])
            return format(x, spec) if isinstance(x, (int, float)) else "-".rjust(width)
        head = (f"{'shape':<15} {'dtype':<9} {'backend':<34} {'fwd ms':>9} {'fwd+bwd ms':>11} "
                f"{'peak MiB':>9}  {'o vs loop':>9}  run")
        lines = [head, "-" * len(head)]
        for r in self.rows:
            name = _LABELS.get(r["backend"], r["backend"])
            lines.append(f"{r['shape']:<15} {r['dtype']:<9} {name:<34}"
                         f" {fmt(r['fwd_ms'], '9.3f')} {fmt(r['fwdbwd_ms'], '11.2f')}"
                         f" {fmt(r['peak_mib'], '9.1f')}  {fmt(r['o_rel_err'], '9.0e')}"
                         f"  [{r.get('run', '?')}]")
        return "\n".join(lines + ["", self.caption])


def results_table(reports: list[dict]) -> Table:
    """One row per (shape, dtype, backend) of every report; a later report's row replaces
    an earlier one's for the same backend and shape, so rows of one shape may come from
    different runs: each names its run. Rows are ordered by shape, dtype and backend."""
    reports = [r for r in reports if r["shapes"]]  # a sweep-only run has no rows here
    rows: dict[tuple, dict] = {}
    shapes, dtypes = {}, {}  # order of first appearance
    for i, report in enumerate(reports):
        for entry in report["shapes"].values():
            shape = f"B{entry['B']} T{entry['T']} H{entry['H']}"
            shapes.setdefault(shape, len(shapes))
            dtypes.setdefault(entry["dtype"], len(dtypes))
            for name, res in entry["results"].items():
                rows[(shape, entry["dtype"], name)] = {
                    "shape": shape, "dtype": entry["dtype"], "backend": name,
                    "fwd_ms": res.get("fwd_ms"), "fwdbwd_ms": res.get("fwdbwd_ms"),
                    "peak_mib": res.get("peak_mib"),
                    "o_rel_err": entry["checks"].get(name, {}).get("o"),
                    "file": report["environment"]["file"], "run": _letter(i)}
    order = list(_LABELS)
    def rank(row):
        return (shapes[row["shape"]], dtypes[row["dtype"]],
                order.index(row["backend"]) if row["backend"] in order else len(order))
    return Table(sorted(rows.values(), key=rank), _caption(reports, letters=True))


def latest_run(reports: list[dict], key: str, backend: str | None = None) -> dict:
    """The most recent report with results at shape ``key`` (and for ``backend``, if given).
    Raises KeyError if there is none."""
    for report in reversed(reports):
        results = report["shapes"].get(key, {}).get("results", {})
        if results and (backend is None or backend in results):
            return report
    raise KeyError(f"no report has shape {key!r}" + (f" with {backend!r}" if backend else ""))


def speedup_figure(reports: list[dict], key: str = "B4_T4096_H40_float32") -> Figure:
    """Forward and forward + backward time (ms, log scale) of every backend measured at one
    shape in the latest run that has it (:func:`latest_run`; one run, so that every ratio
    compares times taken together), beside section 6.1's predicted 13.1 s loop and 1.6 ms
    kernel (hatched) and the time a device copy of the forward's minimum bytes takes. Each
    bar is labelled with its time and its speed-up over that run's eager loop."""
    report = latest_run(reports, key)
    entry = report["shapes"][key]
    results = entry["results"]
    doc = document_launches(entry["B"], entry["T"], entry["H"])
    copy_gbps = report["environment"].get("copy_GBps")
    # rows: (label, forward ms, forward+backward ms, colour, from the document?)
    rows = [(f"document: {doc['loop_launches']:,} launches x 10 µs", doc["loop_s"] * 1e3, None,
             "white", True)]
    rows += [(_LABELS[n], results[n].get("fwd_ms"), results[n].get("fwdbwd_ms"), _COLORS[n],
              False) for n in _LABELS if n in results]
    rows.append((f"document: {doc['kernel_launches']} launches x 10 µs", doc["kernel_ms"], None,
                 "white", True))
    if copy_gbps and entry.get("bytes_min_fwd"):
        rows.append(("device copy of the forward's bytes",
                     entry["bytes_min_fwd"] / copy_gbps / 1e6, None, "#bbbbbb", False))
    eager = results.get("eager", {})
    fig = Figure(figsize=(11, 4.8), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    for ax, column, metric, title in ((axes[0], 1, "fwd_ms", "forward"),
                                      (axes[1], 2, "fwdbwd_ms", "forward + backward")):
        for y, row in enumerate(rows):
            ms, color, documented = row[column], row[3], row[4]
            if not ms:
                continue
            ax.barh(y, ms, color=color, edgecolor="k" if documented else color,
                    hatch="//" if documented else None)
            ref = eager.get(metric)
            measured = not documented and row[0] != _LABELS["eager"]
            speedup = f"  ({ref / ms:,.0f}x)" if ref and measured else ""
            text = f"{ms:,.0f}" if ms >= 100 else f"{ms:.3g}"
            ax.text(ms * 1.15, y, f"{text} ms{speedup}", va="center", fontsize=7)
        ax.set_xscale("log")
        ax.set_xlim(right=max(r[column] or 0 for r in rows) * 60)
        ax.set_xlabel("milliseconds (log)")
        ax.set_title(f"{title}; (Nx) = speed-up over the measured eager loop", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(rows)))
    axes[0].set_yticklabels([r[0] for r in rows], fontsize=7)
    axes[0].invert_yaxis()
    fig.suptitle(f"GDN recurrence, B = {entry['B']}, T = {entry['T']:,}, H = {entry['H']}, "
                 f"S = {entry['S']}, D = {entry['D']}, {entry['dtype']}; hatched: the "
                 f"document's launch arithmetic\n" + _caption([report]), fontsize=7)
    return fig


def gpu_results(paths=None, key: str = "B4_T4096_H40_float32") -> tuple[Table, Figure]:
    """The committed GPU measurements: (table of every shape and backend, speed-up figure at
    ``key``). Raises FileNotFoundError if no results file is committed."""
    reports = load_reports(paths)
    return results_table(reports), speedup_figure(reports, key)


# --------------------------------------------------------------------------------------
# The chunked kernel against its targets, and against T
# --------------------------------------------------------------------------------------
@dataclass
class Targets:
    """The chunked kernel scored against :data:`TARGETS`, shape by shape, in one run.

    rows: per shape and dtype, the times, memories and their ratios; verdicts: per target,
    (the worst value over the shapes, the limit, whether every shape meets it)."""

    rows: list[dict]
    verdicts: dict
    labels: tuple[str, str]
    caption: str

    def __repr__(self) -> str:
        ours, peer = self.labels
        head = (f"{'shape':<15} {'dtype':<9} {'fwd+bwd ms':>13} {'ratio':>6}  {'peak MiB':>11} "
                f"{'ratio':>6}  {'fwd ms':>11} {'fwd/copy':>8} {'(peer)':>7}")
        lines = [f"{ours} (ours) against {peer} (peer), measured in one run:", head,
                 "-" * len(head)]
        for r in self.rows:
            lines.append(f"{r['shape']:<15} {r['dtype']:<9} "
                         f"{r['fwdbwd_ms']:5.2f} / {r['peer_fwdbwd_ms']:5.2f} "
                         f"{r['fwdbwd_ratio']:5.2f}x  "
                         f"{r['peak_mib']:4.0f} / {r['peer_peak_mib']:4.0f} "
                         f"{r['peak_ratio']:5.2f}x  {r['fwd_ms']:4.2f} / {r['peer_fwd_ms']:4.2f} "
                         f"{r['fwd_vs_copy']:7.1f}x {r['peer_fwd_vs_copy']:6.1f}x")
        names = {"fwdbwd_vs_peer": f"forward + backward / {peer}",
                 "peak_vs_peer": f"peak memory / {peer}",
                 "fwd_vs_copy": "forward / a device copy of its bytes"}
        lines += ["", f"{'target':<48} {'limit':>6} {'worst':>7}  verdict"]
        for key, (worst, limit, met) in self.verdicts.items():
            verdict = (f"met, {1 - worst / limit:.0%} below the limit" if met
                       else f"missed, {worst / limit:.1f}x the limit")
            lines.append(f"{names[key]:<48} {limit:5.1f}x {worst:6.2f}x  {verdict}")
        return "\n".join(lines + ["", self.caption])


def chunk_targets(reports: list[dict] | None = None, ours: str = "triton_chunk",
                  peer: str = "fla_chunk") -> Targets:
    """Score ``ours`` against ``peer`` and :data:`TARGETS` in the latest report that
    measured both (every ratio compares times of one run). The copy time of a shape is its
    ``bytes_min_fwd`` (read v, b, c, g, write o) at the run's measured copy bandwidth."""
    reports = load_reports() if reports is None else reports
    report = next((r for r in reversed(reports) if any(
        ours in e["results"] and peer in e["results"] for e in r["shapes"].values())), None)
    if report is None:
        raise KeyError(f"no report measured both {ours!r} and {peer!r}")
    gbps = report["environment"]["copy_GBps"]
    rows = []
    for entry in report["shapes"].values():
        res = entry["results"]
        if ours not in res or peer not in res:
            continue
        copy_ms = entry["bytes_min_fwd"] / gbps / 1e6
        a, p = res[ours], res[peer]
        rows.append({"shape": f"B{entry['B']} T{entry['T']} H{entry['H']}", "dtype": entry["dtype"],
                     "fwd_ms": a["fwd_ms"], "peer_fwd_ms": p["fwd_ms"], "copy_ms": copy_ms,
                     "fwdbwd_ms": a["fwdbwd_ms"], "peer_fwdbwd_ms": p["fwdbwd_ms"],
                     "fwdbwd_ratio": a["fwdbwd_ms"] / p["fwdbwd_ms"],
                     "peak_mib": a["peak_mib"], "peer_peak_mib": p["peak_mib"],
                     "peak_ratio": a["peak_mib"] / p["peak_mib"],
                     "fwd_vs_copy": a["fwd_ms"] / copy_ms,
                     "peer_fwd_vs_copy": p["fwd_ms"] / copy_ms})
    verdicts = {}
    for key, column in (("fwdbwd_vs_peer", "fwdbwd_ratio"), ("peak_vs_peer", "peak_ratio"),
                        ("fwd_vs_copy", "fwd_vs_copy")):
        worst = max(r[column] for r in rows)
        verdicts[key] = (worst, TARGETS[key], worst <= TARGETS[key])
    return Targets(rows, verdicts, (_LABELS.get(ours, ours), _LABELS.get(peer, peer)),
                   _caption([report]))


class Text(str):
    """A string that shows itself as plain text (no quotes) as a cell's last expression."""

    def __repr__(self) -> str:
        return str(self)


_SHORT = {"eager": "eager", "triton": "recurrent", "chunk": "chunk torch",
          "triton_chunk": "Triton chunk", "fla_chunk": "fla chunk",
          "triton_kernel": "rec. no checks", "fla_fused_recurrent": "fla recurrent"}


def sweep_table(report: dict | None = None) -> Text:
    """The time-against-T sweep as text: forward / forward + backward ms of every backend
    at each T, the fastest forward + backward, and the chunked Triton kernel's forward +
    backward against the recurrent kernel ("chunk/rec") and against fla chunk_gla
    ("chunk/fla"), and its forward against a device copy of the minimum bytes.
    ``report``: the latest run with a ``sweep_T`` section if not given."""
    if report is None:
        report = next((r for r in reversed(load_reports()) if r.get("sweep_T")), None)
        if report is None:
            raise KeyError("no report has a sweep_T section")
    sweep = report["sweep_T"]
    names = [n for n in _SHORT if n in sweep["results"]]
    width = max(len(_SHORT[n]) for n in names) + 2
    head = (f"{'T':>7} " + "".join(f"{_SHORT[n]:>{width}}" for n in names)
            + f"  {'fastest f+b':<13}{'chunk/rec':>9} {'chunk/fla':>9} {'fwd/copy':>8}")
    lines = [f"B = {sweep['B']}, H = {sweep['H']}, S = {sweep['S']}, D = {sweep['D']}, "
             f"{sweep['dtype']}: ms, forward / forward + backward", head, "-" * len(head)]
    itemsize = {"float32": 4, "bfloat16": 2, "float16": 2}[sweep["dtype"]]

    def at(name, key, i):
        values = sweep["results"].get(name, {}).get(key) or []
        return values[i] if i < len(values) else None

    def ratio(x, y):
        return f"{x / y:.2f}x" if x and y else "-"

    for i, T in enumerate(sweep["T"]):
        cells = []
        for n in names:
            f, fb = at(n, "fwd_ms", i), at(n, "fwdbwd_ms", i)
            cells.append(f"{_ms(f)} / {_ms(fb)}".rjust(width))
        timed = {n: at(n, "fwdbwd_ms", i) for n in names if at(n, "fwdbwd_ms", i)}
        fastest = _SHORT[min(timed, key=timed.get)] if timed else "-"
        tc = at("triton_chunk", "fwdbwd_ms", i)
        copy_ms = (sweep["B"] * T * sweep["H"] * (2 * sweep["D"] + 2 * sweep["S"] + 1) * itemsize
                   / report["environment"]["copy_GBps"] / 1e6)
        fwd_copy = at("triton_chunk", "fwd_ms", i)
        lines.append(f"{T:>7,} " + "".join(cells) + f"  {fastest:<13}"
                     f"{ratio(tc, at('triton', 'fwdbwd_ms', i)):>9} "
                     f"{ratio(tc, at('fla_chunk', 'fwdbwd_ms', i)):>9} "
                     + (f"{fwd_copy / copy_ms:7.1f}x" if fwd_copy else f"{'-':>8}"))
    return Text("\n".join(lines + ["", _caption([report])]))


def _ms(x) -> str:
    if not x:
        return "-"
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"
