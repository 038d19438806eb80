"""benchmarks/hybrid_text.py: the CPU smoke run trains every hymo layout for two steps and
writes each run's bits per byte, speed and loss by position (the Llama baseline needs
transformers, and is recorded as left out where it is missing)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_cpu_smoke_runs_every_layout(tmp_path):
    out = tmp_path / "smoke.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "hybrid_text.py"),
                           "--cpu-smoke", "--seeds", "0", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["benchmark"] == "hybrid_text" and {"date", "hardware"} <= set(report)
    runs = {r["layout"]: r for r in report["runs"]}
    assert set(runs) == {"hybrid_last", "hybrid_first", "gdn_gla", "gdn_delta", "mla", "llama"}
    assert runs["hybrid_last"]["layer_types"] == "GGGA"
    assert runs["hybrid_first"]["layer_types"] == "AGGG"
    assert runs["gdn_gla"]["layer_types"] == "GGGG" and runs["mla"]["layer_types"] == "AAAA"
    for name, run in runs.items():
        if "error" in run:
            assert name == "llama" and "transformers" in run["error"]
            continue
        assert 0 < run["val_bits_per_byte"] < 9 and run["tokens_per_s"] > 0
        assert len(run["val_loss_by_position"]) == 32
