"""hymo_book.kernels (book chapter 21): the launch arithmetic from the
document's model, the dispatcher's count and one run's times; the tables of the 2026-12-01
runs; the targets, whose verdicts agree with the ones the benchmark wrote."""

import json
import statistics

import pytest
from hymo_book import results
from hymo_book.kernels import delta_forward as kd
from hymo_book.kernels import one_product as ko
from hymo_book.kernels import report as kr
from hymo_book.kernels import runs as kn
from hymo_book.kernels import standing as kst


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


def test_the_precision_table_reads_the_run():
    precision = kn.precision_table()
    for row in precision.rows:
        assert row["fwd_ratio"] > 1 and row["fwdbwd_ratio"] > 1  # three products cost more
        assert row["error_x3"] < 1e-5 < row["error_tf32"] < 1e-2
    assert {r["rule"] for r in precision.rows} == {"gla", "delta"}
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


def test_the_group_sweep_table_reads_every_trial():
    sweep = kn.delta_group_sweep_table()
    report = results.load_result(kn.DELTA_GROUP_SWEEP)
    assert len(sweep.rows) == sum(len(t) for d in report["group_sweep"].values()
                                  for t in d.values())
    walks = [r for r in sweep.rows if r["chunks"] is None]
    assert walks and all(r["vs_walk"] == 1.0 and r["groups"] == 1 for r in walks)
    assert {r["B"] for r in sweep.rows} == {1, 2, 4}


def test_the_moe_table():
    moe = kn.moe_dispatch_table()
    rows = {r["impl"]: r for r in moe.rows}
    assert rows["loop"]["speedup_train_fwd_bwd_s"] == 1.0
    assert rows["grouped"]["no_host_sync"] is True


def test_standing_reads_both_runs_and_agrees_with_the_delta_verdicts():
    """Both rules at both shapes and dtypes, each beside its peer in one run; the delta
    rows' ratios are the ones benchmarks/gated_delta.py wrote, and the targets' rows are the
    table's worst cases."""
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
    summary = {r["target"]: r for r in (*kst.standing_rows(now, "final tree"),
                                         kst.clone_row(now, "final tree"))}
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


def test_the_shipped_rows_read_both_rules_beside_their_peers_on_the_h100():
    """kst.standing over the H100 runs: every case a run timed beside its peer and no other
    (the delta rule's B4 run skipped B1, the gla run stopped before B1 fp32); the ratios are
    the ones gated_delta.py wrote; the seven rows of targets take their worst cases."""
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
    suffix = "as shipped, on an NVIDIA H100 80GB HBM3"
    rows = {r["target"]: r for r in (*kst.standing_rows(shipped, suffix),
                                     kst.clone_row(shipped, suffix))}
    assert len(rows) == 7
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


def test_the_walks_forming_the_outputs_read_each_call_against_the_old_settings():
    """The A/B of the walks over groups forming the outputs against the old group settings,
    read from the runs of each call, the old one run with those settings (--configs)."""
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


def test_the_kernel_files_are_the_folders_files():
    """Chapter 21's table of the kernels now: every .py file of each folder, once."""
    from pathlib import Path

    import hymo_mini.ops as ops

    table = kr.kernel_files()
    root = Path(ops.__file__).parent
    for folder in ("utils", "gla", "gated_delta"):
        listed = sorted(r["file"] for r in table.rows if r["folder"] == folder)
        on_disk = sorted(p.name for p in (root / folder).glob("*.py") if p.name != "__init__.py")
        assert listed == on_disk, folder
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
