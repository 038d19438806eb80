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
  the figure's layout, the MLA layer *last* in each group of four
  (``mla_position = "last"``), on the evidence of the associative-recall experiment
  (the book's chapter 19: three seeds, the same 1,000 steps for every variant): the 3:1
  hybrids with MLA last learned the task in 3 of 6 runs (both GDN rules), those with MLA
  first in none, and neither did all-MLA or all-GDN. The seeds disagree about MLA last
  too (1 of 3 and 2 of 3 runs), so the evidence is a preference, not a proof.
  ``mla_position = "first"`` gives the text's layout.
* NoPE-hybrid positions. The document lists {3, 7, ..., 27} and calls them "the GDN
  layer immediately after each MLA layer". With the text's MLA at {0, 4, ...} those
  layers sit immediately *before* the next MLA layer, which is what we compute: the
  documented list for ``mla_position = "first"``, {2, 6, ..., 30} for the default.
* ``gdn_rule``. The document's "gated delta rule" has no delta (erasure) term, so
  ``"gla"`` (the default) is the documented recurrence, gated linear attention, and
  ``"delta"`` is the gated delta rule of Yang et al. (2025); see ``hymo_mini.ops``.
* Optimizer, scheduler and training values are not given in the document (its YAML
  listing is empty); the defaults below are conventional choices, marked as ours.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from hymo_mini.model_config import (
    ConfigError,
    ModelConfig,
    did_you_mean,
    require,
    require_integers,
    require_one_of,
    require_positive,
)

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
        require_one_of(self.name, "OptimizerConfig.name", ("adamw", "muon"))
        require_positive(self, "lr", "muon_lr", "eps", "grad_clip")
        require(isinstance(self.normuon, bool), "OptimizerConfig.normuon",
                f"must be true or false, got {self.normuon!r}")
        require(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas),
                "OptimizerConfig.betas", f"must be two numbers in [0, 1), got {self.betas!r}")
        require(self.weight_decay >= 0, "OptimizerConfig.weight_decay",
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
            require(0 <= value <= 1, f"SchedulerConfig.{name}", f"must be in [0, 1], got {value}")
        total = self.warmup_frac + self.stable_frac + self.decay_frac
        require(abs(total - 1) < 1e-6, "SchedulerConfig.decay_frac",
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
        require_integers(self, "batch_size", "seq_len", "grad_accum_steps", "max_steps",
                         "eval_every", "eval_batches", "log_every")
        require_positive(self, "batch_size", "seq_len", "grad_accum_steps", "max_steps",
                         "eval_every", "eval_batches", "log_every")
        require_one_of(self.dtype, "TrainingConfig.dtype", ("float32", "bfloat16"))


@dataclass(frozen=True)
class RunConfig:
    name: str = "hymo"
    seed: int = 0
    output_dir: str = "runs/hymo"

    def __post_init__(self) -> None:
        require_integers(self, "seed")
        require(bool(self.name), "RunConfig.name", "must not be empty")


@dataclass(frozen=True)
class HyMoConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def __post_init__(self) -> None:
        require(self.training.seq_len <= self.model.max_seq_len, "TrainingConfig.seq_len",
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
        raise ConfigError(f"config: unknown section(s) {sorted(unknown)}"
                          f"{did_you_mean(sorted(unknown)[0], _SECTION_CLASSES)}; "
                          f"expected some of {sorted(_SECTION_CLASSES)}")
    parts = {}
    for section, cls in _SECTION_CLASSES.items():
        values = data.get(section) or {}
        if not isinstance(values, dict):
            raise ConfigError(f"{section}: expected a mapping, got {type(values).__name__}")
        known = {f.name for f in fields(cls)}
        extra = set(values) - known
        if extra:
            raise ConfigError(f"{cls.__name__}: unknown key(s) {sorted(extra)}"
                              f"{did_you_mean(sorted(extra)[0], sorted(known))}")
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


PRESETS = Path(__file__).with_name("configs")  # the YAML presets, package data


def preset_names() -> list[str]:
    """Names of the YAML presets shipped inside the package."""
    return sorted(p.stem for p in PRESETS.glob("*.yaml"))


def _parse_yaml(text: str, where: str):
    try:
        return yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"{where}: not valid YAML{at}: {problem}") from None


def load_config(source: str | Path) -> HyMoConfig:
    """Load a config from a preset name (``"hymo_750m"``, ``"hymo_mini"``) or a YAML path."""
    path = Path(source)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        if not path.is_file():
            raise ConfigError(f"load_config: no such file {str(path)!r}")
        return config_from_dict(_parse_yaml(path.read_text(), str(path)))
    names = preset_names()
    if str(source) not in names:
        raise ConfigError(f"load_config: unknown preset {str(source)!r}"
                          f"{did_you_mean(source, names)}; presets are "
                          f"{', '.join(names)}, or pass the path of a .yaml file")
    text = (PRESETS / f"{source}.yaml").read_text()
    return config_from_dict(_parse_yaml(text, f"preset {source}"))


def dump_config(config: HyMoConfig, path: str | Path | None = None) -> str:
    """Write ``config`` as YAML (to ``path`` if given) and return the text."""
    text = yaml.safe_dump(config_to_dict(config), sort_keys=False)
    if path is not None:
        Path(path).write_text(text)
    return text

