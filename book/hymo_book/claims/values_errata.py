"""Quantities behind the errata the teaching chapters 04-07 and 11-13 used to list: small
experiments on the package's own modules (RoPE, MLA, the GDN mixer, the MoE router, MTP,
the embedding), seeded, each answering one question a claim asks. Cached: each runs once
per session.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

from hymo_book.claims.values import cfg


def _mini():
    from hymo_mini.config import load_config

    return load_config("hymo_mini").model


# ---- RoPE (section 7) -------------------------------------------------------------------
def _rotate(x: torch.Tensor, p: int) -> torch.Tensor:
    """x (d,) rotated to position p by the package's rotation (fp64 angles)."""
    from hymo_mini.rope import apply_rotary, rope_frequencies

    angles = p * rope_frequencies(x.shape[-1], cfg().rope_theta)[None]  # (1, d/2)
    return apply_rotary(x.reshape(1, 1, 1, -1), angles.cos(), angles.sin()).flatten()


def _random_rotation(d: int, gen: torch.Generator) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))
    return q.float()  # (d, d) orthogonal


@functools.lru_cache(maxsize=1)
def rope_distance_facts() -> dict[str, bool]:
    """Section 7.2.2's identity ‖R(p)x − R(p)y‖ = ‖x − y‖ for RoPE and for a different
    random orthogonal map at every position, and whether each gives scores that depend on
    the distance s − p only (R(p)x · R(s)y the same for every pair at one distance; the
    positions repeat each distance up to 3 several times)."""
    d, positions = cfg().qk_rope_head_dim, (0, 1, 2, 3, 50, 51, 52, 53)
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(2, d, generator=gen)
    maps = {"rope": lambda v, p: _rotate(v, p)}
    random = {p: _random_rotation(d, gen) for p in positions}
    maps["random"] = lambda v, p: random[p] @ v
    facts = {}
    for name, rot in maps.items():
        facts[f"{name}_keeps_distance"] = all(
            math.isclose(float((rot(x, p) - rot(y, p)).norm()), float((x - y).norm()),
                         rel_tol=1e-5) for p in positions)
        scores = {(p, s): float(rot(x, p) @ rot(y, s)) for p in positions for s in positions}
        facts[f"{name}_relative"] = all(  # same distance s - p, same score
            math.isclose(scores[(p, s)], scores[(p2, s2)], rel_tol=1e-4, abs_tol=1e-4)
            for (p, s) in scores for (p2, s2) in scores if s - p == s2 - p2)
    facts["rope_shift_rule"] = all(  # R(p)ᵀR(s) = R(s − p), as the scores see it
        math.isclose(float(_rotate(x, p) @ _rotate(y, s)), float(x @ _rotate(y, s - p)),
                     rel_tol=1e-4, abs_tol=1e-4) for p in positions for s in positions if s >= p)
    return facts


def rope_distance_reading() -> str:
    """What the identity of section 7.2.2 shows: a property any orthogonal map has."""
    f = rope_distance_facts()
    if f["rope_keeps_distance"] and f["random_keeps_distance"] and not f["random_relative"]:
        return "norm preservation"
    return "relative position"


def rope_wavelengths(rope_dim: int | None = None) -> torch.Tensor:
    """Tokens per full turn of each pair, 2π / θ_k (fp64)."""
    from hymo_mini.rope import rope_frequencies

    d = cfg().qk_rope_head_dim if rope_dim is None else rope_dim
    return 2 * math.pi / rope_frequencies(d, cfg().rope_theta)


def small_k_frequency() -> str:
    """Whether the small-k pairs are the fast or the slow ones."""
    w = rope_wavelengths()
    return "small k: high frequency" if bool((w[1:] > w[:-1]).all()) else "small k: low frequency"


def pairs_without_a_turn(T: int | None = None) -> int:
    """Pairs whose wavelength exceeds the trained context: they never complete a turn."""
    T = cfg().max_seq_len if T is None else T
    return int((rope_wavelengths() > T).sum())


# ---- MLA (section 4, appendix) ----------------------------------------------------------
@functools.lru_cache(maxsize=1)
def mla_decodes_from_latent() -> str:
    """What the (not absorbed) MLA module needs in its cache: its output for a sequence,
    computed by ``attend`` from ``latent_kv``'s (latent, k_pe) alone, against its forward;
    and the last token decoded against the cache of all eight."""
    from hymo_mini.mla import MultiHeadLatentAttention

    torch.manual_seed(0)
    attn = MultiHeadLatentAttention(_mini()).eval()
    x = torch.randn(1, 8, attn.dim)
    with torch.no_grad():
        latent, k_pe = attn.latent_kv(x)  # (1, 8, r), (1, 8, p): the whole cache
        full = attn(x)  # (1, 8, dim)
        last = attn.attend(x[:, -1:], latent, k_pe, start_pos=7)  # (1, 1, dim)
    same = torch.allclose(full, attn.attend(x, latent, k_pe), atol=1e-5) and torch.allclose(
        full[:, -1:], last, atol=1e-5)
    return "latent c_t and k_pe" if same else "per-head k and v"


def decode_flops(s: int = 4096) -> dict[str, int]:
    from hymo_book.attention_variants import decode_flops as flops

    return flops(cfg(), s)


def absorbed_cost() -> str:
    """Absorbed decoding against the module's own decoding from its latent cache."""
    f = decode_flops()
    more = f["absorbed"] > f["explicit (expand the latent cache)"]
    return "absorbed costs more" if more else "absorbed costs less"


# ---- the GDN mixer (section 5) ----------------------------------------------------------
@functools.lru_cache(maxsize=1)
def state_read_share() -> float:
    """The read c_tᵀH_t over the skip D·v_t in size (mean over tokens and heads), for a
    production mixer at init and a random unit-scale input (chapter 07's measurement)."""
    from hymo_mini.gdn import GatedDeltaNet
    from hymo_mini.ops import naive_gla

    torch.manual_seed(0)
    mixer = GatedDeltaNet(cfg())
    x = torch.randn(1, 64, cfg().dim)  # (b, t, dim)
    with torch.no_grad():
        v, b, c, g, A, _ = mixer.gdn_inputs(x)  # (b, t, h, d), (b, t, h, s), ...
        read, _ = naive_gla(v, b, c, g, A)  # (b, t, h, d)
        skip = mixer.D[:, None] * v  # (b, t, h, d)
    return float((read.norm(dim=-1) / skip.norm(dim=-1)).mean())


# ---- the MoE (section 8) ----------------------------------------------------------------
def documented_expert_params() -> int:
    """Parameters of section 8.5's expert code: three nn.Linear with the default bias."""
    c = cfg()
    with torch.device("meta"):
        layers = [nn.Linear(c.dim, c.moe_inter_dim), nn.Linear(c.moe_inter_dim, c.dim),
                  nn.Linear(c.dim, c.moe_inter_dim)]
    return sum(p.numel() for layer in layers for p in layer.parameters())


@functools.lru_cache(maxsize=4)
def dropped_share(skew: float, n_tokens: int = 4096) -> float:
    """Assignments dropped in one training batch of the production router at the
    documented capacity factor, with a router preferring the last experts by ``skew``
    (:func:`hymo_book.moe_experiments.imbalanced_router`, chapter 11's experiment)."""
    from hymo_book.moe_experiments import dropped_fraction, imbalanced_router, router_tokens

    moe = imbalanced_router(cfg(), skew).train()
    return dropped_fraction(moe, router_tokens(cfg(), n_tokens))


@functools.lru_cache(maxsize=1)
def documented_gate_bias() -> dict[str, float]:
    """Section 8.2.1's gate, nn.Linear(dim, 16, bias=True), initialised as section 10
    says (bias 0, weight N(0, 0.006²)), routing 64 random tokens top-2 as section 8.2.2
    does: the size of the gradient a loss through the mixed output sends to the bias,
    against the weight's."""
    c = cfg()
    gen = torch.Generator().manual_seed(0)
    gate = nn.Linear(c.dim, c.n_routed_experts, bias=True)
    with torch.no_grad():
        gate.weight.normal_(0.0, c.router_init_std, generator=gen)
        gate.bias.zero_()
    x = torch.randn(64, c.dim, generator=gen)  # (n, dim)
    outputs = torch.randn(64, c.n_routed_experts, c.dim, generator=gen)  # (n, e, dim)
    probs = gate(x).softmax(-1)  # (n, e)
    weights, chosen = probs.topk(c.n_activated_experts, dim=-1)  # (n, k)
    picked = outputs.gather(1, chosen[..., None].expand(-1, -1, c.dim))  # (n, k, dim)
    mixed = (weights[..., None] * picked).sum(1)  # (n, dim)
    target = torch.randn(64, c.dim, generator=gen)
    F.mse_loss(mixed, target).backward()
    return {"bias": float(gate.bias.grad.norm()), "weight": float(gate.weight.grad.norm())}


def gate_bias_gradient() -> str:
    return "gets a gradient" if documented_gate_bias()["bias"] > 0 else "no gradient"


def expert_bias_is_buffer() -> bool:
    """hymo_mini's balancing bias: a buffer, outside parameters(), no gradient."""
    from hymo_mini.moe import DeepSeekMoE

    with torch.device("meta"):
        moe = DeepSeekMoE(_mini())
    names = {n for n, _ in moe.named_parameters()}
    return "expert_bias" in dict(moe.named_buffers()) and "expert_bias" not in names


@functools.lru_cache(maxsize=1)
def router_round_trip() -> dict[str, float]:
    """The production router at init computed in fp32 and rounded to bf16 as the
    document's ``gate_forward`` returns it (chapter 11's ``router_precision``)."""
    from hymo_book.moe_experiments import router_precision

    found = router_precision(cfg(), n_tokens=4096)
    return {"changed": found["changed"], "tied": found["tied"]}


# ---- MTP (section 9) --------------------------------------------------------------------
def mtp_reads_next_token() -> str:
    """What depth 1's output at position t depends on besides h_t: change token t + 1 and
    keep the main hidden states fixed (mini model at init, evaluation mode)."""
    from hymo_mini.model import HyMo

    torch.manual_seed(0)
    model = HyMo(_mini()).eval()
    tokens = torch.tensor([list(b"abcdefgh")])  # (1, 8)
    t = 3
    changed = tokens.clone()
    changed[0, t + 1] = (changed[0, t + 1] + 1) % model.config.vocab_size
    with torch.no_grad():
        _, hidden = model.forward_with_hidden(tokens)  # (1, 8, dim), held fixed
        before = model.mtp(hidden, tokens, model.embed)[0][0, t]  # (dim,)
        after = model.mtp(hidden, changed, model.embed)[0][0, t]
    return "MTP_1(h_t, x_{t+1})" if not torch.allclose(before, after) else "MTP_1(h_t)"


MTP_TEXT = (b"A hybrid model mixes two kinds of layers. Most of them keep a small state and "
            b"update it token by token; a few of them look back at every earlier token. The "
            b"state layers are cheap and local, the attention layers are costly and precise. "
            b"Multi-token prediction asks the hidden state of each token to say something "
            b"about the next token and about the tokens after it.")  # chapter 12's batch


@functools.lru_cache(maxsize=1)
def mtp_gradient_share() -> dict[str, float]:
    """Chapter 12's measurement: on the mini model at init (training mode, seed 0) and 8
    windows of 64 bytes of :data:`MTP_TEXT`, the gradient on the layers' parameters of
    the weighted MTP terms and of the main loss, separately: the ratio of their norms
    (rounded to three digits: its last digits vary between CPUs) and their cosine."""
    from hymo_mini import mtp
    from hymo_mini.model import HyMo

    torch.manual_seed(0)
    model = HyMo(_mini())
    data = torch.tensor(list(MTP_TEXT))
    batch = torch.stack([data[s:s + 64] for s in range(0, 8 * 40, 40)])  # (8, 64)
    logits, hidden = model.forward_with_hidden(batch)
    n, targets = mtp.mtp_targets(batch, 0)
    main = F.cross_entropy(logits[:, :n].flatten(0, 1), targets.flatten())
    depths = [model.logits(h) for h in model.mtp(hidden, batch, model.embed)]
    extra = mtp.mtp_loss(depths, batch, model.config.mtp_loss_weights)  # sum_d w_d L_d
    grads = []
    for loss in (main, extra):
        model.zero_grad()
        loss.backward(retain_graph=True)
        grads.append(torch.cat([p.grad.flatten() for p in model.layers.parameters()
                                if p.grad is not None]))
    model.zero_grad()
    ratio = float(grads[1].norm() / grads[0].norm())
    return {"ratio": float(f"{ratio:.3g}"),
            "cosine": float(F.cosine_similarity(grads[0], grads[1], dim=0))}


# ---- the stack at init (sections 3 and 10) ----------------------------------------------
@functools.lru_cache(maxsize=2)
def first_logits(embed_init: str) -> dict[str, float]:
    """The tied head's logits before the soft-cap, at init, at the production width (a
    two-layer stack of the mini preset, 2 × 32 random tokens): their standard deviation
    against the other tokens' rows and the share beyond the cap."""
    from hymo_mini.config import replace
    from hymo_mini.model import HyMo

    config = replace(_mini(), dim=cfg().dim, n_layers=2, embed_init=embed_init)
    torch.manual_seed(0)
    model = HyMo(config).eval()
    tokens = torch.randint(0, config.vocab_size, (2, 32))
    with torch.no_grad():
        _, hidden = model.forward_with_hidden(tokens)
        raw = model.head(model.norm(hidden))  # (b, t, vocab), before the cap
    others = raw[~F.one_hot(tokens, config.vocab_size).bool()]
    return {"std": float(f"{float(others.std()):.3g}"),
            "beyond_cap": float((others.abs() > config.logit_softcap).float().mean())}
