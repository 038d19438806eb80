"""hymo_book.kernels (book chapter 21): the launch arithmetic from the
document's model, the dispatcher's count and one run's times; the tables of the 2026-12-01
runs; the delta kernel's predicted peak memory against the committed measurement; the targets,
whose verdicts agree with the ones the benchmark wrote."""

import json
import statistics

import pytest
from hymo_book import results
from hymo_book.kernels import delta_forward as kd
from hymo_book.kernels import forward as kf
from hymo_book.kernels import one_product as ko
from hymo_book.kernels import report as kr
from hymo_book.kernels import runs as kn
from hymo_book.kernels import standing as kst
from hymo_book.kernels import targets as kt


def _recurrent_report(naive=400.0, kernel=0.8, dispatched=1.2):
    entry = {"B": 4, "T": 4096, "H": 40, "S": 32, "D": 32, "dtype": "float32",
             "results": {"naive": {"fwd_ms": naive, "fwdbwd_ms": 5 * naive},
                         "recurrent_triton_kernel": {"fwd_ms": kernel, "fwdbwd_ms": 4 * kernel},
                         "recurrent_triton": {"fwd_ms": dispatched, "fwdbwd_ms": 5.0}}}
    return {"environment": {"gpu": "Test GPU", "date": "2026-01-01", "command": "cmd"},
            "shapes": {"B4_T4096_H40_float32": entry}}


def test_launch_arithmetic_reproduces_the_document_and_counts_the_loop(tmp_path):
    path = tmp_path / "gdn_test.json"
    path.write_text(json.dumps(_recurrent_report()))
    la = kr.launch_arithmetic(str(path))
    assert la.doc_loop_launches == 4096 * 2 * 40 * 4 == 1_310_720
    assert la.doc_opening_launches == 655_360 and la.doc_kernel_launches == 160
    assert la.doc_ratio == 8192 and la.doc_loop_s == pytest.approx(13.1072)
    # the loop is vectorised over sequences and heads: its count does not multiply by B·H
    assert la.loop_launches == la.launches_per_step * 4096
    assert la.launches_per_step == sum(la.per_step.values()) >= 4 and la.kernel_launches == 1
    assert la.loop_launch_s == pytest.approx(la.loop_launches * 10e-6)
    assert la.speedup_fwd == pytest.approx(500.0) and la.speedup_fwdbwd == pytest.approx(625.0)
    assert la.speedup_dispatch_fwd == pytest.approx(400 / 1.2)
    assert la.us_per_operator == pytest.approx(400e3 / 4096 / la.launches_per_step)
    assert la.verdict() == "wrong" and "Test GPU" in la.caption


def test_launch_arithmetic_calls_a_ratio_near_the_document_approximately_right(tmp_path):
    path = tmp_path / "gdn_test.json"
    path.write_text(json.dumps(_recurrent_report(naive=8000.0, kernel=1.0)))
    assert kr.launch_arithmetic(str(path)).verdict() == "approximately right"  # 8,192 vs 8,000


def test_launch_arithmetic_needs_the_loop_and_the_kernel_in_one_run(tmp_path):
    report = _recurrent_report()
    del report["shapes"]["B4_T4096_H40_float32"]["results"]["naive"]
    path = tmp_path / "gdn_test.json"
    path.write_text(json.dumps(report))
    with pytest.raises(KeyError, match="naive"):
        kr.launch_arithmetic(str(path))


def test_the_committed_launch_arithmetic():
    la = kr.launch_arithmetic()  # the recurrent run of record
    assert la.B == 4 and la.T == 4096 and la.H == 40
    assert 100 < la.speedup_fwd < la.doc_ratio / 4  # far from the document's ratio


def test_precision_and_dispatch_tables_read_the_run():
    precision = kn.precision_table()
    for row in precision.rows:
        assert row["fwd_ratio"] > 1 and row["fwdbwd_ratio"] > 1  # three products cost more
        assert row["error_x3"] < 1e-5 < row["error_tf32"] < 1e-2
    assert {r["rule"] for r in precision.rows} == {"gla", "delta"}
    dispatch = kn.dispatch_table()
    assert len(dispatch.rows) == 4  # two rules x two dtypes
    for row in dispatch.rows:  # the check costs a host sync; without it nothing measurable
        assert row["checked_extra_fwd_ms"] > 5 * abs(row["no_check_extra_fwd_ms"])
    assert "gated_delta_h200_2026-12-01.json" in precision.caption


def test_delta_peers_read_the_side_by_side_runs():
    peers = kn.delta_peers_table()
    files = {(r["T"], r["dtype"]): r["file"] for r in peers.rows}
    b4, b1_bf16, b1_fp32 = kn.DELTA_SIDE_BY_SIDE
    assert files == {(4096, "float32"): b4, (4096, "bfloat16"): b4,
                     (16384, "bfloat16"): b1_bf16, (16384, "float32"): b1_fp32}
    rows = {(r["T"], r["dtype"], r["backend"]): r for r in peers.rows}
    for T, dtype in files:  # the peer ran at every shape shown
        assert rows[(T, dtype, "fla_chunk_kda")]["vs_kda"] == pytest.approx(1.0)
    # one tree for all of them
    commits = {results.load_result(f)["environment"]["git_commit"] for f in files.values()}
    assert len(commits) == 1


def test_a_refused_backward_reads_raised():
    peers = kn.delta_peers_table((kn.DELTA_PEERS_RUN,))
    rows = {(r["T"], r["dtype"], r["backend"]): r for r in peers.rows}
    assert rows[(4096, "float32", "fla_chunk_gdr")]["vs_kda"] is None  # its backward raised
    assert "raised" in str(peers.table)


def test_the_group_sweep_table_reads_every_trial():
    sweep = kn.delta_group_sweep_table()
    report = results.load_result(kn.DELTA_GROUP_SWEEP)
    assert len(sweep.rows) == sum(len(t) for d in report["group_sweep"].values()
                                  for t in d.values())
    walks = [r for r in sweep.rows if r["chunks"] is None]
    assert walks and all(r["vs_walk"] == 1.0 and r["groups"] == 1 for r in walks)
    assert {r["B"] for r in sweep.rows} == {1, 2, 4}


@pytest.mark.parametrize("dtype, itemsize", [("float32", 4), ("bfloat16", 2)])
def test_delta_peak_prediction_matches_the_committed_measurement(dtype, itemsize):
    entry = results.load_result(kn.DELTA_PEERS_RUN)["peers"][f"B4_T4096_H40_{dtype}"]
    predicted = kn.delta_peak_bytes(entry["B"], entry["T"], entry["H"], entry["S"], entry["D"],
                                    itemsize=itemsize)
    measured = entry["results"]["chunk_triton"]["peak_mib"]
    # the tuned kernel's measured peak is 10 MiB above the sum at both dtypes (chapter 21
    # says so); the same count matches the CPU's allocations exactly at a small shape
    assert 0 < measured - predicted["total"] / 2**20 < 0.02 * measured
    assert predicted["total"] == sum(v for k, v in predicted.items() if k != "total")


def test_moe_and_sweep_tables():
    moe = kn.moe_dispatch_table()
    rows = {r["impl"]: r for r in moe.rows}
    assert rows["loop"]["speedup_train_fwd_bwd_s"] == 1.0
    assert rows["grouped"]["no_host_sync"] is True
    sweep = kn.config_sweep_table()
    assert [r["block"] for r in sweep.rows] == [16, 32, 64]
    assert "gdn_chunk_profile.py" in sweep.caption


def test_targets_summary_agrees_with_the_verdicts_the_benchmark_wrote():
    summary = kr.targets_summary()
    assert len(summary.rows) == 64 and all(r["met"] == (r["worst"] <= r["limit"])
                                          for r in summary.rows)
    # with the pairs "auto": the run beside chunk_kda, each target at its worst case timed
    auto = results.load_result(kn.DELTA_AUTO_PEERS)["peers"]
    for key, label in (("fwdbwd_over_kda", "delta: forward + backward / fla chunk_kda"),
                       ("peak_over_kda", "delta: peak memory / fla chunk_kda")):
        row = next(r for r in summary.rows if r["target"] == f'{label}, pairs "auto"')
        assert row["worst"] == max(e["targets"]["chunk_triton"][key] for e in auto.values()
                                   if key in e["targets"]["chunk_triton"])
    # each delta target is met where every shape's written verdict is, the worst shape named
    _, picked = kn.delta_entries()
    written = [e["targets"]["chunk_triton"] for _, e in picked.values()
               if "fla_chunk_kda" in e["results"]]
    delta = [r for r in summary.rows if r["target"].startswith("delta")
             and not r["target"].endswith(("latest", '"auto"', "final tree"))
             and "as shipped" not in r["target"] and "the model's rates" not in r["target"]
             and "the walks over groups" not in r["target"]
             and "the walks forming the outputs" not in r["target"]]
    flags = ("fwdbwd_within_0.8x_kda", "peak_within_kda", "fwd_within_4x_floor")
    assert [r["met"] for r in delta] == [all(w[f] for w in written) for f in flags]
    assert all(f"worst of {len(written)} timed" in r["where"] for r in delta)
    # the latest forward alone: one row per dtype, each at its worst shape of the run
    latest = [r for r in summary.rows if r["target"].startswith("gla")
              and r["target"].endswith("the kernel alone, latest")]
    runs = kf.latest_forward()
    assert len(latest) == 3
    for row, key in zip(latest, ("float32_tf32", "bfloat16", "float32"), strict=True):
        assert row["worst"] == max(r["ratio"] for (_, k), r in runs.items() if k == key)
    mixer = next(r for r in summary.rows if r["target"].endswith("as the GDN mixer calls it"))
    assert mixer["worst"] == max(r["unchecked_vs_copy"] for r in kf.dispatch_table().rows)
    assert kf.LATEST_RUN in summary.caption and kf.DISPATCH_RUN in summary.caption
    # the delta forward alone: one row per dtype at the setting in use, its worst shape
    now = kf.delta_latest_forward()
    delta_now = [r for r in summary.rows if r["target"].startswith("delta")
                 and r["target"].endswith("latest")]
    for row, key in zip(delta_now, ("bfloat16", "float32"), strict=True):
        assert row["worst"] == max(r["ratio"] for (_, k), r in now.items() if k == key)
        assert row["met"] == (row["worst"] <= kt.DELTA_TARGETS["fwd_over_floor"])
    assert all(run in summary.caption for run in kf.DELTA_CHAIN_RUNS)
    # the pairs "auto": one row per rule and dtype, each at its worst shape of the runs
    auto = [r for r in summary.rows if r["target"].endswith('"auto"')
            and "a copy of its bytes" in r["target"]]
    pairs = kf.pairs_table().rows
    assert len(auto) == 6
    for row in auto:
        rule = row["target"].split(":")[0]
        assert row["worst"] == max(r["auto_ratio"] for r in pairs if r["rule"] == rule
                                   and kf.DTYPES[r["dtype"]] == row["where"].split(", worst")[0])


def test_the_gla_backward_table_reads_every_variant_of_its_run():
    table = kn.gla_backward_table()
    shapes = {(r["shape"], r["states"]) for r in table.rows}
    assert ("one kernel, 1 warp", "stored") in shapes
    assert ("split, 4 + 4 warps", "rebuilt") in shapes
    assert len(table.rows) == len(shapes)  # each setting once
    for r in table.rows:  # the kernels summed are the ones the setting launched
        assert set(r["kernels_us"]) == ({"_chunk_bwd_kernel"} if r["shape"].startswith("one")
                                        else {"_pairs_bwd_kernel", "_states_bwd_kernel"})
    assert kn.GLA_BACKWARD_RUN in table.caption


def test_standing_reads_both_runs_and_agrees_with_the_delta_verdicts():
    """Both rules at both shapes and dtypes, each beside its peer in one run; the delta
    rows' ratios are the ones benchmarks/gated_delta.py wrote, and the summary's final-tree
    rows are the table's worst cases."""
    now = kst.standing()
    assert {(r["rule"], r["dtype"]) for r in now.rows} == {
        (rule, d) for rule in ("gla", "delta") for d in ("bfloat16", "float32")}
    assert len(now.rows) == 8
    delta = results.load_result(kst.DELTA_RECORD_RUN)["peers"]
    for r in (r for r in now.rows if r["rule"] == "delta"):
        written = next(e for e in delta.values() if e["dtype"] == r["dtype"]
                       and f"B{e['B']} T{e['T']} H{e['H']}" == r["shape"])
        assert r["fwdbwd_ratio"] == pytest.approx(
            written["targets"]["chunk_triton"]["fwdbwd_over_kda"])
        assert r["met"]["fwdbwd"] == written["targets"]["chunk_triton"]["fwdbwd_within_0.8x_kda"]
    summary = {r["target"]: r for r in kr.targets_summary().rows}
    for rule in kst.STANDING:
        row = summary[f"{rule}: forward / a copy of its bytes, final tree"]
        assert row["worst"] == max(r["fwd_vs_copy"] for r in now.rows if r["rule"] == rule)
    # the issue's own floor, a clone of the bytes (each read and written): about twice the
    # bytes moved once, so each ratio about half the one above
    issue = summary["delta: forward / the issue's copy floor (its bytes read and written), "
                    "final tree"]
    clones = [e["targets"]["chunk_triton"]["fwd_over_clone_floor"] for e in delta.values()]
    assert issue["worst"] == max(clones) and issue["met"] == (max(clones) <= 4.0)
    for e in delta.values():
        ratio = e["targets"]["chunk_triton"]["fwd_over_floor"] / e["targets"]["chunk_triton"][
            "fwd_over_clone_floor"]
        assert 1.8 < ratio < 2.2


def test_the_gla_fp32_run_times_both_precisions_beside_chunk_gla():
    """The gla kernel alone in fp32, each precision beside chunk_gla in one run (six bf16
    products in the backward): the ratios divide that run's times and the verdicts are
    against the gla limit."""
    run = kst.GLA_BF16X6_RUN
    both = kst.tf32_beside_peer(run)
    report = results.load_result(run)
    assert len(both.rows) == len(report["shapes"]) == 2 and run in both.caption
    for row, entry in zip(both.rows, report["shapes"].values(), strict=True):
        assert row["dtype"] == entry["dtype"] == "float32"
        peer = entry["results"]["fla_chunk"]["fwdbwd_ms"]
        for backend, (key, _) in kst.TF32_PRECISIONS.items():
            ratio = entry["results"][backend]["fwdbwd_ms"] / peer
            assert row[key]["fwdbwd_ratio"] == ratio
            assert row[key]["met"] == (ratio <= kst.STANDING["gla"][4])


def test_the_later_fp32_run_ends_the_summary():
    """The summary's two rows of the gla kernel alone read the later run (the backward's six
    bf16 products, the tree as it stands) at its worst shapes; every final-tree row comes
    after all the others but the last rows, the rules as they shipped, then on the model's
    rates, then with the walks over groups set anew, then with the walks forming the outputs
    (chapter 21 says "the N rows before the M “as shipped”")."""
    both = kst.tf32_beside_peer(kst.GLA_BF16X6_RUN)
    summary = kr.targets_summary()
    rows = {r["target"]: r for r in summary.rows}
    for key, words in (("default", "fp32-grade default"), ("tf32", "fp32 TF32 opt-in")):
        row = rows[f"gla: forward + backward / fla chunk_gla, {words}, final tree"]
        assert row["worst"] == max(r[key]["fwdbwd_ratio"] for r in both.rows)
        assert row["met"] == all(r[key]["met"] for r in both.rows)
    shipped = sum("as shipped" in r["target"] for r in summary.rows)
    model = sum("the model's rates" in r["target"] for r in summary.rows)
    grouped = sum("the walks over groups" in r["target"] for r in summary.rows)
    fused = sum("the walks forming the outputs" in r["target"] for r in summary.rows)
    assert shipped == 7 and model == 6 and grouped == 4 and fused == 12
    later = model + grouped + fused
    assert all("as shipped" in r["target"] for r in summary.rows[-shipped - later:-later])
    assert all("the model's rates" in r["target"]
               for r in summary.rows[-later:-grouped - fused])
    assert all("the walks over groups" in r["target"]
               for r in summary.rows[-grouped - fused:-fused])
    assert all("the walks forming the outputs" in r["target"] for r in summary.rows[-fused:])
    final = [r["target"].endswith("final tree") for r in summary.rows[:-shipped - later]]
    assert final == sorted(final) and sum(final) == 11
    assert kst.GLA_BF16X6_RUN in summary.caption


def test_the_shipped_rows_read_both_rules_beside_their_peers_on_the_h100():
    """kst.standing over the H100 runs: every case a run timed beside its peer and no other
    (the delta rule's B4 run skipped B1, the gla run stopped before B1 fp32); the ratios are
    the ones gated_delta.py wrote; the summary's last seven rows take their worst cases."""
    shipped = kst.standing(kst.STANDING_H100, clone=True)
    assert [(r["rule"], r["shape"], r["dtype"]) for r in shipped.rows] == [
        ("gla", "B4 T4096 H40", "bfloat16"), ("gla", "B4 T4096 H40", "float32"),
        ("gla", "B1 T16384 H40", "bfloat16"),
        *(("delta", s, d) for s in ("B4 T4096 H40", "B1 T16384 H40")
          for d in ("bfloat16", "float32"))]
    assert {r["gpu"] for r in shipped.rows} == {"NVIDIA H100 80GB HBM3"}
    written = {}
    for run in kst.STANDING_H100["delta"][0]:
        assert run in shipped.caption
        for e in results.load_result(run)["peers"].values():
            if "targets" in e:
                written[(f"B{e['B']} T{e['T']} H{e['H']}", e["dtype"])] = e["targets"][
                    "chunk_triton"]
    delta = [r for r in shipped.rows if r["rule"] == "delta"]
    for r in delta:
        w = written[(r["shape"], r["dtype"])]
        assert r["fwdbwd_ratio"] == pytest.approx(w["fwdbwd_over_kda"])
        assert r["peak_ratio"] == pytest.approx(w["peak_over_kda"])
        assert r["fwd_vs_copy"] == pytest.approx(w["fwd_over_floor"])
        assert r["fwd_vs_clone"] == pytest.approx(w["fwd_over_clone_floor"])
        assert r["met"]["clone"] == (r["fwd_vs_clone"] <= 4.0)
    assert all("clone" not in r["met"] for r in shipped.rows if r["rule"] == "gla")
    rows = {r["target"]: r for r in kr.targets_summary().rows if "as shipped" in r["target"]}
    suffix = "as shipped, on an NVIDIA H100 80GB HBM3"
    for rule in ("gla", "delta"):
        mine = [r for r in shipped.rows if r["rule"] == rule]
        row = rows[f"{rule}: forward / a copy of its bytes, {suffix}"]
        assert row["worst"] == max(r["fwd_vs_copy"] for r in mine)
        assert row["met"] == all(r["met"]["fwd"] for r in mine)
    issue = rows[f"delta: forward / the issue's copy floor (its bytes read and written), {suffix}"]
    assert issue["worst"] == max(r["fwd_vs_clone"] for r in delta)
    assert issue["met"] == all(r["met"]["clone"] for r in delta)


def test_the_inverse_level0_ab_reads_medians_of_the_alternations():
    level0 = kd.inverse_level0()
    run = results.load_result(kd.INVERSE_LEVEL0_RUN)["rows"]
    assert len(level0.rows) == len(run) == 4 and kd.INVERSE_LEVEL0_RUN in level0.caption
    for r, (key, raw) in zip(level0.rows, run.items(), strict=True):
        assert key == f"{r['shape'].replace(' ', '_')}_{r['dtype']}"
        assert r["ratio"] == pytest.approx(statistics.median(raw["after"])
                                           / statistics.median(raw["before"]))
        assert r["same_bits"] == (raw["rel_diff_o"] == 0.0)


def test_forward_change_ratios_set_each_change_against_the_default():
    ratios = kd.forward_change_ratios(kd.DELTA_STRETCH_RUNS, "bfloat16")
    assert set(ratios) == {"B4_T4096_H40", "B1_T16384_H40"}
    rows = results.load_result(kd.DELTA_STRETCH_RUNS[0])["delta_forward_changes"]["changes"]
    base = [r["forward"]["bfloat16"]["fwd_ms"] for r in rows if r["change"] == {}]
    inverse = [r["forward"]["bfloat16"]["fwd_ms"] for r in rows
               if r["change"] == {"redo": "inverse"}]
    assert ratios["B4_T4096_H40"][json.dumps({"redo": "inverse"})] == pytest.approx(
        [t / (sum(base) / len(base)) for t in inverse])


def test_the_fp32_products_table_reads_both_calls():
    """A row per (directions, rule, shape, way) of the two calls; the three-TF32 row of each
    run and shape is the reference of the others' differences, and only one TF32 product is
    far from it."""
    ways = kst.fp32_products_table()
    assert {r["directions"] for r in ways.rows} == set(kst.FP32_PRODUCTS_RUNS)
    for name in kst.FP32_PRODUCTS_RUNS.values():
        assert name in ways.caption
    keys = [(r["directions"], r["rule"], r["shape"], r["way"]) for r in ways.rows]
    assert len(keys) == len(set(keys)) == 22
    for r in ways.rows:
        if r["way"] == "tf32x3":
            assert r["difference"] == 0.0
        elif r["way"] == "tf32":
            assert r["difference"] > 1e-4
        else:
            assert r["difference"] < kst.ERROR_FLOOR
    both = {(r["shape"], r["way"]): r["fwdbwd_ms"] for r in ways.rows if r["directions"] == "both"}
    for shape in ("B4_T4096_H40", "B1_T16384_H40"):
        assert both[(shape, "bf16x6")] < both[(shape, "tf32x3")]  # why the backward changed


def test_run_info_reads_the_nested_hardware_of_record_header():
    info = results.run_info({"environment": {"date": "d", "command": "c", "hardware": {
        "processor": "x86_64", "cpu_count": 2, "torch_threads": 1, "torch": "2.13",
        "triton": "3.9"}}})
    assert info["hardware"] == "x86_64, 2 cores, 1 torch thread"
    assert info["versions"] == "torch 2.13, Triton 3.9" and info["command"] == "c"


def test_the_shared_rate_ab_reads_medians_and_agreement():
    ab = ko.shared_rate_ab()
    run = results.load_result(ko.SHARED_RATE_AB_RUN)["rows"]
    assert len(ab.rows) == len(run) == 16 and ko.SHARED_RATE_AB_RUN in ab.caption
    for r, (key, raw) in zip(ab.rows, run.items(), strict=True):
        assert key == "_".join([r["rule"], r["rates"], r["shape"].replace(" ", "_"), r["dtype"]])
        assert r["ratio"] == pytest.approx(statistics.median(raw["after"])
                                           / statistics.median(raw["before"]))
        assert r["agree"] == (raw["rel_diff_o"] < ko.SHARED_RATE_AGREE[r["dtype"]])
    assert {(r["rule"], r["rates"]) for r in ab.rows} == {
        (rule, rates) for rule in ("gla", "delta") for rates in ("model", "weak")}


def test_the_model_rate_rows_are_the_runs_and_close_the_summary():
    """The delta rule on the model's rates reads what gated_delta.py wrote; the gla kernel
    alone reads its backend in each gdn.py run; six rows of the summary, before the four of
    the walks over groups, are theirs."""
    model = kst.standing(kst.STANDING_MODEL_RATES, clone=True)
    assert [r["rule"] for r in model.rows] == ["delta"] * 4
    for run in kst.STANDING_MODEL_RATES["delta"][0]:
        report = results.load_result(run)
        assert report["settings"]["rates"] == "model" and run in model.caption
        for e in report["peers"].values():
            row = next(r for r in model.rows
                       if (r["shape"], r["dtype"]) == (f"B{e['B']} T{e['T']} H{e['H']}",
                                                       e["dtype"]))
            w = e["targets"]["chunk_triton"]
            assert row["fwdbwd_ratio"] == pytest.approx(w["fwdbwd_over_kda"])
            assert row["fwd_vs_clone"] == pytest.approx(w["fwd_over_clone_floor"])
    gla = ko.gla_model_rates()
    assert [r["products"] for r in gla.rows] == ["TF32", "bf16"]
    for r, (name, ours) in zip(gla.rows, ko.GLA_MODEL_RUNS.items(), strict=True):
        report = results.load_result(name)
        assert "--rates model" in report["environment"]["command"]
        e = next(iter(report["shapes"].values()))
        assert r["fwd_ms"] == e["results"][ours]["fwd_ms"]
        assert r["fwd_vs_copy"] == pytest.approx(
            e["results"][ours]["fwd_ms"] / (e["bytes_min_fwd"]
                                            / report["environment"]["copy_GBps"] / 1e6))
    last = kr.targets_summary().rows[-22:-16]
    assert all("the model's rates, on an NVIDIA H200" in r["target"] for r in last)
    assert [r["worst"] for r in last[-2:]] == [r["fwd_vs_copy"] for r in gla.rows]


def test_the_group_settings_rows_read_the_run_against_its_first():
    name = kd.GROUP_SETTINGS_RUN
    table = kd.group_settings((name,))
    report = results.load_result(name)
    assert name in table.caption
    changes = report["delta_forward_changes"]["changes"]
    assert len(table.rows) == len(changes)
    first = changes[0]["forward"]["float32"]["fwd_ms"]
    for entry, row in zip(changes, table.rows, strict=True):
        assert row["change"] == entry["change"]
        assert row["fwd_ms"] == entry["forward"]["float32"]["fwd_ms"]
        assert row["vs_first"] == pytest.approx(row["fwd_ms"] / first)
    assert kd.group_setting_label({}) == "in use when run"
    assert kd.group_setting_label({"state_fwd": {"split": 32, "num_warps": 1}}) == (
        "walk: 32 columns, 1 warp")
    assert kd.group_setting_label({"group": {"chunks": 32, "split": 64, "state_fwd": {
        "split": 32, "num_warps": 4}}}) == ("groups of 32 chunks; group kernels 64 columns; "
                                            "walks over groups 32 columns, 4 warps")


def test_the_walks_over_groups_close_the_summary():
    """The last four rows: the delta rule on the model's rates with the group settings the
    library ships, read from the run gated_delta.py wrote."""
    grouped = kst.standing(kst.STANDING_GROUPS, clone=True)
    report = results.load_result(kst.STANDING_GROUPS["delta"][0][0])
    assert report["settings"]["rates"] == "model"
    assert {(r["shape"], r["dtype"]) for r in grouped.rows} == {
        (s, d) for s in ("B4 T4096 H40", "B1 T16384 H40") for d in ("bfloat16", "float32")}
    last = kr.targets_summary().rows[-16:-12]
    assert all("the walks over groups set anew, on an NVIDIA H200" in r["target"] for r in last)
    assert last[-1]["worst"] == max(r["fwd_vs_clone"] for r in grouped.rows)


def test_the_walks_forming_the_outputs_close_the_summary():
    """The last twelve rows: the standing runs with the walks over groups forming the
    outputs, on an H100 and an H200, then the long sequence on the H200 with those walks at 2
    warps, each read from the run gated_delta.py wrote; the A/B against the old group
    settings read from the runs of each call, the old one run with those settings
    (--configs)."""
    rows = kr.targets_summary().rows
    for runs, words, last in (
            (kst.STANDING_WALK_OUTPUTS, "the walks forming the outputs, on an NVIDIA H100",
             rows[-12:-8]),
            (kst.STANDING_WALK_OUTPUTS_H200, "the walks forming the outputs, on an NVIDIA H200",
             rows[-8:-4]),
            (kst.STANDING_WALK_WARPS, "the walks forming the outputs at 2 warps, on an "
                                     "NVIDIA H200", rows[-4:])):
        fused = kst.standing(runs, clone=True)
        report = results.load_result(runs["delta"][0][0])
        assert report["settings"]["rates"] == "model"
        assert report["delta_configs"]["group"]["outputs"] is True
        assert all(words in r["target"] for r in last)
        assert last[-1]["worst"] == max(r["fwd_vs_clone"] for r in fused.rows)
    warps = results.load_result(kst.STANDING_WALK_WARPS["delta"][0][0])
    assert warps["delta_configs"]["group"]["state_fwd"]["num_warps"] == 2
    assert "--configs" in warps["environment"]["command"]
    ab = kd.walk_outputs_ab()
    assert len(ab.rows) == len(kd.WALK_OUTPUT_CALLS)
    for row, (new, old) in zip(ab.rows, kd.WALK_OUTPUT_CALLS, strict=True):
        old_report = results.load_result(old)
        assert results.load_result(new)["delta_configs"]["group"]["outputs"] is True
        assert old_report["delta_configs"]["group"]["outputs"] is False
        assert "--configs" in old_report["environment"]["command"]
        entry = next(e for e in old_report["peers"].values()
                     if e["B"] == 1 and e["dtype"] == "float32")
        assert row["old_vs_clone"] == pytest.approx(
            entry["targets"]["chunk_triton"]["fwd_over_clone_floor"])
        assert row["ratio"] == pytest.approx(row["new_ms"] / row["old_ms"])


def test_the_group_settings_name_only_what_differs_from_the_settings_in_use():
    in_use = {"group": {"chunks": 32, "below": 128, "outputs": True,
                        "state_fwd": {"split": 32, "num_warps": 4}},
              "walk_products": "ieee"}
    change = {"group": {"chunks": 32, "below": 128, "outputs": True,
                        "state_fwd": {"split": 16, "num_warps": 4}}}
    assert kd._changed(change, in_use) == {"group": {"state_fwd": {"split": 16}}}
    assert kd._changed({"walk_products": "ieee"}, in_use) == {}
    assert kd._changed({"walk_products": "same"}, in_use) == {"walk_products": "same"}
    assert kd.group_setting_label(kd._changed(change, in_use)) == "walks over groups 16 columns"
    assert kd.group_setting_label({"group": {"outputs": True, "products": "walk"}}) == (
        "group kernels in the walks' products; the walks form the outputs")
    assert kd.group_setting_label({"walk_products": "same"}) == (
        "walks in the forward's products")


def test_pytest_tally_reads_passes_and_failures(monkeypatch, tmp_path):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    (tmp_path / "clean.log").write_text("....\n4 passed in 1.0s\n....\n3 passed in 2.0s\n")
    (tmp_path / "summary.log").write_text("..F.\n1 failed, 3 passed in 1.0s\n")
    (tmp_path / "progress.log").write_text("..E\n")
    assert results.pytest_tally("clean.log") == (7, False)
    assert results.pytest_tally("summary.log") == (3, True)
    assert results.pytest_tally("progress.log") == (0, True)


def test_on_gpu_reads_a_setting_as_a_gpu_takes_it():
    """``on_gpu`` reads the assignment with the interpreter off, whatever this process runs,
    and agrees with the module where the interpreter does not change the setting."""
    from hymo_mini.ops.gated_delta import chunk_triton as gdt
    from hymo_mini.ops.gla import chunk_triton as gtc

    assert kr.on_gpu(gtc.__name__, "CHUNK") == 128
    assert kr.on_gpu(gtc.__name__, "LAUNCH") == gtc.LAUNCH
    assert kr.on_gpu(gdt.__name__, "ONE_LAUNCH") == gdt.ONE_LAUNCH
    assert kr.on_gpu(gdt.__name__, "STRETCH") == gdt.STRETCH
    with pytest.raises(KeyError, match="NOT_A_SETTING"):
        kr.on_gpu(gtc.__name__, "NOT_A_SETTING")


def test_the_kernel_files_are_the_folders_files_and_the_recipes_their_launches():
    """Chapter 21's table of the kernels now: every .py file of each folder, once; each
    launcher's numbered recipe names kernels its files define."""
    from pathlib import Path

    import hymo_mini.ops as ops

    table = kr.kernel_files()
    root = Path(ops.__file__).parent
    for folder in ("utils", "gla", "gated_delta"):
        listed = sorted(r["file"] for r in table.rows if r["folder"] == folder)
        on_disk = sorted(p.name for p in (root / folder).glob("*.py") if p.name != "__init__.py")
        assert listed == on_disk, folder
    for rule, first in (("gla", "chunk_writes_kernel"), ("gated_delta", "wy_fwd_kernel")):
        steps = kr.recipe(f"hymo_mini.ops.{rule}.chunk_triton")
        assert steps[0]["kernel"] == first and [s["step"] for s in steps] == list(
            range(1, len(steps) + 1))
        for s in steps:
            assert f"def {s['kernel']}(" in (root / rule / f"{s['file']}.py").read_text()
    # chapter 21 names the one launch of 16-bit inputs by its kernel
    assert "def chain_fwd_kernel(" in (root / "gated_delta" / "chunk_chain.py").read_text()


def test_what_was_tried_reads_every_ratio():
    """Each change of the tuning table has a ratio for every case its run timed."""
    from hymo_book.kernels import tuning

    table = tuning.tried_table()
    assert len(table.rows) == len(tuning.TRIED)
    for row in table.rows:
        assert row["ratios"] and all(0 < x < 5 for x in row["ratios"]), row
        assert row["outcome"] in ("kept", "kept, since removed", "not kept")
