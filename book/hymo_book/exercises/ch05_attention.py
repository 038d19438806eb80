"""Exercises of chapter 05 (attention, MQA/GQA and the KV cache): grouped causal attention
against a loop over heads, and the bytes a KV cache keeps."""

from __future__ import annotations

import math

import torch

from hymo_book.exercises import Case, Exercise
from hymo_mini.analysis.costs import mha_cost
from hymo_mini.config import load_config


# ---- grouped_attention(q, k, v) -> (h, t, dv) ----------------------------------------------
def _grouped_attention_oracle(q, k, v):
    """A plain loop over heads and queries, in float64."""
    h, t, d = q.shape
    g, s, _ = k.shape
    out = torch.zeros(h, t, v.shape[-1], dtype=torch.float64)
    for i in range(h):
        group = i // (h // g)  # heads 0 .. h/g - 1 read group 0, and so on
        for row in range(t):
            last = s - t + row  # the query's position: the queries are the last t tokens
            scores = k[group, : last + 1].double() @ q[i, row].double() / math.sqrt(d)
            out[i, row] = scores.softmax(-1) @ v[group, : last + 1].double()
    return out.to(q.dtype)


def _grouped_attention_cases():
    gen = torch.Generator().manual_seed(5)

    def qkv(h, g, t, s, d=4, dv=4, scale=1.0):
        return (torch.randn(h, t, d, generator=gen, dtype=torch.float64) * scale,
                torch.randn(g, s, d, generator=gen, dtype=torch.float64),
                torch.randn(g, s, dv, generator=gen, dtype=torch.float64))

    zeros_q = qkv(2, 1, 4, 4)
    zeros_q = (torch.zeros_like(zeros_q[0]),) + zeros_q[1:]
    return [
        Case("MHA: 2 heads, 2 groups, t = s = 4", qkv(2, 2, 4, 4)),
        Case("MQA: 4 heads, 1 group", qkv(4, 1, 5, 5)),
        Case("GQA: 6 heads, 3 groups", qkv(6, 3, 3, 3)),
        Case("one token", qkv(2, 1, 1, 1)),
        Case("decoding: 1 query, 6 cached keys", qkv(4, 2, 1, 6)),
        Case("3 new queries, 7 keys", qkv(4, 2, 3, 7)),
        Case("zero queries: equal scores", zeros_q),
        Case("large scores", qkv(2, 2, 5, 5, scale=30.0)),
        Case("value size 3, key size 5", qkv(4, 2, 4, 4, d=5, dv=3)),
    ]


def _attend(q, k, v, heads_to_groups, scale=True, top_left=False, mask=True):
    """Vectorised attention with one choice made differently (the wrong answers)."""
    h, t, d = q.shape
    g, s, _ = k.shape
    kk, vv = k[heads_to_groups(h, g)], v[heads_to_groups(h, g)]  # (h, s, d), (h, s, dv)
    scores = q @ kk.transpose(-1, -2) / (math.sqrt(d) if scale else 1.0)  # (h, t, s)
    if mask:
        allowed = torch.ones(t, s, dtype=torch.bool).tril(0 if top_left else s - t)
        scores = scores.masked_fill(~allowed, float("-inf"))
    return scores.softmax(-1) @ vv


def _blocked(h, g):
    return torch.arange(h) // (h // g)


def _interleaved(h, g):
    return torch.arange(h) % g


# ---- kv_cache_bytes(...) -> int ------------------------------------------------------------
def _kv_cache_bytes_oracle(n_kv_heads, head_dim, v_head_dim, n_tokens, n_layers=1,
                           dtype_bytes=2):
    return n_layers * n_tokens * n_kv_heads * (head_dim + v_head_dim) * dtype_bytes


def _kv_cache_bytes_cases():
    prod = load_config("hymo_750m").model

    def library(n_kv_heads, T, n_layers, dtype_bytes=2):  # hymo_mini.analysis.costs: one layer
        return n_layers * mha_cost(prod, T, n_kv_heads=n_kv_heads,
                                   cache_dtype_bytes=dtype_bytes).cache_bytes

    d, dv = prod.head_dim, prod.v_head_dim
    return [
        Case("MHA, 16 heads, 4,096 tokens, 8 layers", (16, d, dv, 4096, 8),
             expected=library(16, 4096, 8)),
        Case("GQA-4, 4,096 tokens, 8 layers", (4, d, dv, 4096, 8), expected=library(4, 4096, 8)),
        Case("MQA, 4,096 tokens, 8 layers", (1, d, dv, 4096, 8), expected=library(1, 4096, 8)),
        Case("fp32 values", (4, d, dv, 1000, 2), {"dtype_bytes": 4},
             expected=library(4, 1000, 2, 4)),
        Case("one token, one layer", (16, d, dv, 1)),
        Case("no tokens yet", (16, d, dv, 0, 8)),
        Case("values smaller than keys: 64 + 32", (8, 64, 32, 100, 3)),
    ]


def _compare_bytes(got, expected, case):
    if isinstance(got, torch.Tensor) and got.numel() == 1:
        got = got.item()
    if isinstance(got, float) and got.is_integer():
        got = int(got)
    if not isinstance(got, int):
        return f"case {case.name}: expected a whole number of bytes, got {got!r}"
    if got != expected:
        return f"case {case.name}: got {got:,} bytes, expected {expected:,}"
    return None


EXERCISES = [
    Exercise(
        name="grouped_attention", chapter="05_attention", cases=_grouped_attention_cases,
        oracle=_grouped_attention_oracle,
        wrong=[
            (lambda q, k, v: _attend(q, k, v, _interleaved),
             "case GQA: 6 heads, 3 groups: output differs at position (1, 0, 0): got -0.0504143, "
             "expected 0.388555",
             "give head i the group i % g (heads come in blocks: head i reads group i // (h / "
             "g))"),
            (lambda q, k, v: _attend(q, k, v, _blocked, scale=False),
             "case MHA: 2 heads, 2 groups, t = s = 4: output differs at position (0, 1, 0): got "
             "0.231646, expected 0.191934",
             "leave out the 1/√d scale of the scores"),
            (lambda q, k, v: _attend(q, k, v, _blocked, top_left=True),
             "case decoding: 1 query, 6 cached keys: output differs at position (0, 0, 0): got "
             "1.39963, expected 0.23332",
             "align the causal mask at the top left (the queries are the last t positions: query "
             "i sees keys up to s - t + i)"),
            (lambda q, k, v: _attend(q, k, v, _blocked, mask=False),
             "case MHA: 2 heads, 2 groups, t = s = 4: output differs at position (0, 0, 0): got "
             "0.910689, expected 0.233605",
             "leave out the causal mask")],
    ),
    Exercise(
        name="kv_cache_bytes", chapter="05_attention", cases=_kv_cache_bytes_cases,
        oracle=_kv_cache_bytes_oracle, compare=_compare_bytes,
        wrong=[
            (lambda n_kv_heads, head_dim, v_head_dim, n_tokens, n_layers=1, dtype_bytes=2:
             n_layers * n_tokens * n_kv_heads * head_dim * dtype_bytes,
             "case MHA, 16 heads, 4,096 tokens, 8 layers: got 134,217,728 bytes, expected "
             "268,435,456",
             "cache the keys only (each token keeps a key and a value)"),
            (lambda n_kv_heads, head_dim, v_head_dim, n_tokens, n_layers=1, dtype_bytes=2:
             n_layers * n_tokens * n_kv_heads * (head_dim + v_head_dim),
             "case MHA, 16 heads, 4,096 tokens, 8 layers: got 134,217,728 bytes, expected "
             "268,435,456",
             "count values instead of bytes (multiply by dtype_bytes)"),
            (lambda n_kv_heads, head_dim, v_head_dim, n_tokens, n_layers=1, dtype_bytes=2:
             n_layers * n_tokens * n_kv_heads * 2 * head_dim * dtype_bytes,
             "case values smaller than keys: 64 + 32: got 614,400 bytes, expected 460,800",
             "size the values like the keys (a value has v_head_dim channels)")],
    ),
]
