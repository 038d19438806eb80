"""The chunked head loss equals the plain one: values and gradients, soft-cap on and off,
fp32 and bf16 autocast, ignored rows, chunks that do not divide the rows, the Triton row
kernel (on the GPU where there is one, interpreted on CPU otherwise) and its PyTorch twin;
and the model's switch between them."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from hymo_mini.config import ConfigError, ModelConfig, load_config, replace
from hymo_mini.loss import (
    linear_softcap_cross_entropy,
    linear_softcap_cross_entropy_heads,
    plain_softcap_cross_entropy,
    resolve_loss_impl,
    softcap_ce_rows_torch,
)
from hymo_mini.loss_triton import _tanh, fast_tanh
from hymo_mini.model import build_hymo

# the Triton backend runs where its kernel can: a CUDA GPU, else the interpreter (conftest)
TRITON_DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def on(backend: str) -> str:
    return TRITON_DEVICE if backend == "triton" else "cpu"


def fast_on(backend: str) -> bool:
    """Whether this backend's bf16 rows take the kernel's hardware tanh (on a GPU)."""
    return backend == "triton" and TRITON_DEVICE == "cuda" and fast_tanh(torch.bfloat16)


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """Relative RMS difference of a against the reference b."""
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def inputs(N=37, d=24, V=300, scale=3.0, ignored=(3, 10), device="cpu"):
    h = (torch.randn(N, d) * scale).to(device).requires_grad_()
    w = torch.randn(V, d).to(device).requires_grad_()
    t = torch.randint(0, V, (N,)).to(device)
    t[list(ignored)] = -100
    return h, w, t


@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=pytest.mark.triton)])
@pytest.mark.parametrize("cap", [15.0, 2.0, 0.0])
def test_chunked_equals_plain_fp32(backend, cap):
    h, w, t = inputs(device=on(backend))
    ref = plain_softcap_cross_entropy(h, w, t, cap)
    ref_grads = torch.autograd.grad(ref * 0.7, (h, w))  # a loss weight, as MTP's
    got = linear_softcap_cross_entropy(h, w, t, cap, chunk_rows=8, backend=backend)
    grads = torch.autograd.grad(got * 0.7, (h, w))
    assert got.dtype == torch.float32
    assert rel(got, ref) < 1e-6
    for g, r in zip(grads, ref_grads, strict=True):
        assert rel(g, r) < 1e-5


@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=pytest.mark.triton)])
def test_chunked_equals_plain_under_bf16_autocast(backend):
    h, w, t = inputs(ignored=(), device=on(backend))
    with torch.autocast(h.device.type, dtype=torch.bfloat16):
        ref = plain_softcap_cross_entropy(h, w, t, 15.0)
        got = linear_softcap_cross_entropy(h, w, t, 15.0, chunk_rows=16, backend=backend)
    ref_grads = torch.autograd.grad(ref, (h, w))
    grads = torch.autograd.grad(got, (h, w))
    # the same bf16 logits, soft-capped in fp32 by both; the GPU kernel's hardware tanh is
    # good to about 2^-11 of each soft-capped logit
    assert rel(got, ref) < (1e-3 if fast_on(backend) else 1e-5)
    for g, r in zip(grads, ref_grads, strict=True):
        assert g.dtype == torch.float32  # the gradients of fp32 leaves
        assert rel(g, r) < 2e-2  # dlogits rounded to bf16 by both; dW summed per chunk


@pytest.mark.triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("cap", [15.0, 0.0])
def test_triton_rows_over_several_blocks(dtype, cap):
    """The kernel's row loop (here 4 blocks of 64 columns, the last one partial) against
    its PyTorch twin: loss per row and dz written over z."""
    from hymo_mini.loss_triton import softcap_ce_rows_triton

    z = (torch.randn(9, 200) * 8).to(TRITON_DEVICE, dtype)
    t = torch.randint(0, 200, (9,)).to(TRITON_DEVICE)
    t[4] = -100
    loss_ref, dz_ref = softcap_ce_rows_torch(z, t, cap, -100, grad=True)
    loss, dz = softcap_ce_rows_triton(z.clone(), t, cap, -100, grad=True, block=64)
    tol = 2e-3 if cap and fast_tanh(dtype) and TRITON_DEVICE == "cuda" else 1e-6
    assert rel(loss, loss_ref) < tol and loss[4] == 0
    assert rel(dz.float(), dz_ref.float()) < (1e-6 if dtype == torch.float32 else 1e-2)
    assert not dz[4].any()
    loss_only, none = softcap_ce_rows_triton(z.clone(), t, cap, -100, grad=False, block=64)
    assert none is None and rel(loss_only, loss_ref) < tol
    scale = torch.full((1,), 0.037, device=TRITON_DEVICE)  # dz times a scale, before rounding
    _, dzs_ref = softcap_ce_rows_torch(z, t, cap, -100, grad=True, scale=scale)
    _, dzs = softcap_ce_rows_triton(z.clone(), t, cap, -100, grad=True, scale=scale, block=64)
    assert rel(dzs_ref.float(), 0.037 * dz_ref.float()) < (1e-6 if dtype == torch.float32
                                                          else 1e-2)
    assert rel(dzs.float(), dzs_ref.float()) < (1e-6 if dtype == torch.float32 else 1e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the hardware tanh needs a CUDA GPU")
def test_the_hardware_tanh_is_within_its_bound():
    """The row kernel's fast tanh (16-bit logits on the GPU) against fp64: relative error
    below 2^-10, under the 2^-9 of a bf16 logit's own rounding."""
    x = torch.linspace(-20, 20, 1 << 20, device="cuda")
    x = x[x != 0]
    y = torch.empty_like(x)
    _tanh_probe[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    exact = torch.tanh(x.double())
    assert ((y.double() - exact).abs() / exact.abs()).max() < 2.0**-10


@triton.jit
def _tanh_probe(x, y, N, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < N
    tl.store(y + o, _tanh(tl.load(x + o, mask=m, other=0.0), True), mask=m)


@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=pytest.mark.triton)])
def test_heads_equal_the_weighted_sum_of_plain_losses(backend):
    """Three heads on one weight (rows 37, 20 and 9, some ignored) in one call: the
    weighted total, each head's mean, and every gradient, against the plain losses."""
    device = on(backend)
    heads = [inputs(N=n, ignored=ig, device=device) for n, ig in
             ((37, (3, 10)), (20, ()), (9, (0, 1, 2)))]
    w = heads[0][1]
    hs, ts = [h for h, _, _ in heads], [t for _, _, t in heads]
    lambdas = [1.0, 0.3, 0.15]
    refs = [plain_softcap_cross_entropy(h, w, t, 15.0) for h, t in zip(hs, ts, strict=True)]
    ref = sum(lam * r for lam, r in zip(lambdas, refs, strict=True))
    ref_grads = torch.autograd.grad(ref * 0.5, (*hs, w))
    total, means = linear_softcap_cross_entropy_heads(hs, w, ts, 15.0, lambdas, chunk_rows=8,
                                                      backend=backend)
    grads = torch.autograd.grad(total * 0.5, (*hs, w))
    assert rel(total, ref) < 1e-6
    assert all(not m.requires_grad and rel(m, r) < 1e-6 for m, r in zip(means, refs,
                                                                          strict=True))
    for g, r in zip(grads, ref_grads, strict=True):
        assert rel(g, r) < 1e-5


def test_heads_in_fp16_scale_after_the_loop():
    """fp16 logits keep their gradients unscaled in the loop (their range would lose the
    small ones once divided by the row count) and are scaled afterwards."""
    hs, ts = [], []
    for n in (30, 11):
        h, w, t = inputs(N=n, scale=1.0)
        hs.append(h.detach().half().requires_grad_())
        ts.append(t)
    w = w.detach().half().requires_grad_()
    lambdas = [1.0, 0.5]
    total, _ = linear_softcap_cross_entropy_heads(hs, w, ts, 15.0, lambdas, chunk_rows=7)
    grads = torch.autograd.grad(total, (*hs, w))
    hd, wd = [h.detach().double().requires_grad_() for h in hs], w.detach().double()
    wd.requires_grad_()
    ref = sum(lam * plain_softcap_cross_entropy(h, wd, t, 15.0)
              for lam, h, t in zip(lambdas, hd, ts, strict=True))
    ref_grads = torch.autograd.grad(ref, (*hd, wd))
    assert rel(total, ref) < 1e-3
    for g, r in zip(grads, ref_grads, strict=True):
        assert g.dtype == torch.float16 and rel(g, r) < 1e-2


def test_heads_check_their_lists():
    h, w, t = inputs()
    with pytest.raises(ValueError, match=r"non-empty and of one length, got 1, 1 and 2"):
        linear_softcap_cross_entropy_heads([h], w, [t], 15.0, [1.0, 0.5])
    with pytest.raises(ValueError, match=r"got 0, 0 and 0"):
        linear_softcap_cross_entropy_heads([], w, [], 15.0, [])


def test_no_grad_computes_the_loss_alone():
    h, w, t = inputs()
    with torch.no_grad():
        got = linear_softcap_cross_entropy(h, w, t, 15.0, chunk_rows=5)
    assert not got.requires_grad
    assert rel(got, plain_softcap_cross_entropy(h, w, t, 15.0)) < 1e-6


def test_leading_dims_and_only_one_input_needing_grad():
    h, w, t = inputs(N=12, ignored=(5,))
    h3, t3 = h.detach().reshape(3, 4, -1), t.reshape(3, 4)
    got = linear_softcap_cross_entropy(h3, w, t3, 15.0, chunk_rows=5)
    (gw,) = torch.autograd.grad(got, (w,))
    (rw,) = torch.autograd.grad(plain_softcap_cross_entropy(h3, w, t3, 15.0), (w,))
    assert rel(gw, rw) < 1e-5


def test_bad_inputs_say_what_is_wrong():
    h, w, t = inputs(N=6, ignored=())
    with pytest.raises(ValueError, match="share d"):
        linear_softcap_cross_entropy(h[:, :5], w, t)
    with pytest.raises(ValueError, match="leading shape"):
        linear_softcap_cross_entropy(h, w, t[:5])
    with pytest.raises(TypeError, match="integer"):
        linear_softcap_cross_entropy(h, w, t.float())
    with pytest.raises(ValueError, match="backend"):
        linear_softcap_cross_entropy(h, w, t, backend="cuda")
    with pytest.raises(ValueError, match="chunk_rows"):
        linear_softcap_cross_entropy(h, w, t, chunk_rows=0)
    with pytest.raises(ValueError, match="softcap"):
        linear_softcap_cross_entropy(h, w, t, softcap=-1.0)


# ---- the model's switch -------------------------------------------------------------------
def tiny(**model):
    """hymo_mini cut to 2 layers: one MLA (with its MoE) and one GDN."""
    base = load_config("hymo_mini").model
    return replace(base, **{"n_layers": 2, "mla_every": 2, "max_seq_len": 64, **model})


def model_loss(config, tokens, autocast=False):
    torch.manual_seed(0)
    model = build_hymo(config)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        total, parts = model.loss(tokens)
    total.backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    return total.detach(), parts, grads


@pytest.mark.parametrize("model", [{}, {"logit_softcap": 0.0}, {"mtp_depth": 0,
                                                                "mtp_loss_weights": ()}])
def test_model_chunked_loss_equals_plain(model):
    tokens = torch.randint(0, 256, (2, 17))
    ref = model_loss(tiny(loss_impl="plain", **model), tokens)
    got = model_loss(tiny(loss_impl="chunked", **model), tokens)
    assert rel(got[0], ref[0]) < 1e-6
    assert got[1].keys() == ref[1].keys()
    assert all(rel(got[1][k], ref[1][k]) < 1e-6 for k in ref[1])
    assert got[2].keys() == ref[2].keys()  # every parameter that had a gradient has one
    assert all(rel(got[2][k], ref[2][k]) < 1e-5 for k in ref[2]), [
        k for k in ref[2] if rel(got[2][k], ref[2][k]) >= 1e-5]


def test_model_chunked_loss_equals_plain_under_bf16_autocast():
    tokens = torch.randint(0, 256, (2, 17))
    ref = model_loss(tiny(loss_impl="plain"), tokens, autocast=True)
    got = model_loss(tiny(loss_impl="chunked"), tokens, autocast=True)
    assert rel(got[0], ref[0]) < 1e-5
    assert all(rel(got[2][k], ref[2][k]) < 3e-2 for k in ref[2])


def test_loss_impl_choice_and_errors():
    assert resolve_loss_impl("auto", torch.device("cpu")) == "plain"
    assert resolve_loss_impl("auto", torch.device("cuda")) == "chunked"
    assert resolve_loss_impl("chunked", torch.device("cpu")) == "chunked"
    with pytest.raises(ValueError, match="loss_impl"):
        resolve_loss_impl("fused", torch.device("cpu"))
    with pytest.raises(ConfigError, match="loss_impl.*did you mean 'chunked'"):
        ModelConfig(loss_impl="chunk")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dw_sums_the_chunks_products(dtype):
    """dW over three chunks against fp64. fp32 products add in place; bf16 ones add inside
    the matmul in fp32 on a CUDA GPU (fp32-grade), and are rounded to bf16 first on CPU."""
    from hymo_mini.loss import _accumulate

    device = TRITON_DEVICE
    dz, h = torch.randn(3, 64, 40, device=device), torch.randn(3, 64, 24, device=device)
    dz, h = dz.to(dtype), h.to(dtype)
    dw = torch.zeros(40, 24, device=device)
    for i in range(3):
        _accumulate(dw, dz[i], h[i])
    ref = sum(dz[i].double().T @ h[i].double() for i in range(3))
    fp32_grade = dtype == torch.float32 or device == "cuda"
    assert dw.dtype == torch.float32
    assert rel(dw, ref) < (1e-5 if fp32_grade else 1e-2)
