"""The experiments behind chapter 11's figures (mixture of experts, section 8).

Every experiment runs the package's :class:`hymo_mini.moe.DeepSeekMoE` (its router, capacity
rule and ``update_bias``); only the expert width is shrunk (``moe_inter_dim = 1``) when the
experts' outputs do not matter, so the production router (896 → 16) costs nothing to run.

An *imbalanced router* (:func:`imbalanced_router`) is the production router plus a
preference: tokens share a common direction ``u`` (as real hidden states share a mean) and
the gate rows get a component ``~ skew · ramp_e`` along it (ramp_e from -1 to 1), so the last
experts score up to ``skew`` higher for every token. The random init's own component along
``u`` is removed, so ``skew = 0`` has no systematic preference. The figures are in
:mod:`hymo_book.plots.moe`.
"""

from __future__ import annotations

import functools
import math
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from hymo_mini.config import ModelConfig, load_config, replace
from hymo_mini.moe import DeepSeekMoE

__all__ = [
    "imbalanced_router",
    "router_tokens",
    "shared_direction",
    "dropped_fraction",
    "BalancingRun",
    "simulate_balancing",
    "balancing_runs",
    "router_precision",
    "single_thread",
]


def _production() -> ModelConfig:
    return load_config("hymo_750m").model


def imbalanced_router(config: ModelConfig | None = None, skew: float = 0.0,
                      seed: int = 0) -> DeepSeekMoE:
    """A ``DeepSeekMoE`` with ``config``'s router (1-wide experts) whose gate prefers the
    last experts by ``skew``. The common token direction is gate row ``u`` (see
    :func:`router_tokens`)."""
    config = _production() if config is None else config
    moe = DeepSeekMoE(replace(config, moe_inter_dim=1))  # the router is all we need
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        moe.gate.weight.normal_(0.0, config.router_init_std, generator=g)  # (e, dim)
        u = shared_direction(config.dim)  # (dim,), unit RMS
        w = moe.gate.weight
        w -= (w @ u)[:, None] * u[None, :] / config.dim  # no preference along u at skew = 0
        ramp = torch.linspace(-1.0, 1.0, config.n_routed_experts)  # (e,)
        # token x = (noise + u) / sqrt(2) has u·x ≈ dim / sqrt(2): expert e gains ~skew·ramp_e
        w += skew * math.sqrt(2) * ramp[:, None] * u[None, :] / config.dim
    return moe


def shared_direction(dim: int) -> torch.Tensor:
    """``u`` (dim,): the direction every token of :func:`router_tokens` shares, unit RMS."""
    u = torch.randn(dim, generator=torch.Generator().manual_seed(12345))
    return u / u.norm() * math.sqrt(dim)  # (dim,), unit RMS


def router_tokens(config: ModelConfig, n_tokens: int, seed: int = 1) -> torch.Tensor:
    """(n_tokens, dim) unit-RMS hidden states with a shared component along ``u``."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n_tokens, config.dim, generator=g)  # (n, dim)
    return (x + shared_direction(config.dim)) / math.sqrt(2)


def dropped_fraction(moe: DeepSeekMoE, x: torch.Tensor) -> float:
    """Fraction of the n·k (token, expert) assignments that find their expert full."""
    with torch.no_grad():
        routing = moe.route(x)
    return float((~routing.kept).float().mean())


@dataclass
class BalancingRun:
    loads: torch.Tensor  # (steps, e) fraction of assignments per expert at each step
    biases: torch.Tensor  # (steps, e) expert_bias after each step
    dropped: torch.Tensor  # (steps,) dropped fraction at each step


def simulate_balancing(config: ModelConfig | None = None, skew: float = 0.1, steps: int = 300,
                       n_tokens: int = 512, balance: bool = True, seed: int = 0,
                       **overrides) -> BalancingRun:
    """One routing decision per step for a batch of ``n_tokens`` hidden states (drawn from
    a fixed pool of 4·n_tokens), its assignment counts recorded as a training forward
    records them, then ``update_bias()`` (if ``balance``). ``overrides`` replace config fields such
    as ``load_ema_alpha``, ``bias_update_rate``, ``load_deadband``."""
    config = replace(_production() if config is None else config, **overrides)
    if steps < 1 or n_tokens < 1:
        raise ValueError(f"steps and n_tokens must be >= 1, got {steps} and {n_tokens}")
    moe = imbalanced_router(config, skew, seed).train()
    pool = router_tokens(config, 4 * n_tokens, seed=seed + 1)  # (4n, dim), drawn from each step
    g = torch.Generator().manual_seed(seed + 2)
    loads, biases, dropped = [], [], []
    with single_thread():
        for _ in range(steps):
            x = pool[torch.randint(0, pool.shape[0], (n_tokens,), generator=g)]  # (n, dim)
            with torch.no_grad():
                routing = moe.route(x)  # the experts' outputs do not matter here
            counts = routing.counts.float()  # (e,) assignments before capacity
            loads.append(counts / counts.sum())
            dropped.append(float((~routing.kept).float().mean()))
            if balance:
                moe.pending_counts += routing.counts  # what a training forward records
                moe.update_bias()
            biases.append(moe.expert_bias.clone())
    return BalancingRun(torch.stack(loads), torch.stack(biases), torch.tensor(dropped))


@contextmanager
def single_thread():
    """Loops of tiny tensor ops run far faster on one thread (no pool synchronisation)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def router_precision(config: ModelConfig | None = None, n_tokens: int = 4096,
                     router_std: float | None = None, seed: int = 0) -> dict[str, float]:
    """How often computing the router in bf16 (as the document's code ends up doing) changes
    the top-k choice, against fp32. Returns the fraction of tokens whose chosen set
    differs, the fraction with an exact tie at the k-th place in bf16, and the fp32 gaps
    between the k-th and (k+1)-th probabilities (``gaps``, as a tensor)."""
    config = _production() if config is None else config
    if router_std is not None:
        config = replace(config, router_init_std=router_std)
    moe = imbalanced_router(config, 0.0, seed)
    x = router_tokens(config, n_tokens, seed=seed + 1)  # (n, dim)
    k = config.n_activated_experts
    w = moe.gate.weight.detach()  # (e, dim)
    with torch.no_grad():
        routing = moe.route(x)  # the package's router: fp32 logits, probs and top-k
    probs32 = routing.probs  # (n, e) fp32
    probs16 = (x.bfloat16() @ w.bfloat16().T).softmax(-1)  # (n, e) bf16 throughout
    top32 = routing.indices.sort(-1).values
    top16 = probs16.float().topk(k, dim=-1).indices.sort(-1).values
    sorted16 = probs16.float().sort(-1, descending=True).values
    sorted32 = probs32.sort(-1, descending=True).values
    return {
        "changed": float((top32 != top16).any(-1).float().mean()),
        "tied": float((sorted16[:, k - 1] == sorted16[:, k]).float().mean()),
        "gaps": sorted32[:, k - 1] - sorted32[:, k],
        "bf16_spacing": 2.0 ** (math.floor(math.log2(1 / config.n_routed_experts)) - 7),
    }


@functools.lru_cache(maxsize=8)
def balancing_runs(skew: float = 0.1, steps: int = 1000, load_ema_alpha: float = 0.001,
                   bias_update_rate: float = 0.001, load_deadband: float = 0.05,
                   n_tokens: int = 256,
                   compare_alpha: float | None = 0.1) -> dict[str, BalancingRun]:
    """The runs :func:`balancing_figure` draws, by key: "off" (no balancing), "slow" (the
    bias with EMA rate ``load_ema_alpha``) and, unless ``compare_alpha`` is None, "fast"
    (with ``compare_alpha``). Cached, so a chapter can read the numbers of the figure it
    drew."""
    kwargs = dict(skew=skew, steps=steps, n_tokens=n_tokens, bias_update_rate=bias_update_rate,
                  load_deadband=load_deadband)
    runs = {"off": simulate_balancing(balance=False, load_ema_alpha=load_ema_alpha, **kwargs),
            "slow": simulate_balancing(load_ema_alpha=load_ema_alpha, **kwargs)}
    if compare_alpha is not None:
        runs["fast"] = simulate_balancing(load_ema_alpha=compare_alpha, **kwargs)
    return runs
