"""hymo_mini.viz.kernel_results and hymo_mini.viz.kernel_targets (book chapter 06, section 4):
the committed GPU runs read into tables and figures that name their run, the chunk kernel's
predicted traffic and peak memory against the H200 measurements, its targets, the sweep, and
the run that timed the kernel without the dispatcher's checks."""

import json

import pytest
from matplotlib.figure import Figure

from hymo_mini.viz import kernel_results as kr
from hymo_mini.viz import kernel_targets as kt

CHUNK_RUN = kr.RESULTS_DIR / "gdn_h200_2026-11-30.json"  # every backend, the chunk kernel's run


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


# ---- the chunk kernel's memory and traffic ----------------------------------------------
def test_chunk_kernel_predicted_peak_matches_the_committed_h200_measurement():
    report = json.loads(CHUNK_RUN.read_text())
    for key, entry in report["shapes"].items():
        itemsize = {"float32": 4, "bfloat16": 2}[entry["dtype"]]
        predicted = kt.chunk_peak_bytes(entry["B"], entry["T"], entry["H"], entry["S"],
                                        entry["D"], itemsize)["total"] / 2**20
        measured = entry["results"]["triton_chunk"]["peak_mib"]
        assert predicted == pytest.approx(measured, rel=2e-3), key


def test_chunk_forward_bytes_minimum_is_the_benchmarks_and_the_kernel_moves_about_twice():
    report = json.loads(CHUNK_RUN.read_text())
    for key, entry in report["shapes"].items():
        itemsize = {"float32": 4, "bfloat16": 2}[entry["dtype"]]
        traffic = kt.chunk_forward_bytes(entry["B"], entry["T"], entry["H"], entry["S"],
                                         entry["D"], itemsize)
        assert traffic["minimum"] == entry["bytes_min_fwd"], key
        assert traffic["total"] == traffic["chunk deltas"] + traffic["scan"] + traffic["outputs"]
        assert 1.9 < traffic["total"] / traffic["minimum"] < 2.6, key
    one = kt.chunk_forward_bytes(B=1, T=64, H=1, S=2, D=3, itemsize=4)
    assert one["scan"] == 1 * (2 * 2 * 3 + 2) * 4  # one chunk: read ΔH and decay, write H


# ---- measured results ------------------------------------------------------------------
def test_load_reports_raises_a_clear_error_when_no_file_is_there(tmp_path, monkeypatch):
    monkeypatch.setattr(kr, "RESULTS_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="benchmarks/gdn.py"):
        kr.load_reports()
    with pytest.raises(FileNotFoundError, match="missing.json"):
        kr.load_reports([tmp_path / "missing.json"])
    with pytest.raises(ValueError, match="not a benchmarks/gdn.py report"):
        kr.load_reports([_write(tmp_path, "gdn_bad.json", {"shapes": {}})])


def test_results_table_merges_runs_later_first_and_names_each_run(tmp_path):
    old = _write(tmp_path, "gdn_a.json", _report(date="2026-01-01", command="cmd-old"))
    new_results = {"triton_kernel": {"fwd_ms": 0.5, "fwdbwd_ms": 3.0, "peak_mib": 300.0}}
    new = _write(tmp_path, "gdn_b.json", _report(date="2026-02-01", command="cmd-new",
                                                  results=new_results))
    reports = kr.load_reports([new, old])
    assert [r["environment"]["file"] for r in reports] == ["gdn_a.json", "gdn_b.json"]
    table = kr.results_table(reports)
    rows = {r["backend"]: r for r in table.rows}
    assert rows["triton_kernel"]["fwd_ms"] == 0.5 and rows["triton_kernel"]["file"] == "gdn_b.json"
    assert rows["eager"]["fwd_ms"] == 400.0  # only in the older run: kept
    text = repr(table)
    for needle in ("cmd-old", "cmd-new", "Test GPU", "2026-02-01", "0.500"):
        assert needle in text


def test_speedup_figure_labels_speedups_over_the_measured_loop(tmp_path):
    reports = kr.load_reports([_write(tmp_path, "gdn_a.json", _report())])
    fig = kr.speedup_figure(reports)
    text = _texts(fig)
    assert "(500x)" in text  # forward 400 / 0.8
    assert "(500x)" in text.split("forward + backward")[1]  # forward+backward 2000 / 4
    assert "13,107 ms" in text and "1.6 ms" in text  # the document's two predictions
    assert "Test GPU" in text and "python3 benchmarks/gdn.py --x" in text and "2026-12-01" in text
    with pytest.raises(KeyError, match="B1_T1_H1"):
        kr.speedup_figure(reports, key="B1_T1_H1")


def test_gpu_results_reads_the_committed_h200_run():
    table, fig = kr.gpu_results()
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
    table = kr.results_table(kr.load_reports([sweep_only, new, old]))
    assert [(r["backend"], r["run"]) for r in table.rows] == [
        ("eager", "b"), ("triton_kernel", "a"), ("triton_chunk", "b")]  # LABELS order
    text = repr(table)
    assert "[a] gdn_a.json" in text and "[b] gdn_b.json" in text and "gdn_c.json" not in text


def test_speedup_figure_draws_the_latest_run_alone(tmp_path):
    old = _write(tmp_path, "gdn_a.json", _report(date="2026-01-01", command="cmd-old"))
    new = _write(tmp_path, "gdn_b.json", _report(
        date="2026-02-01", command="cmd-new",
        results={"eager": {"fwd_ms": 300.0, "fwdbwd_ms": 1500.0},
                 "triton_chunk": {"fwd_ms": 0.5, "fwdbwd_ms": 1.5, "peak_mib": 500.0}}))
    reports = kr.load_reports([old, new])
    assert kr.latest_run(reports, "B4_T4096_H40_float32") is reports[1]
    assert kr.latest_run(reports, "B4_T4096_H40_float32", "triton_kernel") is reports[0]
    with pytest.raises(KeyError, match="fla_chunk"):
        kr.latest_run(reports, "B4_T4096_H40_float32", "fla_chunk")
    text = _texts(kr.speedup_figure(reports))
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
    good = kt.chunk_targets([_targets_report(2.4, 600.0, 0.2)])
    assert [good.verdicts[k][2] for k in kt.TARGETS] == [True, True, True]
    row = good.rows[0]
    assert row["fwdbwd_ratio"] == pytest.approx(0.8) and row["peak_ratio"] == pytest.approx(0.6)
    assert row["fwd_vs_copy"] == pytest.approx(0.2 / (338165760 / 4000.0 / 1e6))
    bad = kt.chunk_targets([_targets_report(2.8, 1100.0, 0.5)])
    assert [bad.verdicts[k][2] for k in kt.TARGETS] == [False, False, False]
    text = repr(bad)
    assert "missed" in text and "met" not in text.split("verdict")[1]
    with pytest.raises(KeyError, match="fla_chunk"):
        kt.chunk_targets([_report()])


def test_chunk_targets_of_the_committed_run():
    targets = kt.chunk_targets(kr.load_reports([CHUNK_RUN]))
    assert len(targets.rows) == 4
    worst = {k: v[0] for k, v in targets.verdicts.items()}
    assert worst["fwdbwd_vs_peer"] == pytest.approx(0.837, abs=1e-3)  # bf16, B4 T4096
    assert worst["peak_vs_peer"] == pytest.approx(0.504, abs=1e-3)  # fp32
    assert 14 < worst["fwd_vs_copy"] < 15  # bf16, B1 T16384
    assert [targets.verdicts[k][2] for k in kt.TARGETS] == [True, True, False]
    assert kt.chunk_targets().rows == targets.rows  # the default picks this run


def test_sweep_table_reads_the_committed_sweep():
    text = kr.sweep_table()
    assert isinstance(text, str) and repr(text) == str(text)
    lines = text.splitlines()
    assert "65,536" in text and "gdn_sweep_h200_2026-11-30.json" in text
    row = next(line for line in lines if line.lstrip().startswith("1,024"))
    assert "recurrent" in row.split("/")[-1]  # at T = 1,024 the recurrent kernel is fastest
    row = next(line for line in lines if line.lstrip().startswith("65,536"))
    assert "Triton chunk" in row


def test_sweep_table_without_a_sweep_raises(tmp_path, monkeypatch):
    monkeypatch.setattr(kr, "RESULTS_DIR", tmp_path)
    _write(tmp_path, "gdn_a.json", _report())
    with pytest.raises(KeyError, match="sweep_T"):
        kr.sweep_table()


# ---- the kernel alone ------------------------------------------------------------------
def _kernel_only_report(alone_fwd, alone_fwdbwd):
    results = {"triton_chunk_kernel": {"fwd_ms": alone_fwd, "fwdbwd_ms": alone_fwdbwd,
                                       "peak_mib": 500.0},
               "triton_chunk": {"fwd_ms": alone_fwd + 0.1, "fwdbwd_ms": alone_fwdbwd + 0.3,
                                "peak_mib": 500.0},
               "fla_chunk": {"fwd_ms": 1.0, "fwdbwd_ms": 3.0, "peak_mib": 1000.0}}
    return _report(results=results)  # copy: 338165760 B at 4000 GB/s = 0.0845 ms


def test_kernel_only_scores_the_kernel_alone_against_the_copy_and_the_peer(tmp_path):
    fast = kt.kernel_only(_write(tmp_path, "fast.json", _kernel_only_report(0.2, 1.5)))
    row = fast.rows[0]
    assert row["copy_ms"] == pytest.approx(338165760 / 4000.0 / 1e6)
    assert row["moved"] == kt.chunk_forward_bytes()["total"]  # B4 T4096 H40 fp32
    text = repr(fast)
    assert "adds 0.100 ms to the forward, 0.300 ms to forward + backward" in text
    assert f"takes {0.2 / row['copy_ms']:.1f}x, met" in text and "0.20x" in text  # 0.2 / 1.0
    assert f"{row['moved'] / 0.2e9:.2f} TB/s (a device copy: 4.00 TB/s)" in text
    assert "Test GPU" in text and "python3 benchmarks/gdn.py --x" in text
    slow = repr(kt.kernel_only(_write(tmp_path, "slow.json", _kernel_only_report(0.5, 1.5))))
    assert f"missed, {0.5 / row['copy_ms'] / 3:.2f}x the limit" in slow


def test_kernel_only_reads_the_committed_h200_run():
    only = kt.kernel_only()  # the default path
    assert [(r["shape"], r["dtype"]) for r in only.rows] == [("B4 T4096 H40", "float32")]
    res, copy_ms = only.rows[0]["results"], only.rows[0]["copy_ms"]
    assert copy_ms == pytest.approx(0.0796, abs=1e-4)
    assert res["triton_chunk_kernel"]["fwd_ms"] / copy_ms == pytest.approx(4.34, abs=0.01)
    assert res["triton_chunk"]["fwd_ms"] / copy_ms == pytest.approx(5.74, abs=0.01)
    text = repr(only)
    assert "4.3x, missed, 1.45x the limit" in text and "2.01x the minimum" in text
    assert "chunk_kernel_only_h200_2026-11-30.json" in text and "NVIDIA H200" in text


def test_kernel_only_without_its_file_or_its_backends_raises(tmp_path, monkeypatch):
    monkeypatch.setattr(kr, "RESULTS_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="chunk_kernel_only_h200_2026-11-30.json"):
        kt.kernel_only()
    with pytest.raises(FileNotFoundError, match="triton_chunk_kernel"):
        kt.kernel_only(tmp_path / "missing.json")
    with pytest.raises(KeyError, match="no shape measured with"):
        kt.kernel_only(_write(tmp_path, "other.json", _report()))
