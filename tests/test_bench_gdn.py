"""benchmarks/gdn.py on the CPU: its inputs' two decay rates, and its hymo backends (the
Triton interpreter): the dispatcher as the GDN mixer calls it (no finiteness check, so no
host sync) gives the checked dispatcher's output, and only the checked one refuses a
non-finite decay."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import gdn  # noqa: E402
from hymo_mini import ops  # noqa: E402


@pytest.mark.skipif(not ops.triton_usable(torch.device("cpu")),
                    reason="needs Triton's interpreter (TRITON_INTERPRET=1 before import)")
def test_the_unchecked_dispatcher_is_the_checked_one_without_the_check():
    found = gdn.available_backends(torch.device("cpu"))
    assert {"chunk_triton", "chunk_triton_unchecked"} <= set(found)
    gen = torch.Generator().manual_seed(0)
    B, T, H, S, D = 1, 19, 2, 8, 8  # T not a multiple of the chunk
    v = torch.randn(B, T, H, D, generator=gen)
    b, c = (torch.nn.functional.normalize(torch.randn(B, T, H, S, generator=gen), dim=-1)
            for _ in range(2))
    g = torch.rand(B, T, H, generator=gen)
    A = -torch.rand(H, S, generator=gen)
    checked, unchecked = (found[n](v, b, c, g, A)
                          for n in ("chunk_triton", "chunk_triton_unchecked"))
    assert torch.equal(checked, unchecked)
    g[0, 3, 1] = float("inf")
    with pytest.raises(ValueError, match="must be finite"):
        found["chunk_triton"](v, b, c, g, A)
    found["chunk_triton_unchecked"](v, b, c, g, A)  # no check: no error, and no host sync


@pytest.mark.skipif(not ops.triton_usable(torch.device("cpu")),
                    reason="needs Triton's interpreter (TRITON_INTERPRET=1 before import)")
def test_tf32_backend_turns_the_switch_on_for_fp32_alone_and_back_off():
    """chunk_triton_kernel_tf32 runs with PyTorch's TF32 switch on through its forward and
    backward, is skipped for bf16 inputs, and the oracle's fp32 runs find the switch off."""
    seen = []
    found = gdn.available_backends(torch.device("cpu"))
    backends = {n: found[n] for n in ("chunk_triton_kernel", "chunk_triton_kernel_tf32")}

    def spy(name):
        def run(*args):
            seen.append((name, torch.backends.cuda.matmul.allow_tf32))
            return backends[name](*args)
        return run
    args = SimpleNamespace(grad_check_max_T=64, eager_max_T=0, rates="model")
    before = torch.backends.cuda.matmul.allow_tf32  # (a property: set and restored by hand)
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for dtype in ("float32", "bfloat16"):
            entry = gdn.bench_shape("B1_T20_H2_S8_D8", dtype, {n: spy(n) for n in backends},
                                    args, torch.device("cpu"))
            assert ("chunk_triton_kernel_tf32" in entry["checks"]) == (dtype == "float32")
            assert all(check["agrees"] for check in entry["checks"].values()), entry["checks"]
        assert {flag for name, flag in seen if name.endswith("_tf32")} == {True}
        assert {flag for name, flag in seen if not name.endswith("_tf32")} == {False}
        assert torch.backends.cuda.matmul.allow_tf32 is False
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def test_make_inputs_rates():
    """"model" (the default, as the GDN block initialises A), "weak" and "spread" differ in
    A_log alone: every chunk is within the one product's span on the first two (on the
    model's rates each head's keys share one), the fast heads' chunks are past it on the
    third, whose keys' rates differ."""
    cpu = torch.device("cpu")
    model, do = gdn.make_inputs(1, 64, 40, 8, 4, torch.float32, cpu)
    weak, _ = gdn.make_inputs(1, 64, 40, 8, 4, torch.float32, cpu, rates="weak")
    spread, spread_do = gdn.make_inputs(1, 64, 40, 8, 4, torch.float32, cpu, rates="spread")
    for other in (weak, spread):
        assert all(torch.equal(a, b) for a, b in zip(model[:4], other[:4], strict=True))
    assert torch.equal(do, spread_do)
    assert torch.equal(model[4], torch.log(torch.arange(1.0, 41.0))[:, None].repeat(1, 8))
    assert ops.one_product_chunks(weak[3], -weak[4].exp(), 16).all()
    assert ops.one_product_chunks(model[3], -model[4].exp(), 16).all()
    assert not ops.one_product_chunks(spread[3], -spread[4].exp(), 16)[:, 19:].any()
    with pytest.raises(ValueError, match="rates must be one of"):
        gdn.make_inputs(1, 4, 1, 2, 2, torch.float32, cpu, rates="fast")
