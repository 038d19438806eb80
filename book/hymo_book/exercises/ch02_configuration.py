"""Exercises of chapter 02 (configuration): derived fields from a partial YAML ``model:``
mapping, and the MoE's capacity slots per expert from the formula."""

from __future__ import annotations

import math

from hymo_book.exercises import Case, Exercise
from hymo_mini.config import ModelConfig, config_from_dict, load_config, replace

DERIVED = ("qk_nope_head_dim", "gdn_n_heads", "heads_per_group")


# ---- derived_fields(model) --------------------------------------------------------------
def _derived_oracle(model):
    config = config_from_dict({"model": dict(model)}).model  # validates the mapping too
    return {name: getattr(config, name) for name in DERIVED}


def _derived_cases():
    mini = load_config("hymo_mini").model
    mini_section = {f: getattr(mini, f) for f in ("head_dim", "qk_rope_head_dim", "gdn_d_inner",
                                                  "gdn_headdim", "n_heads", "n_kv_groups")}
    return [
        Case("production defaults (an empty mapping)", ({},)),
        Case("the mini preset's fields", (mini_section,)),
        Case("GDN heads wider than the state (D=64, S=16)",
             ({"gdn_headdim": 64, "gdn_d_state": 16, "gdn_rope_dim": 16},)),
        Case("no RoPE (qk_rope_head_dim=0)", ({"qk_rope_head_dim": 0},)),
        Case("RoPE on the whole head", ({"head_dim": 64, "qk_rope_head_dim": 64},)),
        Case("one GDN head", ({"gdn_d_inner": 32},)),
        Case("one key-value group for all query heads", ({"n_kv_groups": 1},)),
        Case("a key-value head per query head", ({"n_heads": 8, "n_kv_groups": 8},)),
    ]


def _compare_derived(got, expected, case: Case) -> str | None:
    if not isinstance(got, dict):
        return f"case {case.name}: expected a dict with keys {DERIVED}, got {type(got).__name__}"
    missing = [k for k in DERIVED if k not in got]
    if missing:
        return f"case {case.name}: the result has no key {missing[0]!r}"
    for key in DERIVED:
        if got[key] != expected[key]:
            return f"case {case.name}: {key} should be {expected[key]}, got {got[key]!r}"
    return None


def _field(model, name):
    return model.get(name, getattr(ModelConfig(), name))


def _no_defaults(model):
    return {"qk_nope_head_dim": model["head_dim"] - model["qk_rope_head_dim"],
            "gdn_n_heads": model["gdn_d_inner"] // model["gdn_headdim"],
            "heads_per_group": model["n_heads"] // model["n_kv_groups"]}


def _heads_from_the_state(model):  # S where D belongs
    return {"qk_nope_head_dim": _field(model, "head_dim") - _field(model, "qk_rope_head_dim"),
            "gdn_n_heads": _field(model, "gdn_d_inner") // _field(model, "gdn_d_state"),
            "heads_per_group": _field(model, "n_heads") // _field(model, "n_kv_groups")}


def _groups_upside_down(model):
    return {"qk_nope_head_dim": _field(model, "head_dim") - _field(model, "qk_rope_head_dim"),
            "gdn_n_heads": _field(model, "gdn_d_inner") // _field(model, "gdn_headdim"),
            "heads_per_group": _field(model, "n_kv_groups")}


# ---- slots_per_expert(n_tokens, top_k, n_experts, capacity_factor) ----------------------
def _slots_oracle(n_tokens, top_k, n_experts, capacity_factor):
    config = replace(ModelConfig(), n_routed_experts=n_experts, n_activated_experts=top_k,
                     capacity_factor=capacity_factor)
    return config.moe_capacity(n_tokens)


def _slots_cases():
    # every value is exact in binary, so the order of the products cannot change the answer
    return [
        Case("production batch (4 × 4096 tokens, top-2 of 16)", (4 * 4096, 2, 16, 1.5)),
        Case("mini batch (8 × 128 tokens, top-2 of 4)", (8 * 128, 2, 4, 1.5)),
        Case("a fraction rounds up (1.875 -> 2)", (10, 2, 16, 1.5)),
        Case("a fraction rounds up (15.625 -> 16)", (100, 2, 16, 1.25)),
        Case("capacity factor below 1 (62.5 -> 63)", (1000, 2, 16, 0.5)),
        Case("one token", (1, 2, 16, 1.5)),
        Case("an empty batch still gets one slot", (0, 2, 16, 1.5)),
        Case("top-k equal to the experts", (7, 4, 4, 1.0)),
    ]


def _compare_slots(got, expected, case: Case) -> str | None:
    if isinstance(got, bool) or not isinstance(got, int | float) or got != int(got):
        return f"case {case.name}: expected a whole number of slots, got {got!r}"
    if int(got) != expected:
        return f"case {case.name}: expected {expected:,} slots per expert, got {int(got):,}"
    return None


def _floors(n_tokens, top_k, n_experts, capacity_factor):
    return max(1, int(capacity_factor * n_tokens * top_k / n_experts))


def _forgets_top_k(n_tokens, top_k, n_experts, capacity_factor):
    return max(1, math.ceil(capacity_factor * n_tokens / n_experts))


def _no_floor_of_one(n_tokens, top_k, n_experts, capacity_factor):
    return math.ceil(capacity_factor * n_tokens * top_k / n_experts)


def _rounds(n_tokens, top_k, n_experts, capacity_factor):
    return max(1, round(capacity_factor * n_tokens * top_k / n_experts))


EXERCISES = [
    Exercise(
        name="derived_fields", chapter="02_configuration", cases=_derived_cases,
        oracle=_derived_oracle, compare=_compare_derived,
        wrong=[
            (_no_defaults,
             "case production defaults (an empty mapping) raised KeyError: 'head_dim'",
             "read every field from the mapping (a field it leaves out takes ModelConfig's "
             "default)"),
            (_heads_from_the_state,
             "case the mini preset's fields: gdn_n_heads should be 4, got 2",
             "divide gdn_d_inner by gdn_d_state (a head is gdn_headdim wide)"),
            (_groups_upside_down,
             "case one key-value group for all query heads: heads_per_group should be 16, got 1",
             "take n_kv_groups as the heads per group (it is n_heads // n_kv_groups)")],
    ),
    Exercise(
        name="slots_per_expert", chapter="02_configuration", cases=_slots_cases,
        oracle=_slots_oracle, compare=_compare_slots,
        wrong=[
            (_floors,
             "case a fraction rounds up (1.875 -> 2): expected 2 slots per expert, got 1",
             "round down (a fraction of a slot rounds up: math.ceil)"),
            (_forgets_top_k,
             "case production batch (4 × 4096 tokens, top-2 of 16): expected 3,072 slots per "
             "expert, got 1,536",
             "leave out top_k (each token sends top_k assignments)"),
            (_no_floor_of_one,
             "case an empty batch still gets one slot: expected 1 slots per expert, got 0",
             "leave out the floor of one slot (max(1, ...))"),
            (_rounds,
             "case capacity factor below 1 (62.5 -> 63): expected 63 slots per expert, got 62",
             "round to the nearest (a fraction of a slot rounds up: math.ceil)")],
    ),
]
