"""What the claims are computed from: the production preset and the package's modules.

Each function returns one quantity a claim compares with the document (see
:mod:`hymo_book.claims.core`). The expensive ones (the parameter count walks HyMo on the
meta device; the GDN block and the embedding are built at production width) are cached.
"""

from __future__ import annotations

import functools

import torch


@functools.lru_cache(maxsize=1)
def preset():
    from hymo_mini.config import load_config

    return load_config("hymo_750m")


def cfg():
    return preset().model


@functools.lru_cache(maxsize=1)
def params():
    from hymo_mini.analysis.params import count_params

    return count_params(cfg())  # walks HyMo built on the meta device


def n_gdn() -> int:
    """The GDN layers of the production stack."""
    return len(cfg().gdn_positions)


def mla_cache_8(T: int) -> int:
    """Bytes of the latent KV cache of the 8 MLA layers at T tokens."""
    from hymo_mini.analysis import costs

    return 8 * costs.mla_cost(cfg(), T, cache="latent").cache_bytes


def mha_cache_8(T: int) -> int:
    """Bytes of a full multi-head KV cache of 8 attention layers at T tokens."""
    from hymo_mini.analysis import costs

    return 8 * costs.mha_cost(cfg(), T).cache_bytes


def n_params(component: str, kind: str = "stored") -> int:
    return getattr(params()[component], kind)


def flops(T: int = 4096, **kwargs) -> dict[str, float]:
    from hymo_mini.analysis.flops import forward_flops

    return forward_flops(cfg(), T, **kwargs)


@functools.lru_cache(maxsize=1)
def gdn_block():
    """One production-width GDN block at init (8M parameters) and a probe input."""
    from hymo_mini.blocks import GDNBlock

    torch.manual_seed(0)
    block = GDNBlock(cfg(), layer_idx=1)
    x = torch.randn(1, 32, cfg().dim)
    return block, x


def decay(head: int) -> float:
    block, _ = gdn_block()
    a = -torch.exp(block.mixer.A_log.detach())  # exp(log 11) ≠ 11 in fp32
    return round(float(a[head, 0]), 4)


def gate_at_init() -> float:
    block, x = gdn_block()
    with torch.no_grad():
        g = block.mixer.gdn_inputs(block.norm(x) if block.norm is not None else x)[3]
    return float(g.mean())


def rotated_gdn_vectors() -> str:
    """Which of v, b, c change when every position is shifted: those are rotated."""
    block, x = gdn_block()
    with torch.no_grad():
        at0, at10 = block.mixer.gdn_inputs(x, 0), block.mixer.gdn_inputs(x, 10)
    names = [n for n, a, b in zip("vbc", at0[:3], at10[:3], strict=True) if not torch.equal(a, b)]
    return ", ".join(names) or "none"


def decay_gate_source() -> str:
    """Perturb dt_proj and g_proj in turn and see which one moves the decay gate g."""
    from hymo_mini.config import load_config
    from hymo_mini.gdn import GatedDeltaNet

    torch.manual_seed(0)
    block = GatedDeltaNet(load_config("hymo_mini").model)
    x = torch.randn(1, 8, block.config.dim)
    moved = []
    for name in ("dt_proj", "g_proj"):
        with torch.no_grad():
            before = block.gdn_inputs(x)[3]
            getattr(block, name).weight.add_(0.5)
            if not torch.allclose(block.gdn_inputs(x)[3], before):
                moved.append(name)
            getattr(block, name).weight.sub_(0.5)
    return " and ".join(moved) or "neither"


@functools.lru_cache(maxsize=1)
def embedding():
    """HyMo's embedding at init, for dim 896 (a small vocabulary and stack keep it cheap)."""
    from hymo_mini.config import load_config, replace
    from hymo_mini.model import HyMo

    torch.manual_seed(0)
    return HyMo(replace(load_config("hymo_mini").model, dim=cfg().dim)).embed.weight.detach()


def softcap_grad(x: float) -> float:
    from hymo_mini.model import softcap

    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    softcap(t, cfg().logit_softcap).backward()
    return float(t.grad)


def theta(k: int) -> float:
    from hymo_mini.rope import rope_frequencies

    return float(rope_frequencies(cfg().qk_rope_head_dim, cfg().rope_theta)[k])


def slowest_pair() -> str:
    from hymo_mini.rope import rope_frequencies

    thetas = rope_frequencies(cfg().qk_rope_head_dim, cfg().rope_theta)
    return f"k={int(thetas.argmin())}"


def bf16_tie() -> str:
    a, b = torch.tensor([0.1234567, 0.1234570])
    same16, same32 = bool(a.bfloat16() == b.bfloat16()), bool(a == b)
    return f"bf16 {'equal' if same16 else 'distinct'}, fp32 {'equal' if same32 else 'distinct'}"


def router_dtype() -> str:
    from hymo_mini.config import load_config
    from hymo_mini.moe import DeepSeekMoE

    moe = DeepSeekMoE(load_config("hymo_mini").model)
    with torch.no_grad():
        routing = moe.route(torch.randn(4, moe.dim).bfloat16())
    return f"{str(routing.probs.dtype).removeprefix('torch.')} probs and top-k for bf16 input"


def mtp_predictions() -> str:
    from hymo_mini.mtp import mtp_targets

    T = preset().training.seq_len
    tokens = torch.zeros(1, T, dtype=torch.long)
    counts = [mtp_targets(tokens, d)[0] for d in range(1, cfg().mtp_depth + 1)]
    return ", ".join(f"T-{T - n}" for n in counts)


def nope_positions() -> str:
    from hymo_mini.config import replace

    return layout(replace(cfg(), nope_hybrid_gdn=True).nope_gdn_positions)


def batch_tokens() -> int:
    t = preset().training
    return t.batch_size * t.seq_len


def active() -> int:
    return params().active


def stored() -> int:
    return params().stored


def moe_layer(kind: str) -> int:
    from hymo_mini.moe import moe_param_counts

    n_stored, n_active = moe_param_counts(cfg())
    return n_active if kind == "active" else n_stored


def train_flops_per_token() -> float:
    return 3 * flops()["total"]  # forward + backward ≈ 3 × forward


def launches_per_layer() -> int:
    """Kernel launches of the naive loop over one layer's sequence: the launches of one
    step (counted, :func:`loop_launches_per_step`) times the preset's T. The loop is
    vectorised over batch and heads, so neither multiplies the count."""
    return loop_launches_per_step() * preset().training.seq_len


LAUNCH_S = 10e-6  # the document's 10 µs per kernel launch


def layout(positions: tuple[int, ...]) -> str:
    """Evenly spaced positions as "0, 4, ..., 28", others listed."""
    p = list(positions)
    if len(p) > 3 and len({b - a for a, b in zip(p, p[1:], strict=False)}) == 1:
        return f"{p[0]}, {p[1]}, ..., {p[-1]}"
    return ", ".join(map(str, p))


def crossing(ratio, target: float, lo: int = 1, hi: int = 1 << 24) -> int:
    """The smallest sequence length T in [lo, hi] at which ``ratio(T)`` reaches ``target``
    (``ratio`` monotonic in T; bisection on integers). Raises if it never does."""
    rising = ratio(hi) >= ratio(lo)

    def reached(T):
        return ratio(T) >= target if rising else ratio(T) <= target

    if not reached(hi):
        raise ValueError(f"the ratio does not reach {target} for T up to {hi:,}")
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reached(mid) else (mid + 1, hi)
    return lo


def stack_flops(T: int, **changes) -> float:
    """Forward FLOPs per token of the 32 layers (mixers and MoE; the head, the same in
    every layout, and the training-only MTP left out) of the preset, with ``changes``
    (``mla_every=1``: all MLA)."""
    from hymo_mini.analysis.flops import forward_flops
    from hymo_mini.config import replace

    f = forward_flops(replace(cfg(), **changes) if changes else cfg(), T, include_mtp=False)
    return f["total"] - f["output head (logits)"]


def hybrid_share(T: int) -> float:
    """The 3:1 hybrid's stack FLOPs over an all-MLA stack's (each MLA layer with its MoE)."""
    return stack_flops(T) / stack_flops(T, mla_every=1)


def loop_launches_per_step() -> int:
    """Kernels the naive loop launches per time step, counted by PyTorch's dispatcher on the
    loop itself (:func:`hymo_book.kernels.arithmetic.launches_per_step`, which the kernel
    report shows): the one number of launches per step the book uses."""
    from hymo_book.kernels.arithmetic import launches_per_step

    return sum(launches_per_step().values())
