"""benchmarks/train_step.py on the CPU (--smoke: the tiny model): the fast path (with the
eager GDN block, whose compiled form test_gdn_compile checks) and the reference path run,
start from the same loss, and the JSON holds the documented fields with the step's time
split by component."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import train_step  # noqa: E402
from hymo_mini import compiling  # noqa: E402


def test_smoke_run_writes_the_report(tmp_path, monkeypatch):
    monkeypatch.setattr(compiling, "COMPILE_BACKEND", "aot_eager")  # main sets it; restored after
    out = tmp_path / "step.json"
    cases = ["hybrid_fast_eager_gdn_b4t4096", "hybrid_reference_b4t4096", "no_such_case"]
    assert train_step.main(["--device", "cpu", "--smoke", "--cases", *cases, "--warmup", "1",
                            "--steps", "1", "--profile-steps", "1", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert {"date", "command", "hardware", "peak_tflops", "settings"} <= set(report)
    assert set(report["cases"]) == set(cases[:2]) and report["checks"] == {}
    fast, ref = (report["cases"][name] for name in cases[:2])
    assert "error" not in fast and "error" not in ref, (fast.get("error"), ref.get("error"))
    assert fast["config"]["loss_impl"] == "chunked" and ref["config"]["loss_impl"] == "plain"
    assert fast["config"]["moe_impl"] == "auto" and ref["config"]["moe_impl"] == "loop"
    # the same model and batch: the first step's loss agrees before any update
    assert abs(fast["loss_first_steps"][0] - ref["loss_first_steps"][0]) < 1e-3
    for key in ("step_ms", "tokens_per_s", "mfu", "mfu_6N", "busy_share", "flops_per_token"):
        assert fast[key] > 0, key
    parts = fast["profile"]["components_ms"]
    assert {"gdn_other", "mla_attention", "moe", "loss", "optimizer"} <= set(parts)
    assert set(report["ratios"]) == {"hybrid_fast_eager_gdn_b4t4096 / hybrid_reference_b4t4096"}
    assert not any(k.startswith("targets") for k in report)  # no hybrid_fast_*_b4t4096 here


def test_kernel_kinds():
    """A CUTLASS grouped GEMM (whose mangled name holds "Copy") is a matmul; ATen's copy and
    cast kernels are copies; flash attention is attention."""
    from benchmarks.step_profile import _kind
    grouped = ("_ZN7cutlass13device_kernelIN2at4cuda6detail25enable_3x_kernel_for_sm9xINS_4gemm"
               "6kernel13GemmUniversalINS5_17GroupProblemShapeE_SM90_TMA_LOAD_Copy_Atom")
    assert _kind(grouped) == "matmul"
    assert _kind("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_"
                 "cuda(at::TensorIteratorBase&)") == "copy/cast"
    assert _kind("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16") == "attention"


def test_matched_layers_rounds_down_and_says_what_is_too_small():
    """The peers at hymo_750m's active size: the deepest peer not over the target, from
    two counts of an affine count; the Llama shape of the peers gives 29 layers."""
    import pytest

    from benchmarks.train_step_cases import hymo_active_no_embed, matched_layers

    llama = lambda layers: 1024 + layers * (4 * 1024**2 + 3 * 1024 * 2816 + 2 * 1024)  # noqa: E731
    assert llama(24) == 308_331_520  # the peer, without embeddings
    target = hymo_active_no_embed()
    assert target == 376_880_640
    layers = matched_layers(llama, target)
    assert layers == 29 and llama(layers) <= target < llama(layers + 1)
    assert matched_layers(llama, llama(7)) == 7  # exactly the target: kept
    with pytest.raises(ValueError, match="target: 1,000 parameters"):
        matched_layers(llama, 1000)
