"""hymo_book.kernels.settings (book chapter 21): the settings tried with the pairs "auto",
read back as the runs wrote them, named in words, and the rule that keeps one."""

import pytest
from hymo_book.kernels import settings as ks
from hymo_book.results import CaptionedTable, load_result


def test_change_labels():
    assert ks.change_label({}) == "as in use"
    assert ks.change_label({"chunk": 256}) == "chunks of 256 steps"
    assert ks.change_label({"handoff": "flags"}) == "hand-over by flags"
    assert ks.change_label({"chain": {"chunks": 8, "num_warps": 2, "num_stages": 1}}) == (
        "chain: stretches of 8 chunks, warps 2, stages 1")
    assert ks.change_label({"output_fwd": {"num_warps": 1, "num_stages": 2}}) == (
        "output_fwd: warps 1, stages 2")


def test_table_reads_every_change_that_applies():
    table = ks.settings_table(ks.REACH_RUNS)
    for rule, names in ks.REACH_RUNS.items():
        for name in names:
            report = load_result(name)
            changes = report[f"{rule}_forward_changes"]["changes"]
            rows = [r for r in table.rows if r["rule"] == rule and r["shape"] == report["shape"]]
            assert len(rows) == 2 * len(changes)  # bf16 and fp32, every change
            first = changes[0]["forward"]["bfloat16"]
            row = next(r for r in rows if not r["change"] and r["dtype"] == "bfloat16")
            assert row["device_ms"] == first["kernels_sum_ms"]
            assert row["device_ratio"] == pytest.approx(first["kernels_sum_ms"] / first["copy_ms"])
            assert name in table.caption


def test_keepers_need_every_case():
    def row(change, shape, device_ms, fwdbwd_ms):
        return {"rule": "gla", "shape": shape, "dtype": "bfloat16", "change": change,
                "label": ks.change_label(change), "device_ms": device_ms,
                "fwdbwd_ms": fwdbwd_ms}

    rows = [row({}, "a", 1.0, 2.0), row({}, "b", 1.0, 2.0),
            row({"chunk": 64}, "a", 0.9, 2.0), row({"chunk": 64}, "b", 0.9, 1.9),
            row({"chunk": 256}, "a", 0.8, 2.0), row({"chunk": 256}, "b", 1.1, 1.0),
            row({"handoff": "flags"}, "a", 0.8, 2.1), row({"handoff": "flags"}, "b", 0.8, 1.0)]
    table = CaptionedTable("", "", rows)
    assert ks.keepers(table) == ["gla: chunks of 64 steps"]
    cases = ks.comparisons(table)[("gla", "chunks of 256 steps")]
    assert [c["faster"] for c in cases] == [True, False]


def test_handoffs_read_both_ways_per_dtype():
    got = ks.handoffs()
    report = load_result(ks.HANDOFF_RUN)
    changes = report["gla_forward_changes"]["changes"]
    assert set(got) == set(changes[0]["forward"]) and all(set(v) == {"flags", "ring"}
                                                          for v in got.values())
    assert got["bfloat16"]["ring"]["device_ms"] == changes[1]["forward"]["bfloat16"][
        "kernels_sum_ms"]


def test_reach_runs_name_the_adopted_setting():
    """The rule keeps the setting the package adopted, and the targets' worst cases are its
    rows (device time over the copy, per dtype)."""
    table = ks.settings_table(ks.REACH_RUNS)
    assert ks.keepers(table) == [f"gla: {ks.change_label(ks.ADOPTED)}"]
    worst = ks.device_ratios(table, ks.ADOPTED)
    assert set(worst) == {"bfloat16", "float32"}
    for dtype, row in worst.items():
        assert row["device_ratio"] == max(r["device_ratio"] for r in table.rows
                                          if r["change"] == ks.ADOPTED and r["dtype"] == dtype)


def test_the_reach_is_history():
    """The adopted reach belonged to the gla one-launch forward, which the library has since
    deleted. The forward is three launches now, none of them a chain."""
    import hymo_mini.ops.gla.chunk_triton as gtc

    assert not hasattr(gtc, "REACH") and not hasattr(gtc, "CONFIGS")
    assert {"chunk_writes", "state_scan", "chunk_output"} <= set(gtc.LAUNCH)
    assert ks.ADOPTED["reach"] == 4


def test_blocks_of_32_are_not_kept():
    """Blocks of 32 steps: no setting of the run is kept (each slows the forward + backward
    or, in fp32, the forward)."""
    table = ks.settings_table(ks.BLOCK_RUNS)
    assert ks.keepers(table) == []
    assert len(table.rows) == 2 * 6 * 2  # two shapes, six settings, two dtypes


def test_bf16_products_are_kept():
    """bf16 products in the 16-bit gla forward: faster at both shapes, forward + backward no
    slower, so chapter 21's rule keeps them (the package's default on a GPU since), and the
    forward then meets the 3x device-time target; the outputs agree with TF32's to bf16's
    grade."""
    import torch

    from hymo_mini.ops.utils.precision import products

    table = ks.settings_table(ks.HALF_RUNS)
    assert ks.change_label({"half_products": "bf16"}) == "bf16 products"
    assert ks.keepers(table) == ["gla: bf16 products"]
    assert products(torch.bfloat16, forward=True) == "bf16"
    worst = ks.device_ratios(table, {"half_products": "bf16"})["bfloat16"]
    assert worst["device_ratio"] <= 3.0
    for name in ks.HALF_RUNS["gla"]:
        changes = load_result(name)["gla_forward_changes"]["changes"]
        assert changes[1]["forward"]["bfloat16"]["rel_vs_first"] < 2 ** -7


def test_delta_bf16_products_are_kept_and_the_walk_read_ahead_is_not():
    """bf16 products in the delta rule's 16-bit forward (in use in the runs: {}), against TF32
    products: TF32 is slower at every shape and repeat, so no tried setting would replace
    the one in use; the fp32 walk reading ahead and the one launch at more warps were slower
    too. Each change's rows only where it applies: the products at bf16, the walk at fp32
    (whose forward is the passes)."""
    import torch

    from hymo_mini.ops.utils.precision import products

    table = ks.settings_table(ks.DELTA_HALF_RUNS)
    assert products(torch.bfloat16, forward=True) == "bf16" and ks.keepers(table) == []
    tf32 = ks.comparisons(table)[("delta", "tf32 products")]
    assert len(tf32) == 3 and not any(c["faster"] or c["no_slower_fwdbwd"] for c in tf32)
    assert {r["dtype"] for r in table.rows if "half_products" in r["change"]} == {"bfloat16"}
    assert {r["dtype"] for r in table.rows if "state_fwd" in r["change"]} == {"float32"}
    for name in ks.DELTA_HALF_RUNS["delta"]:
        changes = load_result(name)["delta_forward_changes"]["changes"]
        assert changes[0]["change"] == {"half_products": "tf32"} and changes[1]["change"] == {}
        assert changes[1]["forward"]["bfloat16"]["rel_vs_first"] < 2 ** -7

