"""hymo_book.kernel_settings (book chapter 21): the settings tried with the pairs "auto",
read back as the runs wrote them, named in words, and the rule that keeps one."""

import pytest
from hymo_book import kernel_settings as ks
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
    table = ks.settings_table()
    for rule, names in ks.SETTINGS_RUNS.items():
        for name in names:
            report = load_result(name)
            changes = report[f"{rule}_forward_changes"]["changes"]
            rows = [r for r in table.rows if r["rule"] == rule and r["shape"] == report["shape"]]
            # the delta rule's fp32 runs in passes: its one-launch settings are left out there
            assert len(rows) == (2 * len(changes) if rule == "gla" else len(changes) + 1)
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
