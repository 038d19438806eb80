"""The chunked Triton GDN kernel (hymo_mini.ops.gla.chunk_triton) against naive_gla.

Forward output, final state and every gradient (v, b, c, g, A, A_log, initial_state), by
relative RMS error, on awkward sizes (T = 1, T = 63, S = 12, D = 20, S = D = 32, B and
H > 1, T across several chunks with a ragged tail) and decays scaled by 0.1, 1 and 10.
On CPU the kernels run under the Triton interpreter, which computes tl.dot in plain fp32;
on a GPU, fp32 products are TF32 and the tolerance is looser.
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
from hymo_mini.ops import gated_linear_attention, naive_gla
from hymo_mini.ops.gla.chunk_states import _dot
from hymo_mini.ops.gla.chunk_triton import chunk_gla_triton

# fp32: plain fp32 products in the interpreter; TF32 (10-bit mantissa) on the GPU.
# The gate gradients dg, dA sum many cancelling terms, so they get 5x more room.
FP32_TOL = 5e-3 if DEVICE == "cuda" else 2e-5
LOW_TOL = 1e-2  # bf16 / fp16 inputs and outputs
ACTIVE = "INTERPRET_CONFIGS" if gtc.INTERPRET else "CONFIGS"  # the launch settings in use


def check(B, T, H, S, D, dtype, decay_scale, with_h0, output_final_state):
    tol = FP32_TOL if dtype == torch.float32 else LOW_TOL
    return compare_to_reference(chunk_gla_triton, B, T, H, S, D, dtype,
                                decay_scale, with_h0, output_final_state, tol, gate_tol=5 * tol)


CASES = {
    # name: (B, T, H, S, D, dtype, decay_scale, with_h0, output_final_state)
    "T63_S12_D20": (2, 63, 2, 12, 20, torch.float32, 1.0, True, True),
    "T1_no_state": (2, 1, 2, 12, 20, torch.float32, 1.0, False, True),
    "S32_D32_strong": (1, 40, 2, 32, 32, torch.float32, 10.0, True, True),
    "S32_D32_weak_no_final": (2, 33, 2, 32, 32, torch.float32, 0.1, False, False),
    "bf16": (2, 37, 2, 12, 20, torch.bfloat16, 1.0, True, True),
    "fp16_strong": (1, 20, 2, 12, 20, torch.float16, 10.0, True, True),
}


@pytest.mark.triton
@pytest.mark.parametrize("forward", gtc.FORWARDS)
@pytest.mark.parametrize("case", list(CASES))
def test_kernel_matches_reference(monkeypatch, case, forward):
    """Both forwards (one launch, handing the chunk states on; or three, with a scan)."""
    monkeypatch.setattr(gtc, ACTIVE, dict(getattr(gtc, ACTIVE), forward=forward))
    check(*CASES[case])


@pytest.mark.triton
@pytest.mark.parametrize("block", gtc.BLOCKS)
def test_gpu_blocking_under_the_interpreter(monkeypatch, block):
    """The GPU configuration: chunks of 64 (blocks of 16 or 32 steps, a ragged last chunk)
    and the state kernels split into 16 x 16 blocks of (S, D) = (32, 20): masked tails;
    strong decay."""
    monkeypatch.setattr(gtc, ACTIVE, dict(gtc.CONFIGS, chunk=64, block=block))
    check(1, 70, 2, 32, 20, torch.float32, 10.0, True, True)


@pytest.mark.triton
@pytest.mark.parametrize("block_states", gtc.BLOCK_STATES)
def test_block_states_stored_or_rebuilt(monkeypatch, block_states):
    """The backward's block-start states, stored by the forward or rebuilt from the chunk
    states (GPU chunks of 64, blocks of 16, a ragged last chunk): the same gradients, and
    under "recompute" the forward keeps a quarter of the states."""
    monkeypatch.setattr(gtc, ACTIVE, dict(gtc.CONFIGS, chunk=64, block=16,
                                          block_states=block_states))
    check(1, 70, 2, 32, 20, torch.float32, 10.0, True, True)
    v, b, c, g, A_log = (t.detach().requires_grad_()
                         for t in make_leaves(1, 70, 2, 32, 20, torch.float32, False))
    o, _ = chunk_gla_triton(v, b, c, g, -torch.exp(A_log))
    kept = o.grad_fn.saved_tensors[-1]  # the states the backward will read
    assert kept.shape[1] == (5 if block_states == "store" else 2)  # ⌈70/16⌉, ⌈70/64⌉


@pytest.mark.triton
@pytest.mark.parametrize("block_states", gtc.BLOCK_STATES)
@pytest.mark.parametrize("T", [85, 102, 119, 128])
def test_last_block_at_every_place_in_its_chunk(monkeypatch, T, block_states):
    """The sequence ends in a partial block at each place of a 64-step chunk after the
    first (T = 64 + 16·i + 5..7; i = 0 is T = 70 above) or on a chunk boundary (128), with
    the block states stored or rebuilt. Weak decay, so that the earlier blocks' writes
    count in every later block's output."""
    monkeypatch.setattr(gtc, ACTIVE, dict(gtc.CONFIGS, chunk=64, block=16,
                                          block_states=block_states))
    check(1, T, 2, 32, 20, torch.float32, 0.1, True, True)


@pytest.mark.triton
@pytest.mark.parametrize("block_states", gtc.BLOCK_STATES)
@pytest.mark.parametrize("T", [37, 70, 128])
def test_unrolled_walk(monkeypatch, T, block_states):
    """The output kernel's walk as straight-line code (CONFIGS["output_fwd"]["unroll"]):
    every block of a chunk is visited, so blocks past the end of the sequence (T = 37 ends
    in the third block of its only chunk, 70 in the first of its second) must leave the
    outputs and the stored block states alone; T = 128 ends on a chunk boundary."""
    fwd = dict(gtc.CONFIGS["output_fwd"], unroll=True)
    monkeypatch.setattr(gtc, ACTIVE, dict(gtc.CONFIGS, chunk=64, block=16, forward="scan",
                                          block_states=block_states, output_fwd=fwd))
    check(1, T, 2, 32, 20, torch.float32, 0.1, True, True)


@pytest.mark.triton
@pytest.mark.parametrize("case", ["chunks_64", "chunks_64_rebuilt", "chunks_128",
                                  "many_chunks"])
def test_chained_forward(monkeypatch, case):
    """The forward in one launch (hymo_mini.ops.gla.chunk_chain) at the GPU's settings:
    chunks of 64 and 128 steps with a ragged last chunk (block states stored and rebuilt),
    and a sequence of many chunks with several heads, whose programs each wait for the
    state of the chunk before."""
    shapes = {"chunks_64": (64, (1, 70, 2, 32, 20, torch.float32, 10.0, True, True)),
              "chunks_64_rebuilt": (64, (1, 119, 2, 32, 20, torch.float32, 0.1, True, True)),
              "chunks_128": (128, (1, 300, 2, 32, 20, torch.float32, 1.0, True, True)),
              "many_chunks": (64, (2, 300, 3, 12, 20, torch.float32, 0.1, True, True))}
    chunk, shape = shapes[case]
    config = dict(gtc.CONFIGS, forward="chain", chunk=chunk)
    if case.endswith("rebuilt"):
        config["block_states"] = "recompute"
    monkeypatch.setattr(gtc, ACTIVE, config)
    check(*shape)


@pytest.mark.triton
@pytest.mark.parametrize("reach", [2, 3, 5])
def test_chained_forward_reach(monkeypatch, reach):
    """Each program bases its start state on the state `reach` chunks back and the chunks
    between (5 chunks of 64 steps, a ragged tail): reach 5 puts every chunk's base at the
    initial state; with and without one, weak decay so that early chunks still count."""
    monkeypatch.setattr(gtc, ACTIVE, dict(gtc.CONFIGS, forward="chain", chunk=64, reach=reach))
    check(2, 300, 3, 12, 20, torch.float32, 0.1, True, True)
    check(1, 260, 2, 32, 32, torch.bfloat16, 1.0, False, True)


def test_reach_auto_keeps_chains_short(monkeypatch):
    """"auto": REACH, or more where a chain would pass HOPS links."""
    monkeypatch.setattr(gtc, ACTIVE, dict(getattr(gtc, ACTIVE), reach="auto"))
    n = gtc.HOPS * gtc.REACH
    assert [gtc._reach(k) for k in (1, n, n + 1, 4 * n)] == [gtc.REACH, gtc.REACH,
                                                             gtc.REACH + 1, 4 * gtc.REACH]


def test_reach_checked(monkeypatch):
    monkeypatch.setattr(gtc, ACTIVE, dict(getattr(gtc, ACTIVE), forward="chain", reach=0))
    leaves = [t.detach() for t in make_leaves(1, 8, 1, 4, 4, torch.float32, False)]
    with pytest.raises(ValueError, match=r"reach.*positive integer.*got 0"):
        chunk_gla_triton(*leaves[:4], -torch.exp(leaves[4]))


@pytest.mark.triton
@pytest.mark.skipif(DEVICE != "cuda", reason="the programs' order matters only on a GPU")
@pytest.mark.parametrize("reach", [1, 4])
def test_chained_forward_is_deterministic(monkeypatch, reach):
    """Whichever program takes which ticket, every state is formed by the same operations:
    two calls give the same bits."""
    monkeypatch.setattr(gtc, ACTIVE, dict(gtc.CONFIGS, forward="chain", reach=reach))
    v, b, c, g, A_log, h0 = (t.detach() for t in make_leaves(4, 1000, 8, 32, 32,
                                                               torch.float32))
    first = chunk_gla_triton(v, b, c, g, -torch.exp(A_log), h0, True)
    again = chunk_gla_triton(v, b, c, g, -torch.exp(A_log), h0, True)
    assert all(torch.equal(x, y) for x, y in zip(first, again, strict=True))


@pytest.mark.triton
def test_one_block_per_chunk(monkeypatch):
    """Chunks as short as a block (16 steps): the chunk states are the block states, nothing
    is stored or rebuilt besides them; a ragged last chunk, strong decay."""
    monkeypatch.setattr(gtc, ACTIVE, dict(gtc.CONFIGS, chunk=16, block=16))
    check(1, 37, 2, 32, 20, torch.float32, 10.0, True, True)


def test_block_size_checked(monkeypatch):
    monkeypatch.setattr(gtc, ACTIVE, dict(getattr(gtc, ACTIVE), block=64))
    leaves = [t.detach() for t in make_leaves(1, 8, 1, 4, 4, torch.float32, False)]
    with pytest.raises(ValueError, match="block"):
        chunk_gla_triton(*leaves[:4], -torch.exp(leaves[4]))


def test_block_states_checked(monkeypatch):
    monkeypatch.setattr(gtc, ACTIVE, dict(getattr(gtc, ACTIVE), block_states="keep"))
    leaves = [t.detach() for t in make_leaves(1, 8, 1, 4, 4, torch.float32, False)]
    with pytest.raises(ValueError, match=r"block_states.*'store', 'recompute'.*'keep'"):
        chunk_gla_triton(*leaves[:4], -torch.exp(leaves[4]))


def test_forward_checked(monkeypatch):
    monkeypatch.setattr(gtc, ACTIVE, dict(getattr(gtc, ACTIVE), forward="chained"))
    leaves = [t.detach() for t in make_leaves(1, 8, 1, 4, 4, torch.float32, False)]
    with pytest.raises(ValueError, match=r"forward.*'scan', 'chain'.*'chained'"):
        chunk_gla_triton(*leaves[:4], -torch.exp(leaves[4]))


@pytest.mark.triton
@pytest.mark.parametrize("split", [8, 1 << 30])
def test_parallel_state_scan(monkeypatch, split):
    """The scan of the forward's chunk states over the whole state or 8 x 8 blocks of it
    (S = 12: masked blocks)."""
    monkeypatch.setattr(gtc, ACTIVE, dict(
        getattr(gtc, ACTIVE), state_scan=dict(split=split, num_warps=1, num_stages=1)))
    check(2, 45, 2, 12, 20, torch.float32, 1.0, True, True)


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
    o, final = gated_linear_attention(v, b_t, c, g, A, initial_state=h0, output_final_state=True,
                                backend="chunk_triton")
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



@pytest.mark.triton
@pytest.mark.parametrize("pairs", gtc.PAIRS)
@pytest.mark.parametrize("forward", gtc.FORWARDS)
def test_pairs_one_product_or_levels(monkeypatch, pairs, forward):
    """The chunks whose blocks all fit by one product and the others by the levels, in
    two launches ("auto"), or every chunk by the levels: chunks of both kinds in one
    sequence with a ragged tail, outputs, final state and every gradient against the loop."""
    monkeypatch.setattr(gtc, ACTIVE, dict(getattr(gtc, ACTIVE), pairs=pairs, forward=forward,
                                          chunk=32))
    B, T, H, S, D = 1, 100, 2, 12, 20  # chunks 0 and 2 fit, 1 and 3 (ragged) do not
    leaves = mixed_decay(make_leaves(B, T, H, S, D, torch.float32), T, block=32)
    do = torch.randn(B, T, H, D, dtype=torch.float64, device=DEVICE)
    dht = torch.randn(B, H, S, D, dtype=torch.float64, device=DEVICE)
    o, final, grads = run(lambda *a: chunk_gla_triton(*a), leaves, 10.0, do, dht)
    ref = [t.detach().double().requires_grad_() for t in leaves]
    o_ref, final_ref, grads_ref = run(reference, ref, 10.0, do, dht)
    errors = {"o": rel_err(o, o_ref), "final": rel_err(final, final_ref)}
    errors.update({"d" + n: rel_err(x, grads_ref[n]) for n, x in grads.items()})
    bad = {k: e for k, e in errors.items() if not e < (5 if k in GATE_GRADS else 1) * FP32_TOL}
    assert not bad, errors


@pytest.mark.triton
@pytest.mark.parametrize("forward", gtc.FORWARDS)
def test_pairs_take_one_product_only_where_the_decay_allows(monkeypatch, forward):
    """"auto" and "levels" give the same bits where every block's decay is far past 2^64
    (both take the levels), and other bits (within the tolerance) where every block's is
    small (one product)."""
    leaves = [t.detach() for t in make_leaves(1, 40, 2, 32, 32, torch.float32)]
    v, b, c, g, A_log, h0 = leaves
    outputs = {}
    for scale in (100.0, 0.01):
        for pairs in gtc.PAIRS:
            monkeypatch.setattr(gtc, ACTIVE, dict(getattr(gtc, ACTIVE), pairs=pairs,
                                                  forward=forward))
            outputs[scale, pairs] = chunk_gla_triton(v, b, c, g, -torch.exp(A_log) * scale,
                                                     h0)[0]
    assert torch.equal(outputs[100.0, "auto"], outputs[100.0, "levels"])
    assert not torch.equal(outputs[0.01, "auto"], outputs[0.01, "levels"])
    assert rel_err(outputs[0.01, "auto"], outputs[0.01, "levels"]) < FP32_TOL


@pytest.mark.triton
@pytest.mark.parametrize("forward", gtc.FORWARDS)
def test_one_rate_per_head_takes_one_product_at_any_decay(monkeypatch, forward):
    """A head whose keys share one rate fits the one product however strong its decay (the
    decay they share is a tile of its own, ``chunk_blocks._pairs``): at rates of 100 and
    more, "auto" gives other bits than "levels", and both agree with the loop (outputs,
    final state, every gradient)."""
    B, T, H, S, D = 1, 70, 2, 12, 20
    leaves = make_leaves(B, T, H, S, D, torch.float32)
    with torch.no_grad():
        leaves[4].copy_(leaves[4][:, :1].expand(H, S))  # A_log (H, S): each head one rate
    do = torch.randn(B, T, H, D, dtype=torch.float64, device=DEVICE)
    dht = torch.randn(B, H, S, D, dtype=torch.float64, device=DEVICE)
    ref = run(reference, [t.detach().double().requires_grad_() for t in leaves], 100.0, do, dht)
    outputs = {}
    for pairs in gtc.PAIRS:
        monkeypatch.setattr(gtc, ACTIVE, dict(getattr(gtc, ACTIVE), pairs=pairs,
                                              forward=forward, chunk=32))
        got = run(lambda *a: chunk_gla_triton(*a),
                  [t.detach().clone().requires_grad_() for t in leaves], 100.0, do, dht)
        outputs[pairs] = got[0]
        assert not too_far(got, ref, FP32_TOL, GATE_GRADS), pairs
    assert not torch.equal(outputs["auto"], outputs["levels"])


def test_pairs_setting_checked(monkeypatch):
    monkeypatch.setattr(gtc, ACTIVE, dict(getattr(gtc, ACTIVE), pairs="fast"))
    with pytest.raises(ValueError, match="pairs"):
        chunk_gla_triton(*(t.detach() for t in make_leaves(1, 4, 1, 3, 3, torch.float32)))




@pytest.mark.triton
@pytest.mark.parametrize("forward", gtc.FORWARDS)
def test_forward_without_autograd(monkeypatch, forward):
    """Where no backward can follow (torch.no_grad, or no input needing a gradient) the
    dispatcher runs the forward without the autograd Function: the same o and final state,
    bit for bit, as the Function's, and the Function not applied."""
    monkeypatch.setattr(gtc, ACTIVE, dict(getattr(gtc, ACTIVE), forward=forward))
    v, b, c, g, A_log, h0 = make_leaves(1, 45, 2, 12, 20, torch.float32, with_h0=True)
    A = -torch.exp(A_log)
    kept = gtc.ChunkGLAFunction.apply(v, b, c, g, A, h0, True)

    def refuse(*args):
        raise AssertionError("the autograd Function was applied")
    monkeypatch.setattr(gtc.ChunkGLAFunction, "apply", refuse)
    with torch.no_grad():
        lean = chunk_gla_triton(v, b, c, g, A, h0, True)
    detached = chunk_gla_triton(*(t.detach() for t in (v, b, c, g, A, h0)), True)
    for out in (lean, detached):
        assert all(torch.equal(x, y) for x, y in zip(kept, out, strict=True))
        assert out[0].grad_fn is None


def test_backward_after_a_forward_that_kept_nothing_says_why():
    v, b, c, g, A_log, _ = make_leaves(1, 4, 1, 3, 3, torch.float32)
    o, _ = gtc.ChunkGLAFunction.apply(v, b, c, g, -torch.exp(A_log), None, False, False)
    with pytest.raises(RuntimeError, match="grad_mode=False"):
        o.sum().backward()


@pytest.mark.triton
def test_backward_multiplies_as_its_forward_did(monkeypatch):
    """The products' grade is chosen once, at the forward: turning PyTorch's TF32 switch on
    between the forward and the backward does not change how the backward multiplies."""
    seen = []
    backward = gtc._backward

    def spy(*args):
        seen.append(args[-1])
        return backward(*args)
    monkeypatch.setattr(gtc, "_backward", spy)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    v, b, c, g, A_log, _ = make_leaves(1, 5, 1, 3, 3, torch.float32)
    fp32_grade = gtc._precision(v, b, c)  # "tf32x3", or "bf16x6" as CONFIGS says
    o, _ = gtc.ChunkGLAFunction.apply(v, b, c, g, -torch.exp(A_log), None, False)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", True)
    o.sum().backward()
    assert seen == [fp32_grade] and fp32_grade in ("tf32x3", "bf16x6")


@pytest.mark.triton
def test_blocking_changed_between_forward_and_backward_says_so(monkeypatch):
    """The block states the forward keeps are laid out by its chunk and block settings: a
    backward under others stops with a message naming the setting that changed."""
    monkeypatch.setattr(gtc, ACTIVE, dict(getattr(gtc, ACTIVE), chunk=32, block=16))
    v, b, c, g, A_log, _ = make_leaves(1, 40, 1, 3, 3, torch.float32)
    o, _ = gtc.ChunkGLAFunction.apply(v, b, c, g, -torch.exp(A_log), None, False)
    monkeypatch.setattr(gtc, ACTIVE, dict(getattr(gtc, ACTIVE), chunk=32, block=32))
    with pytest.raises(RuntimeError, match=r"CONFIGS\['block'\] 16 -> 32 between the forward"):
        o.sum().backward()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_bf16_products_for_16bit_inputs(monkeypatch, dtype):
    """CONFIGS["half_products"] = "bf16": the forward of 16-bit inputs multiplies bf16
    roundings of the blocks (fp32 sums), the backward TF32; output, final state and every
    gradient stay within the 16-bit tolerance of the loop, across chunks, with an initial
    state and strong decay."""
    monkeypatch.setattr(gtc, ACTIVE, dict(getattr(gtc, ACTIVE), half_products="bf16"))
    check(2, 45, 2, 12, 20, dtype, 10.0, True, True)


def test_half_products_apply_to_16bit_inputs_only(monkeypatch):
    monkeypatch.setattr(gtc, ACTIVE, dict(getattr(gtc, ACTIVE), half_products="bf16"))
    x16, x32 = torch.zeros(1, dtype=torch.bfloat16), torch.zeros(1)
    assert gtc._precision(x16, x16, x16, forward=True) == (
        "bf16_rounded" if gtc.INTERPRET else "bf16")
    assert gtc._precision(x16, x16, x16) == "tf32"  # the backward's
    assert gtc._precision(x32, x32, x32, forward=True) == "tf32x3"  # fp32: its default
    monkeypatch.setattr(gtc, ACTIVE, dict(getattr(gtc, ACTIVE), half_products="fp8"))
    with pytest.raises(ValueError, match=r"CONFIGS\['half_products'\] must be one of"):
        gtc._precision(x16, x16, x16, forward=True)
    assert gtc._precision(x32, x32, x32, forward=True) == "tf32x3"


@triton.jit
def _product_kernel(a, b, out, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr,
                    PRECISION: tl.constexpr):
    o_m, o_k, o_n = tl.arange(0, M), tl.arange(0, K), tl.arange(0, N)
    x = tl.load(a + o_m[:, None] * K + o_k[None, :])
    y = tl.load(b + o_k[:, None] * N + o_n[None, :])
    tl.store(out + o_m[:, None] * N + o_n[None, :], _dot(x, y, PRECISION))


@pytest.mark.triton
def test_six_bf16_products_are_fp32_grade():
    """``_dot`` with "bf16x6" (each operand as three bf16 pieces, six of their products):
    within 1e-6 of the exact product of fp32 blocks whose entries span many binades, where
    one product of bf16 roundings is off by more than 1e-4. (Under the interpreter the
    pieces are rounded by their bits and multiplied in fp32: "bf16x6_rounded".)"""
    gen = torch.Generator().manual_seed(0)
    spread = 2.0 ** torch.randint(-12, 13, (16, 32), generator=gen)  # 25 binades
    a = (torch.randn(16, 32, generator=gen) * spread).to(DEVICE)
    b = torch.randn(32, 16, generator=gen).to(DEVICE)
    exact = a.double() @ b.double()
    rounded = "_rounded" if gtc.INTERPRET else ""
    err = {}
    for name in ("bf16x6", "bf16"):
        out = torch.empty(16, 16, device=DEVICE)
        _product_kernel[(1,)](a, b, out, M=16, K=32, N=16, PRECISION=name + rounded)
        err[name] = rel_err(out.double(), exact)
    assert err["bf16x6"] < 1e-6 < 1e-4 < err["bf16"], err


@pytest.mark.triton
@pytest.mark.parametrize("forward", gtc.FORWARDS)
def test_bf16x6_products_for_fp32_inputs(monkeypatch, forward):
    """CONFIGS["fp32_products"] = "bf16x6" both ways (the GPU's backward by default): fp32
    inputs keep the fp32 tolerance of the loop, output, final state and every gradient,
    with an initial state and strong decay, across chunks."""
    six = dict(forward="bf16x6", backward="bf16x6")
    monkeypatch.setattr(gtc, ACTIVE, dict(getattr(gtc, ACTIVE), forward=forward,
                                          fp32_products=six))
    check(1, 70, 2, 12, 20, torch.float32, 10.0, True, True)


def test_fp32_products_setting_checked(monkeypatch):
    """Where the grade is fp32's, CONFIGS["fp32_products"] picks each direction's products;
    a value it does not know stops the call, whatever the inputs' dtype."""
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    x16, x32 = torch.zeros(1, dtype=torch.bfloat16), torch.zeros(1)
    monkeypatch.setattr(gtc, ACTIVE, dict(getattr(gtc, ACTIVE),
                                          fp32_products=dict(forward="tf32x3", backward="bf16x6")))
    assert gtc._precision(x32, x32, x32, forward=True) == "tf32x3"
    assert gtc._precision(x32, x32, x32) == ("bf16x6_rounded" if gtc.INTERPRET else "bf16x6")
    assert gtc._precision(x16, x16, x16) == "tf32"  # 16-bit inputs: not fp32's grade
    monkeypatch.setattr(gtc, ACTIVE, dict(getattr(gtc, ACTIVE),
                                          fp32_products=dict(forward="tf32x3", backward="fp64")))
    for x in (x16, x32):
        with pytest.raises(ValueError,
                           match=r"CONFIGS\['fp32_products'\]\['backward'\] must be one of"):
            gtc._precision(x, x, x)
