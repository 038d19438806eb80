"""hymo_book.kernels.settings (book chapter 21): the settings tried with the pairs "auto",
read back as the runs wrote them, named in words, and each against the one in use."""

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


def test_comparisons_pair_each_case_with_the_one_in_use():
    def row(change, shape, device_ms, fwdbwd_ms):
        return {"rule": "gla", "shape": shape, "dtype": "bfloat16", "change": change,
                "label": ks.change_label(change), "device_ms": device_ms,
                "fwdbwd_ms": fwdbwd_ms}

    rows = [row({}, "a", 1.0, 2.0), row({}, "b", 1.0, 2.0),
            row({"chunk": 64}, "a", 0.9, 2.0), row({"chunk": 64}, "b", 0.9, 1.9),
            row({"chunk": 256}, "a", 0.8, 2.0), row({"chunk": 256}, "b", 1.1, 1.0),
            row({"handoff": "flags"}, "a", 0.8, 2.1), row({"handoff": "flags"}, "b", 0.8, 1.0)]
    table = CaptionedTable("", "", rows)
    compared = ks.comparisons(table)
    chunk_64 = compared[("gla", "chunks of 64 steps")]
    assert all(c["faster"] and c["no_slower_fwdbwd"] for c in chunk_64)
    cases = compared[("gla", "chunks of 256 steps")]
    assert [c["faster"] for c in cases] == [True, False]


def test_handoffs_read_both_ways_per_dtype():
    got = ks.handoffs()
    report = load_result(ks.HANDOFF_RUN)
    changes = report["gla_forward_changes"]["changes"]
    assert set(got) == set(changes[0]["forward"]) and all(set(v) == {"flags", "ring"}
                                                          for v in got.values())
    assert got["bfloat16"]["ring"]["device_ms"] == changes[1]["forward"]["bfloat16"][
        "kernels_sum_ms"]


def test_the_reach_is_history():
    """The reach belonged to the gla one-launch forward, which the library has since
    deleted. The forward is three launches now, none of them a chain."""
    import hymo_mini.ops.gla.chunk_triton as gtc

    assert not hasattr(gtc, "REACH") and not hasattr(gtc, "CONFIGS")
    assert {"chunk_writes", "state_scan", "chunk_output"} <= set(gtc.LAUNCH)


def test_the_blocks_of_32_run_reads_every_setting():
    table = ks.settings_table(ks.BLOCK_RUNS)
    assert len(table.rows) == 2 * 6 * 2  # two shapes, six settings, two dtypes


def test_bf16_products_are_faster():
    """bf16 products in the 16-bit gla forward: faster at both shapes, forward + backward no
    slower (the package's default on a GPU since), and the forward then meets the 3x
    device-time target; the outputs agree with TF32's to bf16's grade."""
    import torch

    from hymo_mini.ops.utils.precision import products

    table = ks.settings_table(ks.HALF_RUNS)
    assert ks.change_label({"half_products": "bf16"}) == "bf16 products"
    assert all(c["faster"] and c["no_slower_fwdbwd"]
               for c in ks.comparisons(table)[("gla", "bf16 products")])
    assert products(torch.bfloat16, forward=True) == "bf16"
    assert max(r["device_ratio"] for r in table.rows
               if r["change"] == {"half_products": "bf16"} and r["dtype"] == "bfloat16") <= 3.0
    for name in ks.HALF_RUNS["gla"]:
        changes = load_result(name)["gla_forward_changes"]["changes"]
        assert changes[1]["forward"]["bfloat16"]["rel_vs_first"] < 2 ** -7


def test_delta_bf16_products_stay_and_the_walk_read_ahead_is_slower():
    """bf16 products in the delta rule's 16-bit forward (in use in the runs: {}), against TF32
    products: TF32 is slower at every shape and repeat, so no tried setting would replace
    the one in use; the fp32 walk reading ahead and the one launch at more warps were slower
    too. Each change's rows only where it applies: the products at bf16, the walk at fp32
    (whose forward is the passes)."""
    import torch

    from hymo_mini.ops.utils.precision import products

    table = ks.settings_table(ks.DELTA_HALF_RUNS)
    assert products(torch.bfloat16, forward=True) == "bf16"
    tf32 = ks.comparisons(table)[("delta", "tf32 products")]
    assert len(tf32) == 3 and not any(c["faster"] or c["no_slower_fwdbwd"] for c in tf32)
    assert {r["dtype"] for r in table.rows if "half_products" in r["change"]} == {"bfloat16"}
    assert {r["dtype"] for r in table.rows if "state_fwd" in r["change"]} == {"float32"}
    for name in ks.DELTA_HALF_RUNS["delta"]:
        changes = load_result(name)["delta_forward_changes"]["changes"]
        assert changes[0]["change"] == {"half_products": "tf32"} and changes[1]["change"] == {}
        assert changes[1]["forward"]["bfloat16"]["rel_vs_first"] < 2 ** -7

