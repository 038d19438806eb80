"""benchmarks/host_profile.py times launches on a GPU; without one it says so in one line."""

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import host_profile  # noqa: E402


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU's answer")
def test_without_a_gpu_it_says_so(tmp_path):
    with pytest.raises(SystemExit, match="on a CUDA GPU; this machine has none"):
        host_profile.main(["--out", str(tmp_path / "x.json")])
    assert not (tmp_path / "x.json").exists()


def test_own_mode_times_the_packages_host_work_without_a_gpu(tmp_path):
    """--own: each rule and dtype's own host time per forward, the kernels faked; the real
    kernels and the interpreter setting are back in place afterwards."""
    import json

    import hymo_mini.ops.gla.chunk_triton as gct

    kernel, interpret = gct._output_fwd_kernel, gct.INTERPRET
    host_profile.main(["--own", "--calls", "5", "--out", str(tmp_path / "own.json")])
    report = json.loads((tmp_path / "own.json").read_text())
    assert report["shape"] == host_profile.OWN_SHAPE
    for rule in ("gla", "delta"):
        for dtype in ("bfloat16", "float32"):
            for how in ("kernel", "mixer"):
                row = report[f"{rule}_{dtype}_{how}"]
                assert len(row["rounds_us"]) == 5 and row["own_us_per_call"] > 0
    assert gct._output_fwd_kernel is kernel and gct.INTERPRET == interpret
    import hymo_mini.ops as ops
    from hymo_mini.ops.checks import check_triton_device

    assert ops.check_triton_device is check_triton_device
    assert gct.check_triton_device is check_triton_device


def test_launch_mode_compares_tritons_path_with_the_direct_one(tmp_path):
    """--launch, in a process of its own (the suite's kernels are decorated for the
    interpreter): an empty kernel compiled for sm90 here, launched through Triton's
    JITFunction.run and through hymo_mini.launching.Direct with a stand-in driver; both
    hand its launcher the same arguments, and both are timed. Then every Triton kernel of
    the package (both chunked rules, the recurrent kernel, the MoE rows, the loss rows),
    forward and backward, in bf16 and fp32: the same launches both ways, and once each key
    has been launched, none through JITFunction.run. Last, each rule's forward as the mixer
    calls it, through Triton's path and directly, timed."""
    import json
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = tmp_path / "launch.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "host_profile.py"),
                           "--launch", "--calls", "50", "--out", str(out)], env=env, cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["same_launcher_arguments"] is True
    assert report["jit_us_per_launch"] > 0 and report["direct_us_per_launch"] > 0
    assert len(report["direct_rounds_us"]) == 5
    cases = ("gla", "delta", "gla_recurrent", "rows", "loss")
    assert set(report["kernels"]) == {f"{case}_{dtype}" for case in cases
                                      for dtype in ("bfloat16", "float32")}
    for row in report["kernels"].values():
        assert row["launches"] >= 1 and row["same_launches"] is True
        assert row["through_triton_when_repeated"] == 0
    assert "_chunk_bwd_kernel" in report["kernels"]["delta_float32"]["kernels"]
    assert len(report["kernels"]["rows_float32"]["kernels"]) == 4
    assert set(report["forwards"]) == {f"{rule}_{dtype}_mixer" for rule in ("gla", "delta")
                                       for dtype in ("bfloat16", "float32")}
    assert all(row["triton_us"] > 0 and row["direct_us"] > 0
               for row in report["forwards"].values())
