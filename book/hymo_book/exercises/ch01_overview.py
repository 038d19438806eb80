"""Exercises of chapter 01 (the overview): the layer layout of a configuration, and how many
bytes the stack's KV cache grows by per generated token."""

from __future__ import annotations

from hymo_book.exercises import Case, Exercise
from hymo_mini.analysis.costs import mla_cost
from hymo_mini.config import ModelConfig, load_config, replace


# ---- mla_layers(n_layers, mla_every, mla_position) --------------------------------------
def _mla_layers_oracle(n_layers, mla_every, mla_position):
    config = replace(ModelConfig(), n_layers=n_layers, mla_every=mla_every,
                     mla_position=mla_position)
    return tuple(config.mla_positions)


def _mla_layers_cases():
    return [
        Case("production, MLA last", (32, 4, "last")),
        Case("production, MLA first", (32, 4, "first")),
        Case("mini, MLA last", (8, 4, "last")),
        Case("10 layers: an incomplete last group, MLA first", (10, 4, "first")),
        Case("10 layers: an incomplete last group, MLA last", (10, 4, "last")),
        Case("one MLA in six, 48 layers", (48, 6, "last")),
        Case("fewer layers than a group, MLA last", (3, 4, "last")),
        Case("every layer MLA (mla_every=1)", (5, 1, "last")),
        Case("no MLA layer (mla_every=0)", (12, 0, "last")),
        Case("a single layer, MLA first", (1, 4, "first")),
    ]


def _compare_layers(got, expected, case: Case) -> str | None:
    try:
        got = tuple(int(i) for i in got)
    except (TypeError, ValueError):
        return f"case {case.name}: expected a tuple of layer indices, got {got!r}"
    if got != expected:
        return f"case {case.name}: MLA layers should be {expected}, got {got}"
    return None


def _ignores_position(n_layers, mla_every, mla_position):
    return tuple(range(0, n_layers, mla_every)) if mla_every else ()


def _counts_groups_from_the_end(n_layers, mla_every, mla_position):
    # "last" read as the last layer of the stack and every mla_every-th before it
    if not mla_every:
        return ()
    if mla_position == "first":
        return tuple(range(0, n_layers, mla_every))
    return tuple(sorted(range(n_layers - 1, -1, -mla_every)))


def _divides_by_zero(n_layers, mla_every, mla_position):
    place = 0 if mla_position == "first" else mla_every - 1
    return tuple(i for i in range(n_layers) if i % mla_every == place)


# ---- stack_kv_bytes_per_token(config, dtype_bytes=2) ------------------------------------
def _kv_oracle(config, dtype_bytes=2):
    per_layer = mla_cost(config, 1, cache_dtype_bytes=dtype_bytes).cache_bytes  # one token
    return len(config.mla_positions) * per_layer


def _kv_cases():
    prod = load_config("hymo_750m").model
    mini = load_config("hymo_mini").model
    return [
        Case("production", (prod,)),
        Case("production, fp32 cache", (prod,), {"dtype_bytes": 4}),
        Case("mini", (mini,)),
        Case("10 layers, MLA first (3 MLA layers)", (replace(prod, n_layers=10,
                                                             mla_position="first"),)),
        Case("10 layers, MLA last (2 MLA layers)", (replace(prod, n_layers=10),)),
        Case("all MLA (mla_every=1)", (replace(mini, mla_every=1),)),
        Case("all GDN (mla_every=0)", (replace(prod, mla_every=0),)),
        Case("no rotary key (qk_rope_head_dim=0)", (replace(mini, qk_rope_head_dim=0),)),
    ]


def _compare_bytes(got, expected, case: Case) -> str | None:
    if isinstance(got, bool) or not isinstance(got, int | float) or got != int(got):
        return f"case {case.name}: expected a whole number of bytes, got {got!r}"
    if int(got) != expected:
        return f"case {case.name}: expected {expected:,} bytes per token, got {int(got):,}"
    return None


def _every_layer(config, dtype_bytes=2):
    return config.n_layers * (config.kv_lora_rank + config.qk_rope_head_dim) * dtype_bytes


def _no_rotary_key(config, dtype_bytes=2):
    return len(config.mla_positions) * config.kv_lora_rank * dtype_bytes


def _layers_by_division(config, dtype_bytes=2):
    n_mla = config.n_layers // config.mla_every
    return n_mla * (config.kv_lora_rank + config.qk_rope_head_dim) * dtype_bytes


def _mha_cache(config, dtype_bytes=2):
    per_layer = config.n_heads * (config.head_dim + config.v_head_dim)  # a key and value per head
    return len(config.mla_positions) * per_layer * dtype_bytes


EXERCISES = [
    Exercise(
        name="mla_layers", chapter="01_overview", cases=_mla_layers_cases,
        oracle=_mla_layers_oracle, compare=_compare_layers,
        wrong=[
            (_ignores_position,
             "case production, MLA last: MLA layers should be (3, 7, 11, 15, 19, 23, 27, 31), got "
             "(0, 4, 8, 12, 16, 20, 24, 28)",
             "ignore mla_position (with \"last\" the MLA layer ends each group of mla_every "
             "layers)"),
            (_counts_groups_from_the_end,
             "case 10 layers: an incomplete last group, MLA last: MLA layers should be (3, 7), "
             "got (1, 5, 9)",
             "count the groups back from the stack's last layer (they start at layer 0, and an "
             "incomplete last group has no MLA layer)"),
            (_divides_by_zero,
             "case no MLA layer (mla_every=0) raised ZeroDivisionError: integer modulo by zero",
             "divide by mla_every when it is 0 (0 means no MLA layer at all)")],
    ),
    Exercise(
        name="stack_kv_bytes_per_token", chapter="01_overview", cases=_kv_cases,
        oracle=_kv_oracle, compare=_compare_bytes,
        wrong=[
            (_every_layer,
             "case production: expected 2,560 bytes per token, got 10,240",
             "count every layer (only the MLA layers keep a cache that grows; a GDN layer keeps "
             "a fixed state)"),
            (_no_rotary_key,
             "case production: expected 2,560 bytes per token, got 2,048",
             "leave out the rotary key (each token caches kv_lora_rank + qk_rope_head_dim "
             "values)"),
            (_layers_by_division,
             "case 10 layers, MLA first (3 MLA layers): expected 960 bytes per token, got 640",
             "count the MLA layers as n_layers // mla_every (an incomplete last group can hold "
             "one: count mla_positions)"),
            (_mha_cache,
             "case production: expected 2,560 bytes per token, got 65,536",
             "cache a key and a value per head as MHA does (MLA caches the latent and one rotary "
             "key)")],
    ),
]
