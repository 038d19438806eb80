"""Figures for chapters 05 (attention and the KV cache) and 06 (multi-head latent attention,
section 4 of the design document).

Cache sizes come from :mod:`hymo_mini.analysis.costs`; attention maps from
``MultiHeadLatentAttention.attention_weights``. Every function takes the values a widget
would set and returns a ``Figure``.
"""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure

from hymo_mini.analysis.costs import kv_cache_bytes_per_token
from hymo_mini.config import ModelConfig, load_config

__all__ = ["kv_cache_figure", "attention_map_figure", "FIGURES"]

# each way of caching keys and values: (colour, marker, line style, bar hatch), so the
# series read apart in grey-scale too; GQA groups other than these take the last style
_LOOKS = {"MHA": ("#7570b3", "o", "-", ""), "GQA-8": ("#66a61e", "s", "--", "//"),
          "GQA-4": ("#e6ab02", "^", "-.", "\\\\"), "MQA": ("#a6761d", "v", ":", "xx"),
          "MLA (expanded cache)": ("#fdae6b", "D", (0, (5, 1, 1, 1)), ".."),
          "MLA (latent cache)": ("#d95f02", "*", "-", "oo")}
_OTHER = ("#999999", "P", (0, (1, 3)), "++")


def kv_cache_figure(T: int = 4096, n_layers: int = 8, config: ModelConfig | None = None,
                    dtype_bytes: int = 2) -> Figure:
    """Left: cache bytes per token and layer for each way of keeping keys and values
    (MHA, GQA with 8 and ``n_kv_groups`` heads, MQA, MLA expanded, MLA latent).
    Right: the cache of ``n_layers`` such layers for one sequence, against T."""
    config = config or load_config("hymo_750m").model
    if not isinstance(T, int) or T <= 0:
        raise ValueError(f"T must be a positive integer, got {T!r}")
    per_token = kv_cache_bytes_per_token(config, dtype_bytes)
    names = list(per_token)
    looks = [_LOOKS.get(n, _OTHER) for n in names]
    fig = Figure(figsize=(11, 4.2))
    ax_bar, ax_line = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.2]})
    y = np.arange(len(names))
    for yi, n, (colour, _, _, hatch) in zip(y, names, looks, strict=True):
        ax_bar.barh([yi], [per_token[n]], color=colour, hatch=hatch or None,
                    edgecolor="black", linewidth=0.4)
        label = f"{per_token[n]:,} B ({per_token[n] // dtype_bytes:,} values)"
        ax_bar.text(per_token[n] + 0.03 * max(per_token.values()), yi, label, va="center",
                    fontsize=8)
    ax_bar.set_yticks(y, names, fontsize=8)
    ax_bar.invert_yaxis()
    ax_bar.set_xlim(0, max(per_token.values()) * 1.6)
    ax_bar.set_xlabel(f"bytes per token per layer ({dtype_bytes}-byte values)")
    ax_bar.set_title(f"{config.n_heads} query heads of {config.head_dim}; "
                     f"MLA latent {config.kv_lora_rank} + k_pe {config.qk_rope_head_dim}",
                     fontsize=10)
    ts = np.unique(np.geomspace(128, max(131_072, T), 40).astype(int))
    for n, (colour, marker, style, _) in zip(names, looks, strict=True):
        ax_line.loglog(ts, n_layers * per_token[n] * ts / 2**20, color=colour, marker=marker,
                       ls=style, markevery=6, ms=5,
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
