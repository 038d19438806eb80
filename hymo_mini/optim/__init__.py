"""Optimizers: Muon on the attention and GDN matrices, AdamW on everything else.

The document's stack summary trains HyMo with "NorMuon (Attention/GDN 2D) + AdamW
(Embed/Norm/Gate/MoE)" and its config has ``muon_lr`` beside ``lr``; it gives no code.

    split.py     which parameter goes where, and why (``optimizer_groups``, ``SplitTable``)
    muon.py      the Muon and NorMuon update rule, written out, and ``MuonAdamW``
    clip.py      ``clip_and_step``: the gradient clip folded into a fused AdamW step
    schedule.py  the learning-rate schedule (warmup, stable, decay)

and :func:`build_optimizer` (here): the optimizer a config asks for.

Settings (the document's config gives only ``lr`` and ``muon_lr``):

* **Learning rates**: ``muon_lr`` for Muon groups, ``lr`` for AdamW groups. Every group
  also carries ``initial_lr`` (the convention of ``torch.optim.lr_scheduler``): a schedule
  multiplies ``group["initial_lr"]``, so both rates follow it.
* **Weight decay**: one λ for both; both decays are decoupled (W ← W (1 − lr λ)), so Muon's
  shrink per step is ``muon_lr · λ``, larger than AdamW's ``lr · λ`` when ``muon_lr > lr``.
* **Muon**: momentum 0.95 with Nesterov, five Newton–Schulz steps (torch.optim.Muon's
  defaults); NorMuon's β₂ = 0.95 (the authors' default).
"""

from __future__ import annotations

import torch
from torch import nn

from hymo_mini.config import OptimizerConfig
from hymo_mini.optim.clip import clip_and_step, takes_grad_scale
from hymo_mini.optim.muon import MUON_DEFAULTS, MuonAdamW, muon_step, newton_schulz5, normuon_rows
from hymo_mini.optim.split import (
    GROUPS,
    KINDS,
    OptimizerSplitError,
    ParamRow,
    SplitTable,
    check_partition,
    optimizer_groups,
)

__all__ = ["KINDS", "GROUPS", "OptimizerSplitError", "ParamRow", "SplitTable", "optimizer_groups",
           "check_partition", "MUON_DEFAULTS", "MuonAdamW", "muon_step", "newton_schulz5",
           "normuon_rows", "build_optimizer", "clip_and_step", "takes_grad_scale"]


def build_optimizer(model: nn.Module, config: OptimizerConfig, *, normuon: bool | None = None):
    """The optimizer ``config.name`` asks for.

    ``"adamw"``: ``torch.optim.AdamW`` with two groups (decayed / not, by the rule's kinds).
    ``"muon"``: :class:`MuonAdamW`: Muon (``muon_lr``, momentum 0.95, Nesterov, decay λ)
    on the MLA and GDN matrices, AdamW (``lr``) on the rest; ``normuon=True`` adds NorMuon's
    row normalisation (default: ``config.normuon``). Both check that every trainable
    parameter is in exactly one group.
    """
    if not isinstance(config, OptimizerConfig):
        raise TypeError(f"config must be an OptimizerConfig (config.optimizer of a HyMoConfig), "
                        f"got {type(config).__name__}")
    if normuon is None:
        normuon = config.normuon
    if normuon is not True and normuon is not False:
        raise TypeError(f"normuon must be True or False, got {normuon!r}")
    groups = []
    for g in optimizer_groups(model, config.name).param_groups():
        decay = config.weight_decay if g["weight_decay_on"] else 0.0
        if g["group"] == "muon":
            groups.append({"optimizer": "muon", "params": g["params"], "lr": config.muon_lr,
                           "initial_lr": config.muon_lr, "weight_decay": decay})
        else:
            groups.append({"optimizer": "adamw", "params": g["params"], "lr": config.lr,
                           "initial_lr": config.lr, "weight_decay": decay,
                           "betas": config.betas, "eps": config.eps})
    if config.name == "adamw":
        check_partition(model, groups)
        return torch.optim.AdamW([{k: v for k, v in g.items() if k != "optimizer"}
                                  for g in groups])
    return MuonAdamW(model, groups, normuon=normuon)
