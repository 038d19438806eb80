"""Figures for chapter 11 (mixture of experts, section 8): the router's choices, capacity
and dropped assignments, aux-loss-free balancing, and the fp32 router. The experiments they
draw are in :mod:`hymo_book.moe_experiments` (imported here too, for the chapter)."""

from __future__ import annotations

import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from hymo_book.moe_experiments import (  # noqa: F401 - re-exported for the chapter
    BalancingRun,
    balancing_runs,
    dropped_fraction,
    imbalanced_router,
    router_precision,
    router_tokens,
    simulate_balancing,
)
from hymo_mini.config import load_config, replace

__all__ = [
    "imbalanced_router",
    "router_tokens",
    "dropped_fraction",
    "BalancingRun",
    "simulate_balancing",
    "balancing_runs",
    "router_precision",
    "routing_figure",
    "capacity_figure",
    "balancing_figure",
    "router_precision_figure",
    "FIGURES",
]


# ---- figures ---------------------------------------------------------------------------
# the runs of the balancing figure: (label, colour, marker); max load solid, min dashed
_RUNS = {"off": ("no balancing", "#7f7f7f", "x"), "slow": ("bias, EMA α={:g}", "#d95f02", "o"),
         "fast": ("bias, EMA α={:g}", "#1b9e77", "s")}
_HATCHES = {"off": "", "slow": "//", "fast": ".."}


def _whole_ticks(*axes) -> None:
    for axis in axes:
        axis.set_major_locator(MaxNLocator(integer=True))


def routing_figure(n_tokens: int = 12, router_std: float = 0.006, skew: float = 0.0,
                   seed: int = 0) -> Figure:
    """Router probabilities for a few tokens (production router); the first choice in a
    solid box, the second in a dashed one."""
    config = replace(load_config("hymo_750m").model, router_init_std=router_std)
    moe = imbalanced_router(config, skew, seed)
    with torch.no_grad():
        routing = moe.route(router_tokens(config, n_tokens, seed=seed + 1))
    fig = Figure(figsize=(8, 0.3 * n_tokens + 1.8))
    ax = fig.add_subplot()
    image = ax.imshow(routing.probs.numpy(), cmap="viridis", aspect="auto")  # (n, e)
    for token, experts in enumerate(routing.indices.tolist()):
        for rank, e in enumerate(experts):
            ax.add_patch(Rectangle((e - 0.5, token - 0.5), 1, 1, fill=False, lw=2,
                                   edgecolor="white" if rank == 0 else "#ff7f00",
                                   ls="-" if rank == 0 else "--"))
    _whole_ticks(ax.xaxis, ax.yaxis)
    ax.set_xlabel("routed expert")
    ax.set_ylabel("token")
    ax.set_title(f"router probabilities, router_init_std={router_std:g}, skew={skew:g}\n"
                 "solid box: 1st choice, dashed box: 2nd choice", fontsize=10)
    fig.colorbar(image, ax=ax, label="softmax probability")
    fig.tight_layout()
    return fig


def capacity_figure(capacity_factor: float = 1.5, skew: float = 0.1, n_tokens: int = 4096,
                    seed: int = 0) -> Figure:
    """Left: assignments per expert in one training batch against the capacity (the
    dropped part hatched). Right: the dropped fraction against the capacity factor."""
    config = replace(load_config("hymo_750m").model, capacity_factor=capacity_factor)
    moe = imbalanced_router(config, skew, seed).train()
    x = router_tokens(config, n_tokens, seed=seed + 1)
    with torch.no_grad():
        routing = moe.route(x)
    counts = routing.counts.float()  # (e,)
    kept = torch.minimum(counts, torch.tensor(float(routing.capacity)))  # (e,)
    fig = Figure(figsize=(10, 3.8))
    left, right = fig.subplots(1, 2)
    experts = torch.arange(len(counts)).numpy()
    left.bar(experts, kept.numpy(), color="#1b9e77", label="served")
    left.bar(experts, (counts - kept).numpy(), bottom=kept.numpy(), color="#c62828",
             hatch="//", edgecolor="black", lw=0.4, label="dropped")
    left.axhline(routing.capacity, color="black", ls="--", lw=1,
                 label=f"capacity = {routing.capacity}")
    _whole_ticks(left.xaxis)
    left.set_xlim(-0.6, len(counts) - 0.4)
    left.set_xlabel("routed expert")
    left.set_ylabel("assignments")
    left.set_title(f"{n_tokens} tokens × top-{config.n_activated_experts}, "
                   f"capacity_factor={capacity_factor:g}, skew={skew:g}", fontsize=10)
    left.legend(fontsize=8)
    factors = [0.5 * i for i in range(1, 9)]  # 0.5 .. 4.0
    fractions = [100 * dropped_fraction(imbalanced_router(
        replace(config, capacity_factor=f), skew, seed).train(), x) for f in factors]
    right.plot(factors, fractions, color="#7570b3", marker="o", ms=4)
    right.plot([capacity_factor], [100 * dropped_fraction(moe, x)], "D", color="#c62828",
               ms=8)
    right.set_xlabel("capacity factor")
    right.set_ylabel("assignments dropped (%)")
    right.set_title("dropped against the capacity factor (diamond: this one)", fontsize=10)
    for ax in (left, right):
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def balancing_figure(skew: float = 0.1, steps: int = 1000, load_ema_alpha: float = 0.001,
                     bias_update_rate: float = 0.001, load_deadband: float = 0.05,
                     n_tokens: int = 256, compare_alpha: float | None = 0.1) -> Figure:
    """The aux-loss-free bias pulling an imbalanced router towards uniform load: no
    balancing, the bias with EMA rate ``load_ema_alpha`` (the document's 0.001 by
    default) and, unless None, with ``compare_alpha``. Left: the most and least loaded
    expert (a rolling mean); middle: the load of every expert at the end; right: the bias
    of the least and the most preferred expert."""
    runs = balancing_runs(skew, steps, load_ema_alpha, bias_update_rate, load_deadband, n_tokens,
                          compare_alpha)
    alphas = {"off": None, "slow": load_ema_alpha, "fast": compare_alpha}
    E = runs["off"].loads.shape[1]
    fig = Figure(figsize=(12, 4))
    ax_spread, ax_bars, ax_bias = fig.subplots(1, 3)
    window = min(20, steps)
    x = torch.arange(window, steps + 1).numpy()  # the last step of each window
    width = 0.8 / len(runs)
    for i, (key, run) in enumerate(runs.items()):
        label, colour, marker = _RUNS[key]
        label = label.format(alphas[key])
        look = dict(color=colour, marker=marker, ms=5, markevery=max(1, len(x) // 6))
        smooth = _rolling_mean(run.loads, window) * E  # (steps - window + 1, e)
        ax_spread.plot(x, smooth.max(1).values.numpy(), ls="-", label=label, **look)
        ax_spread.plot(x, smooth.min(1).values.numpy(), ls="--", **look)  # same run
        end = run.loads[-window:].mean(0) * E  # (e,)
        ax_bars.bar((torch.arange(E) + (i - (len(runs) - 1) / 2) * width).numpy(), end.numpy(),
                    width, color=colour, hatch=_HATCHES[key], edgecolor="black", lw=0.4,
                    label=label)
        if key != "off":
            step = torch.arange(1, steps + 1).numpy()
            look["markevery"] = max(1, steps // 6)
            ax_bias.plot(step, run.biases[:, -1].numpy(), ls="-", label=label, **look)
            ax_bias.plot(step, run.biases[:, 0].numpy(), ls="--", **look)  # same run
    ax_spread.axhspan(1 - load_deadband, 1 + load_deadband, color="#1b9e77", alpha=0.15)
    ax_spread.set_xlabel("step")
    ax_spread.set_ylabel("load / uniform load")
    ax_spread.set_title(f"solid: most loaded, dashed: least loaded\n({window}-step mean; "
                        f"shaded: the ±{load_deadband:g} dead band)", fontsize=10)
    ax_bars.axhline(1, color="black", lw=0.8)
    ax_bars.set_xlabel("routed expert")
    ax_bars.set_ylabel("load / uniform load")
    ax_bars.set_xlim(-0.6, E - 0.4)
    ax_bars.set_title(f"the load of each at the end (mean of the last {window})", fontsize=10)
    ax_bias.axhline(0, color="black", lw=0.8)
    ax_bias.set_xlabel("step")
    ax_bias.set_ylabel("balancing bias")
    ax_bias.set_title(f"bias of the most preferred expert ({E - 1}, solid)\nand of the least "
                      "preferred (0, dashed)", fontsize=10)
    for ax in (ax_spread, ax_bars, ax_bias):
        _whole_ticks(ax.xaxis)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _rolling_mean(values: torch.Tensor, window: int) -> torch.Tensor:
    """Mean over each run of ``window`` consecutive rows: (steps, e) -> (steps-window+1, e)."""
    total = torch.cat([torch.zeros_like(values[:1]), values.cumsum(0)])  # (steps + 1, e)
    return (total[window:] - total[:-window]) / window


def router_precision_figure(router_std: float = 0.006, n_tokens: int = 4096) -> Figure:
    """fp32 gap between the 2nd and 3rd router probabilities against bf16's spacing."""
    result = router_precision(router_std=router_std, n_tokens=n_tokens)
    gaps = result["gaps"].clamp_min(1e-9)
    fig = Figure(figsize=(7, 3.6))
    ax = fig.add_subplot()
    ax.hist(gaps.numpy(), bins=torch.logspace(-9, 0, 60).numpy(), color="#7570b3")
    ax.set_xscale("log")
    ax.axvline(result["bf16_spacing"], color="#c62828", lw=1.5, ls="--",
               label=f"bf16 spacing near the uniform probability: {result['bf16_spacing']:.1e}")
    ax.set_xlabel("fp32 gap between the 2nd and 3rd probability (log scale)")
    ax.set_ylabel("tokens")
    ax.set_title(f"router_init_std={router_std:g}: bf16 ties {100 * result['tied']:.1f}%, "
                 f"changes the top-2 of {100 * result['changed']:.1f}% of tokens", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


FIGURES = {
    "moe_routing.png": routing_figure,
    "moe_capacity.png": capacity_figure,
    "moe_balancing.png": balancing_figure,
    "moe_router_precision.png": router_precision_figure,
}
