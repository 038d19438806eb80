"""The chunked Triton kernels for the gated delta rule, forward and backward.

    H'_t = exp(g_t A) ⊙ H_{t-1},   H_t = H'_t + β_t b_t ⊗ (v_t - H'_tᵀ b_t),   o_t = H_tᵀ c_t

``hymo_mini.ops.gated_delta.chunk`` derives the chunked form; per chunk of BT steps, with
L the gate summed from the chunk start, Γ = exp(L A), E_ts = exp((L_t - L_s) A), H_0 the
state the chunk starts with and H_C the one it ends with:

    M_ts = β_t Mk_ts,  Mk_ts = Σ_n b_tn b_sn E_tsn (s < t)      P_ts = Σ_n c_tn b_sn E_tsn (s ≤ t)
    K̃ = b ⊙ Γ,  Q̃ = c ⊙ Γ,  K̂ = b ⊙ exp((L_C - L) A)         (BT, S)
    Uv = (I + M)⁻¹ diag(β) V,  W = (I + M)⁻¹ diag(β) K̃,  U = Uv - W H_0
    O = Q̃ H_0 + P U,   H_C = Γ_C ⊙ H_0 + K̂ᵀ U

Forward, three launches: every chunk's Uv, W at once (``_wy_fwd_kernel``: the pairs of
Mk by the gla kernel's ``_pairs``: its levels, or with ``CONFIGS["pairs"] = "auto"`` one
product where the chunk's decay beyond the part its keys share stays within 2^±64, so no
decay factor leaves fp32's range
(a launch with the product alone, then one with the levels alone for the chunks it left:
``chunk_kernels``); (I + M)⁻¹ in fp32 by
merging diagonal blocks level by level, ``chunk_kernels._unit_lower_inverse_levels``, or
row by row with ``CONFIGS["inverse"] = "rows"``; Mk and (I + M)⁻¹ are kept for the
backward); a sequential pass per (batch, head, value columns) that stores each H_0 and U
(``chunk_states._state_fwd_kernel``; for few long sequences cut into groups of chunks that
run at once, ``chunk_groups``); every chunk's O at once (``_output_kernel``). Or in one
launch (``CONFIGS["forward"] = "chain"``, the default for bf16 and fp16 inputs): a program
per stretch of chunks solves its chunks' WY forms, composes the stretch's map of the state,
waits for the state the program before hands on, hands on its own end state, then walks its
chunks for U and O (``chunk_chain``). Both keep the same tensors for the backward, and
only when a backward can follow (autograd recording and an input needing a gradient):
otherwise Mk and (I + M)⁻¹ are not stored, and the one launch stores only the states it
hands on and leaves Uv where U would go.

**The backward, derived.** Given dO (BT, D) and dH_C (S, D), the gradient at the chunk's
end, and writing R = V - K̃ H_0 (so that (I + M) U = diag(β) R):

    dU   = Pᵀ dO + K̂ dH_C                                                     (BT, D)
    dH_0 = Q̃ᵀ dO + Γ_C ⊙ dH_C - Wᵀ dU        the gradient at the previous chunk's end
    dX   = (I + M)⁻ᵀ dU                       through the solve                 (BT, D)
    dM   = -dX Uᵀ (s < t only),   dMk = diag(β) dM                            (BT, BT)
    dv   = diag(β) dX,   dK̃ = -diag(β) dX H_0ᵀ,   dβ_t = dX_t · R_t + Σ_s dM_ts Mk_ts
    dQ̃   = dO H_0ᵀ,  dK̂ = U dH_Cᵀ,  dP = dO Uᵀ (s ≤ t)                      (BT, S), (BT, BT)
    dc_t = Γ_t ⊙ dQ̃_t + Σ_{s≤t} dP_ts b_s ⊙ E_ts
    db_s = Γ_s ⊙ dK̃_s + e_s ⊙ dK̂_s + Σ_{t≥s} dP_ts c_t ⊙ E_ts
           + Σ_{t>s} dMk_ts b_t ⊙ E_ts + Σ_{u<s} dMk_su b_u ⊙ E_su

(e_s = exp((L_C - L_s) A)). The first two lines are the chunk-to-chunk pass, right to
left (``chunk_states._state_bwd_kernel``, after ``_du_local_kernel`` has put Pᵀ dO in
place); the rest is one program per chunk (``_chunk_bwd_kernel``), which reads Mk,
(I + M)⁻¹, H_0, dH_C, U and dU from memory.

The gate: dlog_i (S,), the gradient of the log-decay g_i A, collects every decay factor
that spans step i: Γ_t for t ≥ i, e_s for s < i, E_ts for s < i ≤ t and Γ_C:

    dlog_i = Σ_{t≥i} (Q̃_t ⊙ dQ̃_t + K̃_t ⊙ dK̃_t) + Σ_{s<i} K̂_s ⊙ dK̂_s
             + Σ_{s<i≤t} z_ts + Γ_C ⊙ rowsum(H_0 ⊙ dH_C)

with z_ts = x_t ⊙ y_s ⊙ E_ts w_ts the pair terms (for P: x = c, y = b, w = dP; for Mk:
x = y = b, w = dMk). On the level of a pair (``_level``) E_ts = X_t X_s, split at r, with
X_t spanning steps (r, t] and X_s steps (s, r]; so the row sums of a level (the pair
parts of x_t ⊙ dx_t and of y_s ⊙ dy_s) go to the steps their own factor spans, one 0/1
matrix product per level (``_pair_grads``). Then dg_i = Σ_n A_n dlog_in and
dA = Σ_i g_i dlog_i. No term is ever subtracted from another. (The shorter prefix form
of the pair part, Σ_{s<i} κ_s - Σ_{t<i} ρ_t with κ, ρ the column and row sums, which the
gla chunk kernel uses, cancels the pairs inside (0, i); at chunks of 64 steps and strong
decay it was visibly less accurate in dA, under the interpreter in fp32.)

Memory: the forward keeps W (B·T·H·S fp32), U (B·T·H·D fp32, written over Uv), the
chunk-start states (B·H·⌈T/BT⌉·S·D fp32) and Mk and (I + M)⁻¹ (B·H·⌈T/BT⌉·BT·BT fp32
each); the backward adds dU and the chunk-end gradients. Padding steps of a ragged tail
are masked loads (g = β = 0, b = c = 0).

Precision (``hymo_mini.ops.precision.kernel_precision``): fp32 inputs get fp32-grade
products ("tf32x3" in the forward, its walk over the chunks in IEEE fp32; on a GPU "bf16x6"
in the backward; CONFIGS["fp32_products"], CONFIGS["walk_products"]), plain TF32 only when
PyTorch's own fp32 matmuls may use it; bf16 and fp16 inputs use TF32, except that on a GPU
their forward multiplies bf16 roundings of its blocks (CONFIGS["half_products"],
``hymo_mini.ops.gla.chunk_states._dot``). Everything accumulates in fp32; fp64 inputs are
computed in fp32. o and the gradients come back in their inputs' dtypes, the final state in
fp32 (fp64 for fp64 inputs).
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
from hymo_mini.ops.gated_delta.chunk_chain import _chain_fwd_kernel
from hymo_mini.ops.gated_delta.chunk_groups import (
    _group_bwd_kernel,
    _group_fwd_kernel,
    _group_scan_bwd_kernel,
    _group_scan_fwd_kernel,
)
from hymo_mini.ops.gated_delta.chunk_kernels import (
    _chunk_bwd_kernel,
    _du_local_kernel,
    _output_kernel,
    _wy_fwd_kernel,
)
from hymo_mini.ops.gated_delta.chunk_states import _state_bwd_kernel, _state_fwd_kernel
from hymo_mini.ops.gla.chunk_blocks import check_pairs, launches
from hymo_mini.ops.precision import FP32_GRADE, kernel_precision

# launched as Triton launches them, or with hymo_mini.launching.DIRECT by their compiled
# launchers once compiled (hymo_mini.launching.Direct)
(_chain_fwd_kernel, _group_bwd_kernel, _group_fwd_kernel, _group_scan_bwd_kernel,
 _group_scan_fwd_kernel, _chunk_bwd_kernel, _du_local_kernel, _output_kernel, _wy_fwd_kernel,
 _state_bwd_kernel, _state_fwd_kernel) = direct(
    _chain_fwd_kernel, _group_bwd_kernel, _group_fwd_kernel, _group_scan_bwd_kernel,
    _group_scan_fwd_kernel, _chunk_bwd_kernel, _du_local_kernel, _output_kernel,
    _wy_fwd_kernel, _state_bwd_kernel, _state_fwd_kernel)

__all__ = ["chunk_gated_delta_triton", "ChunkGatedDeltaFunction", "CONFIGS", "CONFIGS_16BIT",
           "CHUNKS", "INVERSES", "FORWARDS", "PAIRS", "INTERPRET"]

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
CHUNKS = (16, 32, 64)  # BT: a power of two, and at least 16 for tl.dot
INVERSES = ("levels", "rows")  # how (I + M)⁻¹ is formed: merged blocks, or row by row
# how the forward chains the chunk states: "passes", in three launches (every chunk's WY
# form, the walk or the grouped passes, every chunk's outputs); "chain", in one, a program
# per stretch of CONFIGS["chain"]["chunks"] chunks handing its end state to the next
# (hymo_mini.ops.gated_delta.chunk_chain). The backward is the same for both.
FORWARDS = ("passes", "chain")
# how a chunk's decay-weighted pairs (Mk and P) are formed: "levels", always by the gla
# kernel's levels; "auto", by one product where the chunk's decay, beyond the part its keys
# share, keeps every factor within 2^±64 and by the levels elsewhere, in two launches of each
# kernel that forms pairs
# (hymo_mini.ops.gla.chunk_blocks._pairs, _claims). In one launch, a sequence's stretches
# take the product up to the first that does not fit, the levels from there on.
PAIRS = ("levels", "auto")
# how the forward's walk over the chunks (_state_fwd_kernel) multiplies where the forward's
# products are fp32-grade: "ieee", fp32 products without tensor cores (as exact), or "same",
# the forward's own ("tf32x3" or "bf16x6"). Only the walk: the group kernels and the
# in-chunk kernels were slower in IEEE.
WALK_PRODUCTS = ("ieee", "same")
# what the forward's group kernel multiplies (CONFIGS["group"]["products"], optional): the
# forward's products ("forward", the default) or the walk's ("walk")
GROUP_PRODUCTS = ("forward", "walk")
# what the one-launch forward without a backward to follow keeps between composing its
# stretch's map and walking it (CONFIGS["redo"] -> the kernel's REDO): False, each chunk's W
# and Uv (4 KiB a chunk in fp32); True, nothing (the walk solves each chunk again);
# "inverse", each chunk's (I + M)⁻¹ (1 KiB), from which the walk forms W and Uv again
REDOS = {False: "none", True: "all", "inverse": "inverse"}
# Launch settings per kernel. "split": value columns per sequential program of the
# chunk-to-chunk passes; "inverse": one of INVERSES. Chosen on an H200 by
# benchmarks/gated_delta_profile.py (book/results/gated_delta_sweep_h200_2026-12-02.json):
# at 32 steps a chunk the backward kernel spilled registers at every warp count tried.
CONFIGS = {"chunk": 16, "inverse": "levels", "forward": "passes", "pairs": "auto", "redo": True,
           "chain": dict(chunks=4, num_warps=1, num_stages=1),
           # wy_fwd and output capped at 128 registers: on an H100 the fp32 forward took
           # 3.2-3.5% less a call at B4 T4096 H40 and 2.0-2.9% less at B1 T16384, alternated
           # twice; the walk capped too took 53% longer in groups at B1, so it stays uncapped
           # (book/results/delta_cap_*_h100_2026-12-05.json, delta_cap2_*)
           "wy_fwd": dict(num_warps=1, num_stages=1, maxnreg=128),
           "output": dict(num_warps=1, num_stages=1, maxnreg=128),
           "du_local": dict(num_warps=1, num_stages=1),
           "chunk_bwd": dict(num_warps=4, num_stages=1),
           # state_fwd: one walk holding a head's whole state (32 columns) at 2 warps; on
           # an H100 the fp32 forward at B4 T4096 H40 took 0.791-0.801 against 0.839-0.841
           # ms with 16 columns (book/results/delta_state_split_b4t4096_h100_2026-12-05.json,
           # delta_group_settings_b4t4096_h100_2026-12-05.json)
           "state_fwd": dict(split=32, num_warps=2, num_stages=3),
           "state_bwd": dict(split=16, num_warps=2, num_stages=3),
           # the chunk-to-chunk passes over groups of "chunks" chunks (chunk_groups) when a
           # walk would have fewer than "below" programs (one long sequence: B·H for D = 32
           # in the forward, B·H·2 in the backward), too few to fill an H200's 132 SMs; at
           # 160 programs (B = 2, T = 8,192, 16 columns a program) the walk was as fast in
           # bf16 and faster in fp32 (book/results/gated_delta_group_sweep_h200_2026-12-02.json;
           # with 32 columns that forward has 80 programs and takes the groups, not timed). "split",
           # "num_warps", "num_stages": the columns of [M | B] per program of the kernels
           # that sum up each group (chunk_groups) and their launch; "products": what the
           # forward's one multiplies (GROUP_PRODUCTS); "outputs": whether the walks over
           # groups form the outputs themselves where no backward follows (default True);
           # "state_fwd" / "state_bwd": the passes' settings over groups (the scan and the
           # walks); where a key is absent, the state pass's own. On an H100 at B1 T16384
           # H40, fp32, the whole [M | B] in one program at 2 warps, groups of 32 chunks and
           # the walks over them at 4 warps took the forward from 1.094-1.103 to 0.915 ms, the group
           # kernel from 343-349 to 177 µs, forward + backward from 4.38-4.43 to 3.92 ms
           # (bf16's 2.80 to 2.40)
           # (book/results/delta_group_split_b1t16384_h100_2026-12-05.json,
           # delta_group_settings_b1t16384_h100_2026-12-05.json). The walks forming the
           # outputs took that fp32 forward from 0.923-0.925 to 0.827 ms on an H100, the
           # walks' 219 µs and the output kernel's 250 becoming 377
           # (book/results/delta_walk_outputs_b1t16384_h100_2026-12-05.json); on an H200
           # the walks forming the outputs at 2 warps took it from 0.819-0.823 to 0.742 ms,
           # the walks from 377-379 to 294 µs
           # (book/results/delta_walk_settings_b1t16384_h200_2026-12-05.json; 2 warps not
           # timed on an H100 with the outputs)
           "group": dict(chunks=32, below=128, split=64, num_warps=2, outputs=True,
                         state_fwd=dict(split=32, num_warps=2, num_stages=3)),
           # what the forward of bf16 / fp16 inputs multiplies (hymo_mini.ops.precision's
           # HALF_PRODUCTS): "bf16", its blocks rounded to bf16, or "tf32"; the backward
           # multiplies in TF32 either way. On an H200 "bf16" took 3.5% (B4 T4096) and 4.5%
           # (B1 T16384) off the bf16 forward's device time, its forward + backward no
           # slower, its output 0.0048 (relative RMS) from TF32's
           # (book/results/delta_half_{b4t4096,b1t16384}_h200_2026-12-04.json)
           "half_products": "bf16",
           # how each direction multiplies where the products are fp32-grade (fp32 inputs,
           # TF32 not allowed): "tf32x3", three TF32 products, or "bf16x6", six products of
           # bf16 pieces (hymo_mini.ops.precision's FP32_PRODUCTS). On an H200 a "bf16x6"
           # backward took 3-4% off forward + backward, its gradients 2.2e-7 (relative RMS)
           # from "tf32x3"'s; the forward stays "tf32x3" (bf16x6 2.7% slower there)
           # (book/results/delta_fp32_products_{b4t4096,b1t16384}_h200_2026-12-04.json,
           # fp32_products_forward_h200_2026-12-04.json)
           "fp32_products": dict(forward="tf32x3", backward="bf16x6"),
           # the walk's fp32-grade products (WALK_PRODUCTS): on an H200 the walk took 370
           # against 408 µs in IEEE at B4 T4096 H40, 257 against 282 at B1 T16384, each the
           # walk's own device time in one run, the rest of the forward in "tf32x3"
           # (book/results/fp32_products_forward_h200_2026-12-04.json); the IEEE products
           # of the wy_fwd, output and group kernels were slower there
           "walk_products": "ieee"}
# Settings that replace CONFIGS' for bf16 and fp16 inputs (one TF32 product per dot, 16-bit
# loads), from a bf16 sweep on the H200
# (book/results/gated_delta_profile_bf16_h200_2026-12-02.json); fp32's three-pass products
# keep CONFIGS. Chunk and inverse are shared. The one-launch forward over stretches of 8
# chunks was the fastest bf16 forward timed at both benchmark shapes, and in fp32 the
# slowest (three products per dot; compiled for one warp, the kernel spills registers):
# book/results/delta_forward_chain_{b4t4096,b1t16384}_h200_2026-12-02.json.
# "redo" (the one-launch forward without a backward to follow): form each chunk's W and Uv
# again in the walk instead of storing them in memory between (and allocate neither). On an
# H200 on 2026-12-03 it cut the bf16 forward at four sequences of 4,096 steps and slowed it
# at one of 16,384 (book/results/delta_redo_*_h200_2026-12-03.json); on the tree of
# 2026-12-05, on an H100 (no H200 was lent), it cut the bf16 forward per call by 30% at
# B4 T4096 H40 and by 19% at B1 T16384, alternated, forward + backward untouched (it
# applies only without a backward), so it is on
# (book/results/delta_redo_{b4t4096,b1t16384}_h100_2026-12-05.json). "inverse" (keep each
# chunk's (I + M)⁻¹ and form W and Uv from it) was slower there: 1.13x the time a call at B4,
# 1.05x at B1 (book/results/delta_stretch_{b4t4096,b1t16384}_h100_2026-12-05.json, where
# stretches of 16 or 4 chunks were no faster than 8 either).
CONFIGS_16BIT = {"forward": "chain", "chain": dict(chunks=8, num_warps=1, num_stages=1),
                 "chunk_bwd": dict(num_warps=1, num_stages=1),
                 "state_fwd": dict(split=16, num_warps=4, num_stages=3),
                 "state_bwd": dict(split=16, num_warps=4, num_stages=3)}
# the interpreter runs programs one after another: short chunks, fewest programs
INTERPRET_CONFIGS = {"chunk": 16, "inverse": "levels", "forward": "passes", "pairs": "levels",
                     "redo": False, "half_products": "tf32",
                     "fp32_products": dict(forward="tf32x3", backward="tf32x3"),
                     "walk_products": "ieee",  # plain fp32 there, as every product
                     "chain": dict(chunks=2, num_warps=1, num_stages=1),
                     **{k: dict(num_warps=1, num_stages=1)
                        for k in ("wy_fwd", "output", "du_local", "chunk_bwd")},
                     **{k: dict(split=1 << 30, num_warps=1, num_stages=1)
                        for k in ("state_fwd", "state_bwd")},
                     "group": dict(chunks=1 << 30, below=0)}


def _config(name: str, half: bool = False):
    """The setting ``name`` in use; ``half``: the inputs are bf16 or fp16."""
    if INTERPRET:
        return INTERPRET_CONFIGS[name]
    if half and name in CONFIGS_16BIT:
        return CONFIGS_16BIT[name]
    return CONFIGS[name]


_LAUNCH_OPTIONS = ("num_warps", "num_stages", "maxnreg")


def _launch(name: str, half: bool = False) -> dict:
    """num_warps, num_stages and, if set, maxnreg (a cap on the registers per thread that
    lets more programs share an SM) of one kernel."""
    cfg = _config(name, half)
    return {k: cfg[k] for k in _LAUNCH_OPTIONS if k in cfg}


def _half(v) -> bool:
    return v.dtype in (torch.bfloat16, torch.float16)


def _sizes(v, b, states: str):
    """Shapes and launch sizes shared by the forward and the backward; ``states`` names
    the sequential pass whose split sets the value columns per program."""
    B, T, H, D = v.shape
    S = b.shape[-1]
    BT, inverse = _config("chunk"), _config("inverse")
    one_of(BT, "CONFIGS['chunk']", CHUNKS)
    one_of(inverse, "CONFIGS['inverse']", INVERSES)
    check_pairs(_config("pairs"), PAIRS)
    BS, BD = max(16, next_power_of_2(S)), max(16, next_power_of_2(D))
    BDs = min(BD, max(16, _config(states, _half(v))["split"]))  # columns per sequential program
    sizes = dict(H=H, S=S, D=D, BS=BS, BT=BT)
    return B, T, H, S, D, cdiv(T, BT), BD, BDs, cdiv(D, BDs), sizes


def _new_marks(v, NC: int, pairs: str):
    """Which chunks the product launch left, one int32 per (batch, head, chunk), for "auto";
    for the other settings a placeholder the kernels never read."""
    B, _, H, _ = v.shape
    return v.new_empty(B * H * NC if pairs == "auto" else 1, dtype=torch.int32)


def _groups(programs: int, NC: int) -> tuple[int, int]:
    """(groups, chunks per group) of the chunk-to-chunk passes: (1, NC), the one walk,
    unless a walk would launch fewer programs than CONFIGS["group"]["below"]."""
    cfg = _config("group")
    G = int(cfg["chunks"])
    if G < 1:
        raise ValueError(f"CONFIGS['group']['chunks'] must be a positive integer, got {G}")
    if programs >= cfg["below"] or NC <= G:
        return 1, NC
    return cdiv(NC, G), G


def _width(split, name: str, most: int) -> int:
    """Columns per program for the setting ``name``'s "split": a power of two from 16 (what
    tl.dot needs) up to ``most``."""
    if not (isinstance(split, int) and not isinstance(split, bool) and split >= 1):
        raise ValueError(f"{name} must be a positive integer, got {split!r}")
    return min(most, max(16, next_power_of_2(split)))


def _summaries(S: int, D: int, states: str, half: bool) -> tuple[int, int, dict]:
    """The group kernels' columns per program (BD), programs per group (NA, covering the
    S + D columns of [M | B]) and launch settings: CONFIGS["group"]'s "split", "num_warps"
    and "num_stages" where it has them, else those of the state pass ``states``."""
    cfg = _config("group")
    BD = _width(cfg.get("split", _config(states, half)["split"]), "CONFIGS['group']['split']",
                max(16, next_power_of_2(S + D)))
    launch = {**_launch(states, half), **{k: cfg[k] for k in _LAUNCH_OPTIONS if k in cfg}}
    return BD, cdiv(S + D, BD), launch


def _over_groups(states: str, D: int, BD: int, BDs: int, half: bool) -> tuple[int, int, dict]:
    """Columns per program, column blocks and launch settings of the state pass ``states``
    when it runs over groups: CONFIGS["group"][states] where the group settings have it
    (the scan and the walks over groups of a few long sequences may want other settings
    than one walk over every chunk), else the pass's own."""
    cfg = _config("group").get(states)
    if cfg is None:
        return BDs, cdiv(D, BDs), _launch(states, half)
    BDs = _width(cfg.get("split"), f"CONFIGS['group']['{states}']['split']", BD)
    return BDs, cdiv(D, BDs), {k: cfg[k] for k in _LAUNCH_OPTIONS if k in cfg}


def _walks_form_outputs() -> bool:
    """CONFIGS["group"]["outputs"] (default True): whether the walks over groups form the
    outputs themselves when nothing is kept for a backward (``chunk_states``' OUT)."""
    fuse = _config("group").get("outputs", True)
    if not isinstance(fuse, bool):
        raise ValueError(f"CONFIGS['group']['outputs'] must be True or False, got {fuse!r}")
    return fuse


def _summary_precision(precision: str) -> str:
    """What the forward's group kernel (each group's summary) multiplies:
    CONFIGS["group"]["products"] "forward" (the default), the forward's own products, or
    "walk", the walk's (``_walk_precision``)."""
    way = _config("group").get("products", "forward")
    one_of(way, "CONFIGS['group']['products']", GROUP_PRODUCTS)
    return _walk_precision(precision) if way == "walk" else precision


def _walk_precision(precision: str) -> str:
    """What the forward's walk multiplies: "ieee" in place of the forward's fp32-grade
    products if CONFIGS["walk_products"] says so, else the forward's own."""
    way = _config("walk_products")
    one_of(way, "CONFIGS['walk_products']", WALK_PRODUCTS)
    return "ieee" if way == "ieee" and precision in FP32_GRADE else precision


def _forward(v, b, c, g, A, beta, h0, output_final_state, precision, keep=True):
    """o, the final state (or None), and what the backward reads: the chunk-start states,
    U, W, Mk and (I + M)⁻¹. Without ``keep`` (no backward will run) Mk and (I + M)⁻¹ are
    not formed into memory, and the one-launch forward stores only the states it hands on
    and leaves Uv in place of U; what comes back beside o is then scratch (with "redo",
    placeholders where U and W would be: it forms them again where it needs them)."""
    B, T, H, S, D, NC, BD, BDs, ND, sizes = _sizes(v, b, "state_fwd")
    half = _half(v)
    in_chunk = dict(**sizes, BD=BD, LOG2_BT=sizes["BT"].bit_length() - 1, PRECISION=precision)
    forward = _config("forward", half)
    one_of(forward, "CONFIGS['forward']", FORWARDS)
    one_of(_config("redo"), "CONFIGS['redo']", tuple(REDOS))
    redo = REDOS[_config("redo")] if forward == "chain" and not keep else "none"
    BT = sizes["BT"]
    pairs = _config("pairs")
    if keep:
        mk, ti = (v.new_empty(B * H, NC, BT, BT, dtype=torch.float32) for _ in range(2))
    else:  # placeholders the kernels do not touch
        mk = ti = v.new_empty(1, dtype=torch.float32)
    if redo == "inverse":  # the one thing kept between the stretch's two steps
        ti = v.new_empty(B * H, NC, BT, BT, dtype=torch.float32)
    if redo != "none":  # nothing stores U or W: the placeholder again
        u = w = mk
    else:
        u = v.new_empty(B, T, H, D, dtype=torch.float32)  # Uv, then U in place
        w = v.new_empty(B, T, H, S, dtype=torch.float32)
    # the walks over groups form the outputs themselves (CONFIGS["group"]["outputs"]) only
    # where nothing is kept for a backward: then no chunk-start states are stored
    NG, G = _groups(B * H * ND, NC)
    fuse = forward == "passes" and not keep and NG > 1 and _walks_form_outputs()
    hs = mk if fuse else v.new_empty(B * H, NC, S, D, dtype=torch.float32)  # chunk starts
    ht = v.new_empty(B, H, S, D, dtype=torch.float32) if output_final_state else None
    if forward == "chain":  # one launch: each stretch hands its end state on
        NB = _config("chain", half)["chunks"]
        if not (isinstance(NB, int) and NB >= 1):
            raise ValueError("CONFIGS['chain']['chunks'] must be a positive integer, "
                             f"got {NB!r}")
        programs = cdiv(NC, NB) * B * H
        flags = torch.zeros(1 + programs, dtype=torch.int32, device=v.device)
        o = torch.empty_like(v)
        # "auto": the stretches taken by one product, then the rest (from the first stretch
        # of each sequence that did not fit) by the levels, each launch after the other's
        for i, one in enumerate(launches(pairs)):
            _chain_fwd_kernel[(programs,)](
                v, b, c, g, A, beta, h0, hs, ht, u, w, mk, ti, o, flags, T, B * H,
                i * programs, **sizes, BD=BD, LOG2_BT=BT.bit_length() - 1, NB=NB,
                USE_H0=h0 is not None, STORE_HT=output_final_state, PRECISION=precision,
                INVERSE=_config("inverse"), PAIRS=one, KEEP=keep, REDO=redo,
                **_launch("chain", half))
        return o, ht, hs, u, w, mk, ti
    marks = _new_marks(v, NC, pairs)
    for one in launches(pairs):
        _wy_fwd_kernel[(NC, B * H)](v, b, g, A, beta, u, w, mk, ti, marks, T, **in_chunk,
                                    INVERSE=_config("inverse"), PAIRS=one, KEEP=keep,
                                    **_launch("wy_fwd", half))
    launch = _launch("state_fwd", half)
    if NG > 1:
        BDs, ND, launch = _over_groups("state_fwd", D, BD, BDs, half)
    # the walk's settings; OUT_PRECISION and LOG2_BT matter only where it forms the outputs
    walk = dict(**sizes, BD=BDs, ND=ND, PRECISION=_walk_precision(precision),
                OUT_PRECISION=precision, LOG2_BT=in_chunk["LOG2_BT"], **launch)
    if NG > 1:  # chunk_groups: each group's transition, the groups in order, then the walks
        BDg, NA, summary = _summaries(S, D, "state_fwd", half)
        tg = v.new_empty(B * H, NG, S, S + D, dtype=torch.float32)
        _group_fwd_kernel[(B * H * NG * NA,)](b, g, A, w, u, tg, T, NG, G, **sizes, BD=BDg,
                                               NA=NA, PRECISION=_summary_precision(precision),
                                               **summary)
        hg = v.new_empty(B * H, NG, S, D, dtype=torch.float32)  # each group's start state
        _group_scan_fwd_kernel[(B * H * ND,)](tg, h0, hg, ht, NG, S=S, D=D, BS=sizes["BS"],
                                              BD=BDs, ND=ND, USE_H0=h0 is not None,
                                              STORE_HT=output_final_state, PRECISION=precision,
                                              **launch)
        if fuse:  # the walks form every chunk's outputs: no hs, no U, no output kernel
            o = torch.empty_like(v)
            for one in launches(pairs):
                _state_fwd_kernel[(B * H * NG * ND,)](b, g, A, w, u, hg, hs, u, ht, c, o, marks,
                                                      T, NG, G, USE_H0=True, STORE_HT=False,
                                                      OUT=True, PAIRS=one, **walk)
            return o, ht, hs, u, w, mk, ti
        _state_fwd_kernel[(B * H * NG * ND,)](b, g, A, w, u, hg, hs, u, ht, c, mk, marks, T,
                                              NG, G, USE_H0=True, STORE_HT=False, OUT=False,
                                              PAIRS="levels", **walk)
    else:
        _state_fwd_kernel[(B * H * ND,)](b, g, A, w, u, h0, hs, u, ht, c, mk, marks, T, 1, NC,
                                         USE_H0=h0 is not None, STORE_HT=output_final_state,
                                         OUT=False, PAIRS="levels", **walk)
    o = torch.empty_like(v)
    for one in launches(pairs):
        _output_kernel[(NC, B * H)](b, c, g, A, hs, u, o, marks, T, **in_chunk, PAIRS=one,
                                    **_launch("output", half))
    return o, ht, hs, u, w, mk, ti


def _backward(v, b, c, g, A, beta, hs, u, w, mk, ti, do, dht, with_h0, precision):
    B, T, H, S, D, NC, BD, BDs, ND, sizes = _sizes(v, b, "state_bwd")
    half = _half(v)
    in_chunk = dict(**sizes, BD=BD, LOG2_BT=sizes["BT"].bit_length() - 1, PRECISION=precision)
    du = v.new_empty(B, T, H, D, dtype=torch.float32)  # Pᵀ dO, then dU in place
    marks = _new_marks(v, NC, _config("pairs"))
    for one in launches(_config("pairs")):
        _du_local_kernel[(NC, B * H)](b, c, g, A, do, du, marks, T, **in_chunk, PAIRS=one,
                                      **_launch("du_local", half))
    dhs = v.new_empty(B * H, NC, S, D, dtype=torch.float32)  # the chunk-end gradients
    dh0 = v.new_empty(B, H, S, D, dtype=torch.float32) if with_h0 else None
    NG, G = _groups(B * H * ND, NC)
    launch = _launch("state_bwd", half)
    if NG > 1:
        BDs, ND, launch = _over_groups("state_bwd", D, BD, BDs, half)
    walk = dict(**sizes, BD=BDs, ND=ND, PRECISION=precision, **launch)
    if NG > 1:  # as in the forward, right to left
        BDg, NA, summary = _summaries(S, D, "state_bwd", half)
        tg = v.new_empty(B * H, NG, S, S + D, dtype=torch.float32)
        _group_bwd_kernel[(B * H * NG * NA,)](b, c, g, A, w, do, du, tg, T, NG, G, **sizes,
                                               BD=BDg, NA=NA, PRECISION=precision, **summary)
        dhg = v.new_empty(B * H, NG, S, D, dtype=torch.float32)  # the gradient at each end
        _group_scan_bwd_kernel[(B * H * ND,)](tg, dht, dhg, dh0, NG, S=S, D=D,
                                              BS=sizes["BS"], BD=BDs, ND=ND,
                                              USE_DHT=dht is not None, STORE_DH0=with_h0,
                                              PRECISION=precision, **launch)
        _state_bwd_kernel[(B * H * NG * ND,)](b, c, g, A, w, do, du, dhg, dhs, dh0, T, NG, G,
                                              USE_DHT=True, STORE_DH0=False, **walk)
    else:
        _state_bwd_kernel[(B * H * ND,)](b, c, g, A, w, do, du, dht, dhs, dh0, T, 1, NC,
                                         USE_DHT=dht is not None, STORE_DH0=with_h0, **walk)
    dv, db, dc, dg, dbeta = (torch.empty_like(t) for t in (v, b, c, g, beta))
    dA = v.new_empty(B * H, NC, S, dtype=torch.float32)  # per-chunk partial sums
    _chunk_bwd_kernel[(NC, B * H)](v, b, c, g, A, beta, hs, dhs, u, du, do, mk, ti, dv, db,
                                   dc, dg, dA, dbeta, T, **in_chunk,
                                   **_launch("chunk_bwd", half))
    return dv, db, dc, dg, dA.view(B, H, NC, S).sum(dim=(0, 2)), dbeta, dh0


def _precision(v, b, c, forward: bool) -> str:
    """The products' grade in one direction: fp32-grade if any of the multiplied inputs
    carries fp32 or more; the forward of 16-bit inputs as CONFIGS["half_products"] says, the
    backward in TF32."""
    dtype = torch.promote_types(torch.promote_types(v.dtype, b.dtype), c.dtype)
    return kernel_precision(dtype, _config("half_products"), forward=forward,
                            interpret=INTERPRET, fp32_products=_config("fp32_products"))


def _start_state(initial_state):
    return initial_state.contiguous().float() if initial_state is not None else None


def _final_state(ht, v):
    return ht.double() if ht is not None and v.dtype == torch.float64 else ht


@on_inputs_device
def _forward_alone(v, b, c, g, A, beta, initial_state, output_final_state):
    """What ``ChunkGatedDeltaFunction`` returns when no backward can follow, without an
    autograd Function around it (its bookkeeping costs host time and buys nothing here)."""
    v, b, c, g, A, beta = (t.contiguous() for t in (v, b, c, g, A, beta))
    o, ht, *_ = _forward(v, b, c, g, A, beta, _start_state(initial_state), output_final_state,
                         _precision(v, b, c, forward=True), keep=False)
    return o, _final_state(ht, v)


class ChunkGatedDeltaFunction(torch.autograd.Function):
    """(v, b, c, g, A, beta, initial_state, output_final_state) -> (o, final_state or None)."""

    @staticmethod
    @on_inputs_device
    def forward(ctx, v, b, c, g, A, beta, initial_state, output_final_state, grad_mode=True):
        v, b, c, g, A, beta = (t.contiguous() for t in (v, b, c, g, A, beta))
        h0 = _start_state(initial_state)
        precision = _precision(v, b, c, forward=False)
        forward_precision = _precision(v, b, c, forward=True)
        # grad_mode: whether autograd was recording where the caller applied this (inside
        # forward it never is); a backward can only follow if it was and an input needs it
        keep = bool(grad_mode) and any(ctx.needs_input_grad)
        o, ht, hs, u, w, mk, ti = _forward(v, b, c, g, A, beta, h0, output_final_state,
                                           forward_precision, keep)
        if keep:
            ctx.save_for_backward(v, b, c, g, A, beta, hs, u, w, mk, ti)
        ctx.precision = precision
        ctx.chunk = _config("chunk")  # how u, w, mk, ti and hs are laid out
        ctx.h0_dtype = initial_state.dtype if initial_state is not None else None
        return o, _final_state(ht, v)

    @staticmethod
    @on_inputs_device
    def backward(ctx, do, dht):
        if not ctx.saved_tensors:
            raise RuntimeError("ChunkGatedDeltaFunction: the forward ran with grad_mode=False "
                               "and kept nothing for a backward; apply it with grad_mode=True "
                               "(the default)")
        check_same_layout("ChunkGatedDeltaFunction", {"chunk": ctx.chunk},
                          {"chunk": _config("chunk")})
        v, b, c, g, A, beta, hs, u, w, mk, ti = ctx.saved_tensors
        do = torch.zeros_like(v) if do is None else do.contiguous()
        dht = dht.contiguous().float() if dht is not None else None
        dv, db, dc, dg, dA, dbeta, dh0 = _backward(v, b, c, g, A, beta, hs, u, w, mk, ti, do,
                                                   dht, ctx.h0_dtype is not None,
                                                   ctx.precision)
        if dh0 is not None:
            dh0 = dh0.to(ctx.h0_dtype)
        return dv, db, dc, dg, dA.to(A.dtype), dbeta, dh0, None, None


def chunk_gated_delta_triton(v, b, c, g, A, beta, initial_state=None, output_final_state=False,
                             *, check_values: bool = True):
    """The gated delta rule by the chunked Triton kernels; same contract as
    ``chunk_gated_delta_torch`` (which derives the form).

    v (B, T, H, D); b, c (B, T, H, S), unit vectors (the caller normalises them); g, beta
    (B, T, H); A (H, S) negative; initial_state (B, H, S, D) or None. Returns
    ``(o, final_state or None)``: o in v's dtype, the state fp32 (fp64 for fp64 inputs).
    Differentiable in v, b, c, g, A, beta and initial_state.
    """
    check_inputs(v, b, c, g, A, initial_state, beta, check_values=check_values)
    check_triton_device(v, INTERPRET, "the chunked Triton gated delta kernel", __name__,
                        "gated_delta_rule(..., backend='chunk_torch')")
    if v.shape[1] == 0:
        o, state = empty_sequence(v, b, initial_state, output_final_state)
        return o, _final_state(state, v)
    if not needs_graph(v, b, c, g, A, beta, initial_state):
        return _forward_alone(v, b, c, g, A, beta, initial_state, bool(output_final_state))
    return ChunkGatedDeltaFunction.apply(v, b, c, g, A, beta, initial_state,
                                         bool(output_final_state), torch.is_grad_enabled())
