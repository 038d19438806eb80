"""The grouped MoE path's row shuffles (hymo_mini.moe.dispatch): the Triton kernels, run in
the interpreter, against the PyTorch chain, forward and backward; and the grouped path
with the kernels against the expert loop."""

from __future__ import annotations

import pytest
import torch
from test_moe import decisive, rel_err, run, with_impl

from hymo_mini.config import load_config
from hymo_mini.moe import dispatch
from hymo_mini.moe.dispatch import combine_rows, gather_rows, resolve_rows_backend, row_maps

pytestmark = pytest.mark.triton
# the kernels run where they can: a CUDA GPU, else the interpreter (conftest)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def routing_like(n, k, e, drop, seed=0):
    """A routing's (by_expert, kept, combine) for n tokens, k distinct experts each."""
    gen = torch.Generator().manual_seed(seed)
    indices = torch.stack([torch.randperm(e, generator=gen)[:k] for _ in range(n)])  # (n, k)
    order = indices.t().reshape(-1)  # (k*n,) choice-major
    _, by_expert = torch.sort(order, stable=True)
    kept = torch.rand(n, k, generator=gen) > drop  # (n, k)
    combine = torch.rand(n, k, generator=gen) * kept
    return by_expert, kept, combine


SHAPES = [(1, 1, 16), (7, 2, 24), (13, 3, 40), (5, 2, 1000)]  # (n, k, dim): awkward widths


@pytest.mark.parametrize("n,k,dim", SHAPES)
@pytest.mark.parametrize("drop", [0.0, 0.4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gather_kernel_equals_the_chain(n, k, dim, drop, dtype):
    by_expert, kept, _ = (t.to(DEVICE) for t in routing_like(n, k, 6, drop))
    maps = row_maps(by_expert, kept)
    x = torch.randn(n, dim).to(DEVICE).requires_grad_()
    g = torch.randn(k * n, dim).to(DEVICE, dtype)
    outs = []
    for backend in ("torch", "triton"):
        x.grad = None
        xs = gather_rows(x, maps, dtype, backend)
        xs.backward(g)
        outs.append((xs, x.grad))
    (ref, dref), (got, dgot) = outs
    # a copy, exact in fp32 and on the GPU; in bf16 within one unit in the last place
    # (2^-8 relative) in the interpreter, which rounds fp32 to bf16 toward zero
    ulp = 0 if dtype == torch.float32 or DEVICE == "cuda" else 2.0 ** -7
    assert got.dtype == dtype
    torch.testing.assert_close(got, ref, rtol=ulp, atol=0)
    assert dgot.dtype == torch.float32
    tol = 0 if dtype == torch.float32 and k <= 2 else 1e-2  # bf16 sums round differently
    torch.testing.assert_close(dgot, dref, rtol=tol, atol=tol)
    assert torch.equal(gather_rows(x, maps, dtype, "triton", grad=False), got)


@pytest.mark.parametrize("n,k,dim", SHAPES)
@pytest.mark.parametrize("drop", [0.0, 0.4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_combine_kernel_equals_the_chain(n, k, dim, drop, dtype):
    by_expert, kept, combine = (t.to(DEVICE) for t in routing_like(n, k, 6, drop))
    maps = row_maps(by_expert, kept)
    y = torch.randn(k * n, dim).to(DEVICE, dtype).requires_grad_()
    w = combine.clone().requires_grad_()
    g = torch.randn(n, dim).to(DEVICE, dtype)
    outs = []
    for backend in ("torch", "triton"):
        y.grad = w.grad = None
        out = combine_rows(y, maps, w, backend)
        out.backward(g)
        outs.append((out, y.grad, w.grad))
    tol = 1e-6 if dtype == torch.float32 else 2e-2  # the kernel sums in fp32, rounds once
    for got, ref in zip(outs[1], outs[0], strict=True):
        assert got.dtype == ref.dtype
        torch.testing.assert_close(got, ref, rtol=tol, atol=tol)


def test_backend_choice():
    cpu = torch.device("cpu")
    assert resolve_rows_backend("auto", cpu) == "torch"  # the interpreter is for tests
    if DEVICE == "cpu":
        assert resolve_rows_backend("triton", cpu) == "triton"  # interpreter on (conftest)
    else:
        assert resolve_rows_backend("auto", torch.device("cuda")) == "triton"
        with pytest.raises(RuntimeError, match=r"needs a CUDA GPU.*use 'torch'"):
            resolve_rows_backend("triton", cpu)
    with pytest.raises(ValueError, match=r"must be one of 'auto', 'torch', 'triton', got 'x'"):
        resolve_rows_backend("x", cpu)


@pytest.mark.skipif(DEVICE == "cpu" and not dispatch.grouped_mm_supported(
    torch.device("cpu"), torch.bfloat16, 64, 128), reason="this torch has no CPU _grouped_mm")
@pytest.mark.parametrize("capacity_factor", [0.3, 8.0])
@pytest.mark.parametrize("autocast", [False, True])
def test_grouped_path_with_the_kernels_equals_the_loop(monkeypatch, capacity_factor, autocast):
    if DEVICE == "cuda" and not autocast:
        pytest.skip("the CUDA grouped product takes bf16 only")
    monkeypatch.setattr(dispatch, "ROWS_BACKEND", "triton")
    config = load_config("hymo_mini").model
    moe = decisive(config, capacity_factor).to(DEVICE)
    x = torch.randn(3, 11, config.dim).to(DEVICE)
    grad = torch.randn(3, 11, config.dim).to(DEVICE)
    with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=autocast):
        y_ref, g_ref = run(with_impl(moe, "loop"), x, grad)
        y, g = run(with_impl(moe, "grouped"), x, grad)
    tol = 2e-2 if autocast else 1e-5
    assert rel_err(y, y_ref) < tol
    for name, ref in g_ref.items():
        if ref.abs().sum() == 0:
            assert g[name].abs().sum() == 0, name
        else:
            assert rel_err(g[name], ref) < tol, name
    if capacity_factor < 1:
        assert moe.route(x).kept.logical_not().any()  # dropping is exercised


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_kernels_equal_the_chain_on_the_gpu_at_the_production_shape():
    """hymo_750m's shape (16,384 tokens, top-2 of 16, dim 896), bf16 rows, with drops."""
    by_expert, kept, combine = routing_like(16_384, 2, 16, 0.1)
    by_expert, kept, combine = by_expert.cuda(), kept.cuda(), combine.cuda()
    maps = row_maps(by_expert, kept)
    x = torch.randn(16_384, 896, device="cuda", requires_grad=True)
    outs = []
    for backend in ("torch", "triton"):
        x.grad = None
        xs = gather_rows(x, maps, torch.bfloat16, backend)
        w = combine.clone().requires_grad_()
        y = (xs.float() * 0.5).bfloat16()  # stands in for the experts
        out = combine_rows(y, maps, w, backend)
        out.float().square().sum().backward()
        outs.append((xs, out, x.grad, w.grad))
    for got, ref in zip(outs[1], outs[0], strict=True):
        assert got.dtype == ref.dtype
        assert rel_err(got, ref) < 1e-2
    assert torch.equal(outs[1][0], outs[0][0])  # the gather is a copy: exact on the GPU
