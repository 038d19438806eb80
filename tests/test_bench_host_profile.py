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
