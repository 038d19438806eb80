"""Exercises of chapter 15 (parameters): the size of a GDN mixer, and the stored and active
parameters of one MoE layer, from a config."""

from __future__ import annotations

import torch

from hymo_book.exercises import Case, Exercise
from hymo_mini.analysis.params import count_params
from hymo_mini.config import load_config, replace


def _build(cls, config):
    with torch.device("meta"):  # shapes only
        return cls(config)


# ---- 1. one GDN mixer --------------------------------------------------------------------
def _gdn_oracle(config):
    from hymo_mini.gdn import GatedDeltaNet

    return count_params(_build(GatedDeltaNet, config)).stored


def _gdn_cases():
    mini = load_config("hymo_mini").model
    prod = load_config("hymo_750m").model
    return [
        Case("the mini model", (mini,)),
        Case("hymo_750m", (prod,)),
        Case("keys narrower than values (S = 8, D = 16)",
             (replace(mini, gdn_d_state=8, gdn_rope_dim=8),)),
        Case("the delta rule", (replace(mini, gdn_rule="delta"),)),
        Case("a conv of width 2", (replace(mini, gdn_d_conv=2),)),
        Case("a wider mixer, more heads", (replace(mini, gdn_d_inner=128),)),
    ]


def _gdn_without_skip(config):
    c = config
    H, S, inner = c.gdn_n_heads, c.gdn_d_state, c.gdn_d_inner
    return (c.dim * inner + inner * c.gdn_d_conv + 2 * H * S * inner + H * inner
            + inner * inner + inner * c.dim + H * S + 2 * H)


def _gdn_scalar_decay(config):  # A_log as one value per head
    c = config
    H, S, inner = c.gdn_n_heads, c.gdn_d_state, c.gdn_d_inner
    beta = H * inner if c.gdn_rule == "delta" else 0
    return (c.dim * inner + inner * c.gdn_d_conv + 2 * H * S * inner + H * inner
            + inner * inner + inner * c.dim + c.dim * c.dim + 3 * H + beta)


# ---- 2. one MoE layer ----------------------------------------------------------------------
def _moe_oracle(config):
    from hymo_mini.moe import DeepSeekMoE

    table = count_params(_build(DeepSeekMoE, config))
    return (table.stored, table.active)


def _moe_cases():
    mini = load_config("hymo_mini").model
    prod = load_config("hymo_750m").model
    return [
        Case("the mini model", (mini,)),
        Case("hymo_750m", (prod,)),
        Case("top-1 routing", (replace(mini, n_activated_experts=1),)),
        Case("every expert active", (replace(mini, n_activated_experts=4),)),
        Case("no shared expert", (replace(mini, n_shared_experts=0),)),
        Case("two shared experts, narrower", (replace(mini, n_shared_experts=2,
                                                      moe_inter_dim=40),)),
        Case("64 experts, top-6", (replace(prod, n_routed_experts=64, n_activated_experts=6),)),
    ]


def _expert(config):
    return 3 * config.dim * config.moe_inter_dim


def _moe_no_router(config):
    c = config
    return ((c.n_routed_experts + c.n_shared_experts) * _expert(c),
            (c.n_activated_experts + c.n_shared_experts) * _expert(c))


def _moe_all_routed_active(config):
    c = config
    stored = (c.n_routed_experts + c.n_shared_experts) * _expert(c) + c.dim * c.n_routed_experts
    return (stored, stored)


def _moe_no_shared(config):
    c = config
    gate = c.dim * c.n_routed_experts
    return (c.n_routed_experts * _expert(c) + gate, c.n_activated_experts * _expert(c) + gate)


EXERCISES = [
    Exercise(
        name="gdn_mixer_params", chapter="15_parameters", cases=_gdn_cases, oracle=_gdn_oracle,
        wrong=[
            (_gdn_without_skip,
             "case the mini model: output differs at position (): got 21064, expected 25160",
             "leave out the skip projection (a dim × dim Linear)"),
            (_gdn_scalar_decay,
             "case the mini model: output differs at position (): got 25100, expected 25160",
             "store one decay rate per head (A_log has one per head and state channel)")],
    ),
    Exercise(
        name="moe_layer_params", chapter="15_parameters", cases=_moe_cases, oracle=_moe_oracle,
        wrong=[
            (_moe_no_router,
             "case the mini model: output 0 differs at position (): got 92160, expected 92416",
             "leave out the router (a dim × n_routed_experts matrix)"),
            (_moe_all_routed_active,
             "case the mini model: output 1 differs at position (): got 92416, expected 55552",
             "count every routed expert as active (only n_activated_experts run for a token)"),
            (_moe_no_shared,
             "case the mini model: output 0 differs at position (): got 73984, expected 92416",
             "leave out the shared experts")],
    ),
]
