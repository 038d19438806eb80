"""benchmarks/mqar_seeds.py: the CPU smoke run of every variant and seed writes the JSON its
docstring documents, and the spread over seeds is computed right."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hymo_book.mqar import VARIANTS  # noqa: E402

from benchmarks.mqar_seeds import spread, summarise  # noqa: E402


def test_cpu_smoke_runs_every_variant_and_seed(tmp_path):
    out = tmp_path / "smoke.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "mqar_seeds.py"),
                           "--cpu-smoke", "--out", str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    settings = report["settings"]
    assert report["benchmark"] == "mqar_seeds" and report["command"].endswith("--cpu-smoke "
                                                                              f"--out {out}")
    assert {"date", "hardware", "git_commit"} <= set(report) and report["unfinished"] == []
    runs = report["runs"]
    assert sorted((r["variant"], r["seed"]) for r in runs) == sorted(
        (v, s) for v in VARIANTS for s in settings["seeds"])
    assert all(r["steps_done"] == settings["steps"] for r in runs)  # the same steps, every run
    assert set(report["summary"]) == set(VARIANTS)
    for s in report["summary"].values():
        assert s["runs"] == len(settings["seeds"]) and s["seeds"] == settings["seeds"]
        assert [a[:2] for a in s["accuracy"]] == settings["eval_tasks"]
        for _, _, mean, low, high, std in s["accuracy"]:
            assert 0 <= low <= mean <= high <= 1 and std >= 0
    assert "GDN (delta)" in done.stdout and "mean ± sample std" in done.stdout


def test_spread_and_summary():
    mean, low, high, std = spread([0.5, 1.0, 0.0])
    assert (mean, low, high) == (0.5, 0.0, 1.0) and std == pytest.approx(0.5)
    assert spread([0.25]) == [0.25, 0.25, 0.25, 0.0]
    runs = [{"variant": "MLA", "seed": s, "final_loss": loss, "accuracy": [[2, 8, acc]]}
            for s, loss, acc in ((1, 1.0, 0.2), (0, 3.0, 0.6))]
    runs.append({"variant": "GDN (gla)", "seed": 0, "error": "RuntimeError: boom"})
    summary = summarise(runs)
    assert list(summary) == ["MLA"]  # a failed run is reported in runs, not averaged
    assert summary["MLA"]["seeds"] == [0, 1]
    assert summary["MLA"]["final_loss"][:3] == [2.0, 1.0, 3.0]
    assert summary["MLA"]["accuracy"][0][:5] == [2, 8, pytest.approx(0.4), 0.2, 0.6]
