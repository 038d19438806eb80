"""Figures for chapter 04 (multi-head latent attention, section 4).

Cache sizes come from :mod:`hymo_mini.costs`; attention maps from
``MultiHeadLatentAttention.attention_weights``. Every function takes the values a widget
would set and returns a ``Figure``.
"""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure

from hymo_mini.config import ModelConfig, load_config
from hymo_mini.costs import kv_cache_bytes_per_token

__all__ = ["DOCUMENT_MLA_CACHE_VALUES", "kv_cache_figure", "attention_map_figure", "FIGURES"]

# section 4.2.1: "KV cache per token: kv_lora_rank + n_kv_groups × qk_rope = 128 + 128 = 256"
DOCUMENT_MLA_CACHE_VALUES = 256

_COLOURS = {"MHA": "#7570b3", "GQA-8": "#66a61e", "GQA-4": "#e6ab02", "MQA": "#a6761d",
            "MLA (expanded cache)": "#fdae6b", "MLA (latent cache)": "#d95f02"}


def kv_cache_figure(T: int = 4096, n_layers: int = 8, config: ModelConfig | None = None,
                    dtype_bytes: int = 2, show_document: bool = True) -> Figure:
    """Left: cache bytes per token and layer for each way of keeping keys and values
    (MHA, GQA with 8 and ``n_kv_groups`` heads, MQA, MLA expanded, MLA latent).
    Right: the cache of ``n_layers`` such layers for one sequence, against T."""
    config = config or load_config("hymo_750m").model
    if not isinstance(T, int) or T <= 0:
        raise ValueError(f"T must be a positive integer, got {T!r}")
    per_token = kv_cache_bytes_per_token(config, dtype_bytes)
    names = list(per_token)
    fig = Figure(figsize=(11.5, 4.2))
    ax_bar, ax_line = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.2]})
    y = np.arange(len(names))
    ax_bar.barh(y, [per_token[n] for n in names], color=[_COLOURS.get(n, "grey") for n in names])
    document_bytes = DOCUMENT_MLA_CACHE_VALUES * dtype_bytes
    for yi, n in zip(y, names, strict=True):
        right = max(per_token[n], document_bytes if show_document and "latent" in n else 0)
        label = f"{per_token[n]:,} B ({per_token[n] // dtype_bytes:,} values)"
        ax_bar.text(right + 0.03 * max(per_token.values()), yi, label, va="center", fontsize=8)
    if show_document:
        ax_bar.plot([document_bytes], [names.index("MLA (latent cache)")],
                    "x", color="#c62828", ms=9, mew=2, label="document: 256 values")
        ax_bar.legend(fontsize=8, loc="center right")
    ax_bar.set_yticks(y, names, fontsize=8)
    ax_bar.invert_yaxis()
    ax_bar.set_xlim(0, max(per_token.values()) * 1.6)
    ax_bar.set_xlabel(f"bytes per token per layer ({dtype_bytes}-byte values)")
    ax_bar.set_title(f"{config.n_heads} query heads of {config.head_dim}; "
                     f"MLA latent {config.kv_lora_rank} + k_pe {config.qk_rope_head_dim}",
                     fontsize=10)
    ts = np.unique(np.geomspace(128, max(131_072, T), 40).astype(int))
    for n in names:
        ax_line.loglog(ts, n_layers * per_token[n] * ts / 2**20, color=_COLOURS.get(n, "grey"),
                       lw=2.5 if n == "MLA (latent cache)" else 1.5, label=n)
    ax_line.axvline(T, color="grey", ls=":", lw=1)
    latent_mib = n_layers * per_token["MLA (latent cache)"] * T / 2**20
    mha_mib = n_layers * per_token["MHA"] * T / 2**20
    ax_line.set_title(f"{n_layers} layers at T={T:,}: MLA {latent_mib:,.1f} MiB, "
                      f"MHA {mha_mib:,.0f} MiB", fontsize=10)
    ax_line.set_xlabel("sequence length T (tokens)")
    ax_line.set_ylabel("cache for one sequence (MiB)")
    ax_line.grid(True, which="major", alpha=0.3)
    ax_line.legend(fontsize=8)
    fig.tight_layout()
    return fig


def attention_map_figure(probs, head: int = 0, labels: list[str] | None = None,
                         title: str = "") -> Figure:
    """Attention probabilities of one head, ``probs`` (heads, t, s), beside the mean over
    heads. ``labels`` name the positions (e.g. the characters of the input)."""
    if isinstance(probs, torch.Tensor):
        probs = probs.detach().double().cpu().numpy()
    p = np.asarray(probs, dtype=float)
    if p.ndim != 3:
        raise ValueError(f"probs must be (heads, t, s), got shape {p.shape}")
    if not 0 <= head < p.shape[0]:
        raise ValueError(f"head must be in [0, {p.shape[0]}), got {head}")
    fig = Figure(figsize=(10, 4.6))
    axes = fig.subplots(1, 2)
    for ax, matrix, name in ((axes[0], p[head], f"head {head}"),
                             (axes[1], p.mean(axis=0), f"mean of {p.shape[0]} heads")):
        image = ax.imshow(matrix, cmap="magma", vmin=0, vmax=max(float(matrix.max()), 1e-9),
                          interpolation="nearest")
        fig.colorbar(image, ax=ax, fraction=0.046, label="probability")
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("key position s")
        ax.set_ylabel("query position t")
        if labels is not None:
            ticks = range(len(labels))
            ax.set_xticks(ticks, labels, fontsize=8)
            ax.set_yticks(ticks, labels, fontsize=8)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


FIGURES = {
    "mla_kv_cache.png": lambda: kv_cache_figure(4096, 8),
}
