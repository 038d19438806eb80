"""The chunkwise-parallel Triton kernel for the gla recurrence, forward and backward.

    H_t = exp(g_t * A) ⊙ H_{t-1} + b_t ⊗ v_t ,      o_t = c_t^T H_t

``hymo_mini.ops.gla.chunk`` derives the chunked form in einops; this module runs it on the
GPU's tensor cores. Two lengths are in play:

* **Chunks of BC = 128 steps** (``CONFIGS["chunk"]``) are where the state is written to
  memory: H_k, the state chunk k starts with (S·D fp32 per chunk). What each chunk adds on
  its own, ΔH_k = Σ_s (b_s ⊙ exp((L_end - L_s) A)) ⊗ v_s, is chained from chunk to chunk,
  H_{k+1} = exp(L_end A) ⊙ H_k + ΔH_k: by default inside the one launch that also computes
  the outputs, each program forming its chunk's start state from one an earlier
  program stored (``hymo_mini.ops.gla.chunk_chain``), or by a parallel kernel for every
  ΔH_k and a light sequential scan per (batch, head) (``CONFIGS["forward"] = "scan"``,
  ``hymo_mini.ops.gla.chunk_states``).
* **Blocks of BT = 16 steps** are where the decay-weighted attention is computed. A
  program per (chunk, batch, head) loads H_k and walks its blocks, carrying the state on
  chip: o = (c ⊙ exp(l A)) H + W v, H ← exp(l_end A) ⊙ H + (b ⊙ exp((l_end - l) A))^T v,
  with l the gate summed from the block start.

The weights W_ts = Σ_n c_tn b_sn exp((l_t - l_s) A_n), s ≤ t, are where the structure of
the decay matters. Factored as (c_t exp(l_t A)) · (b_s exp(-l_s A)) they are one tl.dot,
but exp(-l_s A) overflows fp32 once l_s·|A_n| passes ~88, which at this model's decay
rates (head h forgets at rate h + 1; the benchmark's g averages 0.5) happens within a few
steps. Building every exp((l_t - l_s) A_n) directly, a [16, 16, S] tensor, is safe but
costs 16·S exponentials per step and no tensor cores. This kernel splits the pairs s < t
into levels by the highest bit in which their in-block indices differ (k = 0 .. 3): at
level k, s lies in the lower and t in the upper half of one 2^(k+1)-step sub-block, and
the decay splits at r, the first step of that upper half:

    exp((l_t - l_s) A) = exp((l_t - l_r) A) · exp((l_r - l_s) A),   both factors in [0, 1].

Each row is a t or an s on a level, never both, so one [16, S] tensor of factors per
level serves both sides; a level is one masked tl.dot. In total 4·S exponentials per step
(a quarter), four small tensor-core products instead of a [16, 16, S] reduction, and still
nothing overflows: a factor that underflows to zero belongs to a pair whose true decay is
below 1e-38 as well. The diagonal s = t is Σ_n c_tn b_tn. (Blocks of 32 steps, five
levels, also work; see ``BLOCKS``.)

The levels are the price of strong decay only, and only of decay that differs from key
to key. Split each rate into the head's slowest, a = max_n A_n, and the excess over it,
δ_n = A_n - a ≤ 0. The part every key shares comes out of the sum over n:

    W_ts = exp((l_t - l_s) a) · Σ_n (c_tn exp(l_t δ_n)) (b_sn exp(-l_s δ_n)),

a [16, 16] tile of decays in [0, 1] (one exponential per pair, not per pair and key) times
one tl.dot. Its factors stay far from fp32's limits when every l_t δ_n of the block, in
base 2, lies within ±64 (``chunk_blocks.SPAN``): then W is that one masked product, the
reads of the start state use c ⊙ exp(l δ) times the column exp(l a), and the write carried
to the block's end is b ⊙ exp(-l δ) times exp(l_end δ) and the column exp((l_end - l) a).
A head whose keys share one rate (δ = 0, as the GDN block initialises A) fits however
strong its decay; a head whose rates spread widely takes the levels.
``CONFIGS["pairs"] = "auto"`` takes that path for every chunk whose blocks all fit, the
levels for the others; "levels" always takes the levels. The choice is not a branch
inside the kernel (compiled for an H200 by Triton 3.6, a branch between the two forms gave
wrong outputs: ``chunk_blocks``, AUTO_PAIRS) but two launches: the forward's launch forms
the pairs by the product alone, and a program whose chunk does not fit stores its start
state, marks the chunk and returns; then the output kernel, with the levels alone, returns at once
from every chunk not marked and walks the marked ones from their stored start states.

The backward, derived (per block; dH is the gradient of the loss with respect to the
state at the block's end, H the state at its start, M_ts = do_t · v_s for s ≤ t):

    dv_s = Σ_{t≥s} W_ts do_t + (b_s ⊙ exp((l_end - l_s) A)) dH
    dc_t = exp(l_t A) ⊙ (H do_t) + Σ_{s≤t} M_ts b_s ⊙ exp((l_t - l_s) A)
    db_s = exp((l_end - l_s) A) ⊙ (dH v_s) + Σ_{t≥s} M_ts c_t ⊙ exp((l_t - l_s) A)

The gradient of the log-decay g_t A (an S-vector), dlog_t, collects every decay factor
that spans step t: reads at t' ≥ t of the block-start state, writes at s < t carried to
the block end, pairs s < t ≤ t' inside the block, and the carry exp(l_end A):

    dlog_t = Σ_{t'≥t} c_t' ⊙ dc^H_t' + Σ_{s<t} (b_s ⊙ (db^H_s + db^W_s) - c_s ⊙ dc^W_s)
             + exp(l_end A) ⊙ rowsum(H ⊙ dH)

(superscript H: the part through the block's start or end state; W: the in-block part,
without its t = s terms, which cancel exactly; the W sum is the prefix sum of column
minus row sums of the pairs s < t'). Then dg_t = Σ_n A_n dlog_tn and
dA = Σ_t g_t dlog_t. The shorter dlog_t = Σ_{u≥t} (c_u ⊙ dc_u - b_u ⊙ db_u) +
rowsum(H_end ⊙ dH) is the same number, but it subtracts terms of size one whose
difference is tiny when the decay is strong, and with TF32 products that loses dA at
strong decay. Every term above carries its decay factor, so it is small exactly when the
true gradient is, and the error stays at the level of the products' rounding.

The backward needs the state at each block's start and its gradient at each block's
end. By default the forward stores the block-start states while it walks the blocks
(only when autograd will need them). With ``CONFIGS["block_states"] = "recompute"`` it
keeps only the chunk states, a quarter of the memory, and the backward first walks each
chunk's blocks again with the output kernel (without its outputs) to rebuild them, for
this call only: in a model of many layers, only one layer's block states exist at a
time. A sequential kernel, right to left, stores the gradient at each chunk's end,
dH_k ← exp(L_end A) ⊙ dH_{k+1} + (c ⊙ exp(L A))^T do; a program per chunk then walks its
blocks right to left, carrying dH on chip. The backward uses the same levels, with the
strictly causal M masked per level: the in-block part of dc is Σ_k X_k ⊙ (M_k (b ⊙ X_k))
and of db is Σ_k X_k ⊙ (M_k^T (c ⊙ X_k)), X_k the level's factors.

Memory: besides the inputs, the forward keeps the block-start states (B·H·⌈T/16⌉·S·D
fp32) for the backward, or under "recompute" the chunk states (B·H·⌈T/BC⌉·S·D); the
backward adds the chunk-end gradients (and under "recompute" the block-start states)
while it runs, and returns the gradients.

Precision: all arithmetic in fp32; how tl.dot multiplies is chosen by
``hymo_mini.ops.precision.dot_precision``: fp32-grade products for fp32 inputs ("tf32x3";
on a GPU the backward's are "bf16x6", CONFIGS["fp32_products"])
unless PyTorch's own TF32 switch is on, TF32 for bf16 and fp16 inputs, except that on a GPU
the forward of 16-bit inputs multiplies bf16 roundings of its blocks (CONFIGS["half_products"],
``chunk_states._dot``; sums in fp32); the interpreter multiplies in plain fp32. Inputs may be
fp32, bf16, fp16 (or
fp64, computed in fp32); o and every gradient come back in their input's dtype, the final
state in fp32.
"""

from __future__ import annotations

import os

import torch

from hymo_mini.choices import one_of
from hymo_mini.launching import cdiv, direct, next_power_of_2, on_inputs_device
from hymo_mini.ops.checks import (
    check_inputs,
    check_same_layout,
    check_triton_device,
    empty_sequence,
    needs_graph,
)
from hymo_mini.ops.gla.chunk_blocks import (
    _chunk_bwd_kernel,
    _output_fwd_kernel,
    check_pairs,
    launches,
)
from hymo_mini.ops.gla.chunk_chain import _chain_fwd_kernel
from hymo_mini.ops.gla.chunk_states import (
    _chunk_delta_kernel,
    _state_bwd_kernel,
    _state_scan_kernel,
)
from hymo_mini.ops.precision import HALF_PRODUCTS, kernel_precision

# launched as Triton launches them, or with hymo_mini.launching.DIRECT by their compiled
# launchers once compiled (hymo_mini.launching.Direct)
(_chunk_bwd_kernel, _output_fwd_kernel, _chain_fwd_kernel, _chunk_delta_kernel,
 _state_bwd_kernel, _state_scan_kernel) = direct(
    _chunk_bwd_kernel, _output_fwd_kernel, _chain_fwd_kernel, _chunk_delta_kernel,
    _state_bwd_kernel, _state_scan_kernel)

__all__ = ["chunk_gla_triton", "ChunkGLAFunction", "CONFIGS", "BLOCKS", "BLOCK_STATES",
           "FORWARDS", "PAIRS", "HALF_PRODUCTS", "INTERPRET"]

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"

# Launch parameters per kernel, chosen by a sweep on an H200 (benchmarks/gdn_chunk_profile.py).
# "split": the (split x split) block of the state a sequential program owns (its (n, d)
# entries evolve independently, so 4 programs share one (b, h) at S = D = 32).
# "block": 16 or 32 steps (BLOCKS). 64 is not offered: its gate gradient at strong decay
# missed the test tolerance under TF32 products on the GPU.
# "block_states": how the backward gets the state at each block's start (BLOCK_STATES):
# "store" keeps them from the forward (B·H·⌈T/BT⌉·S·D fp32 held until the backward);
# "recompute" keeps only the chunk states (a BC/BT-th of that) and the backward rebuilds
# the block states from them, one layer at a time, with the output kernel's state walk.
# "chunk" and "forward" (FORWARDS, below) were chosen together on an H200
# (book/results/gla_chain_h200_2026-12-02.json, benchmarks/GATED_DELTA_NOTES.md): one launch
# over chunks of 128 steps had the fastest forward and forward + backward at both benchmark
# shapes in bf16 and in fp32 with TF32 products, and was within a few percent of the three
# launches in fp32 with fp32-grade products. Over chunks of 64 the one launch waits on its
# chain of chunks when there are few, long sequences.
# "reach" (the one launch): a program forms its chunk's start state from the state "reach"
# chunks back, so the states hand on along "reach" interleaved chains of ⌈NC / reach⌉ links
# instead of one of NC (``chunk_chain``). "auto" takes REACH, or more where a chain would
# have more than HOPS links. On an H200 (book/results/gla_reach_*_h200_2026-12-03.json), at
# one sequence of 16,384 steps (128 chunks) reach 2 to 8 cut the forward's device time in
# bf16 and fp32, and at four of 4,096 (32 chunks each) reach 1 was the fastest; reach 4 with
# "output_fwd" num_stages=2 (the next block's loads started while one computes) was faster
# than the setting before at both shapes in both dtypes, forward + backward no slower. (HOPS
# only extends that to longer sequences: not measured.)
REACH, HOPS = 4, 32
CONFIGS = {
    "chunk": 128,  # BC: steps per stored state
    "block": 16,  # BT: steps per attention block: 16 or 32
    "block_states": "store",
    "forward": "chain",
    "reach": "auto",  # chunks from a program's base state to its own (one launch)
    "pairs": "auto",  # (the interpreter's settings below keep the levels: one launch)
    "chunk_delta": dict(num_warps=1, num_stages=1),
    "state_scan": dict(split=16, num_warps=1, num_stages=3),
    "output_fwd": dict(num_warps=1, num_stages=2),
    "state_bwd": dict(split=16, num_warps=1, num_stages=3),
    "chunk_bwd": dict(num_warps=1, num_stages=1),
    "half_products": "bf16",  # the forward of bf16 / fp16 inputs: its products' operands
    "fp32_products": dict(forward="tf32x3", backward="bf16x6"),  # fp32-grade products
}
BLOCKS = (16, 32)
BLOCK_STATES = ("store", "recompute")
# "forward", how the chunk states are chained: "scan", in three launches (every chunk's ΔH,
# the sequential scan, the outputs); "chain", in one, each program waiting for the state an
# earlier chunk's program stored ("reach" chunks back; hymo_mini.ops.gla.chunk_chain): one
# launch instead of three, each chunk state written once.
FORWARDS = ("scan", "chain")
# "pairs", how the forward forms a block's decay-weighted pairs: "levels", always by the
# levels (every factor in [0, 1]); "auto", by one product in every chunk whose blocks' decay,
# beyond the part a head's keys share, keeps every factor within 2^±64 and by the levels
# elsewhere, in two launches
# (chunk_blocks._pairs, _claims).
PAIRS = ("levels", "auto")
# "half_products", what the forward's products of bf16 and fp16 inputs multiply: "tf32",
# the fp32 blocks as TF32 (10-bit mantissa); "bf16", the blocks rounded to bf16 (8 bits, the
# tensor cores' 16-bit rate, as fla multiplies 16-bit inputs). Both accumulate in fp32; the
# backward multiplies in TF32 either way. "bf16" is the GPU's default: on an H200 it cut the
# 16-bit forward's device time by a tenth at both benchmark shapes, its forward + backward
# no slower, its output within 0.4% (relative RMS) of TF32's
# (book/results/gla_half_{b4t4096,b1t16384}_h200_2026-12-04.json); the interpreter keeps
# TF32 (its bf16 products are the roundings multiplied in fp32, see chunk_states._dot).
# HALF_PRODUCTS (hymo_mini.ops.precision) lists the choices.
# "fp32_products", how each direction multiplies where the products are fp32-grade (fp32
# inputs, TF32 not allowed): "tf32x3", three TF32 products, or "bf16x6", six products of
# bf16 pieces (FP32_PRODUCTS). On an H200 the forward was faster with "tf32x3" (0.30 against
# 0.31 ms at B4 T4096 H40) and forward + backward with a "bf16x6" backward (2.86 against
# 3.56 ms of the earlier record; book/results/fp32_products_{forward,both}_h200_2026-12-04.json,
# gla_record_bf16x6_h200_2026-12-04.json); the interpreter multiplies in plain fp32
# whatever the grade, so its settings keep "tf32x3".
INTERPRET_CONFIGS = {
    "chunk": 32,
    "block": 16,
    "block_states": "store",
    "forward": "chain",
    "reach": 2,
    "pairs": "levels",
    "chunk_delta": dict(num_warps=1, num_stages=1),
    "state_scan": dict(split=1 << 30, num_warps=1, num_stages=1),
    "output_fwd": dict(num_warps=1, num_stages=1),
    "state_bwd": dict(split=1 << 30, num_warps=1, num_stages=1),
    "chunk_bwd": dict(num_warps=1, num_stages=1),
    "half_products": "tf32",
    "fp32_products": dict(forward="tf32x3", backward="tf32x3"),
}


# --------------------------------------------------------------------------------------
# Launchers and the autograd wrapper
# --------------------------------------------------------------------------------------
def _settings() -> dict:
    """The settings in use: CONFIGS, or the interpreter's."""
    return INTERPRET_CONFIGS if INTERPRET else CONFIGS


def _config(name: str):
    return _settings()[name]


def _blocks(S: int, D: int):
    """Full-width blocks (tl.dot needs 16 at least; masks cover the rest)."""
    return max(16, next_power_of_2(S)), max(16, next_power_of_2(D))


def _split(S: int, D: int, split: int):
    BS, BD = _blocks(S, D)
    BS, BD = min(BS, max(16, split)), min(BD, max(16, split))
    return BS, BD, cdiv(S, BS), cdiv(D, BD)


def _precision(v, b, c, forward: bool = False) -> str:
    """The products' grade (``chunk_states._dot``): ``kernel_precision``'s for the inputs'
    dtype and CONFIGS["half_products"] (the backward keeps TF32: with bf16 operands its
    gate gradients were 6-18% off the loop's)."""
    dtype = torch.promote_types(v.dtype, torch.promote_types(b.dtype, c.dtype))
    return kernel_precision(dtype, _config("half_products"), forward=forward,
                            interpret=INTERPRET, fp32_products=_config("fp32_products"))


def _check_blocking(BC: int, BT: int, block_states: str, forward: str, pairs: str) -> None:
    if BT not in BLOCKS or BT > BC:
        one_of(BT, "CONFIGS['block']", tuple(x for x in BLOCKS if x <= BC),
               f" (at most the chunk, {BC})")
    one_of(block_states, "CONFIGS['block_states']", BLOCK_STATES)
    one_of(forward, "CONFIGS['forward']", FORWARDS)
    check_pairs(pairs, PAIRS)


def _block_walk(v, b, c, g, A, hs, o, hb, store_o, precision, pairs="levels", marks=None):
    """The output kernel: o (if store_o) and, if hb is not hs, each block's start state.
    ``pairs``: "levels"; "auto", the chunks that fit the one product by it, then the rest
    by the levels (two launches); "rest", only the chunks marked in ``marks`` by an earlier
    launch (the one-launch forward's). Every launch option in CONFIGS["output_fwd"] is
    passed on (num_warps, num_stages, and e.g. maxnreg, a cap on the registers per thread
    that lets more programs share an SM)."""
    B, T, H, D = v.shape
    S = b.shape[-1]
    cfg = _settings()
    BC, BT = cfg["chunk"], cfg["block"]
    BS, BD = _blocks(S, D)
    launch = dict(cfg["output_fwd"])
    unroll = bool(launch.pop("unroll", False))
    if pairs == "auto":
        marks = _new_marks(v, cdiv(T, BC))
    for one in launches(pairs):
        _output_fwd_kernel[(cdiv(T, BC), B * H)](
            v, b, c, g, A, hs, o, hb, hs if marks is None else marks, T, H=H, S=S, D=D,
            BC=BC, BS=BS, BD=BD, BT=BT, LOG2_BT=BT.bit_length() - 1, STORE_HB=hb is not hs,
            STORE_O=store_o,
            UNROLL=unroll, PAIRS=one, PRECISION=precision, **launch)


def _reach(NC: int) -> int:
    """The one-launch forward's reach for a sequence of NC chunks: CONFIGS["reach"], or for
    "auto" REACH, or more if a chain of hand-overs would have more than HOPS links."""
    reach = _config("reach")
    if reach == "auto":
        return max(REACH, cdiv(NC, HOPS))
    if not (isinstance(reach, int) and not isinstance(reach, bool) and reach >= 1):
        raise ValueError(f"CONFIGS['reach'] must be a positive integer or 'auto', got "
                         f"{reach!r}")
    return reach


def _new_marks(v, NC):
    """One int32 per (batch, head, chunk): which chunks the product launch left."""
    B, _, H, _ = v.shape
    return v.new_empty(B * H * NC, dtype=torch.int32)


def _new_block_states(v, S):
    B, T, H, D = v.shape
    return v.new_empty(B * H, cdiv(T, _config("block")), S, D, dtype=torch.float32)


def _forward(v, b, c, g, A, h0, output_final_state, for_backward, precision):
    """o, the states the backward needs (or None), the final state (or None), and whether
    those states are the chunk states (the backward then rebuilds the block states)."""
    B, T, H, D = v.shape
    S = b.shape[-1]
    cfg = _settings()
    BC = cfg["chunk"]
    NC = cdiv(T, BC)
    BT, block_states, how = cfg["block"], cfg["block_states"], cfg["forward"]
    _check_blocking(BC, BT, block_states, how, cfg["pairs"])
    hs = v.new_empty(B * H, NC, S, D, dtype=torch.float32)  # the state each chunk starts with
    ht = v.new_empty(B, H, S, D, dtype=torch.float32) if output_final_state else None
    o = torch.empty_like(v)
    # the backward needs the state at each block's start: the chunk states if a block is a
    # chunk, else stored here or rebuilt by the backward
    store = for_backward and BT < BC and block_states == "store"
    hb = _new_block_states(v, S) if store else hs
    if how == "chain":  # one launch: each program stores its chunk's start state
        BS, BD = _blocks(S, D)
        flags = torch.zeros(1 + 2 * B * H * NC, dtype=torch.int32, device=v.device)
        dh = v.new_empty(B * H, NC, S, D, dtype=torch.float32)  # each chunk's ΔH
        ls = v.new_empty(B * H, NC, dtype=torch.float32)  # and its gate sum
        launch = {k: x for k, x in cfg["output_fwd"].items() if k != "unroll"}
        auto = cfg["pairs"] == "auto"
        marks = _new_marks(v, NC) if auto else flags
        _chain_fwd_kernel[(NC * B * H,)](
            v, b, c, g, A, h0, hs, ht, o, hb, dh, ls, flags, marks, T, B * H, H=H, S=S, D=D,
            BC=BC, BS=BS, BD=BD, BT=BT, LOG2_BT=BT.bit_length() - 1, PIECE=min(BC, 64),
            REACH=_reach(NC),
            USE_H0=h0 is not None, STORE_HT=output_final_state, STORE_HB=hb is not hs,
            PAIRS="product" if auto else "levels", PRECISION=precision, **launch)
        if auto:  # the chunks that did not fit, by the levels, from the states handed on
            _block_walk(v, b, c, g, A, hs, o, hb, True, precision, "rest", marks)
    else:  # the chunk states in two launches, then the outputs
        _scan_states(v, b, g, A, h0, hs, ht, precision)
        _block_walk(v, b, c, g, A, hs, o, hb, True, precision, cfg["pairs"])
    if not for_backward:
        return o, None, ht, False
    return o, hb, ht, BT < BC and not store


def _scan_states(v, b, g, A, h0, hs, ht, precision):
    """Every chunk's start state into hs (and the final one into ht unless it is None):
    each chunk's own ΔH in parallel (into hs), then the scan over them (in place)."""
    B, T, H, D = v.shape
    S = b.shape[-1]
    BC, NC = _config("chunk"), cdiv(T, _config("chunk"))
    decay = v.new_empty(B * H, NC, S, dtype=torch.float32)
    BS, BD = _blocks(S, D)
    cfg = _config("chunk_delta")
    _chunk_delta_kernel[(NC, B * H)](
        b, v, g, A, hs, decay, T, H=H, S=S, D=D, BC=BC, BS=BS, BD=BD,
        PRECISION=precision, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    cfg = _config("state_scan")
    BS = min(next_power_of_2(S), cfg["split"])  # no tl.dot: no minimum of 16
    BD = min(next_power_of_2(D), cfg["split"])
    NS, ND = cdiv(S, BS), cdiv(D, BD)
    _state_scan_kernel[(B * H * NS * ND,)](
        hs, decay, h0, ht, T, H=H, S=S, D=D, BC=BC, BS=BS, BD=BD, NS=NS, ND=ND,
        USE_H0=h0 is not None, STORE_HT=ht is not None, NUM_STAGES=cfg["num_stages"],
        num_warps=cfg["num_warps"])


def _blocking() -> dict:
    """The settings that lay out what the forward keeps for the backward."""
    return {name: _config(name) for name in ("chunk", "block")}


def _backward(v, b, c, g, A, h0, hb, rebuild, do, dht, precision):
    B, T, H, D = v.shape
    S = b.shape[-1]
    BC, NC = _config("chunk"), cdiv(T, _config("chunk"))
    if rebuild:  # hb holds the chunk states: the block states from them (this layer only)
        hs, hb = hb, _new_block_states(v, S)
        _block_walk(v, b, c, g, A, hs, None, hb, False, precision)  # (no pairs)
    cfg = _config("state_bwd")
    BS, BD, NS, ND = _split(S, D, cfg["split"])
    dhs = v.new_empty(B * H, NC, S, D, dtype=torch.float32)
    dh0 = v.new_empty(B, H, S, D, dtype=torch.float32) if h0 is not None else None
    _state_bwd_kernel[(B * H * NS * ND,)](
        c, g, A, do, dht, dhs, dh0, T, H=H, S=S, D=D, BC=BC, BS=BS, BD=BD, NS=NS, ND=ND,
        USE_DHT=dht is not None, STORE_DH0=h0 is not None, NUM_STAGES=cfg["num_stages"],
        PRECISION=precision, num_warps=cfg["num_warps"])
    BS, BD = _blocks(S, D)
    BT = _config("block")
    dv, db, dc, dg = (torch.empty_like(t) for t in (v, b, c, g))
    dA = v.new_empty(B * H, NC, S, dtype=torch.float32)  # per-chunk partial sums
    cfg = _config("chunk_bwd")
    _chunk_bwd_kernel[(NC, B * H)](
        v, b, c, g, A, do, hb, dhs, dv, db, dc, dg, dA, T, H=H, S=S, D=D, BC=BC, BS=BS, BD=BD,
        BT=BT, LOG2_BT=BT.bit_length() - 1, PRECISION=precision,
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    dA = dA.view(B, H, NC, S).sum(dim=(0, 2))  # (H, S)
    return dv, db, dc, dg, dA, dh0


def _start_state(initial_state):
    return initial_state.contiguous().float() if initial_state is not None else None


@on_inputs_device
def _forward_alone(v, b, c, g, A, initial_state, output_final_state):
    """What ``ChunkGLAFunction`` returns when no backward can follow, without an autograd
    Function around it: its bookkeeping was about a quarter of the package's own host time
    per forward as the mixer calls it (benchmarks/host_profile.py --own)."""
    v, b, c, g, A = (t.contiguous() for t in (v, b, c, g, A))
    o, _, ht, _ = _forward(v, b, c, g, A, _start_state(initial_state), output_final_state,
                           False, _precision(v, b, c, forward=True))
    return o, ht


class ChunkGLAFunction(torch.autograd.Function):
    """(v, b, c, g, A, initial_state, output_final_state) -> (o, final_state or None)."""

    @staticmethod
    @on_inputs_device
    def forward(ctx, v, b, c, g, A, initial_state, output_final_state, grad_mode=True):
        v, b, c, g, A = (t.contiguous() for t in (v, b, c, g, A))
        h0 = _start_state(initial_state)
        # the backward's products' grade, chosen now: it multiplies as chosen here even if
        # PyTorch's TF32 switch changes in between
        ctx.precision = _precision(v, b, c)
        # grad_mode: whether autograd was recording where the caller applied this (inside
        # forward it never is); a backward can only follow if it was and an input needs it
        o, hb, ht, rebuild = _forward(v, b, c, g, A, h0, output_final_state,
                                      bool(grad_mode) and any(ctx.needs_input_grad),
                                      _precision(v, b, c, forward=True))
        ctx.save_for_backward(v, b, c, g, A, h0, hb)
        ctx.blocking = _blocking()
        ctx.rebuild = rebuild
        ctx.h0_dtype = initial_state.dtype if initial_state is not None else None
        return o, ht

    @staticmethod
    @on_inputs_device
    def backward(ctx, do, dht):
        v, b, c, g, A, h0, hb = ctx.saved_tensors
        if hb is None:
            raise RuntimeError("ChunkGLAFunction: the forward ran with grad_mode=False and kept "
                               "nothing for a backward; apply it with grad_mode=True (the default)")
        check_same_layout("ChunkGLAFunction", ctx.blocking, _blocking())
        do = torch.zeros_like(v) if do is None else do.contiguous()
        dht = dht.contiguous().float() if dht is not None else None
        dv, db, dc, dg, dA, dh0 = _backward(v, b, c, g, A, h0, hb, ctx.rebuild, do, dht,
                                               ctx.precision)
        if dh0 is not None:
            dh0 = dh0.to(ctx.h0_dtype)
        return dv, db, dc, dg, dA.to(A.dtype), dh0, None, None


def chunk_gla_triton(v, b, c, g, A, initial_state=None, output_final_state=False, *,
                     check_values: bool = True):
    """The gla recurrence by the chunked Triton kernels (backend "chunk_triton").

    v (B, T, H, D); b, c (B, T, H, S); g (B, T, H); A (H, S); initial_state (B, H, S, D) or
    None. Returns ``(o, final_state)``: o (B, T, H, D) in v's dtype, final_state (B, H, S,
    D) fp32 if ``output_final_state`` else None. Differentiable in v, b, c, g, A and
    initial_state.
    """
    check_inputs(v, b, c, g, A, initial_state, check_values=check_values)
    check_triton_device(v, INTERPRET, "the chunked Triton kernel", __name__,
                        "gated_linear_attention(..., backend='chunk_torch')")
    if v.shape[1] == 0:
        return empty_sequence(v, b, initial_state, output_final_state)
    if not needs_graph(v, b, c, g, A, initial_state):
        return _forward_alone(v, b, c, g, A, initial_state, bool(output_final_state))
    return ChunkGLAFunction.apply(v, b, c, g, A, initial_state, bool(output_final_state),
                                  torch.is_grad_enabled())
