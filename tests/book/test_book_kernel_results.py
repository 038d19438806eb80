"""hymo_book.kernels.gdn_runs, plots.kernel_benchmarks and kernels.targets (chapter 21, the report):
runs read into tables and figures that name their run, on synthetic reports; the chunk
kernel's predicted traffic and peak memory against the committed H200 measurements; its
targets; the sweep; the run that timed the kernel without the dispatcher's checks."""

import json

import pytest
from figure_checks import assert_integer_ticks, assert_series_distinct
from hymo_book import results
from hymo_book.kernels import gdn_runs as kr
from hymo_book.kernels import targets as kt
from hymo_book.plots import kernel_benchmarks as kp
from hymo_book.style import backend_style
from matplotlib.figure import Figure

CHUNK_RUN = "gdn_h200_2026-11-30.json"  # every backend, the chunk kernel's committed run
KEY = "B4_T4096_H40_float32"


def _report(date="2026-12-01T00:00:00+00:00", command="python3 benchmarks/gdn.py --x",
            results=None):
    results = results or {"naive": {"fwd_ms": 400.0, "fwdbwd_ms": 2000.0},
                          "recurrent_triton_kernel": {"fwd_ms": 0.8, "fwdbwd_ms": 4.0,
                                                      "peak_mib": 400.0}}
    entry = {"B": 4, "T": 4096, "H": 40, "S": 32, "D": 32, "dtype": "float32",
             "bytes_min_fwd": 338165760, "results": results,
             "checks": {name: {"o": 1e-7, "agrees": True} for name in results}}
    return {"environment": {"gpu": "Test GPU", "torch": "2.x", "triton": "3.x", "date": date,
                            "command": command, "copy_GBps": 4000.0},
            "shapes": {KEY: entry}}


def _sweep_report(names=("naive", "recurrent_triton", "chunk_triton", "fla_chunk")):
    T = [1024, 2048, 4096]
    res = {n: {"fwd_ms": [1.0 + i, 2.0 + i, 4.0 + i], "fwdbwd_ms": [3.0 + i, 6.0 + i, 12.0 + i]}
           for i, n in enumerate(names)}
    res["naive"] = {"fwd_ms": [100.0, 200.0], "fwdbwd_ms": []}  # cut off after two lengths
    return {**_report(), "shapes": {},
            "sweep_T": {"B": 1, "H": 40, "S": 32, "D": 32, "dtype": "float32", "T": T,
                        "results": res}}


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


# ---- the chunk kernel's memory and traffic against the committed run ----------------------
def test_chunk_kernel_predicted_peak_matches_the_committed_h200_measurement():
    report = results.load_result(CHUNK_RUN)
    for key, entry in report["shapes"].items():
        predicted = kt.chunk_peak_bytes(entry["B"], entry["T"], entry["H"], entry["S"],
                                        entry["D"], kr.ITEMSIZE[entry["dtype"]])["total"]
        measured = entry["results"]["chunk_triton"]["peak_mib"]
        assert predicted / 2**20 == pytest.approx(measured, rel=2e-3), key


def test_chunk_forward_bytes_minimum_is_the_benchmarks_and_the_kernel_moves_about_twice():
    report = results.load_result(CHUNK_RUN)
    for key, entry in report["shapes"].items():
        traffic = kt.chunk_forward_bytes(entry["B"], entry["T"], entry["H"], entry["S"],
                                         entry["D"], kr.ITEMSIZE[entry["dtype"]])
        assert traffic["minimum"] == entry["bytes_min_fwd"], key
        assert traffic["total"] == traffic["chunk deltas"] + traffic["scan"] + traffic["outputs"]
        assert 1.9 < traffic["total"] / traffic["minimum"] < 2.6, key
    one = kt.chunk_forward_bytes(B=1, T=64, H=1, S=2, D=3, itemsize=4)
    assert one["scan"] == 1 * (2 * 2 * 3 + 2) * 4  # one chunk: read ΔH and decay, write H


# ---- reading runs ------------------------------------------------------------------------
def test_load_reports_raises_a_clear_error_when_no_file_is_there(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="benchmarks/gdn.py"):
        kr.load_reports()
    with pytest.raises(FileNotFoundError, match="missing.json"):
        kr.load_reports([tmp_path / "missing.json"])
    with pytest.raises(ValueError, match="not a benchmarks/gdn.py report"):
        kr.load_reports([_write(tmp_path, "gdn_bad.json", {"environment": {"date": "x"}})])


def test_old_backend_names_read_as_new_ones(tmp_path):
    old = _report(results={"eager": {"fwd_ms": 4.0}, "triton_chunk": {"fwd_ms": 1.0}})
    old["backends"] = ["eager", "triton_chunk"]
    report = kr.load_reports([_write(tmp_path, "gdn_old.json", old)])[0]
    assert report["backends"] == ["naive", "chunk_triton"]
    assert set(report["shapes"][KEY]["results"]) == {"naive", "chunk_triton"}
    assert set(report["shapes"][KEY]["checks"]) == {"naive", "chunk_triton"}


def test_results_table_merges_runs_later_first_and_names_each_run(tmp_path):
    old = _write(tmp_path, "gdn_a.json", _report(date="2026-01-01", command="cmd-old"))
    new_results = {"recurrent_triton_kernel": {"fwd_ms": 0.5, "fwdbwd_ms": 3.0,
                                               "peak_mib": 300.0}}
    new = _write(tmp_path, "gdn_b.json", _report(date="2026-02-01", command="cmd-new",
                                                  results=new_results))
    reports = kr.load_reports([new, old])
    assert [r["file"] for r in reports] == ["gdn_a.json", "gdn_b.json"]  # by date
    table = kr.results_table(reports)
    rows = {r["backend"]: r for r in table.rows}
    kernel = rows["recurrent_triton_kernel"]
    assert kernel["fwd_ms"] == 0.5 and kernel["file"] == "gdn_b.json" and kernel["run"] == "b"
    assert rows["naive"]["fwd_ms"] == 400.0 and rows["naive"]["run"] == "a"  # only in the older
    text = str(table)
    for needle in ("cmd-old", "cmd-new", "Test GPU", "2026-02-01", "0.500", "[a] gdn_a.json"):
        assert needle in text
    assert table._repr_html_().count("<tr>") == len(table.rows) + 1


def test_results_table_orders_rows_by_backend_and_skips_sweep_only_runs(tmp_path):
    new = _write(tmp_path, "gdn_b.json", _report(
        date="2026-02-01", results={"chunk_triton": {"fwd_ms": 0.3},
                                    "naive": {"fwd_ms": 390.0}}))
    sweep_only = _write(tmp_path, "gdn_c.json", _sweep_report())
    table = kr.results_table(kr.load_reports([sweep_only, new]))
    assert [r["backend"] for r in table.rows] == ["naive", "chunk_triton"]  # slowest first
    assert "gdn_c.json" not in table.caption


def test_latest_run_and_latest_report(tmp_path):
    old = _write(tmp_path, "gdn_a.json", _report(date="2026-01-01"))
    new = _write(tmp_path, "gdn_b.json", _report(
        date="2026-02-01", results={"chunk_triton": {"fwd_ms": 0.5}}))
    sweep = _write(tmp_path, "gdn_c.json", _sweep_report())
    reports = kr.load_reports([old, new, sweep])
    assert kr.latest_run(reports, KEY) is reports[1]
    assert kr.latest_run(reports, KEY, "recurrent_triton_kernel") is reports[0]
    with pytest.raises(KeyError, match="fla_chunk"):
        kr.latest_run(reports, KEY, "fla_chunk")
    assert kr.latest_report("sweep_T", reports) is reports[2]
    assert kr.latest_report("shapes", reports) is reports[1]
    with pytest.raises(KeyError, match="sweep_T"):
        kr.latest_report("sweep_T", reports[:2])


# ---- figures -----------------------------------------------------------------------------
def test_speedup_figure_labels_speedups_over_the_measured_loop_of_one_run(tmp_path):
    old = _write(tmp_path, "gdn_a.json", _report(date="2026-01-01", command="cmd-old"))
    new = _write(tmp_path, "gdn_b.json", _report(
        date="2026-02-01", command="cmd-new",
        results={"naive": {"fwd_ms": 300.0, "fwdbwd_ms": 1500.0},
                 "chunk_triton": {"fwd_ms": 0.5, "fwdbwd_ms": 1.5, "peak_mib": 500.0}}))
    text = _texts(kp.speedup_figure(kr.load_reports([old, new])))
    assert "(600x)" in text and "(1,000x)" in text  # 300 / 0.5 and 1500 / 1.5: one run's loop
    assert "13,107 ms" in text and "1.6 ms" in text  # the document's two predictions
    assert "cmd-new" in text and "cmd-old" not in text
    assert backend_style("recurrent_triton_kernel").label not in text  # the older run's
    with pytest.raises(KeyError, match="B1_T1_H1"):
        kp.speedup_figure(kr.load_reports([old]), key="B1_T1_H1")


def test_benchmark_figure_gives_every_backend_its_own_bars(tmp_path):
    every = {n: {"fwd_ms": 1.0 + i, "fwdbwd_ms": 2.0 + i, "peak_mib": 10.0 + i}
             for i, n in enumerate(["eager", "chunk", "triton", "triton_kernel", "triton_chunk",
                                    "triton_chunk_kernel", "fla_fused_recurrent", "fla_chunk"])}
    report = kr.load_reports([_write(tmp_path, "gdn_all.json", _report(results=every))])[0]
    fig = kp.benchmark_figure(report)
    assert len(fig.axes) == 3
    for ax in fig.axes:
        assert len(ax.containers) == 8  # one bar series per backend, old names included
    assert_series_distinct(fig)
    with pytest.raises(ValueError, match="shapes"):
        kp.benchmark_figure(_sweep_report())


def test_sweep_figure_draws_the_finished_lengths_in_distinct_styles():
    fig = kp.sweep_figure(_sweep_report())
    forward, both = fig.axes
    assert list(forward.lines[0].get_xdata()) == [1024, 2048]  # the cut-off run: two lengths
    assert len(forward.lines) == 4 and len(both.lines) == 3  # naive: forward only
    for ax in (forward, both):
        looks = [(line.get_color(), line.get_marker(), line.get_linestyle()) for line in ax.lines]
        assert len({look[1:] for look in looks}) == len(looks)  # apart without colour
        assert_integer_ticks(ax.xaxis)
    assert_series_distinct(fig)
    for name in ("recurrent_triton", "chunk_triton"):  # the same look in both panels
        look = [(ln.get_marker(), ln.get_linestyle()) for ax in fig.axes for ln in ax.lines
                if ln.get_label() == backend_style(name).label]
        assert len(look) == 2 and look[0] == look[1]


def test_sweep_table_reads_a_synthetic_sweep():
    table = kr.sweep_table(_sweep_report())
    rows = {r[0]: r for r in table.table.rows}
    header = table.table.header
    assert list(rows) == ["1,024", "2,048", "4,096"]
    assert rows["1,024"][header.index("naive")] == "100 / -"
    assert rows["4,096"][header.index("naive")] == "- / -"
    assert rows["1,024"][header.index("fastest f+b")] == "recurrent_triton"  # 4 ms of 4, 5, 6
    assert rows["1,024"][header.index("chunk/rec")] == f"{5.0 / 4.0:.2f}x"
    assert "Test GPU" in str(table)


# ---- the targets and the kernel alone ----------------------------------------------------
def _targets_report(ours_fwdbwd, ours_peak, ours_fwd):
    found = {"chunk_triton": {"fwd_ms": ours_fwd, "fwdbwd_ms": ours_fwdbwd, "peak_mib": ours_peak},
             "fla_chunk": {"fwd_ms": 1.0, "fwdbwd_ms": 3.0, "peak_mib": 1000.0}}
    return _report(results=found)  # copy: 338165760 B at 4000 GB/s = 0.0845 ms


def test_chunk_targets_scores_each_target_at_its_worst_shape():
    good = kt.chunk_targets([_targets_report(2.4, 600.0, 0.2)])
    assert [good.verdicts[k][2] for k in kt.TARGETS] == [True, True, True]
    row = good.rows[0]
    assert row["fwdbwd_ratio"] == pytest.approx(0.8) and row["peak_ratio"] == pytest.approx(0.6)
    assert row["fwd_vs_copy"] == pytest.approx(0.2 / (338165760 / 4000.0 / 1e6))
    bad = kt.chunk_targets([_targets_report(2.8, 1100.0, 0.5)])
    assert [bad.verdicts[k][2] for k in kt.TARGETS] == [False, False, False]
    text = str(bad)
    assert "missed" in text and "met" not in text.split("verdict")[1]
    assert bad._repr_html_().count("<table") == 2
    with pytest.raises(KeyError, match="fla_chunk"):
        kt.chunk_targets([_report()])


def _kernel_only_report(alone_fwd, alone_fwdbwd):
    found = {"chunk_triton_kernel": {"fwd_ms": alone_fwd, "fwdbwd_ms": alone_fwdbwd,
                                     "peak_mib": 500.0},
             "chunk_triton": {"fwd_ms": alone_fwd + 0.1, "fwdbwd_ms": alone_fwdbwd + 0.3,
                              "peak_mib": 500.0},
             "fla_chunk": {"fwd_ms": 1.0, "fwdbwd_ms": 3.0, "peak_mib": 1000.0}}
    return _report(results=found)  # copy: 338165760 B at 4000 GB/s = 0.0845 ms


def test_kernel_only_scores_the_kernel_alone_against_the_copy_and_the_peer(tmp_path):
    fast = kt.kernel_only(_write(tmp_path, "fast.json", _kernel_only_report(0.2, 1.5)))
    row = fast.rows[0]
    assert row["copy_ms"] == pytest.approx(338165760 / 4000.0 / 1e6)
    assert row["moved"] == kt.chunk_forward_bytes()["total"]  # B4 T4096 H40 fp32
    text = str(fast)
    assert "adds 0.100 ms to the forward, 0.300 ms to forward + backward" in text
    assert f"takes {0.2 / row['copy_ms']:.1f}x, met" in text and "0.20x" in text  # 0.2 / 1.0
    assert f"{row['moved'] / 0.2e9:.2f} TB/s (a device copy: 4.00 TB/s)" in text
    assert "Test GPU" in text and "python3 benchmarks/gdn.py --x" in text
    slow = str(kt.kernel_only(_write(tmp_path, "slow.json", _kernel_only_report(0.5, 1.5))))
    assert f"missed, {0.5 / row['copy_ms'] / 3:.2f}x the limit" in slow


def test_kernel_only_without_its_file_or_its_backends_raises(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match=kt.KERNEL_ONLY_RUN) as err:
        kt.kernel_only()
    assert "chunk_triton_kernel" in str(err.value)  # the command that writes it
    with pytest.raises(KeyError, match="no shape measured with"):
        kt.kernel_only(_write(tmp_path, "other.json", _report()))
