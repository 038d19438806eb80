"""Exercises of chapter 08 (the chunked form): one chunk of each rule, for one head.

``gla_chunk`` is graded against the package's gla loop run over the chunk from the given
start state. ``wy_solve`` is graded against pseudo-values read off the delta rule's loop:
with unit keys, step t adds b_t ⊗ u_t to the decayed state, so u_t = b_tᵀ (H_t - α_t ⊙ H_{t-1})
(α_t = exp(g_t A)). From a zero start state these are Uv; with no values and the start
state I (S × S) they are -W. Everything in float64.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import einsum, rearrange

from hymo_book.exercises import Case, Exercise
from hymo_mini.ops import naive_gated_delta, naive_gla

CHAPTER = "08_chunked_form"


def _one_head(x: torch.Tensor) -> torch.Tensor:
    return rearrange(x, "t ... -> 1 t 1 ...")  # (C, ...) -> (B=1, C, H=1, ...)


def _gla_chunk_oracle(v, b, c, g, A, H0):
    o, state = naive_gla(_one_head(v), _one_head(b), _one_head(c), _one_head(g), A[None],
                         initial_state=H0[None, None])
    return o[0, :, 0], state[0, 0]  # (C, D), (S, D)


def _pseudo_values(v, b, g, A, beta, H0):
    """u_t (C, D) of the delta rule's loop over one chunk from H0, one step at a time."""
    state, rows = H0[None, None], []
    for t in range(v.shape[0]):
        step = slice(t, t + 1)
        _, new = naive_gated_delta(_one_head(v[step]), _one_head(b[step]), _one_head(b[step]),
                                   _one_head(g[step]), A[None], _one_head(beta[step]),
                                   initial_state=state)
        written = new[0, 0] - torch.exp(g[t] * A)[:, None] * state[0, 0]  # b_t ⊗ u_t, (S, D)
        rows.append(einsum(b[t], written, "s, s d -> d"))  # u_t, since |b_t| = 1
        state = new
    return torch.stack(rows)  # (C, D)


def _wy_solve_oracle(v, b, g, A, beta):
    C, S = b.shape
    Uv = _pseudo_values(v, b, g, A, beta, torch.zeros(S, v.shape[1], dtype=v.dtype))
    W = -_pseudo_values(torch.zeros(C, S, dtype=v.dtype), b, g, A, beta,
                        torch.eye(S, dtype=v.dtype))
    return Uv, W  # (C, D), (C, S)


def _draw(C, S, D, seed, *, rate=1.0, unit=False):
    gen = torch.Generator().manual_seed(seed)
    v = torch.randn(C, D, generator=gen, dtype=torch.float64)
    b = torch.randn(C, S, generator=gen, dtype=torch.float64) / S**0.5
    c = torch.randn(C, S, generator=gen, dtype=torch.float64) / S**0.5
    if unit:
        b = F.normalize(b, dim=-1)
    g = torch.sigmoid(torch.randn(C, generator=gen, dtype=torch.float64))  # (C,) in (0, 1)
    A = -rate * torch.linspace(0.1, 2.0, S, dtype=torch.float64)  # (S,)
    H0 = torch.randn(S, D, generator=gen, dtype=torch.float64)
    beta = torch.rand(C, generator=gen, dtype=torch.float64)
    return v, b, c, g, A, H0, beta


def _gla_cases():
    cases = []
    v, b, c, g, A, H0, _ = _draw(8, 5, 3, 0)
    cases.append(Case("random, C = 8, S = 5, D = 3", (v, b, c, g, A, H0)))
    v, b, c, g, A, H0, _ = _draw(1, 4, 2, 1)
    cases.append(Case("C = 1", (v, b, c, g, A, H0)))
    v, b, c, g, A, H0, _ = _draw(6, 3, 4, 2)
    cases.append(Case("zero start state", (v, b, c, g, A, torch.zeros_like(H0))))
    v, b, c, g, A, H0, _ = _draw(7, 4, 4, 3)
    cases.append(Case("no decay (g = 0)", (v, b, c, torch.zeros_like(g), A, H0)))
    v, b, c, g, _, H0, _ = _draw(32, 4, 3, 4)
    cases.append(Case("strong decay (g = 1, A = -40, C = 32)",
                      (v, b, c, torch.ones_like(g), torch.full((4,), -40.0,
                                                               dtype=torch.float64), H0)))
    for i in range(3):
        v, b, c, g, A, H0, _ = _draw(16, 6, 5, 10 + i, rate=2.0)
        cases.append(Case(f"random {i}", (v, b, c, g, A, H0)))
    return cases


def _wy_cases():
    cases = []
    v, b, _, g, A, _, beta = _draw(8, 5, 3, 0, unit=True)
    cases.append(Case("random, C = 8, S = 5, D = 3", (v, b, g, A, beta)))
    v, b, _, g, A, _, beta = _draw(1, 4, 2, 1, unit=True)
    cases.append(Case("C = 1", (v, b, g, A, beta)))
    v, b, _, g, A, _, beta = _draw(6, 4, 3, 2, unit=True)
    cases.append(Case("no decay (g = 0), β = 1", (v, b, torch.zeros_like(g), A,
                                                  torch.ones_like(beta))))
    v, b, _, g, A, _, beta = _draw(5, 3, 2, 3, unit=True)
    b = b[:1].repeat(5, 1)  # one key written five times
    cases.append(Case("the same key at every step", (v, b, g, A, beta)))
    v, b, _, g, _, _, beta = _draw(16, 4, 3, 4, unit=True)
    cases.append(Case("strong decay (g = 1, A = -40, C = 16)",
                      (v, b, torch.ones_like(g), torch.full((4,), -40.0, dtype=torch.float64),
                       beta)))
    for i in range(3):
        v, b, _, g, A, _, beta = _draw(16, 6, 5, 10 + i, rate=2.0, unit=True)
        cases.append(Case(f"random {i}", (v, b, g, A, beta)))
    return cases


# ---- plausible wrong answers ---------------------------------------------------------
def _gaps(g, A):
    L = g.cumsum(0)  # (C,)
    causal = torch.ones(len(g), len(g), dtype=torch.bool).tril()
    gap = (L[:, None] - L[None, :]).masked_fill(~causal, 0.0)  # (C, C) >= 0
    return L, causal, torch.exp(gap[..., None] * A) * causal[..., None]  # (C, C, S)


def _gla_factorised(v, b, c, g, A, H0):
    """The shortcut c̃ = c·exp(L A), b̃ = b·exp(-L A): overflows at strong decay."""
    L = g.cumsum(0)
    c_t, b_t = c * torch.exp(L[:, None] * A), b * torch.exp(-L[:, None] * A)
    o = (c_t @ b_t.T).tril() @ v + c_t @ H0
    H = torch.exp(L[-1] * A)[:, None] * H0 + (b_t * torch.exp(L[-1] * A)).T @ v
    return o, H


def _gla_no_start_state(v, b, c, g, A, H0):
    L, causal, E = _gaps(g, A)
    P = einsum(c, b, E, "t n, s n, t s n -> t s")
    H = torch.exp(L[-1] * A)[:, None] * H0 + (b * torch.exp((L[-1] - L)[:, None] * A)).T @ v
    return P @ v, H  # forgets what the chunk reads from H0


def _gla_undecayed_handover(v, b, c, g, A, H0):
    L, causal, E = _gaps(g, A)
    P = einsum(c, b, E, "t n, s n, t s n -> t s")
    o = P @ v + (c * torch.exp(L[:, None] * A)) @ H0
    H = H0 + (b * torch.exp((L[-1] - L)[:, None] * A)).T @ v  # H0 not decayed through
    return o, H


def _wy_parts(v, b, g, A, beta, *, decay=True, diagonal=False):
    L, causal, E = _gaps(g, A)
    if not decay:
        E = causal[..., None].to(b.dtype).expand_as(E)
    keep = causal if diagonal else causal.tril(-1)
    M = beta[:, None] * einsum(b, b, E, "t n, s n, t s n -> t s") * keep
    system = torch.eye(len(g), dtype=b.dtype) + M
    return system, b * torch.exp(L[:, None] * A)  # (I + M), K̃ = b ⊙ Γ


def _wy_without_decay_in_M(v, b, g, A, beta):
    system, K = _wy_parts(v, b, g, A, beta, decay=False)
    rhs = beta[:, None] * torch.cat([v, K], dim=-1)
    out = torch.linalg.solve_triangular(system, rhs, upper=False)
    return out[:, :v.shape[1]], out[:, v.shape[1]:]


def _wy_without_beta(v, b, g, A, beta):
    system, K = _wy_parts(v, b, g, A, beta)
    out = torch.linalg.solve_triangular(system, torch.cat([v, K], dim=-1), upper=False)
    return out[:, :v.shape[1]], out[:, v.shape[1]:]


def _wy_undecayed_keys(v, b, g, A, beta):
    system, _ = _wy_parts(v, b, g, A, beta)
    rhs = beta[:, None] * torch.cat([v, b], dim=-1)  # b where b ⊙ Γ belongs
    out = torch.linalg.solve_triangular(system, rhs, upper=False)
    return out[:, :v.shape[1]], out[:, v.shape[1]:]


EXERCISES = [
    Exercise(name="gla_chunk", chapter=CHAPTER, cases=_gla_cases, oracle=_gla_chunk_oracle,
             wrong=[
                 (_gla_factorised,
                  "case strong decay (g = 1, A = -40, C = 32): output 0 differs at position (17, "
                  "0): got nan, expected -0.556442",
                  "factor the decay as exp(L·A) times exp(-L·A) (exp(-L·A) overflows at strong "
                  "decay: use the gaps L_t - L_s)"),
                 (_gla_no_start_state,
                  "case random, C = 8, S = 5, D = 3: output 0 differs at position (0, 0): got "
                  "0.182788, expected -0.0918915",
                  "leave out what the chunk reads from the start state H0"),
                 (_gla_undecayed_handover,
                  "case random, C = 8, S = 5, D = 3: output 1 differs at position (0, 0): got "
                  "-1.53134, expected -1.24956",
                  "hand H0 on undecayed (the end state holds exp(L_C·A) ⊙ H0)")]),
    Exercise(name="wy_solve", chapter=CHAPTER, cases=_wy_cases, oracle=_wy_solve_oracle,
             wrong=[
                 (_wy_without_decay_in_M,
                  "case random, C = 8, S = 5, D = 3: output 0 differs at position (1, 0): got "
                  "1.04984, expected 1.05331",
                  "leave the decay out of M (the pairs' key products are decayed by the gap "
                  "between them)"),
                 (_wy_without_beta,
                  "case random, C = 8, S = 5, D = 3: output 0 differs at position (0, 0): got "
                  "-2.31041, expected -0.647465",
                  "leave out β (M and the right-hand side are both scaled by β_t)"),
                 (_wy_undecayed_keys,
                  "case random, C = 8, S = 5, D = 3: output 1 differs at position (0, 0): got "
                  "0.233933, expected 0.220724",
                  "use the keys b where the decayed keys b ⊙ Γ belong")]),
]
