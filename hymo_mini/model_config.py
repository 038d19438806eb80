"""The architecture config: every field of the model, validated on construction.

``ModelConfig`` is the one part of the config tree the model sees (``hymo_mini.config``
holds the rest: optimizer, schedule, training, run, and the YAML presets). Each check
raises ``ConfigError`` naming the field, what was expected and, for a field with a few
valid values, the nearest one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hymo_mini.choices import did_you_mean
from hymo_mini.loss import LOSS_IMPLS
from hymo_mini.ops import RULES

__all__ = ["ConfigError", "ModelConfig", "did_you_mean", "GDN_IMPLS", "require",
           "require_positive", "require_integers", "require_one_of"]

GDN_IMPLS = ("auto", "eager", "compiled")  # ModelConfig.gdn_impl: see hymo_mini.blocks
MLA_IMPLS = GDN_IMPLS  # ModelConfig.mla_impl: the same three, for the attention sublayer
SWIGLU_IMPLS = GDN_IMPLS  # ModelConfig.swiglu_impl: the same three, for every SwiGLU's activation


class ConfigError(ValueError):
    """A configuration value is invalid. The message names the field."""


def require(ok: bool, name: str, message: str) -> None:
    """Raise ``ConfigError("{name}: {message}")`` unless ``ok``."""
    if not ok:
        raise ConfigError(f"{name}: {message}")


def require_positive(obj: Any, *names: str) -> None:
    """Each named field of ``obj`` is a number above 0."""
    for name in names:
        value = getattr(obj, name)
        require(
            isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0,
            f"{type(obj).__name__}.{name}",
            f"must be a positive number, got {value!r}",
        )


def require_integers(obj: Any, *names: str) -> None:
    """Each named field of ``obj`` is an integer (not a bool)."""
    for name in names:
        value = getattr(obj, name)
        require(
            isinstance(value, int) and not isinstance(value, bool),
            f"{type(obj).__name__}.{name}",
            f"must be an integer, got {value!r}",
        )


def require_one_of(value: Any, name: str, choices) -> None:
    """``value`` is one of ``choices``; the error names the nearest."""
    require(value in choices, name, f"must be one of {', '.join(map(repr, choices))}, "
            f"got {value!r}{did_you_mean(value, choices)}")


@dataclass(frozen=True)
class ModelConfig:
    """Architecture. Defaults are the documented production model (hymo_750m)."""

    # stack
    vocab_size: int = 64_256  # 256 bytes + 64,000 BPE merges
    dim: int = 896
    n_layers: int = 32
    mla_every: int = 4  # one MLA block in every `mla_every` layers (3:1 hybrid); 0: no MLA
    mla_position: str = "last"  # MLA in each group of mla_every: "last" (3, 7, ...) or "first"
    max_seq_len: int = 4_096
    norm_eps: float = 1e-6
    logit_softcap: float = 15.0  # 0 disables the cap
    embed_init: str = "scaled"  # "scaled": N(0, 1/dim); "torch": nn.Embedding's N(0, 1)
    loss_impl: str = "auto"  # "plain" | "chunked" | "auto" (chunked on CUDA): hymo_mini.loss

    # MLA (section 4)
    n_heads: int = 16
    n_kv_groups: int = 4  # MQA-4: four query heads share one KV head
    head_dim: int = 128  # q/k head size = qk_rope_head_dim + qk_nope_head_dim
    qk_rope_head_dim: int = 32  # partial RoPE: 25% of head_dim
    v_head_dim: int = 128
    q_lora_rank: int = 224
    kv_lora_rank: int = 128
    rope_theta: float = 10_000.0

    # GDN (section 5)
    gdn_d_inner: int = 1_280
    gdn_headdim: int = 32  # D, the value size per head
    gdn_d_state: int = 32  # S, the key size per head
    gdn_d_conv: int = 4
    gdn_rope_dim: int = 32  # rotary dims of the GDN keys b and c (<= gdn_d_state)
    gdn_residual: str = "identity"  # "identity": x + out + skip; "document": out + skip
    gdn_backend: str = "auto"  # how the recurrence runs: see hymo_mini.ops.RULES
    gdn_impl: str = "auto"  # "eager" | "compiled" | "auto" (compiled when training on CUDA)
    mla_impl: str = "auto"  # the same for the MLA block's attention sublayer
    gdn_rule: str = "gla"  # "gla": the documented recurrence; "delta": with erasure (Yang 2025)
    nope_hybrid_gdn: bool = False  # v1.1 ablation: no RoPE on the GDN layer before each MLA

    # MoE (section 8), on MLA blocks only
    n_routed_experts: int = 16
    n_shared_experts: int = 1
    n_activated_experts: int = 2
    moe_inter_dim: int = 2_304
    capacity_factor: float = 1.5
    router_init_std: float = 0.006
    load_ema_alpha: float = 0.001  # EMA rate of each expert's load
    load_deadband: float = 0.05  # no bias change while load is within ±5% of uniform
    bias_update_rate: float = 0.001  # step of the aux-loss-free routing bias (ours)
    moe_impl: str = "auto"  # "loop" | "grouped" | "padded" | "auto": see hymo_mini.moe.dispatch
    swiglu_impl: str = "auto"  # every SwiGLU's silu(a) * b: "eager" | "compiled" | "auto" (ffn)

    # MTP (section 9)
    mtp_depth: int = 2
    mtp_loss_weights: tuple[float, ...] = (0.3, 0.1)
    mtp_inter_dim: int = 2_304

    # mHC (second document); 1 = an ordinary residual stream
    hc_mult: int = 1
    hc_sinkhorn_iters: int = 20

    def __post_init__(self) -> None:
        if isinstance(self.mtp_loss_weights, list):
            object.__setattr__(self, "mtp_loss_weights", tuple(self.mtp_loss_weights))
        name = "ModelConfig"
        require_integers(
            self, "vocab_size", "dim", "n_layers", "mla_every", "max_seq_len",
            "n_heads", "n_kv_groups", "head_dim", "qk_rope_head_dim", "v_head_dim",
            "q_lora_rank", "kv_lora_rank", "gdn_d_inner", "gdn_headdim", "gdn_d_state",
            "gdn_d_conv", "gdn_rope_dim", "n_routed_experts", "n_shared_experts",
            "n_activated_experts", "moe_inter_dim", "mtp_depth", "mtp_inter_dim", "hc_mult",
            "hc_sinkhorn_iters",
        )
        require_positive(
            self, "vocab_size", "dim", "n_layers", "max_seq_len", "norm_eps",
            "n_heads", "n_kv_groups", "head_dim", "v_head_dim", "q_lora_rank",
            "kv_lora_rank", "rope_theta", "gdn_d_inner", "gdn_headdim", "gdn_d_state",
            "gdn_d_conv", "n_routed_experts", "n_activated_experts", "moe_inter_dim",
            "capacity_factor", "router_init_std", "load_ema_alpha", "bias_update_rate",
            "mtp_inter_dim", "hc_mult", "hc_sinkhorn_iters",
        )
        for non_negative in ("mla_every", "n_shared_experts", "mtp_depth",
                             "logit_softcap", "load_deadband", "qk_rope_head_dim",
                             "gdn_rope_dim"):
            require(getattr(self, non_negative) >= 0, f"{name}.{non_negative}",
                    f"must be >= 0, got {getattr(self, non_negative)!r}")
        require_one_of(self.mla_position, f"{name}.mla_position", ("first", "last"))
        require(self.n_heads % self.n_kv_groups == 0, f"{name}.n_kv_groups",
                f"n_heads={self.n_heads} must be divisible by n_kv_groups={self.n_kv_groups}")
        require(self.qk_rope_head_dim % 2 == 0, f"{name}.qk_rope_head_dim",
                "RoPE rotates pairs of dimensions, so it must be even, "
                f"got {self.qk_rope_head_dim}")
        require(self.qk_rope_head_dim <= self.head_dim, f"{name}.qk_rope_head_dim",
                f"must not exceed head_dim={self.head_dim}, got {self.qk_rope_head_dim}")
        require(self.gdn_d_inner % self.gdn_headdim == 0, f"{name}.gdn_d_inner",
                f"must be divisible by gdn_headdim={self.gdn_headdim}, got {self.gdn_d_inner}")
        require(self.gdn_rope_dim % 2 == 0, f"{name}.gdn_rope_dim",
                f"RoPE rotates pairs of dimensions, so it must be even, got {self.gdn_rope_dim}")
        require(self.gdn_rope_dim <= self.gdn_d_state, f"{name}.gdn_rope_dim",
                f"must not exceed gdn_d_state={self.gdn_d_state}, got {self.gdn_rope_dim}")
        require_one_of(self.gdn_residual, f"{name}.gdn_residual", ("identity", "document"))
        require_one_of(self.gdn_rule, f"{name}.gdn_rule", tuple(RULES))
        backends = ("auto",) + RULES[self.gdn_rule]
        require(self.gdn_backend in backends, f"{name}.gdn_backend",
                f"the {self.gdn_rule!r} rule has the backends "
                f"{', '.join(map(repr, backends))}; got {self.gdn_backend!r}"
                + did_you_mean(self.gdn_backend, backends))
        require_one_of(self.embed_init, f"{name}.embed_init", ("scaled", "torch"))
        require_one_of(self.moe_impl, f"{name}.moe_impl", ("auto", "loop", "grouped", "padded"))
        require_one_of(self.loss_impl, f"{name}.loss_impl", LOSS_IMPLS)
        require_one_of(self.gdn_impl, f"{name}.gdn_impl", GDN_IMPLS)
        require_one_of(self.mla_impl, f"{name}.mla_impl", MLA_IMPLS)
        require_one_of(self.swiglu_impl, f"{name}.swiglu_impl", SWIGLU_IMPLS)
        require(self.n_activated_experts <= self.n_routed_experts, f"{name}.n_activated_experts",
                f"top-k={self.n_activated_experts} cannot exceed "
                f"n_routed_experts={self.n_routed_experts}")
        require(len(self.mtp_loss_weights) == self.mtp_depth, f"{name}.mtp_loss_weights",
                f"needs one weight per MTP depth ({self.mtp_depth}), got "
                f"{len(self.mtp_loss_weights)}: {self.mtp_loss_weights!r}")
        require(all(isinstance(w, (int, float)) and w >= 0 for w in self.mtp_loss_weights),
                f"{name}.mtp_loss_weights",
                f"weights must be non-negative numbers, got {self.mtp_loss_weights!r}")
        require(self.load_ema_alpha <= 1, f"{name}.load_ema_alpha",
                f"must be in (0, 1], got {self.load_ema_alpha}")

    # ---- derived fields -------------------------------------------------------
    @property
    def qk_nope_head_dim(self) -> int:
        """Content (position-free) part of each q/k head: 128 - 32 = 96."""
        return self.head_dim - self.qk_rope_head_dim

    @property
    def gdn_n_heads(self) -> int:
        """GDN heads: gdn_d_inner / gdn_headdim = 1280 / 32 = 40."""
        return self.gdn_d_inner // self.gdn_headdim

    @property
    def heads_per_group(self) -> int:
        return self.n_heads // self.n_kv_groups

    @property
    def mla_positions(self) -> tuple[int, ...]:
        """One MLA layer in each group of ``mla_every`` layers, the group's first or last
        (``mla_position``); none when mla_every = 0 (all-GDN); mla_every = 1 is all-MLA."""
        if self.mla_every == 0:
            return ()
        place = 0 if self.mla_position == "first" else self.mla_every - 1
        return tuple(i for i in range(self.n_layers) if i % self.mla_every == place)

    @property
    def gdn_positions(self) -> tuple[int, ...]:
        mla = set(self.mla_positions)
        return tuple(i for i in range(self.n_layers) if i not in mla)

    @property
    def nope_gdn_positions(self) -> tuple[int, ...]:
        """GDN layers that skip RoPE when ``nope_hybrid_gdn`` is on: the GDN layer just
        before each MLA layer (the document's {3, 7, ..., 27} for its text's layout, MLA
        first in each group)."""
        if not self.nope_hybrid_gdn:
            return ()
        gdn = set(self.gdn_positions)
        return tuple(p - 1 for p in self.mla_positions if p - 1 in gdn)

    @property
    def layer_types(self) -> tuple[str, ...]:
        mla = set(self.mla_positions)
        return tuple("mla" if i in mla else "gdn" for i in range(self.n_layers))

    def moe_capacity(self, n_tokens: int) -> int:
        """Token slots per routed expert for a batch of ``n_tokens`` tokens:
        ``ceil(capacity_factor * n_tokens * top_k / n_routed)``."""
        slots = self.capacity_factor * n_tokens * self.n_activated_experts / self.n_routed_experts
        return max(1, math.ceil(slots))
