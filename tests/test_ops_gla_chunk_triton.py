"""The chunked Triton kernels of the gla rule (hymo_mini.ops.gla.chunk_triton) against the
plain loop naive_gla in fp64.

Forward output, final state and every gradient (v, b, c, g, A, A_log, initial_state), by
relative RMS error, on awkward sizes (T = 1, T = 63, S = 12, D = 20, S = D = 32, B and
H > 1, T across several chunks with a ragged tail) and decays scaled by 0.01, 1 and 10,
with chunks that fit the one product and chunks that take the levels. On the CPU the
kernels run under the Triton interpreter (plain fp32 products); on a GPU, fp32 inputs get
six bf16 products each (fp32-grade) and 16-bit inputs bf16 or TF32 products.
"""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from gdn_oracle import (
    DEVICE,
    GATE_GRADS,
    compare_to_reference,
    make_leaves,
    mixed_decay,
    reference,
    rel_err,
    run,
    too_far,
)

import hymo_mini.ops.gla.chunk_triton as gtc
from hymo_mini.ops import gated_linear_attention, naive_gla, one_product_chunks
from hymo_mini.ops.gla.chunk_triton import chunk_gla_triton
from hymo_mini.ops.utils.precision import INTERPRET, dot, products

FP32_TOL = 1e-4 if DEVICE == "cuda" else 2e-5  # gate gradients (dg, dA) get 5x more room
LOW_TOL = 1e-2  # bf16 / fp16 inputs and outputs


def check(B, T, H, S, D, dtype, decay_scale, with_h0, output_final_state):
    tol = FP32_TOL if dtype == torch.float32 else LOW_TOL
    return compare_to_reference(chunk_gla_triton, B, T, H, S, D, dtype,
                                decay_scale, with_h0, output_final_state, tol, gate_tol=5 * tol)


CASES = {
    # name: (B, T, H, S, D, dtype, decay_scale, with_h0, output_final_state)
    "T63_S12_D20": (2, 63, 2, 12, 20, torch.float32, 1.0, True, True),
    "T1_no_state": (2, 1, 2, 12, 20, torch.float32, 1.0, False, True),
    "S32_D32_strong": (1, 40, 2, 32, 32, torch.float32, 10.0, True, True),
    "S32_D32_weak_no_final": (2, 33, 2, 32, 32, torch.float32, 0.01, False, False),
    "bf16": (2, 37, 2, 12, 20, torch.bfloat16, 1.0, True, True),
    "fp16_strong": (1, 45, 2, 12, 20, torch.float16, 10.0, True, True),
}


@pytest.mark.triton
@pytest.mark.parametrize("case", list(CASES))
def test_kernel_matches_reference(case):
    check(*CASES[case])


@pytest.mark.triton
@pytest.mark.parametrize("T", [70, 85, 102, 119, 128])
def test_last_block_at_every_place_in_its_chunk(T):
    """Several chunks; the sequence ends in a partial block at each place of the last chunk
    (T = 64 + 16·i + 5..7 with chunks of 32 under the interpreter, of 128 on a GPU) or on a
    chunk boundary (128). Weak decay, so that every earlier block's writes count."""
    check(1, T, 2, 32, 20, torch.float32, 0.01, True, True)


@pytest.mark.triton
def test_the_gpu_chunk_and_state_blocks(monkeypatch):
    """The GPU's chunks of 128 steps, and (under the interpreter too) the state passes split
    into blocks narrower than S and D: 8 x 8 for the scan, 16 x 16 for the gradient pass
    (S = 12, D = 20: masked blocks); strong decay."""
    monkeypatch.setattr(gtc, "CHUNK", 128)
    monkeypatch.setattr(gtc, "SPLIT", 8)
    check(1, 300, 2, 12, 20, torch.float32, 10.0, True, True)


def _mixed_leaves(B, T, H, S, D, block):
    return mixed_decay(make_leaves(B, T, H, S, D, torch.float32), T, block=block)


@pytest.mark.triton
def test_chunks_by_one_product_and_by_levels_in_one_sequence():
    """Chunks that fit the one product and chunks that take the levels alternate in one
    sequence with a ragged tail (the two launches of the output kernel each take theirs):
    outputs, final state and every gradient against the loop."""
    # chunks 0 and 2 fit, 1 and 3 (ragged) do not; T = 100 under the interpreter's chunks
    B, T, H, S, D = 1, 3 * gtc.CHUNK + gtc.CHUNK // 8, 2, 12, 20
    leaves = _mixed_leaves(B, T, H, S, D, gtc.CHUNK)
    fits = one_product_chunks(leaves[3].detach(), -torch.exp(leaves[4].detach()) * 10.0,
                              gtc.CHUNK)
    assert fits.any() and not fits.all()  # both kinds present
    do = torch.randn(B, T, H, D, dtype=torch.float64, device=DEVICE)
    dht = torch.randn(B, H, S, D, dtype=torch.float64, device=DEVICE)
    got = run(lambda *a: chunk_gla_triton(*a), leaves, 10.0, do, dht)
    ref = run(reference, [t.detach().double().requires_grad_() for t in leaves], 10.0, do, dht)
    assert not too_far(got, ref, FP32_TOL, GATE_GRADS)


@pytest.mark.triton
def test_one_rate_per_head_fits_at_any_decay():
    """A head whose keys share one rate fits the one product however strong its decay (the
    decay they share is a tile of its own): at rates of 100 and more every chunk fits, and
    outputs, final state and every gradient agree with the loop."""
    B, T, H, S, D = 1, 70, 2, 12, 20
    leaves = make_leaves(B, T, H, S, D, torch.float32)
    with torch.no_grad():
        leaves[4].copy_(leaves[4][:, :1].expand(H, S))  # A_log (H, S): each head one rate
    A = -torch.exp(leaves[4].detach()) * 100.0
    assert one_product_chunks(leaves[3].detach(), A, gtc.CHUNK).all()
    do = torch.randn(B, T, H, D, dtype=torch.float64, device=DEVICE)
    dht = torch.randn(B, H, S, D, dtype=torch.float64, device=DEVICE)
    got = run(lambda *a: chunk_gla_triton(*a), leaves, 100.0, do, dht)
    ref = run(reference, [t.detach().double().requires_grad_() for t in leaves], 100.0, do, dht)
    assert not too_far(got, ref, FP32_TOL, GATE_GRADS)


@pytest.mark.triton
def test_only_final_state_used():
    """A loss on the final state alone: autograd hands the backward do = None."""
    v, b, c, g, A_log = (t.detach().requires_grad_()
                         for t in make_leaves(1, 20, 2, 12, 20, torch.float32, False))
    _, final = chunk_gla_triton(v, b, c, g, -torch.exp(A_log), None, True)
    final.sum().backward()
    ref_leaves = [t.detach().double().requires_grad_() for t in (v, b, c, g, A_log)]
    _, final_ref = naive_gla(*ref_leaves[:4], -torch.exp(ref_leaves[4]))
    final_ref.sum().backward()
    for t, r in zip((v, b, g, A_log), ref_leaves[:2] + ref_leaves[3:], strict=True):
        assert rel_err(t.grad, r.grad) < 5 * FP32_TOL
    assert ref_leaves[2].grad is None  # c only reads: it has no path to the state
    assert torch.equal(c.grad, torch.zeros_like(c))


@pytest.mark.triton
def test_dispatcher_and_layout():
    """backend="chunk_triton" through the dispatcher, on non-contiguous inputs."""
    v, b, c, g, A_log, h0 = (t.detach() for t in make_leaves(2, 24, 3, 8, 8, torch.float32))
    b_t = b.transpose(1, 2).contiguous().transpose(1, 2)  # same values, other strides
    assert not b_t.is_contiguous()
    A = -torch.exp(A_log)
    o, final = gated_linear_attention(v, b_t, c, g, A, initial_state=h0,
                                      output_final_state=True, backend="chunk_triton")
    o_ref, final_ref = naive_gla(v, b, c, g, A, h0)
    assert rel_err(o, o_ref) < FP32_TOL and rel_err(final, final_ref) < FP32_TOL


@pytest.mark.triton
def test_comparison_can_fail():
    """The checks above are not vacuous: one head decaying 50% faster is far above the
    tolerance, and (in exact fp32, on CPU) so is one step's gate changed by 1%."""
    v, b, c, g, A_log = (t.detach() for t in make_leaves(1, 20, 2, 6, 5, torch.float32, False))
    A = -torch.exp(A_log)
    o_ref, _ = naive_gla(v, b, c, g, A)
    A_wrong = A.clone()
    A_wrong[1] *= 1.5
    o_wrong, _ = chunk_gla_triton(v, b, c, g, A_wrong)
    assert rel_err(o_wrong, o_ref) > 10 * FP32_TOL
    if DEVICE == "cpu":
        g_wrong = g.clone()
        g_wrong[0, 3, 1] *= 1.01
        o_wrong, _ = chunk_gla_triton(v, b, c, g_wrong, A)
        assert rel_err(o_wrong, o_ref) > 5 * FP32_TOL


@pytest.mark.triton
def test_inference_keeps_nothing():
    """Under torch.no_grad (or with no input needing a gradient) the forward stores no block
    states: the same o and final state, bit for bit, and nothing kept for a backward."""
    v, b, c, g, A_log, h0 = make_leaves(1, 45, 2, 12, 20, torch.float32, with_h0=True)
    A = -torch.exp(A_log)
    kept = chunk_gla_triton(v, b, c, g, A, h0, True)
    assert len(kept[0].grad_fn.saved_tensors) == 7
    with torch.no_grad():
        lean = chunk_gla_triton(v, b, c, g, A, h0, True)
    detached = chunk_gla_triton(*(t.detach() for t in (v, b, c, g, A, h0)), True)
    for out in (lean, detached):
        assert all(torch.equal(x, y) for x, y in zip(kept, out, strict=True))
        assert out[0].grad_fn is None


def test_needs_gpu_or_interpreter(monkeypatch):
    monkeypatch.setattr(gtc, "INTERPRET", False)
    v, b, c, g, A_log = (t.detach().cpu() for t in make_leaves(1, 4, 1, 3, 3, torch.float32,
                                                               False))
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        chunk_gla_triton(v, b, c, g, -torch.exp(A_log))


def test_empty_sequence():
    v, b, c, g, A_log, h0 = (t.detach() for t in make_leaves(2, 0, 2, 3, 4, torch.float32))
    o, final = chunk_gla_triton(v, b, c, g, -torch.exp(A_log), h0, True)
    assert o.shape == (2, 0, 2, 4) and torch.equal(final, h0)


class Fp32Precision:
    """PyTorch's fp32 matmul precision for a ``with`` block, restored afterwards through the
    public setter (whatever this build of PyTorch exposes underneath)."""

    def __init__(self, precision: str):
        self.precision = precision

    def __enter__(self):
        self.saved = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision(self.precision)

    def __exit__(self, *exc):
        torch.set_float32_matmul_precision(self.saved)


def test_products_by_dtype_and_direction():
    """fp32 inputs: fp32-grade products (six bf16 products on a GPU, plain fp32 under the
    interpreter), plain TF32 once the user allows it; 16-bit inputs: bf16 products forward,
    TF32 backward."""
    with Fp32Precision("highest"):
        grade = "ieee" if INTERPRET else "bf16x6"
        assert products(torch.float32, True) == products(torch.float32, False) == grade
        assert products(torch.float64, True) == grade
        for half in (torch.bfloat16, torch.float16):
            assert (products(half, True), products(half, False)) == ("bf16", "tf32")
    with Fp32Precision("high"):
        assert products(torch.float32, True) == products(torch.float32, False) == "tf32"


@pytest.mark.triton
def test_backward_multiplies_as_its_forward_did(monkeypatch):
    """The products are chosen once, at the forward: allowing TF32 between the forward and
    the backward does not change how the backward multiplies."""
    seen = []
    backward = gtc._backward

    def spy(*args):
        seen.append(args[-1])
        return backward(*args)
    monkeypatch.setattr(gtc, "_backward", spy)
    v, b, c, g, A_log, _ = make_leaves(1, 5, 1, 3, 3, torch.float32)
    with Fp32Precision("highest"):
        o, _ = chunk_gla_triton(v, b, c, g, -torch.exp(A_log))
    with Fp32Precision("high"):
        o.sum().backward()
    assert seen == [products(torch.float32, False)] != ["tf32"]


@triton.jit
def _product_kernel(a, b, out, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr,
                    PRECISION: tl.constexpr):
    o_m, o_k, o_n = tl.arange(0, M), tl.arange(0, K), tl.arange(0, N)
    x = tl.load(a + o_m[:, None] * K + o_k[None, :])
    y = tl.load(b + o_k[:, None] * N + o_n[None, :])
    tl.store(out + o_m[:, None] * N + o_n[None, :], dot(x, y, PRECISION))


@pytest.mark.triton
def test_six_bf16_products_are_fp32_grade():
    """``dot`` with "bf16x6" (each operand as three bf16 pieces, six of their products):
    within 1e-6 of the exact product of fp32 blocks whose entries span 25 binades, where one
    product of bf16 roundings is off by more than 1e-4. (Under the interpreter the pieces
    are rounded by their bits and multiplied in fp32.)"""
    gen = torch.Generator().manual_seed(0)
    spread = 2.0 ** torch.randint(-12, 13, (16, 32), generator=gen)
    a = (torch.randn(16, 32, generator=gen) * spread).to(DEVICE)
    b = torch.randn(32, 16, generator=gen).to(DEVICE)
    exact = a.double() @ b.double()
    err = {}
    for name in ("bf16x6", "bf16"):
        out = torch.empty(16, 16, device=DEVICE)
        _product_kernel[(1,)](a, b, out, M=16, K=32, N=16, PRECISION=name)
        err[name] = rel_err(out.double(), exact)
    assert err["bf16x6"] < 1e-6 < 1e-4 < err["bf16"], err
