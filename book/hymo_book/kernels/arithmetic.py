"""Arithmetic and figures of the kernel chapters: 10 (the Triton kernels) and 21 (the kernel
report); section 6 of the document.

Three groups, each checked by ``tests/book/test_book_kernel_chapter.py``:

* **Errors** for the ladder loop → kernel → check: :func:`max_rel_error`, :func:`check_line`.
* **The chunkwise-parallel form drawn**: :func:`decay_matrix` builds, for one head, the
  (T, T) matrix M with o = M v that the recurrence amounts to (chapter 10 checks the
  levels against it).
* **The document's arithmetic**: :func:`document_launches`, :func:`launches_per_step`
  (kernels the eager loop launches per time step, counted by PyTorch's dispatcher; both
  combined with the measured run in :func:`hymo_book.kernels.report.launch_arithmetic`), and
  the memory of a stored state trajectory against checkpoints (:func:`memory_bytes`,
  :func:`recurrent_peak_bytes`, :func:`memory_figure`).

The kernel chapters' other material has its own modules: the GPU primer of chapter 09 in
:mod:`hymo_book.kernels.primer`, the source listings in :mod:`hymo_book.kernels.source`, the
levels of the chunked kernel in :mod:`hymo_book.kernels.chunk_levels`, the committed GPU
measurements in :mod:`hymo_book.kernels.gdn_runs`, :mod:`hymo_book.plots.kernel_benchmarks`,
:mod:`hymo_book.kernels.runs` and :mod:`hymo_book.kernels.report`, and the chunked kernel's
traffic, peak memory and targets in :mod:`hymo_book.kernels.targets`. Nothing here measures
time.
"""

from __future__ import annotations

import math
from collections import Counter

import torch
from matplotlib.figure import Figure

from hymo_book.style import DOCUMENT_BAR, backend_style

__all__ = ["max_rel_error", "check_line", "decay_matrix",
           "document_launches", "launches_per_step", "memory_bytes", "recurrent_peak_bytes",
           "memory_figure"]


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
    return f"{name:<48} max |x - loop| / max |loop| < {tol:.0e}: {err < tol}"


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
    """The operators ``naive_gla`` runs per time step that launch a kernel on a
    GPU (views excluded), counted by PyTorch's dispatcher: the count for T = 4 minus the
    count for T = 3. The count does not grow with B and H: the loop is vectorised over both.
    (With B = H = 1 one copy is skipped: the read's operand is already contiguous.)"""
    from torch.utils._python_dispatch import TorchDispatchMode

    from hymo_mini.ops import naive_gla

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
            naive_gla(v, b, c, g, A)
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


def memory_figure(T: int = 4096, chunk: int = 64, n_layers: int = 24, B: int = 4, H: int = 40,
                  S: int = 32, D: int = 32, gpu_gib: float | None = 139.8) -> Figure:
    """State memory kept for the backward (log scale, GiB): the document's trajectory
    against the recurrent kernel's checkpoints and the chunk kernel's block-start states
    (one per 16 steps), for one layer and for ``n_layers`` GDN layers (whose saved tensors
    all live at once before the backward starts); the line is the GPU's memory."""
    if not isinstance(n_layers, int) or n_layers < 1:
        raise ValueError(f"n_layers must be a positive int, got {n_layers!r}")
    mem = memory_bytes(B, T, H, S, D, chunk)
    kinds = [("trajectory", "every state H_t (document)", DOCUMENT_BAR),
             ("checkpoints", f"checkpoint every {chunk} steps (hymo Triton recurrent)",
              backend_style("recurrent_triton")),
             ("block_states", "state every 16 steps (hymo Triton chunk)",
              backend_style("chunk_triton"))]
    fig = Figure(figsize=(8, 4.4), layout="constrained")
    ax = fig.subplots()
    width = 0.25
    for i, (key, label, style) in enumerate(kinds):
        values = [mem[key] / 2**30, n_layers * mem[key] / 2**30]
        bars = ax.bar([j + (i - 1) * width for j in range(2)], values, width, label=label,
                      **style.bar())
        ax.bar_label(bars, labels=[_gib(v) for v in values], fontsize=8, padding=2)
    if gpu_gib:
        ax.axhline(gpu_gib, color="k", ls="--", lw=1)
        ax.text(1.45, gpu_gib * 1.15, f"GPU memory {gpu_gib:g} GiB", ha="right", fontsize=8)
    ax.set_xticks([0, 1])
    ax.set_xticklabels(["one GDN layer", f"{n_layers} GDN layers"])
    ax.set_yscale("log")
    ax.set_ylabel("GiB kept for the backward (log)")
    ax.set_ylim(top=max(n_layers * mem["trajectory"] / 2**30, gpu_gib or 0) * 8)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(f"Saved states, fp32: B = {B}, T = {T:,}, H = {H}, S = {S}, D = {D}", fontsize=9)
    return fig


def _gib(x: float) -> str:
    return f"{x:.3g} GiB" if x >= 1 else f"{x * 1024:.3g} MiB"
