"""benchmarks/gated_delta.py on the CPU (fla and the GPU absent): every backend is checked
against the fp64 loop before it is timed, a wrong one is not timed, and the JSON keeps the
layout its docstring documents."""

import json
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import gated_delta  # noqa: E402
from benchmarks.gated_delta_backends import (  # noqa: E402
    check,
    cut,
    dispatched,
    make_inputs,
    oracle,
    with_A_log,
)


def test_check_gates_on_the_loop():
    inputs, do = make_inputs(2, 20, 3, 8, 4, torch.float32, torch.device("cpu"))
    part, d_part = cut(inputs, do, 11)
    assert part[0].shape == (1, 11, 3, 4) and part[4].shape == (3, 8)  # A_log whole
    ref = oracle("delta", part, d_part)
    right = check(with_A_log(dispatched("delta", "chunk_torch", False)), part, d_part, ref, 1e-5)
    assert right["agrees"] and max(v for k, v in right.items() if k != "agrees") < 1e-5
    assert set(right) == {"o", "dv", "db", "dc", "dg", "dA_log", "dbeta", "agrees"}
    # the gla rule is not the delta rule: its output disagrees, so it would not be timed
    wrong = check(with_A_log(dispatched("gla", "chunk_torch", False)), part, d_part, ref, 1e-2)
    assert not wrong["agrees"]
    again = check(with_A_log(dispatched("delta", "chunk_torch", False)), part, d_part, ref,
                  1e-5, refused="RuntimeError: no backward here")
    assert again["agrees"] and "dv" not in again  # the forward is checked, the backward not run
    assert again["bwd_error"] == "not run again: RuntimeError: no backward here"
    broken = check(lambda *leaves: 1 / 0, part, d_part, ref, 1e-2)
    assert not broken["agrees"] and broken["error"].startswith("ZeroDivisionError")


def test_peers_on_cpu_writes_the_report(tmp_path):
    out = tmp_path / "gd.json"
    assert gated_delta.main(["--sections", "peers", "--shapes", "B2_T24_H2_S8_D4",
                             "--dtypes", "float32", "--check-T", "16",
                             "--backends", "chunk_torch", "fla_chunk_kda",
                             "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert {"date", "command", "torch"} <= set(report["environment"])
    assert report["backends"] == ["chunk_torch"]
    assert "fla_chunk_kda" in report["backends_missing"]
    entry = report["peers"]["B2_T24_H2_S8_D4_float32"]
    assert entry["checks"]["chunk_torch"]["agrees"]
    assert {"fwd_ms", "fwdbwd_ms"} <= set(entry["results"]["chunk_torch"])
    # v, b, c, o (B, T, H, 8 or 4) and g, beta (B, T, H), 4 bytes each
    assert entry["bytes_min_fwd"] == (3 * 2 * 24 * 2 * 8 + 2 * 2 * 24 * 2 * 4 + 2 * 2 * 24 * 2) * 4
    assert entry["copy_floor_ms"] is None and report["skipped"] == []


def test_rates_as_the_model_initialises_them(tmp_path):
    """--rates model: A_log = log(h + 1) on every key of head h; "spread": that plus a
    jitter per key. The other inputs are the same draws. Every chunk fits the one product
    on the first two (on "model" each head's keys share one rate), the fast heads' chunks
    are past its span on the third. The run checks and records the setting."""
    cpu = torch.device("cpu")
    weak, _ = make_inputs(1, 64, 40, 8, 4, torch.float32, cpu)
    model, _ = make_inputs(1, 64, 40, 8, 4, torch.float32, cpu, rates="model")
    spread, _ = make_inputs(1, 64, 40, 8, 4, torch.float32, cpu, rates="spread")
    assert torch.equal(model[4], torch.log(torch.arange(1.0, 41.0))[:, None].repeat(1, 8))
    assert 0 < (spread[4] - model[4]).abs().max() < 1
    for other in (model, spread):
        assert all(torch.equal(a, b) for i, (a, b) in enumerate(zip(weak, other, strict=True))
                   if i != 4)
    from hymo_mini.ops import one_product_chunks
    assert one_product_chunks(weak[3], -weak[4].exp(), 16).all()
    assert one_product_chunks(model[3], -model[4].exp(), 16).all()
    assert not one_product_chunks(spread[3], -spread[4].exp(), 16)[:, 19:].any()  # rate >= 20
    with pytest.raises(ValueError, match="rates must be one of"):
        make_inputs(1, 4, 1, 2, 2, torch.float32, torch.device("cpu"), rates="strong")
    out = tmp_path / "gd.json"
    assert gated_delta.main(["--sections", "peers", "--shapes", "B1_T24_H2_S8_D4",
                             "--dtypes", "float32", "--check-T", "16", "--rates", "model",
                             "--backends", "chunk_torch", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["settings"]["rates"] == "model"
    assert report["peers"]["B1_T24_H2_S8_D4_float32"]["checks"]["chunk_torch"]["agrees"]
