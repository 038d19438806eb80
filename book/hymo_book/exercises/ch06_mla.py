"""Exercises of chapter 06 (multi-head latent attention): the parameters of one MLA, and the
content part of its scores computed straight against the cached latent."""

from __future__ import annotations

from dataclasses import fields
from types import SimpleNamespace

import torch

from hymo_book.exercises import Case, Exercise
from hymo_mini.config import load_config
from hymo_mini.mla import mla_param_count

MLA_FIELDS = ("dim", "n_heads", "n_kv_groups", "head_dim", "qk_rope_head_dim", "v_head_dim",
              "q_lora_rank", "kv_lora_rank")


# ---- mla_params(config) -> int ---------------------------------------------------------------
def mla_config_dict(name: str) -> dict:
    """The fields of a preset that size an MLA, as a plain dict."""
    model = load_config(name).model
    names = {f.name for f in fields(model)}
    return {k: getattr(model, k) for k in MLA_FIELDS if k in names}


def _mla_params_oracle(config: dict) -> int:
    c = SimpleNamespace(**config, qk_nope_head_dim=config["head_dim"]
                        - config["qk_rope_head_dim"])
    return mla_param_count(c)  # the library's count, the one the module is tested against


def _mla_params_cases():
    prod, mini = mla_config_dict("hymo_750m"), mla_config_dict("hymo_mini")
    return [
        Case("hymo_750m", (prod,)),
        Case("hymo_mini", (mini,)),
        Case("one KV group", ({**prod, "n_kv_groups": 1},)),
        Case("a KV group per head", ({**prod, "n_kv_groups": 16},)),
        Case("no rotary channels", ({**mini, "qk_rope_head_dim": 0},)),
        Case("values wider than keys", ({**mini, "v_head_dim": 24},)),
        Case("every size 1", ({k: 1 for k in MLA_FIELDS} | {"qk_rope_head_dim": 0},)),
    ]


def _compare_count(got, expected, case):
    if isinstance(got, torch.Tensor) and got.numel() == 1:
        got = got.item()
    if isinstance(got, float) and got.is_integer():
        got = int(got)
    if not isinstance(got, int):
        return f"case {case.name}: expected a whole number of parameters, got {got!r}"
    if got != expected:
        return f"case {case.name}: got {got:,} parameters, expected {expected:,}"
    return None


def _matrices_only(c):
    """Every weight matrix, but neither the two norm weights nor q_scale and k_scale."""
    nope = c["head_dim"] - c["qk_rope_head_dim"]
    return (c["dim"] * c["q_lora_rank"] + c["q_lora_rank"] * c["n_heads"] * c["head_dim"]
            + c["dim"] * (c["kv_lora_rank"] + c["qk_rope_head_dim"])
            + c["kv_lora_rank"] * c["n_kv_groups"] * (nope + c["v_head_dim"])
            + c["n_heads"] * c["v_head_dim"] * c["dim"])


def _k_pe_per_group(c):
    """Projects one rotary key per KV group instead of one shared key."""
    extra = c["dim"] * c["qk_rope_head_dim"] * (c["n_kv_groups"] - 1)
    return _mla_params_oracle(c) + extra


def _full_width_keys(c):
    """Expands the latent to whole head_dim keys (the rotary channels too)."""
    extra = c["kv_lora_rank"] * c["n_kv_groups"] * c["qk_rope_head_dim"]
    return _mla_params_oracle(c) + extra


# ---- absorbed_scores(q_nope, w_uk, latent) -> (h, t, s) -----------------------------------
def _absorbed_scores_oracle(q_nope, w_uk, latent):
    """Form every content key from the latent, then take the dot products (float64)."""
    h, g = q_nope.shape[0], w_uk.shape[0]
    k_nope = torch.einsum("gnr,sr->gsn", w_uk.double(), latent.double())  # (g, s, n)
    group = torch.arange(h) // (h // g)  # query head i reads KV group i // (h / g)
    return torch.einsum("htn,hsn->hts", q_nope.double(), k_nope[group]).to(q_nope.dtype)


def _absorbed_scores_cases():
    gen = torch.Generator().manual_seed(6)

    def make(h, g, t, s, n, r):
        return (torch.randn(h, t, n, generator=gen, dtype=torch.float64),
                torch.randn(g, n, r, generator=gen, dtype=torch.float64) / r ** 0.5,
                torch.randn(s, r, generator=gen, dtype=torch.float64))

    zero_latent = make(4, 2, 2, 3, 12, 16)
    zero_latent = zero_latent[:2] + (torch.zeros_like(zero_latent[2]),)
    return [
        Case("mini: 4 heads, 2 groups, n 12, r 16", make(4, 2, 3, 5, 12, 16)),
        Case("one group", make(4, 1, 2, 4, 6, 8)),
        Case("a group per head", make(3, 3, 2, 4, 6, 8)),
        Case("square: n = r = 8", make(4, 2, 3, 3, 8, 8)),
        Case("one cached token", make(4, 2, 1, 1, 12, 16)),
        Case("zero latent", zero_latent),
        Case("production widths: 16 heads, 4 groups, n 96, r 128", make(16, 4, 2, 5, 96, 128)),
    ]


def _interleaved_groups(q_nope, w_uk, latent):
    """Head i reads group i % g instead of i // (h / g)."""
    h, g = q_nope.shape[0], w_uk.shape[0]
    q_latent = torch.einsum("htn,hnr->htr", q_nope, w_uk[torch.arange(h) % g])  # (h, t, r)
    return torch.einsum("htr,sr->hts", q_latent, latent)


def _not_transposed(q_nope, w_uk, latent):
    """Reads w_uk (g, n, r) as if it were (g, r, n): the query meets the wrong axis."""
    h, g = q_nope.shape[0], w_uk.shape[0]
    w = w_uk[torch.arange(h) // (h // g)]  # (h, n, r)
    q_latent = torch.einsum("htn,hrn->htr", q_nope, w)  # wrong: n against r
    return torch.einsum("htr,sr->hts", q_latent, latent)


EXERCISES = [
    Exercise(
        name="mla_params", chapter="06_mla", cases=_mla_params_cases,
        oracle=_mla_params_oracle, compare=_compare_count,
        wrong=[
            (_matrices_only,
             "case hymo_750m: got 2,752,512 parameters, expected 2,755,040",
             "count only the weight matrices (the two norms' weights and q_scale, k_scale count "
             "too)"),
            (_k_pe_per_group,
             "case hymo_750m: got 2,841,056 parameters, expected 2,755,040",
             "project one rotary key per KV group (one rotary key is shared by every head)"),
            (_full_width_keys,
             "case hymo_750m: got 2,771,424 parameters, expected 2,755,040",
             "expand the latent to whole head_dim keys (it expands to the qk_nope_head_dim "
             "channels only)")],
    ),
    Exercise(
        name="absorbed_scores", chapter="06_mla", cases=_absorbed_scores_cases,
        oracle=_absorbed_scores_oracle,
        wrong=[
            (_interleaved_groups,
             "case mini: 4 heads, 2 groups, n 12, r 16: output differs at position (1, 0, 0): got "
             "1.96758, expected 5.86188",
             "give head i the group i % g (head i reads group i // (h / g))"),
            (_not_transposed,
             "case mini: 4 heads, 2 groups, n 12, r 16 raised RuntimeError: einsum(): subscript n "
             "has size 16 for operand 1 which does not broadcast with previously seen size 12",
             "contract the query with w_uk's last axis (w_uk is (g, n, r): the query meets n)")],
    ),
]
