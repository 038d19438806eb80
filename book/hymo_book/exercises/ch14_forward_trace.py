"""Exercises of chapter 14 (the forward pass end to end): activation bytes from shapes, and
the FLOPs of a matrix product and of an attention core."""

from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from hymo_book.exercises import Case, Exercise
from hymo_mini.analysis.costs import attention_pairs
from hymo_mini.config import load_config, replace


# ---- 1. bytes per token of a GDN block's linear outputs ------------------------------------
def _linear_bytes_oracle(config, dtype_bytes):
    """Trace one GDN block on the meta device and add up its Linear layers' outputs."""
    from hymo_mini.analysis.trace import trace_shapes
    from hymo_mini.blocks import GDNBlock

    B, T = 2, 3
    with torch.device("meta"):
        block = GDNBlock(config, layer_idx=config.gdn_positions[0])
    trace = trace_shapes(block, torch.zeros(B, T, config.dim, device="meta"))
    values = 0
    for row in trace.filter(kind="Linear"):
        shape = [int(n) for n in row.outputs.strip("()").split(",") if n.strip()]
        values += torch.Size(shape).numel()
    return values * dtype_bytes // (B * T)


def _linear_bytes_cases():
    mini = load_config("hymo_mini").model
    prod = load_config("hymo_750m").model
    return [
        Case("the mini model, fp32", (mini, 4)),
        Case("hymo_750m, bf16", (prod, 2)),
        Case("hymo_750m, fp32", (prod, 4)),
        Case("keys narrower than values (S = 8, D = 16)",
             (replace(mini, gdn_d_state=8, gdn_rope_dim=8), 4)),
        Case("the delta rule (one more projection)", (replace(mini, gdn_rule="delta"), 4)),
        Case("a wider mixer (d_inner = 2 × dim)", (replace(mini, gdn_d_inner=128), 2)),
    ]


def _forgot_skip(config, dtype_bytes):
    c = config
    inner, keys = c.gdn_d_inner, c.gdn_n_heads * c.gdn_d_state
    return (inner + 2 * keys + c.gdn_n_heads + inner + c.dim) * dtype_bytes


def _keys_as_wide_as_inner(config, dtype_bytes):
    c = config
    inner = c.gdn_d_inner
    extra = c.gdn_n_heads if c.gdn_rule == "delta" else 0
    return (inner + 2 * inner + c.gdn_n_heads + inner + 2 * c.dim + extra) * dtype_bytes


# ---- 2. the FLOPs of a matrix product --------------------------------------------------------
def _matmul_oracle(a_shape, b_shape):
    with FlopCounterMode(display=False) as counter:
        torch.matmul(torch.empty(a_shape, device="meta"), torch.empty(b_shape, device="meta"))
    return counter.get_total_flops()


def _matmul_cases():
    return [
        Case("a plain product", ((3, 4), (4, 2))),
        Case("a square product", ((64, 64), (64, 64))),
        Case("batched", ((8, 16, 32), (8, 32, 4))),
        Case("batch broadcast from 1", ((1, 3, 4), (5, 4, 2))),
        Case("batch on one side only", ((7, 2, 3, 4), (4, 2))),
        Case("inner size 1", ((5, 1), (1, 6))),
        Case("an empty batch", ((0, 3, 4), (4, 2))),
        Case("broadcast on both sides", ((2, 1, 3, 4), (1, 5, 4, 2))),
    ]


def _matmul_no_batch(a_shape, b_shape):
    return 2 * a_shape[-2] * a_shape[-1] * b_shape[-1]


def _matmul_one_flop(a_shape, b_shape):
    batch = torch.broadcast_shapes(a_shape[:-2], b_shape[:-2]).numel()
    return batch * a_shape[-2] * a_shape[-1] * b_shape[-1]


# ---- 3. the FLOPs of an attention core -------------------------------------------------------
def _attention_oracle(T, n_heads, qk_dim, v_dim, causal):
    return 2 * attention_pairs(T, causal) * n_heads * (qk_dim + v_dim)


def _attention_cases():
    return [
        Case("hymo_750m's MLA at T = 4,096, causal", (4096, 16, 128, 128, True)),
        Case("the same without the mask", (4096, 16, 128, 128, False)),
        Case("one token", (1, 16, 128, 128, True)),
        Case("no tokens", (0, 4, 16, 16, True)),
        Case("keys and values of different widths", (100, 4, 24, 16, True)),
        Case("one head, odd length", (63, 1, 5, 7, True)),
        Case("a long context", (131_072, 16, 128, 128, True)),
    ]


EXERCISES = [
    Exercise(
        name="gdn_linear_bytes_per_token", chapter="14_forward_trace",
        cases=_linear_bytes_cases, oracle=_linear_bytes_oracle,
        wrong=[
            (_forgot_skip,
             "case the mini model, fp32: output differs at position (): got 1296, expected 1552",
             "leave out the skip projection (dim values per token)"),
            (_keys_as_wide_as_inner,
             "case keys narrower than values (S = 8, D = 16): output differs at position (): got "
             "1552, expected 1296",
             "make the keys as wide as the values (keys are gdn_n_heads × gdn_d_state wide)")],
    ),
    Exercise(
        name="matmul_flops", chapter="14_forward_trace", cases=_matmul_cases,
        oracle=_matmul_oracle,
        wrong=[
            (_matmul_no_batch,
             "case batched: output differs at position (): got 4096, expected 32768",
             "leave out the batch (the broadcast leading dimensions multiply the count)"),
            (_matmul_one_flop,
             "case a plain product: output differs at position (): got 24, expected 48",
             "count one FLOP per multiply-add (it is two)")],
    ),
    Exercise(
        name="attention_core_flops", chapter="14_forward_trace", cases=_attention_cases,
        oracle=_attention_oracle,
        wrong=[
            (lambda T, n_heads, qk_dim, v_dim, causal:
             2 * T * T * n_heads * (qk_dim + v_dim),
             "case hymo_750m's MLA at T = 4,096, causal: output differs at position (): got "
             "1.37439e+11, expected 6.87363e+10",
             "count every pair under the causal mask (a query sees only the keys up to its own)"),
            (lambda T, n_heads, qk_dim, v_dim, causal:
             2 * (T * T // 2 if causal else T * T) * n_heads * (qk_dim + v_dim),
             "case hymo_750m's MLA at T = 4,096, causal: output differs at position (): got "
             "6.87195e+10, expected 6.87363e+10",
             "count T²/2 pairs under the mask (it is T(T + 1)/2: each query sees itself too)"),
            (lambda T, n_heads, qk_dim, v_dim, causal:
             2 * attention_pairs(T, causal) * n_heads * 2 * qk_dim,
             "case keys and values of different widths: output differs at position (): got "
             "1.9392e+06, expected 1.616e+06",
             "use the key width for the values too (the scores take qk_dim, the weighted sum "
             "v_dim)")],
    ),
]
