"""hymo_mini.viz.kernel_chapter (book chapter 06): the error checks, the decay matrix of the
chunked form against the loop, the chunk kernel's levels against the direct weights, the
document's launch and memory arithmetic, the predicted peak memory of both kernels against
the committed H200 measurements, the targets, and the results table and figures."""

import json
import math

import pytest
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from hymo_mini.gdn import gated_delta_rule_ref
from hymo_mini.viz import kernel_chapter as kc

RECURRENT_RUN = kc.RESULTS_DIR / "gdn_recurrent_h200_2026-11-30.json"
CHUNK_RUN = kc.RESULTS_DIR / "gdn_h200_2026-11-30.json"  # every backend, the chunk kernel's run


def _report(date="2026-12-01T00:00:00+00:00", command="python3 benchmarks/gdn.py --x",
            results=None):
    results = results or {"eager": {"fwd_ms": 400.0, "fwdbwd_ms": 2000.0},
                          "triton_kernel": {"fwd_ms": 0.8, "fwdbwd_ms": 4.0, "peak_mib": 400.0}}
    entry = {"B": 4, "T": 4096, "H": 40, "S": 32, "D": 32, "dtype": "float32",
             "bytes_min_fwd": 338165760, "results": results,
             "checks": {name: {"o": 1e-7, "agrees": True} for name in results}}
    return {"environment": {"gpu": "Test GPU", "torch": "2.x", "triton": "3.x", "date": date,
                            "command": command, "copy_GBps": 4000.0},
            "shapes": {"B4_T4096_H40_float32": entry}}


def _write(tmp_path, name, report):
    path = tmp_path / name
    path.write_text(json.dumps(report))
    return path


def _texts(fig: Figure) -> str:
    parts = [fig._suptitle.get_text() if fig._suptitle else ""]
    for ax in fig.axes:
        parts += [ax.get_title()] + [t.get_text() for t in ax.texts]
        parts += [t.get_text() for t in ax.get_yticklabels()]
    return " | ".join(parts)


# ---- errors ----------------------------------------------------------------------------
def test_max_rel_error_is_the_largest_difference_over_the_largest_value():
    ref = torch.tensor([1.0, -4.0, 2.0])
    assert kc.max_rel_error(ref + torch.tensor([0.0, 0.0, 0.4]), ref) == pytest.approx(0.1)
    assert kc.max_rel_error(ref, ref) == 0.0
    with pytest.raises(ValueError, match="shape"):
        kc.max_rel_error(ref, ref[:2])


def test_check_line_reports_pass_and_failure_without_the_error_digits():
    ref = torch.linspace(-1, 1, 10)
    good = kc.check_line("rung", ref + 1e-8, ref, 1e-6)
    bad = kc.check_line("rung", ref * 1.01, ref, 1e-6)
    assert good.startswith("rung") and good.endswith("< 1e-06: True")
    assert bad.endswith(": False")
    with pytest.raises(ValueError, match="tol"):
        kc.check_line("rung", ref, ref, 0.0)


# ---- the chunked form ------------------------------------------------------------------
@pytest.mark.parametrize("T, S, decay", [(1, 3, 1.0), (13, 5, 0.3), (20, 4, 30.0)])
def test_decay_matrix_times_v_is_the_recurrence(T, S, decay):
    b, c, g, A = kc._example(T, S, decay, seed=T)
    v = torch.randn(T, 3, dtype=torch.float64)
    o_loop, _ = gated_delta_rule_ref(v[None, :, None], b[None, :, None], c[None, :, None],
                                     g[None, :, None], A[None])
    M = kc.decay_matrix(b, c, g, A)
    assert torch.equal(M, M.tril())
    torch.testing.assert_close(M @ v, o_loop[0, :, 0], rtol=1e-12, atol=1e-12)


def test_decay_matrix_rejects_mismatched_shapes():
    b, c, g, A = kc._example(6, 4, 1.0, seed=0)
    with pytest.raises(ValueError, match="expected b, c"):
        kc.decay_matrix(b, c[:, :3], g, A)
    with pytest.raises(ValueError, match="expected b, c"):
        kc.decay_matrix(b, c, g[:5], A)


@pytest.mark.parametrize("T, chunk", [(32, 8), (30, 8), (16, 16)])
def test_chunk_matrix_figure_draws_one_box_per_chunk_and_the_boundaries(T, chunk):
    fig = kc.chunk_matrix_figure(T=T, chunk=chunk)
    ax = fig.axes[0]
    n_chunks = math.ceil(T / chunk)
    boxes = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(boxes) == n_chunks
    assert sum(bx.get_width() for bx in boxes) == T  # the diagonal blocks tile the sequence
    assert len(ax.lines) == 2 * (n_chunks - 1)  # a horizontal and a vertical line per boundary
    assert f"{n_chunks} chunks" in ax.get_title()


def test_chunk_matrix_figure_rejects_bad_arguments():
    with pytest.raises(ValueError, match="chunk"):
        kc.chunk_matrix_figure(chunk=0)
    with pytest.raises(ValueError, match="decay"):
        kc.chunk_matrix_figure(decay=-1.0)


# ---- the chunk kernel's levels ---------------------------------------------------------
def test_pair_level_splits_every_pair_between_its_halves():
    assert kc.pair_level(13, 2) == (3, 8)
    assert kc.pair_level(1, 0) == (0, 1) and kc.pair_level(7, 6) == (0, 7)
    assert kc.pair_level(6, 4) == (1, 6) and kc.pair_level(31, 0) == (4, 16)
    for t in range(1, 32):
        for s in range(t):
            k, r = kc.pair_level(t, s)
            assert s < r <= t and r % 2**k == 0  # r starts the upper half ...
            assert t // 2 ** (k + 1) == s // 2 ** (k + 1)  # ... of one 2^(k+1) sub-block
            assert (t >> k) & 1 == 1 and (s >> k) & 1 == 0
    for t, s in ((2, 2), (1, 3), (-1, -2), (2.0, 1)):
        with pytest.raises(ValueError, match="0 <= s < t"):
            kc.pair_level(t, s)


@pytest.mark.parametrize("block", [2, 4, 8, 16, 32])
def test_level_map_covers_every_pair_once_as_the_kernel_masks_it(block):
    levels = kc.level_map(block)
    step = torch.arange(block)
    below = step[:, None] > step[None, :]
    assert torch.equal(levels < 0, ~below)  # -1 on and above the diagonal
    for k in range(block.bit_length() - 1):
        hi = step >> k  # the kernel's mask (gdn_triton_chunk._level), restated
        kernel_mask = (hi[:, None] == hi[None, :] + 1) & ((hi[:, None] & 1) == 1)
        assert torch.equal(levels == k, kernel_mask), k
        assert int((levels == k).sum()) == block * 2**k // 2  # block / 2^(k+1) squares of 4^k
    assert int((levels >= 0).sum()) == block * (block - 1) // 2
    assert all(int(levels[t, s]) == kc.pair_level(t, s)[0] for t in range(block) for s in range(t))
    for bad in (0, 1, 12, 16.0):
        with pytest.raises(ValueError, match="power of two"):
            kc.level_map(bad)


@pytest.mark.parametrize("T, S, decay", [(2, 3, 1.0), (8, 5, 0.3), (16, 8, 1.0), (16, 8, 40.0),
                                         (32, 4, 3.0)])
def test_level_weights_are_the_direct_weights(T, S, decay):
    b, c, g, A = kc._example(T, S, decay, seed=T + S)
    W_direct = kc.decay_matrix(b, c, g, A)
    W = kc.level_weights(b, c, g, A)
    assert torch.equal(W, W.tril())
    torch.testing.assert_close(W, W_direct, rtol=1e-13, atol=1e-300)
    v = torch.randn(T, 3, dtype=torch.float64)
    o_loop, _ = gated_delta_rule_ref(v[None, :, None], b[None, :, None], c[None, :, None],
                                     g[None, :, None], A[None])
    torch.testing.assert_close(W @ v, o_loop[0, :, 0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype, decay", [(torch.float64, 200.0), (torch.float32, 40.0)])
def test_level_weights_stay_finite_where_one_factor_per_step_overflows(dtype, decay):
    b, c, g, A = kc._example(16, 8, decay, seed=0)  # l_15 · |A| far past the dtype's limit
    W_direct = kc.decay_matrix(b, c, g, A)  # float64, direct: the reference
    b, c, g, A = (x.to(dtype) for x in (b, c, g, A))
    W_one = kc.one_factor_weights(b, c, g, A)
    W = kc.level_weights(b, c, g, A)
    assert not torch.isfinite(W_one).all()  # inf · 0 = nan below the diagonal
    assert torch.isfinite(W).all()
    tol = 1e-13 if dtype == torch.float64 else 1e-5
    assert kc.max_rel_error(W, W_direct) < tol
    mild = kc._example(16, 8, 0.5, seed=0)  # at a mild decay the shortcut is right too
    torch.testing.assert_close(kc.one_factor_weights(*mild), kc.decay_matrix(*mild),
                               rtol=1e-10, atol=1e-14)


def test_level_weights_reject_bad_shapes_and_block_lengths():
    b, c, g, A = kc._example(12, 4, 1.0, seed=0)
    with pytest.raises(ValueError, match="power of two"):
        kc.level_weights(b, c, g, A)
    b, c, g, A = kc._example(8, 4, 1.0, seed=0)
    with pytest.raises(ValueError, match="expected b, c"):
        kc.level_weights(b, c[:, :3], g, A)
    with pytest.raises(ValueError, match="expected b, c"):
        kc.one_factor_weights(b, c, g[:4], A)


@pytest.mark.parametrize("block, t, s", [(16, 13, 2), (32, 29, 2), (8, 7, 6), (16, 5, 4)])
def test_level_map_figure_colours_the_levels_and_marks_the_split(block, t, s):
    fig = kc.level_map_figure(block, t, s)
    ax = fig.axes[0]
    image = ax.images[0].get_array()
    n_levels = block.bit_length() - 1
    levels = kc.level_map(block).numpy()
    assert image.mask.sum() == block * (block - 1) // 2  # the upper triangle is blank
    assert (image.data[levels >= 0] == levels[levels >= 0]).all()
    assert (image.data.diagonal() == n_levels).all()  # the diagonal has its own colour
    k, r = kc.pair_level(t, s)
    box = next(p for p in ax.patches if isinstance(p, Rectangle))
    assert (box.get_x(), box.get_y(), box.get_width()) == (r - 2**k - 0.5, r - 0.5, 2**k)
    star, circles = ax.lines[0], ax.lines[1]
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (s, t)
    assert list(circles.get_xdata()) == [r, s] and list(circles.get_ydata()) == [t, r]
    assert f"level {k}, split at r = {r}" in ax.get_title()
    assert len(ax.get_legend().get_texts()) == n_levels + 1


def test_level_map_figure_rejects_bad_arguments():
    with pytest.raises(ValueError, match="power of two"):
        kc.level_map_figure(block=12)
    with pytest.raises(ValueError, match="0 <= s < t < block"):
        kc.level_map_figure(block=16, t=16, s=2)
    with pytest.raises(ValueError, match="0 <= s < t < block"):
        kc.level_map_figure(block=16, t=3, s=3)


# ---- launch arithmetic -----------------------------------------------------------------
def test_document_launch_arithmetic():
    doc = kc.document_launches()
    assert doc["loop_launches"] == 4096 * 2 * 40 * 4 == 1_310_720
    assert doc["loop_s"] == pytest.approx(13.1072)
    assert doc["kernel_launches"] == 160 and doc["kernel_ms"] == pytest.approx(1.6)
    assert doc["ratio"] == 8192
    assert kc.document_launches(per_step=1)["loop_launches"] == 655_360  # the other count


def test_launches_per_step_do_not_grow_with_batch_or_heads_and_exclude_views():
    small = kc.launches_per_step(B=2, H=3)
    assert small == kc.launches_per_step(B=4, H=40, S=32, D=32)  # the document's shape
    assert small == kc.launches_per_step(B=3, H=7, S=9, D=2)
    assert small["exp"] == 1 and sum(small.values()) >= 4  # decay, write, update, read
    assert not {"view", "permute", "select", "unsqueeze", "expand"} & set(small)


# ---- memory ----------------------------------------------------------------------------
def test_memory_bytes_at_the_documents_shape():
    mem = kc.memory_bytes()  # B=4, T=4096, H=40, S=D=32, C=64
    assert mem["trajectory"] == 4 * 4096 * 40 * 32 * 32 * 4 == 2_684_354_560
    assert mem["checkpoints"] == 160 * 64 * 4096 == mem["scratch"]
    assert mem["block_states"] == 4 * mem["checkpoints"]  # one state per 16 steps, not 64
    assert kc.memory_bytes(block=32)["block_states"] == 2 * mem["checkpoints"]
    assert kc.memory_bytes(T=65, chunk=64)["checkpoints"] == 160 * 2 * 4096  # rounds up
    with pytest.raises(ValueError, match="chunk"):
        kc.memory_bytes(chunk=0)


def test_predicted_peak_matches_the_committed_h200_measurement():
    report = json.loads(RECURRENT_RUN.read_text())
    C = int(report["triton_configs"]["bwd"]["4"]["chunk"])
    for key in ("B4_T4096_H40_float32", "B1_T16384_H40_float32"):
        entry = report["shapes"][key]
        predicted = kc.recurrent_peak_bytes(entry["B"], entry["T"], entry["H"], entry["S"],
                                            entry["D"], chunk=C)["total"] / 2**20
        measured = entry["results"]["triton_kernel"]["peak_mib"]
        assert predicted == pytest.approx(measured, rel=2e-3), key


def test_chunk_kernel_predicted_peak_matches_the_committed_h200_measurement():
    report = json.loads(CHUNK_RUN.read_text())
    for key, entry in report["shapes"].items():
        itemsize = {"float32": 4, "bfloat16": 2}[entry["dtype"]]
        predicted = kc.chunk_peak_bytes(entry["B"], entry["T"], entry["H"], entry["S"],
                                        entry["D"], itemsize)["total"] / 2**20
        measured = entry["results"]["triton_chunk"]["peak_mib"]
        assert predicted == pytest.approx(measured, rel=2e-3), key


def test_chunk_forward_bytes_minimum_is_the_benchmarks_and_the_kernel_moves_about_twice():
    report = json.loads(CHUNK_RUN.read_text())
    for key, entry in report["shapes"].items():
        itemsize = {"float32": 4, "bfloat16": 2}[entry["dtype"]]
        traffic = kc.chunk_forward_bytes(entry["B"], entry["T"], entry["H"], entry["S"],
                                         entry["D"], itemsize)
        assert traffic["minimum"] == entry["bytes_min_fwd"], key
        assert traffic["total"] == traffic["chunk deltas"] + traffic["scan"] + traffic["outputs"]
        assert 1.9 < traffic["total"] / traffic["minimum"] < 2.6, key
    one = kc.chunk_forward_bytes(B=1, T=64, H=1, S=2, D=3, itemsize=4)
    assert one["scan"] == 1 * (2 * 2 * 3 + 2) * 4  # one chunk: read ΔH and decay, write H


def test_memory_figure_bars_are_the_arithmetic():
    fig = kc.memory_figure(T=2048, chunk=16, n_layers=3, gpu_gib=80.0)
    ax = fig.axes[0]
    mem = kc.memory_bytes(4, 2048, 40, 32, 32, 16)
    heights = sorted(round(p.get_height() * 2**30) for p in ax.patches if isinstance(p, Rectangle))
    expected = sorted(n * mem[k] for k in ("trajectory", "checkpoints", "block_states")
                      for n in (1, 3))
    assert heights == expected
    assert "3 GDN layers" in [t.get_text() for t in ax.get_xticklabels()]
    with pytest.raises(ValueError, match="n_layers"):
        kc.memory_figure(n_layers=0)


# ---- measured results ------------------------------------------------------------------
def test_load_reports_raises_a_clear_error_when_no_file_is_there(tmp_path, monkeypatch):
    monkeypatch.setattr(kc, "RESULTS_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="benchmarks/gdn.py"):
        kc.load_reports()
    with pytest.raises(FileNotFoundError, match="missing.json"):
        kc.load_reports([tmp_path / "missing.json"])
    with pytest.raises(ValueError, match="not a benchmarks/gdn.py report"):
        kc.load_reports([_write(tmp_path, "gdn_bad.json", {"shapes": {}})])


def test_results_table_merges_runs_later_first_and_names_each_run(tmp_path):
    old = _write(tmp_path, "gdn_a.json", _report(date="2026-01-01", command="cmd-old"))
    new_results = {"triton_kernel": {"fwd_ms": 0.5, "fwdbwd_ms": 3.0, "peak_mib": 300.0}}
    new = _write(tmp_path, "gdn_b.json", _report(date="2026-02-01", command="cmd-new",
                                                  results=new_results))
    reports = kc.load_reports([new, old])
    assert [r["environment"]["file"] for r in reports] == ["gdn_a.json", "gdn_b.json"]
    table = kc.results_table(reports)
    rows = {r["backend"]: r for r in table.rows}
    assert rows["triton_kernel"]["fwd_ms"] == 0.5 and rows["triton_kernel"]["file"] == "gdn_b.json"
    assert rows["eager"]["fwd_ms"] == 400.0  # only in the older run: kept
    text = repr(table)
    for needle in ("cmd-old", "cmd-new", "Test GPU", "2026-02-01", "0.500"):
        assert needle in text


def test_speedup_figure_labels_speedups_over_the_measured_loop(tmp_path):
    reports = kc.load_reports([_write(tmp_path, "gdn_a.json", _report())])
    fig = kc.speedup_figure(reports)
    text = _texts(fig)
    assert "(500x)" in text  # forward 400 / 0.8
    assert "(500x)" in text.split("forward + backward")[1]  # forward+backward 2000 / 4
    assert "13,107 ms" in text and "1.6 ms" in text  # the document's two predictions
    assert "Test GPU" in text and "python3 benchmarks/gdn.py --x" in text and "2026-12-01" in text
    with pytest.raises(KeyError, match="B1_T1_H1"):
        kc.speedup_figure(reports, key="B1_T1_H1")


def test_gpu_results_reads_the_committed_h200_run():
    table, fig = kc.gpu_results()
    assert isinstance(fig, Figure)
    keys = {(r["shape"], r["dtype"], r["backend"]) for r in table.rows}
    assert ("B4 T4096 H40", "float32", "eager") in keys
    assert ("B4 T4096 H40", "float32", "triton_kernel") in keys
    assert "NVIDIA H200" in table.caption and "benchmarks/gdn.py" in table.caption


def test_results_table_marks_each_row_with_its_run_and_orders_rows(tmp_path):
    old = _write(tmp_path, "gdn_a.json", _report(date="2026-01-01", command="cmd-old"))
    new = _write(tmp_path, "gdn_b.json", _report(
        date="2026-02-01", command="cmd-new",
        results={"triton_chunk": {"fwd_ms": 0.3, "fwdbwd_ms": 1.0, "peak_mib": 500.0},
                 "eager": {"fwd_ms": 390.0, "fwdbwd_ms": 1900.0}}))
    sweep_only = _write(tmp_path, "gdn_c.json", {**_report(date="2026-03-01"), "shapes": {}})
    table = kc.results_table(kc.load_reports([sweep_only, new, old]))
    assert [(r["backend"], r["run"]) for r in table.rows] == [
        ("eager", "b"), ("triton_kernel", "a"), ("triton_chunk", "b")]  # _LABELS order
    text = repr(table)
    assert "[a] gdn_a.json" in text and "[b] gdn_b.json" in text and "gdn_c.json" not in text


def test_speedup_figure_draws_the_latest_run_alone(tmp_path):
    old = _write(tmp_path, "gdn_a.json", _report(date="2026-01-01", command="cmd-old"))
    new = _write(tmp_path, "gdn_b.json", _report(
        date="2026-02-01", command="cmd-new",
        results={"eager": {"fwd_ms": 300.0, "fwdbwd_ms": 1500.0},
                 "triton_chunk": {"fwd_ms": 0.5, "fwdbwd_ms": 1.5, "peak_mib": 500.0}}))
    reports = kc.load_reports([old, new])
    assert kc.latest_run(reports, "B4_T4096_H40_float32") is reports[1]
    assert kc.latest_run(reports, "B4_T4096_H40_float32", "triton_kernel") is reports[0]
    with pytest.raises(KeyError, match="fla_chunk"):
        kc.latest_run(reports, "B4_T4096_H40_float32", "fla_chunk")
    text = _texts(kc.speedup_figure(reports))
    assert "(600x)" in text and "(1,000x)" in text  # 300 / 0.5 and 1500 / 1.5: one run's loop
    assert "cmd-new" in text and "cmd-old" not in text
    assert _LABEL_RECURRENT_NO_CHECKS not in text  # the older run's backend is not mixed in


_LABEL_RECURRENT_NO_CHECKS = "hymo Triton recurrent, no checks"


def _targets_report(ours_fwdbwd, ours_peak, ours_fwd):
    results = {"triton_chunk": {"fwd_ms": ours_fwd, "fwdbwd_ms": ours_fwdbwd,
                                "peak_mib": ours_peak},
               "fla_chunk": {"fwd_ms": 1.0, "fwdbwd_ms": 3.0, "peak_mib": 1000.0}}
    return _report(results=results)  # copy: 338165760 B at 4000 GB/s = 0.0845 ms


def test_chunk_targets_scores_each_target_at_its_worst_shape(tmp_path):
    good = kc.chunk_targets([_targets_report(2.4, 600.0, 0.2)])
    assert [good.verdicts[k][2] for k in kc.TARGETS] == [True, True, True]
    row = good.rows[0]
    assert row["fwdbwd_ratio"] == pytest.approx(0.8) and row["peak_ratio"] == pytest.approx(0.6)
    assert row["fwd_vs_copy"] == pytest.approx(0.2 / (338165760 / 4000.0 / 1e6))
    bad = kc.chunk_targets([_targets_report(2.8, 1100.0, 0.5)])
    assert [bad.verdicts[k][2] for k in kc.TARGETS] == [False, False, False]
    text = repr(bad)
    assert "missed" in text and "met" not in text.split("verdict")[1]
    with pytest.raises(KeyError, match="fla_chunk"):
        kc.chunk_targets([_report()])


def test_chunk_targets_of_the_committed_run():
    targets = kc.chunk_targets(kc.load_reports([CHUNK_RUN]))
    assert len(targets.rows) == 4
    worst = {k: v[0] for k, v in targets.verdicts.items()}
    assert worst["fwdbwd_vs_peer"] == pytest.approx(0.837, abs=1e-3)  # bf16, B4 T4096
    assert worst["peak_vs_peer"] == pytest.approx(0.504, abs=1e-3)  # fp32
    assert 14 < worst["fwd_vs_copy"] < 15  # bf16, B1 T16384
    assert [targets.verdicts[k][2] for k in kc.TARGETS] == [True, True, False]
    assert kc.chunk_targets().rows == targets.rows  # the default picks this run


def test_sweep_table_reads_the_committed_sweep():
    text = kc.sweep_table()
    assert isinstance(text, str) and repr(text) == str(text)
    lines = text.splitlines()
    assert "65,536" in text and "gdn_sweep_h200_2026-11-30.json" in text
    row = next(line for line in lines if line.lstrip().startswith("1,024"))
    assert "recurrent" in row.split("/")[-1]  # at T = 1,024 the recurrent kernel is fastest
    row = next(line for line in lines if line.lstrip().startswith("65,536"))
    assert "Triton chunk" in row



def test_sweep_table_without_a_sweep_raises(tmp_path, monkeypatch):
    monkeypatch.setattr(kc, "RESULTS_DIR", tmp_path)
    _write(tmp_path, "gdn_a.json", _report())
    with pytest.raises(KeyError, match="sweep_T"):
        kc.sweep_table()
