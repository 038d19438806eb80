"""Configuration: section 2 of the design document.

Every knob of HyMo lives in one frozen dataclass tree:

    HyMoConfig
    ├── model      ModelConfig      architecture (the only part the model sees)
    ├── optimizer  OptimizerConfig
    ├── scheduler  SchedulerConfig  warmup-stable-decay (WSD)
    ├── training   TrainingConfig
    └── run        RunConfig

Each class validates itself on construction and raises ``ConfigError`` naming the
field at fault. Fields that follow from others (``qk_nope_head_dim``,
``gdn_n_heads``, the layer layout, ...) are properties, so they can never be typed
twice and disagree. Variants are made with ``dataclasses.replace``, which re-runs
validation.

Readings chosen where the document contradicts itself (the book shows each one):

* MLA positions. The text says layers {0, 4, ..., 28} five times, with a rationale
  and a per-layer RoPE table; the closing figure draws MLA at 3, 7, ..., 31. We take
  the text (``mla_offset = 0``); the figure's layout is ``mla_offset = 3``.
* NoPE-hybrid positions. The document lists {3, 7, ..., 27} and calls them "the GDN
  layer immediately after each MLA layer". With MLA at {0, 4, ...} those layers sit
  immediately *before* the next MLA layer, which is what we compute (and it gives the
  documented list).
* ``gdn_rule``. The document's "gated delta rule" has no delta (erasure) term, so
  ``"gla"`` (the default) is the documented recurrence, gated linear attention, and
  ``"delta"`` is the gated delta rule of Yang et al. (2025); see ``hymo_mini.ops``.
* Optimizer, scheduler and training values are not given in the document (its YAML
  listing is empty); the defaults below are conventional choices, marked as ours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from hymo_mini.ops import RULES

__all__ = [
    "ConfigError",
    "ModelConfig",
    "OptimizerConfig",
    "SchedulerConfig",
    "TrainingConfig",
    "RunConfig",
    "HyMoConfig",
    "load_config",
    "dump_config",
    "config_to_dict",
    "config_from_dict",
    "preset_names",
    "replace",
]


class ConfigError(ValueError):
    """A configuration value is invalid. The message names the field."""


def _require(ok: bool, name: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"{name}: {message}")


def _positive(obj: Any, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        _require(
            isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0,
            f"{type(obj).__name__}.{name}",
            f"must be a positive number, got {value!r}",
        )


def _integers(obj: Any, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        _require(
            isinstance(value, int) and not isinstance(value, bool),
            f"{type(obj).__name__}.{name}",
            f"must be an integer, got {value!r}",
        )


@dataclass(frozen=True)
class ModelConfig:
    """Architecture. Defaults are the documented production model (hymo_750m)."""

    # stack
    vocab_size: int = 64_256  # 256 bytes + 64,000 BPE merges
    dim: int = 896
    n_layers: int = 32
    mla_every: int = 4  # one MLA block in every `mla_every` layers (3:1 hybrid); 0: no MLA
    mla_offset: int = 0  # the text's layout {0, 4, ..., 28}; 3 gives the figure's
    max_seq_len: int = 4_096
    norm_eps: float = 1e-6
    logit_softcap: float = 15.0  # 0 disables the cap
    embed_init: str = "scaled"  # "scaled": N(0, 1/dim); "torch": nn.Embedding's N(0, 1)

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
        _integers(
            self, "vocab_size", "dim", "n_layers", "mla_every", "mla_offset", "max_seq_len",
            "n_heads", "n_kv_groups", "head_dim", "qk_rope_head_dim", "v_head_dim",
            "q_lora_rank", "kv_lora_rank", "gdn_d_inner", "gdn_headdim", "gdn_d_state",
            "gdn_d_conv", "gdn_rope_dim", "n_routed_experts", "n_shared_experts",
            "n_activated_experts", "moe_inter_dim", "mtp_depth", "mtp_inter_dim", "hc_mult",
            "hc_sinkhorn_iters",
        )
        _positive(
            self, "vocab_size", "dim", "n_layers", "max_seq_len", "norm_eps",
            "n_heads", "n_kv_groups", "head_dim", "v_head_dim", "q_lora_rank",
            "kv_lora_rank", "rope_theta", "gdn_d_inner", "gdn_headdim", "gdn_d_state",
            "gdn_d_conv", "n_routed_experts", "n_activated_experts", "moe_inter_dim",
            "capacity_factor", "router_init_std", "load_ema_alpha", "bias_update_rate",
            "mtp_inter_dim", "hc_mult", "hc_sinkhorn_iters",
        )
        for non_negative in ("mla_every", "mla_offset", "n_shared_experts", "mtp_depth",
                             "logit_softcap", "load_deadband", "qk_rope_head_dim",
                             "gdn_rope_dim"):
            _require(getattr(self, non_negative) >= 0, f"{name}.{non_negative}",
                     f"must be >= 0, got {getattr(self, non_negative)!r}")
        _require(self.mla_offset < max(self.mla_every, 1), f"{name}.mla_offset",
                 f"must be smaller than mla_every={self.mla_every} (0 when mla_every=0, "
                 f"the all-GDN stack), got {self.mla_offset}")
        _require(self.n_heads % self.n_kv_groups == 0, f"{name}.n_kv_groups",
                 f"n_heads={self.n_heads} must be divisible by n_kv_groups={self.n_kv_groups}")
        _require(self.qk_rope_head_dim % 2 == 0, f"{name}.qk_rope_head_dim",
                 "RoPE rotates pairs of dimensions, so it must be even, "
                 f"got {self.qk_rope_head_dim}")
        _require(self.qk_rope_head_dim <= self.head_dim, f"{name}.qk_rope_head_dim",
                 f"must not exceed head_dim={self.head_dim}, got {self.qk_rope_head_dim}")
        _require(self.gdn_d_inner % self.gdn_headdim == 0, f"{name}.gdn_d_inner",
                 f"must be divisible by gdn_headdim={self.gdn_headdim}, got {self.gdn_d_inner}")
        _require(self.gdn_rope_dim % 2 == 0, f"{name}.gdn_rope_dim",
                 f"RoPE rotates pairs of dimensions, so it must be even, got {self.gdn_rope_dim}")
        _require(self.gdn_rope_dim <= self.gdn_d_state, f"{name}.gdn_rope_dim",
                 f"must not exceed gdn_d_state={self.gdn_d_state}, got {self.gdn_rope_dim}")
        _require(self.gdn_residual in ("identity", "document"), f"{name}.gdn_residual",
                 f"must be 'identity' or 'document', got {self.gdn_residual!r}")
        _require(self.gdn_rule in RULES, f"{name}.gdn_rule",
                 f"must be 'gla' or 'delta', got {self.gdn_rule!r}")
        backends = ("auto",) + RULES[self.gdn_rule]
        _require(self.gdn_backend in backends, f"{name}.gdn_backend",
                 f"the {self.gdn_rule!r} rule has the backends "
                 f"{', '.join(map(repr, backends))}; got {self.gdn_backend!r}")
        _require(self.embed_init in ("scaled", "torch"), f"{name}.embed_init",
                 f"must be 'scaled' or 'torch', got {self.embed_init!r}")
        _require(self.n_activated_experts <= self.n_routed_experts, f"{name}.n_activated_experts",
                 f"top-k={self.n_activated_experts} cannot exceed "
                 f"n_routed_experts={self.n_routed_experts}")
        _require(len(self.mtp_loss_weights) == self.mtp_depth, f"{name}.mtp_loss_weights",
                 f"needs one weight per MTP depth ({self.mtp_depth}), got "
                 f"{len(self.mtp_loss_weights)}: {self.mtp_loss_weights!r}")
        _require(all(isinstance(w, (int, float)) and w >= 0 for w in self.mtp_loss_weights),
                 f"{name}.mtp_loss_weights",
                 f"weights must be non-negative numbers, got {self.mtp_loss_weights!r}")
        _require(self.load_ema_alpha <= 1, f"{name}.load_ema_alpha",
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
        """Layers i with i % mla_every == mla_offset; none when mla_every = 0 (all-GDN).
        mla_every = 1 is the all-MLA stack."""
        if self.mla_every == 0:
            return ()
        return tuple(i for i in range(self.n_layers) if i % self.mla_every == self.mla_offset)

    @property
    def gdn_positions(self) -> tuple[int, ...]:
        mla = set(self.mla_positions)
        return tuple(i for i in range(self.n_layers) if i not in mla)

    @property
    def nope_gdn_positions(self) -> tuple[int, ...]:
        """GDN layers that skip RoPE when ``nope_hybrid_gdn`` is on: the GDN layer just
        before each MLA layer (the document's {3, 7, ..., 27} for the text's layout)."""
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


@dataclass(frozen=True)
class OptimizerConfig:
    """Not specified by the document beyond its field names: conventional values."""

    name: str = "adamw"  # "adamw" | "muon" (Muon on 2-D MLA/GDN matrices, AdamW elsewhere)
    normuon: bool = False  # with "muon": NorMuon's per-neuron (row) update normalisation
    lr: float = 3e-4
    muon_lr: float = 0.02
    betas: tuple[float, float] = (0.9, 0.95)
    weight_decay: float = 0.1
    eps: float = 1e-8
    grad_clip: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.betas, list):
            object.__setattr__(self, "betas", tuple(self.betas))
        _require(self.name in ("adamw", "muon"), "OptimizerConfig.name",
                 f"must be 'adamw' or 'muon', got {self.name!r}")
        _positive(self, "lr", "muon_lr", "eps", "grad_clip")
        _require(isinstance(self.normuon, bool), "OptimizerConfig.normuon",
                 f"must be true or false, got {self.normuon!r}")
        _require(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas),
                 "OptimizerConfig.betas", f"must be two numbers in [0, 1), got {self.betas!r}")
        _require(self.weight_decay >= 0, "OptimizerConfig.weight_decay",
                 f"must be >= 0, got {self.weight_decay}")


@dataclass(frozen=True)
class SchedulerConfig:
    """Warmup-stable-decay: linear warmup, flat, then linear decay to ``min_lr_ratio``."""

    warmup_frac: float = 0.01
    stable_frac: float = 0.79
    decay_frac: float = 0.20
    min_lr_ratio: float = 0.1

    def __post_init__(self) -> None:
        for name in ("warmup_frac", "stable_frac", "decay_frac", "min_lr_ratio"):
            value = getattr(self, name)
            _require(0 <= value <= 1, f"SchedulerConfig.{name}", f"must be in [0, 1], got {value}")
        total = self.warmup_frac + self.stable_frac + self.decay_frac
        _require(abs(total - 1) < 1e-6, "SchedulerConfig.decay_frac",
                 f"warmup_frac + stable_frac + decay_frac must be 1, got {total:.6g}")


@dataclass(frozen=True)
class TrainingConfig:
    batch_size: int = 4
    seq_len: int = 4_096
    grad_accum_steps: int = 1
    max_steps: int = 1_000
    eval_every: int = 100
    eval_batches: int = 8
    log_every: int = 10
    dtype: str = "float32"

    def __post_init__(self) -> None:
        _integers(self, "batch_size", "seq_len", "grad_accum_steps", "max_steps", "eval_every",
                  "eval_batches", "log_every")
        _positive(self, "batch_size", "seq_len", "grad_accum_steps", "max_steps", "eval_every",
                  "eval_batches", "log_every")
        _require(self.dtype in ("float32", "bfloat16"), "TrainingConfig.dtype",
                 f"must be 'float32' or 'bfloat16', got {self.dtype!r}")


@dataclass(frozen=True)
class RunConfig:
    name: str = "hymo"
    seed: int = 0
    output_dir: str = "runs/hymo"

    def __post_init__(self) -> None:
        _integers(self, "seed")
        _require(bool(self.name), "RunConfig.name", "must not be empty")


@dataclass(frozen=True)
class HyMoConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def __post_init__(self) -> None:
        _require(self.training.seq_len <= self.model.max_seq_len, "TrainingConfig.seq_len",
                 f"{self.training.seq_len} exceeds "
                 f"ModelConfig.max_seq_len={self.model.max_seq_len}")


_SECTION_CLASSES = {
    "model": ModelConfig,
    "optimizer": OptimizerConfig,
    "scheduler": SchedulerConfig,
    "training": TrainingConfig,
    "run": RunConfig,
}


def config_from_dict(data: dict[str, Any]) -> HyMoConfig:
    """Build a validated ``HyMoConfig`` from nested dicts; unknown keys are errors."""
    if not isinstance(data, dict):
        raise ConfigError(f"config: expected a mapping of sections, got {type(data).__name__}")
    unknown = set(data) - set(_SECTION_CLASSES)
    if unknown:
        raise ConfigError(f"config: unknown section(s) {sorted(unknown)}; "
                          f"expected some of {sorted(_SECTION_CLASSES)}")
    parts = {}
    for section, cls in _SECTION_CLASSES.items():
        values = data.get(section) or {}
        if not isinstance(values, dict):
            raise ConfigError(f"{section}: expected a mapping, got {type(values).__name__}")
        known = {f.name for f in fields(cls)}
        extra = set(values) - known
        if extra:
            raise ConfigError(f"{cls.__name__}: unknown key(s) {sorted(extra)}")
        parts[section] = cls(**values)
    return HyMoConfig(**parts)


def config_to_dict(config: HyMoConfig) -> dict[str, Any]:
    """Plain nested dicts (tuples become lists) for YAML or JSON."""

    def plain(value: Any) -> Any:
        return list(value) if isinstance(value, tuple) else value

    return {
        section: {f.name: plain(getattr(getattr(config, section), f.name))
                  for f in fields(getattr(config, section))}
        for section in _SECTION_CLASSES
    }


def preset_names() -> list[str]:
    """Names of the YAML presets shipped inside the package."""
    folder = resources.files("hymo_mini") / "configs"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_config(source: str | Path) -> HyMoConfig:
    """Load a config from a preset name (``"hymo_750m"``, ``"hymo_mini"``) or a YAML path."""
    text: str
    path = Path(source)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        if not path.is_file():
            raise ConfigError(f"load_config: no such file {str(path)!r}")
        text = path.read_text()
    else:
        names = preset_names()
        if str(source) not in names:
            raise ConfigError(f"load_config: unknown preset {str(source)!r}; presets are {names} "
                              "(or pass the path of a .yaml file)")
        text = (resources.files("hymo_mini") / "configs" / f"{source}.yaml").read_text()
    return config_from_dict(yaml.safe_load(text) or {})


def dump_config(config: HyMoConfig, path: str | Path | None = None) -> str:
    """Write ``config`` as YAML (to ``path`` if given) and return the text."""
    text = yaml.safe_dump(config_to_dict(config), sort_keys=False)
    if path is not None:
        Path(path).write_text(text)
    return text

