"""The chunked Triton gated delta kernels (hymo_mini.ops.gated_delta.chunk_triton) against
the plain loop naive_gated_delta in fp64.

Forward output, final state and every gradient (v, b, c, g, A, beta, initial_state), by
relative RMS error, on T in {1, 5, 37, 64}, S = D in {16, 24, 32} and S != D, decays
scaled by 0.01, 1 and 10, β near 0 and near 1, with and without initial and final state.
On CPU the kernels run under the Triton interpreter (plain fp32 products); on a GPU the
same file runs unchanged, fp32 with "tf32x3" products (fp32-grade, so the tolerance
stays tight) and bf16 with TF32.
"""

from __future__ import annotations

import pytest
import torch
import triton
from delta_oracle import DEVICE, GATE_GRADS, compare_to_naive, make_leaves, reference, run
from gdn_oracle import mixed_decay, rel_err, too_far

import hymo_mini.ops.gated_delta.chunk_triton as gdt
from hymo_mini.ops import naive_gated_delta
from hymo_mini.ops.gated_delta.chunk_triton import chunk_gated_delta_triton
from hymo_mini.ops.precision import dot_precision

FP32_TOL = 1e-4 if DEVICE == "cuda" else 2e-5
LOW_TOL = 2e-2  # bf16 inputs and outputs
ACTIVE = "INTERPRET_CONFIGS" if gdt.INTERPRET else "CONFIGS"  # the launch settings in use


def kernel(v, b, c, g, A, beta, h0, output_final_state):
    return chunk_gated_delta_triton(v, b, c, g, A, beta, h0, output_final_state)


def check(B, T, H, S, D, dtype=torch.float32, **kw):
    tol = LOW_TOL if dtype in (torch.bfloat16, torch.float16) else FP32_TOL
    return compare_to_naive(kernel, B, T, H, S, D, dtype, tol, gate_tol=5 * tol, **kw)


CASES = {
    # name: (B, T, H, S, D, keyword arguments)
    "T1_S16_no_state": (2, 1, 2, 16, 16, dict(with_h0=False)),
    "T5_S24_strong": (1, 5, 2, 24, 24, dict(decay_scale=10.0)),
    "T37_S32_weak_no_final": (1, 37, 2, 32, 32, dict(decay_scale=0.01,
                                                     output_final_state=False)),
    "T64_S24_strong_beta1_no_h0": (1, 64, 2, 24, 24, dict(decay_scale=10.0, beta="near1",
                                                          with_h0=False)),
    "T37_S12_D20_beta0": (1, 37, 2, 12, 20, dict(beta="near0")),
    "T64_S16_weak_beta1": (2, 64, 1, 16, 16, dict(decay_scale=0.01, beta="near1")),
    "T37_S24_no_h0_no_final": (1, 37, 2, 24, 24, dict(with_h0=False,
                                                      output_final_state=False)),
}


@pytest.mark.triton
@pytest.mark.parametrize("forward", gdt.FORWARDS)
@pytest.mark.parametrize("case", list(CASES))
def test_kernel_matches_loop(monkeypatch, case, forward):
    """Both forwards (in passes, and in one launch over stretches of chunks), each with the
    one backward."""
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), forward=forward))
    B, T, H, S, D, kw = CASES[case]
    check(B, T, H, S, D, **kw)


@pytest.mark.triton
@pytest.mark.parametrize("chunk, stretch, shape, kw", [
    (16, 1, (1, 70, 2, 32, 20), dict(decay_scale=10.0)),  # a stretch of one chunk
    (16, 3, (2, 70, 1, 32, 20), {}),  # 2 stretches, the last of 2 chunks, one ragged
    (16, 4, (1, 150, 2, 24, 24), dict(beta="near1", with_h0=False)),  # 3 stretches
    (32, 2, (1, 100, 1, 16, 16), dict(decay_scale=0.01, output_final_state=False)),
])
def test_one_launch_over_stretches(monkeypatch, chunk, stretch, shape, kw):
    """The one-launch forward over stretches of 1 to 4 chunks, of 16 and 32 steps: ragged
    last stretches and chunks, several hand-overs, with and without the initial and final
    states; the backward reads the WY forms and chunk states it stored. With the pairs
    "auto" (the GPU's default): a stretch of 3 chunks once failed to compile there (a tile
    of the stretch's gates, [3, 16], is not a power of two)."""
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), chunk=chunk, forward="chain",
                                          pairs="auto", chain=dict(chunks=stretch, num_warps=1,
                                                                   num_stages=1)))
    check(*shape, **kw)


@pytest.mark.triton
@pytest.mark.skipif(DEVICE != "cuda", reason="the programs' order matters only on a GPU")
def test_one_launch_forward_is_deterministic(monkeypatch):
    """Whichever program takes which ticket, every state is formed by the same operations:
    two calls give the same bits."""
    monkeypatch.setattr(gdt, ACTIVE, dict(gdt.CONFIGS, forward="chain"))
    leaves = [t.detach() for t in make_leaves(4, 1000, 8, 32, 32, torch.float32)]
    first = chunk_gated_delta_triton(*leaves, output_final_state=True)
    again = chunk_gated_delta_triton(*leaves, output_final_state=True)
    assert all(torch.equal(x, y) for x, y in zip(first, again, strict=True))


@pytest.mark.triton
@pytest.mark.parametrize("chunk", [32, 64])
def test_longer_chunks(monkeypatch, chunk):
    """Chunks of 32 and 64 steps (the GPU's), a ragged last chunk, and the chunk-to-chunk
    passes split into 16 value columns per program (D = 20: a masked second block)."""
    split = dict(split=16, num_warps=1, num_stages=1)
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), chunk=chunk, state_fwd=split,
                                          state_bwd=split))
    check(1, 70, 1, 32, 20, decay_scale=10.0)


@pytest.mark.triton
@pytest.mark.parametrize("chunks, split, summary, shape, kw", [
    (2, 16, {}, (1, 70, 2, 32, 20), {}),  # 5 chunks in groups of 2, 2 column blocks, one masked
    (1, 1 << 30, {}, (2, 37, 1, 24, 24), dict(with_h0=False, output_final_state=False)),
    (2, 16, {}, (1, 50, 1, 40, 16), dict(beta="near1")),  # S > D: more blocks of M than of B
    # the group kernels' own columns: blocks holding columns of both M and B
    (2, 16, dict(split=32), (1, 50, 1, 24, 20), {}),  # [M | B] in 2 blocks of 32
    (2, 16, dict(split=64, num_warps=2), (1, 70, 2, 20, 24), {}),  # one block of 64
    # the walks over groups with their own columns (one block of 32) and warps
    (2, 16, dict(split=64, state_fwd=dict(split=32, num_warps=2, num_stages=1),
                 state_bwd=dict(split=32, num_warps=1, num_stages=1)), (1, 70, 1, 24, 20), {}),
    (2, 16, dict(split=64, products="walk"), (1, 50, 1, 16, 16), {}),  # summaries as walked
])
def test_the_passes_over_groups_of_chunks(monkeypatch, chunks, split, summary, shape, kw):
    """The chunk-to-chunk passes split over groups (chunk_groups: each group's transition
    and offset, a walk over the groups, then every group's walk from its start state),
    forced on at small shapes, against the loop: outputs, final state, every gradient
    (and without an initial or a final state: the scans' other branches)."""
    cols = dict(split=split, num_warps=1, num_stages=1)
    group = dict(chunks=chunks, below=1 << 30, **summary)
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), state_fwd=cols, state_bwd=cols,
                                          group=group))
    B, T, H, S, D = shape
    assert gdt._groups(1, triton.cdiv(T, 16)) == (triton.cdiv(triton.cdiv(T, 16), chunks),
                                                  chunks)
    check(B, T, H, S, D, decay_scale=0.3, **kw)


def test_groups_only_for_few_programs(monkeypatch):
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), group=gdt.CONFIGS["group"]))
    assert gdt._groups(40, 1024) == (32, 32)  # one long sequence: 40 heads x 1 block
    assert gdt._groups(80, 1024) == (32, 32)  # the backward's: 40 heads x 2 blocks
    assert gdt._groups(160, 512) == (1, 512)  # B = 2, T = 8,192 in the backward: one walk
    assert gdt._groups(160, 256) == (1, 256)  # B = 4, T = 4,096 in the forward: one walk
    assert gdt._groups(80, 32) == (1, 32)  # no more chunks than one group
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), group=dict(chunks=0, below=9)))
    with pytest.raises(ValueError, match="group"):
        gdt._groups(1, 10)


def test_the_group_kernels_columns(monkeypatch):
    """CONFIGS["group"]["split"]: the columns of [M | B] per program of the group kernels,
    a power of two from 16 up to what S + D needs; the state pass's split when absent."""
    cols = dict(split=16, num_warps=2, num_stages=3)
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), state_fwd=cols,
                                          group=dict(chunks=64, below=128)))
    assert gdt._summaries(32, 32, "state_fwd", False) == (16, 4, dict(num_warps=2,
                                                                     num_stages=3))
    for split, want in ((64, (64, 1)), (128, (64, 1)), (32, (32, 2)), (24, (32, 2))):
        gdt._config("group")["split"] = split
        assert gdt._summaries(32, 32, "state_fwd", False)[:2] == want
    assert gdt._summaries(20, 24, "state_fwd", False)[:2] == (32, 2)  # 44 columns
    gdt._config("group")["num_warps"] = 4
    assert gdt._summaries(32, 32, "state_fwd", False)[2] == dict(num_warps=4, num_stages=3)
    gdt._config("group")["split"] = 0
    with pytest.raises(ValueError, match=r"CONFIGS\['group'\]\['split'\]"):
        gdt._summaries(32, 32, "state_fwd", False)


def test_the_passes_over_groups_may_have_their_own_settings(monkeypatch):
    """CONFIGS["group"]["state_fwd"] (or "state_bwd"): the columns and launch of the scan
    and the walks over groups; the pass's own settings when absent."""
    cols = dict(split=16, num_warps=2, num_stages=3)
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), state_fwd=cols,
                                          group=dict(chunks=32, below=128)))
    assert gdt._over_groups("state_fwd", 32, 32, 16, False) == (16, 2, dict(num_warps=2,
                                                                         num_stages=3))
    gdt._config("group")["state_fwd"] = dict(split=32, num_warps=4, num_stages=3)
    assert gdt._over_groups("state_fwd", 32, 32, 16, False) == (32, 1, dict(num_warps=4,
                                                                         num_stages=3))
    assert gdt._over_groups("state_fwd", 20, 32, 16, False)[:2] == (32, 1)
    assert gdt._over_groups("state_fwd", 40, 64, 16, False)[:2] == (32, 2)
    gdt._config("group")["state_fwd"] = dict(num_warps=4)
    with pytest.raises(ValueError, match=r"CONFIGS\['group'\]\['state_fwd'\]\['split'\]"):
        gdt._over_groups("state_fwd", 32, 32, 16, False)


@pytest.mark.triton
@pytest.mark.parametrize("inverse", gdt.INVERSES)
def test_both_inverses_on_aligned_keys(monkeypatch, inverse):
    """(I + M)⁻¹ by merged blocks and by rows, where it is hardest: every key of a head
    nearly one direction, β near 1 and weak decay, so M is nearly all ones below the
    diagonal and its powers grow like binomial coefficients; chunks of 32 steps."""
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), chunk=32, inverse=inverse))
    check(1, 40, 2, 16, 16, decay_scale=0.01, beta="near1", keys="aligned")


@pytest.mark.triton
def test_bf16():
    check(1, 37, 2, 24, 24, torch.bfloat16)


@pytest.mark.triton
def test_fp64_inputs():
    """fp64 in, fp64 out (o, state, gradients), computed in fp32."""
    check(1, 21, 2, 16, 16, torch.float64, decay_scale=10.0)


@pytest.mark.triton
def test_only_final_state_used():
    """A loss on the final state alone: autograd hands the backward do = None, and c, which
    only reads, gets a zero gradient."""
    leaves = make_leaves(1, 20, 2, 16, 16, torch.float32)
    _, final = chunk_gated_delta_triton(*leaves, output_final_state=True)
    final.sum().backward()
    ref = [t.detach().double().requires_grad_() for t in leaves]
    naive_gated_delta(*ref)[1].sum().backward()
    for name, t, r in zip("v b g A beta h0".split(), leaves[:2] + leaves[3:],
                          ref[:2] + ref[3:], strict=True):
        assert rel_err(t.grad, r.grad) < 5 * FP32_TOL, name
    assert torch.equal(leaves[2].grad, torch.zeros_like(leaves[2]))


@pytest.mark.triton
def test_non_contiguous_inputs():
    v, b, c, g, A, beta, h0 = (t.detach() for t in make_leaves(2, 24, 3, 16, 16,
                                                               torch.float32))
    b_t = b.transpose(1, 2).contiguous().transpose(1, 2)  # same values, other strides
    assert not b_t.is_contiguous()
    o, final = chunk_gated_delta_triton(v, b_t, c, g, A, beta, h0, output_final_state=True)
    o_ref, final_ref = naive_gated_delta(v, b, c, g, A, beta, h0)
    assert rel_err(o, o_ref) < FP32_TOL and rel_err(final, final_ref) < FP32_TOL


@pytest.mark.triton
def test_comparison_can_fail():
    """The checks are not vacuous: one step's β changed by 20% is far above the tolerance
    (on CPU, where the tolerance is tighter, 1% is too)."""
    v, b, c, g, A, beta, h0 = (t.detach() for t in make_leaves(1, 20, 2, 16, 16,
                                                               torch.float32))
    o_ref, _ = naive_gated_delta(v, b, c, g, A, beta, h0)
    for change in (0.8, 1.01) if DEVICE == "cpu" else (0.8,):
        beta_wrong = beta.clone()
        beta_wrong[0, 3, 1] *= change
        o_wrong, _ = chunk_gated_delta_triton(v, b, c, g, A, beta_wrong, h0)
        assert rel_err(o_wrong, o_ref) > 10 * FP32_TOL, change


def test_needs_gpu_or_interpreter(monkeypatch):
    monkeypatch.setattr(gdt, "INTERPRET", False)
    leaves = [t.detach().cpu() for t in make_leaves(1, 4, 1, 3, 3, torch.float32)]
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        chunk_gated_delta_triton(*leaves)


def test_16bit_inputs_take_their_own_launch_settings(monkeypatch):
    """On the GPU, bf16 and fp16 inputs launch with CONFIGS_16BIT where it has an entry and
    with CONFIGS elsewhere; fp32 inputs always with CONFIGS."""
    monkeypatch.setattr(gdt, "INTERPRET", False)
    for name in ("wy_fwd", "output", "du_local", "chunk_bwd", "state_fwd", "state_bwd",
                 "chain"):
        fp32 = {k: v for k, v in gdt.CONFIGS[name].items() if k not in ("split", "chunks")}
        half = {k: v for k, v in gdt.CONFIGS_16BIT.get(name, gdt.CONFIGS[name]).items()
                if k not in ("split", "chunks")}
        assert gdt._launch(name) == fp32
        assert gdt._launch(name, half=True) == half
    assert gdt._config("chunk", half=True) == gdt.CONFIGS["chunk"]
    # the forward: in one launch for 16-bit inputs, in passes for fp32 (the timed choice)
    assert (gdt._config("forward"), gdt._config("forward", half=True)) == ("passes", "chain")
    v = torch.zeros(1, 1, 1, 1)
    assert not gdt._half(v) and gdt._half(v.bfloat16()) and gdt._half(v.half())


def test_bad_inverse_setting(monkeypatch):
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), inverse="neumann"))
    with pytest.raises(ValueError, match="inverse"):
        chunk_gated_delta_triton(*(t.detach() for t in make_leaves(1, 4, 1, 3, 3,
                                                                   torch.float32)))


def test_bad_chunk_setting(monkeypatch):
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), chunk=48))
    with pytest.raises(ValueError, match="chunk"):
        chunk_gated_delta_triton(*(t.detach() for t in make_leaves(1, 4, 1, 3, 3,
                                                                   torch.float32)))


@pytest.mark.parametrize("change, match", [(dict(forward="scan"), "forward"),
                                           (dict(forward="chain", chain=dict(chunks=0)),
                                            "chunks")])
def test_bad_forward_setting(monkeypatch, change, match):
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), **change))
    with pytest.raises(ValueError, match=match):
        chunk_gated_delta_triton(*(t.detach() for t in make_leaves(1, 4, 1, 3, 3,
                                                                   torch.float32)))


def test_bad_beta():
    v, b, c, g, A, beta, h0 = (t.detach() for t in make_leaves(1, 4, 1, 3, 3, torch.float32))
    with pytest.raises(ValueError, match="beta must have rank 3"):
        chunk_gated_delta_triton(v, b, c, g, A, beta[..., 0], h0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_empty_sequence(dtype):
    v, b, c, g, A, beta, h0 = (t.detach() for t in make_leaves(2, 0, 2, 3, 4, dtype))
    o, final = chunk_gated_delta_triton(v, b, c, g, A, beta, h0, output_final_state=True)
    assert o.shape == (2, 0, 2, 4) and final.dtype == dtype and torch.equal(final, h0)


def test_dot_precision_follows_pytorch(monkeypatch):
    """fp32: three-pass TF32 (fp32-grade) unless PyTorch's fp32 matmuls may use TF32;
    bf16 and fp16 always TF32."""
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: "highest")
    assert dot_precision(torch.float32) == "tf32x3" == dot_precision(torch.float64)
    assert dot_precision(torch.bfloat16) == "tf32" == dot_precision(torch.float16)
    monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: "high")
    assert dot_precision(torch.float32) == "tf32"
    monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: "highest")
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", True)
    assert dot_precision(torch.float32) == "tf32"



@pytest.mark.triton
@pytest.mark.parametrize("pairs", gdt.PAIRS)
@pytest.mark.parametrize("forward", gdt.FORWARDS)
def test_pairs_one_product_or_levels(monkeypatch, pairs, forward):
    """The chunks (or stretches of the one-launch forward) that fit by one product and the
    others by the levels, in two launches ("auto"), or all by the levels: both kinds in one
    sequence with a ragged tail, against the loop (outputs, final state, every gradient).
    In one launch, stretch 2 fits but follows one that does not (the levels take it)."""
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), pairs=pairs, forward=forward,
                                          chain=dict(chunks=2, num_warps=1, num_stages=1)))
    B, T, H, S, D = 1, 100, 2, 24, 20  # 32-step stretches 0 and 2 fit, 1 and 3 do not
    leaves = mixed_decay(make_leaves(B, T, H, S, D, torch.float32, decay_scale=10.0), T,
                         block=32)
    do = torch.randn(B, T, H, D, dtype=torch.float64, device=DEVICE)
    dht = torch.randn(B, H, S, D, dtype=torch.float64, device=DEVICE)
    o, final, grads = run(kernel, leaves, do, dht)
    ref = [t.detach().double().requires_grad_() for t in leaves]
    o_ref, final_ref, grads_ref = run(reference, ref, do, dht)
    errors = {"o": rel_err(o, o_ref), "final": rel_err(final, final_ref)}
    errors.update({"d" + n: rel_err(x, grads_ref[n]) for n, x in grads.items()})
    bad = {k: e for k, e in errors.items() if not e < (5 if k in GATE_GRADS else 1) * FP32_TOL}
    assert not bad, errors


@pytest.mark.triton
@pytest.mark.parametrize("forward", gdt.FORWARDS)
def test_pairs_take_one_product_only_where_the_decay_allows(monkeypatch, forward):
    """"auto" and "levels" give the same bits where every chunk's decay is far past 2^64
    (both take the levels), and other bits (within the tolerance) where every chunk's is
    small (one product). In one launch, T = 40 is one stretch of 4 chunks."""
    v, b, c, g, A, beta, h0 = (t.detach() for t in make_leaves(1, 40, 2, 32, 32,
                                                               torch.float32))
    outputs = {}
    for scale in (100.0, 0.01):
        for pairs in gdt.PAIRS:
            monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), pairs=pairs,
                                                  forward=forward,
                                                  chain=dict(chunks=4, num_warps=1,
                                                             num_stages=1)))
            outputs[scale, pairs] = kernel(v, b, c, g, A * scale, beta, h0, False)[0]
    assert torch.equal(outputs[100.0, "auto"], outputs[100.0, "levels"])
    assert not torch.equal(outputs[0.01, "auto"], outputs[0.01, "levels"])
    assert rel_err(outputs[0.01, "auto"], outputs[0.01, "levels"]) < FP32_TOL


@pytest.mark.triton
@pytest.mark.parametrize("forward", gdt.FORWARDS)
def test_one_rate_per_head_takes_one_product_at_any_decay(monkeypatch, forward):
    """The gla test of this name, for the delta rule's Mk and P (both forwards, and Pᵀ dO
    in the backward): one rate a head at rates of 100 and more takes the one product."""
    B, T, H, S, D = 1, 40, 2, 24, 20
    leaves = make_leaves(B, T, H, S, D, torch.float32, decay_scale=100.0)
    with torch.no_grad():
        leaves[4].copy_(leaves[4][:, :1].expand(H, S))  # (H, S): each head one rate
    do = torch.randn(B, T, H, D, dtype=torch.float64, device=DEVICE)
    dht = torch.randn(B, H, S, D, dtype=torch.float64, device=DEVICE)
    ref = run(reference, [t.detach().double().requires_grad_() for t in leaves], do, dht)
    outputs = {}
    for pairs in gdt.PAIRS:
        monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), pairs=pairs,
                                              forward=forward,
                                              chain=dict(chunks=2, num_warps=1, num_stages=1)))
        got = run(kernel, [t.detach().clone().requires_grad_() for t in leaves], do, dht)
        outputs[pairs] = got[0]
        assert not too_far(got, ref, FP32_TOL, GATE_GRADS), pairs
    assert not torch.equal(outputs["auto"], outputs["levels"])


@pytest.mark.triton
@pytest.mark.parametrize("pairs", gdt.PAIRS)
@pytest.mark.parametrize("forward, redo", [("passes", False), ("chain", False),
                                           ("chain", True), ("chain", "inverse")])
def test_forward_without_autograd_keeps_nothing(monkeypatch, forward, redo, pairs):
    """Under torch.no_grad (or with no input needing a gradient) the forward forms only
    what its outputs need: the same o and final state, bit for bit, as a call that keeps
    the backward's tensors, and nothing saved on the graph. With "redo" the one-launch
    forward forms W and Uv a second time instead of storing them (from the chunk's keys,
    or from the (I + M)⁻¹ it kept): the same bits, by the levels and by one product (every
    chunk here fits it, its keys' rates spread: K̃ through the shared rate is rounded
    otherwise than directly, so the walk must form it as the solve did)."""
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), forward=forward, redo=redo,
                                          pairs=pairs,
                                          chain=dict(chunks=2, num_warps=1, num_stages=1)))
    leaves = make_leaves(1, 70, 2, 24, 20, torch.float32)
    kept = kernel(*leaves, True)
    with torch.no_grad():
        lean = kernel(*leaves, True)
    assert all(torch.equal(x, y) for x, y in zip(kept, lean, strict=True))
    assert kept[0].grad_fn is not None and lean[0].grad_fn is None
    detached = kernel(*(t.detach() for t in leaves), True)  # no input needs a gradient
    assert all(torch.equal(x, y) for x, y in zip(kept, detached, strict=True))


def test_redo_setting_checked(monkeypatch):
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), forward="chain",
                                          redo="inverses"))
    with torch.no_grad(), pytest.raises(ValueError, match=r"CONFIGS\['redo'\].*'inverse'"):
        chunk_gated_delta_triton(*(t.detach() for t in make_leaves(1, 4, 1, 3, 3,
                                                                   torch.float32)))


def test_pairs_setting_checked(monkeypatch):
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), pairs="fast"))
    with pytest.raises(ValueError, match="pairs"):
        chunk_gated_delta_triton(*(t.detach() for t in make_leaves(1, 4, 1, 3, 3,
                                                                   torch.float32)))


def test_backward_after_a_forward_that_kept_nothing_says_why():
    leaves = make_leaves(1, 4, 1, 3, 3, torch.float32)
    o, _ = gdt.ChunkGatedDeltaFunction.apply(*leaves[:6], None, False, False)
    with pytest.raises(RuntimeError, match="grad_mode=False"):
        o.sum().backward()


@pytest.mark.triton
def test_chunk_changed_between_forward_and_backward_says_so(monkeypatch):
    """What the forward keeps is laid out by its chunk: a backward under another chunk
    setting would read it wrongly, so it stops with a message naming the setting."""
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), chunk=16))
    leaves = make_leaves(1, 20, 2, 16, 16, torch.float32)
    o, _ = chunk_gated_delta_triton(*leaves)
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), chunk=32))
    with pytest.raises(RuntimeError, match=r"CONFIGS\['chunk'\] 16 -> 32 between the forward"):
        o.sum().backward()


@pytest.mark.triton
@pytest.mark.parametrize("forward", gdt.FORWARDS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_bf16_products_for_16bit_inputs(monkeypatch, dtype, forward):
    """CONFIGS["half_products"] = "bf16" (the GPU's default): the forward of 16-bit inputs
    multiplies bf16 roundings of its blocks (the WY solves, the walk, the stretch maps,
    the outputs), the backward TF32; output, final state and every gradient stay within
    the 16-bit tolerance of the loop, with an initial state and strong decay."""
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), half_products="bf16",
                                          forward=forward))
    check(1, 45, 2, 12, 20, dtype, decay_scale=10.0)


@pytest.mark.triton
def test_half_products_setting_checked(monkeypatch):
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), half_products="fp8"))
    leaves = [t.detach() for t in make_leaves(1, 5, 1, 16, 16, torch.bfloat16)]
    with pytest.raises(ValueError, match=r"CONFIGS\['half_products'\] must be one of"):
        chunk_gated_delta_triton(*leaves)



@pytest.mark.triton
@pytest.mark.parametrize("forward", gdt.FORWARDS)
def test_bf16x6_products_for_fp32_inputs(monkeypatch, forward):
    """CONFIGS["fp32_products"] = "bf16x6" both ways (six products of bf16 pieces, the
    GPU's backward by default): fp32 inputs keep the fp32 tolerance of the loop, output,
    final state and every gradient, with an initial state and strong decay."""
    six = dict(forward="bf16x6", backward="bf16x6")
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), fp32_products=six,
                                          forward=forward))
    check(1, 37, 2, 12, 20, decay_scale=10.0)


@pytest.mark.triton
def test_fp32_products_setting_checked(monkeypatch):
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE),
                                          fp32_products=dict(forward="tf32", backward="bf16x6")))
    leaves = [t.detach() for t in make_leaves(1, 5, 1, 16, 16, torch.float32)]
    with pytest.raises(ValueError,
                       match=r"CONFIGS\['fp32_products'\]\['forward'\] must be one of"):
        chunk_gated_delta_triton(*leaves)


def test_walk_products_setting_checked(monkeypatch):
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), walk_products="iee"))
    leaves = [t.detach() for t in make_leaves(1, 5, 1, 16, 16, torch.float32)]
    with pytest.raises(ValueError, match=r"CONFIGS\['walk_products'\] must be one of 'ieee', "
                                         r"'same', got 'iee' \(did you mean 'ieee'\?\)"):
        chunk_gated_delta_triton(*leaves)


@pytest.mark.parametrize("precision, walk", [("tf32x3", "ieee"), ("bf16x6", "ieee"),
                                             ("bf16x6_rounded", "ieee"), ("tf32", "tf32"),
                                             ("bf16", "bf16")])
def test_the_walk_multiplies_in_ieee_where_the_forward_is_fp32_grade(monkeypatch, precision,
                                                                      walk):
    """CONFIGS["walk_products"] = "ieee" replaces the forward's fp32-grade products in the
    walk alone (the GPU's default: faster there); TF32 (the opt-in) and 16-bit products stay,
    and "same" keeps the forward's everywhere."""
    shipped = gdt.CONFIGS["walk_products"]  # (on a GPU ACTIVE is CONFIGS: read it first)
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), walk_products="ieee"))
    assert gdt._walk_precision(precision) == walk
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), walk_products="same"))
    assert gdt._walk_precision(precision) == precision
    assert shipped == "ieee"


def test_only_the_walk_takes_the_walks_products(monkeypatch):
    """With the GPU's settings and the kernels faked, an fp32 forward launches the walk
    (_state_fwd_kernel) with IEEE products and every other kernel with the forward's,
    through the one walk and through the groups."""
    seen = {}

    class Launch:
        def __init__(self, name):
            self.name = name

        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                seen.setdefault(self.name, set()).add(kwargs.get("PRECISION"))
            return launch

    for name in dir(gdt):
        if name.startswith("_") and name.endswith("_kernel"):
            monkeypatch.setattr(gdt, name, Launch(name))
    monkeypatch.setattr(gdt, "INTERPRET", False)
    v, b, c = torch.randn(1, 64, 1, 8), torch.randn(1, 64, 1, 8), torch.randn(1, 64, 1, 8)
    g, A, beta = torch.rand(1, 64, 1), -torch.rand(1, 8), torch.rand(1, 64, 1)
    for group in (dict(chunks=64, below=0), dict(chunks=2, below=1 << 30)):
        seen.clear()
        monkeypatch.setitem(gdt.CONFIGS, "group", group)
        with torch.no_grad():
            gdt.ChunkGatedDeltaFunction.apply(v, b, c, g, A, beta, None, False)
        assert seen.pop("_state_fwd_kernel") == {"ieee"}
        assert all(p == {"tf32x3"} for name, p in seen.items() if name != "_group_scan_fwd_kernel"
                   and None not in p), seen
        assert ("_group_fwd_kernel" in seen) == (group["chunks"] == 2)
    # CONFIGS["group"]["products"] = "walk": the group kernel multiplies as the walk does
    seen.clear()
    monkeypatch.setitem(gdt.CONFIGS, "group", dict(chunks=2, below=1 << 30, products="walk"))
    with torch.no_grad():
        gdt.ChunkGatedDeltaFunction.apply(v, b, c, g, A, beta, None, False)
    assert seen["_group_fwd_kernel"] == {"ieee"} and seen["_wy_fwd_kernel"] == {"tf32x3"}
    monkeypatch.setitem(gdt.CONFIGS, "group", dict(chunks=2, below=1 << 30, products="walks"))
    with torch.no_grad(), pytest.raises(ValueError, match=r"CONFIGS\['group'\]\['products'\] "
                                                          r"must be one of 'forward', 'walk'"):
        gdt.ChunkGatedDeltaFunction.apply(v, b, c, g, A, beta, None, False)


@pytest.mark.triton
@pytest.mark.parametrize("pairs", gdt.PAIRS)
@pytest.mark.parametrize("shape, with_h0, split", [((1, 70, 2, 24, 20), True, 16),
                                                   ((2, 45, 1, 16, 32), False, 32)])
def test_the_walks_over_groups_may_form_the_outputs(monkeypatch, pairs, shape, with_h0, split):
    """CONFIGS["group"]["outputs"]: with nothing kept for a backward, the walks over groups
    form each chunk's outputs themselves (no chunk-start states, no output kernel): o and
    the final state as the fp64 loop's, by the levels and by one product (at this decay
    some groups of the first shape fit it and some are left to the levels' launch), ragged
    tails, one or two column blocks; with a backward to follow, the usual forward, bit for
    bit."""
    cols = dict(split=split, num_warps=1, num_stages=1)
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), pairs=pairs, state_fwd=cols,
                                          state_bwd=cols,
                                          group=dict(chunks=2, below=1 << 30, outputs=True)))
    leaves = make_leaves(*shape, torch.float32, decay_scale=3.0, with_h0=with_h0)
    with torch.no_grad():
        fused = kernel(*leaves, True)
        ref = naive_gated_delta(*(t.double() if t is not None else None for t in leaves))
    assert rel_err(fused[0], ref[0]) < FP32_TOL and rel_err(fused[1], ref[1]) < FP32_TOL
    kept = kernel(*leaves, True)  # a backward may follow: the walks store hs and U
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE),
                                          group=dict(chunks=2, below=1 << 30,
                                                     outputs=False)))
    unfused = kernel(*leaves, True)
    assert all(torch.equal(x, y) for x, y in zip(kept, unfused, strict=True))


@pytest.mark.triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_shipped_group_settings_form_the_outputs(monkeypatch, dtype):
    """The GPU's own CONFIGS["group"] (its kernels' columns and warps, the walks over groups'
    settings, the walks forming the outputs), forced on with groups of two chunks: with
    nothing kept for a backward, o and the final state as the loop's."""
    shipped = dict(gdt.CONFIGS["group"], chunks=2, below=1 << 30)
    assert shipped["outputs"] is True
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE), group=shipped))
    leaves = make_leaves(2, 70, 2, 32, 32, dtype, decay_scale=3.0, with_h0=True)
    tol = FP32_TOL if dtype == torch.float32 else LOW_TOL
    with torch.no_grad():
        fused = kernel(*leaves, True)
        ref = naive_gated_delta(*(t.double() if t is not None else None for t in leaves))
    assert rel_err(fused[0], ref[0]) < tol and rel_err(fused[1], ref[1]) < tol


def test_the_walks_outputs_setting_checked(monkeypatch):
    monkeypatch.setattr(gdt, ACTIVE, dict(getattr(gdt, ACTIVE),
                                          group=dict(chunks=1, below=1 << 30, outputs="yes")))
    leaves = [t.detach() for t in make_leaves(1, 40, 1, 16, 16, torch.float32)]
    with pytest.raises(ValueError, match=r"CONFIGS\['group'\]\['outputs'\] must be True or "
                                         r"False, got 'yes'"):
        chunk_gated_delta_triton(*leaves)
