"""The floor both rules share (hymo_mini.ops.utils): time cut into padded chunks and joined
again, and the causal decays of a chunk against their definition (chunks.py, both chunk
forms); which chunks the Triton kernels take by one product, against the kernels' own rule
(one_product_chunks against pairs.takes_chunk); the start state (every plain path), the
input checks and the device check of the Triton kernels (checks.py)."""

import pytest
import torch
import triton
import triton.language as tl

from hymo_mini.ops.utils import checks
from hymo_mini.ops.utils.checks import check_triton_device, compute_dtype, start_state
from hymo_mini.ops.utils.chunks import (
    ONE_PRODUCT_SPAN,
    causal_decays,
    check_chunk_size,
    from_chunks,
    one_product_chunks,
    to_chunks,
)
from hymo_mini.ops.utils.pairs import SPAN, takes_chunk
from hymo_mini.ops.utils.tiles import rates


@pytest.mark.parametrize("T", [1, 7, 8, 9])
def test_chunks_pad_with_zero_steps_and_join_back(T):
    x = torch.randn(2, T, 3, 5, dtype=torch.float16)  # (B, T, H, D)
    chunks = to_chunks(x, 4, torch.float32)
    K = -(-T // 4)
    assert chunks.shape == (2, 3, K, 4, 5) and chunks.dtype == torch.float32
    assert torch.equal(chunks[:, 1, 0, 0], x[:, 0, 1].float())  # chunk 0, step 0, head 1
    steps = chunks.flatten(2, 3)  # (B, H, K * C, D)
    assert not steps[:, :, T:].any()  # the padding is zero steps
    assert torch.equal(from_chunks(chunks, T), x.float())
    gates = torch.rand(2, T, 3)  # (B, T, H): no trailing dims
    assert torch.equal(from_chunks(to_chunks(gates, 4, torch.float32), T), gates)


def test_causal_decays_are_their_definition():
    L = torch.rand(1, 2, 3, 5, dtype=torch.float64).cumsum(-1)  # (b, h, k, C)
    A = -torch.rand(2, 4, dtype=torch.float64) * 3  # (h, S)
    E = causal_decays(L, A)
    assert E.shape == (1, 2, 3, 5, 5, 4)
    for t in range(5):
        for s in range(5):
            want = torch.exp((L[..., t, None] - L[..., s, None]) * A[:, None]) if s <= t else 0
            assert torch.allclose(E[..., t, s, :], torch.as_tensor(want, dtype=E.dtype))
    strong = causal_decays(L * 1e4, A * 1e4)  # an exponent that would overflow if negated
    assert torch.isfinite(strong).all() and strong.max() <= 1


@pytest.mark.parametrize("bad", [0, -1, 2.0, "8", True, None])
def test_bad_chunk_size(bad):
    with pytest.raises(ValueError, match=r"chunk_size must be a positive int, e\.g\. 16"):
        check_chunk_size(bad, 16)
    check_chunk_size(3, 16)


def test_start_state_and_compute_dtype():
    v, b = torch.zeros(2, 5, 3, 4, dtype=torch.bfloat16), torch.zeros(2, 5, 3, 6)
    assert compute_dtype(v) == torch.float32
    assert compute_dtype(v.double()) == torch.float64
    zeros = start_state(v, b, None, torch.float64)
    assert zeros.shape == (2, 3, 6, 4) and zeros.dtype == torch.float64 and not zeros.any()
    h0 = torch.randn(2, 3, 6, 4)
    assert torch.equal(start_state(v, b, h0, torch.float64), h0.double())


def test_triton_device_check_names_the_switch_and_the_way_out():
    v = torch.zeros(1, 2, 1, 3)
    check_triton_device(v, True, "the kernel", "some.module", "x")  # interpreted: runs
    with pytest.raises(RuntimeError) as error:
        check_triton_device(v, False, "the chunked Triton kernel", "hymo_mini.ops.gla.chunk_triton",
                            "gated_linear_attention(..., backend='chunk_torch')")
    message = str(error.value)
    assert message.startswith("the chunked Triton kernel needs a CUDA GPU") and "\n" not in message
    for part in ("TRITON_INTERPRET=1 before hymo_mini.ops.gla.chunk_triton is imported",
                 "or use gated_linear_attention(..., backend='chunk_torch')"):
        assert part in message


def _valid_inputs(B=2, T=5, H=3, S=6, D=4):
    v, b, c = torch.zeros(B, T, H, D), torch.zeros(B, T, H, S), torch.zeros(B, T, H, S)
    g, A, beta = torch.zeros(B, T, H), -torch.ones(H, S), torch.zeros(B, T, H)
    return dict(v=v, b=b, c=c, g=g, A=A, initial_state=torch.zeros(B, H, S, D), beta=beta)


@pytest.mark.parametrize("optional", ["both", "no beta", "no initial_state"])
def test_every_bad_input_is_named(optional):
    """Every single change below (a shape, a rank, a dtype, a device, a type) is refused with
    one line that names the input, or it is one the inputs allow (a value size no other
    input fixes, e.g. D without an initial state)."""
    base = _valid_inputs()
    if optional == "no beta":
        base["beta"] = None
    if optional == "no initial_state":
        base["initial_state"] = None
    checks.check_inputs(**base, check_values=False)
    for name, t in base.items():
        if t is None:
            continue
        for bad in (t[..., :-1], t.unsqueeze(0), t.sum(), t.to(torch.int64), t.to("meta"),
                    t.tolist()):
            try:
                checks.check_inputs(**dict(base, **{name: bad}), check_values=False)
            except (TypeError, ValueError) as error:
                assert name in str(error) and "\n" not in str(error), str(error)
        for fine in (torch.nn.Parameter(t.clone()), t.double(), t.bfloat16()):
            checks.check_inputs(**dict(base, **{name: fine}), check_values=False)


@pytest.mark.triton
@pytest.mark.parametrize("rule", ["gla", "delta"])
def test_forward_mode_says_it_has_none(rule):
    """The chunked kernels have a backward, not a forward mode: a forward-mode tangent gets
    an error, never an o without its tangent."""
    from torch.autograd import forward_ad

    from hymo_mini.ops import gated_delta_rule, gated_linear_attention

    v, b, c = (torch.randn(1, 5, 1, 4) for _ in range(3))
    g, A = torch.rand(1, 5, 1), -torch.rand(1, 4)
    extra = (g,) if rule == "delta" else ()
    run = gated_linear_attention if rule == "gla" else gated_delta_rule
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(v, torch.ones_like(v))
        with pytest.raises(NotImplementedError, match="jvp"):
            run(dual, b, c, g, A, *extra, backend="chunk_triton")
        o, _ = run(v, b, c, g, A, *extra, backend="chunk_triton")  # no tangent: runs
    assert forward_ad.unpack_dual(o).tangent is None


@triton.jit
def _fits_kernel(g, A, left, T, H: tl.constexpr, S: tl.constexpr, BS: tl.constexpr,
                 BC: tl.constexpr, BT: tl.constexpr):
    """The kernels' own decision (takes_chunk's product launch) for chunk program_id(0) of
    (b, h) program_id(1): it marks the chunks it leaves."""
    i_c, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    o_s = tl.arange(0, BS)
    b_A2 = rates(A, i_h, o_s, o_s < S, S)
    takes_chunk(left + i_bh * tl.num_programs(0) + i_c, g, i_b.to(tl.int64) * T * H + i_h,
                i_c, T, b_A2, H, BC, BT, True)


@pytest.mark.triton
@pytest.mark.parametrize("T, chunk, block", [(200, 64, 16), (77, 32, 16), (40, 16, 16)])
def test_one_product_chunks_is_the_kernels_rule(T, chunk, block):
    """one_product_chunks against the kernels' own rule, on gates and rates that put about
    half the chunks on each side of the span, and a head whose keys share one strong rate:
    chunks of several blocks and of one, a last chunk with padding, and S short of the tile
    (its lanes past S)."""
    B, H, S = 2, 6, 24
    g = torch.rand(B, T, H, generator=torch.Generator().manual_seed(T))
    A = -torch.linspace(0.5, 12.0, H)[:, None] * torch.rand(H, S).add(0.5)  # (H, S) < 0
    A[1] = -40.0  # one rate on every key: fits however strong the decay
    mine = one_product_chunks(g, A, chunk, block)
    K = -(-T // chunk)
    assert mine.shape == (B, H, K) and 0 < mine.float().mean() < 1 and mine[:, 1].all()
    left = torch.empty(B * H * K, dtype=torch.int32)
    _fits_kernel[(K, B * H)](g, A, left, T, H=H, S=S, BS=32, BC=chunk, BT=block)
    assert torch.equal(mine.flatten(), left == 0)
    assert ONE_PRODUCT_SPAN == SPAN.value


@pytest.mark.parametrize("kw, words", [
    (dict(chunk_size=100), "chunk_size must be a multiple of block_size = 16, e.g. 96"),
    (dict(chunk_size=0), "chunk_size must be a positive int, e.g. 128"),
    (dict(chunk_size=64, block_size=2.0), "block_size must be a positive int, e.g. 16"),
])
def test_one_product_chunks_checks_its_sizes(kw, words):
    with pytest.raises(ValueError, match=words.replace(".", r"\.")):
        one_product_chunks(torch.rand(1, 8, 2), -torch.ones(2, 4), **kw)


def test_one_product_chunks_checks_its_shapes():
    with pytest.raises(ValueError, match=r"A must be \(H, S\) with H = 2 as in g"):
        one_product_chunks(torch.rand(1, 8, 2), -torch.ones(3, 4), 16)
    with pytest.raises(ValueError, match=r"g must be \(B, T, H\)"):
        one_product_chunks(torch.rand(8, 2), -torch.ones(2, 4), 16)
