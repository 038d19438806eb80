"""The learning-rate schedule: warmup, a stable stretch, then decay (WSD).

Over ``max_steps`` optimizer steps: ``warmup_frac`` of linear warmup from lr/W to lr, a
flat stretch, then ``decay_frac`` of linear decay to ``min_lr_ratio * lr``. Every
optimizer group's rate is its ``initial_lr`` times :func:`wsd_multiplier`, so ``lr`` and
``muon_lr`` follow the schedule together.
"""

from __future__ import annotations

from hymo_mini.config import SchedulerConfig

__all__ = ["wsd_multiplier"]


def wsd_multiplier(step: int, max_steps: int, sched: SchedulerConfig) -> float:
    """The learning-rate multiplier of optimizer step ``step`` (0-based) of ``max_steps``."""
    if not 0 <= step < max_steps:
        raise ValueError(f"step must be in [0, {max_steps}), got {step}")
    warmup = round(sched.warmup_frac * max_steps)
    decay = round(sched.decay_frac * max_steps)
    if step < warmup:
        return (step + 1) / warmup  # the first step already moves the weights
    decay_start = max_steps - decay
    if step < decay_start:
        return 1.0
    done = (step - decay_start + 1) / decay  # reaches 1 at the last step
    return 1.0 - (1.0 - sched.min_lr_ratio) * done
