"""The chunked Triton kernels of the gated delta rule (hymo_mini.ops.gated_delta.chunk_triton)
against the plain loop naive_gated_delta in fp64.

Forward output, final state and every gradient (v, b, c, g, A, beta, initial_state), by
relative RMS error, on T in {1, 5, 37, 64, 70}, S = D in {16, 24, 32} and S != D, decays
scaled by 0.01, 1 and 10, β near 0 and near 1, keys nearly aligned, with and without
initial and final state; the state pass in one walk and over groups of chunks; chunks that
fit the one product and chunks that take the levels. On the CPU the kernels run under the
Triton interpreter (plain fp32 products); on a GPU the same file runs unchanged.
"""

from __future__ import annotations

import pytest
import torch
from delta_oracle import DEVICE, GATE_GRADS, compare_to_naive, make_leaves, reference, run
from gdn_oracle import mixed_decay, rel_err, too_far
from test_ops_gla_chunk_triton import Fp32Precision

import hymo_mini.ops.gated_delta.chunk_triton as gdt
from hymo_mini.ops import naive_gated_delta, one_product_chunks
from hymo_mini.ops.gated_delta.chunk_triton import chunk_gated_delta_triton
from hymo_mini.ops.utils.precision import products

FP32_TOL = 1e-4 if DEVICE == "cuda" else 2e-5
LOW_TOL = 2e-2  # bf16 inputs and outputs


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
    "T70_S32_D20": (1, 70, 2, 32, 20, {}),  # a masked second block of value columns
    "aligned_keys": (1, 40, 2, 16, 16, dict(decay_scale=0.01, beta="near1", keys="aligned")),
    "bf16": (1, 37, 2, 24, 24, dict(dtype=torch.bfloat16)),
    "fp16_strong": (1, 37, 2, 12, 20, dict(dtype=torch.float16, decay_scale=10.0)),
    "fp64": (1, 21, 2, 16, 16, dict(dtype=torch.float64, decay_scale=10.0)),
}


@pytest.mark.triton
@pytest.mark.parametrize("case", list(CASES))
def test_kernel_matches_loop(case):
    """("aligned_keys": every key of a head nearly one direction, β near 1 and weak decay, so
    M is nearly all ones below the diagonal: the hardest case for (I + M)⁻¹.)"""
    B, T, H, S, D, kw = CASES[case]
    check(B, T, H, S, D, **kw)


@pytest.mark.triton
@pytest.mark.parametrize("shape, kw", [
    ((1, 70, 2, 32, 20), {}),  # 5 chunks in groups of 2, a ragged last group
    ((2, 37, 1, 24, 24), dict(with_h0=False, output_final_state=False)),
    ((1, 50, 1, 40, 16), dict(beta="near1")),  # S > D: more columns of M than of B
    ((1, 70, 2, 20, 24), dict(dtype=torch.bfloat16)),
])
def test_the_state_pass_over_groups_of_chunks(monkeypatch, shape, kw):
    """Few long sequences: each group's map of the state at once, the groups in order, then
    every group's walk (forward and backward), with groups of two chunks."""
    monkeypatch.setattr(gdt, "GROUP_CHUNKS", 2)
    assert gdt._groups(shape[0] * shape[2], 5) == (3, 2)
    check(*shape, **kw)


@pytest.mark.triton
def test_the_group_kernels_with_narrow_column_blocks(monkeypatch):
    """The kernels summing up a group with [Φ | Ψ]'s columns in blocks of 16 (S = 24, D =
    20: blocks holding columns of both, a masked last one), and the walks over groups on 16
    value columns (two blocks, one masked)."""
    monkeypatch.setattr(gdt, "GROUP_CHUNKS", 2)
    monkeypatch.setitem(gdt.LAUNCH, "group_sums", dict(split=16, num_warps=1, num_stages=1))
    monkeypatch.setitem(gdt.LAUNCH, "group_state_fwd", dict(split=16, num_warps=1,
                                                            num_stages=1))
    check(1, 50, 1, 24, 20)


@pytest.mark.triton
@pytest.mark.parametrize("stretch, shape, kw", [
    (1, (1, 70, 2, 32, 20), dict(decay_scale=10.0)),  # a stretch of one chunk
    (2, (2, 70, 1, 32, 20), {}),  # 3 stretches, the last of one ragged chunk
    (4, (1, 150, 2, 24, 24), dict(beta="near1", with_h0=False)),  # 3 stretches
    (2, (1, 100, 1, 16, 16), dict(decay_scale=0.01, output_final_state=False)),
])
def test_the_forward_in_one_launch(monkeypatch, stretch, shape, kw):
    """The one-launch forward (16-bit inputs' on the GPU), here in fp32 for the tight
    tolerance: stretches of 1 to 4 chunks, ragged last stretches and chunks, several
    hand-overs, with and without the initial and final states; the backward reads the WY
    forms and chunk states it stored."""
    monkeypatch.setattr(gdt, "ONE_LAUNCH", (torch.float32,))
    monkeypatch.setattr(gdt, "STRETCH", stretch)
    check(*shape, **kw)


@pytest.mark.triton
def test_the_one_launch_forward_takes_the_levels_from_the_first_stretch_left(monkeypatch):
    """Stretches that fit the one product and stretches that do not, in one sequence: the
    first launch takes the product up to the first that does not fit, the second the rest
    by the levels, from the state the first handed on."""
    monkeypatch.setattr(gdt, "ONE_LAUNCH", (torch.float32,))
    monkeypatch.setattr(gdt, "STRETCH", 2)
    B, T, H, S, D = 1, 100, 2, 12, 20
    leaves = mixed_decay(make_leaves(B, T, H, S, D, torch.float32, decay_scale=10.0), T,
                         block=2 * gdt.CHUNK)
    do = torch.randn(B, T, H, D, dtype=torch.float64, device=DEVICE)
    dht = torch.randn(B, H, S, D, dtype=torch.float64, device=DEVICE)
    got = run(kernel, leaves, do, dht)
    ref = run(reference, [t.detach().double().requires_grad_() for t in leaves], do, dht)
    assert not too_far(got, ref, FP32_TOL, GATE_GRADS)


@pytest.mark.triton
@pytest.mark.skipif(DEVICE != "cuda", reason="the programs' order matters only on a GPU")
def test_the_one_launch_forward_is_deterministic():
    """Whichever program takes which ticket, every state is formed by the same operations:
    two calls give the same bits."""
    leaves = [t.detach() for t in make_leaves(4, 1000, 8, 32, 32, torch.bfloat16)]
    first = chunk_gated_delta_triton(*leaves, output_final_state=True)
    again = chunk_gated_delta_triton(*leaves, output_final_state=True)
    assert all(torch.equal(x, y) for x, y in zip(first, again, strict=True))


def test_groups_only_for_few_programs():
    """One walk where it launches GROUPS_BELOW programs or more, or where a sequence is no
    longer than a group; otherwise groups of GROUP_CHUNKS (the last one ragged)."""
    G, below = gdt.GROUP_CHUNKS, gdt.GROUPS_BELOW
    assert gdt._groups(below, 100 * G) == (1, 100 * G)
    assert gdt._groups(below - 1, G) == (1, G)
    assert gdt._groups(below - 1, 3 * G + 1) == (4, G)


@pytest.mark.triton
def test_chunks_by_one_product_and_by_levels_in_one_sequence():
    """Chunks that fit the one product and chunks that take the levels alternate in one
    sequence with a ragged tail (each kernel that forms pairs takes its chunks in one of two
    launches): outputs, final state and every gradient against the loop."""
    B, T, H, S, D = 1, 100, 2, 12, 20
    leaves = make_leaves(B, T, H, S, D, torch.float32, decay_scale=10.0)
    leaves = mixed_decay(leaves, T, block=gdt.CHUNK)
    fits = one_product_chunks(leaves[3].detach(), leaves[4].detach(), gdt.CHUNK)
    assert fits.any() and not fits.all()
    do = torch.randn(B, T, H, D, dtype=torch.float64, device=DEVICE)
    dht = torch.randn(B, H, S, D, dtype=torch.float64, device=DEVICE)
    got = run(kernel, leaves, do, dht)
    ref = run(reference, [t.detach().double().requires_grad_() for t in leaves], do, dht)
    assert not too_far(got, ref, FP32_TOL, GATE_GRADS)


@pytest.mark.triton
def test_one_rate_per_head_fits_at_any_decay():
    """A head whose keys share one rate fits the one product however strong its decay: at
    rates of 100 and more every chunk fits, and every result agrees with the loop."""
    B, T, H, S, D = 1, 70, 2, 12, 20
    leaves = make_leaves(B, T, H, S, D, torch.float32)
    with torch.no_grad():
        leaves[4].copy_(leaves[4][:, :1].expand(H, S) * 100.0)  # A (H, S): one rate a head
    assert one_product_chunks(leaves[3].detach(), leaves[4].detach(), gdt.CHUNK).all()
    do = torch.randn(B, T, H, D, dtype=torch.float64, device=DEVICE)
    dht = torch.randn(B, H, S, D, dtype=torch.float64, device=DEVICE)
    got = run(kernel, leaves, do, dht)
    ref = run(reference, [t.detach().double().requires_grad_() for t in leaves], do, dht)
    assert not too_far(got, ref, FP32_TOL, GATE_GRADS)


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


@pytest.mark.triton
def test_inference_keeps_nothing():
    """Under torch.no_grad (or with no input needing a gradient) the forward stores neither
    Mk nor (I + M)⁻¹: the same o and final state, bit for bit, and no graph."""
    leaves = make_leaves(1, 45, 2, 12, 20, torch.float32)
    kept = kernel(*leaves, True)
    assert len(kept[0].grad_fn.saved_tensors) == 11
    with torch.no_grad():
        lean = kernel(*leaves, True)
    detached = kernel(*(t.detach() for t in leaves), True)
    for out in (lean, detached):
        assert all(torch.equal(x, y) for x, y in zip(kept, out, strict=True))
        assert out[0].grad_fn is None


def test_needs_gpu_or_interpreter(monkeypatch):
    monkeypatch.setattr(gdt, "INTERPRET", False)
    leaves = [t.detach().cpu() for t in make_leaves(1, 4, 1, 3, 3, torch.float32)]
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        chunk_gated_delta_triton(*leaves)


def test_bad_beta():
    v, b, c, g, A, beta, h0 = (t.detach() for t in make_leaves(1, 4, 1, 3, 3, torch.float32))
    with pytest.raises(ValueError, match="beta must have rank 3"):
        chunk_gated_delta_triton(v, b, c, g, A, beta[..., 0], h0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_empty_sequence(dtype):
    v, b, c, g, A, beta, h0 = (t.detach() for t in make_leaves(2, 0, 2, 3, 4, dtype))
    o, final = chunk_gated_delta_triton(v, b, c, g, A, beta, h0, output_final_state=True)
    assert o.shape == (2, 0, 2, 4) and final.dtype == dtype and torch.equal(final, h0)


@pytest.mark.triton
def test_backward_multiplies_as_its_forward_did(monkeypatch):
    """The products are chosen once, at the forward: allowing TF32 between the forward and
    the backward does not change how the backward multiplies."""
    seen = []
    backward = gdt._backward

    def spy(*args):
        seen.append(args[-1])
        return backward(*args)
    monkeypatch.setattr(gdt, "_backward", spy)
    leaves = make_leaves(1, 5, 1, 4, 4, torch.float32)
    with Fp32Precision("highest"):
        o, _ = kernel(*leaves, False)
    with Fp32Precision("high"):
        o.sum().backward()
    assert seen == [products(torch.float32, False)] != ["tf32"]


def test_16bit_inputs_take_their_own_launch_settings():
    """bf16 and fp16 inputs launch with LAUNCH_16BIT where it has the kernel, fp32 with
    LAUNCH."""
    for name in gdt.LAUNCH:
        split, fp32 = gdt._launch(name, half=False)
        want = dict(gdt.LAUNCH[name])
        assert split == want.pop("split", None) and fp32 == want
        split, half = gdt._launch(name, half=True)
        want = dict(gdt.LAUNCH_16BIT.get(name, gdt.LAUNCH[name]))
        assert split == want.pop("split", None) and half == want
