"""The chunked gla forward in one launch: each program forms its chunk's start state from
a state stored by an earlier program and what the chunks between add, while the chunks'
outputs run in parallel.

The three-launch forward of ``hymo_mini.ops.gla.chunk_triton`` computes what every chunk
adds on its own (ΔH_k), chains the chunk states in a light sequential scan,

    H_{k+1} = exp(L_k A) ⊙ H_k + ΔH_k      (L_k: chunk k's gate sum) ,

and then lets a program per chunk walk its blocks from H_k. Each chunk state goes through
memory three times (ΔH written, rewritten by the scan, read by the outputs), and each
launch waits for the one before to finish. Here one program per (chunk, batch, head) does
all three steps for its chunk:

1. ΔH_k and L_k, as ``chunk_states._chunk_delta_kernel`` computes them (one product over
   PIECE steps, 64 at most so that a tile stays in registers, pieces chained by their
   decay), stored, then a flag raised: nothing here waits for another program;
2. the chunks between its base and itself, lo = max(k - R, 0) .. k - 1 with R the reach,
   on their own: P = what they add, decayed to chunk k's start, by the recurrence above
   from zero, and Λ = L_lo + ... + L_{k-1}; their flags are waited for, but those
   programs did not wait for anyone;
3. H_k = exp(Λ A) ⊙ H_lo + P, with H_lo the initial state for lo = 0 and otherwise the
   state the program of chunk lo stored (after waiting for its flag); H_k stored, then
   its own flag raised for the program of chunk k + R;
4. the block walk from H_k with outputs, as in the three-launch forward.

Only step 3 lies on a chain: H_k waits for H_{k-R}, which waited for H_{k-2R}, ... so the
states hand on along R interleaved chains of about NC / R links each, not one of NC. Each
link is a store, a flag and a read through the GPU's L2 cache, one after another, so a long
sequence with few heads, whose programs would otherwise wait on one long chain, gains most
(CONFIGS["reach"] says what was measured). The price is R reads of a
ΔH per program. With R = 1 it is the plain chain: H_k = exp(L_{k-1} A) ⊙ H_{k-1} +
ΔH_{k-1}. Each state is formed by the same operations whichever program runs first, so the
result is deterministic (for one R; two reaches group the same sums differently).

Waiting for another program is safe only if that program is running or done. The GPU
starts programs in an order it does not promise, so the program's chunk is not its
program id: each program first takes a ticket from a counter (an atomic add) and works on
the ticket's chunk, tickets handed out chunk-major (every (batch, head) of chunk 0, then
of chunk 1, ...). A program waits only for programs of earlier chunks, whose tickets were
taken before its own by programs already running; so every wait ends. A flag is written
with release semantics after what it announces (and a barrier, so every lane's stores are
in), read with acquire, and what it announces read past the SM's L1 cache (``.cg``),
where a stale copy could sit. Under the Triton interpreter programs run one after another
in ticket order, and every wait ends at once.

Memory: the chunk states hs (B·H·⌈T/BC⌉·S·D fp32, as the three launches keep them, so
the backward finds them); while the forward runs, every chunk's ΔH (as much again) and
gate sum, and the counter and two flags per chunk (1 + 2·B·H·⌈T/BC⌉ int32, zeroed for
every call).
"""

from __future__ import annotations

import triton
import triton.language as tl

from hymo_mini.ops.gla.chunk_blocks import _claims, _output_block, _rates, _spread
from hymo_mini.ops.gla.chunk_states import _chunk_delta

__all__ = []  # kernels only, launched by hymo_mini.ops.gla.chunk_triton (_state_handed_on
#              and _hand_on are shared with hymo_mini.ops.gated_delta.chunk_chain)


@triton.jit
def _state_handed_on(p_h, h0, flags, i_c, i_bh, BH, o_sd, m_h, S: tl.constexpr,
                     D: tl.constexpr, BS: tl.constexpr, BD: tl.constexpr,
                     USE_H0: tl.constexpr):
    """The state [BS, BD] that link i_c of (b, h)'s chain starts with, at p_h: for link 0
    the initial state (or zeros), stored there; for a later link, read from there once the
    program of link i_c - 1 has raised its flag (acquire), past the SM's L1 cache.
    flags[1 + k·BH + bh] is link k's flag. Shared with the delta rule's one-launch forward."""
    if i_c == 0:
        b_h = tl.zeros([BS, BD], dtype=tl.float32)
        if USE_H0:
            b_h += tl.load(h0 + i_bh.to(tl.int64) * S * D + o_sd, mask=m_h, other=0.0)
        tl.store(p_h, b_h, mask=m_h)
    else:
        p_flag = flags + 1 + (i_c - 1) * BH + i_bh
        ready = tl.atomic_add(p_flag, 0, sem="acquire")
        while ready != 1:  # (the delta rule's two-launch chain also leaves a 2: not yet)
            ready = tl.atomic_add(p_flag, 0, sem="acquire")
        b_h = tl.load(p_h, mask=m_h, other=0.0, cache_modifier=".cg")
    return b_h


@triton.jit
def _hand_on(p_next, b_next, m_h, flags, i_c, i_bh, BH):
    """Store the state the next link starts with at p_next, then raise link i_c's flag."""
    tl.store(p_next, b_next, mask=m_h)
    tl.debug_barrier()  # every lane's part of the state is stored before the flag
    tl.atomic_xchg(flags + 1 + i_c * BH + i_bh, 1, sem="release")


@triton.jit
def _wait_for(p_flag):
    """Spin until the int32 flag at p_flag is 1 (acquire: what was stored before it was
    raised is visible after)."""
    ready = tl.atomic_add(p_flag, 0, sem="acquire")
    while ready != 1:
        ready = tl.atomic_add(p_flag, 0, sem="acquire")


@triton.jit
def _raise(p_flag):
    tl.debug_barrier()  # every lane's part of what the flag announces is stored before it
    tl.atomic_xchg(p_flag, 1, sem="release")


@triton.jit
def _chain_fwd_kernel(v, b, c, g, A, h0, hs, ht, o, hb, dh, ls, flags, marks, T, BH,
                      H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BC: tl.constexpr,
                      BS: tl.constexpr, BD: tl.constexpr, BT: tl.constexpr,
                      LOG2_BT: tl.constexpr, PIECE: tl.constexpr, REACH: tl.constexpr,
                      USE_H0: tl.constexpr, STORE_HT: tl.constexpr, STORE_HB: tl.constexpr,
                      PAIRS: tl.constexpr, PRECISION: tl.constexpr):
    """One chunk k of one (b, h), by ticket: its start state H_k from H_{k-REACH} and the
    REACH chunks between, then its outputs. flags[0] counts the tickets; with NF = B·H·NC,
    flags[1 + k·BH + bh] is raised once hs[bh, k] = H_k is stored, flags[1 + NF + k·BH +
    bh] once dh[bh, k] = ΔH_k and ls[bh, k] = L_end are. With PAIRS = "product" the
    outputs of the chunks whose blocks all fit the one product; the others are marked in
    marks (B·H·NC int32) for a second launch, the output kernel's with PAIRS = "rest"
    (``chunk_blocks._claims``); their states are formed and stored all the same."""
    ticket = tl.atomic_add(flags, 1)  # the order this program started in
    i_c, i_bh = ticket // BH, ticket % BH
    i_b, i_h = i_bh // H, i_bh % H
    NC = tl.cdiv(T, BC)
    NF = BH * NC
    o_s, o_d = tl.arange(0, BS), tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    m_h = m_s[:, None] & m_d[None, :]
    o_sd = o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    b_A2 = _rates(A, i_h, o_s, m_s, S)  # [BS] the rates in base 2
    row0 = i_b.to(tl.int64) * T * H + i_h
    NT = tl.cdiv(tl.minimum(BC, T - i_c * BC), BT)  # blocks in this chunk
    p_k = i_bh.to(tl.int64) * NC  # (bh, chunk 0) in hs, dh and ls
    # 1. what the chunk adds on its own, ΔH = Σ_s (b_s ⊙ exp((L_end - L_s) A)) ⊗ v_s, and its
    #    whole gate sum L_end: PIECE steps at a time, each piece one product; both published
    #    for the REACH chunks after this one
    b_dh = tl.zeros([BS, BD], dtype=tl.float32)
    b_Lend = 0.0
    o_p = tl.arange(0, PIECE)
    for i_p in range(0, tl.cdiv(tl.minimum(BC, T - i_c * BC), PIECE)):
        o_t = i_c * BC + i_p * PIECE + o_p
        b_dp, b_Lp = _chunk_delta(b, v, g, b_A2, row0, o_t, o_t < T, o_s, m_s, o_d, m_d, S, D,
                                  H, PRECISION)
        b_dh = b_dh * tl.exp2(b_Lp * b_A2)[:, None] + b_dp  # the earlier pieces decayed on
        b_Lend += b_Lp
    if i_c + 1 < NC:
        tl.store(dh + (p_k + i_c) * S * D + o_sd, b_dh, mask=m_h)
        tl.store(ls + p_k + i_c, b_Lend)
        _raise(flags + 1 + NF + i_c * BH + i_bh)
    # 2. the chunks between the base and this one, on their own: P = what they add, decayed
    #    to this chunk's start, and Λ, their gate sum (none for chunk 0)
    lo = tl.maximum(i_c - REACH, 0)  # the base: H_lo (the initial state for lo = 0)
    b_p = tl.zeros([BS, BD], dtype=tl.float32)
    b_lam = 0.0
    for j in range(lo, i_c):
        _wait_for(flags + 1 + NF + j * BH + i_bh)
        b_lj = tl.load(ls + p_k + j, cache_modifier=".cg")
        b_dj = tl.load(dh + (p_k + j) * S * D + o_sd, mask=m_h, other=0.0, cache_modifier=".cg")
        first = j == lo  # (a select, not 0 · P: the first term stays exactly itself)
        b_p = tl.where(first, b_dj, b_p * tl.exp2(b_lj * b_A2)[:, None] + b_dj)
        b_lam = tl.where(first, b_lj, b_lam + b_lj)
    # 3. the chunk's start state, H_k = exp(Λ A) ⊙ H_lo + P: the one step on the chain
    if lo == 0:
        b_h = tl.zeros([BS, BD], dtype=tl.float32)
        if USE_H0:
            b_h += tl.load(h0 + i_bh.to(tl.int64) * S * D + o_sd, mask=m_h, other=0.0)
    else:
        _wait_for(flags + 1 + lo * BH + i_bh)
        b_h = tl.load(hs + (p_k + lo) * S * D + o_sd, mask=m_h, other=0.0,
                      cache_modifier=".cg")
    if i_c > 0:
        b_h = b_h * tl.exp2(b_lam * b_A2)[:, None] + b_p
    tl.store(hs + (p_k + i_c) * S * D + o_sd, b_h, mask=m_h)
    if i_c + REACH < NC:
        _raise(flags + 1 + i_c * BH + i_bh)
    if STORE_HT:
        if i_c + 1 == NC:
            tl.store(ht + i_bh.to(tl.int64) * S * D + o_sd,
                     b_h * tl.exp2(b_Lend * b_A2)[:, None] + b_dh, mask=m_h)
    # 4. the chunk's outputs, block by block from H_k (with "product": if they fit)
    if PAIRS == "product":
        if _claims(marks + i_bh * NC + i_c, g, row0, i_c, T, _spread(b_A2), H, BC, BT,
                   PAIRS) == 0:
            return
    for i_t in range(0, NT):
        b_h = _output_block(v, b, c, g, o, hb, b_h, b_A2, row0, i_bh, i_c, i_t, T, H, S, D,
                            BC, BS, BD, BT, LOG2_BT, STORE_HB, True, PAIRS, PRECISION)
