"""hymo_book.training (chapter 17): the tables and the profile figure of a whole-step GPU
report, on a synthetic report."""

import json

import pytest
from figure_checks import assert_series_distinct
from hymo_book import results, training


def _case(kind: str, B: int, T: int, tokens_per_s: float) -> dict:
    return {"B": B, "T": T, "tokens_per_s": tokens_per_s, "mfu": 0.3, "peak_GiB": 40.0,
            "busy_share": 0.9,
            "profile": {"kernel_ms_per_step": 100.0,
                        "components_ms": {"moe": 50.0 if "reference" in kind else 20.0,
                                          "loss": 30.0, "backward": 0.001}}}


def fake_report() -> dict:
    cases = {}
    for B, T in ((4, 4096), (1, 16384)):
        for kind in ("hybrid_fast", "hybrid_reference", "gdn_fast", "mla_fast", "llama_sdpa"):
            cases[f"{kind}_b{B}t{T}"] = _case(kind, B, T, 1000.0 * (1 + len(cases)))
    return {"cases": cases, "ratios": {"a / b": 1.0}, "peak_tflops": 790.0,
            "date": "2026-01-01", "command": "benchmarks/train_step.py",
            "hardware": {"gpu": "test gpu"},
            "targets_hybrid_b4t4096": {"MFU >= 35%": {"value": 0.3, "met": False},
                                       "GPU busy >= 90%": {"value": 0.95, "met": True},
                                       "faster than fla GLA": {"value": None, "met": None}}}


def test_the_tables_carry_every_case_and_the_caption(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    (tmp_path / "train_step_x.json").write_text(json.dumps(fake_report()))
    report = training.load_train_step("train_step_x.json")
    table = training.train_step_table(report)
    assert len(table.rows) == 10 and "test gpu" in table.caption
    assert "790" in str(table)
    targets = training.targets_table(report)
    assert [t["measured"]["met"] for t in targets.rows] == [False, True, None]
    assert "not measured" in str(targets) and "missed" in str(targets)


def test_a_missing_case_names_the_cases_there():
    with pytest.raises(KeyError, match="hybrid_fast_b4t4096"):
        training.case(fake_report(), "hybrid_fast_muon")


def test_the_profile_figure_has_a_hatched_bar_series_per_path():
    fig = training.step_profile_figure(fake_report())
    ax = fig.axes[0]
    assert [label.get_text() for label in ax.get_yticklabels()] == ["MoE", "head and losses"]
    assert_series_distinct(fig)
    assert len(ax.containers) == 2


def test_freed_bytes_are_what_the_grouped_path_would_keep(monkeypatch):
    """The MoE items of freed_bytes, against the bf16 tensors routed_grouped saves for its
    backward (hymo_mini's tiny config, under CPU autocast): with its rebuilds, x W1, x W3,
    the experts' weights in bf16, the third product's output y and the combine weights;
    without them, those items more (the output rows in token order taking y's place)."""
    import torch

    from hymo_mini.config import load_config, replace
    from hymo_mini.moe import DeepSeekMoE, dispatch

    config = replace(load_config("hymo_mini").model, capacity_factor=8.0)
    if not dispatch.grouped_mm_supported(torch.device("cpu"), torch.bfloat16, config.dim,
                                             config.moe_inter_dim):
        pytest.skip("this torch has no CPU _grouped_mm")
    B, T = 2, 16
    moe = DeepSeekMoE(config)
    x = torch.randn(B * T, config.dim, requires_grad=True)
    routing = moe.route(x.detach())

    def saved_bf16(recompute, monkeypatch):
        saved = {}

        def count(t):
            if t.dtype == torch.bfloat16:
                saved[(t.data_ptr(), tuple(t.shape))] = t.numel() * t.element_size()

        def pack(t):
            count(t)
            return t

        rebuilt_pack = dispatch._Rebuilt.pack

        def pack_rebuilt(self, t):  # the path's own hooks are innermost: count what they
            fn, kept = rebuilt_pack(self, t)  # keep, a tensor or a rebuild's sources
            for source in ([kept] if fn is None else kept[0]):
                count(source)
            return fn, kept

        monkeypatch.setattr(dispatch._Rebuilt, "pack", pack_rebuilt)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                dispatch.routed_grouped(x, routing, moe.experts, recompute=recompute)
        return sum(saved.values())

    n, k, E = B * T, config.n_activated_experts, config.n_routed_experts
    freed = training.freed_bytes(config, B, T)
    earlier = freed["earlier_moe_layer"]
    kept = (2 * (k * n * config.moe_inter_dim * 2) + k * n * config.dim * 2 + n * k * 2
            + earlier["expert weights in bf16"])  # x W1, x W3, y, combine weights, weights
    assert earlier["expert weights in bf16"] == 3 * E * config.moe_inter_dim * config.dim * 2
    assert saved_bf16(True, monkeypatch) == kept
    assert saved_bf16(False, monkeypatch) == kept + sum(freed["per_moe_layer"].values())
    assert freed["moe_layers"] == len(config.mla_positions)


def test_freed_bytes_count_the_block_states_beyond_the_chunk_states():
    """The memory runs' blocks of 16 steps and chunks of 64: the block is still the
    kernel's (chapter 17 names it ``BLOCK``), the chunk is not."""
    from hymo_mini.config import load_config
    from hymo_mini.ops.gla.chunk_triton import BLOCK

    config = load_config("hymo_750m").model
    freed = training.freed_bytes(config, B=4, T=4096)
    heads = config.gdn_d_inner // config.gdn_headdim
    assert freed["per_gdn_layer"] == 4 * heads * (256 - 64) * 32 * 32 * 4
    assert freed["gdn_layers"] == 24
    assert training.MEMORY_RUNS_BLOCK == BLOCK


def test_the_latest_targets_read_the_committed_run():
    targets = training.latest_targets_table()
    assert [h for h in targets.table.header if h != "verdict"][1:] == ["fast path",
                                                                     "as one CUDA graph"]
    rows = {r["target"]: r for r in targets.rows}
    assert rows["peak <= 40 GiB"]["as one CUDA graph"]["met"] is True
    for peer in ("HF Llama", "fla GLA"):  # both sizes of both peers are in the latest run
        for name in (f"faster than {peer}", f"faster than {peer} at the same active size"):
            assert rows[name]["as one CUDA graph"]["value"] is not None, name


def test_the_peer_spread_reads_every_machine_and_marks_a_missing_size():
    spread = training.peer_spread_table()
    assert [v["file"] for v in spread.rows] == list(training.PEER_RUNS)
    assert all(f"[{i}]" in spread.caption for i in range(1, len(training.PEER_RUNS) + 1))
    for v in spread.rows:  # the ratio each row prints is the two tokens/s of its own run
        assert v["hybrid_fast_graph"]["tokens_per_s"] > 0 and v["fla_gla"]["tokens_per_s"] > 0
    assert "not in this run" in str(spread.table)  # the first runs had no matched peer
    assert any("fla_gla_matched" in v for v in spread.rows)


def test_a_busy_share_over_one_is_not_shown():
    report = fake_report()
    report["cases"]["mla_fast_b4t4096"].update(busy_share=5.0, step_ms=10.0)
    report["cases"]["mla_fast_b4t4096"]["profile"]["kernel_ms_per_step"] = 50.0
    row = next(r for r in training.train_step_table(report).table.rows
               if r[0] == training.KINDS["mla_fast"] and r[1] == "4 × 4,096")
    assert row[-1] == "not valid"
    assert training.invalid_busy_cases(report) == {"mla_fast_b4t4096": (50.0, 10.0)}
