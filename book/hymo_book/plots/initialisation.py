"""The model at initialisation through depth (chapter 13, the stack; section 10 of the
document says no init pass runs: PyTorch's module defaults plus a few inline inits).

:func:`parameter_stats` gives the statistics of each parameter of a module beside PyTorch's
default rule; :func:`residual_rms` the scale of the residual stream layer by layer at
initialisation, for both GDN residual modes (``gdn_residual``: hymo_mini's ``"identity"``
pre-norm block, or the document's ``out_proj(o) + skip_proj(x)`` with no identity path) and
both embedding inits (``embed_init``: ``"scaled"`` N(0, 1/dim) or ``"torch"`` N(0, 1)).

What is measured, and how (so the production widths fit in seconds on a CPU): the given
config (the figure: the production one, unchanged) on a short sequence (T = 32, B = 1). The
layers are built one at a time, each from its own seed ``seed + layer_idx``, run on every
stream, then freed, so the whole model never exists at once; an MLA block is the same in
both modes and is built once. The embedding comes from ``HyMo`` itself (a one-layer HyMo at the
config's width, whose ``embed`` is initialised by the model's own code). The vocabulary does not
matter: every row of the embedding is drawn the same way.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from torch import nn

from hymo_book.moe_experiments import single_thread
from hymo_mini.blocks import GDNBlock, MLABlock
from hymo_mini.config import ModelConfig, load_config, replace

__all__ = [
    "ParamStat",
    "parameter_stats",
    "stream_rms",
    "embedding_rows",
    "residual_rms",
    "residual_rms_figure",
    "FIGURES",
]

MODES = ("identity", "document")
EMBED_INITS = ("scaled", "torch")


@dataclass(frozen=True)
class ParamStat:
    name: str
    shape: tuple[int, ...]
    mean: float
    std: float
    default_std: float | None  # nn.Linear / Conv1d default: 1/sqrt(3 fan_in); None otherwise


def parameter_stats(module: nn.Module) -> list[ParamStat]:
    """Mean and standard deviation of every parameter, beside PyTorch's default for a linear
    or conv weight (kaiming-uniform with a = √5: U(±1/√fan_in), std 1/√(3·fan_in))."""
    owners = {f"{prefix}.weight" if prefix else "weight": m for prefix, m in module.named_modules()
              if isinstance(m, (nn.Linear, nn.Conv1d))}
    stats = []
    for name, p in module.named_parameters():
        data = p.detach().float()
        default = None
        if name in owners:
            fan_in = data[0].numel()  # in_features, or in_channels/groups × kernel
            default = 1 / math.sqrt(3 * fan_in)
        stats.append(ParamStat(name, tuple(p.shape), data.mean().item(),
                               data.std().item() if data.numel() > 1 else 0.0, default))
    return stats


def stream_rms(layers, x: torch.Tensor) -> list[float]:
    """RMS of the residual stream x (b, t, dim) before and after each layer, run in order
    (as ``HyMo.run_layers`` does with ``hc_mult = 1``)."""
    out = [x.pow(2).mean().sqrt().item()]
    with torch.no_grad():
        for layer in layers:
            x = layer(x)  # (b, t, dim)
            out.append(x.pow(2).mean().sqrt().item())
    return out


def embedding_rows(config: ModelConfig, tokens: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """Rows of ``HyMo``'s embedding at init for ``tokens`` (b, t): a one-layer, no-MTP HyMo
    at the config's width is built and its embedding looked up."""
    from hymo_mini.model import HyMo

    small = replace(config, n_layers=1, mla_every=0, vocab_size=256, mtp_depth=0,
                    mtp_loss_weights=(), gdn_d_inner=config.gdn_headdim)
    torch.manual_seed(seed)
    with torch.no_grad():
        return HyMo(small).embed(tokens % 256)  # (b, t, dim)


@functools.lru_cache(maxsize=8)
def residual_rms(config: ModelConfig, T: int = 32, B: int = 1, seed: int = 0,
                 inits: tuple[str, ...] = EMBED_INITS) -> dict[tuple[str, str], tuple[float, ...]]:
    """{(gdn_residual, embed_init): RMS after the embedding and after each layer} at init,
    for both residual modes and each embedding init of ``inits``. Cached: the production
    config takes several seconds per init."""
    if T <= 0 or B <= 0:
        raise ValueError(f"T and B must be positive, got T={T}, B={B}")
    if not inits or any(init not in EMBED_INITS for init in inits):
        raise ValueError(f"inits must be a non-empty tuple of {EMBED_INITS}, got {inits!r}")
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 256, (B, T), generator=g)
    streams = {}
    for init in inits:
        x = embedding_rows(replace(config, embed_init=init), tokens, seed)
        for mode in MODES:
            streams[(mode, init)] = [x]
    nope = set(config.nope_gdn_positions)
    with torch.no_grad(), single_thread():  # many small ops: threads only contend
        for i, kind in enumerate(config.layer_types):
            if kind == "mla":
                torch.manual_seed(seed + i)
                layer = MLABlock(config, layer_idx=i)  # identical in both modes
                blocks = dict.fromkeys(MODES, layer)
            else:
                blocks = {}
                for mode in MODES:
                    torch.manual_seed(seed + i)  # same weights; "identity" adds a norm
                    blocks[mode] = GDNBlock(replace(config, gdn_residual=mode), i,
                                            use_rope=i not in nope)
            for (mode, _init), xs in streams.items():
                xs.append(blocks[mode](xs[-1]))  # (b, t, dim)
            del blocks  # free this layer before building the next
    return {key: tuple(x.pow(2).mean().sqrt().item() for x in xs) for key, xs in streams.items()}


# the residual mode by colour and marker, the embedding init by line style
_MODE_LOOK = {"identity": ("#1b9e77", "o"), "document": ("#d95f02", "s")}
_INIT_STYLE = {"scaled": "-", "torch": "--"}


def residual_rms_figure(config: ModelConfig | None = None, identity: bool = True,
                        document: bool = True, scaled: bool = True, torch_init: bool = True,
                        log_scale: bool = True, T: int = 32) -> Figure:
    """RMS of the residual stream against depth at init (MLA layers shaded)."""
    config = load_config("hymo_750m").model if config is None else config
    inits = tuple(i for i, shown in (("scaled", scaled), ("torch", torch_init)) if shown)
    results = residual_rms(config, T, inits=inits) if inits and (identity or document) else {}
    fig = Figure(figsize=(9, 4))
    ax = fig.add_subplot()
    for i in config.mla_positions:
        ax.axvspan(i + 0.5, i + 1.5, color="grey", alpha=0.15, lw=0)
    show_mode = {"identity": identity, "document": document}
    for (mode, init), values in results.items():
        if show_mode[mode]:
            colour, marker = _MODE_LOOK[mode]
            ax.plot(range(len(values)), values, color=colour, ls=_INIT_STYLE[init],
                    marker=marker, ms=4, label=f"gdn_residual={mode}, embed_init={init}")
    if log_scale:
        ax.set_yscale("log")
    ax.set_xlabel("after layer (0 = the embedding; shaded: MLA + MoE blocks)")
    ax.set_ylabel("RMS of the residual stream")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(f"residual stream at init, {config.n_layers} layers, dim {config.dim}, T={T}",
                 fontsize=10)
    if ax.lines:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


FIGURES = {"init_residual_rms.png": residual_rms_figure}
